//! Pointwise binary ops with NumPy broadcasting. Each record returns its operands' gradients in
//! the broadcast shape; the engine sums each back to its operand's shape.

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::pointwise;
use crate::tensor::layout::{broadcast_shapes, same_shape};
use crate::tensor::{names, Array, Names, Saved, Shape};

/// Output names of a broadcasting op: the operands' names aligned from the right
/// ([`crate::tensor::names::broadcast`]); an error when two names meet that differ.
pub(crate) fn broadcast_names(op: &'static str, a: &Array, b: &Array, rank: usize) -> Result<Option<Names>> {
    names::broadcast(op, a.names.as_ref(), a.rank(), b.names.as_ref(), b.rank(), rank)
}

/// Computes `f(a, b)` elementwise over the broadcast shape (no node).
pub(crate) fn broadcast_map(
    op: &'static str,
    a: &Array,
    b: &Array,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Result<Tensor> {
    if same_shape(a.shape(), b.shape()) {
        // The common case of equal, packed operands: one packed zip, no broadcast layouts.
        if let (Some(ra), Some(rb)) = (a.layout.contiguous_range(), b.layout.contiguous_range()) {
            let (sa, sb) = (a.storage(), b.storage());
            let mut out =
                Tensor::filled(op, a.shape(), |out| pointwise::zip(&sa.as_slice()[ra], &sb.as_slice()[rb], out, f))?;
            if a.names.is_some() || b.names.is_some() {
                out.names = broadcast_names(op, a, b, a.rank())?;
            }
            return Ok(out);
        }
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let la = a.layout.broadcast_to(&shape);
    let lb = b.layout.broadcast_to(&shape);
    let mut data = crate::tensor::buffer(op, la.numel())?;
    pointwise::zip_broadcast(a.storage().as_slice(), &la, b.storage().as_slice(), &lb, &mut data, f);
    let mut out = Tensor::from_parts(data, &shape);
    out.names = broadcast_names(op, a, b, shape.len())?;
    Ok(out)
}

impl Tensor {
    /// `a + b` with broadcasting.
    ///
    /// Backward: `ga = sum_to(gy, a.shape)`, `gb = sum_to(gy, b.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn add(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("add", self, other, |a, b| a + b)?;
        Ok(attach(out, &[self, other], || AddBackward))
    }

    /// `a - b` with broadcasting.
    ///
    /// Backward: `ga = sum_to(gy, a.shape)`, `gb = -sum_to(gy, b.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn sub(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("sub", self, other, |a, b| a - b)?;
        Ok(attach(out, &[self, other], || SubBackward))
    }

    /// `a * b` elementwise with broadcasting.
    ///
    /// Backward: `ga = sum_to(gy * b, a.shape)`, `gb = sum_to(gy * a, b.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn mul(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("mul", self, other, |a, b| a * b)?;
        Ok(attach(out, &[self, other], || MulBackward {
            saved: Partners::new(self, other),
            shapes: Shapes::new(self, other),
        }))
    }

    /// `a / b` elementwise with broadcasting.
    ///
    /// Backward: `ga = sum_to(gy / b, a.shape)`, `gb = -sum_to(gy * a / b², b.shape)`.
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn div(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("div", self, other, |a, b| a / b)?;
        Ok(attach(out, &[self, other], || DivBackward { a: self.value(), b: other.value() }))
    }

    /// `a ^ b` elementwise with broadcasting (IEEE `powf`).
    ///
    /// Backward: `ga = sum_to(gy * b * a^(b-1), a.shape)`,
    /// `gb = sum_to(gy * y * ln a, b.shape)`, with `ln a` taken as 0 where `a == 0` (so the
    /// exponent's gradient is 0 there, as in torch).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn pow(&self, exponent: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("pow", self, exponent, f32::powf)?;
        let y = out.detach();
        Ok(attach(out, &[self, exponent], || PowBackward { a: self.value(), b: exponent.value(), y: y.value() }))
    }

    /// The elementwise maximum with broadcasting; NaN propagates.
    ///
    /// Backward: `gy` goes to the larger operand; ties split it evenly (`gy/2` each).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn maximum(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("maximum", self, other, |a, b| if a > b || a.is_nan() { a } else { b })?;
        Ok(attach(out, &[self, other], || ExtremeBackward { a: self.value(), b: other.value(), max: true }))
    }

    /// The elementwise minimum with broadcasting; NaN propagates.
    ///
    /// Backward: `gy` goes to the smaller operand; ties split it evenly (`gy/2` each).
    ///
    /// # Errors
    /// `ShapeMismatch` when the shapes do not broadcast.
    pub fn minimum(&self, other: &Tensor) -> Result<Tensor> {
        let out = broadcast_map("minimum", self, other, |a, b| if a < b || a.is_nan() { a } else { b })?;
        Ok(attach(out, &[self, other], || ExtremeBackward { a: self.value(), b: other.value(), max: false }))
    }

    /// `s * x`.
    ///
    /// Backward: `gx = s * gy`.
    pub fn scale(&self, s: f32) -> Tensor {
        scalar_map(self, |v| v * s, s)
    }

    /// `x + s`.
    ///
    /// Backward: `gx = gy`.
    pub fn add_scalar(&self, s: f32) -> Tensor {
        scalar_map(self, |v| v + s, 1.0)
    }

    /// `x - s`.
    ///
    /// Backward: `gx = gy`.
    pub fn sub_scalar(&self, s: f32) -> Tensor {
        scalar_map(self, |v| v - s, 1.0)
    }

    /// `x / s` (IEEE: dividing by 0 gives ±∞ or NaN).
    ///
    /// Backward: `gx = gy / s`.
    pub fn div_scalar(&self, s: f32) -> Tensor {
        scalar_map(self, |v| v / s, 1.0 / s)
    }
}

