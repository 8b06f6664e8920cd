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

const KNOWN: &[&str] = &["W1", "W3", "W5", "W8"];

/// Runs the requested workloads.
pub(crate) fn run(args: &BenchArgs) -> Result<(), BenchError> {
    if let Some(t) = args.threads {
        forgia::set_num_threads(t)?;
    }
    let names: Vec<String> =
        if args.workloads.is_empty() { KNOWN.iter().map(|s| s.to_string()).collect() } else { args.workloads.clone() };
    for name in &names {
        let line = match name.to_uppercase().as_str() {
            "W1" => w1_chain(args.reps)?,
            "W3" => w3_branches(args.reps)?,
            "W5" => w5_gemm(args.reps)?,
            "W8" => w8_deep(args.reps)?,
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

/// The process's current resident size in MB (`VmRSS`).
pub(crate) fn rss_mb() -> f64 {
    proc_status_mb("VmRSS:")
}

/// The process's resident high-water mark in MB (`VmHWM`).
pub(crate) fn peak_rss_mb() -> f64 {
    proc_status_mb("VmHWM:")
}

fn proc_status_mb(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Peak bytes of live tensor storage since the last reset, in MB.
fn peak_live_mb() -> f64 {
    forgia::peak_bytes() as f64 / (1024.0 * 1024.0)
}

/// W1/W8: a chain of `ops` tiny ops (x·c, x+c, tanh) over 16 elements, summed, backpropagated.
fn chain_step(x: &Tensor, c: &Tensor, ops: usize) -> Result<(), forgia::Error> {
    let mut h = x.clone();
    for i in 0..ops {
        h = match i % 3 {
            0 => h.mul(c)?,
            1 => h.add(c)?,
            _ => h.tanh(),
        };
    }
    h.sum_all().backward()?;
    x.zero_grad();
    Ok(())
}

/// W1: per-op graph overhead on a 10,000-op chain.
fn w1_chain(reps: usize) -> Result<String, forgia::Error> {
    let ops = 10_000;
    let x = Tensor::variable(vec![0.5; 16], &[16])?;
    let c = Tensor::full(&[16], 0.999);
    let ms = median_ms(reps, || chain_step(&x, &c, ops))?;
    Ok(line("W1", ms, &[("us_per_op", format!("{:.3}", ms * 1e3 / ops as f64))]))
}

/// W8: the same chain at 1,000,000 ops: forward, backward, drop, without stack overflow.
fn w8_deep(reps: usize) -> Result<String, forgia::Error> {
    let ops = 1_000_000;
    let x = Tensor::variable(vec![0.5; 16], &[16])?;
    let c = Tensor::full(&[16], 0.999);
    let before = rss_mb();
    forgia::reset_peak_bytes();
    let ms = median_ms(reps.min(5), || chain_step(&x, &c, ops))?;
    let peak = peak_rss_mb();
    Ok(line(
        "W8",
        ms,
        &[
            ("us_per_op", format!("{:.3}", ms * 1e3 / ops as f64)),
            ("peak_rss_mb", format!("{peak:.0}")),
            ("step_mb", format!("{:.0}", peak - before)),
            ("peak_live_mb", format!("{:.0}", peak_live_mb())),
        ],
    ))
}

/// W3: four independent heavy branches, with the pool and with the serial option.
fn w3_branches(reps: usize) -> Result<String, forgia::Error> {
    let mut rng = forgia::Rng::new(3);
    let x = Tensor::randn(&[512, 1024], 0.0, 1.0, &mut rng);
    let params: Vec<(Tensor, Tensor)> = (0..4)
        .map(|_| {
            let w = Tensor::randn(&[1024, 1024], 0.0, 0.03, &mut rng).into_variable();
            let v = Tensor::randn(&[1024, 1024], 0.0, 0.03, &mut rng).into_variable();
            (w, v)
        })
        .collect();
    let step = |serial: bool| -> Result<(), forgia::Error> {
        let mut loss = Tensor::scalar(0.0);
        for (w, v) in &params {
            loss = loss.add(&x.matmul(w)?.tanh().matmul(v)?.sum_all())?;
        }
        loss.backward_with(None, forgia::BackwardOptions { serial, ..Default::default() })?;
        params.iter().for_each(|(w, v)| {
            w.zero_grad();
            v.zero_grad();
        });
        Ok(())
    };
    let ms = median_ms(reps, || step(false))?;
    let serial_ms = median_ms(reps, || step(true))?;
    Ok(line("W3", ms, &[("serial_ms", format!("{serial_ms:.3}"))]))
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
