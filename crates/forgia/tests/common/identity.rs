//! The identity as a custom op with a side effect in its backward: the engine tests' probe for
//! how often, where and in what order a record runs, and for a record that fails.

use forgia::{CustomOp, Result, Tensor};

/// The identity, named `name`, whose backward first runs `before` (count a call, note the
/// thread, wait a little, or return an error) and then passes the gradient through unchanged.
pub struct Identity<F> {
    name: &'static str,
    before: F,
}

/// An [`Identity`] op; use it with `forgia::custom_op(identity(name, before), &[&x])`.
pub fn identity<F: Fn() -> Result<()> + Send + Sync + 'static>(name: &'static str, before: F) -> Identity<F> {
    Identity { name, before }
}

impl<F: Fn() -> Result<()> + Send + Sync + 'static> CustomOp for Identity<F> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        Ok(xs[0].scale(1.0))
    }

    fn backward(&self, _xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        (self.before)()?;
        Ok(vec![Some(gy.clone())])
    }
}
