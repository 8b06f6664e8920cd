//! Scale: graphs far wider than any recursion could walk. The deep case (a 1,000,000-op chain
//! built, backpropagated and dropped) lives in `tests/engine.rs`
//! (`a_million_op_chain_is_built_backpropagated_and_dropped_without_overflow`); here are
//! 100,000-branch WIDE graphs: one interior node with 100,000 consumers (its counter drains
//! from 100,000 and it fires once), summed by a balanced tree or by a 100,000-long add chain.

use forgia::Tensor;

const BRANCHES: usize = 100_000;

/// Offsets `c_i` of the branches, spread over [-1, 1].
fn offset(i: usize) -> f32 {
    (i % 2001) as f32 / 1000.0 - 1.0
}

/// `Σ_i d/dx tanh(h + c_i)` with `h = 0.5 x`, in f64: `0.5 Σ (1 - tanh²(0.5x + c_i))`.
fn expected(x: f32) -> f64 {
    let h = (0.5 * x) as f64;
    (0..BRANCHES).map(|i| 0.5 * (1.0 - (h + offset(i) as f64).tanh().powi(2))).sum()
}

fn branches(h: &Tensor) -> Vec<Tensor> {
    (0..BRANCHES).map(|i| h.add_scalar(offset(i)).tanh()).collect()
}

fn assert_gradient(x: &Tensor, values: &[f32], rel: f64) {
    let g = x.grad().expect("x gets a gradient").to_vec();
    for (&got, &v) in g.iter().zip(values) {
        let want = expected(v);
        assert!((got as f64 - want).abs() <= rel * want.abs(), "{got} vs {want}");
    }
}

#[test]
fn a_hundred_thousand_branches_summed_by_a_balanced_tree_backpropagate_and_drop() {
    let values = [0.3f32, -1.1];
    let x = Tensor::variable(values.to_vec(), &[2]).unwrap();
    let h = x.scale(0.5); // the shared interior node: 100,000 consumers
    let mut level = branches(&h);
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.chunks(2);
        for pair in &mut it {
            next.push(if pair.len() == 2 { pair[0].add(&pair[1]).unwrap() } else { pair[0].clone() });
        }
        level = next;
    }
    let loss = level.pop().unwrap().sum_all();
    drop(h);
    loss.backward().unwrap();
    assert_gradient(&x, &values, 1e-4);
    drop(loss);
}

#[test]
fn a_hundred_thousand_branches_summed_by_a_long_add_chain_backpropagate_and_drop() {
    let values = [0.7f32];
    let x = Tensor::variable(values.to_vec(), &[1]).unwrap();
    let h = x.scale(0.5);
    let mut total = Tensor::zeros(&[1]).unwrap();
    for b in branches(&h) {
        total = total.add(&b).unwrap(); // a 100,000-deep chain, each link with a side branch
    }
    drop(h);
    total.sum_all().backward().unwrap();
    // Each contribution to h is added in f32 one at a time: allow a looser relative error.
    assert_gradient(&x, &values, 1e-3);
    drop(total);
}

#[test]
fn a_hundred_thousand_branch_graph_drops_without_backward() {
    let x = Tensor::variable(vec![0.1; 4], &[4]).unwrap();
    let h = x.tanh();
    let mut total = h.clone();
    for b in branches(&h) {
        total = total.add(&b).unwrap();
    }
    drop(h);
    drop(total);
    assert!(x.grad().is_none());
}
