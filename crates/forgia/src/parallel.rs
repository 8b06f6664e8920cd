//! The library's one bounded rayon pool, shared by kernels and the backward engine, and the
//! size thresholds below which work stays on the calling thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::error::{fail, ErrorKind, Result};

/// Elementwise kernels split their work across the pool only above this many elements
/// (measured: below it the hand-off costs more than it saves; see docs/BENCHMARKS.md).
/// `benches/pointwise.rs` `add_threshold`, 2-core machine: `add` in parallel vs serial took
/// 101 vs 28 µs at 64K, 174 vs 72 µs at 128K, 214 vs 283 µs at 256K elements.
pub(crate) const PARALLEL_ELEMENTS: usize = 1 << 18;
/// Elements per parallel chunk of an elementwise kernel.
pub(crate) const CHUNK_ELEMENTS: usize = 1 << 14;
/// GEMMs below this many multiply-adds run single-threaded.
pub(crate) const PARALLEL_GEMM_WORK: usize = 1 << 16;

static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
// Relaxed: read once when the pool is built; no other data hangs off it.
static REQUESTED_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the number of worker threads of the library's pool. Call it before the first tensor
/// operation; the pool is built once.
///
/// # Errors
/// `InvalidArgument` for zero threads, or when the pool already runs with another count.
pub fn set_num_threads(threads: usize) -> Result<()> {
    if threads == 0 {
        return fail(ErrorKind::InvalidArgument {
            op: "set_num_threads",
            arg: "threads",
            reason: "must be at least 1".into(),
        });
    }
    REQUESTED_THREADS.store(threads, Ordering::Relaxed);
    let built = pool().current_num_threads();
    if built != threads {
        return fail(ErrorKind::InvalidArgument {
            op: "set_num_threads",
            arg: "threads",
            reason: format!("the pool already runs {built} threads"),
        });
    }
    Ok(())
}

/// The number of worker threads of the library's pool.
pub fn num_threads() -> usize {
    pool().current_num_threads()
}

/// The library's pool, built on first use with the requested or the available thread count.
pub(crate) fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        let requested = REQUESTED_THREADS.load(Ordering::Relaxed);
        let threads =
            if requested > 0 { requested } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("forgia-{i}"))
            .build()
            .expect("building the forgia thread pool")
    })
}

/// Runs `f` on the pool (inline when already on one of its threads).
pub(crate) fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = pool();
    if pool.current_thread_index().is_some() {
        f()
    } else {
        pool.install(f)
    }
}
