//! Data-parallel training for forgia, in the style of PyTorch's `DistributedDataParallel`,
//! on MPI (Open MPI through the `mpi` crate, feature `mpi`):
//!
//! - [`Comm`]: the process group. One communication thread owns MPI and runs every
//!   collective in request order; every wait has a watchdog ([`Comm::timeout`]), and
//!   [`Comm::abort`] ends the job on every rank (`MPI_Abort`).
//! - [`DistributedDataParallel`]: broadcasts the parameters from rank 0, then averages the
//!   gradients of every backward pass in buckets launched from the engine's
//!   post-accumulate-grad hooks while the pass still runs; `no_sync` for accumulation.
//! - [`DistributedSampler`]: each rank's shard of every global batch.
//!
//! Without the `mpi` feature (or outside `mpirun`) the group is this one process
//! ([`Comm::local`]) and training is plain single-process training.

mod comm;
mod ddp;
mod error;
mod group;
#[cfg(feature = "mpi")]
mod mpi_backend;
mod sampler;

pub use comm::{Comm, Started, DEFAULT_TIMEOUT};
pub use ddp::{
    DdpOptions, DistributedDataParallel, Launch, NoSync, DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_CAP_BYTES,
};
pub use error::{DistError, Result};
#[cfg(feature = "mpi")]
pub use mpi_backend::launched_by_mpirun;
pub use sampler::{global_batches, DistributedSampler};

/// The process group this program was started in: the MPI world under `mpirun` (feature
/// `mpi`), else this one process.
///
/// # Errors
/// `Init` when started by `mpirun` but MPI cannot be initialized, or when the crate was built
/// without the `mpi` feature and the environment says `mpirun` started it.
pub fn init(timeout: std::time::Duration) -> Result<Comm> {
    #[cfg(feature = "mpi")]
    {
        if launched_by_mpirun() {
            return Comm::mpi(timeout);
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() {
            return Err(DistError::Init("this program was built without MPI support (feature `mpi`)".into()));
        }
    }
    let mut comm = Comm::local();
    comm.set_timeout(timeout);
    Ok(comm)
}
