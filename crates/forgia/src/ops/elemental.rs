//! Elemental ops: pointwise differentiable ops from scalar closures. The caller writes the
//! scalar math (`f` and the propagated gradient); the adapter owns buffers, broadcasting, the
//! reduction of each gradient to its operand's shape and the parallel chunking.

use std::sync::Arc;

use rayon::prelude::*;

use super::binary::broadcast_map;
use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::pointwise;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};
use crate::tensor::Array;

/// A pointwise op from scalar closures: `y = forward(x)` elementwise, with the record's
/// backward computing `gx = backward(x, y, gy)` elementwise.
///
/// `backward` returns the **propagated** gradient `dL/dx = dy/dx · gy`, not the bare local
/// derivative (so a straight-through estimator is just `|_, _, gy| gy`). Both closures run
/// on the library's pool above `PARALLEL_ELEMENTS` elements, in chunks.
///
/// ```
/// use forgia::{elemental_unary, gradcheck, GradcheckOptions, Tensor};
/// // softplus: y = log(1 + eˣ), dL/dx = sigmoid(x) · gy
/// let softplus = |x: &Tensor| elemental_unary(x, |x| x.exp().ln_1p(), |x, _y, gy| gy / (1.0 + (-x).exp()));
/// let x = Tensor::variable(vec![-1.5, 0.2, 2.0], &[3])?;
/// let report = gradcheck(|xs| Ok(softplus(&xs[0]).sum_all()), &[x], GradcheckOptions::default())?;
/// assert!(report.passed());
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// Second order needs the second-derivative closure of [`elemental_unary_with_second`]: a
/// `create_graph` pass through this op fails with
/// `DoubleBackwardUnsupported { op: "elemental_unary" }` rather than return a gradient whose
/// own derivative is unknown.
pub fn elemental_unary<F, B>(x: &Tensor, forward: F, backward: B) -> Tensor
where
    F: Fn(f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32) -> f32 + Send + Sync + 'static,
{
    unary(x, forward, backward, None)
}

/// [`elemental_unary`] with second order: `second(x, y, gy, ggx)` returns `(dL/dx, dL/dgy)`
/// for a loss `L` that reaches the op's gradient `gx = backward(x, y, gy)` with the
/// cotangent `ggx`, i.e. `(ggx · ∂gx/∂x, ggx · ∂gx/∂gy)`, where `∂/∂x` is the total derivative
/// (`y` is a function of `x`). For the usual `gx = f'(x) · gy` that is
/// `(ggx · f''(x) · gy, ggx · f'(x))`.
///
/// A `create_graph` pass through the op gives a differentiable gradient (gradient penalties,
/// Hessian-vector products); a third order fails with
/// `DoubleBackwardUnsupported { op: "elemental_unary_backward" }`.
///
/// ```
/// use forgia::{elemental_unary_with_second, BackwardOptions, Tensor};
/// // y = x³: gx = 3x²·gy, second = (ggx·6x·gy, ggx·3x²)
/// let x = Tensor::variable(vec![2.0], &[1])?;
/// let y = elemental_unary_with_second(
///     &x,
///     |x| x * x * x,
///     |x, _y, g| 3.0 * x * x * g,
///     |x, _y, g, gg| (gg * 6.0 * x * g, gg * 3.0 * x * x),
/// );
/// y.sum_all().backward_with(None, BackwardOptions { create_graph: true, ..Default::default() })?;
/// let g = x.grad().unwrap(); // 3x² = 12
/// x.zero_grad();
/// g.sum_all().backward()?;
/// assert_eq!(x.grad().unwrap().to_vec(), vec![12.0]); // 6x
/// # Ok::<(), forgia::Error>(())
/// ```
pub fn elemental_unary_with_second<F, B, S>(x: &Tensor, forward: F, backward: B, second: S) -> Tensor
where
    F: Fn(f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32) -> f32 + Send + Sync + 'static,
    S: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static,
{
    unary(x, forward, backward, Some(Arc::new(second)))
}

/// The second-derivative closure of a unary elemental op: `(x, y, gy, ggx) → (dx, dgy)`.
type UnarySecond = Arc<dyn Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync>;
/// The second-derivative closure of a binary elemental op:
/// `(a, b, y, gy, gga, ggb) → (da, db, dgy)`.
type BinarySecond = Arc<dyn Fn(f32, f32, f32, f32, f32, f32) -> (f32, f32, f32) + Send + Sync>;

