//! Products with a small output and a long inner dimension (a weight's gradient over many rows)
//! are split along the inner dimension (`kernels/gemm/split_k.rs`): they still match an f64
//! product, on transposed, strided and batched operands and through `linear`'s backward, and
//! give the same bits on one thread (the serial backward option) as on the pool, so a
//! checkpointed block still matches the plain path bit for bit.

mod common;

use common::{assert_product_close as assert_close, lcg, product_f64 as reference};
use forgia::{checkpoint, BackwardOptions, Tensor};

#[test]
fn a_transposed_product_with_a_long_inner_dimension_matches_f64() {
    // gyᵀ · x with odd sizes: parts of unequal length, outputs that fill no vector tile.
    for &(m, n, k) in &[(33, 17, 4133), (128, 128, 2048), (65, 128, 4100)] {
        let gy = lcg(k * m, 1, 1.0);
        let x = lcg(k * n, 2, 1.0);
        let gyt: Vec<f32> = (0..m * k).map(|i| gy[(i % k) * m + i / k]).collect();
        let y = Tensor::from_vec(gy, &[k, m]).unwrap().transpose(0, 1).unwrap();
        let out = y.matmul(&Tensor::from_vec(x.clone(), &[k, n]).unwrap()).unwrap();
        assert_eq!(out.shape(), &[m, n]);
        assert_close(&out.to_vec(), &reference(m, n, k, &gyt, &x), k, &format!("{m}x{k}x{n}"));
    }
}

#[test]
fn strided_and_batched_operands_with_a_long_inner_dimension_match_f64() {
    let (m, n, k) = (20, 24, 4500);
    // Columns 3 .. 3 + k of a [m, k + 7] matrix: a view with row stride k + 7 and an offset.
    let wide = lcg(m * (k + 7), 3, 1.0);
    let a: Vec<f32> = (0..m * k).map(|i| wide[(i / k) * (k + 7) + 3 + i % k]).collect();
    let strided = Tensor::from_vec(wide, &[m, k + 7]).unwrap().narrow(1, 3, k).unwrap();
    assert!(!strided.is_contiguous());
    let b = lcg(k * n, 4, 1.0);
    let bt = Tensor::from_vec(b.clone(), &[k, n]).unwrap();
    assert_close(&strided.matmul(&bt).unwrap().to_vec(), &reference(m, n, k, &a, &b), k, "strided");
    // A batch of two such products, the right operand broadcast over the batch.
    let a2 = lcg(2 * m * k, 5, 1.0);
    let out = Tensor::from_vec(a2.clone(), &[2, m, k]).unwrap().matmul(&bt.unsqueeze(0).unwrap()).unwrap();
    assert_eq!(out.shape(), &[2, m, n]);
    let mut want = reference(m, n, k, &a2[..m * k], &b);
    want.extend(reference(m, n, k, &a2[m * k..], &b));
    assert_close(&out.to_vec(), &want, k, "batched");
    // An empty inner dimension still gives zeros.
    let empty = Tensor::zeros(&[m, 0]).unwrap().matmul(&Tensor::zeros(&[0, n]).unwrap()).unwrap();
    assert_eq!(empty.to_vec(), vec![0.0; m * n]);
}

/// `linear` over 4608 rows, whose weight gradient `gyᵀ · x` is split; the gradients of one
/// pass with the pool and one with the serial option.
fn linear_grads(serial: bool) -> Vec<Vec<f32>> {
    let (rows, d_in, d_out) = (4608, 96, 80);
    let x = Tensor::from_vec(lcg(rows * d_in, 6, 1.0), &[rows, d_in]).unwrap();
    let w = Tensor::variable(lcg(d_out * d_in, 7, 0.1), &[d_out, d_in]).unwrap();
    let b = Tensor::variable(lcg(d_out, 8, 0.1), &[d_out]).unwrap();
    let y = x.linear(&w, Some(&b)).unwrap().tanh();
    y.sum_all().backward_with(None, BackwardOptions { serial, ..Default::default() }).unwrap();
    vec![w.grad().unwrap().to_vec(), b.grad().unwrap().to_vec(), x.to_vec()]
}

#[test]
fn a_split_weight_gradient_is_the_same_bits_serially_and_on_the_pool() {
    let pooled = linear_grads(false);
    let serial = linear_grads(true);
    assert_eq!(pooled[0], serial[0], "weight gradient");
    assert_eq!(pooled[1], serial[1], "bias gradient");
    // And it is the product gyᵀ · x it should be.
    let (rows, d_in, d_out) = (4608, 96, 80);
    let x = &pooled[2];
    let w = lcg(d_out * d_in, 7, 0.1);
    let b = lcg(d_out, 8, 0.1);
    let mut gy = vec![0.0f32; rows * d_out];
    for r in 0..rows {
        for o in 0..d_out {
            let z: f64 = f64::from(b[o])
                + (0..d_in).map(|i| f64::from(x[r * d_in + i]) * f64::from(w[o * d_in + i])).sum::<f64>();
            gy[r * d_out + o] = (1.0 - z.tanh().powi(2)) as f32;
        }
    }
    let gyt: Vec<f32> = (0..d_out * rows).map(|i| gy[(i % rows) * d_out + i / rows]).collect();
    let tol_rows = rows;
    let want = reference(d_out, d_in, rows, &gyt, x);
    for (i, (g, w)) in pooled[0].iter().zip(&want).enumerate() {
        assert!((f64::from(*g) - w).abs() <= 1e-4 * (tol_rows as f64).sqrt() * (1.0 + w.abs()), "gW[{i}]: {g} vs {w}");
    }
}

#[test]
fn a_checkpointed_block_with_a_split_product_matches_the_plain_path_bitwise() {
    let (rows, d) = (2048, 64);
    let x = Tensor::variable(lcg(rows * d, 9, 1.0), &[rows, d]).unwrap();
    let w = Tensor::variable(lcg(d * d, 10, 0.2), &[d, d]).unwrap();
    let block = |t: &[Tensor]| t[0].matmul(&t[1])?.gelu().matmul(&t[1]);
    block(&[x.clone(), w.clone()]).unwrap().sum_all().backward().unwrap();
    let (cx, cw) = (x.detach().into_variable(), w.detach().into_variable());
    checkpoint(block, &[&cx, &cw]).unwrap().sum_all().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec(), cw.grad().unwrap().to_vec());
    assert_eq!(x.grad().unwrap().to_vec(), cx.grad().unwrap().to_vec());
}
