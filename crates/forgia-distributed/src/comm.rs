//! [`Comm`]: the process group. Every collective runs on one communication thread that owns
//! the MPI library (it initializes MPI, issues every call in the order they were requested,
//! and finalizes at the end), so collectives requested from backward hooks on pool threads
//! start while the pass goes on, and every wait has a watchdog: a collective that does not
//! finish within the timeout is an error, never a hang. Without MPI (the default build, or a
//! job started without `mpirun`) the group is this one process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{DistError, Result};

/// How long a collective may take before the job is declared hung, unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// What the communication thread does for one request.
pub(crate) enum Op {
    /// Sum `data` over all ranks.
    SumF32(Vec<f32>),
    /// Sum `data` over all ranks, in double precision (statistics).
    SumF64(Vec<f64>),
    /// Replace `data` with rank `root`'s.
    Broadcast(Vec<f32>, usize),
}

/// The result of an [`Op`]: the buffer it was handed, reduced or broadcast.
pub(crate) enum Reply {
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// The group broke up (an in-process rank went away) before the collective completed.
    Failed,
}

/// A request to the communication thread.
struct Request {
    id: u64,
    op: Op,
    reply: Sender<Reply>,
}

/// One MPI implementation of the collectives, owned by the communication thread.
pub(crate) trait Backend {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// Runs one collective (blocking). While `waiting` is above zero some thread of this
    /// process is blocked on a collective's result (this one or a later one): a backend that
    /// paces its polling to leave the cores to the backward pass should then poll at full
    /// speed, as nothing else is left to overlap.
    fn run(&mut self, op: Op, waiting: &AtomicUsize) -> Reply;
}

/// When a collective started on the communication thread, for tests and tracing.
#[derive(Clone, Copy, Debug)]
pub struct Started {
    /// The collective's sequence number in this process (0, 1, ...).
    pub id: u64,
    /// When the communication thread began it.
    pub at: Instant,
}

/// The process group: this process's rank among `size`, and the collectives.
pub struct Comm {
    rank: usize,
    size: usize,
    timeout: Duration,
    inner: Inner,
}

enum Inner {
    /// One process: every collective is the identity.
    Local,
    /// A communication thread running a backend.
    Thread {
        requests: Mutex<Option<Sender<Request>>>,
        next: Mutex<u64>,
        started: Arc<Mutex<Vec<Started>>>,
        /// How many threads are blocked in [`Pending::wait`] (see [`Backend::run`]).
        waiting: Arc<AtomicUsize>,
        thread: Option<JoinHandle<()>>,
        abort: fn(i32, &str) -> !,
    },
}

/// A collective in flight: [`Pending::wait`] for its result.
pub(crate) struct Pending {
    what: &'static str,
    reply: Option<Receiver<Reply>>,
    local: Option<Reply>,
    timeout: Duration,
    /// The group's count of blocked waiters (absent for the one-process group).
    waiting: Option<Arc<AtomicUsize>>,
}

/// Counts a thread as waiting for as long as it lives.
struct Waiter<'a>(Option<&'a AtomicUsize>);

