//! Bad input to attention's newer options, RoPE's positions and the masked softmax: every row
//! is an `Err` of its named kind, never a panic or a silently wrong value.

use forgia::{AttentionDropout, AttentionOptions, ErrorKind, MaskedSoftmaxOptions, RopeOptions, Tensor};

mod common;
use common::bad_input::{arg, check_rows, shape, Check};

/// Operands with zeros among them (`0, 0.2 … 0.8`, repeating).
fn t(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i % 5) as f32 * 0.2).collect(), shape).unwrap()
}

#[test]
fn bad_attention_rope_and_masked_softmax_inputs_are_named_errors() {
    let q = t(&[2, 6, 3, 4]);
    let (k4, v4) = (t(&[2, 4, 5, 4]), t(&[2, 4, 5, 2]));
    let (k2, v2) = (t(&[2, 2, 5, 4]), t(&[2, 2, 5, 2]));
    let gqa = AttentionOptions { enable_gqa: true, ..Default::default() };
    let sdpa = |o: AttentionOptions<'_>| q.scaled_dot_product_attention(&k2, &v2, o);
    let ids = |v: Vec<f32>, s: &[usize]| Tensor::from_vec(v, s).unwrap();
    let x = t(&[2, 2, 4, 6]);
    let rope = |p: &Tensor| x.rope_with(100.0, RopeOptions { positions: Some(p), ..Default::default() });
    let rows: Vec<(&str, forgia::Result<Tensor>, Check)> = vec![
        ("gqa heads that do not divide", q.scaled_dot_product_attention(&k4, &v4, gqa), shape),
        ("gqa without enable_gqa", q.scaled_dot_product_attention(&k2, &v2, Default::default()), shape),
        ("gqa zero kv heads", q.scaled_dot_product_attention(&t(&[2, 0, 5, 4]), &t(&[2, 0, 5, 2]), gqa), shape),
        ("gqa k and v heads differ", q.scaled_dot_product_attention(&k2, &t(&[2, 3, 5, 2]), gqa), shape),
        ("bool mask shape", sdpa(AttentionOptions { bool_mask: Some(&t(&[3, 4])), ..gqa }), shape),
        ("bool mask kv heads", sdpa(AttentionOptions { bool_mask: Some(&t(&[2, 2, 3, 5])), ..gqa }), shape),
        ("bool mask rank 5", sdpa(AttentionOptions { bool_mask: Some(&t(&[1, 2, 6, 3, 5])), ..gqa }), shape),
        ("key mask shape", sdpa(AttentionOptions { key_mask: Some(&t(&[5])), ..gqa }), shape),
        ("key mask batch", sdpa(AttentionOptions { key_mask: Some(&t(&[1, 5])), ..gqa }), shape),
        ("window 0", sdpa(AttentionOptions { window: Some(0), ..gqa }), arg),
        ("alibi slopes per kv head", sdpa(AttentionOptions { alibi_slopes: Some(&[0.5, 0.25]), ..gqa }), arg),
        ("alibi NaN slope", sdpa(AttentionOptions { alibi_slopes: Some(&[f32::NAN; 6]), ..gqa }), arg),
        ("sinks per kv head", sdpa(AttentionOptions { sinks: Some(&t(&[2])), ..gqa }), shape),
        ("sinks rank 2", sdpa(AttentionOptions { sinks: Some(&t(&[1, 6])), ..gqa }), shape),
        ("dropout p > 1", sdpa(AttentionOptions { dropout: Some(AttentionDropout { p: 1.5, seed: 0 }), ..gqa }), arg),
        (
            "dropout NaN p",
            sdpa(AttentionOptions { dropout: Some(AttentionDropout { p: f32::NAN, seed: 0 }), ..gqa }),
            arg,
        ),
        ("dropout p < 0", sdpa(AttentionOptions { dropout: Some(AttentionDropout { p: -0.1, seed: 0 }), ..gqa }), arg),
        ("rope ids too short", rope(&ids(vec![0.0, 1.0, 2.0], &[3])), shape),
        ("rope ids batch", rope(&ids(vec![0.0; 12], &[3, 4])), shape),
        ("rope ids rank 3", rope(&ids(vec![0.0; 8], &[2, 1, 4])), shape),
        ("rope negative id", rope(&ids(vec![0.0, 1.0, -1.0, 2.0], &[4])), arg),
        ("rope fractional id", rope(&ids(vec![0.0, 1.5, 2.0, 3.0], &[4])), arg),
        ("rope NaN id", rope(&ids(vec![0.0, f32::NAN, 2.0, 3.0], &[4])), arg),
        ("rope id past 2^24", rope(&ids(vec![0.0, 1.0, 2.0, 3.0e7], &[4])), arg),
        (
            "rope ids [B, S] on rank 2",
            t(&[4, 6]).rope_with(100.0, RopeOptions { positions: Some(&t(&[1, 4])), ..Default::default() }),
            shape,
        ),
        (
            "rope odd width with offset",
            t(&[1, 3, 5]).rope_with(100.0, RopeOptions { offset: 2, ..Default::default() }),
            arg,
        ),
        (
            "masked_softmax mask shape",
            t(&[3, 4]).masked_softmax(1, MaskedSoftmaxOptions { mask: Some(&t(&[3])), ..Default::default() }),
            shape,
        ),
        (
            "masked_softmax bool mask grows the input",
            t(&[3, 4])
                .masked_softmax(1, MaskedSoftmaxOptions { bool_mask: Some(&t(&[2, 3, 4])), ..Default::default() }),
            shape,
        ),
        (
            "masked_softmax NaN scale",
            t(&[3, 4]).masked_softmax(1, MaskedSoftmaxOptions { scale: Some(f32::NAN), ..Default::default() }),
            arg,
        ),
        ("masked_softmax axis", t(&[3, 4]).masked_softmax(2, MaskedSoftmaxOptions::default()), |k| {
            matches!(k, ErrorKind::AxisOutOfRange { .. })
        }),
    ];
    check_rows(rows);
}
