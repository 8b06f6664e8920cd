//! `forgia bench`: the workload suite of BENCHMARKS.md, one line per workload:
//! `name=<W> impl=forgia median_ms=<x> extra=<k=v,...>`.

mod convs;
mod peak;
mod w12;
mod w9;

use std::time::Instant;

use clap::Args;
use forgia::Tensor;

#[cfg(feature = "distributed")]
mod w10;

/// Arguments of `forgia bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Workloads to run (W1 … W9, W11, W12, W12conv (W12's convolutions one product at a time),
    /// and `peak`, the FMA peak probe; W10 by name only,
    /// under mpirun, feature `distributed`); all but W10 when none is given.
    workloads: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Minimum measured repetitions.
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// W9's batch and sequence length as `B,S` (default 32,64; smaller to check it runs).
    #[arg(long, value_name = "B,S", value_parser = parse_pair)]
    w9_sizes: Option<(usize, usize)>,
    /// W12's (and W12conv's) batch and image side as `B,S` (default 8,224; smaller to check it
    /// runs).
    #[arg(long, value_name = "B,S", value_parser = parse_pair)]
    w12_sizes: Option<(usize, usize)>,
    /// Ops in W1's and W8's chains (defaults 10,000 and 1,000,000; smaller to profile W8
    /// under callgrind).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    chain_ops: Option<usize>,
    /// Microseconds idle pool threads spin before they sleep (`RuntimeConfig::spin_us`;
    /// default the library's, 0 to compare with threads that sleep at once).
    #[arg(long, value_name = "US")]
    spin_us: Option<u32>,
}

fn parse_positive(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().ok().filter(|&v| v > 0).ok_or(format!("{s:?} is not a positive integer"))
}

fn parse_pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once(',').ok_or("expected B,S")?;
    let n =
        |x: &str| x.trim().parse::<usize>().ok().filter(|&v| v > 0).ok_or(format!("{x:?} is not a positive integer"));
    Ok((n(a)?, n(b)?))
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
    /// W10's distributed part failed, or this build has no `distributed` feature.
    #[error("W10: {0}")]
    Distributed(String),
}

const KNOWN: &[&str] =
    &["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W7ckpt", "W8", "W9", "W11", "W12", "W12conv", "peak"];

/// Runs the requested workloads.
pub(crate) fn run(args: &BenchArgs) -> Result<(), BenchError> {
    if let Some(t) = args.threads {
        forgia::set_num_threads(t)?;
    }
    if let Some(spin_us) = args.spin_us {
        forgia::runtime::configure(forgia::runtime::RuntimeConfig { spin_us, ..forgia::runtime::config() })?;
    }
    let names: Vec<String> =
        if args.workloads.is_empty() { KNOWN.iter().map(|s| s.to_string()).collect() } else { args.workloads.clone() };
    for name in &names {
        let line = match name.to_uppercase().as_str() {
            "W1" => w1_chain(args.reps, args.chain_ops.unwrap_or(10_000))?,
            "W2" => w2_mlp(args.reps)?,
            "W3" => w3_branches(args.reps)?,
            "W4" => w4_cnn(args.reps)?,
            "W5" => w5_gemm(args.reps)?,
            "W6" => w6_transformer(args.reps)?,
            "W7" => w7_residual(args.reps, false)?,
            "W7CKPT" => w7_residual(args.reps, true)?,
            "W8" => w8_deep(args.reps, args.chain_ops.unwrap_or(1_000_000))?,
            "W9" => w9::w9_minilm_lora(args.reps, args.w9_sizes)?,
            "W11" => w11_add_chain(args.reps)?,
            "W12" => w12::w12_resnet18(args.reps, args.w12_sizes)?,
            "W12CONV" => convs::w12_convs(args.reps, args.w12_sizes)?,
            "PEAK" => peak::peak(args.reps)?,
            #[cfg(feature = "distributed")]
            "W10" => match w10::w10(args.reps)? {
                Some(line) => line,
                None => continue, // ranks other than 0 print nothing
            },
            #[cfg(not(feature = "distributed"))]
            "W10" => return Err(BenchError::Distributed("built without the `distributed` feature".into())),
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
    Ok(median(times))
}

/// The median of `times`: the upper of the two middle values for an even count, the rule of
/// every figure `forgia bench` prints (and of the twins' `fixed_median_ms`).
pub(crate) fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
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
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
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

/// W1: per-op graph overhead on a 10,000-op chain (`ops`).
fn w1_chain(reps: usize, ops: usize) -> Result<String, forgia::Error> {
    let x = Tensor::variable(vec![0.5; 16], &[16])?;
    let c = Tensor::full(&[16], 0.999)?;
    let ms = median_ms(reps, || chain_step(&x, &c, ops))?;
    Ok(line("W1", ms, &[("us_per_op", format!("{:.3}", ms * 1e3 / ops as f64))]))
}

/// W8: the same chain at 1,000,000 ops (`ops`): forward, backward, drop, without stack
/// overflow.
fn w8_deep(reps: usize, ops: usize) -> Result<String, forgia::Error> {
    let x = Tensor::variable(vec![0.5; 16], &[16])?;
    let c = Tensor::full(&[16], 0.999)?;
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
            // What one live op costs between forward and backward (the node, its record,
            // saved values, the pass's bookkeeping, the allocator's slack).
            ("step_bytes_per_op", format!("{:.0}", (peak - before) * 1024.0 * 1024.0 / ops as f64)),
            ("peak_live_mb", format!("{:.0}", peak_live_mb())),
        ],
    ))
}

