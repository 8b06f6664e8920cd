//! W12: one training step of ResNet-18 (`forgia::models::resnet`, random weights, 1,000
//! classes) on a batch of 8 ImageNet-sized images [8, 3, 224, 224]: forward with BatchNorm in
//! training mode, cross-entropy, backward, plain SGD (lr 0.01). The convolutions of every
//! ResNet stage (7×7 stride 2 on 3 channels; 3×3 on 64 to 512 channels at 56² down to 7²,
//! stride 1 and 2; 1×1 stride-2 shortcuts), forward and both backward products, which W4's
//! small CNN does not reach. The PyTorch twin is `bench/torch_resnet.py`.

use forgia::models::resnet::{ResNetConfig, ResNetForImageClassification};
use forgia::nn::Module;
use forgia::optim::{Optimizer, Sgd, SgdConfig};
use forgia::{Indices, Rng, Tensor};

use super::{line, median_ms};

/// Batch and image side of W12.
const BATCH: usize = 8;
const SIDE: usize = 224;
/// ImageNet's classes.
const CLASSES: usize = 1000;

/// Runs W12 with `(batch, side)` (the suite's are 8 × 224; smaller sizes check that it runs).
pub(super) fn w12_resnet18(reps: usize, sizes: Option<(usize, usize)>) -> Result<String, forgia::Error> {
    let (b, side) = sizes.unwrap_or((BATCH, SIDE));
    let mut rng = Rng::new(12);
    let x = Tensor::rand(&[b, 3, side, side], -1.0, 1.0, &mut rng)?;
    let labels = Indices::from((0..b).map(|i| (i * 37) % CLASSES).collect::<Vec<usize>>());
    let mut model = ResNetForImageClassification::new(ResNetConfig::default(), CLASSES, &mut rng)?;
    let mut opt = Sgd::new(SgdConfig { lr: 0.01, ..SgdConfig::default() })?;
    let ms = median_ms(reps, || {
        let logits = model.forward(&x)?;
        forgia::loss::cross_entropy(&logits, &labels, Default::default())?.backward()?;
        opt.step(&mut model)?;
        model.zero_grad();
        Ok(())
    })?;
    let gflop = step_gflop(b, side);
    Ok(line(
        "W12",
        ms,
        &[("gflops", format!("{:.1}", gflop / (ms * 1e-3))), ("batch", b.to_string()), ("side", side.to_string())],
    ))
}

/// The step's nominal product work in GFLOP (two per multiply-add): three times the
/// forward's convolutions and classifier (forward, input gradient, weight gradient), counting
/// the stem's input gradient, which is not computed.
fn step_gflop(b: usize, side: usize) -> f64 {
    let conv: f64 = convolutions(side).iter().map(|&(s, ci, co, k)| 2.0 * (s * s * ci * co * k * k) as f64).sum();
    let fc = 2.0 * (ResNetConfig::default().hidden_sizes.last().copied().unwrap_or(0) * CLASSES) as f64;
    3.0 * b as f64 * (conv + fc) / 1e9
}

/// `(output side, input channels, output channels, kernel)` of every convolution of the
/// default ResNet-18 on images of side `side`, in the order the forward runs them.
pub(super) fn convolutions(side: usize) -> Vec<(usize, usize, usize, usize)> {
    let c = ResNetConfig::default();
    let mut convs = Vec::new();
    let mut s = side.div_ceil(2);
    convs.push((s, c.num_channels, c.embedding_size, 7));
    s = s.div_ceil(2); // max pool
    let mut cin = c.embedding_size;
    for (i, (&cout, &depth)) in c.hidden_sizes.iter().zip(&c.depths).enumerate() {
        for j in 0..depth {
            let stride = if i > 0 && j == 0 { 2 } else { 1 };
            let out = s.div_ceil(stride);
            if cin != cout || stride != 1 {
                convs.push((out, cin, cout, 1));
            }
            convs.push((out, cin, cout, 3));
            convs.push((out, cout, cout, 3));
            s = out;
            cin = cout;
        }
    }
    convs
}
