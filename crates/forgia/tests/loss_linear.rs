//! The fused linear–cross-entropy: the same loss and gradients as `linear` + `cross_entropy`
//! for every reduction, ignore_index, smoothing and chunking; gradcheck and second order; and
//! its memory: the peak of live tensor storage is a fraction of the unfused path's.

mod common;

use common::golden::assert_close;
use common::isolated::isolated;
use common::second_order;
use forgia::loss::{self, CrossEntropyOptions, LinearCrossEntropyOptions, Reduction};
use forgia::{peak_bytes, reset_peak_bytes, Indices, Result, Rng, Tensor};

fn labels(n: usize, v: usize, rng: &mut Rng, ignore_every: usize) -> Vec<i64> {
    (0..n).map(|i| if ignore_every > 0 && i % ignore_every == 1 { -100 } else { rng.below(v) as i64 }).collect()
}

fn unfused(h: &Tensor, w: &Tensor, b: Option<&Tensor>, l: &Indices, o: CrossEntropyOptions) -> Result<Tensor> {
    let logits = h.linear(w, b)?;
    let v = w.shape()[0];
    let flat = logits.reshape(&[l.len(), v])?;
    let out = loss::cross_entropy(&flat, &l.reshape(&[l.len()])?, o)?;
    if o.reduction == Reduction::None {
        out.reshape(l.shape())
    } else {
        Ok(out)
    }
}

#[test]
fn fused_linear_cross_entropy_equals_the_unfused_path() {
    let mut rng = Rng::new(41);
    for (shape, chunk, bias, reduction, smoothing, ignore) in [
        (vec![7, 5], 3, true, Reduction::Mean, 0.0, 3),
        (vec![2, 3, 5], 4, false, Reduction::Sum, 0.1, 0),
        (vec![6, 5], 64, true, Reduction::None, 0.2, 2),
        (vec![5, 5], 1, false, Reduction::Mean, 0.05, 0),
    ] {
        let (d, v) = (shape[shape.len() - 1], 11);
        let h = Tensor::randn(&shape, 0.0, 1.0, &mut rng).unwrap().into_variable();
        let w = Tensor::randn(&[v, d], 0.0, 0.5, &mut rng).unwrap().into_variable();
        let b = Tensor::randn(&[v], 0.0, 0.5, &mut rng).unwrap().into_variable();
        let lead = &shape[..shape.len() - 1];
        let l = Indices::new(labels(lead.iter().product(), v, &mut rng, ignore), lead).unwrap();
        let ce = CrossEntropyOptions { label_smoothing: smoothing, reduction, ..Default::default() };
        let bias = bias.then_some(&b);
        let fused =
            loss::linear_cross_entropy(&h, &w, bias, &l, LinearCrossEntropyOptions { cross_entropy: ce, chunk })
                .unwrap();
        let plain = unfused(&h, &w, bias, &l, ce).unwrap();
        assert_close(&fused, &plain, 1e-5, "value");
        let seed = Tensor::randn(fused.shape(), 0.0, 1.0, &mut rng).unwrap();
        let grads = |y: &Tensor| {
            y.backward_with_grad(&seed).unwrap();
            let g: Vec<Tensor> = [&h, &w, &b].iter().filter_map(|t| t.grad()).collect();
            [&h, &w, &b].iter().for_each(|t| t.zero_grad());
            g
        };
        let (gf, gp) = (grads(&fused), grads(&plain));
        assert_eq!(gf.len(), gp.len());
        for (i, (a, e)) in gf.iter().zip(&gp).enumerate() {
            assert_close(a, e, 1e-5, &format!("grad {i}"));
        }
    }
}