/// W3: four independent heavy branches, with the pool and with the serial option.
fn w3_branches(reps: usize) -> Result<String, forgia::Error> {
    branches("W3", reps, 3, [512, 1024], 4, 0.03)
}

/// W11: 16 independent branches `y_i = tanh(x·W_i)·V_i` (`x` [64, 256] constant, `W_i`, `V_i`
/// [256, 256] variables) whose sums are joined by a chain of adds, as users write
/// `loss = a + b + c`; forward + backward, with the pool and with the serial option.
fn w11_add_chain(reps: usize) -> Result<String, forgia::Error> {
    branches("W11", reps, 11, [64, 256], 16, 0.06)
}

/// `count` independent branches `tanh(x·W_i)·V_i` (`x` [rows, d] constant, `W_i`, `V_i` [d, d]
/// variables of standard deviation `std`) whose sums are joined by a chain of adds; the median
/// forward + backward with the pool, and with the serial option, and the median forward alone
/// (`fwd_ms`, from the pooled steps: the forward is the same eager code in both, and the
/// serial option only changes the backward).
fn branches(
    name: &str,
    reps: usize,
    seed: u64,
    [rows, d]: [usize; 2],
    count: usize,
    std: f32,
) -> Result<String, forgia::Error> {
    let mut rng = forgia::Rng::new(seed);
    let x = Tensor::randn(&[rows, d], 0.0, 1.0, &mut rng)?;
    let mut params = Vec::with_capacity(count);
    for _ in 0..count {
        let w = Tensor::randn(&[d, d], 0.0, std, &mut rng)?.into_variable();
        let v = Tensor::randn(&[d, d], 0.0, std, &mut rng)?.into_variable();
        params.push((w, v));
    }
    let mut forward_ms = Vec::new();
    let mut step = |serial: bool| -> Result<(), forgia::Error> {
        let start = Instant::now();
        let mut loss: Option<Tensor> = None;
        for (w, v) in &params {
            let y = x.matmul(w)?.tanh().matmul(v)?.sum_all();
            loss = Some(match loss {
                None => y,
                Some(l) => l.add(&y)?,
            });
        }
        let loss = loss.expect("at least one branch");
        if !serial {
            forward_ms.push(start.elapsed().as_secs_f64() * 1e3);
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
    let fwd_ms = median(forward_ms);
    Ok(line(name, ms, &[("serial_ms", format!("{serial_ms:.3}")), ("fwd_ms", format!("{fwd_ms:.3}"))]))
}

fn line(name: &str, ms: f64, extra: &[(&str, String)]) -> String {
    let extra: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("name={name} impl=forgia median_ms={ms:.3} extra={}", extra.join(","))
}

/// W5: C = A·B for 2048² operands, no autograd.
fn w5_gemm(reps: usize) -> Result<String, forgia::Error> {
    let n = 2048;
    let mut rng = forgia::Rng::new(5);
    let a = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng)?;
    let b = Tensor::randn(&[n, n], 0.0, 1.0, &mut rng)?;
    let ms = median_ms(reps, || a.matmul(&b).map(drop))?;
    let gflops = 2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e9;
    Ok(line("W5", ms, &[("gflops", format!("{gflops:.1}")), ("threads", forgia::num_threads().to_string())]))
}

/// W2: one SGD training step of an MLP 784→1024→1024→10 on a batch of 256.
fn w2_mlp(reps: usize) -> Result<String, forgia::Error> {
    use forgia::nn::{Linear, Module, Relu, Sequential};
    use forgia::optim::{Optimizer, Sgd, SgdConfig};
    let mut rng = forgia::Rng::new(2);
    let mut model = Sequential::new()
        .push(Linear::new(784, 1024, true, &mut rng)?)
        .push(Relu)
        .push(Linear::new(1024, 1024, true, &mut rng)?)
        .push(Relu)
        .push(Linear::new(1024, 10, true, &mut rng)?);
    let x = Tensor::rand(&[256, 784], 0.0, 1.0, &mut rng)?;
    let labels = forgia::Indices::from((0..256).map(|i| i % 10).collect::<Vec<usize>>());
    let mut opt = Sgd::new(SgdConfig { lr: 0.01, ..Default::default() })?;
    let before = rss_mb();
    forgia::reset_peak_bytes();
    let ms = median_ms(reps, || {
        let loss = forgia::loss::cross_entropy(&model.forward(&x)?, &labels, Default::default())?;
        loss.backward()?;
        opt.step(&mut model)?;
        model.zero_grad();
        Ok(())
    })?;
    let flops = 3.0 * 2.0 * 256.0 * (784.0 * 1024.0 + 1024.0 * 1024.0 + 1024.0 * 10.0);
    let peak = peak_rss_mb();
    Ok(line(
        "W2",
        ms,
        &[
            ("gflops", format!("{:.1}", flops / (ms * 1e-3) / 1e9)),
            ("peak_rss_mb", format!("{peak:.0}")),
            ("step_mb", format!("{:.0}", peak - before)),
            ("peak_live_mb", format!("{:.0}", peak_live_mb())),
        ],
    ))
}

/// W4: one SGD step of a small CNN on a [64, 1, 28, 28] batch.
fn w4_cnn(reps: usize) -> Result<String, forgia::Error> {
    use forgia::nn::{visit_child, visit_child_mut, Conv2d, Linear, Module};
    use forgia::optim::{Optimizer, Sgd, SgdConfig};
    /// The workload's network: two conv + relu + max-pool blocks and a linear head.
    struct Net {
        conv1: Conv2d,
        conv2: Conv2d,
        fc: Linear,
    }
    impl Module for Net {
        fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
            visit_child("conv1", &self.conv1, f);
            visit_child("conv2", &self.conv2, f);
            visit_child("fc", &self.fc, f);
        }
        fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
            visit_child_mut("conv1", &mut self.conv1, f);
            visit_child_mut("conv2", &mut self.conv2, f);
            visit_child_mut("fc", &mut self.fc, f);
        }
    }
    let mut rng = forgia::Rng::new(4);
    let x = Tensor::rand(&[64, 1, 28, 28], 0.0, 1.0, &mut rng)?;
    let labels = forgia::Indices::from((0..64).map(|i| i % 10).collect::<Vec<usize>>());
    let conv = forgia::Conv2dOptions::default();
    let mut net = Net {
        conv1: Conv2d::new(1, 32, (3, 3), conv, true, &mut rng)?,
        conv2: Conv2d::new(32, 64, (3, 3), conv, true, &mut rng)?,
        fc: Linear::new(1600, 10, true, &mut rng)?,
    };
    let mut opt = Sgd::new(SgdConfig { lr: 0.01, ..SgdConfig::default() })?;
    let ms = median_ms(reps, || {
        let pool = |t: Tensor| t.relu().max_pool2d((2, 2), (2, 2), (0, 0));
        let h = pool(net.conv1.forward(&x)?)?;
        let h = pool(net.conv2.forward(&h)?)?;
        let logits = net.fc.forward(&h.flatten(1, -1)?)?;
        forgia::loss::cross_entropy(&logits, &labels, Default::default())?.backward()?;
        opt.step(&mut net)?;
        net.zero_grad();
        Ok(())
    })?;
    Ok(line("W4", ms, &[]))
}

