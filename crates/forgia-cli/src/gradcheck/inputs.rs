//! Random inputs for `forgia gradcheck`: shapes drawn from a seeded generator, values kept
//! away from kinks (ReLU's 0, clamp bounds), ties (max, pooling) and domain edges (log, sqrt).

use forgia::{Indices, Rng, Tensor};

/// A size in `lo..=hi`.
pub(super) fn dim(rng: &mut Rng, lo: usize, hi: usize) -> usize {
    lo + rng.below(hi - lo + 1)
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn make(values: Vec<f32>, shape: &[usize]) -> Tensor {
    // The generators below always produce `numel(shape)` values.
    Tensor::from_vec(values, shape).unwrap_or_else(|_| Tensor::zeros(shape).expect("a small fixed shape"))
}

/// A variable of standard normal values.
pub(super) fn normal(shape: &[usize], rng: &mut Rng) -> Tensor {
    Tensor::randn(shape, 0.0, 1.0, rng).expect("a small fixed shape").into_variable()
}

/// A variable of values in `[0.5, 2]` (inside the domain of log, sqrt, reciprocal, pow).
pub(super) fn positive(shape: &[usize], rng: &mut Rng) -> Tensor {
    Tensor::rand(shape, 0.5, 2.0, rng).expect("a small fixed shape").into_variable()
}

/// A variable whose values are at least 0.2 away from 0 (ReLU, abs, leaky ReLU).
pub(super) fn away_from_zero(shape: &[usize], rng: &mut Rng) -> Tensor {
    let values = (0..numel(shape))
        .map(|_| {
            let magnitude = 0.2 + 1.3 * rng.uniform();
            if rng.uniform() < 0.5 {
                -magnitude
            } else {
                magnitude
            }
        })
        .collect();
    make(values, shape).into_variable()
}

/// A variable of distinct values 0.1 apart in random order (no ties for max, min, pooling).
pub(super) fn distinct(shape: &[usize], rng: &mut Rng) -> Tensor {
    let n = numel(shape);
    let mut ranks: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut ranks);
    let values = ranks.iter().map(|&r| (r as f32 - n as f32 / 2.0) * 0.1).collect();
    make(values, shape).into_variable()
}

/// A variable with values inside `(-0.4, 0.4)` or beyond `±0.6` (clamp to `[-0.5, 0.5]`).
pub(super) fn clamp_input(shape: &[usize], rng: &mut Rng) -> Tensor {
    let values = (0..numel(shape))
        .map(|_| {
            let u = rng.uniform();
            if u < 0.4 {
                -0.4 + 0.8 * rng.uniform()
            } else if u < 0.7 {
                0.6 + rng.uniform()
            } else {
                -0.6 - rng.uniform()
            }
        })
        .collect();
    make(values, shape).into_variable()
}

/// A constant 0/1 mask.
pub(super) fn mask(shape: &[usize], rng: &mut Rng) -> Tensor {
    let values = (0..numel(shape)).map(|_| if rng.uniform() < 0.5 { 1.0 } else { 0.0 }).collect();
    make(values, shape)
}

/// Index data stored in a constant tensor (so a case's inputs stay a plain tensor list).
pub(super) fn index_tensor(shape: &[usize], size: usize, rng: &mut Rng) -> Tensor {
    let data = (0..numel(shape)).map(|_| rng.below(size) as f32).collect();
    make(data, shape)
}

/// Indices back from a tensor made by [`index_tensor`].
pub(super) fn as_indices(t: &Tensor) -> forgia::Result<Indices> {
    Indices::new(t.to_vec().iter().map(|&v| v as i64).collect(), t.shape())
}
