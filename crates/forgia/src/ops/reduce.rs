//! Reductions over any set of axes, with or without kept dimensions: sum and mean, and the
//! extrema (max/min over one axis or all elements, argmax/argmin). Statistics and scans
//! (var, logsumexp, prod, cumsum) are in `reduce_ext.rs`.

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{fail, within, ErrorKind, Result};
use crate::kernels::reduce as k;
use crate::ops::index::Indices;
use crate::tensor::layout::numel;
use crate::tensor::{Array, Axes, Axis, Scratch, Shape};

pub(crate) use crate::tensor::ReducePlan as Plan;

impl Tensor {
    /// Sum over `axes` (an index, a name, or a list of them); `keepdim` keeps them as size 1.
    /// As in PyTorch, a 0-d tensor accepts axis 0 or -1 (here and in every reduction, softmax
    /// and cumsum) and gives a 0-d result.
    ///
    /// Backward: `gx = broadcast(gy reshaped to the kept shape, x.shape)` (a free view).
    ///
    /// # Errors
    /// `AxisOutOfRange`, `UnknownAxisName` or `DuplicateAxis` for bad axes.
    pub fn sum(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = axes.into();
        if let Some(v) = scalar_as_vector(self, "sum", &axes)? {
            return v.sum(0, false);
        }
        let axes = self.axes("sum", axes)?;
        let plan = Plan::new("sum", self, &axes, keepdim)?;
        let mut data = crate::tensor::zeroed("sum", plan.outer * plan.inner)?;
        let mut scratch = Scratch::new("sum", k::sum_scratch(plan.outer, plan.red, plan.inner))?;
        k::sum(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut scratch, &mut data);
        let out = Tensor::from(plan.output(data));
        Ok(attach(out, &[self], || SumBackward { in_shape: self.shape().into(), kept: plan.kept.clone(), scale: 1.0 }))
    }

    /// Mean over `axes`.
    ///
    /// Backward: `gx = broadcast(gy, x.shape) / n`, `n` the number of reduced elements.
    ///
    /// # Errors
    /// As [`Tensor::sum`], plus `EmptyTensor` when a reduced axis has size 0.
    pub fn mean(&self, axes: impl Into<Axes>, keepdim: bool) -> Result<Tensor> {
        let axes = axes.into();
        if let Some(v) = scalar_as_vector(self, "mean", &axes)? {
            return v.mean(0, false);
        }
        let axes = self.axes("mean", axes)?;
        let n: usize = axes.iter().map(|&a| self.shape()[a]).product();
        if n == 0 {
            return fail(ErrorKind::EmptyTensor { op: "mean", shape: self.shape().to_vec() });
        }
        let plan = Plan::new("mean", self, &axes, keepdim)?;
        let inv = 1.0 / n as f32;
        let mut data = crate::tensor::zeroed("mean", plan.outer * plan.inner)?;
        let mut scratch = Scratch::new("mean", k::sum_scratch(plan.outer, plan.red, plan.inner))?;
        k::sum(plan.data.packed(), plan.outer, plan.red, plan.inner, &mut scratch, &mut data);
        data.iter_mut().for_each(|v| *v *= inv);
        let out = Tensor::from(plan.output(data));
        Ok(attach(out, &[self], || SumBackward { in_shape: self.shape().into(), kept: plan.kept.clone(), scale: inv }))
    }

    /// Sum of every element, as a rank-0 tensor.
    ///
    /// Backward: `gx = broadcast(gy, x.shape)`.
    pub fn sum_all(&self) -> Tensor {
        // Over the stored elements only, times their repeats: a broadcast view costs what its
        // storage holds, never its logical size.
        let (stored, repeats) = self.stored();
        // Panics only when memory cannot hold a copy of the stored elements (a strided view).
        let total = stored.try_with_data("sum_all", |d| {
            let mut total = [0.0];
            k::sum(d, 1, d.len(), 1, &mut [], &mut total);
            Ok(total[0])
        });
        let total = total.unwrap_or_else(|e| panic!("{e}")) * repeats as f32;
        attach(Tensor::scalar(total), &[self], || SumBackward {
            in_shape: self.shape().into(),
            kept: Shape::new(),
            scale: 1.0,
        })
    }

