//! `forgia bench peak`: the machine's FMA peak, measured in the same run as the workloads so
//! that W5's "share of peak" compares figures from one moment of the machine's load. One
//! thread per pool thread ([`forgia::num_threads`], so `--threads` applies) runs a loop of
//! fused multiply-adds on 12 independent accumulators (enough to cover the FMA latency times
//! the two FMA ports of a core), with the widest instruction set the CPU reports at run time:
//! AVX-512F, else AVX2 with FMA, else scalar code. A second probe, `loaded_gflops`, runs a
//! GEMM microkernel's register tile on operands in L1 ([`tile`]). The line:
//! `name=peak impl=forgia median_ms=<x> extra=gflops=<g>,loaded_gflops=<l>,isa=<avx512|avx2|scalar>,threads=<t>`
//! (`median_ms` is the register-only probe's).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

use super::{line, median};

mod tile;

/// Independent accumulator registers per thread.
const ACCUMULATORS: usize = 12;
/// Loop trips per thread and repetition (about 15 ms on one AVX-512 core at 4 GHz).
const TRIPS: u64 = 1 << 23;
/// Passes of the loaded probe per thread and repetition (about 17 ms at 190 GFLOP/s).
const PASSES: u64 = 1 << 16;
/// The recurrence `acc = acc · A + B` (exact binary fractions, `B = 1 - A`) climbs from 0
/// towards 1: `1 - Aᵗ` after `t` trips.
const A: f32 = 1.0 - B;
const B: f32 = 1.0 / (1 << 20) as f32;

/// The instruction set the probe runs with.
#[derive(Clone, Copy, Debug)]
enum Isa {
    Avx512,
    Avx2,
    Scalar,
}

impl Isa {
    /// The set forgia's kernels run with (`forgia::runtime::isa`: the widest this CPU
    /// supports unless `FORGIA_MAX_ISA` names a narrower one).
    fn detect() -> Isa {
        match forgia::runtime::isa() {
            forgia::runtime::Isa::Avx512 => Isa::Avx512,
            forgia::runtime::Isa::Avx2 => Isa::Avx2,
            forgia::runtime::Isa::Baseline => Isa::Scalar,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Scalar => "scalar",
        }
    }

    /// Floating-point operations of one loop trip: a multiply and an add per lane and
    /// accumulator.
    fn flops_per_trip(self) -> f64 {
        (2 * self.lanes() * ACCUMULATORS) as f64
    }

    /// f32 lanes of one vector register.
    fn lanes(self) -> usize {
        match self {
            Isa::Avx512 => 16,
            Isa::Avx2 => 8,
            Isa::Scalar => 1,
        }
    }

    /// Runs `trips` loop trips on this thread; returns the accumulators' sum (so the loop is
    /// not optimized away).
    fn run(self, trips: u64) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx512` is only produced by `detect` where `forgia::runtime::isa`
            // runs AVX-512, which it names only on a CPU with AVX-512F, the one feature the
            // function enables; it touches no memory but its locals.
            Isa::Avx512 => unsafe { x86::fma_avx512(trips) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above, `Isa::Avx2` is only produced where `isa` runs AVX2, which it
            // names only on a CPU with `avx2` and `fma`, the two features the function enables.
            Isa::Avx2 => unsafe { x86::fma_avx2(trips) },
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx512 | Isa::Avx2 => unreachable!("detected only on x86_64"),
            Isa::Scalar => scalar(trips),
        }
    }
}

/// The fallback: 12 scalar multiply-adds per trip (a multiply and an add, not `mul_add`,
/// which without the FMA feature is a library call).
fn scalar(trips: u64) -> f32 {
    let (a, b) = (std::hint::black_box(A), std::hint::black_box(B));
    let mut acc = [0.0f32; ACCUMULATORS];
    for _ in 0..trips {
        for x in acc.iter_mut() {
            *x = *x * a + b;
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The vector loops over the recurrence of [`super::A`]: no overflow and no subnormals,
    //! whose slow path would spoil the figure.
    use std::arch::x86_64::*;

    use super::{A, ACCUMULATORS, B};

    /// 12 AVX-512 FMAs (16 lanes each) per trip.
    #[target_feature(enable = "avx512f")]
    pub(super) fn fma_avx512(trips: u64) -> f32 {
        let a = _mm512_set1_ps(std::hint::black_box(A));
        let b = _mm512_set1_ps(std::hint::black_box(B));
        let mut acc = [_mm512_setzero_ps(); ACCUMULATORS];
        for _ in 0..trips {
            for x in acc.iter_mut() {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let sum = acc.iter().fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
        _mm512_reduce_add_ps(sum)
    }

    /// 12 AVX2 FMAs (8 lanes each) per trip.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn fma_avx2(trips: u64) -> f32 {
        let a = _mm256_set1_ps(std::hint::black_box(A));
        let b = _mm256_set1_ps(std::hint::black_box(B));
        let mut acc = [_mm256_setzero_ps(); ACCUMULATORS];
        for _ in 0..trips {
            for x in acc.iter_mut() {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let sum = acc.iter().fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` is 8 writable f32 (32 bytes), the unaligned store's exact size.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }
}

