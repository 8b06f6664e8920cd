//! Attention for today's models: grouped-query heads, boolean and key masks, sliding windows,
//! ALiBi, sinks, seeded dropout, RoPE at offsets and position ids, the masked softmax, and
//! second order through all of them; gradcheck, PyTorch goldens and literal checks.

mod common;

use common::golden;
use common::{check, normal_var as var, second_order};
use forgia::nn::{Module, MultiHeadAttention, TransformerBlock};
use forgia::{
    alibi_slopes, AttentionDropout, AttentionOptions, BackwardOptions, MaskedSoftmaxOptions, Rng, RopeOptions, Tensor,
};

fn assert_near(a: &Tensor, b: &Tensor, tol: f32, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shapes");
    for (i, (x, y)) in a.to_vec().iter().zip(b.to_vec()).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
    }
}

/// `t [B, Hkv, S, W]` with each head repeated `rep` times: `[B, Hkv·rep, S, W]`.
fn repeat_heads(t: &Tensor, rep: usize) -> Tensor {
    let s = t.shape().to_vec();
    t.unsqueeze(2)
        .unwrap()
        .broadcast_to(&[s[0], s[1], rep, s[2], s[3]])
        .unwrap()
        .reshape(&[s[0], s[1] * rep, s[2], s[3]])
        .unwrap()
}

fn sdpa(x: &[Tensor], o: AttentionOptions<'_>) -> forgia::Result<Tensor> {
    x[0].scaled_dot_product_attention(&x[1], &x[2], o)
}

fn gqa() -> AttentionOptions<'static> {
    AttentionOptions { enable_gqa: true, ..Default::default() }
}

#[test]
fn grouped_query_attention_matches_repeated_key_value_heads() {
    let (q, k, v) = (var(&[2, 6, 5, 4], 1), var(&[2, 2, 7, 4], 2), var(&[2, 2, 7, 3], 3));
    for causal in [false, true] {
        let o = AttentionOptions { causal, ..gqa() };
        let y = sdpa(&[q.clone(), k.clone(), v.clone()], o).unwrap();
        let (kr, vr) = (repeat_heads(&k, 3), repeat_heads(&v, 3));
        let r = q.scaled_dot_product_attention(&kr, &vr, AttentionOptions { causal, ..Default::default() }).unwrap();
        assert_near(&y, &r, 1e-6, "output");
        let c = Tensor::randn(&[2, 6, 5, 3], 0.0, 1.0, &mut Rng::new(4)).unwrap();
        let leaves = [&q, &k, &v];
        let grads = |y: &Tensor| {
            leaves.iter().for_each(|t| t.zero_grad());
            y.backward_with_grad(&c).unwrap();
            leaves.map(|t| t.grad().unwrap())
        };
        let (a, b) = (grads(&y), grads(&r));
        for (x, y) in a.iter().zip(&b) {
            assert_near(x, y, 1e-5, &format!("grad, causal {causal}"));
        }
    }
}

#[test]
fn grouped_query_attention_reads_head_split_views_in_place() {
    // k, v from [B, S, Hkv·dh] activations through the head-split view, as the module does.
    let (b, s, hq, hkv, dh) = (4, 5, 4, 2, 6);
    let xq = var(&[b, s, hq * dh], 5);
    let xk = var(&[b, s, hkv * dh], 6);
    let xv = var(&[b, s, hkv * dh], 7);
    let f = |x: &[Tensor]| {
        let split = |t: &Tensor, h| t.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap();
        split(&x[0], hq).scaled_dot_product_attention(&split(&x[1], hkv), &split(&x[2], hkv), gqa())
    };
    check(f, &[xq.clone(), xk.clone(), xv.clone()], "gqa views");
    let packed: Vec<Tensor> = [(&xq, hq), (&xk, hkv), (&xv, hkv)]
        .iter()
        .map(|(t, h)| {
            Tensor::from_vec(t.reshape(&[b, s, *h, dh]).unwrap().transpose(1, 2).unwrap().to_vec(), &[b, *h, s, dh])
                .unwrap()
        })
        .collect();
    assert_near(&f(&[xq, xk, xv]).unwrap(), &sdpa(&packed, gqa()).unwrap(), 1e-6, "views vs packed");
}

