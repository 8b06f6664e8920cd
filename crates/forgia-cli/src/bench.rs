//! `forgia bench`: the workload suite of BENCHMARKS.md, one line per workload:
//! `name=<W> impl=forgia median_ms=<x> extra=<k=v,...>`.

use std::time::Instant;

use clap::Args;
use forgia::Tensor;

/// Arguments of `forgia bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workloads to run (W1 … W8); all when none is given.
    workloads: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Minimum measured repetitions.
    #[arg(long, default_value_t = 10)]
    reps: usize,
}

/// An error of the bench command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// A workload name that is not in the suite.
    #[error("unknown workload {0:?} (known: {known})", known = KNOWN.join(" "))]
    Unknown(String),
    /// A library error inside a workload.
    #[error(transparent)]
    Forgia(#[from] forgia::Error),
}

const KNOWN: &[&str] = &["W5"];

/// Runs the requested workloads.
pub(crate) fn run(args: &BenchArgs) -> Result<(), BenchError> {
    if let Some(t) = args.threads {
        forgia::set_num_threads(t)?;
    }
    let names: Vec<String> =
        if args.workloads.is_empty() { KNOWN.iter().map(|s| s.to_string()).collect() } else { args.workloads.clone() };
    for name in &names {
        let line = match name.to_uppercase().as_str() {
            "W5" => w5_gemm(args.reps)?,
            _ => return Err(BenchError::Unknown(name.clone())),
        };
        println!("{line}");
    }
    Ok(())
}

/// Median milliseconds of `f` after one warm-up, over at least `reps` runs or about 3 s.
fn median_ms(reps: usize, mut f: impl FnMut() -> Result<(), forgia::Error>) -> Result<f64, forgia::Error> {
    f()?;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < reps || (start.elapsed().as_secs_f64() < 3.0 && times.len() < 1000) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The process's resident high-water mark in MB (`VmHWM`).
pub(crate) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn line(name: &str, ms: f64, extra: &[(&str, String)]) -> String {
    let extra: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("name={name} impl=forgia median_ms={ms:.3} extra={}", extra.join(","))
}

/// W5: C = A·B for 2048² operands, no autograd.
fn w5_gemm(reps: usize) -> Result<String, forgia::Error> {
    let n = 2048;
    let mut rng = forgia::Rng::new(5);
    let a = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng);
    let b = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng);
    let ms = median_ms(reps, || a.matmul(&b).map(drop))?;
    let gflops = 2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e9;
    Ok(line("W5", ms, &[("gflops", format!("{gflops:.1}")), ("threads", forgia::num_threads().to_string())]))
}
