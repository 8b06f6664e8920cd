//! Attention and rotary embeddings: literal values, gradcheck (causal, masks, non-contiguous),
//! JAX goldens and named errors.

mod common;

use common::golden;
use common::{check, normal_var as var};
use forgia::{AttentionOptions, ErrorKind, Rng, Tensor};

#[test]
fn attention_with_equal_scores_averages_the_values() {
    // q = 0 gives equal scores: every output row is the mean of v; dv = gy / Sk per key.
    let q = Tensor::zeros(&[1, 1, 2, 2]).unwrap();
    let k = Tensor::ones(&[1, 1, 3, 2]).unwrap();
    let v = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 1, 3, 2]).unwrap();
    let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions::default()).unwrap();
    assert_eq!(y.to_vec(), vec![3.0, 4.0, 3.0, 4.0]);
    y.sum_all().backward().unwrap();
    assert!(v.grad().unwrap().to_vec().iter().all(|g| (g - 2.0 / 3.0).abs() < 1e-6));
}

#[test]
fn causal_attention_lets_the_first_query_see_only_the_first_key() {
    let q = var(&[1, 1, 3, 2], 1);
    let k = var(&[1, 1, 3, 2], 2);
    let v = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 1, 3, 2]).unwrap();
    let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions { causal: true, ..Default::default() }).unwrap();
    assert_eq!(&y.to_vec()[..2], &[1.0, 2.0]);
}

#[test]
fn attention_gradients_pass_gradcheck() {
    let (q, k, v) = (var(&[2, 2, 3, 4], 3), var(&[2, 2, 5, 4], 4), var(&[2, 2, 5, 3], 5));
    let qkv = [q.clone(), k.clone(), v.clone()];
    check(|x| x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions::default()), &qkv, "plain");
    let causal = AttentionOptions { causal: true, scale: Some(0.7), ..Default::default() };
    check(|x| x[0].scaled_dot_product_attention(&x[1], &x[2], causal), &qkv, "causal");
    // A broadcast mask [Sq, Sk] and a per-head mask [1, 2, 1, Sk], both differentiable.
    for (i, shape) in [vec![3, 5], vec![1, 2, 1, 5]].into_iter().enumerate() {
        let m = var(&shape, 6 + i as u64);
        let inputs = [q.clone(), k.clone(), v.clone(), m];
        check(
            |x| {
                x[0].scaled_dot_product_attention(
                    &x[1],
                    &x[2],
                    AttentionOptions { mask: Some(&x[3]), ..Default::default() },
                )
            },
            &inputs,
            &format!("mask {shape:?}"),
        );
    }
    // Non-contiguous operands: q from a transposed [B, S, H, D] layout.
    let qt = var(&[2, 3, 2, 4], 9);
    check(
        |x| x[0].transpose(1, 2)?.scaled_dot_product_attention(&x[1], &x[2], AttentionOptions::default()),
        &[qt, k, v],
        "transposed q",
    );
}

