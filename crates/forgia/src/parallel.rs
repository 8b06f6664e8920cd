//! The library's one bounded rayon pool, shared by kernels and the backward engine, built from
//! the settings of [`crate::runtime`], and the size thresholds below which work stays on the
//! calling thread.

use std::sync::OnceLock;

mod awake;

pub(crate) use awake::{set_spin_us, spin_us, DEFAULT_SPIN_US};

use crate::error::Result;
use crate::runtime::{self, PoolSettings, RuntimeConfig};

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
/// What the pool was built with (`threads` is always the actual count), set once with it.
static BUILT: OnceLock<PoolSettings> = OnceLock::new();

/// Sets the number of worker threads of the library's pool: shorthand for
/// [`runtime::configure`] with only `threads` changed. Call it before the first tensor
/// operation; the pool is built once.
///
/// # Errors
/// `InvalidArgument` for zero threads, or when the pool was already built with another count.
pub fn set_num_threads(threads: usize) -> Result<()> {
    runtime::configure(RuntimeConfig { threads: Some(threads), ..runtime::config() })
}

/// The number of worker threads of the library's pool (building it if it is not yet built).
pub fn num_threads() -> usize {
    pool().current_num_threads()
}

/// The settings the pool was built with, once it is built.
pub(crate) fn built_settings() -> Option<PoolSettings> {
    BUILT.get().copied()
}

/// Whether the pools' threads flush subnormals (the main pool built first: its setting).
fn pool_flushes() -> bool {
    pool();
    flushing()
}

/// True when subnormal flushing is on (see [`RuntimeConfig::flush_denormals`]).
fn flushing() -> bool {
    built_settings().map_or_else(|| runtime::pool_settings().flush_denormals, |s| s.flush_denormals)
}

/// The library's pool, built on first use from [`runtime::config`].
///
/// With `adopt_main_thread` on, when the program's main thread builds it (the usual case: its
/// first tensor operation) and there are at least two threads, the main thread becomes the
/// pool's thread 0 and only the others are spawned. Kernels called from the main thread then
/// split their work in place, with the other threads stealing halves, instead of handing the
/// whole job to the pool and sleeping until it is done. Other threads (test threads, a user's
/// own workers) hand their jobs to the pool as before.
pub(crate) fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        let wanted = runtime::pool_settings();
        let threads = wanted.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        // With one thread, adopting the caller would leave no thread to serve other callers.
        let adopt = wanted.adopt_main_thread && threads > 1 && std::thread::current().name() == Some("main");
        let flush = wanted.flush_denormals;
        let mut builder = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("forgia-{i}"))
            .start_handler(move |_| {
                if flush {
                    flush_denormals_on_this_thread();
                }
            });
        if adopt {
            builder = builder.use_current_thread();
        }
        let pool = builder.build().expect("building the forgia thread pool");
        let _ = BUILT.set(PoolSettings { threads: Some(threads), adopt_main_thread: adopt, ..wanted });
        pool
    })
}

/// A one-thread pool beside the main one: a serial backward pass runs on it, and so do the
/// kernels it calls, whose parallel loops then run on that one thread.
static SERIAL_POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();

fn serial_pool() -> &'static rayon::ThreadPool {
    SERIAL_POOL.get_or_init(|| {
        let flush = pool_flushes();
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "forgia-serial".to_string())
            .start_handler(move |_| {
                if flush {
                    flush_denormals_on_this_thread();
                }
            })
            .build()
            .expect("building the forgia serial thread")
    })
}

/// True on the serial pool's thread.
fn in_serial() -> bool {
    SERIAL_POOL.get().is_some_and(|p| p.current_thread_index().is_some())
}

/// Runs `f` with everything it computes on one thread: the engine's serial option.
pub(crate) fn serially<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if in_serial() {
        f()
    } else {
        serial_pool().install(f)
    }
}