impl<'a> Waiter<'a> {
    fn new(count: Option<&'a AtomicUsize>) -> Self {
        if let Some(c) = count {
            c.fetch_add(1, Ordering::AcqRel);
        }
        Waiter(count)
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.0 {
            c.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Pending {
    /// Waits for the result, at most the group's timeout.
    ///
    /// # Errors
    /// `Timeout` when it does not arrive in time (another rank died or hangs); `Disconnected`
    /// when the communication thread is gone.
    pub(crate) fn wait(self) -> Result<Reply> {
        if let Some(r) = self.local {
            return Ok(r);
        }
        let rx = self.reply.expect("a pending collective has a reply channel or a local result");
        let _waiter = Waiter::new(self.waiting.as_deref());
        match rx.recv_timeout(self.timeout) {
            Ok(Reply::Failed) => Err(DistError::Disconnected { what: self.what }),
            Ok(r) => Ok(r),
            Err(RecvTimeoutError::Timeout) => {
                Err(DistError::Timeout { what: self.what, seconds: self.timeout.as_secs_f64() })
            }
            Err(RecvTimeoutError::Disconnected) => Err(DistError::Disconnected { what: self.what }),
        }
    }
}

impl Comm {
    /// The one-process group (rank 0 of 1): collectives return their input.
    pub fn local() -> Comm {
        Comm { rank: 0, size: 1, timeout: DEFAULT_TIMEOUT, inner: Inner::Local }
    }

    /// A group run by `make`'s backend on a fresh communication thread (the backend is
    /// created on that thread, so MPI is initialized there and only ever called from it).
    pub(crate) fn spawn<B, F>(make: F, timeout: Duration, abort: fn(i32, &str) -> !) -> Result<Comm>
    where
        B: Backend + 'static,
        F: FnOnce() -> std::result::Result<B, DistError> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel::<std::result::Result<(usize, usize), DistError>>();
        let started = Arc::new(Mutex::new(Vec::new()));
        let log = started.clone();
        let waiting = Arc::new(AtomicUsize::new(0));
        let waiters = waiting.clone();
        let thread = std::thread::Builder::new()
            .name("forgia-comm".into())
            .spawn(move || {
                let mut backend = match make() {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((backend.rank(), backend.size())));
                // Requests run in the order they were made: every rank makes the same
                // collectives in the same order, which is what MPI requires.
                for req in rx {
                    log.lock().unwrap_or_else(|p| p.into_inner()).push(Started { id: req.id, at: Instant::now() });
                    let reply = backend.run(req.op, &waiters);
                    let _ = req.reply.send(reply);
                }
                // The backend (MPI) is finalized here, on the thread that initialized it.
            })
            .map_err(|e| DistError::Init(format!("cannot start the communication thread: {e}")))?;
        let (rank, size) = match ready_rx.recv() {
            Ok(Ok(rs)) => rs,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(DistError::Init("the communication thread stopped while starting".into())),
        };
        Ok(Comm {
            rank,
            size,
            timeout,
            inner: Inner::Thread {
                requests: Mutex::new(Some(tx)),
                next: Mutex::new(0),
                started,
                waiting,
                thread: Some(thread),
                abort,
            },
        })
    }

    /// This process's rank (0-based).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes in the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// True on rank 0, the one that prints, logs and saves.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// How long a collective may take before it is reported as a hang.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Sets the collective timeout.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// When each collective of this process started on the communication thread, in order
    /// (empty for the one-process group).
    pub fn started(&self) -> Vec<Started> {
        match &self.inner {
            Inner::Local => Vec::new(),
            Inner::Thread { started, .. } => started.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Hands a collective to the communication thread without waiting for it; returns its
    /// sequence number and the pending result.
    pub(crate) fn start(&self, what: &'static str, op: Op) -> Result<(u64, Pending)> {
        let timeout = self.timeout;
        match &self.inner {
            Inner::Local => {
                let reply = match op {
                    Op::SumF32(d) | Op::Broadcast(d, _) => Reply::F32(d),
                    Op::SumF64(d) => Reply::F64(d),
                };
                Ok((0, Pending { what, reply: None, local: Some(reply), timeout, waiting: None }))
            }
            Inner::Thread { requests, next, waiting, .. } => {
                let (reply_tx, reply_rx) = mpsc::channel();
                // One lock over numbering and sending, so ids follow the sending order.
                let mut id = next.lock().unwrap_or_else(|p| p.into_inner());
                let requests = requests.lock().unwrap_or_else(|p| p.into_inner());
                let tx = requests.as_ref().ok_or(DistError::Disconnected { what })?;
                tx.send(Request { id: *id, op, reply: reply_tx }).map_err(|_| DistError::Disconnected { what })?;
                let this = *id;
                *id += 1;
                let waiting = Some(waiting.clone());
                Ok((this, Pending { what, reply: Some(reply_rx), local: None, timeout, waiting }))
            }
        }
    }

    /// Sums `data` over all ranks in place (blocking, with the watchdog).
    ///
    /// # Errors
    /// `Timeout` or `Disconnected`, see [`Comm::timeout`].
    pub fn all_reduce_sum(&self, data: &mut [f32]) -> Result<()> {
        let (_, p) = self.start("allreduce", Op::SumF32(data.to_vec()))?;
        match p.wait()? {
            Reply::F32(d) => data.copy_from_slice(&d),
            _ => unreachable!("an f32 sum replies in f32"),
        }
        Ok(())
    }

    /// Sums `data` over all ranks in place, in double precision (loss sums, counts).
    ///
    /// # Errors
    /// As [`Comm::all_reduce_sum`].
    pub fn all_reduce_sum_f64(&self, data: &mut [f64]) -> Result<()> {
        let (_, p) = self.start("allreduce", Op::SumF64(data.to_vec()))?;
        match p.wait()? {
            Reply::F64(d) => data.copy_from_slice(&d),
            _ => unreachable!("an f64 sum replies in f64"),
        }
        Ok(())
    }

    /// Replaces `data` on every rank with rank `root`'s (blocking, with the watchdog).
    ///
    /// # Errors
    /// As [`Comm::all_reduce_sum`]; `InvalidArgument` for a root outside the group.
    pub fn broadcast(&self, data: &mut [f32], root: usize) -> Result<()> {
        if root >= self.size {
            return Err(DistError::InvalidArgument(format!("broadcast root {root} of a group of {}", self.size)));
        }
        let (_, p) = self.start("broadcast", Op::Broadcast(data.to_vec(), root))?;
        match p.wait()? {
            Reply::F32(d) => data.copy_from_slice(&d),
            _ => unreachable!("a broadcast replies in f32"),
        }
        Ok(())
    }

    /// Ends the whole job now, on every rank: prints `message` with this rank's number and
    /// calls `MPI_Abort` (in the one-process group: exits with status `code`).
    pub fn abort(&self, code: i32, message: &str) -> ! {
        match &self.inner {
            Inner::Local => {
                eprintln!("error: {message}");
                std::process::exit(code)
            }
            Inner::Thread { abort, .. } => {
                eprintln!("error: rank {} of {}: {message}; aborting the job on every rank", self.rank, self.size);
                abort(code, message)
            }
        }
    }
}

impl Drop for Comm {
    /// Closes the request channel and joins the communication thread, which finalizes MPI
    /// after the collectives already requested.
    fn drop(&mut self) {
        if let Inner::Thread { requests, thread, .. } = &mut self.inner {
            requests.get_mut().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}
