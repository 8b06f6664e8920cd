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
//! made W10's exposed last bucket take 15–22 ms. A wait that lasts longer than
//! [`WAIT_SPIN`] is one for a rank that is still computing, not for the transfer: the
//! pauses resume then, so that a rank waiting for a slower one (or for rank 0's
//! single-process block in W10) leaves its core to the others instead of spinning on it.
//!
//! Non-blocking allreduces run on the ring algorithm (reduce-scatter, then allgather) unless
//! the user chose one (`--mca coll_libnbc_iallreduce_algorithm N`): Open MPI's default for
//! fewer than four ranks is a binomial tree, in which rank 0 receives and reduces the whole
//! buffer before sending it back, and a 2.2 MB allreduce on 2 ranks over shared memory took
//! twice as long that way (see [`prefer_ring_allreduce`]).

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
/// How long a collective is polled without pausing once a thread waits for a result. Far
/// longer than the transfer of a gradient bucket over shared memory (about a millisecond for
/// W6's 2.2 MB), far shorter than a rank's backward pass.
const WAIT_SPIN: Duration = Duration::from_millis(5);
/// After [`WAIT_SPIN`], the pauses grow to at most this share of the time waited so far (and
/// at most [`LONGEST_PAUSE`]): the latency they add once the slower rank arrives stays a small
/// part of the wait (at most 2%, 100 µs after 5 ms), and a long wait wakes rarely.
const WAIT_PAUSE_SHARE: u32 = 50;

/// Waits for `request` by testing it (each test also progresses MPI's transfers): spinning
/// for [`SPIN`], and while `waiting` is above zero for up to [`WAIT_SPIN`]; else sleeping
/// between tests, the pause doubling up to [`LONGEST_PAUSE`] (while a thread waits, up to
/// [`WAIT_PAUSE_SHARE`]'s share of the wait).
fn poll<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>, waiting: &AtomicUsize) {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    // When a thread began to wait during this collective (the start, if one already did).
    let mut waited_since: Option<Instant> = None;
    loop {
        match request.test() {
            Ok(_) => return,
            Err(r) => request = r,
        }
        let waited = if waiting.load(Ordering::Acquire) > 0 {
            Some(*waited_since.get_or_insert_with(Instant::now))
        } else {
            waited_since = None;
            None
        };
        match waited {
            Some(since) if since.elapsed() < WAIT_SPIN => {
                pause = FIRST_PAUSE;
                std::hint::spin_loop();
            }
            Some(since) => {
                std::thread::sleep(pause);
                let cap = (since.elapsed() / WAIT_PAUSE_SHARE).clamp(FIRST_PAUSE, LONGEST_PAUSE);
                pause = (pause * 2).min(cap);
            }
            None if start.elapsed() < SPIN => std::hint::spin_loop(),
            None => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
        }
    }
}

/// The Open MPI control variable that picks the non-blocking allreduce's algorithm, and
/// the value for the ring.
const IALLREDUCE_ALGORITHM: &std::ffi::CStr = c"coll_libnbc_iallreduce_algorithm";
const RING: std::ffi::c_int = 1;

/// Selects the ring algorithm for non-blocking allreduces through MPI's tool interface
/// (`MPI_T_cvar_write`), unless the user set the algorithm (`--mca`, which reaches the ranks
/// as `OMPI_MCA_*` variables). Returns whether it did; an MPI without that variable (another
/// implementation, another version) keeps its own choice.
///
/// Why: for fewer than four ranks Open MPI 4.1 runs a binomial tree (rank 1 sends its whole
/// buffer to rank 0, which reduces it and sends the result back), one rank idle at each
/// stage; the ring has each rank reduce and send half the buffer at once. A 2.2 MB allreduce
/// on 2 ranks over shared memory (`--mca btl self,vader`, 100 repetitions alternated, a busy
/// 2-core machine) took 1.0–1.2 ms at best and 8–10 ms at the median on the tree, 0.45–0.7 ms
/// and 0.8–1.2 ms on the ring. Sums stay exact in the same way: each element is still added
/// once per rank.
fn prefer_ring_allreduce() -> bool {
    if std::env::var_os("OMPI_MCA_coll_libnbc_iallreduce_algorithm").is_some() {
        return false;
    }
    use mpi::ffi;
    let ok = |code: std::ffi::c_int| code == ffi::MPI_SUCCESS as std::ffi::c_int;
    let mut provided = 0;
    // SAFETY: MPI is initialized (this runs after `MPI_Init_thread` on the thread that did
    // it); every pointer handed over is to a live local of the type the call writes; the
    // handle is allocated for a variable bound to no object (null), read and written with one
    // `c_int` (its count checked to be 1) and freed before `MPI_T_finalize`, which balances
    // this `MPI_T_init_thread`.
    unsafe {
        if !ok(ffi::MPI_T_init_thread(ffi::RSMPI_THREAD_MULTIPLE, &mut provided)) {
            return false;
        }
        let mut index = 0;
        let mut done = false;
        if ok(ffi::MPI_T_cvar_get_index(IALLREDUCE_ALGORITHM.as_ptr(), &mut index)) {
            let mut handle: ffi::MPI_T_cvar_handle = std::ptr::null_mut();
            let mut count = 0;
            if ok(ffi::MPI_T_cvar_handle_alloc(index, std::ptr::null_mut(), &mut handle, &mut count)) {
                if count == 1 {
                    let value: std::ffi::c_int = RING;
                    done = ok(ffi::MPI_T_cvar_write(handle, (&value as *const std::ffi::c_int).cast()));
                }
                ffi::MPI_T_cvar_handle_free(&mut handle);
            }
        }
        ffi::MPI_T_finalize();
        done
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
                prefer_ring_allreduce();
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
