//! Rotary position embedding in the rotate-half convention (HF/LLaMA) over packed
//! `[outer, S, D]` data.

/// `out = x·cos(θ) + rotate_half(x)·sin(θ)` with `θ[s, i] = sign · s · base^(-2i/D)` for
/// `i < D/2` (the same angle for `i + D/2`). `sign = -1` is the exact inverse rotation.
pub(crate) fn rotate(x: &[f32], s: usize, d: usize, base: f64, sign: f64) -> Result<Vec<f32>> {
    let h = d / 2;
    let mut table = vec![(0.0f32, 0.0f32); s * h];
    for pos in 0..s {
        for i in 0..h {
            let theta = sign * pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
            table[pos * h + i] = (theta.cos() as f32, theta.sin() as f32);
        }
    }
    let mut out = crate::tensor::buffer("rope", x.len())?;
    for (row, (o, xr)) in out.chunks_mut(d).zip(x.chunks(d)).enumerate() {
        let t = &table[(row % s) * h..(row % s + 1) * h];
        for i in 0..h {
            let (c, sn) = t[i];
            let (a, b) = (xr[i], xr[i + h]);
            o[i] = a * c - b * sn;
            o[i + h] = b * c + a * sn;
        }
    }
    Ok(out)
}
use crate::error::Result;
