//! Creating arrays: from data, filled, ranges, identity, one-hot, seeded random. `Array`'s
//! constructors of the same names make constants from these.

use super::{alloc, Array, Rng, Size};
use crate::error::{check, fail, ErrorKind, Result};

impl Array {
    /// A constant from row-major `data` with `shape`.
    ///
    /// ```
    /// let t = forgia::Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    /// assert_eq!(t.shape(), &[2, 2]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `LengthMismatch` when `data.len()` is not the product of `shape`; `SizeOverflow` when
    /// that product does not fit (`[0, 2^32, 2^32]`).
    pub fn from_vec(data: Vec<f32>, shape: &[usize]) -> Result<Array> {
        let expected = Size::of("from_vec", shape)?.numel();
        if data.len() != expected {
            return fail(ErrorKind::LengthMismatch {
                op: "from_vec",
                shape: shape.to_vec(),
                expected,
                got: data.len(),
            });
        }
        Ok(Array::from_parts(data, shape))
    }

    /// A constant from a slice.
    ///
    /// # Errors
    /// `LengthMismatch` as [`Array::from_vec`].
    pub fn from_slice(data: &[f32], shape: &[usize]) -> Result<Array> {
        Array::from_vec(data.to_vec(), shape)
    }

    /// A rank-0 constant.
    pub fn scalar(value: f32) -> Array {
        Array::from_parts(vec![value], &[])
    }

    /// A constant filled with `value`.
    ///
    /// # Errors
    /// `SizeOverflow` when the shape's size does not fit; `OutOfMemory` when the buffer cannot
    /// be allocated.
    pub fn full(shape: &[usize], value: f32) -> Result<Array> {
        filled("full", shape, value)
    }

    /// A constant of zeros.
    ///
    /// ```
    /// let t = forgia::Tensor::zeros(&[2, 3])?;
    /// assert_eq!(t.to_vec(), vec![0.0; 6]);
    /// // Too big for any machine: an error, not an abort.
    /// assert!(forgia::Tensor::zeros(&[1 << 40]).is_err());
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `SizeOverflow` / `OutOfMemory` as [`Array::full`].
    pub fn zeros(shape: &[usize]) -> Result<Array> {
        filled("zeros", shape, 0.0)
    }

    /// A constant of ones.
    ///
    /// # Errors
    /// `SizeOverflow` / `OutOfMemory` as [`Array::full`].
    pub fn ones(shape: &[usize]) -> Result<Array> {
        filled("ones", shape, 1.0)
    }

    /// Zeros with the shape of `other` (packed, whatever `other`'s layout).
    ///
    /// # Errors
    /// `OutOfMemory` as [`Array::full`] (`other` may be a broadcast view far larger than its
    /// storage).
    pub fn zeros_like(other: &Array) -> Result<Array> {
        filled("zeros_like", other.shape(), 0.0)
    }

    /// Ones with the shape of `other`.
    ///
    /// # Errors
    /// `OutOfMemory` as [`Array::zeros_like`].
    pub fn ones_like(other: &Array) -> Result<Array> {
        filled("ones_like", other.shape(), 1.0)
    }

    /// `start, start+step, …` up to (excluding) `end`, as a rank-1 constant.
    ///
    /// # Errors
    /// `InvalidArgument` when a bound is not finite, or `step` is zero, not finite, or points
    /// away from `end`; `SizeOverflow` / `OutOfMemory` when the count is too large.
    pub fn arange(start: f32, end: f32, step: f32) -> Result<Array> {
        check::finite("arange", "start", start)?;
        check::finite("arange", "end", end)?;
        if step == 0.0 || !step.is_finite() || (end - start) * step < 0.0 {
            return fail(ErrorKind::InvalidArgument {
                op: "arange",
                arg: "step",
                reason: format!("step {step} cannot go from {start} to {end}"),
            });
        }
        let n = ((end - start) / step).ceil().max(0.0) as usize; // saturates: then overflows below
        let mut data = filled_vec("arange", &[n], 0.0)?;
        for (i, v) in data.iter_mut().enumerate() {
            *v = start + i as f32 * step;
        }
        Ok(Array::from_parts(data, &[n]))
    }

    /// `n` evenly spaced values from `start` to `end` inclusive.
    ///
    /// # Errors
    /// `InvalidArgument` when a bound is not finite; `SizeOverflow` / `OutOfMemory` when `n` is
    /// too large.
    pub fn linspace(start: f32, end: f32, n: usize) -> Result<Array> {
        check::finite("linspace", "start", start)?;
        check::finite("linspace", "end", end)?;
        let mut data = filled_vec("linspace", &[n], start)?;
        if n > 1 {
            for (i, v) in data.iter_mut().enumerate() {
                *v = start + (end - start) * i as f32 / (n - 1) as f32;
            }
        }
        Ok(Array::from_parts(data, &[n]))
    }

