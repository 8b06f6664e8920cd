//! Dropout and the ternary straight-through matmul: masks as pure functions of the seed,
//! bitwise replay, gradcheck and named errors.

use forgia::{gradcheck, ErrorKind, GradcheckOptions, Rng, Tensor};

#[test]
fn dropout_keeps_about_one_minus_p_and_scales_the_rest() {
    let x = Tensor::ones(&[10000]).unwrap();
    let y = x.dropout(0.25, 42, true).unwrap().to_vec();
    let kept = y.iter().filter(|&&v| v != 0.0).count();
    assert!((7300..7700).contains(&kept), "{kept}");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
}

#[test]
fn dropout_is_the_identity_in_eval_mode_or_with_p_zero() {
    let x = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    assert_eq!(x.dropout(0.9, 1, false).unwrap().to_vec(), x.to_vec());
    assert_eq!(x.dropout(0.0, 1, true).unwrap().to_vec(), x.to_vec());
    assert_eq!(x.dropout(1.0, 1, true).unwrap().to_vec(), vec![0.0; 3]);
}

#[test]
fn dropout_gradient_is_the_same_mask_scaled() {
    // d(y_i)/d(x_i) = mask_i / (1 - p): exactly y_i / x_i.
    let x = Tensor::variable((1..=64).map(|v| v as f32).collect(), &[8, 8]).unwrap();
    let y = x.dropout(0.5, 7, true).unwrap();
    y.sum_all().backward().unwrap();
    let (yv, xv, g) = (y.to_vec(), x.to_vec(), x.grad().unwrap().to_vec());
    for i in 0..64 {
        assert_eq!(g[i], yv[i] / xv[i]);
    }
    let r = gradcheck(|v| v[0].transpose(0, 1)?.dropout(0.3, 9, true), &[x], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

#[test]
fn a_dropout_block_run_twice_with_one_seed_is_bitwise_identical() {
    let run = || {
        let x = Tensor::randn(&[4, 16], 0.0, 1.0, &mut Rng::new(3)).unwrap().into_variable();
        let w = Tensor::randn(&[16, 8], 0.0, 1.0, &mut Rng::new(4)).unwrap().into_variable();
        let y = x.matmul(&w).unwrap().tanh().dropout(0.4, 1234, true).unwrap();
        y.mul(&y).unwrap().sum_all().backward().unwrap();
        (y.to_vec(), x.grad().unwrap().to_vec(), w.grad().unwrap().to_vec())
    };
    let (a, b) = (run(), run());
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.0), bits(&b.0));
    assert_eq!(bits(&a.1), bits(&b.1));
    assert_eq!(bits(&a.2), bits(&b.2));
    // Another seed gives another mask.
    let x = Tensor::ones(&[64]).unwrap();
    assert_ne!(x.dropout(0.5, 1, true).unwrap().to_vec(), x.dropout(0.5, 2, true).unwrap().to_vec());
}

#[test]
fn bad_dropout_probability_is_a_named_error() {
    let x = Tensor::ones(&[3]).unwrap();
    for p in [-0.1, 1.5, f32::NAN] {
        assert!(matches!(x.dropout(p, 0, true).unwrap_err().kind(), ErrorKind::InvalidArgument { arg: "p", .. }));
    }
}

#[test]
fn ternary_ste_matmul_quantizes_forward_and_passes_weight_gradient_straight_through() {
    // w row [0.9, -0.1, -2.0]: s = 1.0, q = [1, 0, -1], w_q = [1, 0, -1].
    let x = Tensor::variable(vec![1.0, 2.0, 3.0], &[1, 3]).unwrap();
    let w = Tensor::variable(vec![0.9, -0.1, -2.0], &[1, 3]).unwrap();
    let y = x.ternary_ste_matmul(&w).unwrap();
    assert!((y.to_vec()[0] - (1.0 - 3.0)).abs() < 1e-6);
    y.sum_all().backward().unwrap();
    // gx = gy · w_q, gw = gyᵀ · x (unquantized).
    assert_eq!(x.grad().unwrap().to_vec(), vec![1.0, 0.0, -1.0]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![1.0, 2.0, 3.0]);
}

#[test]
fn ternary_ste_matmul_input_gradient_passes_gradcheck_and_batches() {
    let x = Tensor::randn(&[2, 3, 5], 0.0, 1.0, &mut Rng::new(1)).unwrap().into_variable();
    let w = Tensor::randn(&[4, 5], 0.0, 1.0, &mut Rng::new(2)).unwrap(); // constant: the STE is not a true gradient
    let r = gradcheck(|v| v[0].ternary_ste_matmul(&w), std::slice::from_ref(&x), GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
    let wv = w.clone().into_variable();
    let y = x.ternary_ste_matmul(&wv).unwrap();
    assert_eq!(y.shape(), &[2, 3, 4]);
    y.sum_all().backward().unwrap();
    // gw[o, i] = Σ_rows x[.., i].
    let expect = x.sum([0, 1], false).unwrap().to_vec();
    for row in wv.grad().unwrap().to_vec().chunks(5) {
        assert!(row.iter().zip(&expect).all(|(a, b)| (a - b).abs() < 1e-5));
    }
    let bad = x.ternary_ste_matmul(&Tensor::zeros(&[4, 4]).unwrap()).unwrap_err();
    assert!(matches!(bad.kind(), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        x.ternary_ste_matmul(&Tensor::zeros(&[5]).unwrap()).unwrap_err().kind(),
        ErrorKind::RankMismatch { .. }
    ));
}

/// The kept (non-zero) positions of `dropout(p, seed)` over `n` ones.
fn kept(n: usize, p: f32, seed: u64) -> Vec<bool> {
    Tensor::ones(&[n]).unwrap().dropout(p, seed, true).unwrap().to_vec().iter().map(|&v| v != 0.0).collect()
}

#[test]
fn the_keep_rate_is_one_minus_p_within_four_standard_deviations_at_every_p() {
    let n = 200_000; // above the parallel threshold: the chunked path
    for p in [0.01f32, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
        for seed in [0, 1, 0xDEAD_BEEF] {
            let k = kept(n, p, seed).iter().filter(|&&b| b).count() as f64;
            let (mean, sd) = (n as f64 * (1.0 - p as f64), (n as f64 * p as f64 * (1.0 - p as f64)).sqrt());
            assert!((k - mean).abs() < 4.0 * sd, "p {p} seed {seed}: kept {k}, expected {mean} ± {sd}");
        }
    }
}

#[test]
fn masks_are_independent_across_neighbouring_positions_and_across_seeds() {
    let (n, p) = (100_000, 0.5f32);
    let a = kept(n, p, 11);
    // Neighbours at several distances: both kept about (1-p)² of the time.
    for d in [1, 2, 3, 16, 64, 1024] {
        let both = (0..n - d).filter(|&i| a[i] && a[i + d]).count() as f64 / (n - d) as f64;
        assert!((both - 0.25).abs() < 0.01, "distance {d}: {both}");
    }
    // Consecutive seeds (as `Dropout::seed_of_call` never gives, the hardest case) and a
    // seed one bit apart: agreement about p² + (1-p)² = 1/2, not more.
    for other in [12, 11 ^ (1 << 40), 11 ^ (1 << 32)] {
        let b = kept(n, p, other);
        let agree = a.iter().zip(&b).filter(|(x, y)| x == y).count() as f64 / n as f64;
        assert!((agree - 0.5).abs() < 0.01, "seed {other}: agreement {agree}");
    }
}