/// Every option, each as one case: its name, its inputs, and the function of them.
type OptCase = (&'static str, Vec<Tensor>, Box<dyn Fn(&[Tensor]) -> forgia::Result<Tensor>>);

fn option_cases() -> Vec<OptCase> {
    let (q, k, v) = (var(&[1, 4, 4, 3], 10), var(&[1, 2, 5, 3], 11), var(&[1, 2, 5, 2], 12));
    let qkv = || vec![q.clone(), k.clone(), v.clone()];
    let keep =
        Tensor::from_vec(vec![1., 0., 1., 1., 0., 1., 1., 0., 0., 1., 0., 1., 1., 1., 1., 1., 0., 0., 1., 0.], &[4, 5])
            .unwrap();
    let keys = Tensor::from_vec(vec![1., 1., 1., 0., 1.], &[1, 5]).unwrap();
    let slopes = alibi_slopes(4);
    let mut sinks_in = qkv();
    sinks_in.push(var(&[4], 13));
    let mut mask_in = qkv();
    mask_in.push(var(&[1, 1, 4, 5], 14));
    vec![
        ("gqa", qkv(), Box::new(|x: &[Tensor]| sdpa(x, gqa()))),
        ("gqa causal", qkv(), Box::new(|x: &[Tensor]| sdpa(x, AttentionOptions { causal: true, ..gqa() }))),
        (
            "bool mask",
            qkv(),
            Box::new(move |x: &[Tensor]| sdpa(x, AttentionOptions { bool_mask: Some(&keep), ..gqa() })),
        ),
        ("key mask", qkv(), Box::new(move |x: &[Tensor]| sdpa(x, AttentionOptions { key_mask: Some(&keys), ..gqa() }))),
        (
            "window causal",
            qkv(),
            Box::new(|x: &[Tensor]| sdpa(x, AttentionOptions { window: Some(2), causal: true, ..gqa() })),
        ),
        ("window", qkv(), Box::new(|x: &[Tensor]| sdpa(x, AttentionOptions { window: Some(2), ..gqa() }))),
        (
            "alibi",
            qkv(),
            Box::new(move |x: &[Tensor]| {
                sdpa(x, AttentionOptions { alibi_slopes: Some(&slopes), causal: true, ..gqa() })
            }),
        ),
        ("sinks", sinks_in.clone(), Box::new(|x: &[Tensor]| sdpa(x, AttentionOptions { sinks: Some(&x[3]), ..gqa() }))),
        (
            "sinks causal",
            sinks_in,
            Box::new(|x: &[Tensor]| sdpa(x, AttentionOptions { sinks: Some(&x[3]), causal: true, ..gqa() })),
        ),
        (
            "dropout",
            qkv(),
            Box::new(|x: &[Tensor]| {
                sdpa(x, AttentionOptions { dropout: Some(AttentionDropout { p: 0.3, seed: 9 }), ..gqa() })
            }),
        ),
        (
            "kv-cache step: query offset, causal, window, alibi",
            vec![var(&[1, 4, 2, 3], 15), k.clone(), v.clone()],
            Box::new(move |x: &[Tensor]| {
                let slopes = alibi_slopes(4);
                let o = AttentionOptions { query_offset: 3, causal: true, window: Some(3), ..gqa() };
                sdpa(x, AttentionOptions { alibi_slopes: Some(&slopes), ..o })
            }),
        ),
        (
            "additive mask + window + dropout",
            mask_in,
            Box::new(|x: &[Tensor]| {
                let drop = Some(AttentionDropout { p: 0.25, seed: 3 });
                sdpa(x, AttentionOptions { mask: Some(&x[3]), window: Some(3), causal: true, dropout: drop, ..gqa() })
            }),
        ),
    ]
}

#[test]
fn every_attention_option_passes_gradcheck() {
    for (name, xs, f) in option_cases() {
        check(f, &xs, name);
    }
}

#[test]
fn every_attention_option_passes_the_second_order_check() {
    for (name, xs, f) in option_cases() {
        let y = f(&xs).unwrap();
        let seed = Tensor::randn(y.shape(), 0.0, 1.0, &mut Rng::new(20)).unwrap();
        let c: Vec<Tensor> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| Tensor::randn(x.shape(), 0.0, 1.0, &mut Rng::new(30 + i as u64)).unwrap())
            .collect();
        eprintln!("second order: {name}");
        second_order::check(&f, &xs, &seed, &c);
    }
}