    /// The `n × n` identity matrix.
    ///
    /// # Errors
    /// `SizeOverflow` when `n²` does not fit; `OutOfMemory` when it cannot be allocated.
    pub fn eye(n: usize) -> Result<Array> {
        let mut data = filled_vec("eye", &[n, n], 0.0)?;
        for i in 0..n {
            data[i * n + i] = 1.0;
        }
        Ok(Array::from_parts(data, &[n, n]))
    }

    /// Rows of one-hot vectors: shape `[indices.len(), classes]`.
    ///
    /// # Errors
    /// `IndexOutOfRange` for an index `>= classes`; `SizeOverflow` / `OutOfMemory` when the
    /// shape is too large.
    pub fn one_hot(indices: &[usize], classes: usize) -> Result<Array> {
        if let Some(&i) = indices.iter().find(|&&i| i >= classes) {
            // Saturated, never wrapped: usize::MAX is not "index -1".
            let index = i64::try_from(i).unwrap_or(i64::MAX);
            return fail(ErrorKind::IndexOutOfRange { op: "one_hot", index, size: classes });
        }
        let shape = [indices.len(), classes];
        let mut data = filled_vec("one_hot", &shape, 0.0)?;
        for (row, &i) in indices.iter().enumerate() {
            data[row * classes + i] = 1.0;
        }
        Ok(Array::from_parts(data, &shape))
    }

    /// Uniform values in `[low, high)` from an explicit generator.
    ///
    /// # Errors
    /// `InvalidArgument` when a bound is not finite or `low > high`; `SizeOverflow` /
    /// `OutOfMemory` as [`Array::full`].
    pub fn rand(shape: &[usize], low: f32, high: f32, rng: &mut Rng) -> Result<Array> {
        check::ordered_range("rand", low, high)?;
        let mut data = filled_vec("rand", shape, 0.0)?;
        data.iter_mut().for_each(|v| *v = low + (high - low) * rng.uniform());
        Ok(Array::from_parts(data, shape))
    }

    /// Normal values with `mean` and `std` from an explicit generator.
    ///
    /// # Errors
    /// `InvalidArgument` when `mean` is not finite or `std` is negative or not finite;
    /// `SizeOverflow` / `OutOfMemory` as [`Array::full`].
    pub fn randn(shape: &[usize], mean: f32, std: f32, rng: &mut Rng) -> Result<Array> {
        check::finite("randn", "mean", mean)?;
        check::non_negative("randn", "std", std)?;
        let mut data = filled_vec("randn", shape, 0.0)?;
        data.iter_mut().for_each(|v| *v = mean + std * rng.normal());
        Ok(Array::from_parts(data, shape))
    }
}

/// A checked, fallibly allocated buffer for `shape`, every element `value`.
fn filled_vec(op: &'static str, shape: &[usize], value: f32) -> Result<Vec<f32>> {
    let mut data = alloc(op, Size::of(op, shape)?.numel())?;
    if value != 0.0 {
        data.fill(value);
    }
    Ok(data)
}

fn filled(op: &'static str, shape: &[usize], value: f32) -> Result<Array> {
    Ok(Array::from_parts(filled_vec(op, shape, value)?, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creation_fills_as_documented() {
        assert_eq!(Array::arange(0.0, 5.0, 2.0).unwrap().to_vec(), vec![0.0, 2.0, 4.0]);
        assert_eq!(Array::linspace(0.0, 1.0, 3).unwrap().to_vec(), vec![0.0, 0.5, 1.0]);
        assert_eq!(Array::linspace(2.0, 1.0, 1).unwrap().to_vec(), vec![2.0]);
        assert_eq!(Array::eye(2).unwrap().to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(Array::one_hot(&[1, 0], 3).unwrap().to_vec(), vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(Array::scalar(3.0).item().unwrap(), 3.0);
        let mut r1 = Rng::new(3);
        let mut r2 = Rng::new(3);
        assert_eq!(
            Array::randn(&[4], 0.0, 1.0, &mut r1).unwrap().to_vec(),
            Array::randn(&[4], 0.0, 1.0, &mut r2).unwrap().to_vec()
        );
    }

    #[test]
    fn bad_creation_is_an_error() {
        assert!(matches!(Array::from_vec(vec![1.0; 3], &[2, 2]).unwrap_err().kind(), ErrorKind::LengthMismatch { .. }));
        assert!(Array::arange(0.0, 1.0, 0.0).is_err());
        assert!(Array::arange(0.0, 1.0, -1.0).is_err());
        assert!(Array::one_hot(&[3], 3).is_err());
    }
}