fn assert_near(a: &Tensor, b: &Tensor, tol: f32, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    for (i, (x, y)) in a.to_vec().iter().zip(b.to_vec()).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

/// A fresh variable holding `t`'s values, packed.
fn packed_copy(t: &Tensor) -> Tensor {
    Tensor::from_vec(t.to_vec(), t.shape()).unwrap().into_variable()
}

#[test]
fn head_split_views_are_read_in_place_and_match_packed_operands() {
    // Odd sizes reach every tile remainder; B = 4 >= the workers, so outputs interleave heads.
    let (b, s, h, dh) = (4, 13, 3, 10);
    for causal in [false, true] {
        let xs: Vec<Tensor> = (0..3).map(|i| var(&[b, s, h * dh], 20 + i)).collect();
        let split = |x: &Tensor| x.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap();
        let views: Vec<Tensor> = xs.iter().map(split).collect();
        let packed: Vec<Tensor> = views.iter().map(packed_copy).collect();
        let opts = AttentionOptions { causal, ..Default::default() };
        let y = views[0].scaled_dot_product_attention(&views[1], &views[2], opts).unwrap();
        let r = packed[0].scaled_dot_product_attention(&packed[1], &packed[2], opts).unwrap();
        assert_near(&y, &r, 1e-6, "output");
        if forgia::num_threads() <= b {
            // Stored [B, S, H, Dv]: merging the heads back is a free view.
            assert!(y.transpose(1, 2).unwrap().is_contiguous());
        }
        let c = Tensor::randn(&[b, h, s, dh], 0.0, 1.0, &mut Rng::new(30)).unwrap();
        y.transpose(1, 2)
            .unwrap()
            .reshape(&[b, s, h * dh])
            .unwrap()
            .backward_with_grad(&c.transpose(1, 2).unwrap().reshape(&[b, s, h * dh]).unwrap())
            .unwrap();
        r.backward_with_grad(&c).unwrap();
        for (x, p) in xs.iter().zip(&packed) {
            let want = p.grad().unwrap().transpose(1, 2).unwrap().reshape(&[b, s, h * dh]).unwrap();
            assert_near(&x.grad().unwrap(), &want, 1e-6, &format!("grad, causal {causal}"));
        }
    }
}

#[test]
fn causal_attention_matches_an_explicit_mask_for_any_lengths_and_widths() {
    for (sq, sk) in [(37, 37), (21, 45), (45, 21)] {
        let (q, k, v) = (var(&[2, 2, sq, 20], 40), var(&[2, 2, sk, 20], 41), var(&[2, 2, sk, 12], 42));
        let data = (0..sq * sk).map(|e| if e % sk <= e / sk { 0.0 } else { f32::NEG_INFINITY }).collect();
        let mask = Tensor::from_vec(data, &[sq, sk]).unwrap();
        let causal = AttentionOptions { causal: true, ..Default::default() };
        let masked = AttentionOptions { mask: Some(&mask), ..Default::default() };
        let (q2, k2, v2) = (packed_copy(&q), packed_copy(&k), packed_copy(&v));
        let y = q.scaled_dot_product_attention(&k, &v, causal).unwrap();
        let r = q2.scaled_dot_product_attention(&k2, &v2, masked).unwrap();
        assert_near(&y, &r, 1e-6, &format!("output {sq}x{sk}"));
        let c = Tensor::randn(&[2, 2, sq, 12], 0.0, 1.0, &mut Rng::new(43)).unwrap();
        y.backward_with_grad(&c).unwrap();
        r.backward_with_grad(&c).unwrap();
        for (a, b) in [(&q, &q2), (&k, &k2), (&v, &v2)] {
            assert_near(&a.grad().unwrap(), &b.grad().unwrap(), 1e-6, &format!("grad {sq}x{sk}"));
        }
    }
}

#[test]
fn a_fully_masked_query_row_gives_zero_output_and_zero_gradients() {
    let (q, k, v) = (var(&[1, 2, 3, 4], 50), var(&[1, 2, 5, 4], 51), var(&[1, 2, 5, 3], 52));
    let mut data = vec![0.0; 15];
    data[5..10].fill(f32::NEG_INFINITY); // query 1 sees no key
    let mask = Tensor::from_vec(data, &[3, 5]).unwrap();
    let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions { mask: Some(&mask), ..Default::default() });
    let y = y.unwrap();
    let yv = y.to_vec();
    for hd in 0..2 {
        assert_eq!(&yv[hd * 9 + 3..hd * 9 + 6], &[0.0; 3]);
    }
    y.sum_all().backward().unwrap();
    let gq = q.grad().unwrap().to_vec();
    for hd in 0..2 {
        assert_eq!(&gq[hd * 12 + 4..hd * 12 + 8], &[0.0; 4]);
    }
    assert!(k.grad().unwrap().to_vec().iter().chain(&v.grad().unwrap().to_vec()).all(|g| g.is_finite()));
}

#[test]
fn empty_lengths_widths_and_batches_give_empty_or_zero_results() {
    let zeros = |t: &Tensor| t.grad().is_none_or(|g| g.to_vec().iter().all(|&x| x == 0.0));
    let opts = AttentionOptions { scale: Some(1.0), ..Default::default() };
    // (q, k, v) shapes: no queries, no keys, zero widths, no batch.
    let cases = [
        ([2, 2, 0, 4], [2, 2, 3, 4], [2, 2, 3, 5]),
        ([1, 2, 3, 4], [1, 2, 0, 4], [1, 2, 0, 5]),
        ([2, 2, 3, 0], [2, 2, 3, 0], [2, 2, 3, 2]),
        ([2, 2, 3, 4], [2, 2, 3, 4], [2, 2, 3, 0]),
        ([0, 2, 3, 4], [0, 2, 3, 4], [0, 2, 3, 4]),
    ];
    for (qs, ks, vs) in cases {
        let (q, k, v) = (var(&qs, 60), var(&ks, 61), var(&vs, 62));
        for causal in [false, true] {
            let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions { causal, ..opts }).unwrap();
            assert_eq!(y.shape(), &[qs[0], qs[1], qs[2], vs[3]]);
            if ks[2] == 0 {
                assert!(y.to_vec().iter().all(|&e| e == 0.0), "no keys: zero rows");
            }
            y.sum_all().backward().unwrap();
            if qs[2] == 0 || vs[3] == 0 {
                assert!(zeros(&k) && zeros(&v), "{qs:?} {ks:?} {vs:?}");
            }
            for t in [&q, &k, &v] {
                t.zero_grad();
            }
        }
    }
}

#[test]
fn rope_rotates_the_second_position_by_its_angle() {
    // D = 2: one frequency (1). Position 1 rotates (1, 0) by 1 radian; position 0 is unchanged.
    let x = Tensor::from_vec(vec![1.0, 0.0, 1.0, 0.0], &[1, 1, 2, 2]).unwrap();
    let y = x.rope(10000.0).unwrap().to_vec();
    assert_eq!(&y[..2], &[1.0, 0.0]);
    assert!((y[2] - 1f32.cos()).abs() < 1e-6 && (y[3] - 1f32.sin()).abs() < 1e-6);
}

