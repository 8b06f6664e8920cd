//! Matrix products: 2-D, batched, and with broadcast batch dimensions. Every product, forward
//! and backward, is a GEMM over strided views; a transposed right operand is the one copied
//! (packed, for the `gemm` crate's sake: see [`rhs`]).

use rayon::prelude::*;

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, within, Error, ErrorKind, Result};
use crate::kernels::gemm::{gemm, gemm_split_k, has_broadcast_operand, pack_b, packs_b, split_k_scratch, MatRef};
use crate::parallel;
use crate::tensor::layout::{broadcast_shapes, numel, offset_of};
use crate::tensor::{names, Array, Layout, Names, Scratch, Shape, Size};

/// The batch part (all but the last two axes) of a layout, as its own layout.
fn batch_layout(l: &Layout, batch: &[usize]) -> Layout {
    let r = l.rank();
    Layout { shape: l.shape[..r - 2].into(), strides: l.strides[..r - 2].into(), offset: l.offset }.broadcast_to(batch)
}

/// The matrix at storage offset `off` of a rank-`r` tensor.
fn mat(t: &Tensor, off: usize, r: usize) -> MatRef<'_> {
    MatRef {
        data: t.buffer_slice(),
        offset: off,
        row_stride: t.layout.strides[r - 2],
        col_stride: t.layout.strides[r - 1],
    }
}

/// `b` as the product `a · b` best reads it: in place, or, when it is a transposed matrix,
/// from a packed copy in `slot` (see [`packs_b`]; a product with a broadcast operand
/// reads it once, in place: see `kernels::gemm::broadcast`).
///
/// # Errors
/// `OutOfMemory` (for `op`) when the copy cannot be allocated.
pub(super) fn rhs<'a>(
    op: &'static str,
    (m, n, k): (usize, usize, usize),
    a: &MatRef<'_>,
    b: MatRef<'a>,
    slot: &'a mut Option<Scratch>,
) -> Result<MatRef<'a>> {
    if !packs_b(m, n, k, &b) || has_broadcast_operand(m, n, k, a, &b) {
        return Ok(b);
    }
    // A slot filled by an earlier matrix of the batch (same `k · n`) is reused.
    let dst = match slot {
        Some(dst) => dst,
        None => slot.insert(Scratch::new(op, k * n)?),
    };
    Ok(pack_b(n, k, b, dst))
}

/// `a · b` over rank ≥ 2 operands (no node). Shapes are checked by the caller.
fn matmul_forward(a: &Tensor, b: &Tensor, batch: &[usize], m: usize, k: usize, n: usize) -> Result<Vec<f32>> {
    let (a, b) = (&a.detach(), &b.detach()); // a variable's current values, held for the product
    let (ra, rb) = (a.rank(), b.rank());
    let (la, lb) = (batch_layout(&a.layout, batch), batch_layout(&b.layout, batch));
    let count = numel(batch);
    let mut out = crate::tensor::buffer("matmul", count * m * n)?;
    let one = |bi: usize, c: &mut [f32]| {
        let (oa, ob) = (offset_of(&la, bi), offset_of(&lb, bi));
        gemm(m, n, k, mat(a, oa, ra), mat(b, ob, rb), c, false, 1.0);
    };
    if m * n == 0 {
        return Ok(out);
    }
    if count > 1 && m * n * k < 1 << 18 {
        // Many small products (attention heads): one product per task.
        parallel::install(|| out.par_chunks_mut(m * n).enumerate().for_each(|(bi, c)| one(bi, c)));
    } else {
        // A small output with a long inner dimension (a weight's gradient) is split along it.
        let mut scratch = crate::tensor::Scratch::new("matmul", split_k_scratch(m, n, k))?;
        let mut packed = None;
        for (bi, c) in out.chunks_mut(m * n).enumerate() {
            let (oa, ob) = (offset_of(&la, bi), offset_of(&lb, bi));
            let am = mat(a, oa, ra);
            let bm = rhs("matmul", (m, n, k), &am, mat(b, ob, rb), &mut packed)?;
            gemm_split_k(m, n, k, am, bm, c, false, 1.0, &mut scratch);
        }
    }
    Ok(out)
}