thread_local! {
    /// Set while a kernel's own parallel loop runs one of its pieces on this thread (see
    /// [`with_kernels_on_this_thread`]).
    static KERNELS_ON_THIS_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the kernels it calls kept on this thread (`keep`) or free to split over the
/// pool (`!keep`, the default), restoring the previous setting afterwards. A kernel that hands
/// its pieces to the pool's threads itself (a convolution's samples, attention's chunks) keeps
/// the products inside each piece on that thread; the backward engine runs every record with
/// its kernels free, whatever the thread was doing when it took the record's drain.
pub(crate) fn with_kernels_on_this_thread<R>(keep: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            KERNELS_ON_THIS_THREAD.with(|k| k.set(self.0));
        }
    }
    let _restore = Restore(KERNELS_ON_THIS_THREAD.with(|k| k.replace(keep)));
    f()
}

/// How many threads a kernel called from this thread may split its work over: 1 inside
/// [`serially`] or [`with_kernels_on_this_thread`], else the pool's size.
pub(crate) fn kernel_threads() -> usize {
    if in_serial() || KERNELS_ON_THIS_THREAD.with(std::cell::Cell::get) {
        1
    } else {
        num_threads()
    }
}

/// Runs `f` on the pool: in place on one of its threads (the adopted main thread flushing
/// subnormals for the duration, as the spawned threads always do), else handed to the pool.
/// Inside [`serially`] it runs in place, on the serial thread. The pool's other threads are
/// kept spinning for the parts of `f` they may take (see `awake`).
pub(crate) fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if in_serial() {
        return f();
    }
    let pool = pool();
    let adopted = built_settings().is_some_and(|s| s.adopt_main_thread);
    if pool.current_num_threads() > 1 {
        awake::KEEPERS.touch(pool, adopted);
    }
    match pool.current_thread_index() {
        Some(0) if adopted => {
            let _flush = FlushDenormals::new();
            f()
        }
        Some(_) => f(),
        None => pool.install(f),
    }
}

/// Subnormal floats take a slow microcode path on x86 (over 100× slower per operation), and a
/// GEMM over a gradient holding a few of them ran 30× slower in W7. With
/// [`RuntimeConfig::flush_denormals`] on, the pool's threads therefore flush subnormal results
/// and inputs to zero (MXCSR FTZ and DAZ); values below 1.2e-38 become 0, which no f32
/// training computation can tell apart.
fn flush_denormals_on_this_thread() {
    #[cfg(target_arch = "x86_64")]
    {
        let csr = read_mxcsr();
        write_mxcsr(csr | MXCSR_FTZ_DAZ);
    }
}

#[cfg(target_arch = "x86_64")]
const MXCSR_FTZ_DAZ: u32 = 0x8040;

#[cfg(target_arch = "x86_64")]
fn read_mxcsr() -> u32 {
    let mut csr = 0u32;
    // SAFETY: `stmxcsr` stores the 32-bit MXCSR register into the pointed-to, writable u32.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
    csr
}

#[cfg(target_arch = "x86_64")]
fn write_mxcsr(csr: u32) {
    // SAFETY: `ldmxcsr` loads MXCSR from the pointed-to u32; the values written are the
    // thread's own register with only the FTZ/DAZ bits changed, which affect rounding of
    // subnormals only (no exception is unmasked).
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags)) };
}

/// Flushes subnormals on the calling thread for as long as it lives (when flushing is on),
/// restoring the caller's MXCSR on drop: heavy kernels that run on the caller's thread (a
/// single-threaded GEMM) use it.
pub(crate) struct FlushDenormals {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl FlushDenormals {
    /// Sets FTZ and DAZ on this thread.
    pub(crate) fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            if flushing() {
                write_mxcsr(saved | MXCSR_FTZ_DAZ);
            }
            FlushDenormals { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        FlushDenormals {}
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        write_mxcsr(self.saved);
    }
}

#[cfg(test)]
mod tests {
    use std::hint::black_box;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn pool_threads_flush_subnormals_and_callers_get_theirs_back() {
        let product = || black_box(1e-30f32) * black_box(1e-10f32);
        assert!(super::install(product) == 0.0 || super::pool().current_thread_index().is_some());
        assert!(super::pool().install(product) == 0.0, "a pool thread flushes subnormal results");
        {
            let _flush = super::FlushDenormals::new();
            assert_eq!(product(), 0.0);
        }
        assert!(product() > 0.0, "the caller's own mode is restored");
    }
}
