//! `std::ops` operators on `&Tensor`. Tensor–tensor arithmetic broadcasts and can fail, so it
//! returns `Result<Tensor>`; arithmetic with an `f32` on the right and negation cannot fail
//! and return a `Tensor`. Only references implement them: an impl on owned `Tensor` would
//! shadow the inherent `x.mul(&y)` methods in method lookup.
//!
//! ```
//! use forgia::Tensor;
//! let a = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
//! let b = Tensor::from_vec(vec![3.0, 4.0], &[2])?;
//! let c = &(&(&a * &b)? + 1.0) / 2.0;
//! assert_eq!(c.to_vec(), vec![2.0, 4.5]);
//! assert_eq!((-&a).to_vec(), vec![-1.0, -2.0]);
//! # Ok::<(), forgia::Error>(())
//! ```

use std::ops::{Add, Div, Mul, Neg, Sub};

use crate::autograd::Tensor;
use crate::error::Result;

impl Add<&Tensor> for &Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::add`].
    fn add(self, rhs: &Tensor) -> Result<Tensor> {
        Tensor::add(self, rhs)
    }
}

impl Sub<&Tensor> for &Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::sub`].
    fn sub(self, rhs: &Tensor) -> Result<Tensor> {
        Tensor::sub(self, rhs)
    }
}

impl Mul<&Tensor> for &Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::mul`].
    fn mul(self, rhs: &Tensor) -> Result<Tensor> {
        Tensor::mul(self, rhs)
    }
}

impl Div<&Tensor> for &Tensor {
    type Output = Result<Tensor>;
    /// [`Tensor::div`].
    fn div(self, rhs: &Tensor) -> Result<Tensor> {
        Tensor::div(self, rhs)
    }
}

impl Add<f32> for &Tensor {
    type Output = Tensor;
    /// [`Tensor::add_scalar`].
    fn add(self, rhs: f32) -> Tensor {
        self.add_scalar(rhs)
    }
}

impl Sub<f32> for &Tensor {
    type Output = Tensor;
    /// [`Tensor::sub_scalar`].
    fn sub(self, rhs: f32) -> Tensor {
        self.sub_scalar(rhs)
    }
}

impl Mul<f32> for &Tensor {
    type Output = Tensor;
    /// [`Tensor::scale`].
    fn mul(self, rhs: f32) -> Tensor {
        self.scale(rhs)
    }
}

impl Div<f32> for &Tensor {
    type Output = Tensor;
    /// [`Tensor::div_scalar`].
    fn div(self, rhs: f32) -> Tensor {
        self.div_scalar(rhs)
    }
}

impl Neg for &Tensor {
    type Output = Tensor;
    /// [`Tensor::neg`].
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
