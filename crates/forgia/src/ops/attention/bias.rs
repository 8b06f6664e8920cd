//! Checks of attention's softmax extensions (boolean and key masks, sliding window, ALiBi,
//! sinks, dropout) and the constant additive bias the masks, the window and ALiBi become.

use super::{AttentionOptions, OP};
use crate::autograd::Tensor;
use crate::error::{check, fail, ErrorKind, Result};
use crate::kernels::attention::ext::{fill_bias, BiasSpec, Strided};
use crate::tensor::layout::broadcast_shapes;

fn mismatch<T>(lhs: &[usize], rhs: &[usize]) -> Result<T> {
    fail(ErrorKind::ShapeMismatch { op: OP, lhs: lhs.to_vec(), rhs: rhs.to_vec() })
}

/// Fails unless `m` (rank <= 4) broadcasts to `full`.
pub(super) fn check_broadcast(m: &Tensor, full: &[usize; 4]) -> Result<()> {
    let fits = m.rank() <= 4 && broadcast_shapes(OP, m.shape(), full).is_ok_and(|s| s.as_slice() == full);
    if !fits {
        return mismatch(m.shape(), full);
    }
    Ok(())
}

/// Checks the options that need no bias: sinks `[Hq]`, dropout's `p`.
pub(super) fn check_rest(opts: &AttentionOptions<'_>, heads: usize) -> Result<()> {
    if let Some(s) = opts.sinks {
        if s.shape() != [heads] {
            return mismatch(s.shape(), &[heads]);
        }
    }
    if let Some(d) = opts.dropout {
        check::unit_interval(OP, "dropout.p", d.p)?;
    }
    Ok(())
}

/// The ALiBi slopes of `heads` heads (Press et al., as BLOOM and MPT compute them): for a
/// power of two `n`, head `h` (from 0) gets `2^(-8(h+1)/n)`; otherwise the slopes of the
/// largest power of two below `heads`, then every other slope of twice that many.
///
/// ```
/// let s = forgia::alibi_slopes(8);
/// assert_eq!(s[0], 0.5);
/// assert_eq!(s[7], 1.0 / 256.0);
/// assert_eq!(forgia::alibi_slopes(12).len(), 12);
/// ```
pub fn alibi_slopes(heads: usize) -> Vec<f32> {
    let pow2 = |n: usize| -> Vec<f32> { (1..=n).map(|h| 2f64.powf(-8.0 * h as f64 / n as f64) as f32).collect() };
    if heads == 0 {
        return Vec::new();
    }
    let n = 1usize << heads.ilog2();
    let mut slopes = pow2(n);
    slopes.extend(pow2(2 * n).into_iter().step_by(2).take(heads - n));
    slopes
}

/// The strides of `m` seen at the rank-4 `shape` it broadcasts to.
fn strided<'a>(m: &'a Tensor, shape: &[usize; 4]) -> Strided<'a> {
    let l = m.layout.broadcast_to(shape);
    Strided {
        data: m.buffer_slice(),
        offset: l.offset,
        strides: [l.strides[0], l.strides[1], l.strides[2], l.strides[3]],
    }
}

/// The constant bias `[Bb, Hb, Sq or 1, Sk]` of the boolean mask, the key mask, the window and
/// ALiBi (`None` when none is set), after checking them against `full = [B, Hq, Sq, Sk]`.
pub(super) fn bias(opts: &AttentionOptions<'_>, full: [usize; 4]) -> Result<Option<Tensor>> {
    let [b, h, sq, sk] = full;
    if let Some(m) = opts.bool_mask {
        check_broadcast(m, &full)?;
    }
    if let Some(m) = opts.key_mask {
        if m.shape() != [b, sk] {
            return mismatch(m.shape(), &[b, sk]);
        }
    }
    if opts.window == Some(0) {
        return fail(ErrorKind::InvalidArgument {
            op: OP,
            arg: "window",
            reason: "a sliding window must hold at least one key (the query's own position)".into(),
        });
    }
    if let Some(s) = opts.alibi_slopes {
        if s.len() != h {
            return fail(ErrorKind::InvalidArgument {
                op: OP,
                arg: "alibi_slopes",
                reason: format!("{} slopes for {h} query heads", s.len()),
            });
        }
        s.iter().try_for_each(|&v| check::finite(OP, "alibi_slopes", v))?;
    }
    let shifted_causal = opts.causal && opts.query_offset > 0;
    let none = opts.bool_mask.is_none() && opts.key_mask.is_none() && opts.window.is_none();
    if none && opts.alibi_slopes.is_none() && !shifted_causal {
        return Ok(None);
    }
    // Only the axes some part varies along are materialized.
    let padded = |m: &Tensor, a: usize| (m.rank() + a).checked_sub(4).map_or(1, |i| m.shape()[i]);
    let per_batch = opts.key_mask.is_some() || opts.bool_mask.is_some_and(|m| padded(m, 0) != 1);
    let per_head = opts.alibi_slopes.is_some() || opts.bool_mask.is_some_and(|m| padded(m, 1) != 1);
    // A bias the same for every query row (a key mask, a boolean mask without a query axis)
    // is one row per block, read with row stride 0.
    let per_row = shifted_causal
        || opts.window.is_some()
        || opts.alibi_slopes.is_some()
        || opts.bool_mask.is_some_and(|m| padded(m, 2) != 1);
    let shape = [if per_batch { b } else { 1 }, if per_head { h } else { 1 }, if per_row { sq } else { 1 }, sk];
    let (allow, keys) = (opts.bool_mask.map(Tensor::detach), opts.key_mask.map(Tensor::detach));
    let spec = BiasSpec {
        shape,
        allow: allow.as_ref().map(|m| strided(m, &shape)),
        keys: keys.as_ref().map(|m| {
            let l = &m.layout;
            Strided { data: m.buffer_slice(), offset: l.offset, strides: [l.strides[0], 0, 0, l.strides[1]] }
        }),
        offset: opts.query_offset,
        causal: shifted_causal,
        window: opts.window.map(|w| (w, !opts.causal)),
        alibi: opts.alibi_slopes,
    };
    let mut data = crate::tensor::buffer(OP, shape.iter().product())?;
    fill_bias(&spec, &mut data);
    Ok(Some(Tensor::from_parts(data, &shape)))
}