#[test]
fn a_create_graph_pass_gives_the_fused_first_order_gradients() {
    for (name, xs, f) in option_cases() {
        let run = |create_graph: bool| {
            let leaves: Vec<Tensor> = xs.iter().map(|x| x.detach().into_variable()).collect();
            let y = f(&leaves).unwrap();
            let seed = Tensor::randn(y.shape(), 0.0, 1.0, &mut Rng::new(40)).unwrap();
            y.backward_with(Some(&seed), BackwardOptions { create_graph, ..Default::default() }).unwrap();
            leaves.iter().map(|l| l.grad().unwrap()).collect::<Vec<_>>()
        };
        for (a, b) in run(true).iter().zip(&run(false)) {
            assert_near(a, b, 1e-5, name);
        }
    }
}

#[test]
fn a_boolean_mask_equals_the_additive_mask_it_stands_for() {
    let (q, k, v) = (var(&[2, 2, 3, 4], 50), var(&[2, 2, 4, 4], 51), var(&[2, 2, 4, 2], 52));
    let keep: Vec<f32> = (0..24).map(|i| if i % 4 == 0 || i % 3 == 1 { 1.0 } else { 0.0 }).collect();
    let add: Vec<f32> = keep.iter().map(|&b| if b != 0.0 { 0.0 } else { f32::NEG_INFINITY }).collect();
    let (keep, add) = (Tensor::from_vec(keep, &[2, 1, 3, 4]).unwrap(), Tensor::from_vec(add, &[2, 1, 3, 4]).unwrap());
    let x = [q, k, v];
    let a = sdpa(&x, AttentionOptions { bool_mask: Some(&keep), ..Default::default() }).unwrap();
    let b = sdpa(&x, AttentionOptions { mask: Some(&add), ..Default::default() }).unwrap();
    assert_eq!(a.to_vec(), b.to_vec());
    // A key mask [B, Sk] is the boolean mask [B, 1, 1, Sk].
    let km = Tensor::from_vec(vec![1., 0., 1., 1., 1., 1., 0., 0.], &[2, 4]).unwrap();
    let a = sdpa(&x, AttentionOptions { key_mask: Some(&km), ..Default::default() }).unwrap();
    let b = sdpa(&x, AttentionOptions { bool_mask: Some(&km.reshape(&[2, 1, 1, 4]).unwrap()), ..Default::default() });
    assert_eq!(a.to_vec(), b.unwrap().to_vec());
}

#[test]
fn a_sliding_window_sees_only_the_last_keys() {
    // Values are one-hot rows, so output (i, j) is the weight query i gives key j.
    let (s, w) = (6, 3);
    let q = var(&[1, 1, s, 2], 60);
    let k = var(&[1, 1, s, 2], 61);
    let eye: Vec<f32> = (0..s * s).map(|e| if e % s == e / s { 1.0 } else { 0.0 }).collect();
    let v = Tensor::from_vec(eye, &[1, 1, s, s]).unwrap();
    for causal in [true, false] {
        let p =
            q.scaled_dot_product_attention(&k, &v, AttentionOptions { window: Some(w), causal, ..Default::default() });
        let p = p.unwrap().to_vec();
        for i in 0..s {
            for j in 0..s {
                let visible = i.abs_diff(j) < w && (j <= i || !causal);
                assert_eq!(p[i * s + j] > 0.0, visible, "causal {causal}: ({i}, {j})");
            }
        }
    }
}

#[test]
fn a_kv_cache_step_at_a_query_offset_matches_the_last_rows_of_the_full_sequence() {
    let (s, n) = (7, 3); // 3 new queries after 4 cached positions
    let (q, k, v) = (var(&[2, 4, s, 4], 140), var(&[2, 2, s, 4], 141), var(&[2, 2, s, 3], 142));
    let slopes = alibi_slopes(4);
    for (causal, window, alibi) in [(true, None, false), (true, Some(3), true), (false, Some(2), false)] {
        let alibi_slopes = alibi.then_some(slopes.as_slice());
        let o = AttentionOptions { causal, window, alibi_slopes, ..gqa() };
        let full = q.scaled_dot_product_attention(&k, &v, o).unwrap().narrow(2, s - n, n).unwrap();
        let step = q.narrow(2, s - n, n).unwrap();
        let step = step.scaled_dot_product_attention(&k, &v, AttentionOptions { query_offset: s - n, ..o }).unwrap();
        assert_near(&step, &full, 1e-6, &format!("causal {causal}, window {window:?}, alibi {alibi}"));
    }
}

