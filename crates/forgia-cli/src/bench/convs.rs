//! W12conv: W12's convolutions one by one. Every distinct convolution of ResNet-18's training
//! step at W12's sizes (batch 8, 224² images), and each of its three products timed apart: the
//! forward, the input gradient (not for the stem, whose input is the data) and the weight
//! gradient, so that a ratio against the twin (`bench/torch_resnet_convs.py`, oneDNN's
//! kernels through `aten.convolution_backward`) says which product of which layer is behind.
//! `median_ms` is the step's share: each layer's three medians times its count in ResNet-18.

use forgia::{Conv2dOptions, Rng, Tensor};

use super::{line, median};

/// A convolution of ResNet-18: its key in the output, its input side at 224² images, input
/// and output channels, kernel side, stride, how many of it one step runs, and whether the
/// step computes its input gradient (all but the stem's).
struct Layer {
    key: &'static str,
    side: usize,
    cin: usize,
    cout: usize,
    k: usize,
    stride: usize,
    count: usize,
    input_gradient: bool,
}

/// W12's convolutions: the stem, the 3×3 layers of each stage (the first of stages 2–4 strided),
/// and the strided 1×1 shortcuts.
const LAYERS: [Layer; 11] = [
    Layer { key: "stem", side: 224, cin: 3, cout: 64, k: 7, stride: 2, count: 1, input_gradient: false },
    Layer { key: "s1", side: 56, cin: 64, cout: 64, k: 3, stride: 1, count: 4, input_gradient: true },
    Layer { key: "s2a", side: 56, cin: 64, cout: 128, k: 3, stride: 2, count: 1, input_gradient: true },
    Layer { key: "s2", side: 28, cin: 128, cout: 128, k: 3, stride: 1, count: 3, input_gradient: true },
    Layer { key: "s3a", side: 28, cin: 128, cout: 256, k: 3, stride: 2, count: 1, input_gradient: true },
    Layer { key: "s3", side: 14, cin: 256, cout: 256, k: 3, stride: 1, count: 3, input_gradient: true },
    Layer { key: "s4a", side: 14, cin: 256, cout: 512, k: 3, stride: 2, count: 1, input_gradient: true },
    Layer { key: "s4", side: 7, cin: 512, cout: 512, k: 3, stride: 1, count: 3, input_gradient: true },
    Layer { key: "d2", side: 56, cin: 64, cout: 128, k: 1, stride: 2, count: 1, input_gradient: true },
    Layer { key: "d3", side: 28, cin: 128, cout: 256, k: 1, stride: 2, count: 1, input_gradient: true },
    Layer { key: "d4", side: 14, cin: 256, cout: 512, k: 1, stride: 2, count: 1, input_gradient: true },
];

/// Median milliseconds of the part of `f` it times itself (`f` returns its own span): one
/// warm-up call, then `reps` timed ones. Fixed counts, not W12's 3-second rule: 32 products
/// at 3 s each would make one run last minutes.
fn median_of(reps: usize, mut f: impl FnMut() -> Result<f64, forgia::Error>) -> Result<f64, forgia::Error> {
    f()?;
    Ok(median((0..reps.max(1)).map(|_| f()).collect::<Result<_, _>>()?))
}

/// Milliseconds since `t`.
fn since(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Runs W12conv with `(batch, side)` (W12's 8 × 224 by default; the layers' sides scale with
/// the image's, at least 1).
pub(super) fn w12_convs(reps: usize, sizes: Option<(usize, usize)>) -> Result<String, forgia::Error> {
    let (b, image) = sizes.unwrap_or((8, 224));
    let mut rng = Rng::new(12);
    let (mut total, mut extra) = (0.0, Vec::new());
    for l in &LAYERS {
        let side = (l.side * image / 224).max(1);
        let opts = Conv2dOptions { stride: (l.stride, l.stride), padding: (l.k / 2, l.k / 2), ..Default::default() };
        let x = Tensor::rand(&[b, l.cin, side, side], -1.0, 1.0, &mut rng)?;
        let w = Tensor::rand(&[l.cout, l.cin, l.k, l.k], -0.05, 0.05, &mut rng)?;
        let shape = x.conv2d(&w, None, opts)?.value().shape().to_vec();
        let gy = Tensor::rand(&shape, -1.0, 1.0, &mut rng)?;
        let forward = median_of(reps, || {
            let t = std::time::Instant::now();
            x.conv2d(&w, None, opts)?;
            Ok(since(t))
        })?;
        // A gradient alone: only its operand is a variable, so backward runs that product.
        let gradient = |wrt_input: bool| {
            median_of(reps, || {
                let (x, w) = if wrt_input {
                    (x.detach().into_variable(), w.detach())
                } else {
                    (x.detach(), w.detach().into_variable())
                };
                let y = x.conv2d(&w, None, opts)?;
                let t = std::time::Instant::now();
                y.backward_with_grad(&gy)?;
                Ok(since(t))
            })
        };
        let input = if l.input_gradient { gradient(true)? } else { 0.0 };
        let weight = gradient(false)?;
        total += l.count as f64 * (forward + input + weight);
        extra.push((format!("{}_f", l.key), forward));
        if l.input_gradient {
            extra.push((format!("{}_d", l.key), input));
        }
        extra.push((format!("{}_w", l.key), weight));
    }
    let extra: Vec<(&str, String)> = extra.iter().map(|(k, v)| (k.as_str(), format!("{v:.3}"))).collect();
    Ok(line("W12conv", total, &extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layers_are_resnet18s_convolutions_each_counted_as_often_as_the_step_runs_it() {
        let mut want = super::super::w12::convolutions(224);
        let mut got: Vec<(usize, usize, usize, usize)> = LAYERS
            .iter()
            .flat_map(|l| {
                let out = (l.side + 2 * (l.k / 2) - l.k) / l.stride + 1;
                std::iter::repeat_n((out, l.cin, l.cout, l.k), l.count)
            })
            .collect();
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        // Only the stem, whose input is the data, goes without an input gradient.
        assert!(LAYERS.iter().all(|l| l.input_gradient == (l.cin != 3)));
    }

    #[test]
    fn a_small_run_reports_every_product_of_every_layer() {
        let line = w12_convs(1, Some((1, 32))).unwrap();
        let extra = line.split_once(" extra=").unwrap().1;
        let keys: Vec<&str> = extra.split(',').map(|kv| kv.split_once('=').unwrap().0).collect();
        let want: Vec<String> = LAYERS
            .iter()
            .flat_map(|l| {
                let products: &[&str] = if l.input_gradient { &["f", "d", "w"] } else { &["f", "w"] };
                products.iter().map(move |p| format!("{}_{p}", l.key))
            })
            .collect();
        assert_eq!(keys, want);
        assert!(line.starts_with("name=W12conv impl=forgia median_ms="), "{line}");
    }
}