#[test]
fn rope_gradients_pass_gradcheck_and_invert_exactly() {
    let x = var(&[2, 2, 5, 6], 10);
    check(|v| v[0].rope(100.0), std::slice::from_ref(&x), "rope");
    check(|v| v[0].transpose(1, 2)?.rope(10.0), std::slice::from_ref(&x), "rope transposed");
    // The gradient of <rope(x), c> is the inverse rotation of c: rotating it forward gives c.
    let c = Tensor::randn(&[2, 2, 5, 6], 0.0, 1.0, &mut Rng::new(11)).unwrap();
    let y = x.rope(100.0).unwrap();
    y.backward_with_grad(&c).unwrap();
    let back = x.grad().unwrap().rope(100.0).unwrap().to_vec();
    assert!(back.iter().zip(c.to_vec()).all(|(a, b)| (a - b).abs() < 1e-5));
}

#[test]
fn attention_and_rope_match_the_jax_goldens() {
    let cases: Vec<_> =
        golden::load("nn").into_iter().filter(|c| c.op == "scaled_dot_product_attention" || c.op == "rope").collect();
    assert_eq!(cases.len(), 7);
    for case in &cases {
        golden::check_case(case, 1e-5, |v| {
            if case.op == "rope" {
                v[0].rope(case.attrs["base"].as_f64().unwrap() as f32)
            } else {
                let opts = AttentionOptions {
                    causal: case.attrs["causal"].as_bool().unwrap(),
                    mask: v.get(3),
                    scale: Some(case.attrs["scale"].as_f64().unwrap() as f32),
                    ..Default::default()
                };
                v[0].scaled_dot_product_attention(&v[1], &v[2], opts)
            }
        });
    }
}

#[test]
fn bad_attention_and_rope_inputs_are_named_errors() {
    let q = Tensor::zeros(&[1, 2, 3, 4]).unwrap();
    let kind = |r: forgia::Result<Tensor>| r.unwrap_err().into_kind();
    let sdpa = |k: &Tensor, v: &Tensor, o: AttentionOptions| q.scaled_dot_product_attention(k, v, o);
    let bad_mask = Tensor::zeros(&[2, 3]).unwrap();
    let opts = AttentionOptions { mask: Some(&bad_mask), ..Default::default() };
    assert!(matches!(kind(sdpa(&q, &q, opts)), ErrorKind::ShapeMismatch { .. }));
    let too_big = Tensor::zeros(&[1, 1, 2, 3, 3]).unwrap();
    let opts = AttentionOptions { mask: Some(&too_big), ..Default::default() };
    assert!(matches!(kind(sdpa(&q, &q, opts)), ErrorKind::ShapeMismatch { .. }));
    assert!(matches!(
        kind(sdpa(&Tensor::zeros(&[1, 2, 3, 5]).unwrap(), &q, Default::default())),
        ErrorKind::ShapeMismatch { .. }
    ));
    assert!(matches!(
        kind(sdpa(&q, &Tensor::zeros(&[1, 2, 4, 4]).unwrap(), Default::default())),
        ErrorKind::ShapeMismatch { .. }
    ));
    assert!(matches!(
        kind(sdpa(&Tensor::zeros(&[2, 3, 4]).unwrap(), &q, Default::default())),
        ErrorKind::RankMismatch { .. }
    ));
    assert!(matches!(
        kind(Tensor::zeros(&[1, 1, 2, 3]).unwrap().rope(10000.0)),
        ErrorKind::InvalidArgument { arg: "x", .. }
    ));
    assert!(matches!(kind(q.rope(-1.0)), ErrorKind::InvalidArgument { arg: "base", .. }));
    assert!(matches!(kind(Tensor::zeros(&[4]).unwrap().rope(10.0)), ErrorKind::RankMismatch { .. }));
}

#[test]
fn a_query_row_holding_nan_gives_nan_not_the_zeros_of_a_masked_row() {
    // One head, two queries, three keys; the first query is all NaN, the second is finite.
    let q = Tensor::from_vec(vec![f32::NAN, f32::NAN, 0.5, -0.5], &[1, 1, 2, 2]).unwrap();
    let k = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0], &[1, 1, 3, 2]).unwrap();
    let v = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[1, 1, 3, 2]).unwrap();
    let y = q.scaled_dot_product_attention(&k, &v, AttentionOptions::default()).unwrap().to_vec();
    assert!(y[..2].iter().all(|v| v.is_nan()), "{y:?}");
    assert!(y[2..].iter().all(|v| v.is_finite()), "{y:?}");
    // A row masked out entirely still gives zeros.
    let mask = Tensor::from_vec(vec![f32::NEG_INFINITY; 6], &[1, 1, 2, 3]).unwrap();
    let qf = Tensor::from_vec(vec![0.1, 0.2, 0.5, -0.5], &[1, 1, 2, 2]).unwrap();
    let masked =
        qf.scaled_dot_product_attention(&k, &v, AttentionOptions { mask: Some(&mask), ..Default::default() }).unwrap();
    assert!(masked.to_vec().iter().all(|&v| v == 0.0));
}