#[test]
fn sinks_with_head_split_views_match_packed_operands() {
    let (b, s, h, dh) = (4, 5, 2, 4);
    let xs: Vec<Tensor> = (0..3).map(|i| var(&[b, s, h * dh], 150 + i)).collect();
    let views: Vec<Tensor> = xs.iter().map(|x| x.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap()).collect();
    let packed: Vec<Tensor> = views.iter().map(|t| Tensor::from_vec(t.to_vec(), t.shape()).unwrap()).collect();
    let sinks = var(&[h], 153);
    let drop = Some(AttentionDropout { p: 0.2, seed: 4 });
    let o = AttentionOptions { sinks: Some(&sinks), dropout: drop, causal: true, ..Default::default() };
    assert_near(&sdpa(&views, o).unwrap(), &sdpa(&packed, o).unwrap(), 1e-6, "sinks on views");
    check(
        |x| {
            let split = |t: &Tensor| t.reshape(&[b, s, h, dh]).unwrap().transpose(1, 2).unwrap();
            let o = AttentionOptions { sinks: Some(&x[3]), dropout: drop, causal: true, ..Default::default() };
            split(&x[0]).scaled_dot_product_attention(&split(&x[1]), &split(&x[2]), o)
        },
        &[xs[0].clone(), xs[1].clone(), xs[2].clone(), sinks],
        "sinks and dropout on views",
    );
}

#[test]
fn sinks_take_weight_from_the_keys_and_a_masked_row_stays_zero() {
    let (q, k, v) = (var(&[1, 2, 3, 4], 70), var(&[1, 2, 3, 4], 71), var(&[1, 2, 3, 2], 72));
    let x = [q.clone(), k.clone(), v.clone()];
    // A very negative sink changes nothing; a very positive one silences every row.
    let low = Tensor::from_vec(vec![-80.0, -80.0], &[2]).unwrap();
    let high = Tensor::from_vec(vec![80.0, 80.0], &[2]).unwrap();
    let plain = sdpa(&x, AttentionOptions::default()).unwrap();
    assert_near(
        &sdpa(&x, AttentionOptions { sinks: Some(&low), ..Default::default() }).unwrap(),
        &plain,
        1e-6,
        "low sink",
    );
    let silent = sdpa(&x, AttentionOptions { sinks: Some(&high), ..Default::default() }).unwrap();
    assert!(silent.to_vec().iter().all(|e| e.abs() < 1e-20));
    let mut blocked = vec![0.0; 9];
    blocked[3..6].fill(f32::NEG_INFINITY); // query 1 sees no key
    let m = Tensor::from_vec(blocked, &[3, 3]).unwrap();
    let s = var(&[2], 73);
    let y = sdpa(&x, AttentionOptions { mask: Some(&m), sinks: Some(&s), ..Default::default() }).unwrap();
    let yv = y.to_vec();
    assert!(yv[2..4].iter().chain(&yv[8..10]).all(|&e| e == 0.0), "{yv:?}");
    y.sum_all().backward().unwrap();
    assert!(s.grad().unwrap().to_vec().iter().all(|g| g.is_finite()));
}