impl Tensor {
    /// Matrix product with PyTorch's rules: 1-D operands are promoted (and the added axis
    /// removed), batch axes broadcast.
    ///
    /// Backward: `ga = sum_to(gy · bᵀ, a.shape)`, `gb = sum_to(aᵀ · gy, b.shape)`: two GEMMs
    /// over transposed views.
    ///
    /// # Errors
    /// `RankMismatch` for a rank-0 operand; `ShapeMismatch` when the inner sizes differ or the
    /// batch axes do not broadcast; `SizeOverflow` when the result's size overflows;
    /// `WorkLimitExceeded` when `batch · m · n · k` passes [`crate::MAX_WORK`] (broadcast views
    /// can ask for that with no memory behind it); `OutOfMemory`.
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let names = product_names(self, other)?;
        // Reshapes of broadcast views inside report their limits as matmul's.
        let mut out = within("matmul", || self.matmul_positional(other))?;
        out.names = names;
        Ok(out)
    }

    fn matmul_positional(&self, other: &Tensor) -> Result<Tensor> {
        if self.rank() == 0 || other.rank() == 0 {
            let shape = if self.rank() == 0 { self.shape() } else { other.shape() };
            return fail(ErrorKind::RankMismatch { op: "matmul", expected: "rank >= 1", shape: shape.to_vec() });
        }
        // A promoted 1-D operand must not show up in an error: report the caller's shapes.
        let callers = |e: Error| match e.kind() {
            ErrorKind::ShapeMismatch { op: "matmul", .. } => Error::from(ErrorKind::ShapeMismatch {
                op: "matmul",
                lhs: self.shape().to_vec(),
                rhs: other.shape().to_vec(),
            }),
            _ => e,
        };
        match (self.rank(), other.rank()) {
            (1, 1) => self.unsqueeze(0)?.matmul_nd(&other.unsqueeze(1)?).map_err(callers)?.reshape(&[]),
            (1, _) => self.unsqueeze(0)?.matmul_nd(other).map_err(callers)?.squeeze(-2),
            (_, 1) => self.matmul_nd(&other.unsqueeze(1)?).map_err(callers)?.squeeze(-1),
            (ra, rb) if ra > 2 && other.shape()[..rb - 2].iter().all(|&d| d == 1) => {
                // A batch times one matrix (a linear layer over [B, S, D], or a right operand
                // whose batch axes are all 1) is one GEMM over the folded rows:
                // [B·S, k] · [k, n]. Its backward is then two GEMMs as well, the weight's
                // gradient summing over the rows inside the GEMM instead of as B products and
                // a reduction.
                let (m, k) = (self.shape()[ra - 2], self.shape()[ra - 1]);
                let (k2, n) = (other.shape()[rb - 2], other.shape()[rb - 1]);
                if k != k2 {
                    let (lhs, rhs) = (self.shape().to_vec(), other.shape().to_vec());
                    return fail(ErrorKind::ShapeMismatch { op: "matmul", lhs, rhs });
                }
                let mut shape: Vec<usize> =
                    broadcast_shapes("matmul", &self.shape()[..ra - 2], &other.shape()[..rb - 2])?.to_vec();
                shape.extend_from_slice(&[m, n]);
                let b = if rb == 2 { other.clone() } else { other.reshape(&[k, n])? };
                // The rows are the product of the leading sizes (not numel / k: k may be 0).
                let rows: usize = self.shape()[..ra - 1].iter().product();
                self.reshape(&[rows, k])?.matmul_nd(&b)?.reshape(&shape)
            }
            _ => self.matmul_nd(other),
        }
    }

    fn matmul_nd(&self, other: &Tensor) -> Result<Tensor> {
        let (ra, rb) = (self.rank(), other.rank());
        let (m, k) = (self.shape()[ra - 2], self.shape()[ra - 1]);
        let (k2, n) = (other.shape()[rb - 2], other.shape()[rb - 1]);
        let mismatch =
            || ErrorKind::ShapeMismatch { op: "matmul", lhs: self.shape().to_vec(), rhs: other.shape().to_vec() };
        if k != k2 {
            return fail(mismatch());
        }
        let batch =
            broadcast_shapes("matmul", &self.shape()[..ra - 2], &other.shape()[..rb - 2]).map_err(|e| {
                match e.kind() {
                    ErrorKind::ShapeMismatch { .. } => mismatch().into(),
                    _ => e,
                }
            })?;
        let mut shape: Shape = batch.clone();
        shape.extend_from_slice(&[m, n]);
        Size::of("matmul", &shape)?;
        let count = numel(&batch); // checked by broadcast_shapes
                                   // Broadcast views make m·n·k unbounded by memory ([1, 2^62] · [2^62, 1]).
        Size::work("matmul", &shape, &[count, m, n, k])?;
        let data = matmul_forward(self, other, &batch, m, k, n)?;
        let out = Tensor::from_parts(data, &shape);
        let work = 2 * count * m * n * k; // at most 2 · MAX_WORK, checked above
        Ok(attach(out, &[self, other], || MatmulBackward { a: self.value(), b: other.value(), work }))
    }
}

