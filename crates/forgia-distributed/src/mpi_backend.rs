//! The Open MPI backend (feature `mpi`): `MPI_Init_thread` on the communication thread, the
//! world communicator's collectives, `MPI_Abort` for the whole job.
//!
//! Each collective is started non-blocking and then polled with a growing pause between
//! tests ([`poll`]): Open MPI's blocking calls spin at full speed while they wait for the
//! other ranks, and during backward that spinning thread takes a core away from the pass
//! that the allreduce is meant to overlap. Once a thread of the process waits for a result
//! (`DistributedDataParallel::finish` after the pass), the polling runs without pauses:
//! a non-blocking allreduce moves only when it is tested (Open MPI's shared-memory
//! transport sends a large buffer in fragments, each needing a test), so paced polling there
//! made W10's exposed last bucket take 15–22 ms.

use std::sync::atomic::{AtomicUsize, Ordering};
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
/// for [`SPIN`] or while `waiting` is above zero, else sleeping between tests, the pause
/// doubling up to [`LONGEST_PAUSE`].
fn poll<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>, waiting: &AtomicUsize) {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match request.test() {
            Ok(_) => return,
            Err(r) => request = r,
        }
        if start.elapsed() < SPIN || waiting.load(Ordering::Acquire) > 0 {
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
    world: SimpleCommunicator,
    /// The send buffers of the last f32 collectives, the receive buffers of the next ones
    /// that fit: buffers whose pages are already resident, where a fresh one of a few
    /// megabytes is faulted in (and zeroed by the kernel) page by page. At most [`SPARES`].
    spares: Vec<Vec<f32>>,
    // Dropped last: finalizes MPI.
    _universe: Universe,
}

/// The most send buffers kept for reuse (a step's gradient buckets are a handful).
const SPARES: usize = 8;

impl Mpi {
    /// A receive buffer of `len` floats: the smallest spare one that is large enough.
    fn receive_buffer(&mut self, len: usize) -> Vec<f32> {
        let fit = (0..self.spares.len())
            .filter(|&i| self.spares[i].capacity() >= len)
            .min_by_key(|&i| self.spares[i].capacity());
        let mut recv = fit.map_or_else(Vec::new, |i| self.spares.swap_remove(i));
        recv.clear();
        recv.resize(len, 0.0);
        recv
    }

    /// Keeps a used send buffer for a later receive, dropping the smallest beyond [`SPARES`].
    fn keep(&mut self, send: Vec<f32>) {
        self.spares.push(send);
        if self.spares.len() > SPARES {
            let smallest = (0..self.spares.len()).min_by_key(|&i| self.spares[i].capacity()).unwrap_or(0);
            self.spares.swap_remove(smallest);
        }
    }
}

impl Backend for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn run(&mut self, op: Op, waiting: &AtomicUsize) -> Reply {
        match op {
            Op::SumF32(send) => {
                let mut recv = self.receive_buffer(send.len());
                mpi::request::scope(|s| {
                    poll(
                        self.world.immediate_all_reduce_into(s, &send[..], &mut recv[..], SystemOperation::sum()),
                        waiting,
                    )
                });
                self.keep(send);
                Reply::F32(recv)
            }
            Op::SumF64(send) => {
                let mut recv = vec![0.0f64; send.len()];
                mpi::request::scope(|s| {
                    poll(
                        self.world.immediate_all_reduce_into(s, &send[..], &mut recv[..], SystemOperation::sum()),
                        waiting,
                    )
                });
                Reply::F64(recv)
            }
            Op::Broadcast(mut data, root) => {
                let root = self.world.process_at_rank(root as i32);
                mpi::request::scope(|s| poll(root.immediate_broadcast_into(s, &mut data[..]), waiting));
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
                Ok(Mpi { world, spares: Vec::new(), _universe: universe })
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