fn unary<F, B>(x: &Tensor, forward: F, backward: B, second: Option<UnarySecond>) -> Tensor
where
    F: Fn(f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32) -> f32 + Send + Sync + 'static,
{
    let y = x.map_stored("elemental_unary", |d| {
        let mut y = crate::tensor::buffer("elemental_unary", d.len())?;
        pointwise::map(d, &mut y, &forward);
        Ok(y)
    });
    let saved_y = y.detach();
    attach(y, &[x], move || UnaryBackward { backward, second, x: x.value(), y: saved_y.value() })
}

/// The record of [`elemental_unary`].
struct UnaryBackward<B> {
    backward: B,
    second: Option<UnarySecond>,
    x: Array,
    y: Array,
}

impl<B: Fn(f32, f32, f32) -> f32 + Send + Sync + 'static> Backward for UnaryBackward<B> {
    fn name(&self) -> &'static str {
        "elemental_unary"
    }

    /// `gx[i] = backward(x[i], y[i], gy[i])`, in one fused pass; in a `create_graph` pass the
    /// same values get a record of `x` and `gy` that applies the second-derivative closure.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if self.second.is_none() {
            cx.fused("elemental_unary")?;
        }
        let (x, y, g) = (
            self.x.contiguous_data("elemental_unary")?,
            self.y.contiguous_data("elemental_unary")?,
            gy.contiguous_data("elemental_unary")?,
        );
        let mut gx = crate::tensor::buffer("elemental_unary", x.packed().len())?;
        pointwise::zip3(x.packed(), y.packed(), g.packed(), &mut gx, &self.backward);
        let gx = Tensor::from_parts(gx, self.x.shape());
        let gx = match &self.second {
            Some(second) if cx.create_graph() => {
                let record = || UnaryGradBackward { second: second.clone(), x: x.clone(), y: y.clone(), gy: g.value() };
                attach(gx, &[&cx.input(0, &self.x), gy], record)
            }
            _ => gx,
        };
        out.push(Some(gx));
        Ok(())
    }
}