/// `f(x)` elementwise for an affine `f` whose slope is `slope`; names carried over.
fn scalar_map(x: &Tensor, f: impl Fn(f32) -> f32 + Sync, slope: f32) -> Tensor {
    let out = x.map_stored_into("scale", |d, out| pointwise::map(d, out, f));
    attach(out, &[x], || ScaleBackward { s: slope })
}

/// The operand shapes a product's record rebuilds its saved operands with: nothing stored when
/// both operands have the output's shape (the common case; a record stays a few bytes).
pub(crate) struct Shapes(Option<Box<[Shape; 2]>>);

impl Shapes {
    pub(crate) fn new(a: &Tensor, b: &Tensor) -> Shapes {
        if same_shape(a.shape(), b.shape()) {
            Shapes(None)
        } else {
            Shapes(Some(Box::new([a.shape().into(), b.shape().into()])))
        }
    }

    /// Operand `i`'s shape, given the incoming gradient (which has the output's shape).
    pub(crate) fn get<'s>(&'s self, i: usize, gy: &'s Tensor) -> &'s [usize] {
        match &self.0 {
            None => gy.shape(),
            Some(shapes) => &shapes[i],
        }
    }
}

/// The operand values a product's backward reads: each operand's gradient needs only the
/// other operand, so a constant's partner is not kept.
enum Partners {
    /// Only `a` (operand 0) is kept: only operand 1 needs a gradient.
    A(Saved),
    /// Only `b` (operand 1) is kept: only operand 0 needs a gradient.
    B(Saved),
    /// Both operands need gradients.
    Both(Box<(Saved, Saved)>),
}

impl Partners {
    fn new(a: &Tensor, b: &Tensor) -> Partners {
        match (a.requires_grad(), b.requires_grad()) {
            (true, true) => Partners::Both(Box::new((Saved::new(a), Saved::new(b)))),
            (true, false) => Partners::B(Saved::new(b)),
            _ => Partners::A(Saved::new(a)),
        }
    }

    fn a(&self) -> Option<&Saved> {
        match self {
            Partners::A(a) => Some(a),
            Partners::Both(ab) => Some(&ab.0),
            Partners::B(_) => None,
        }
    }

    fn b(&self) -> Option<&Saved> {
        match self {
            Partners::B(b) => Some(b),
            Partners::Both(ab) => Some(&ab.1),
            Partners::A(_) => None,
        }
    }
}

/// `add`'s record. A unit struct, as `sub`'s: boxing a zero-sized record allocates nothing.
struct AddBackward;

impl Backward for AddBackward {
    fn name(&self) -> &'static str {
        "add"
    }

    fn reads_values() -> bool {
        false
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(cx.needs_grad(0).then(|| gy.clone()));
        out.push(cx.needs_grad(1).then(|| gy.clone()));
        Ok(())
    }
}

/// `sub`'s record.
struct SubBackward;