#[test]
fn attention_dropout_is_seeded_replayable_and_scaled() {
    let (q, k, v) = (var(&[2, 2, 4, 3], 80), var(&[2, 2, 6, 3], 81), var(&[2, 2, 6, 3], 82));
    let x = [q.clone(), k.clone(), v.clone()];
    let with =
        |p, seed| sdpa(&x, AttentionOptions { dropout: Some(AttentionDropout { p, seed }), ..Default::default() });
    let plain = sdpa(&x, AttentionOptions::default()).unwrap();
    assert_eq!(with(0.0, 1).unwrap().to_vec(), plain.to_vec(), "p = 0 is the identity");
    assert!(with(1.0, 1).unwrap().to_vec().iter().all(|&e| e == 0.0), "p = 1 drops everything");
    assert_eq!(with(0.5, 7).unwrap().to_vec(), with(0.5, 7).unwrap().to_vec(), "same seed, same mask");
    assert_ne!(with(0.5, 7).unwrap().to_vec(), with(0.5, 8).unwrap().to_vec(), "another seed, another mask");
    // Its mask is the one `dropout` draws on the [B, H, Sq, Sk] probabilities.
    let eye: Vec<f32> = (0..36).map(|e| if e % 6 == e / 6 { 1.0 } else { 0.0 }).collect();
    let v1 = Tensor::from_vec(eye, &[1, 1, 6, 6]).unwrap().broadcast_to(&[2, 2, 6, 6]).unwrap().contiguous().unwrap();
    let drop = Some(AttentionDropout { p: 0.4, seed: 5 });
    let pd = q.scaled_dot_product_attention(&k, &v1, AttentionOptions { dropout: drop, ..Default::default() }).unwrap();
    let p = q.scaled_dot_product_attention(&k, &v1, AttentionOptions::default()).unwrap();
    assert_near(&pd, &p.dropout(0.4, 5, true).unwrap(), 1e-6, "mask");
    // Under a checkpoint the block replays the same mask: bitwise equal gradients.
    let f = |xs: &[Tensor]| {
        let o = AttentionOptions {
            dropout: Some(AttentionDropout { p: 0.3, seed: 11 }),
            causal: true,
            ..Default::default()
        };
        xs[0].scaled_dot_product_attention(&xs[1], &xs[2], o)?.tanh().sum_all().reshape(&[])
    };
    let grads = |ckpt: bool| {
        let leaves: Vec<Tensor> = x.iter().map(|t| t.detach().into_variable()).collect();
        let y =
            if ckpt { forgia::checkpoint(f, &leaves.iter().collect::<Vec<_>>()).unwrap() } else { f(&leaves).unwrap() };
        y.backward().unwrap();
        leaves.iter().map(|l| l.grad().unwrap().to_vec()).collect::<Vec<_>>()
    };
    assert_eq!(grads(true), grads(false));
}

#[test]
fn alibi_slopes_follow_the_paper_for_any_head_count() {
    assert_eq!(alibi_slopes(4), vec![0.25, 0.0625, 0.015625, 0.00390625]);
    let s = alibi_slopes(6); // the 4-head slopes, then every other of the 8-head ones
    assert_eq!(&s[..4], &alibi_slopes(4)[..]);
    assert_eq!(&s[4..], &[alibi_slopes(8)[0], alibi_slopes(8)[2]]);
    assert!(alibi_slopes(0).is_empty());
}

#[test]
fn masked_softmax_scales_masks_and_zeroes_a_blocked_line() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let keep = Tensor::from_vec(vec![1.0, 0.0, 1.0, 0.0, 0.0, 0.0], &[2, 3]).unwrap();
    let o = MaskedSoftmaxOptions { scale: Some(0.5), bool_mask: Some(&keep), ..Default::default() };
    let y = x.masked_softmax(1, o).unwrap().to_vec();
    let e = (1.0f32).exp(); // scores 0.5 and 1.5: weights 1 / (1 + e) and e / (1 + e)
    assert!((y[0] - 1.0 / (1.0 + e)).abs() < 1e-6 && y[1] == 0.0 && (y[2] - e / (1.0 + e)).abs() < 1e-6);
    assert_eq!(&y[3..], &[0.0; 3]);
    // Along axis 0, with an additive mask that gets a gradient.
    let (xv, m) = (var(&[3, 4], 90), var(&[3, 1], 91));
    let keep = Tensor::from_vec(vec![1., 1., 0., 1., 0., 1., 1., 1., 1., 0., 1., 1.], &[3, 4]).unwrap();
    let f = |t: &[Tensor]| {
        t[0].masked_softmax(0, MaskedSoftmaxOptions { scale: Some(0.7), mask: Some(&t[1]), bool_mask: Some(&keep) })
    };
    check(f, &[xv.clone(), m.clone()], "masked_softmax");
    let seed = Tensor::randn(&[3, 4], 0.0, 1.0, &mut Rng::new(92)).unwrap();
    let c = [Tensor::randn(&[3, 4], 0.0, 1.0, &mut Rng::new(93)).unwrap(), Tensor::ones(&[3, 1]).unwrap()];
    second_order::check(f, &[xv, m], &seed, &c);
}