/// The median milliseconds of `probe` run on `threads` threads at once, after one warm-up
/// round, over at least `reps` rounds or `budget_s` seconds (at most 1000 rounds). The
/// threads are spawned once and kept for every round, as a pool's are, and clock their own
/// runs: threads spawned for each round, timed by the thread that spawned and joined them,
/// read about 1.6× one thread's figure on two cores while W5's GEMM on the pool read 2.0×
/// (docs/BENCHMARKS.md).
///
/// A probe that panics (a broken invariant) ends the rounds: its thread still meets the
/// round's barrier, the others are let go, and the panic resumes on the calling thread, so
/// nothing waits forever on a thread that is gone.
fn median_rounds(threads: usize, reps: usize, budget_s: f64, probe: impl Fn() -> f32 + Sync) -> f64 {
    // The main thread only paces the rounds. Each probe thread clocks its own run, and a round
    // lasts from the first start to the last end: a timer thread of its own would wait for a
    // core while the probe threads hold them all.
    let (start, done) = (Barrier::new(threads + 1), Barrier::new(threads + 1));
    let more = AtomicBool::new(true);
    let spans = Mutex::new(Vec::with_capacity(threads));
    let panicked = Mutex::new(None);
    let mut times = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                start.wait();
                if !more.load(Ordering::Acquire) {
                    return;
                }
                let t = Instant::now();
                match std::panic::catch_unwind(AssertUnwindSafe(&probe)) {
                    Ok(x) => _ = std::hint::black_box(x),
                    Err(payload) => _ = lock(&panicked).get_or_insert(payload),
                }
                lock(&spans).push((t, Instant::now()));
                done.wait();
            });
        }
        let mut begin = None;
        // Round 0 is the warm-up; `times` holds the rounds after it.
        for round in 0.. {
            let elapsed = begin.map_or(0.0, |b: Instant| b.elapsed().as_secs_f64());
            let failed = lock(&panicked).is_some();
            if failed || (times.len() >= reps.max(1) && (elapsed >= budget_s || times.len() >= 1000)) {
                more.store(false, Ordering::Release);
                start.wait();
                break;
            }
            start.wait();
            done.wait();
            let mut round_spans = lock(&spans);
            let first = round_spans.iter().map(|s| s.0).min().expect("every probe thread ran");
            let last = round_spans.iter().map(|s| s.1).max().expect("every probe thread ran");
            round_spans.clear();
            if round == 0 {
                begin = Some(Instant::now());
            } else {
                times.push((last - first).as_secs_f64() * 1e3);
            }
        }
    });
    if let Some(payload) = lock(&panicked).take() {
        std::panic::resume_unwind(payload);
    }
    median(times)
}

