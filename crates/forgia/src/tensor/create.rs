//! Creating tensors: from data, filled, ranges, identity, one-hot, seeded random.

use super::layout::numel;
use super::{Rng, Tensor};
use crate::error::{fail, ErrorKind, Result};

impl Tensor {
    /// A constant from row-major `data` with `shape`.
    ///
    /// ```
    /// let t = forgia::Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(t.shape(), &[2, 2]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `LengthMismatch` when `data.len()` is not the product of `shape`.
    pub fn from_vec(data: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
        let expected = numel(shape);
        if data.len() != expected {
            return fail(ErrorKind::LengthMismatch {
                op: "from_vec",
                shape: shape.to_vec(),
                expected,
                got: data.len(),
            });
        }
        Ok(Tensor::from_parts(data, shape))
    }

    /// A constant from a slice.
    ///
    /// # Errors
    /// `LengthMismatch` as [`Tensor::from_vec`].
    pub fn from_slice(data: &[f32], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A trainable leaf (variable) from data: shorthand for `from_vec(..)?.into_variable()`.
    ///
    /// # Errors
    /// `LengthMismatch` as [`Tensor::from_vec`].
    pub fn variable(data: Vec<f32>, shape: &[usize]) -> Result<Tensor> {
        Ok(Tensor::from_vec(data, shape)?.into_variable())
    }

    /// Turns this tensor's values into a variable: a fresh leaf node that accumulates
    /// gradients, and a value of its own that every clone of the result shares (the original
    /// handle is unaffected by later updates of the variable).
    pub fn into_variable(self) -> Tensor {
        self.new_variable()
    }

    /// A rank-0 constant.
    pub fn scalar(value: f32) -> Tensor {
        Tensor::from_parts(vec![value], &[])
    }

    /// A constant filled with `value`.
    pub fn full(shape: &[usize], value: f32) -> Tensor {
        Tensor::from_parts(vec![value; numel(shape)], shape)
    }

    /// A constant of zeros.
    pub fn zeros(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    /// A constant of ones.
    pub fn ones(shape: &[usize]) -> Tensor {
        Tensor::full(shape, 1.0)
    }

    /// Zeros with the shape of `other`.
    pub fn zeros_like(other: &Tensor) -> Tensor {
        Tensor::zeros(other.shape())
    }

    /// Ones with the shape of `other`.
    pub fn ones_like(other: &Tensor) -> Tensor {
        Tensor::ones(other.shape())
    }

    /// `start, start+step, …` up to (excluding) `end`, as a rank-1 constant.
    ///
    /// # Errors
    /// `InvalidArgument` when `step` is zero, not finite, or points away from `end`.
    pub fn arange(start: f32, end: f32, step: f32) -> Result<Tensor> {
        if step == 0.0 || !step.is_finite() || (end - start) * step < 0.0 {
            return fail(ErrorKind::InvalidArgument {
                op: "arange",
                arg: "step",
                reason: format!("step {step} cannot go from {start} to {end}"),
            });
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        Ok(Tensor::from_parts((0..n).map(|i| start + i as f32 * step).collect(), &[n]))
    }

    /// `n` evenly spaced values from `start` to `end` inclusive.
    pub fn linspace(start: f32, end: f32, n: usize) -> Tensor {
        let data = match n {
            0 => vec![],
            1 => vec![start],
            _ => (0..n).map(|i| start + (end - start) * i as f32 / (n - 1) as f32).collect(),
        };
        Tensor::from_parts(data, &[n])
    }

    /// The `n × n` identity matrix.
    pub fn eye(n: usize) -> Tensor {
        let mut data = crate::tensor::zeroed(n * n);
        for i in 0..n {
            data[i * n + i] = 1.0;
        }
        Tensor::from_parts(data, &[n, n])
    }

    /// Rows of one-hot vectors: shape `[indices.len(), classes]`.
    ///
    /// # Errors
    /// `IndexOutOfRange` for an index `>= classes`.
    pub fn one_hot(indices: &[usize], classes: usize) -> Result<Tensor> {
        let mut data = crate::tensor::zeroed(indices.len() * classes);
        for (row, &i) in indices.iter().enumerate() {
            if i >= classes {
                return fail(ErrorKind::IndexOutOfRange { op: "one_hot", index: i as i64, size: classes });
            }
            data[row * classes + i] = 1.0;
        }
        Ok(Tensor::from_parts(data, &[indices.len(), classes]))
    }

    /// Uniform values in `[low, high)` from an explicit generator.
    pub fn rand(shape: &[usize], low: f32, high: f32, rng: &mut Rng) -> Tensor {
        let data = (0..numel(shape)).map(|_| low + (high - low) * rng.uniform()).collect();
        Tensor::from_parts(data, shape)
    }

    /// Normal values with `mean` and `std` from an explicit generator.
    pub fn randn(shape: &[usize], mean: f32, std: f32, rng: &mut Rng) -> Tensor {
        let data = (0..numel(shape)).map(|_| mean + std * rng.normal()).collect();
        Tensor::from_parts(data, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_fills_as_documented() {
        assert_eq!(Tensor::arange(0.0, 5.0, 2.0).unwrap().to_vec(), vec![0.0, 2.0, 4.0]);
        assert_eq!(Tensor::linspace(0.0, 1.0, 3).to_vec(), vec![0.0, 0.5, 1.0]);
        assert_eq!(Tensor::eye(2).to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(Tensor::one_hot(&[1, 0], 3).unwrap().to_vec(), vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(Tensor::scalar(3.0).item().unwrap(), 3.0);
        let mut r1 = Rng::new(3);
        let mut r2 = Rng::new(3);
        assert_eq!(Tensor::randn(&[4], 0.0, 1.0, &mut r1).to_vec(), Tensor::randn(&[4], 0.0, 1.0, &mut r2).to_vec());
    }

    #[test]
    fn bad_creation_is_an_error() {
        assert!(matches!(
            Tensor::from_vec(vec![1.0; 3], &[2, 2]).unwrap_err().kind(),
            ErrorKind::LengthMismatch { .. }
        ));
        assert!(Tensor::arange(0.0, 1.0, 0.0).is_err());
        assert!(Tensor::arange(0.0, 1.0, -1.0).is_err());
        assert!(Tensor::one_hot(&[3], 3).is_err());
    }
}
