//! The library's process-wide settings in one place: the worker pool's size, whether the
//! pool adopts the program's main thread, flush-to-zero of subnormal floats, how long idle
//! threads spin before they sleep, and the buffer cache's size. Each has a default;
//! [`configure`] sets them, [`config`] reads what is in force.
//!
//! The pool is built once, at the first tensor operation that needs it, from the settings in
//! force then. The settings it is built from (`threads`, `adopt_main_thread`,
//! `flush_denormals`) can change only before that; the buffer cache's limit and the spin
//! window change at any time.
//!
//! The instruction set the kernels run with ([`isa()`]) is the widest the CPU has unless the
//! environment variable `FORGIA_MAX_ISA` names a narrower one (`avx2`, `baseline`); it is
//! fixed at the first kernel that asks.
//!
//! ```
//! use forgia::runtime::{self, RuntimeConfig};
//! let now = runtime::config();
//! // Changing only the cache works at any time; the pool settings must stay as built.
//! runtime::configure(RuntimeConfig { buffer_cache_bytes: 256 << 20, ..now })?;
//! assert_eq!(runtime::config().buffer_cache_bytes, 256 << 20);
//! runtime::configure(now)?;
//! # Ok::<(), forgia::Error>(())
//! ```

use parking_lot::Mutex;

use crate::error::{fail, ErrorKind, Result};
use crate::parallel;
use crate::tensor::{buffer_cache_limit, set_buffer_cache_limit};

mod isa;
pub use isa::{detected_isa, isa, isa_cap_from_env, Isa, MAX_ISA_VAR};

/// The process-wide settings ([`Default`] gives the defaults each field names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Worker threads of the pool that kernels and backward share. Default `None`: one per
    /// available core.
    pub threads: Option<usize>,
    /// When the program's main thread builds the pool (its first tensor operation) and the
    /// pool has at least two threads, the main thread becomes pool thread 0, so kernels called
    /// from it split their work in place instead of handing it over and sleeping (two context
    /// switches per op; see docs/BENCHMARKS.md, W6). Default `true`.
    pub adopt_main_thread: bool,
    /// Pool threads (and heavy kernels run on the caller's thread) flush subnormal floats to
    /// zero (x86 MXCSR FTZ and DAZ): a GEMM over subnormal gradients ran 30× slower without
    /// it (W7). Values below 1.2e-38 become 0. Default `true`.
    pub flush_denormals: bool,
    /// The most bytes the cache of freed tensor buffers keeps for reuse (0 turns it off).
    /// Default 1 GiB.
    pub buffer_cache_bytes: usize,
    /// Microseconds the pool's idle threads spin, taking up new work at once, after the last
    /// kernel that could split before they sleep (0: sleep at once, as rayon does). Waking a
    /// sleeping thread for each half-product made a forward pass of small products no faster
    /// on two threads than on one (docs/BENCHMARKS.md, W11). Default 200.
    pub spin_us: u32,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            threads: None,
            adopt_main_thread: true,
            flush_denormals: true,
            buffer_cache_bytes: crate::tensor::DEFAULT_BUFFER_CACHE_BYTES,
            spin_us: parallel::DEFAULT_SPIN_US,
        }
    }
}

/// The pool settings requested so far (read when the pool is built).
static POOL_SETTINGS: Mutex<PoolSettings> =
    Mutex::new(PoolSettings { threads: None, adopt_main_thread: true, flush_denormals: true });

/// The part of the configuration the pool is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolSettings {
    pub(crate) threads: Option<usize>,
    pub(crate) adopt_main_thread: bool,
    pub(crate) flush_denormals: bool,
}

/// The pool settings in force (the built pool's, once it exists).
pub(crate) fn pool_settings() -> PoolSettings {
    *POOL_SETTINGS.lock()
}

/// The settings in force now.
pub fn config() -> RuntimeConfig {
    let pool = parallel::built_settings().unwrap_or_else(pool_settings);
    RuntimeConfig {
        threads: pool.threads,
        adopt_main_thread: pool.adopt_main_thread,
        flush_denormals: pool.flush_denormals,
        buffer_cache_bytes: buffer_cache_limit(),
        spin_us: parallel::spin_us(),
    }
}

/// Sets every process-wide setting. Nothing changes on an error.
///
/// # Errors
/// `InvalidArgument` for `threads: Some(0)`, or when the pool is already built with other
/// pool settings (naming the setting and the value it was built with: call `configure` before
/// the first tensor operation).
pub fn configure(config: RuntimeConfig) -> Result<()> {
    let bad = |arg: &'static str, reason: String| fail(ErrorKind::InvalidArgument { op: "configure", arg, reason });
    if config.threads == Some(0) {
        return bad("threads", "must be at least 1".into());
    }
    let wanted = PoolSettings {
        threads: config.threads,
        adopt_main_thread: config.adopt_main_thread,
        flush_denormals: config.flush_denormals,
    };
    {
        let mut settings = POOL_SETTINGS.lock();
        if let Some(built) = parallel::built_settings() {
            if built.threads != wanted.threads && wanted.threads.is_some() {
                let n = parallel::num_threads();
                return bad("threads", format!("the pool was built with {n} threads at the first tensor operation"));
            }
            if built.adopt_main_thread != wanted.adopt_main_thread {
                let was = built.adopt_main_thread;
                return bad(
                    "adopt_main_thread",
                    format!("the pool was built with {was} at the first tensor operation"),
                );
            }
            if built.flush_denormals != wanted.flush_denormals {
                let was = built.flush_denormals;
                return bad("flush_denormals", format!("the pool was built with {was} at the first tensor operation"));
            }
        } else {
            *settings = wanted;
        }
    }
    set_buffer_cache_limit(config.buffer_cache_bytes);
    parallel::set_spin_us(config.spin_us);
    Ok(())
}