#[test]
fn rope_at_an_offset_is_the_matching_slice_of_the_full_sequence() {
    let x = var(&[2, 2, 7, 6], 100);
    for interleaved in [false, true] {
        let full = x.rope_with(100.0, RopeOptions { interleaved, ..Default::default() }).unwrap();
        let step =
            x.narrow(2, 4, 3).unwrap().rope_with(100.0, RopeOptions { offset: 4, interleaved, ..Default::default() });
        assert_near(&step.unwrap(), &full.narrow(2, 4, 3).unwrap(), 1e-6, "offset");
        // Explicit ids 0..S are the default; ids [B, S] pick each batch entry's positions.
        let ids = Tensor::from_vec((0..7).map(|p| p as f32).collect(), &[7]).unwrap();
        let same = x.rope_with(100.0, RopeOptions { positions: Some(&ids), interleaved, ..Default::default() });
        assert_near(&same.unwrap(), &full, 1e-6, "ids 0..S");
        let ids = Tensor::from_vec(vec![0., 1., 2., 0., 1., 2., 3., 2., 3., 4., 5., 6., 0., 1.], &[2, 7]).unwrap();
        let packed =
            x.rope_with(100.0, RopeOptions { positions: Some(&ids), interleaved, ..Default::default() }).unwrap();
        let b1 = packed.narrow(0, 1, 1).unwrap().narrow(2, 0, 5).unwrap();
        let want = x
            .narrow(0, 1, 1)
            .unwrap()
            .narrow(2, 0, 5)
            .unwrap()
            .rope_with(100.0, RopeOptions { offset: 2, interleaved, ..Default::default() });
        assert_near(&b1, &want.unwrap(), 1e-6, "per-batch ids");
    }
}

#[test]
fn the_interleaved_layout_is_the_half_split_one_with_permuted_features() {
    // Interleaved pairs (2i, 2i+1) are the halves (i, i + D/2) after moving feature 2i to i
    // and 2i + 1 to i + D/2.
    let (d, h) = (6, 3);
    let x = var(&[1, 1, 4, d], 110);
    let perm: Vec<usize> = (0..h).map(|i| 2 * i).chain((0..h).map(|i| 2 * i + 1)).collect();
    let xv = x.to_vec();
    let halves: Vec<f32> = (0..4).flat_map(|r| perm.iter().map(move |&p| (r, p))).map(|(r, p)| xv[r * d + p]).collect();
    let halves = Tensor::from_vec(halves, &[1, 1, 4, d]).unwrap();
    let a = x.rope_with(50.0, RopeOptions { interleaved: true, offset: 2, ..Default::default() }).unwrap().to_vec();
    let b = halves.rope_with(50.0, RopeOptions { offset: 2, ..Default::default() }).unwrap().to_vec();
    for r in 0..4 {
        for (j, &p) in perm.iter().enumerate() {
            assert!((a[r * d + p] - b[r * d + j]).abs() < 1e-6);
        }
    }
}

#[test]
fn rope_options_pass_gradcheck_and_second_order() {
    let x = var(&[2, 2, 4, 6], 120);
    let ids = Tensor::from_vec(vec![3., 0., 1., 2., 5., 6., 7., 8.], &[2, 4]).unwrap();
    let cases: Vec<(&str, RopeOptions<'_>)> = vec![
        ("offset", RopeOptions { offset: 5, ..Default::default() }),
        ("interleaved", RopeOptions { interleaved: true, offset: 1, ..Default::default() }),
        ("ids", RopeOptions { positions: Some(&ids), ..Default::default() }),
        ("ids interleaved", RopeOptions { positions: Some(&ids), interleaved: true, offset: 2 }),
    ];
    for (name, o) in cases {
        let f = |t: &[Tensor]| t[0].rope_with(30.0, o)?.mul(&t[0]);
        check(f, std::slice::from_ref(&x), name);
        let seed = Tensor::randn(x.shape(), 0.0, 1.0, &mut Rng::new(121)).unwrap();
        let c = [Tensor::randn(x.shape(), 0.0, 1.0, &mut Rng::new(122)).unwrap()];
        second_order::check(f, std::slice::from_ref(&x), &seed, &c);
    }
}