/// W7: 16 residual MLP blocks `x + fc2(gelu(fc1(x)))` over [4096, 256] (hidden 1024; the
/// layers are `linear`, as the twin's `nn.Linear`), forward + backward, plain or with every
/// block checkpointed. Run the two in separate processes so the peaks belong to one.
fn w7_residual(reps: usize, ckpt: bool) -> Result<String, forgia::Error> {
    let mut rng = forgia::Rng::new(7);
    let x = Tensor::randn(&[4096, 256], 0.0, 1.0, &mut rng)?;
    // Weights [out, in], as `linear` (and `nn.Linear`) take them.
    let blocks: Vec<[Tensor; 4]> = (0..16)
        .map(|_| {
            [
                Tensor::randn(&[1024, 256], 0.0, 0.06, &mut rng).expect("a small fixed shape").into_variable(),
                Tensor::zeros(&[1024]).expect("a small fixed shape").into_variable(),
                Tensor::randn(&[256, 1024], 0.0, 0.03, &mut rng).expect("a small fixed shape").into_variable(),
                Tensor::zeros(&[256]).expect("a small fixed shape").into_variable(),
            ]
        })
        .collect();
    fn block(t: &[Tensor]) -> Result<Tensor, forgia::Error> {
        let h = t[0].linear(&t[1], Some(&t[2]))?.gelu();
        t[0].add(&h.linear(&t[3], Some(&t[4]))?)
    }
    let before = rss_mb();
    forgia::reset_peak_bytes();
    let ms = median_ms(reps.min(5), || {
        let mut h = x.clone();
        for p in &blocks {
            let inputs = [&h, &p[0], &p[1], &p[2], &p[3]];
            h = if ckpt { forgia::checkpoint(block, &inputs)? } else { block(&inputs.map(Tensor::clone))? };
        }
        // The square is dropped before backward (as the twin's temporary is), not kept to the
        // end of the statement.
        let loss = h.mul(&h)?.mean_all()?;
        loss.backward()?;
        blocks.iter().flatten().for_each(Tensor::zero_grad);
        Ok(())
    })?;
    let peak = peak_rss_mb();
    Ok(line(
        if ckpt { "W7ckpt" } else { "W7" },
        ms,
        &[
            ("peak_live_mb", format!("{:.0}", peak_live_mb())),
            ("peak_rss_mb", format!("{peak:.0}")),
            ("step_mb", format!("{:.0}", peak - before)),
        ],
    ))
}