    /// Mean of every element, as a rank-0 tensor.
    ///
    /// Backward: `gx = broadcast(gy, x.shape) / numel`.
    ///
    /// # Errors
    /// `EmptyTensor` on an empty tensor.
    pub fn mean_all(&self) -> Result<Tensor> {
        let n = self.numel();
        if n == 0 {
            return fail(ErrorKind::EmptyTensor { op: "mean_all", shape: self.shape().to_vec() });
        }
        let inv = 1.0 / n as f32;
        let (stored, repeats) = self.stored();
        let total = stored.try_with_data("mean_all", |d| {
            let mut total = [0.0];
            k::sum(d, 1, d.len(), 1, &mut [], &mut total);
            Ok(total[0])
        })? * repeats as f32
            * inv;
        Ok(attach(Tensor::scalar(total), &[self], || SumBackward {
            in_shape: self.shape().into(),
            kept: Shape::new(),
            scale: inv,
        }))
    }
}

/// PyTorch reduces a 0-d tensor over axis 0 or -1 as if it had shape `[1]`, giving a 0-d
/// result (`keepdim` included): for such a call, the checked `[1]` view to reduce instead.
pub(crate) fn scalar_as_vector(x: &Tensor, op: &'static str, axes: &Axes) -> Result<Option<Tensor>> {
    if x.rank() != 0 {
        return Ok(None);
    }
    crate::tensor::check_scalar_axes(op, axes)?;
    Ok(Some(x.reshape(&[1])?))
}

/// The gradient of a reduction broadcast back to the input: `gy` reshaped to the kept shape
/// (reduced axes as 1), then broadcast to `in_shape`. A free view; differentiable.
pub(crate) fn expand_reduced(gy: &Tensor, kept: &[usize], in_shape: &[usize]) -> Result<Tensor> {
    let g =
        if kept.is_empty() && !in_shape.is_empty() { gy.reshape(&vec![1; in_shape.len()])? } else { gy.reshape(kept)? };
    g.broadcast_to(in_shape)
}

impl Tensor {
    /// The maximum over one axis. NaN propagates.
    ///
    /// Backward: `gy` flows to the first position of the maximum (`gx` is 0 elsewhere).
    ///
    /// # Errors
    /// `AxisOutOfRange` / `UnknownAxisName` for a bad axis; `EmptyTensor` when the axis has
    /// size 0.
    pub fn max(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.extremum("max", axis.into(), keepdim, true)
    }

