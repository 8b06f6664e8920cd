//! Rotary position embedding (RoPE): the rotate-half convention of HF/LLaMA or the
//! interleaved one, at positions `offset + s` (a KV cache) or explicit position ids (packed
//! sequences). Its backward is the inverse rotation, itself this op, so it is differentiable
//! to any order.

use crate::autograd::Tensor;
use crate::autograd::{attach, Backward, Grads, VjpCtx};
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::rope::{self as k, Positions};
use crate::tensor::Array;

const OP: &str = "rope";

/// Positions above this are refused: an f32 holds every integer only up to `2^24`.
const MAX_POSITION: f32 = (1u32 << 24) as f32;

/// Options of [`Tensor::rope_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RopeOptions<'a> {
    /// Added to every position: with a KV cache, the number of tokens already cached, so the
    /// new rows of `x` sit at positions `offset..offset + S`.
    pub offset: usize,
    /// Explicit position ids (Hugging Face's `position_ids`), non-negative integers stored as
    /// f32: `[S]`, shared by every row, or `[B, S]` with `B` the first axis of a `[B, .., S, D]`
    /// input (per-sequence positions of packed sequences). `offset` is added to them.
    pub positions: Option<&'a Tensor>,
    /// Rotates the interleaved pairs `(x[2i], x[2i + 1])` (GPT-J, RoFormer, Meta's reference
    /// LLaMA) instead of the halves `(x[i], x[i + D/2])` (Hugging Face's `rotate_half`).
    pub interleaved: bool,
}

impl Tensor {
    /// Rotates pairs `(x[i], x[i + D/2])` of `x [.., S, D]` (usually `[B, H, S, D]`) by
    /// `θ = s · base^(-2i/D)` for positions `s = 0..S-1`:
    /// `out = x·cos(emb) + cat(-x2, x1)·sin(emb)`, `emb = cat(freqs, freqs)`. The same as
    /// [`Tensor::rope_with`] with default options.
    ///
    /// Backward: the rotation by `-θ` (the exact inverse; rotations are orthogonal).
    ///
    /// # Errors
    /// `RankMismatch` below rank 2; `InvalidArgument` when `D` is odd or `base` is not a
    /// positive finite number.
    pub fn rope(&self, base: f32) -> Result<Tensor> {
        self.rope_with(base, RopeOptions::default())
    }

    /// RoPE at chosen positions and in either pair layout: pair `i` of the row at position `p`
    /// is rotated by `θ = p · base^(-2i/D)`, where `p = offset + s` for row `s` of the length
    /// axis, or `offset + positions[s]` (`positions[b, s]` for batch entry `b`).
    ///
    /// Backward: the rotation by `-θ` at the same positions (differentiable to any order; the
    /// positions get no gradient).
    ///
    /// ```
    /// use forgia::{RopeOptions, Tensor};
    /// let x = Tensor::randn(&[1, 2, 5, 4], 0.0, 1.0, &mut forgia::Rng::new(0))?;
    /// // The last two rows of a sequence, computed as a KV-cache step at offset 3.
    /// let step = x.narrow(2, 3, 2)?.rope_with(10_000.0, RopeOptions { offset: 3, ..Default::default() })?;
    /// let full = x.rope(10_000.0)?.narrow(2, 3, 2)?;
    /// assert!(step.to_vec().iter().zip(full.to_vec()).all(|(a, b)| (a - b).abs() < 1e-6));
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `RankMismatch` below rank 2; `InvalidArgument` when `D` is odd, `base` is not a positive
    /// finite number, or a position id is negative, not an integer or above `2^24`;
    /// `ShapeMismatch` when the ids are neither `[S]` nor `[B, S]` (for `[B, .., S, D]` input).
    pub fn rope_with(&self, base: f32, opts: RopeOptions<'_>) -> Result<Tensor> {
        check::positive(OP, "base", base)?;
        let positions = opts.positions.map(Tensor::value);
        rope_signed(self, base, 1.0, (&positions, opts.offset, opts.interleaved))
    }
}

/// How many data rows share one batch entry's ids (0 for shared `[S]` ids), after checking
/// the ids' shape and values against `x`.
fn check_positions(x: &Tensor, ids: &Array, s: usize) -> Result<usize> {
    let sh = x.shape();
    let per_batch = if ids.shape() == [s] {
        0
    } else if x.rank() >= 3 && ids.shape() == [sh[0], s] {
        x.numel() / (sh[0] * sh[x.rank() - 1]).max(1)
    } else {
        let mut want = vec![s];
        if x.rank() >= 3 {
            want.insert(0, sh[0]);
        }
        return fail(ErrorKind::ShapeMismatch { op: OP, lhs: ids.shape().to_vec(), rhs: want });
    };
    if let Some(bad) = ids.to_vec().into_iter().find(|&p| !((0.0..=MAX_POSITION).contains(&p) && p.fract() == 0.0)) {
        return fail(ErrorKind::InvalidArgument {
            op: OP,
            arg: "positions",
            reason: format!("position id {bad} is not an integer in [0, 2^24]"),
        });
    }
    Ok(per_batch)
}

fn rope_signed(
    x: &Tensor,
    base: f32,
    sign: f64,
    (ids, offset, interleaved): (&Option<Array>, usize, bool),
) -> Result<Tensor> {
    if x.rank() < 2 {
        return fail(ErrorKind::RankMismatch { op: OP, expected: "rank >= 2 [.., S, D]", shape: x.shape().to_vec() });
    }
    let (s, d) = (x.shape()[x.rank() - 2], x.shape()[x.rank() - 1]);
    if d % 2 != 0 {
        return fail(ErrorKind::InvalidArgument {
            op: OP,
            arg: "x",
            reason: format!("head dimension {d} must be even"),
        });
    }
    let per_batch = ids.as_ref().map(|p| check_positions(x, p, s)).transpose()?.unwrap_or(0);
    let id_data = ids.as_ref().map(Array::to_vec);
    let rows = id_data.as_ref().map_or(s, Vec::len);
    let y = x.try_with_data(OP, |data| {
        let (mut table, mut y) = (crate::tensor::buffer(OP, rows * d)?, crate::tensor::buffer(OP, data.len())?);
        let pos = Positions { ids: id_data.as_deref(), offset, per_batch };
        k::rotate(data, (s, d), (base as f64, sign), (pos, interleaved), &mut table, &mut y);
        Ok(y)
    })?;
    let out = Tensor::from_parts(y, x.shape());
    Ok(attach(out, &[x], || RopeBackward { base, sign, positions: ids.clone(), offset, interleaved }))
}

struct RopeBackward {
    base: f32,
    sign: f64,
    positions: Option<Array>,
    offset: usize,
    interleaved: bool,
}

impl Backward for RopeBackward {
    fn name(&self) -> &'static str {
        OP
    }

    /// `gx = R(-θ) · gy`, built with the op itself (differentiable).
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        let _ = cx;
        let gx = rope_signed(gy, self.base, -self.sign, (&self.positions, self.offset, self.interleaved))?;
        out.push(Some(gx));
        Ok(())
    }
}