/// A broadcasting pointwise op from scalar closures: `y = forward(a, b)` elementwise over the
/// broadcast shape, with the record's backward computing `(ga, gb) = backward(a, b, y, gy)`
/// per output element, then summing each gradient back to its operand's shape.
///
/// `backward` returns the **propagated** gradients `(dL/da, dL/db)` at that element.
///
/// ```
/// use forgia::{elemental_binary, Tensor};
/// // y = a·b² with broadcasting; dL/da = b²·gy, dL/db = 2ab·gy
/// let a = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2])?;
/// let b = Tensor::variable(vec![3.0, 5.0], &[2])?;
/// let y = elemental_binary(&a, &b, |a, b| a * b * b, |a, b, _y, gy| (b * b * gy, 2.0 * a * b * gy))?;
/// y.sum_all().backward()?;
/// assert_eq!(y.to_vec(), vec![9.0, 50.0, 27.0, 100.0]);
/// assert_eq!(a.grad().unwrap().to_vec(), vec![9.0, 25.0, 9.0, 25.0]);
/// assert_eq!(b.grad().unwrap().to_vec(), vec![24.0, 60.0]); // 2·3·(1+3), 2·5·(2+4)
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `ShapeMismatch` when the shapes do not broadcast; `AxisNameMismatch` when named operands
/// disagree. A `create_graph` pass through the op fails with
/// `DoubleBackwardUnsupported { op: "elemental_binary" }` (second order needs the closure of
/// [`elemental_binary_with_second`]).
pub fn elemental_binary<F, B>(a: &Tensor, b: &Tensor, forward: F, backward: B) -> Result<Tensor>
where
    F: Fn(f32, f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static,
{
    binary(a, b, forward, backward, None)
}

/// [`elemental_binary`] with second order: `second(a, b, y, gy, gga, ggb)` returns
/// `(dL/da, dL/db, dL/dgy)` at one output element, for a loss `L` that reaches the op's
/// gradients `(ga, gb) = backward(a, b, y, gy)` with the cotangents `(gga, ggb)`:
/// `gga · ∂ga/∂v + ggb · ∂gb/∂v` for `v` in `a`, `b`, `gy` (total derivatives: `y` is a
/// function of `a` and `b`).
///
/// ```
/// use forgia::{elemental_binary_with_second, BackwardOptions, Tensor};
/// // y = a·b: (ga, gb) = (b·gy, a·gy); second = (ggb·gy, gga·gy, gga·b + ggb·a)
/// let a = Tensor::variable(vec![3.0], &[1])?;
/// let b = Tensor::variable(vec![5.0], &[1])?;
/// let y = elemental_binary_with_second(
///     &a,
///     &b,
///     |a, b| a * b,
///     |a, b, _y, g| (b * g, a * g),
///     |a, b, _y, g, ga, gb| (gb * g, ga * g, ga * b + gb * a),
/// )?;
/// y.sum_all().backward_with(None, BackwardOptions { create_graph: true, ..Default::default() })?;
/// let ga = a.grad().unwrap(); // b = 5
/// b.zero_grad();
/// ga.sum_all().backward()?;
/// assert_eq!(b.grad().unwrap().to_vec(), vec![1.0]); // ∂(b)/∂b
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// As [`elemental_binary`]; a third order fails with
/// `DoubleBackwardUnsupported { op: "elemental_binary_backward" }`.
pub fn elemental_binary_with_second<F, B, S>(
    a: &Tensor,
    b: &Tensor,
    forward: F,
    backward: B,
    second: S,
) -> Result<Tensor>
where
    F: Fn(f32, f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static,
    S: Fn(f32, f32, f32, f32, f32, f32) -> (f32, f32, f32) + Send + Sync + 'static,
{
    binary(a, b, forward, backward, Some(Arc::new(second)))
}

fn binary<F, B>(a: &Tensor, b: &Tensor, forward: F, backward: B, second: Option<BinarySecond>) -> Result<Tensor>
where
    F: Fn(f32, f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static,
{
    let y = broadcast_map("elemental_binary", a, b, &forward)?;
    let saved_y = y.detach();
    Ok(attach(y, &[a, b], move || BinaryBackward { backward, second, a: a.value(), b: b.value(), y: saved_y.value() }))
}

/// The record of [`elemental_binary`].
struct BinaryBackward<B> {
    backward: B,
    second: Option<BinarySecond>,
    a: Array,
    b: Array,
    y: Array,
}

impl<B: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static> Backward for BinaryBackward<B> {
    fn name(&self) -> &'static str {
        "elemental_binary"
    }

    /// Per output element `(ga, gb) = backward(a, b, y, gy)` over the broadcast shape (the
    /// engine sums each back to its operand's shape).
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if self.second.is_none() {
            cx.fused("elemental_binary")?;
        }
        let shape = self.y.shape();
        let a = self.a.with_layout(self.a.layout.broadcast_to(shape)).contiguous_data("elemental_binary")?;
        let b = self.b.with_layout(self.b.layout.broadcast_to(shape)).contiguous_data("elemental_binary")?;
        let (y, g) = (self.y.contiguous_data("elemental_binary")?, gy.contiguous_data("elemental_binary")?);
        let (ga, gb) = map4_pair(a.packed(), b.packed(), y.packed(), g.packed(), &self.backward)?;
        if let (Some(second), true) = (&self.second, cx.create_graph()) {
            // Both gradients as one node `[2, *shape]` whose record applies `second`.
            let n = ga.len();
            let mut both = crate::tensor::buffer("elemental_binary", 2 * n)?;
            both[..n].copy_from_slice(&ga);
            both[n..].copy_from_slice(&gb);
            let both_shape: Vec<usize> = std::iter::once(2).chain(shape.iter().copied()).collect();
            let record = || BinaryGradBackward {
                second: second.clone(),
                a: a.clone(),
                b: b.clone(),
                y: y.clone(),
                gy: g.value(),
            };
            let inputs = [&cx.input(0, &self.a), &cx.input(1, &self.b), gy];
            let both = attach(Tensor::from_parts(both, &both_shape), &inputs, record);
            let part = |i: usize| -> Result<Option<Tensor>> {
                Ok(if cx.needs_grad(i) { Some(both.narrow(0, i, 1)?.reshape(shape)?) } else { None })
            };
            out.extend([part(0)?, part(1)?]);
            return Ok(());
        }
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            out[0] = Some(Tensor::from_parts(ga, shape));
        }
        if cx.needs_grad(1) {
            out[1] = Some(Tensor::from_parts(gb, shape));
        }
        Ok(())
    }
}

