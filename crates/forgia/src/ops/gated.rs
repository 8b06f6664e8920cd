//! Gated linear units: `value · act(gate)` with `act` the sigmoid (GLU), SiLU (SwiGLU) or
//! exact GELU (GeGLU). Each comes split (two tensors) and fused (one tensor whose axis is cut
//! in half, `torch.nn.functional.glu(x, dim)`: the first half is the value, the second the
//! gate). One fused kernel and one record serve all six; the record's `create_graph` path is
//! written in differentiable ops.

use super::activation::{GeluErf, Sigmoid, Silu};
use super::unary::{unary, UnaryRule};
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::pointwise;
use crate::tensor::{Array, Axis};

/// The value and gate halves of `x` along `axis` (views).
fn halves(op: &'static str, x: &Tensor, axis: usize) -> Result<(Tensor, Tensor)> {
    let n = x.shape()[axis];
    if !n.is_multiple_of(2) {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "dim",
            reason: format!("halving axis {axis} of size {n} (shape {:?}) needs an even size", x.shape()),
        });
    }
    Ok((x.narrow(axis, 0, n / 2)?, x.narrow(axis, n / 2, n / 2)?))
}

/// The rule's derivative at `gate` in differentiable ops.
fn df_tensor<R: UnaryRule + Copy>(rule: R, gate: &Tensor) -> Result<Tensor> {
    if R::USES_OUTPUT {
        rule.df_tensor(&unary(gate, rule))
    } else {
        rule.df_tensor(gate)
    }
}

/// The rule's derivative at one gate value.
#[inline(always)]
fn df<R: UnaryRule>(rule: &R, g: f32) -> f32 {
    if R::USES_OUTPUT {
        rule.df(rule.f(g))
    } else {
        rule.df(g)
    }
}

/// `value · f(gate)` over packed, equally shaped operands.
fn forward<R: UnaryRule + Copy>(op: &'static str, value: &Tensor, gate: &Tensor, rule: R) -> Result<Tensor> {
    let (v, g) = (value.contiguous_data(op)?, gate.contiguous_data(op)?);
    let mut out = crate::tensor::buffer(op, v.numel())?;
    pointwise::zip(
        v.packed(),
        g.packed(),
        &mut out,
        #[inline(always)]
        |v, g| v * rule.f(g),
    );
    Ok(Tensor::from_parts(out, value.shape()))
}

/// The split form: checks the shapes, runs the kernel, attaches the record.
fn split<R: UnaryRule + Copy>(op: &'static str, value: &Tensor, gate: &Tensor, rule: R) -> Result<Tensor> {
    if value.shape() != gate.shape() {
        return fail(ErrorKind::ShapeMismatch { op, lhs: value.shape().to_vec(), rhs: gate.shape().to_vec() });
    }
    let out = forward(op, value, gate, rule)?;
    Ok(attach(out, &[value, gate], || GatedBackward {
        op,
        rule,
        operands: Operands::Split { value: value.value(), gate: gate.value() },
    }))
}

/// The fused form over `axis` of `x`.
fn fused<R: UnaryRule + Copy>(op: &'static str, x: &Tensor, axis: Axis, rule: R) -> Result<Tensor> {
    let axis = x.axis(op, axis)?;
    let (value, gate) = halves(op, &x.detach(), axis)?;
    let out = forward(op, &value, &gate, rule)?;
    Ok(attach(out, &[x], || GatedBackward { op, rule, operands: Operands::Fused { x: x.value(), axis } }))
}

enum Operands {
    Split { value: Array, gate: Array },
    Fused { x: Array, axis: usize },
}

struct GatedBackward<R> {
    op: &'static str,
    rule: R,
    operands: Operands,
}

impl<R: UnaryRule + Copy> GatedBackward<R> {
    /// `(g_value, g_gate) = (gy·f(gate), gy·value·f'(gate))`, fused or in tensor ops.
    fn grads(&self, cx: &VjpCtx<'_>, value: &Tensor, gate: &Tensor, gy: &Tensor) -> Result<(Tensor, Tensor)> {
        if cx.create_graph() {
            let gv = gy.mul(&unary(gate, self.rule))?;
            let gg = gy.mul(value)?.mul(&df_tensor(self.rule, gate)?)?;
            return Ok((gv, gg));
        }
        let (v, g, dy) =
            (value.contiguous_data(self.name())?, gate.contiguous_data(self.name())?, gy.contiguous_data(self.name())?);
        let n = v.numel();
        let (mut gv, mut gg) = (crate::tensor::buffer(self.op, n)?, crate::tensor::buffer(self.op, n)?);
        let rule = self.rule;
        pointwise::zip(
            dy.packed(),
            g.packed(),
            &mut gv,
            #[inline(always)]
            |dy, g| dy * rule.f(g),
        );
        pointwise::zip3(
            dy.packed(),
            v.packed(),
            g.packed(),
            &mut gg,
            #[inline(always)]
            |dy, v, g| dy * v * df(&rule, g),
        );
        Ok((Tensor::from_parts(gv, value.shape()), Tensor::from_parts(gg, value.shape())))
    }
}

