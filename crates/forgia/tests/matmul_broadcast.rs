//! A product with a broadcast operand (a view with stride 0 along an axis: `broadcast_to`, or
//! the gradient of a sum) is computed as a sum and an outer product or a repeated
//! matrix–vector product (`kernels::gemm::broadcast`), with the values of the full product:
//! forward against f64 on each kind of broadcast, and backward through `y.sum()` against the
//! same graph fed a dense gradient.

mod common;

use common::{assert_product_close as assert_close, lcg, product_f64};
use forgia::Tensor;

/// A named case: the two operands as the product reads them, and the same operands dense.
type Case = (&'static str, Tensor, Tensor, Vec<f32>, Vec<f32>);

fn dense(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_vec(data.to_vec(), shape).unwrap()
}

#[test]
fn products_with_broadcast_operands_match_f64() {
    let (m, n, k) = (37, 65, 300);
    let a = lcg(m * k, 1, 1.0);
    let b = lcg(k * n, 2, 1.0);
    let col = lcg(m, 3, 1.0); // one value per row of a, repeated along k
    let row = lcg(n, 4, 1.0); // one row of b, repeated along k
    let cases: [Case; 5] = [
        (
            "a constant along k",
            dense(&col, &[m, 1]).broadcast_to(&[m, k]).unwrap(),
            dense(&b, &[k, n]),
            (0..m * k).map(|i| col[i / k]).collect(),
            b.clone(),
        ),
        (
            "b constant along k",
            dense(&a, &[m, k]),
            dense(&row, &[1, n]).broadcast_to(&[k, n]).unwrap(),
            a.clone(),
            (0..k * n).map(|i| row[i % n]).collect(),
        ),
        (
            "a's rows equal",
            dense(&a[..k], &[1, k]).broadcast_to(&[m, k]).unwrap(),
            dense(&b, &[k, n]),
            (0..m * k).map(|i| a[i % k]).collect(),
            b.clone(),
        ),
        (
            "b's columns equal",
            dense(&a, &[m, k]),
            dense(&b[..k], &[k, 1]).broadcast_to(&[k, n]).unwrap(),
            a.clone(),
            (0..k * n).map(|i| b[i / n]).collect(),
        ),
        (
            "a scalar times a transposed b",
            Tensor::scalar(0.75).broadcast_to(&[m, k]).unwrap(),
            dense(&b, &[n, k]).transpose(0, 1).unwrap(),
            vec![0.75; m * k],
            (0..k * n).map(|i| b[(i % n) * k + i / n]).collect(),
        ),
    ];
    for (what, x, y, xs, ys) in cases {
        let got = x.matmul(&y).unwrap();
        assert_eq!(got.shape(), &[m, n], "{what}");
        assert_close(&got.to_vec(), &product_f64(m, n, k, &xs, &ys), k, what);
        // A batch of two over the same broadcast operands.
        let xb = x.unsqueeze(0).unwrap().broadcast_to(&[2, m, k]).unwrap();
        let got = xb.matmul(&y).unwrap().to_vec();
        assert_close(&got[m * n..], &product_f64(m, n, k, &xs, &ys), k, &format!("{what}, batched"));
    }
}

#[test]
fn gradients_through_a_sum_match_the_same_graph_fed_a_dense_gradient() {
    // W3's branch, small: y = tanh(x · W) · V, loss = y.sum(). The sum hands `· V` a
    // gradient with both strides 0, so `gV = hᵀ · gy` and `gh = gy · Vᵀ` take the broadcast
    // forms; multiplying by a dense tensor of ones first gives the same loss through full
    // products.
    let (m, d) = (48, 96);
    let x = dense(&lcg(m * d, 5, 1.0), &[m, d]);
    let grads = |through_ones: bool| {
        let w = Tensor::variable(lcg(d * d, 6, 0.1), &[d, d]).unwrap();
        let v = Tensor::variable(lcg(d * d, 7, 0.1), &[d, d]).unwrap();
        let y = x.matmul(&w).unwrap().tanh().matmul(&v).unwrap();
        let y = if through_ones { y.mul(&dense(&vec![1.0; m * d], &[m, d])).unwrap() } else { y };
        y.sum_all().backward().unwrap();
        (w.grad().unwrap().to_vec(), v.grad().unwrap().to_vec())
    };
    let (gw, gv) = grads(false);
    let (gw_dense, gv_dense) = grads(true);
    for (what, got, want) in [("gW", &gw, &gw_dense), ("gV", &gv, &gv_dense)] {
        let want: Vec<f64> = want.iter().map(|&x| f64::from(x)).collect();
        assert_close(got, &want, m, what);
    }
}
