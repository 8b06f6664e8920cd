//! Rotary position embedding over packed `[outer, S, D]` data, in the rotate-half convention
//! (HF/LLaMA: pairs `(x[i], x[i + D/2])`) or the interleaved one (GPT-J, RoFormer, Meta's
//! LLaMA reference: pairs `(x[2i], x[2i + 1])`), at positions `offset + s` or explicit ones.

/// The positions of the rows: `offset + ids[t]` for table row `t` (or `offset + t` without
/// ids). With `per_batch = n > 0` the ids are `[B, S]` and data row `r` reads table row
/// `(r / n)·S + r % S` (`n` rows per batch entry); with `per_batch = 0` every row reads
/// `r % S`.
#[derive(Clone, Copy)]
pub(crate) struct Positions<'a> {
    pub(crate) ids: Option<&'a [f32]>,
    pub(crate) offset: usize,
    pub(crate) per_batch: usize,
}

/// `out = x·cos(θ) + rotate(x)·sin(θ)` with `θ[t, i] = sign · pos_t · base^(-2i/D)` for pair
/// `i < D/2`. `sign = -1` is the exact inverse rotation. `out` is shaped like `x` (every
/// element written); `table` is scratch of `T·D` floats for the `(cos, sin)` pairs of every
/// table row (`T = S`, or `B·S` with per-batch ids) and frequency.
pub(crate) fn rotate(
    x: &[f32],
    (s, d): (usize, usize),
    (base, sign): (f64, f64),
    (pos, interleaved): (Positions<'_>, bool),
    table: &mut [f32],
    out: &mut [f32],
) {
    if d == 0 || s == 0 {
        return; // an empty head or no positions: nothing to rotate (and no rows to chunk by)
    }
    let h = d / 2;
    for (t, pairs) in table.chunks_exact_mut(d).enumerate() {
        let p = pos.offset as f64 + pos.ids.map_or(t as f64, |ids| ids[t] as f64);
        for i in 0..h {
            let theta = sign * p * base.powf(-2.0 * i as f64 / d as f64);
            (pairs[2 * i], pairs[2 * i + 1]) = (theta.cos() as f32, theta.sin() as f32);
        }
    }
    let (ia, ib) = if interleaved { (2, 1) } else { (1, h) };
    for (row, (o, xr)) in out.chunks_mut(d).zip(x.chunks(d)).enumerate() {
        let tr = row.checked_div(pos.per_batch).map_or(0, |b| b * s) + row % s;
        let t = &table[tr * d..(tr + 1) * d];
        for i in 0..h {
            let (c, sn) = (t[2 * i], t[2 * i + 1]);
            let (ja, jb) = (i * ia, i * ia + ib);
            let (a, b) = (xr[ja], xr[jb]);
            o[ja] = a * c - b * sn;
            o[jb] = b * c + a * sn;
        }
    }
}