impl<R: UnaryRule + Copy> Backward for GatedBackward<R> {
    fn name(&self) -> &'static str {
        self.op
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        match &self.operands {
            Operands::Split { value, gate } => {
                let (gv, gg) = self.grads(cx, &cx.input(0, value), &cx.input(1, gate), gy)?;
                let keep = |i: usize, g: Tensor| cx.needs_grad(i).then_some(g);
                out.extend([keep(0, gv), keep(1, gg)]);
                Ok(())
            }
            Operands::Fused { x, axis } => {
                let (value, gate) = halves(self.op, &cx.input(0, x), *axis)?;
                let (gv, gg) = self.grads(cx, &value, &gate, gy)?;
                out.push(Some(Tensor::concat(&[&gv, &gg], *axis)?));
                Ok(())
            }
        }
    }

    fn estimated_work(&self) -> usize {
        match &self.operands {
            Operands::Split { value, .. } => 2 * value.numel(),
            Operands::Fused { x, .. } => x.numel(),
        }
    }
}

impl Tensor {
    /// GLU, split form: `self · σ(gate)` for equally shaped `self` (the value) and `gate`.
    ///
    /// Backward: `g_self = gy·σ(gate)`, `g_gate = gy·self·σ(gate)·(1 - σ(gate))`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes differ.
    pub fn glu_with(&self, gate: &Tensor) -> Result<Tensor> {
        split("glu", self, gate, Sigmoid)
    }

    /// SwiGLU, split form: `self · silu(gate)`. Llama's feed-forward block is
    /// `w2(up · silu(gate))` with `up = w3 x`, `gate = w1 x`: `up.swiglu_with(&gate)`.
    ///
    /// Backward: `g_self = gy·silu(gate)`, `g_gate = gy·self·σ(gate)·(1 + gate·(1 - σ(gate)))`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes differ.
    pub fn swiglu_with(&self, gate: &Tensor) -> Result<Tensor> {
        split("swiglu", self, gate, Silu)
    }

    /// GeGLU, split form: `self · gelu(gate)` (exact, erf-based GELU).
    ///
    /// Backward: `g_self = gy·gelu(gate)`, `g_gate = gy·self·(Φ(gate) + gate·φ(gate))`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes differ.
    pub fn geglu_with(&self, gate: &Tensor) -> Result<Tensor> {
        split("geglu", self, gate, GeluErf)
    }

    /// GLU, fused form (`torch.nn.functional.glu(x, dim)`): `a · σ(b)` where `a` and `b` are
    /// the first and second halves of `dim`. The output has half the size along `dim`.
    ///
    /// Backward: the split form's gradients of `a` and `b`, concatenated along `dim`.
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `InvalidArgument` when its size is
    /// odd.
    pub fn glu(&self, dim: impl Into<Axis>) -> Result<Tensor> {
        fused("glu", self, dim.into(), Sigmoid)
    }

    /// SwiGLU, fused form: `a · silu(b)` over the halves of `dim` (as [`Tensor::glu`]).
    ///
    /// Backward: as [`Tensor::swiglu_with`], concatenated along `dim`.
    ///
    /// # Errors
    /// As [`Tensor::glu`].
    pub fn swiglu(&self, dim: impl Into<Axis>) -> Result<Tensor> {
        fused("swiglu", self, dim.into(), Silu)
    }

    /// GeGLU, fused form: `a · gelu(b)` over the halves of `dim` (as [`Tensor::glu`]).
    ///
    /// Backward: as [`Tensor::geglu_with`], concatenated along `dim`.
    ///
    /// # Errors
    /// As [`Tensor::glu`].
    pub fn geglu(&self, dim: impl Into<Axis>) -> Result<Tensor> {
        fused("geglu", self, dim.into(), GeluErf)
    }
}
