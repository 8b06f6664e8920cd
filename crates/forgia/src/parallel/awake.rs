//! Keeping the pool's other threads awake between the kernels of a burst of work.
//!
//! An idle rayon thread yields a few dozen times and then sleeps on a futex; waking it costs a
//! system call on the waking side and, on a virtual machine, an interrupt between cores, and
//! the sleeper starts late. A forward pass of small products (W11: `[64, 256] · [256, 256]`,
//! about 20 µs each on two threads) hands one half of each product to a thread that has gone
//! to sleep since the last one, and so ran no faster on two threads than on one. OpenMP
//! runtimes, PyTorch's among them, spin their threads between parallel regions for the same
//! reason.
//!
//! Here, [`Keepers::touch`] (called by `parallel::install` for every kernel that may split) makes sure
//! each of the pool's other threads runs a *keeper*: a job that takes the pool's pending jobs
//! one at a time ([`rayon::yield_now`]) and spins in between, so a new half-product is picked
//! up at once. A keeper leaves when neither it nor any caller has had work for
//! [`RuntimeConfig::spin_us`](crate::runtime::RuntimeConfig::spin_us) microseconds; the
//! thread then sleeps as before. With `spin_us` 0 nothing is spun.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Microseconds a keeper spins without work before its thread may sleep.
static SPIN_US: AtomicU32 = AtomicU32::new(DEFAULT_SPIN_US);

/// The default of [`RuntimeConfig::spin_us`](crate::runtime::RuntimeConfig::spin_us).
pub(crate) const DEFAULT_SPIN_US: u32 = 200;

/// The spin window in force.
pub(crate) fn spin_us() -> u32 {
    SPIN_US.load(Ordering::Relaxed)
}

/// Sets the spin window; 0 stops spinning (running keepers leave at their next check).
pub(crate) fn set_spin_us(us: u32) {
    SPIN_US.store(us, Ordering::Relaxed);
}

/// The keepers of one pool (the library's pool has one set, [`KEEPERS`]).
pub(crate) struct Keepers {
    /// Bumped by every [`Keepers::touch`]: keepers read it to tell that callers are still busy.
    activity: AtomicU64,
    /// Keepers running or queued.
    running: AtomicUsize,
}

/// The keepers of the library's pool.
pub(crate) static KEEPERS: Keepers = Keepers::new();

impl Keepers {
    const fn new() -> Self {
        Keepers { activity: AtomicU64::new(0), running: AtomicUsize::new(0) }
    }

    /// Records that a kernel is about to run on `pool` and, when fewer keepers than the pool's
    /// threads less one are running, queues the missing ones. `adopted` is true when the pool's
    /// thread 0 is the program's main thread, where a keeper never stays (it would hold up the
    /// caller).
    pub(crate) fn touch(&'static self, pool: &rayon::ThreadPool, adopted: bool) {
        if spin_us() == 0 {
            return;
        }
        // Relaxed (all): these counters only steer spinning; rayon's queues publish the work.
        self.activity.fetch_add(1, Ordering::Relaxed);
        let want = pool.current_num_threads() - 1;
        let mut running = self.running.load(Ordering::Relaxed);
        while running < want {
            match self.running.compare_exchange_weak(running, running + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    pool.spawn(move || self.keep(adopted));
                    running += 1;
                }
                Err(now) => running = now,
            }
        }
    }

    /// The keeper's loop: runs the pool's pending jobs, spinning while there are none, until
    /// the spin window passes with no job run here and no [`Keepers::touch`] anywhere.
    fn keep(&self, adopted: bool) {
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _leave = Leave(&self.running);
        if adopted && rayon::current_thread_index() == Some(0) {
            return; // the main thread took it up while waiting: hand it straight back
        }
        let mut seen = self.activity.load(Ordering::Relaxed);
        let mut since = Instant::now();
        let mut idle_rounds = 0u32;
        loop {
            if rayon::yield_now() == Some(rayon::Yield::Executed) {
                since = Instant::now();
                idle_rounds = 0;
                continue;
            }
            std::hint::spin_loop();
            idle_rounds += 1;
            // Read the clock every 64 idle rounds only (a round is well under a microsecond).
            if !idle_rounds.is_multiple_of(64) {
                continue;
            }
            let now = self.activity.load(Ordering::Relaxed);
            if now != seen {
                seen = now;
                since = Instant::now();
            } else if since.elapsed() >= Duration::from_micros(u64::from(spin_us())) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use super::Keepers;

    #[test]
    fn keepers_run_the_pools_jobs_and_leave_when_the_work_stops() {
        use rayon::prelude::*;
        let keepers: &'static Keepers = Box::leak(Box::new(Keepers::new()));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for round in 0..20u64 {
            keepers.touch(&pool, false);
            assert!(keepers.running.load(Ordering::Relaxed) <= 2, "at most one keeper per other thread");
            // Jobs handed to the pool run while keepers spin in it.
            let sum: u64 = pool.install(|| (0..10_000 * round).into_par_iter().sum());
            assert_eq!(sum, (0..10_000 * round).sum::<u64>());
        }
        // With no more work, every keeper leaves.
        let deadline = Instant::now() + Duration::from_secs(10);
        while keepers.running.load(Ordering::Relaxed) > 0 {
            assert!(Instant::now() < deadline, "keepers still spinning 10 s after the last job");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
