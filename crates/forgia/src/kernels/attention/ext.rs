//! The extensions of the attention softmax (the spec's `SoftmaxExt`) that do not fit the
//! fused score loop: the constant additive bias of boolean masks, key-padding masks, sliding
//! windows and ALiBi, and the attention sinks' rescaling of the output and its log-sum-exp.

use super::{AttnGeom, Heads, Out};

/// A rank-4 operand read through strides (0 on a broadcast axis): element `(b, h, i, j)` is
/// `data[offset + b·s0 + h·s1 + i·s2 + j·s3]`.
#[derive(Clone, Copy)]
pub(crate) struct Strided<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) offset: usize,
    pub(crate) strides: [isize; 4],
}

impl Strided<'_> {
    #[inline(always)]
    fn at(&self, idx: [usize; 4]) -> f32 {
        let off = self.offset as isize + (0..4).map(|a| idx[a] as isize * self.strides[a]).sum::<isize>();
        self.data[off as usize]
    }
}

/// What goes into the constant bias `[Bb, Hb, Sb, Sk]` (each of `Bb`, `Hb`, `Sb` the full size or
/// 1; `Sb = 1` only when no part depends on the query row).
pub(crate) struct BiasSpec<'a> {
    /// `[Bb, Hb, Sb, Sk]`.
    pub(crate) shape: [usize; 4],
    /// A boolean mask seen at the bias shape: zero blocks a key (`-inf`), nonzero lets it be
    /// attended.
    pub(crate) allow: Option<Strided<'a>>,
    /// A key mask `[Bb, Sk]` (as a `Strided` whose head and row strides are 0): zero blocks key
    /// `j` of batch `b` for every query.
    pub(crate) keys: Option<Strided<'a>>,
    /// The position of query 0 among the keys: query `i` sits at `i' = i + offset`.
    pub(crate) offset: usize,
    /// Blocks key `j > i'` (causal attention at a nonzero offset; at offset 0 the fused
    /// kernel does it itself).
    pub(crate) causal: bool,
    /// Sliding window `w`: query `i` sees key `j` only when `i' - j < w`, and `j - i' < w`
    /// when `.1` (not causal).
    pub(crate) window: Option<(usize, bool)>,
    /// ALiBi slopes, one per head of the bias (`Hb` of them): adds `-slope_h · |i' - j|`.
    pub(crate) alibi: Option<&'a [f32]>,
}

/// Fills `out` (`Bb·Hb·Sb·Sk` floats, every one written) with the additive bias of `spec`:
/// `-inf` where a mask or the window blocks a key, else the ALiBi term (or 0).
pub(crate) fn fill_bias(spec: &BiasSpec<'_>, out: &mut [f32]) {
    let [bb, hb, sq, sk] = spec.shape;
    if sk == 0 {
        return;
    }
    let mut rows = out.chunks_exact_mut(sk);
    for b in 0..bb {
        for h in 0..hb {
            let slope = spec.alibi.map_or(0.0, |s| s[h]);
            for i in 0..sq {
                let row = rows.next().expect("the bias holds Bb·Hb·Sb rows");
                let at = i + spec.offset;
                for (j, e) in row.iter_mut().enumerate() {
                    let dist = at.abs_diff(j);
                    let blocked = spec.allow.is_some_and(|m| m.at([b, h, i, j]) == 0.0)
                        || spec.keys.is_some_and(|m| m.at([b, 0, 0, j]) == 0.0)
                        || (spec.causal && j > at)
                        || spec.window.is_some_and(|(w, two_sided)| dist >= w && (j < at || two_sided));
                    *e = if blocked {
                        f32::NEG_INFINITY
                    } else if slope != 0.0 {
                        -slope * dist as f32
                    } else {
                        0.0
                    };
                }
            }
        }
    }
}

/// Where row `r` of block `i` of a forward result (laid out as `forward` writes it, `group`
/// blocks per chunk placed by `out`, rows `w` wide) starts.
fn row_start(g: &AttnGeom, (group, out): (usize, Out), w: usize, i: usize, r: usize) -> usize {
    let (c, h) = (i / group, i % group);
    c * group * g.sq * w + h * out.head + r * out.row
}

/// Folds one sink logit per query head into the softmax: row `(i, r)` of `y` is rescaled by
/// `exp(lse - lse')` and its log-sum-exp becomes `lse' = log(exp(lse) + exp(sink_h))`. A row
/// that saw no key (`lse = +inf`, zero output) gets `lse' = sink_h` and stays zero; a NaN row
/// stays NaN.
pub(crate) fn apply_sinks(g: &AttnGeom, sinks: &[f32], layout: (usize, Out), y: &mut [f32], lse: &mut [f32]) {
    for i in 0..g.bh {
        let sink = sinks[i % g.heads];
        for r in 0..g.sq {
            let l = &mut lse[i * g.sq + r];
            if l.is_nan() {
                continue;
            }
            if *l == f32::INFINITY {
                *l = sink;
                continue;
            }
            let hi = l.max(sink);
            let merged = hi + ((*l - hi).exp() + (sink - hi).exp()).ln();
            let factor = (*l - merged).exp();
            let at = row_start(g, layout, g.dv, i, r);
            y[at..at + g.dv].iter_mut().for_each(|e| *e *= factor);
            *l = merged;
        }
    }
}

/// The sinks' gradient: `dsink_h = -Σ_{b, r} exp(sink_h - lse_r) · (dO_r · O_r)` into `out`
/// (one float per query head, every one written), from the output `o`, its gradient `go` and
/// the log-sum-exp with the sinks folded in.
pub(crate) fn sink_grads(g: &AttnGeom, sinks: &[f32], (o, go): (Heads<'_>, Heads<'_>), lse: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    for i in 0..g.bh {
        let h = i % g.heads;
        let (ob, gob) = (o.block(i, g.heads), go.block(i, g.heads));
        for r in 0..g.sq {
            let delta: f32 = (0..g.dv).map(|c| o.data[ob + r * o.row + c] * go.data[gob + r * go.row + c]).sum();
            out[h] -= (sinks[h] - lse[i * g.sq + r]).exp() * delta;
        }
    }
}
