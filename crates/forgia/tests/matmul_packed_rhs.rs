//! A product whose right operand is a transposed matrix (a linear layer's `x · Wᵀ`, every
//! matmul's left gradient `gy · Bᵀ`) reads that operand from a packed copy once it has 16 rows
//! or more (`kernels::gemm::packs_b`): such products match an f64 product on plain, strided,
//! offset and batched operands, and through `linear` forward and backward; a broadcast operand
//! (column stride 0) is no transposed matrix and is read in place.

mod common;

use common::{assert_product_close as assert_close, lcg, product_f64};
use forgia::Tensor;

/// `a · wᵀ` in f64 for a row-major `m × k` `a` and `n × k` `w`.
fn reference(m: usize, n: usize, k: usize, a: &[f32], w: &[f32]) -> Vec<f64> {
    let wt: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
    product_f64(m, n, k, a, &wt)
}

#[test]
fn products_with_a_transposed_right_operand_match_f64_on_either_side_of_the_row_threshold() {
    // 15 rows read the operand in place, 16 and more from the packed copy; odd sizes leave
    // partial 8×8 blocks and tiles in the transpose.
    for &(m, n, k) in &[(15, 33, 70), (16, 33, 70), (64, 256, 256), (100, 129, 67), (17, 1, 300)] {
        let a = lcg(m * k, 1, 1.0);
        let w = lcg(n * k, 2, 1.0);
        let wt = Tensor::from_vec(w.clone(), &[n, k]).unwrap().transpose(0, 1).unwrap();
        let out = Tensor::from_vec(a.clone(), &[m, k]).unwrap().matmul(&wt).unwrap();
        assert_eq!(out.shape(), &[m, n]);
        assert_close(&out.to_vec(), &reference(m, n, k, &a, &w), k, &format!("{m}x{k}·({n}x{k})ᵀ"));
    }
}

#[test]
fn strided_offset_and_batched_transposed_operands_match_f64() {
    let (m, n, k) = (40, 24, 50);
    // Columns 3 .. 3 + k of a [n, k + 7] matrix, transposed: row stride 1, column stride
    // k + 7, and an offset.
    let wide = lcg(n * (k + 7), 3, 1.0);
    let w: Vec<f32> = (0..n * k).map(|i| wide[(i / k) * (k + 7) + 3 + i % k]).collect();
    let wt = Tensor::from_vec(wide, &[n, k + 7]).unwrap().narrow(1, 3, k).unwrap().transpose(0, 1).unwrap();
    let a = lcg(m * k, 4, 1.0);
    let x = Tensor::from_vec(a.clone(), &[m, k]).unwrap();
    assert_close(&x.matmul(&wt).unwrap().to_vec(), &reference(m, n, k, &a, &w), k, "strided");
    // A batch of three: each batch's right operand a transposed [n, k] matrix.
    let ws = lcg(3 * n * k, 5, 1.0);
    let wts = Tensor::from_vec(ws.clone(), &[3, n, k]).unwrap().transpose(1, 2).unwrap();
    let xs = lcg(3 * m * k, 6, 1.0);
    let out = Tensor::from_vec(xs.clone(), &[3, m, k]).unwrap().matmul(&wts).unwrap().to_vec();
    for b in 0..3 {
        let want = reference(m, n, k, &xs[b * m * k..][..m * k], &ws[b * n * k..][..n * k]);
        assert_close(&out[b * m * n..][..m * n], &want, k, &format!("batch {b}"));
    }
}

#[test]
fn linear_forward_and_its_input_gradient_match_f64() {
    let (m, n, k) = (32, 20, 45);
    let a = lcg(m * k, 7, 1.0);
    let w = lcg(n * k, 8, 1.0);
    let x = Tensor::from_vec(a.clone(), &[m, k]).unwrap().into_variable();
    let wv = Tensor::from_vec(w.clone(), &[n, k]).unwrap().into_variable();
    let y = x.linear(&wv, None).unwrap();
    assert_close(&y.to_vec(), &reference(m, n, k, &a, &w), k, "linear forward");
    // loss = Σ y ∘ g: gx = g · W (row-major W, read in place), gW = gᵀ · x.
    let g = lcg(m * n, 9, 1.0);
    y.mul(&Tensor::from_vec(g.clone(), &[m, n]).unwrap()).unwrap().sum_all().backward().unwrap();
    assert_close(&x.grad().unwrap().to_vec(), &product_f64(m, k, n, &g, &w), n, "linear input gradient");
}

#[test]
fn a_broadcast_right_operand_is_read_in_place_and_matches_f64() {
    // A [k, 1] column broadcast to [k, n]: row stride 1, column stride 0 (no transposed
    // matrix, whatever its row stride says), with enough rows that a transposed one would be
    // packed.
    let (m, n, k) = (32, 24, 50);
    let col = lcg(k, 10, 1.0);
    let b = Tensor::from_vec(col.clone(), &[k, 1]).unwrap().broadcast_to(&[k, n]).unwrap();
    let a = lcg(m * k, 11, 1.0);
    let out = Tensor::from_vec(a.clone(), &[m, k]).unwrap().matmul(&b).unwrap();
    // As `a · wᵀ` with every row of `w` the column.
    let w: Vec<f32> = (0..n * k).map(|i| col[i % k]).collect();
    assert_close(&out.to_vec(), &reference(m, n, k, &a, &w), k, "broadcast");
}