impl Backward for SubBackward {
    fn name(&self) -> &'static str {
        "sub"
    }

    fn reads_values() -> bool {
        false
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(cx.needs_grad(0).then(|| gy.clone()));
        out.push(cx.needs_grad(1).then(|| gy.scale(-1.0)));
        Ok(())
    }
}

struct MulBackward {
    saved: Partners,
    shapes: Shapes,
}

impl Backward for MulBackward {
    fn name(&self) -> &'static str {
        "mul"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        let kept = "a product keeps the partner of every operand that needs a gradient";
        if !cx.create_graph() && self.shapes.0.is_none() {
            // Operands of the output's shape, no graph to build: `gy * partner` in one zip
            // over the saved buffer (the per-op path of long chains of small products).
            for (i, partner) in [(0, self.saved.b()), (1, self.saved.a())] {
                if cx.needs_grad(i) {
                    let partner = partner.expect(kept);
                    out[i] = Some(partner.try_with_data("mul", gy.shape(), |p| {
                        gy.try_with_data("mul", |g| {
                            Tensor::filled("mul", gy.shape(), |out| pointwise::zip(g, p, out, |g, p| g * p))
                        })
                    })?);
                }
            }
            return Ok(());
        }
        if cx.needs_grad(0) {
            let b = cx.input(1, &self.saved.b().expect(kept).value(self.shapes.get(1, gy)));
            out[0] = Some(gy.mul(&b)?);
        }
        if cx.needs_grad(1) {
            let a = cx.input(0, &self.saved.a().expect(kept).value(self.shapes.get(0, gy)));
            out[1] = Some(gy.mul(&a)?);
        }
        Ok(())
    }
}

struct DivBackward {
    a: Array,
    b: Array,
}

impl Backward for DivBackward {
    fn name(&self) -> &'static str {
        "div"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        let b = cx.input(1, &self.b);
        if cx.needs_grad(0) {
            out[0] = Some(gy.div(&b)?);
        }
        if cx.needs_grad(1) {
            let a = cx.input(0, &self.a);
            let g = gy.mul(&a)?.div(&b.mul(&b)?)?.scale(-1.0);
            out[1] = Some(g);
        }
        Ok(())
    }
}

struct ScaleBackward {
    s: f32,
}

impl Backward for ScaleBackward {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        out.push(Some(if self.s == 1.0 { gy.clone() } else { gy.scale(self.s) }));
        Ok(())
    }
}

struct PowBackward {
    a: Array,
    b: Array,
    y: Array,
}

impl Backward for PowBackward {
    fn name(&self) -> &'static str {
        "pow"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        let (a, b) = (cx.input(0, &self.a), cx.input(1, &self.b));
        if cx.needs_grad(0) {
            let g = gy.mul(&b)?.mul(&a.pow(&b.add_scalar(-1.0))?)?;
            out[0] = Some(g);
        }
        if cx.needs_grad(1) {
            // ln a with a == 0 replaced by 1, so 0^b contributes no exponent gradient.
            let zero = self.a.try_with_data("pow", |d| {
                let mut zero = crate::tensor::buffer("pow", d.len())?;
                pointwise::map(d, &mut zero, |v| f32::from(v == 0.0));
                Ok(Tensor::from_parts(zero, a.shape()))
            })?;
            let log_a = a.masked_fill(&zero, 1.0)?.log();
            let g = gy.mul(&cx.output(&self.y))?.mul(&log_a)?;
            out[1] = Some(g);
        }
        Ok(())
    }
}

struct ExtremeBackward {
    a: Array,
    b: Array,
    max: bool,
}

impl Backward for ExtremeBackward {
    fn name(&self) -> &'static str {
        if self.max {
            "maximum"
        } else {
            "minimum"
        }
    }

    /// `ga = sum_to(gy * wa)`, `gb = sum_to(gy * (1 - wa))`, where the constant weight `wa` is
    /// 1 where `a` wins, ½ on ties, 0 where `b` wins.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let max = self.max;
        let wa = broadcast_map(self.name(), &self.a, &self.b, |a, b| {
            let a_wins = if max { a > b } else { a < b };
            if a_wins || a.is_nan() {
                1.0
            } else if a == b {
                0.5
            } else {
                0.0
            }
        })?;
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(gy.mul(&wa)?);
        }
        if cx.needs_grad(1) {
            let wb = wa.neg().add_scalar(1.0);
            out[1] = Some(gy.mul(&wb)?);
        }
        Ok(())
    }
}
