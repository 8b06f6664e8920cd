//! Overwriting and accumulating writes at flat offsets (`scatter`, `index_copy`, `index_put`,
//! `masked_scatter` all reduce to these), the masks their backward needs, and the offsets of a
//! `scatter` index. Offsets arrive validated by `ops/scatter.rs`.

use super::index::walk;

/// `dst[offsets[j]] = vals[j]` in order of `j` (so with duplicate offsets the last write
/// wins), or `+=` with `accumulate`.
pub(crate) fn put(dst: &mut [f32], offsets: &[usize], vals: &[f32], accumulate: bool) {
    for (&o, &v) in offsets.iter().zip(vals) {
        if accumulate {
            dst[o] += v;
        } else {
            dst[o] = v;
        }
    }
}

/// For an overwriting [`put`] into a buffer of `keep.len()` elements: `keep[p] = 0` where
/// some value was written, `1` elsewhere; `win[j] = 1` when value `j` is the one left at its
/// offset (the last one written there), `0` when a later value overwrote it. `last` is scratch
/// of `keep.len()` positions.
pub(crate) fn survivors(offsets: &[usize], last: &mut [usize], keep: &mut [f32], win: &mut [f32]) {
    last.fill(usize::MAX);
    keep.fill(1.0);
    for (j, &o) in offsets.iter().enumerate() {
        last[o] = j;
        keep[o] = 0.0;
    }
    for (j, (&o, w)) in offsets.iter().zip(win.iter_mut()).enumerate() {
        *w = if last[o] == j { 1.0 } else { 0.0 };
    }
}

/// The flat offset in a packed tensor of `dst_shape` of every element of a `scatter` index
/// (row-major over `idx_shape`): its own coordinates, with the index value on `axis`.
pub(crate) fn scatter_offsets(
    dst_shape: &[usize],
    axis: usize,
    (idx, idx_shape): (&[usize], &[usize]),
    out: &mut [usize],
) {
    walk(idx_shape, dst_shape, axis, idx, |p, off| out[p] = off);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_write_wins_and_is_the_only_survivor() {
        let mut d = [0.0; 4];
        put(&mut d, &[1, 3, 1], &[5.0, 6.0, 7.0], false);
        assert_eq!(d, [0.0, 7.0, 0.0, 6.0]);
        put(&mut d, &[1, 1], &[1.0, 1.0], true);
        assert_eq!(d, [0.0, 9.0, 0.0, 6.0]);
        let (mut last, mut keep, mut win) = ([0; 4], [9.0; 4], [9.0; 3]);
        survivors(&[1, 3, 1], &mut last, &mut keep, &mut win);
        assert_eq!((keep, win), ([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0]));
        let mut off = [0; 4];
        // x [2, 3], index [[2, 0], [1, 1]] on axis 1 -> offsets 2, 0, 4, 4.
        scatter_offsets(&[2, 3], 1, (&[2, 0, 1, 1], &[2, 2]), &mut off);
        assert_eq!(off, [2, 0, 4, 4]);
    }
}
