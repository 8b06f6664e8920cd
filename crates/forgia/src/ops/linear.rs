//! The affine map of a fully connected layer, `y = x · Wᵀ + b`, as one op: a GEMM and an
//! in-place bias pass over its fresh output, instead of a product and a broadcast add (a new
//! output buffer forward, and a broadcast-reduction node backward).

use smallvec::SmallVec;

use crate::autograd::Tensor;
use crate::autograd::{attach, empty_slots, Backward, Grads, VjpCtx};
use crate::error::{fail, ErrorKind, Result};
use crate::kernels::gemm::{gemm_split_k, split_k_scratch, MatRef};
use crate::tensor::{names, Array, Size};

const OP: &str = "linear";

impl Tensor {
    /// `x · Wᵀ + b` over the leading axes of `x [..., in]`, with `weight [out, in]` and an
    /// optional `bias [out]`, giving `[..., out]` (PyTorch's `F.linear`).
    ///
    /// Backward, with `x` and `gy` folded to rows `[M, in]` and `[M, out]`:
    /// `gx = gy · W`, `gW = gyᵀ · x`, `gb = Σ_rows gy`.
    ///
    /// ```
    /// use forgia::Tensor;
    /// let x = Tensor::from_vec(vec![1.0, 2.0], &[1, 2])?;
    /// let w = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 0.0, -1.0], &[3, 2])?;
    /// let b = Tensor::from_vec(vec![0.5, 0.5, 0.5], &[3])?;
    /// assert_eq!(x.linear(&w, Some(&b))?.to_vec(), vec![1.5, 3.5, -1.5]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `RankMismatch` for a rank-0 input or a weight that is not rank 2; `ShapeMismatch` when
    /// the last axis of `x` is not the weight's `in`, or the bias is not `[out]`.
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        if self.rank() == 0 {
            return fail(ErrorKind::RankMismatch { op: OP, expected: "rank >= 1 [..., in]", shape: vec![] });
        }
        if weight.rank() != 2 {
            return fail(ErrorKind::RankMismatch {
                op: OP,
                expected: "a rank-2 weight [out, in]",
                shape: weight.shape().to_vec(),
            });
        }
        let (n, k) = (weight.shape()[0], weight.shape()[1]);
        if self.shape()[self.rank() - 1] != k {
            return fail(ErrorKind::ShapeMismatch { op: OP, lhs: self.shape().to_vec(), rhs: weight.shape().to_vec() });
        }
        if let Some(b) = bias {
            if b.shape() != [n] {
                return fail(ErrorKind::ShapeMismatch {
                    op: OP,
                    lhs: weight.shape().to_vec(),
                    rhs: b.shape().to_vec(),
                });
            }
        }
        // The rows are the product of the leading sizes (not numel / k: k may be 0).
        let m: usize = self.shape()[..self.rank() - 1].iter().product();
        let mut shape = self.shape().to_vec();
        *shape.last_mut().expect("rank checked above") = n;
        // [0, 2, 2^62] holds nothing, but its size still overflows: refused, as by matmul.
        Size::of(OP, &shape)?;
        let x = self.contiguous_data(OP)?;
        let w = weight.contiguous_data(OP)?;
        let mut out = crate::tensor::buffer("linear", m * n)?;
        let xm = MatRef { data: x.packed(), offset: 0, row_stride: k as isize, col_stride: 1 };
        // Wᵀ read in place: element (i, j) of Wᵀ is W[j, i].
        let wt = MatRef { data: w.packed(), offset: 0, row_stride: 1, col_stride: k as isize };
        // The final product of a checkpointed block's recompute: only its record is needed.
        if !crate::autograd::skip_final_product() {
            let mut scratch = crate::tensor::Scratch::new(OP, split_k_scratch(m, n, k))?;
            let mut packed = None;
            let wt = super::matmul::rhs(OP, (m, n, k), &xm, wt, &mut packed)?;
            gemm_split_k(m, n, k, xm, wt, &mut out, false, 1.0, &mut scratch);
            if let Some(b) = bias {
                // Added after the product rather than accumulated onto bias rows: the `gemm`
                // crate's path that reads its destination ran 1.4–1.9× slower on these shapes.
                b.with_data(|b| crate::kernels::norm::affine(&mut out, None, Some(b), 1));
            }
        }
        let mut y = Tensor::from_parts(out, &shape);
        // The leading axes keep their names; the output features are a new, unnamed axis.
        let r = shape.len();
        y.names = names::picked(self.names.as_ref(), &(0..r).map(|i| (i + 1 < r).then_some(i)).collect::<Vec<_>>());
        let inputs: SmallVec<[&Tensor; 3]> = [Some(self), Some(weight), bias].into_iter().flatten().collect();
        let y = attach(y, &inputs, || LinearBackward { x: x.value(), w: w.value(), rows: m, has_bias: bias.is_some() });
        crate::autograd::note_product();
        Ok(y)
    }
}

/// Saved: the packed input and weight.
struct LinearBackward {
    x: Array,
    w: Array,
    rows: usize,
    has_bias: bool,
}

impl Backward for LinearBackward {
    fn name(&self) -> &'static str {
        OP
    }

    /// Through differentiable ops (so `create_graph` builds the second-order graph), on the
    /// folded rows: `gx = gy · W`, `gW = gyᵀ · x` (produced packed), `gb = Σ_rows gy`.
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let (n, k) = (self.w.shape()[0], self.w.shape()[1]);
        let gy2 = gy.reshape(&[self.rows, n])?;
        empty_slots(out, 2 + self.has_bias as usize);
        if cx.needs_grad(0) {
            let w = cx.input(1, &self.w);
            out[0] = Some(gy2.matmul(&w)?.reshape(self.x.shape())?);
        }
        if cx.needs_grad(1) {
            let x = cx.input(0, &self.x).reshape(&[self.rows, k])?;
            out[1] = Some(gy2.transpose(0, 1)?.matmul(&x)?);
        }
        if self.has_bias && cx.needs_grad(2) {
            out[2] = Some(gy2.sum(0, false)?);
        }
        Ok(())
    }

    fn estimated_work(&self) -> usize {
        crate::tensor::work(&[3, self.rows, self.w.numel()])
    }
}