/// W6: one AdamW step of a character transformer (vocab 65, context 64, d_model 128, 4 layers,
/// 4 heads, MLP 4× with GELU, pre-LayerNorm, learned positions, causal) on a batch of 32.
fn w6_transformer(reps: usize) -> Result<String, forgia::Error> {
    use crate::train::charlm::{CharTransformer, Config};
    use forgia::nn::Module;
    use forgia::optim::{AdamConfig, AdamW, Optimizer};
    let config = Config { vocab: 65, context: 64, d_model: 128, heads: 4, layers: 4 };
    let mut model = CharTransformer::new(config, 6, false)?;
    let mut rng = forgia::Rng::new(6);
    let (batch, context) = (32, 64);
    let ids: Vec<usize> = (0..batch * context).map(|_| rng.below(65)).collect();
    let targets: Vec<usize> = (0..batch * context).map(|_| rng.below(65)).collect();
    let ids = forgia::Indices::new(ids.iter().map(|&i| i as i64).collect(), &[batch, context])?;
    let targets = forgia::Indices::from(targets);
    let mut opt = AdamW::new(AdamConfig { lr: 3e-4, ..AdamConfig::adamw() })?;
    // Per-phase times of every measured step: forward (with the loss), backward, optimizer.
    let mut phases: [Vec<f64>; 3] = Default::default();
    let ms = median_ms(reps, || {
        let start = Instant::now();
        let logits = model.forward(&ids)?.reshape(&[batch * context, 65])?;
        let loss = forgia::loss::cross_entropy(&logits, &targets, Default::default())?;
        let forward = start.elapsed();
        loss.backward()?;
        let backward = start.elapsed() - forward;
        opt.step(&mut model)?;
        model.zero_grad();
        let step = start.elapsed() - forward - backward;
        for (v, d) in phases.iter_mut().zip([forward, backward, step]) {
            v.push(d.as_secs_f64() * 1e3);
        }
        Ok(())
    })?;
    let [f, b, s] = phases.map(|v| format!("{:.1}", median(v)));
    Ok(line("W6", ms, &[("forward_ms", f), ("backward_ms", b), ("optimizer_ms", s)]))
}
