//! Elemental ops: pointwise differentiable ops from scalar closures. The caller writes the
//! scalar math (`f` and the propagated gradient); the adapter owns buffers, broadcasting, the
//! reduction of each gradient to its operand's shape and the parallel chunking.

use rayon::prelude::*;
use smallvec::SmallVec;

use super::binary::broadcast_map;
use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
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
/// Second order is not available: a `create_graph` pass through the op fails with
/// `DoubleBackwardUnsupported { op: "elemental_unary" }` (write a [`crate::CustomOp`] whose
/// backward uses tensor ops when you need it).
pub fn elemental_unary<F, B>(x: &Tensor, forward: F, backward: B) -> Tensor
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
    attach(y, &[x], move || UnaryBackward { backward, x: x.value(), y: saved_y.value() })
}

/// The record of [`elemental_unary`].
struct UnaryBackward<B> {
    backward: B,
    x: Array,
    y: Array,
}

impl<B: Fn(f32, f32, f32) -> f32 + Send + Sync + 'static> Backward for UnaryBackward<B> {
    fn name(&self) -> &'static str {
        "elemental_unary"
    }

    /// `gx[i] = backward(x[i], y[i], gy[i])`, in one fused pass.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        cx.fused("elemental_unary")?;
        let (x, y, g) = (
            self.x.contiguous_data("elemental_unary")?,
            self.y.contiguous_data("elemental_unary")?,
            gy.contiguous_data("elemental_unary")?,
        );
        let mut gx = crate::tensor::buffer("elemental_unary", x.packed().len())?;
        pointwise::zip3(x.packed(), y.packed(), g.packed(), &mut gx, &self.backward);
        Ok(SmallVec::from_elem(Some(Tensor::from_parts(gx, self.x.shape())), 1))
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
/// `DoubleBackwardUnsupported { op: "elemental_binary" }`.
pub fn elemental_binary<F, B>(a: &Tensor, b: &Tensor, forward: F, backward: B) -> Result<Tensor>
where
    F: Fn(f32, f32) -> f32 + Send + Sync + 'static,
    B: Fn(f32, f32, f32, f32) -> (f32, f32) + Send + Sync + 'static,
{
    let y = broadcast_map("elemental_binary", a, b, &forward)?;
    let saved_y = y.detach();
    Ok(attach(y, &[a, b], move || BinaryBackward { backward, a: a.value(), b: b.value(), y: saved_y.value() }))
}

/// The record of [`elemental_binary`].
struct BinaryBackward<B> {
    backward: B,
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
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor) -> Result<Grads> {
        cx.fused("elemental_binary")?;
        let shape = self.y.shape();
        let a = self.a.with_layout(self.a.layout.broadcast_to(shape)).contiguous_data("elemental_binary")?;
        let b = self.b.with_layout(self.b.layout.broadcast_to(shape)).contiguous_data("elemental_binary")?;
        let (y, g) = (self.y.contiguous_data("elemental_binary")?, gy.contiguous_data("elemental_binary")?);
        let (ga, gb) = map4_pair(a.packed(), b.packed(), y.packed(), g.packed(), &self.backward)?;
        let mut out: Grads = SmallVec::from_elem(None, 2);
        if cx.needs_grad(0) {
            out[0] = Some(Tensor::from_parts(ga, shape));
        }
        if cx.needs_grad(1) {
            out[1] = Some(Tensor::from_parts(gb, shape));
        }
        Ok(out)
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
