//! The Open MPI backend (feature `mpi`): `MPI_Init_thread` on the communication thread, the
//! world communicator's collectives, `MPI_Abort` for the whole job.
//!
//! Each collective is started non-blocking and then polled with a growing pause between
//! tests ([`poll`]): Open MPI's blocking calls spin at full speed while they wait for the
//! other ranks, and during backward that spinning thread takes a core away from the pass
//! that the allreduce is meant to overlap.

use std::time::{Duration, Instant};

use mpi::request::{Request, Scope};

use mpi::collective::SystemOperation;
use mpi::environment::{Threading, Universe};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::{CommunicatorCollectives, Root};

/// The first pause between two tests of a pending collective, and the longest: short pauses
/// keep a quick collective quick; the longest bounds the latency a slow one adds.
const FIRST_PAUSE: Duration = Duration::from_micros(20);
const LONGEST_PAUSE: Duration = Duration::from_micros(500);
/// How long a collective is polled without pausing before the pauses start.
const SPIN: Duration = Duration::from_micros(50);

/// Waits for `request` by testing it (each test also progresses MPI's transfers), spinning
/// for [`SPIN`], then sleeping between tests, the pause doubling up to [`LONGEST_PAUSE`].
fn poll<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>) {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match request.test() {
            Ok(_) => return,
            Err(r) => request = r,
        }
        if start.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }
}

use crate::comm::{Backend, Comm, Op, Reply};
use crate::error::{DistError, Result};

struct Mpi {
    // Dropped last: finalizes MPI.
    _universe: Universe,
    world: SimpleCommunicator,
}

impl Backend for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn run(&mut self, op: Op) -> Reply {
        match op {
            Op::SumF32(send) => {
                let mut recv = vec![0.0f32; send.len()];
                mpi::request::scope(|s| {
                    poll(self.world.immediate_all_reduce_into(s, &send[..], &mut recv[..], SystemOperation::sum()))
                });
                Reply::F32(recv)
            }
            Op::SumF64(send) => {
                let mut recv = vec![0.0f64; send.len()];
                mpi::request::scope(|s| {
                    poll(self.world.immediate_all_reduce_into(s, &send[..], &mut recv[..], SystemOperation::sum()))
                });
                Reply::F64(recv)
            }
            Op::Broadcast(mut data, root) => {
                let root = self.world.process_at_rank(root as i32);
                mpi::request::scope(|s| poll(root.immediate_broadcast_into(s, &mut data[..])));
                Reply::F32(data)
            }
        }
    }
}

/// `MPI_Abort` on the world communicator: every rank of the job ends.
fn abort(code: i32, _message: &str) -> ! {
    SimpleCommunicator::world().abort(code)
}

/// True when this process was started by `mpirun`/`mpiexec` (Open MPI sets
/// `OMPI_COMM_WORLD_SIZE`; PMI-based launchers `PMI_SIZE`).
pub fn launched_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some())
}

impl Comm {
    /// The MPI world (Open MPI), on a communication thread that initializes MPI with
    /// `MPI_THREAD_MULTIPLE` (so that `MPI_Abort` may come from any thread). A panic on any
    /// thread of this process then aborts the whole job after printing its message.
    ///
    /// # Errors
    /// `Init` when MPI cannot be initialized (or was already).
    pub fn mpi(timeout: Duration) -> Result<Comm> {
        let comm = Comm::spawn(
            || {
                let (universe, provided) = mpi::initialize_with_threading(Threading::Multiple)
                    .ok_or_else(|| DistError::Init("MPI is already initialized".into()))?;
                if provided < Threading::Serialized {
                    return Err(DistError::Init(format!("MPI provides only {provided:?} threading")));
                }
                let world = universe.world();
                Ok(Mpi { _universe: universe, world })
            },
            timeout,
            abort,
        )?;
        let (rank, size) = (comm.rank(), comm.size());
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            eprintln!("error: rank {rank} of {size} panicked; aborting the job on every rank");
            abort(70, "panic");
        }));
        Ok(comm)
    }
}
