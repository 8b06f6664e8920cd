//! The straight-through estimators' quantizers.

/// Per-row ternary quantization of a packed `[rows, cols]` buffer into `out`:
/// `s = mean(|w_row|)`, `q = clamp(round(w / s), -1, 1)`, `w_q = s · q` (a zero row stays zero).
pub(crate) fn ternary(w: &[f32], cols: usize, out: &mut [f32]) {
    for (o, row) in out.chunks_mut(cols.max(1)).zip(w.chunks(cols.max(1))) {
        let s = row.iter().map(|v| v.abs()).sum::<f32>() / cols as f32;
        if s > 0.0 {
            for (o, &v) in o.iter_mut().zip(row) {
                *o = s * (v / s).round_ties_even().clamp(-1.0, 1.0);
            }
        } else {
            o.fill(0.0);
        }
    }
}
