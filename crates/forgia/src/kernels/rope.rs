//! Rotary position embedding in the rotate-half convention (HF/LLaMA) over packed
//! `[outer, S, D]` data.

/// `out = x·cos(θ) + rotate_half(x)·sin(θ)` with `θ[s, i] = sign · s · base^(-2i/D)` for
/// `i < D/2` (the same angle for `i + D/2`). `sign = -1` is the exact inverse rotation.
/// `out` is shaped like `x` (every element written); `table` is scratch of `S·D` floats for
/// the `(cos, sin)` pairs of every position and frequency.
pub(crate) fn rotate(x: &[f32], (s, d): (usize, usize), (base, sign): (f64, f64), table: &mut [f32], out: &mut [f32]) {
    if d == 0 {
        return; // an empty head: nothing to rotate (and no rows to chunk by)
    }
    let h = d / 2;
    for pos in 0..s {
        for i in 0..h {
            let theta = sign * pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
            let at = 2 * (pos * h + i);
            (table[at], table[at + 1]) = (theta.cos() as f32, theta.sin() as f32);
        }
    }
    for (row, (o, xr)) in out.chunks_mut(d).zip(x.chunks(d)).enumerate() {
        let t = &table[2 * (row % s) * h..2 * (row % s + 1) * h];
        for i in 0..h {
            let (c, sn) = (t[2 * i], t[2 * i + 1]);
            let (a, b) = (xr[i], xr[i + h]);
            o[i] = a * c - b * sn;
            o[i + h] = b * c + a * sn;
        }
    }
}