/// The record of a unary elemental op's gradient `gx = backward(x, y, gy)` (operands `x`,
/// `gy`), from the user's second-derivative closure.
struct UnaryGradBackward {
    second: UnarySecond,
    x: Array,
    y: Array,
    gy: Array,
}

impl Backward for UnaryGradBackward {
    fn name(&self) -> &'static str {
        "elemental_unary_backward"
    }

    /// `(dx, dgy)[i] = second(x[i], y[i], gy[i], ggx[i])`.
    fn backward(&self, cx: &VjpCtx<'_>, ggx: &Tensor, out: &mut Grads) -> Result<()> {
        cx.fused("elemental_unary_backward")?;
        let u = ggx.contiguous_data("elemental_unary_backward")?;
        let (x, y, g, u) = (self.x.packed(), self.y.packed(), self.gy.packed(), u.packed());
        let (dx, dg) = map4_pair(x, y, g, u, &|x, y, g, u| (self.second)(x, y, g, u))?;
        let shape = self.x.shape();
        let keep = |i: usize, d: Vec<f32>| cx.needs_grad(i).then(|| Tensor::from_parts(d, shape));
        out.push(keep(0, dx));
        out.push(keep(1, dg));
        Ok(())
    }
}

/// The record of a binary elemental op's two gradients, stacked `[2, *shape]` (operands `a`,
/// `b`, `gy`), from the user's second-derivative closure. `a` and `b` are saved broadcast to
/// the output shape; the engine sums their gradients back to the operands' shapes.
struct BinaryGradBackward {
    second: BinarySecond,
    a: Array,
    b: Array,
    y: Array,
    gy: Array,
}

impl Backward for BinaryGradBackward {
    fn name(&self) -> &'static str {
        "elemental_binary_backward"
    }

    /// `(da, db, dgy)[i] = second(a[i], b[i], y[i], gy[i], gga[i], ggb[i])`.
    fn backward(&self, cx: &VjpCtx<'_>, gg: &Tensor, out: &mut Grads) -> Result<()> {
        cx.fused("elemental_binary_backward")?;
        let u = gg.contiguous_data("elemental_binary_backward")?;
        let (a, b, y, g) = (self.a.packed(), self.b.packed(), self.y.packed(), self.gy.packed());
        let (gga, ggb) = u.packed().split_at(a.len());
        let n = a.len();
        let zeroed = || crate::tensor::zeroed("elemental_binary_backward", n);
        let (mut da, mut db, mut dg) = (zeroed()?, zeroed()?, zeroed()?);
        for i in 0..n {
            (da[i], db[i], dg[i]) = (self.second)(a[i], b[i], y[i], g[i], gga[i], ggb[i]);
        }
        let shape = self.y.shape();
        let keep = |i: usize, d: Vec<f32>| cx.needs_grad(i).then(|| Tensor::from_parts(d, shape));
        out.push(keep(0, da));
        out.push(keep(1, db));
        out.push(keep(2, dg));
        Ok(())
    }
}

/// `(p[i], q[i]) = f(a[i], b[i], y[i], g[i])` over four packed slices of equal length,
/// chunked on the pool above `PARALLEL_ELEMENTS`.
fn map4_pair(
    a: &[f32],
    b: &[f32],
    y: &[f32],
    g: &[f32],
    f: &(impl Fn(f32, f32, f32, f32) -> (f32, f32) + Sync),
) -> Result<(Vec<f32>, Vec<f32>)> {
    let n = a.len();
    let (mut p, mut q) = (crate::tensor::zeroed("elemental_binary", n)?, crate::tensor::zeroed("elemental_binary", n)?);
    let body = |start: usize, p: &mut [f32], q: &mut [f32]| {
        for i in 0..p.len() {
            let j = start + i;
            (p[i], q[i]) = f(a[j], b[j], y[j], g[j]);
        }
    };
    if n >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            p.par_chunks_mut(CHUNK_ELEMENTS)
                .zip(q.par_chunks_mut(CHUNK_ELEMENTS))
                .enumerate()
                .for_each(|(c, (p, q))| body(c * CHUNK_ELEMENTS, p, q))
        });
    } else {
        body(0, &mut p, &mut q);
    }
    Ok((p, q))
}