/// The names of a product's output (PyTorch's rule): the batch axes' names aligned as they
/// broadcast, then the left operand's row axis and the right operand's column axis; the
/// contracted axes are dropped (their names are not compared). A 1-D operand contributes no
/// row or column axis.
fn product_names(a: &Tensor, b: &Tensor) -> Result<Option<Names>> {
    if a.names.is_none() && b.names.is_none() || a.rank() == 0 || b.rank() == 0 {
        return Ok(None);
    }
    let (ra, rb) = (a.rank(), b.rank());
    // The leading `n` axes' names (the batch axes).
    let leading = |t: &Tensor, n: usize| names::picked(t.names.as_ref(), &(0..n).map(Some).collect::<Vec<_>>());
    let (ba, bb) = (ra.saturating_sub(2), rb.saturating_sub(2));
    let batch_rank = ba.max(bb);
    let (a_batch, b_batch) = (leading(a, ba), leading(b, bb));
    let batch = names::broadcast("matmul", a_batch.as_ref(), ba, b_batch.as_ref(), bb, batch_rank)?;
    let mut out: Vec<Option<String>> = batch.map(|n| n.to_vec()).unwrap_or_else(|| vec![None; batch_rank]);
    let name = |t: &Tensor, i: usize| t.names.as_ref().and_then(|n| n[i].clone());
    if ra >= 2 {
        out.push(name(a, ra - 2));
    }
    if rb >= 2 {
        out.push(name(b, rb - 1));
    }
    Ok(out.iter().any(Option::is_some).then(|| out.into()))
}

/// True for a rank-2 tensor whose elements are a packed matrix read column by column (the
/// transposed view of a contiguous matrix).
fn is_transposed_matrix(t: &Array) -> bool {
    let (s, d) = (t.strides(), t.shape());
    t.rank() == 2 && d[0] > 1 && d[1] > 1 && s[0] == 1 && s[1] == d[0] as isize
}

struct MatmulBackward {
    a: Array,
    b: Array,
    work: usize,
}

impl Backward for MatmulBackward {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        empty_slots(out, 2);
        if cx.needs_grad(0) {
            let bt = cx.input(1, &self.b).transpose(-1, -2)?;
            out[0] = Some(gy.matmul_nd(&bt)?);
        }
        if cx.needs_grad(1) {
            let a = cx.input(0, &self.a);
            out[1] = Some(if is_transposed_matrix(&self.b) && a.rank() == 2 {
                // `b` is a transposed view (as in `x·Wᵀ`): produce `gbᵀ = gyᵀ·a` packed and
                // hand back its transposed view, so that `W`'s gradient arrives packed after the
                // transpose's own backward instead of as a strided view every reader must copy.
                gy.transpose(-1, -2)?.matmul_nd(&a)?.transpose(-1, -2)?
            } else {
                a.transpose(-1, -2)?.matmul_nd(gy)?
            });
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        self.work
    }
}
