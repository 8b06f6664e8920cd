//! A tiny classifier and its training loop, shared by the in-process tests and the `mpirun`
//! scenarios (`src/bin/ddp_scenarios.rs` includes this file).
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Linear, Module};
use forgia::optim::{Optimizer, Sgd, SgdConfig};
use forgia::{Indices, Rng, Tensor};
use forgia_distributed::{Comm, DdpOptions, DistributedDataParallel, DistributedSampler};

/// Features per sample, classes, samples.
pub const FEATURES: usize = 6;
pub const CLASSES: usize = 3;
pub const SAMPLES: usize = 96;

/// A two-layer MLP: linear, tanh, linear.
pub struct Mlp {
    pub l1: Linear,
    pub l2: Linear,
}

impl Mlp {
    pub fn new(seed: u64) -> Mlp {
        let mut rng = Rng::new(seed);
        Mlp {
            l1: Linear::new(FEATURES, 16, true, &mut rng).unwrap(),
            l2: Linear::new(16, CLASSES, true, &mut rng).unwrap(),
        }
    }

    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.l2.forward(&self.l1.forward(x).unwrap().tanh()).unwrap()
    }
}

impl Module for Mlp {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("l1", &self.l1, f);
        visit_child("l2", &self.l2, f);
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("l1", &mut self.l1, f);
        visit_child_mut("l2", &mut self.l2, f);
    }
}

/// A fixed data set: features and labels.
pub fn data() -> (Vec<f32>, Vec<usize>) {
    let mut rng = Rng::new(99);
    let x = Tensor::randn(&[SAMPLES, FEATURES], 0.0, 1.0, &mut rng).unwrap().to_vec();
    let y =
        (0..SAMPLES).map(|i| ((x[i * FEATURES] + 2.0 * x[i * FEATURES + 1]).abs() * 2.0) as usize % CLASSES).collect();
    (x, y)
}

/// The mean cross-entropy of the samples `batch`.
pub fn loss(model: &Mlp, (x, y): &(Vec<f32>, Vec<usize>), batch: &[usize]) -> Tensor {
    let rows: Vec<f32> = batch.iter().flat_map(|&i| x[i * FEATURES..(i + 1) * FEATURES].to_vec()).collect();
    let xb = Tensor::from_vec(rows, &[batch.len(), FEATURES]).unwrap();
    let labels: Vec<usize> = batch.iter().map(|&i| y[i]).collect();
    cross_entropy(&model.forward(&xb), &Indices::from(labels), CrossEntropyOptions::default()).unwrap()
}

/// All parameters back to back.
pub fn flat_params(model: &Mlp) -> Vec<f32> {
    let mut out = Vec::new();
    model.visit_params(&mut |_, p| out.extend(p.to_vec()));
    out
}

/// Trains `steps` SGD steps with global batch `global_batch`: on `comm`'s rank (its shard of
/// every global batch, gradients averaged by DDP), or single-process when `comm` is `None`.
/// Each rank starts from its own seed (`init_seed + rank`): the broadcast makes them agree.
/// Returns the global batch's mean loss per step and the final parameters.
pub fn train(
    comm: Option<Arc<Comm>>,
    init_seed: u64,
    steps: usize,
    global_batch: usize,
    bucket_cap_bytes: usize,
) -> (Vec<f64>, Vec<f32>) {
    let data = data();
    let rank = comm.as_ref().map_or(0, |c| c.rank());
    let world = comm.as_ref().map_or(1, |c| c.size());
    let mut model = Mlp::new(init_seed + rank as u64);
    let ddp = comm
        .clone()
        .map(|c| DistributedDataParallel::new(c, &mut model, DdpOptions::with_bucket_cap(bucket_cap_bytes)).unwrap());
    let sampler = DistributedSampler::new(rank, world);
    // SGD with momentum: Adam divides by the root of tiny second moments, which turns the
    // last-bit differences of a sum taken in another order into visible ones.
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }).unwrap();
    let samples: Vec<usize> = (0..SAMPLES).collect();
    let mut losses = Vec::new();
    let mut epoch = 0;
    while losses.len() < steps {
        for global in forgia_distributed::global_batches(&samples, global_batch, 5, epoch) {
            if losses.len() == steps {
                break;
            }
            opt.zero_grad(&model);
            let shard = sampler.shard(&global);
            let mut stats = [0.0f64];
            if !shard.is_empty() {
                let l = loss(&model, &data, shard);
                stats[0] = l.item().unwrap() as f64 * shard.len() as f64;
                l.scale(sampler.loss_weight(shard.len(), global.len())).backward().unwrap();
            }
            if let (Some(ddp), Some(c)) = (&ddp, &comm) {
                ddp.finish().unwrap();
                c.all_reduce_sum_f64(&mut stats).unwrap();
            }
            losses.push(stats[0] / global.len() as f64);
            opt.step(&mut model).unwrap();
        }
        epoch += 1;
    }
    (losses, flat_params(&model))
}

/// Fails unless `a` and `b` agree to `rel` relative (with a tiny absolute floor for values
/// near zero).
pub fn assert_close<T: Into<f64> + Copy>(what: &str, a: &[T], b: &[T], rel: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x.into(), y.into());
        assert!((x - y).abs() <= rel * x.abs().max(y.abs()) + 1e-7, "{what}[{i}]: {x} vs {y}");
    }
}

/// The identity, with a backward that sleeps for the given time (so that a pass visibly goes
/// on after the gradients below it are final).
pub struct Slow(pub std::time::Duration);

impl forgia::CustomOp for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }
    fn forward(&self, xs: &[Tensor]) -> forgia::Result<Tensor> {
        Ok(xs[0].scale(1.0))
    }
    fn backward(&self, _: &[Tensor], _: &Tensor, gy: &Tensor, _: &[bool]) -> forgia::Result<Vec<Option<Tensor>>> {
        std::thread::sleep(self.0);
        Ok(vec![Some(gy.clone())])
    }
}