#[test]
fn fused_linear_cross_entropy_passes_gradcheck_and_second_order() {
    let mut rng = Rng::new(42);
    let l = Indices::new(vec![1, 4, -100, 0, 2], &[5]).unwrap();
    let opts = LinearCrossEntropyOptions {
        cross_entropy: CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() },
        chunk: 2,
    };
    let f = move |x: &[Tensor]| loss::linear_cross_entropy(&x[0], &x[1], Some(&x[2]), &l, opts);
    let xs = [common::normal_var(&[5, 3], 1), common::normal_var(&[6, 3], 2), common::normal_var(&[6], 3)];
    common::check(&f, &xs, "linear_cross_entropy");
    let c: Vec<Tensor> = xs.iter().map(|x| Tensor::randn(x.shape(), 0.0, 1.0, &mut rng).unwrap()).collect();
    second_order::check(&f, &xs, &Tensor::scalar(1.3), &c);
}

/// Peak live bytes of one forward + backward pass of `f`.
fn peak_of(f: impl FnOnce() -> Result<Tensor>) -> usize {
    reset_peak_bytes();
    f().unwrap().backward().unwrap();
    peak_bytes()
}

#[test]
fn fused_linear_cross_entropy_peaks_at_under_a_quarter_of_the_unfused_memory() {
    isolated("fused_linear_cross_entropy_peaks_at_under_a_quarter_of_the_unfused_memory", || {
        let mut rng = Rng::new(43);
        let (t, d, v) = (1024, 32, 4096);
        let h = Tensor::randn(&[t, d], 0.0, 1.0, &mut rng).unwrap().into_variable();
        let w = Tensor::randn(&[v, d], 0.0, 0.2, &mut rng).unwrap().into_variable();
        let l = Indices::new(labels(t, v, &mut rng, 0), &[t]).unwrap();
        let opts = LinearCrossEntropyOptions { chunk: 64, ..Default::default() };
        let fused = peak_of(|| loss::linear_cross_entropy(&h, &w, None, &l, opts));
        h.zero_grad();
        w.zero_grad();
        let plain = peak_of(|| unfused(&h, &w, None, &l, CrossEntropyOptions::default()));
        // Unfused: the [t, v] logits and their gradient (16 MB each) are alive together.
        assert!(plain >= 2 * t * v * 4, "unfused peak {plain}");
        assert!(4 * fused <= plain, "fused peak {fused} bytes vs unfused {plain}");
    });
}

/// The sizes: vocabulary 50,257, 8,192 tokens, width 768 (about 2.5 TFLOP and 4 GB for
/// both paths together, so it is not part of the default suite). Prints both peaks in MB:
/// `cargo test --release -p forgia --test loss_linear -- --ignored --nocapture`
#[test]
#[ignore = "heavy: the issue's full LM-head size; run by hand (command in the doc comment)"]
fn fused_linear_cross_entropy_at_gpt2_size_peaks_under_a_quarter_of_the_unfused_path() {
    // The only ignored test of this file, so it runs alone and the peak counter is its own.
    {
        let mut rng = Rng::new(44);
        let (t, d, v) = (8192, 768, 50257);
        let h = Tensor::randn(&[t, d], 0.0, 1.0, &mut rng).unwrap().into_variable();
        let w = Tensor::randn(&[v, d], 0.0, 0.02, &mut rng).unwrap().into_variable();
        let l = Indices::new(labels(t, v, &mut rng, 0), &[t]).unwrap();
        let mb = |b: usize| b as f64 / (1024.0 * 1024.0);
        let fused = peak_of(|| loss::linear_cross_entropy(&h, &w, None, &l, LinearCrossEntropyOptions::default()));
        h.zero_grad();
        w.zero_grad();
        let plain = peak_of(|| unfused(&h, &w, None, &l, CrossEntropyOptions::default()));
        println!(
            "peak_live_mb fused {:.0} unfused {:.0} ratio {:.3}",
            mb(fused),
            mb(plain),
            fused as f64 / plain as f64
        );
        assert!(4 * fused <= plain, "fused peak {fused} bytes vs unfused {plain}");
    }
}