#[test]
fn a_grouped_query_module_and_block_run_forward_backward_and_checkpointed() {
    let attn = MultiHeadAttention::with_kv_heads(12, 6, 2, true, &mut Rng::new(0)).unwrap();
    assert_eq!(attn.num_kv_heads(), 2);
    assert_eq!(attn.k.weight.shape(), &[4, 12]);
    let x = var(&[2, 5, 12], 130);
    check(|t| attn.forward(&t[0]), std::slice::from_ref(&x), "gqa module");
    assert_eq!(MultiHeadAttention::new(12, 6, true, &mut Rng::new(0)).unwrap().num_kv_heads(), 6);
    let block = TransformerBlock::with_kv_heads(8, 4, 1, true, &mut Rng::new(1)).unwrap();
    let plain = block.forward(&x.narrow(2, 0, 8).unwrap()).unwrap();
    let saved = block.forward_checkpointed(&x.narrow(2, 0, 8).unwrap()).unwrap();
    assert_eq!(plain.to_vec(), saved.to_vec());
    plain.sum_all().backward().unwrap();
    let g1: Vec<Vec<f32>> = block.named_parameters().iter().map(|(_, p)| p.grad().unwrap().to_vec()).collect();
    block.named_parameters().iter().for_each(|(_, p)| p.zero_grad());
    saved.sum_all().backward().unwrap();
    let g2: Vec<Vec<f32>> = block.named_parameters().iter().map(|(_, p)| p.grad().unwrap().to_vec()).collect();
    assert_eq!(g1, g2);
    assert!(MultiHeadAttention::with_kv_heads(12, 6, 4, true, &mut Rng::new(0)).is_err());
    assert!(MultiHeadAttention::with_kv_heads(12, 6, 0, true, &mut Rng::new(0)).is_err());
}

fn ids_attr(v: &serde_json::Value) -> Option<Tensor> {
    if v.is_null() {
        return None;
    }
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data: Vec<f32> = v["data"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap() as f32).collect();
    Some(Tensor::from_vec(data, &shape).unwrap())
}