/// The guarded value of a mutex that no thread holds across a panic (probes run outside it).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `forgia bench peak`: the median time of one probe over every thread, as GFLOP/s.
pub(crate) fn peak(reps: usize) -> Result<String, forgia::Error> {
    probe_line(Isa::detect(), forgia::num_threads(), (TRIPS, PASSES), reps)
}

/// The workload line of `reps` (at least) probes of `trips` trips, and as many loaded probes
/// of `passes` passes, on `threads` threads.
fn probe_line(isa: Isa, threads: usize, (trips, passes): (u64, u64), reps: usize) -> Result<String, forgia::Error> {
    // About 3 s per probe unless `reps` asks for more, as the workloads' `median_ms`.
    let ms = median_rounds(threads, reps, 3.0, || isa.run(trips));
    let loaded_ms = median_rounds(threads, reps, 3.0, || tile::run(isa, passes));
    let flops = isa.flops_per_trip() * trips as f64 * threads as f64;
    let loaded = tile::flops_per_pass(isa) * passes as f64 * threads as f64;
    Ok(line(
        "peak",
        ms,
        &[
            ("gflops", format!("{:.1}", flops / (ms * 1e-3) / 1e9)),
            ("loaded_gflops", format!("{:.1}", loaded / (loaded_ms * 1e-3) / 1e9)),
            ("isa", isa.name().to_string()),
            ("threads", threads.to_string()),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One lane's accumulator after `t` trips from 0: `1 - Aᵗ`.
    fn expected(t: u64) -> f32 {
        (1.0 - f64::from(A).powi(t as i32)) as f32
    }

    #[test]
    fn every_instruction_set_the_cpu_has_runs_the_recurrence_on_every_lane() {
        let trips = 1000;
        let lanes = |isa: Isa| isa.flops_per_trip() as f32 / (2 * ACCUMULATORS) as f32;
        for isa in [Isa::detect(), Isa::Scalar] {
            let per_lane = isa.run(trips) / (lanes(isa) * ACCUMULATORS as f32);
            assert!((per_lane - expected(trips)).abs() < 1e-3 * expected(trips), "{isa:?}: {per_lane}");
        }
    }

    #[test]
    fn a_probe_that_panics_ends_the_rounds_with_its_panic_instead_of_leaving_the_others_waiting() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                median_rounds(3, 100, 0.0, || {
                    // One thread of the third round panics; the others return.
                    if calls.fetch_add(1, Ordering::Relaxed) == 7 {
                        panic!("probe invariant");
                    }
                    1.0
                })
            }));
            _ = tx.send((outcome.map_err(|p| p.downcast_ref::<&str>().copied()), calls.into_inner()));
        });
        // A hang shows as a timeout here, not as a test run that never ends.
        let (outcome, calls) = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the rounds ended");
        assert_eq!(outcome, Err(Some("probe invariant")));
        // Three rounds of three calls, the third the last.
        assert_eq!(calls, 9);
    }

    #[test]
    fn every_round_runs_the_probe_once_on_every_thread_and_lasts_as_long_as_its_slowest() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let ms = median_rounds(3, 4, 0.0, || {
            // The first thread of a round sleeps longer: the round lasts until it is done.
            let nth = calls.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(if nth.is_multiple_of(3) { 20 } else { 2 }));
            1.0
        });
        // One warm-up round and four timed ones, three threads each.
        assert_eq!(calls.load(Ordering::Relaxed), 15);
        assert!(ms >= 20.0, "{ms}");
    }

    #[test]
    fn the_line_names_the_probe_its_throughput_and_its_isa() {
        let line = probe_line(Isa::Scalar, 2, (100, 2), 1).unwrap();
        assert!(line.starts_with("name=peak impl=forgia median_ms="), "{line}");
        assert!(line.contains("extra=gflops=") && line.contains(",loaded_gflops="), "{line}");
        assert!(line.ends_with(",isa=scalar,threads=2"), "{line}");
        assert_eq!(Isa::Scalar.flops_per_trip(), 24.0);
        assert_eq!(Isa::Avx2.flops_per_trip(), 192.0);
        assert_eq!(Isa::Avx512.flops_per_trip(), 384.0);
    }
}