    /// The minimum over one axis. NaN propagates.
    ///
    /// Backward: `gy` flows to the first position of the minimum.
    ///
    /// # Errors
    /// As [`Tensor::max`].
    pub fn min(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Tensor> {
        self.extremum("min", axis.into(), keepdim, false)
    }

    /// The maximum of every element, as a rank-0 tensor. NaN propagates.
    ///
    /// Backward: `gy` is split evenly between the elements equal to the maximum (the NaNs,
    /// when it is NaN), as `torch.max()` does; [`Tensor::max`] over an axis picks one.
    ///
    /// # Errors
    /// `EmptyTensor` on an empty tensor.
    pub fn max_all(&self) -> Result<Tensor> {
        self.extremum_all("max_all", true)
    }

    /// The minimum of every element, as a rank-0 tensor. NaN propagates.
    ///
    /// Backward: `gy` split evenly between the minimal elements, as [`Tensor::max_all`].
    ///
    /// # Errors
    /// `EmptyTensor` on an empty tensor.
    pub fn min_all(&self) -> Result<Tensor> {
        self.extremum_all("min_all", false)
    }

    fn extremum_all(&self, op: &'static str, max: bool) -> Result<Tensor> {
        let flat = within(op, || self.reshape(&[self.numel()]))?;
        let m = flat.extremum_parts(op, Axis::Index(0), max)?.1[0];
        Ok(attach(Tensor::scalar(m), &[self], || {
            let hit = |x: f32| x == m || (m.is_nan() && x.is_nan());
            let count = flat.with_data(|d| d.iter().filter(|&&x| hit(x)).count()) as f32;
            let weights = flat.with_data(|d| d.iter().map(|&x| if hit(x) { 1.0 / count } else { 0.0 }).collect());
            TiedExtremumBackward { name: op, weights: Tensor::from_parts(weights, self.shape()).value() }
        }))
    }

    /// The position of the first maximum along `axis` as an index tensor (`torch.argmax(x,
    /// dim, keepdim)`): the shape of `x` with `axis` removed, or kept as size 1. A NaN counts
    /// as the maximum (the first NaN's position), as in PyTorch. Not differentiable.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let logits = Tensor::from_vec(vec![0.1, 0.7, 0.2, 0.9, 0.0, 0.9], &[2, 3])?;
    /// assert_eq!(logits.argmax(1, false)?.data(), &[1, 0]);
    /// assert_eq!(logits.argmax(1, true)?.shape(), &[2, 1]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tensor::max`].
    pub fn argmax(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Indices> {
        self.arg_extremum("argmax", axis.into(), keepdim, true)
    }

    /// The position of the first minimum along `axis` (a NaN counts as the minimum); shape
    /// as [`Tensor::argmax`].
    ///
    /// # Errors
    /// As [`Tensor::max`].
    pub fn argmin(&self, axis: impl Into<Axis>, keepdim: bool) -> Result<Indices> {
        self.arg_extremum("argmin", axis.into(), keepdim, false)
    }

    fn arg_extremum(&self, op: &'static str, axis: Axis, keepdim: bool, max: bool) -> Result<Indices> {
        if let Some(v) = scalar_as_vector(self, op, &Axes(vec![axis.clone()]))? {
            return v.arg_extremum(op, Axis::Index(0), false, max)?.reshape(&[]);
        }
        let (plan, _, args) = self.extremum_parts(op, axis, max)?;
        let shape = if keepdim { &plan.kept } else { &plan.out };
        Indices::new(args.into_iter().map(|a| a as i64).collect(), shape)
    }

    /// Checks, plans and runs an extremum: `(plan, values, positions)`.
    fn extremum_parts(&self, op: &'static str, axis: Axis, max: bool) -> Result<(Plan, Vec<f32>, Vec<usize>)> {
        let a = self.axis(op, axis)?;
        if self.shape()[a] == 0 {
            return fail(ErrorKind::EmptyTensor { op, shape: self.shape().to_vec() });
        }
        let plan = Plan::new(op, self, &[a], false)?;
        let n = plan.outer * plan.inner;
        let (mut vals, mut args) = (crate::tensor::buffer(op, n)?, vec![0usize; n]);
        k::extremum(plan.data.packed(), (plan.outer, plan.red, plan.inner), max, &mut vals, &mut args);
        Ok((plan, vals, args))
    }

    fn extremum(&self, op: &'static str, axis: Axis, keepdim: bool, max: bool) -> Result<Tensor> {
        if let Some(v) = scalar_as_vector(self, op, &Axes(vec![axis.clone()]))? {
            return v.extremum(op, Axis::Index(0), false, max);
        }
        let (plan, vals, args) = self.extremum_parts(op, axis, max)?;
        let shape = if keepdim { &plan.kept } else { &plan.out };
        let mut out = Tensor::from_parts(vals, shape);
        out.names = if keepdim { self.names.clone() } else { plan.names.clone() };
        Ok(attach(out, &[self], || ExtremumBackward {
            name: op,
            in_shape: self.shape().into(),
            kept: plan.kept.clone(),
            red: plan.red,
            inner: plan.inner,
            args,
        }))
    }
}

struct ExtremumBackward {
    name: &'static str,
    in_shape: Shape,
    kept: Shape,
    red: usize,
    inner: usize,
    /// Position of the extremum per output element, row-major over `[outer, inner]`.
    args: Vec<usize>,
}

impl Backward for ExtremumBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    /// `gx = expand(gy) * onehot(args)`: the one-hot mask is a constant, so this is
    /// differentiable in `gy`.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        let mut mask = crate::tensor::zeroed("reduce", numel(&self.in_shape))?;
        let inner = self.inner.max(1);
        for (j, &r) in self.args.iter().enumerate() {
            let (o, i) = (j / inner, j % inner);
            mask[(o * self.red + r) * self.inner + i] = 1.0;
        }
        let mask = Tensor::from_parts(mask, &self.in_shape);
        let g = expand_reduced(gy, &self.kept, &self.in_shape)?.mul(&mask)?;
        out.push(Some(g));
        Ok(())
    }
}

/// `gx = gy · w`, with `w` the constant weights `1/count` on the tied extrema (differentiable
/// in `gy`).
struct TiedExtremumBackward {
    name: &'static str,
    weights: Array,
}

impl Backward for TiedExtremumBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        let g = expand_reduced(gy, &[], self.weights.shape())?.mul(&Tensor::from(&self.weights))?;
        out.push(Some(g));
        Ok(())
    }
}

struct SumBackward {
    in_shape: Shape,
    kept: Shape,
    scale: f32,
}

impl Backward for SumBackward {
    fn name(&self) -> &'static str {
        if self.scale == 1.0 {
            "sum"
        } else {
            "mean"
        }
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        let g = if self.scale == 1.0 { gy.clone() } else { gy.scale(self.scale) };
        out.push(Some(expand_reduced(&g, &self.kept, &self.in_shape)?));
        Ok(())
    }
}
