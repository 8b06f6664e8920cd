//! Custom VJPs: the [`CustomOp`] trait and the [`custom_op`] adapter that turns a user's
//! forward and backward into an ordinary graph node (saved detached tensors, grad mode,
//! per-operand pruning, and a check of every gradient the user returns).

use super::mode::no_grad;
use super::node::{attach, Backward, Grads, VjpCtx};
use crate::autograd::Tensor;
use crate::error::{fail, Error, ErrorKind, Result};
use crate::tensor::Array;

/// A differentiable op written outside the library: a forward on plain tensors and its
/// vector–Jacobian product.
///
/// `forward` runs with recording off on detached inputs, so it may use any tensor op (or read
/// values with [`Tensor::to_vec`](crate::Array::to_vec) and build the result with [`Tensor::from_vec`]).
///
/// `backward` receives the inputs, the output, the incoming gradient `gy` (the shape of the
/// output) and one flag per input; it returns one slot per input: `Some(dL/dx_i)` (the shape of
/// input `i`) where `needs_grad[i]`, anything (ignored) elsewhere. In a `create_graph` pass
/// the tensors it receives are reconnected to the graph and recording is on, so a backward
/// written with differentiable tensor ops is itself differentiable (Hessian-vector products);
/// one that computes through raw values yields constants there.
pub trait CustomOp: Send + Sync + 'static {
    /// The op's name, used in errors and by [`Tensor::grad_fn`].
    fn name(&self) -> &'static str;

    /// Computes the output from the inputs.
    ///
    /// # Errors
    /// Whatever the op wants to report; [`custom_op`] returns it unchanged.
    fn forward(&self, inputs: &[Tensor]) -> Result<Tensor>;

    /// Computes `dL/dx_i = gyᵀ · ∂y/∂x_i` for each input with `needs_grad[i]`.
    ///
    /// # Errors
    /// Whatever the op wants to report; the backward pass returns it wrapped as
    /// `ErrorKind::Nested` with the op's name as the context.
    fn backward(
        &self,
        inputs: &[Tensor],
        output: &Tensor,
        gy: &Tensor,
        needs_grad: &[bool],
    ) -> Result<Vec<Option<Tensor>>>;
}

/// Applies a [`CustomOp`] to `inputs` and, when grad mode is on and some input has a gradient
/// node, gives the result a node whose backward calls `op.backward`.
///
/// The adapter keeps detached handles to the inputs and the output (they share storage, no
/// copy), and checks each gradient the op returns against its operand.
///
/// ```
/// use forgia::{custom_op, gradcheck, CustomOp, GradcheckOptions, Result, Tensor};
///
/// /// y = log(1 + eˣ); dy/dx = sigmoid(x).
/// struct Softplus;
/// impl CustomOp for Softplus {
///     fn name(&self) -> &'static str { "softplus" }
///     fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
///         let y = xs[0].to_vec().iter().map(|&x| x.exp().ln_1p()).collect();
///         Tensor::from_vec(y, xs[0].shape())
///     }
///     fn backward(&self, xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool])
///         -> Result<Vec<Option<Tensor>>> {
///         // sigmoid(x) = (1 + tanh(x/2)) / 2, in differentiable ops.
///         let sigmoid = xs[0].scale(0.5).tanh().add_scalar(1.0).scale(0.5);
///         Ok(vec![Some(gy.mul(&sigmoid)?)])
///     }
/// }
///
/// let x = Tensor::variable(vec![-1.5, 0.2, 2.0], &[3])?;
/// let report = gradcheck(|xs| Ok(custom_op(Softplus, &[&xs[0]])?.sum_all()), &[x], GradcheckOptions::default())?;
/// assert!(report.passed());
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// Any error of `op.forward`. During backward: `MissingBackwardGradient { op, operand }` when
/// the op returns no gradient (or too few slots) for an input that needs one,
/// `GradientShapeMismatch` for a gradient of the wrong shape, `InvalidArgument` for more
/// slots than inputs, and the op's own errors wrapped
/// as `Nested { context: op.name(), .. }`.
pub fn custom_op(op: impl CustomOp, inputs: &[&Tensor]) -> Result<Tensor> {
    let detached: Vec<Tensor> = inputs.iter().map(|t| t.detach()).collect();
    let output = {
        let _guard = no_grad();
        op.forward(&detached)?.detach()
    };
    Ok(attach(output.clone(), inputs, move || CustomBackward {
        op,
        inputs: detached.iter().map(Tensor::value).collect(),
        output: output.value(),
    }))
}

/// The record of a custom op: the user's op and detached handles to its operands and result.
struct CustomBackward<O> {
    op: O,
    inputs: Vec<Array>,
    output: Array,
}

impl<O: CustomOp> Backward for CustomBackward<O> {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    /// Calls the user's backward with the saved tensors (reconnected in `create_graph`
    /// passes), then keeps only the checked gradients of the operands that need one.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let op = self.op.name();
        let needs: Vec<bool> = (0..self.inputs.len()).map(|i| cx.needs_grad(i)).collect();
        let inputs: Vec<Tensor> = self.inputs.iter().enumerate().map(|(i, x)| cx.input(i, x)).collect();
        let output = cx.output(&self.output);
        let mut returned = self
            .op
            .backward(&inputs, &output, gy, &needs)
            .map_err(|e| Error::from(ErrorKind::Nested { context: op, source: Box::new(e) }))?;
        if returned.len() > inputs.len() {
            return fail(ErrorKind::InvalidArgument {
                op,
                arg: "backward",
                reason: format!("returned {} gradients for {} inputs", returned.len(), inputs.len()),
            });
        }
        returned.resize(inputs.len(), None);
        out.reserve(inputs.len());
        for (i, (x, g)) in self.inputs.iter().zip(returned).enumerate() {
            if !needs[i] {
                out.push(None);
                continue;
            }
            let Some(g) = g else { return fail(ErrorKind::MissingBackwardGradient { op, operand: i }) };
            if g.shape() != x.shape() {
                return fail(ErrorKind::GradientShapeMismatch {
                    op,
                    operand: i,
                    expected: x.shape().to_vec(),
                    got: g.shape().to_vec(),
                });
            }
            out.push(Some(g));
        }
        Ok(())
    }
}