#[test]
fn attention_options_rope_and_masked_softmax_match_the_pytorch_goldens() {
    let cases = golden::load("attention");
    assert_eq!(cases.len(), 17);
    let slopes = alibi_slopes(4);
    for case in &cases {
        let a = &case.attrs;
        golden::check_case(case, 1e-5, |v| match case.op.as_str() {
            "sdpa" => {
                let extras: Vec<&str> = a["extras"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
                let mut o = AttentionOptions {
                    causal: a["causal"].as_bool().unwrap(),
                    scale: a["scale"].as_f64().map(|s| s as f32),
                    enable_gqa: a["enable_gqa"].as_bool().unwrap(),
                    window: a["window"].as_u64().map(|w| w as usize),
                    query_offset: a["query_offset"].as_u64().unwrap_or(0) as usize,
                    ..Default::default()
                };
                if a["alibi"].as_bool() == Some(true) {
                    o.alibi_slopes = Some(&slopes);
                }
                for (i, e) in extras.iter().enumerate() {
                    match *e {
                        "mask" => o.mask = Some(&v[3 + i]),
                        "bool_mask" => o.bool_mask = Some(&v[3 + i]),
                        "key_mask" => o.key_mask = Some(&v[3 + i]),
                        other => panic!("unknown extra {other}"),
                    }
                }
                sdpa(v, o)
            }
            "sdpa_sinks" => sdpa(
                v,
                AttentionOptions { causal: a["causal"].as_bool().unwrap(), sinks: Some(&v[3]), ..Default::default() },
            ),
            "masked_softmax" => v[0].masked_softmax(
                a["axis"].as_i64().unwrap() as isize,
                MaskedSoftmaxOptions {
                    scale: Some(a["scale"].as_f64().unwrap() as f32),
                    mask: Some(&v[1]),
                    bool_mask: Some(&v[2]),
                },
            ),
            "rope" => {
                let ids = ids_attr(&a["positions"]);
                let o = RopeOptions {
                    offset: a["offset"].as_u64().unwrap() as usize,
                    positions: ids.as_ref(),
                    interleaved: a["interleaved"].as_bool().unwrap(),
                };
                v[0].rope_with(a["base"].as_f64().unwrap() as f32, o)
            }
            other => panic!("unknown op {other}"),
        });
    }
}

#[test]
fn a_grouped_query_module_is_differentiable_twice() {
    // The gradient of a gradient through the projections and grouped attention (what a
    // gradient penalty or a Hessian-vector product through a transformer needs).
    let attn = MultiHeadAttention::with_kv_heads(8, 4, 2, true, &mut Rng::new(3)).unwrap();
    let x = var(&[1, 3, 8], 160);
    let seed = Tensor::randn(&[1, 3, 8], 0.0, 1.0, &mut Rng::new(161)).unwrap();
    let c = [Tensor::randn(&[1, 3, 8], 0.0, 1.0, &mut Rng::new(162)).unwrap()];
    second_order::check(|t| attn.forward(&t[0]), std::slice::from_ref(&x), &seed, &c);
}

#[test]
fn empty_grouped_attention_gives_empty_or_zero_results_in_both_backward_paths() {
    // (q, k, v) shapes: no queries, no keys, no batch; grouped 4 → 2 heads, with sinks.
    let cases = [
        ([2, 4, 0, 3], [2, 2, 5, 3], [2, 2, 5, 2]),
        ([1, 4, 3, 3], [1, 2, 0, 3], [1, 2, 0, 2]),
        ([0, 4, 3, 3], [0, 2, 3, 3], [0, 2, 3, 2]),
    ];
    for (qs, ks, vs) in cases {
        for create_graph in [false, true] {
            let (q, k, v, s) = (var(&qs, 170), var(&ks, 171), var(&vs, 172), var(&[4], 173));
            let o = AttentionOptions { sinks: Some(&s), causal: true, window: Some(2), ..gqa() };
            let y = q.scaled_dot_product_attention(&k, &v, o).unwrap();
            assert_eq!(y.shape(), &[qs[0], qs[1], qs[2], vs[3]]);
            assert!(y.to_vec().iter().all(|&e| e == 0.0));
            let seed = Tensor::ones(y.shape()).unwrap();
            y.backward_with(Some(&seed), BackwardOptions { create_graph, ..Default::default() }).unwrap();
            for t in [&q, &k, &v, &s] {
                assert!(t.grad().is_none_or(|g| g.to_vec().iter().all(|&e| e == 0.0)), "{qs:?} {ks:?}");
            }
        }
    }
}

#[test]
fn a_key_padding_mask_through_the_module_ignores_the_padded_tokens() {
    // Batch entry 1 has one padding token at the end: its first two outputs equal the module
    // run on those two tokens alone.
    let attn = MultiHeadAttention::with_kv_heads(8, 4, 2, false, &mut Rng::new(5)).unwrap();
    let x = var(&[2, 3, 8], 180);
    let real = Tensor::from_vec(vec![1., 1., 1., 1., 1., 0.], &[2, 3]).unwrap();
    let y = attn.forward_with(&x, AttentionOptions { key_mask: Some(&real), ..Default::default() }).unwrap();
    let short = attn.forward(&x.narrow(0, 1, 1).unwrap().narrow(1, 0, 2).unwrap()).unwrap();
    assert_near(&y.narrow(0, 1, 1).unwrap().narrow(1, 0, 2).unwrap(), &short, 1e-6, "padded batch entry");
    assert_near(&y.narrow(0, 0, 1).unwrap(), &attn.forward(&x.narrow(0, 0, 1).unwrap()).unwrap(), 1e-6, "full one");
    let drop = |seed| AttentionOptions { dropout: Some(AttentionDropout { p: 0.5, seed }), ..Default::default() };
    let (a, b) = (attn.forward_with(&x, drop(1)).unwrap(), attn.forward_with(&x, drop(1)).unwrap());
    assert_eq!(a.to_vec(), b.to_vec());
    assert_ne!(a.to_vec(), attn.forward_with(&x, drop(2)).unwrap().to_vec());
}
