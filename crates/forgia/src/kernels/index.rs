//! Integer-indexed gathers and scatter-adds over packed buffers. Indices arrive validated
//! (`ops/index.rs` checks every one against its axis), so these loops cannot write out of
//! bounds; the slice indexing still bounds-checks as a last line of defence. Outputs go into
//! buffers the caller allocated.

use crate::tensor::layout::{contiguous_strides, for_each_offset};
use crate::tensor::Layout;

/// `out[o, j, i] = x[o, idx[j], i]` for `x` packed as `[outer, d, inner]` (every element of
/// the `[outer, idx.len(), inner]` `out` written).
pub(crate) fn index_select(x: &[f32], (outer, d, inner): (usize, usize, usize), idx: &[usize], out: &mut [f32]) {
    if out.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    let n = idx.len();
    for o in 0..outer {
        for (j, &k) in idx.iter().enumerate() {
            let src = &x[(o * d + k) * inner..(o * d + k + 1) * inner];
            out[(o * n + j) * inner..(o * n + j + 1) * inner].copy_from_slice(src);
        }
    }
}

/// `dst[o, idx[j], i] += src[o, j, i]` for `dst` packed as `[outer, d, inner]`.
pub(crate) fn index_add(dst: &mut [f32], outer: usize, d: usize, inner: usize, idx: &[usize], src: &[f32]) {
    if src.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    let n = idx.len();
    for o in 0..outer {
        for (j, &k) in idx.iter().enumerate() {
            let s = &src[(o * n + j) * inner..(o * n + j + 1) * inner];
            for (a, &b) in dst[(o * d + k) * inner..(o * d + k + 1) * inner].iter_mut().zip(s) {
                *a += b;
            }
        }
    }
}

/// Calls `f(position in the index, offset in a packed tensor of shape `target`)` for every
/// element of an index of shape `shape`, where the target offset uses the index's coordinates
/// on every axis but `axis`, and the index value on `axis`.
pub(crate) fn walk(shape: &[usize], target: &[usize], axis: usize, idx: &[usize], mut f: impl FnMut(usize, usize)) {
    let mut layout = Layout { shape: shape.into(), strides: contiguous_strides(target), offset: 0 };
    let axis_stride = std::mem::replace(&mut layout.strides[axis], 0) as usize;
    let mut p = 0;
    for_each_offset(&layout, |off| {
        f(p, off + idx[p] * axis_stride);
        p += 1;
    });
}

/// `out[p] = x[p with axis replaced by idx[p]]` (torch.gather) for packed `x` of `x_shape`
/// and an index of `idx_shape` (`out` has the index's length; every element written).
pub(crate) fn gather(
    x: &[f32],
    x_shape: &[usize],
    axis: usize,
    (idx, idx_shape): (&[usize], &[usize]),
    out: &mut [f32],
) {
    walk(idx_shape, x_shape, axis, idx, |p, off| out[p] = x[off]);
}

/// `dst[p with axis replaced by idx[p]] += src[p]` (torch.scatter_add) for packed `dst` of
/// `dst_shape`, an index of `idx_shape`, and `src` packed with `src_shape` (covering the index).
/// `vals` is scratch of the index's length.
pub(crate) fn scatter_add(
    (dst, dst_shape): (&mut [f32], &[usize]),
    axis: usize,
    (idx, idx_shape): (&[usize], &[usize]),
    (src, src_shape): (&[f32], &[usize]),
    vals: &mut [f32],
) {
    // Source values at the index's coordinates (the source may be larger than the index).
    let mut p = 0;
    walk_plain(idx_shape, src_shape, |off| {
        vals[p] = src[off];
        p += 1;
    });
    walk(idx_shape, dst_shape, axis, idx, |p, off| dst[off] += vals[p]);
}

/// Calls `f(offset)` in a packed tensor of shape `target` for each coordinate of `shape`.
fn walk_plain(shape: &[usize], target: &[usize], f: impl FnMut(usize)) {
    for_each_offset(&Layout { shape: shape.into(), strides: contiguous_strides(target), offset: 0 }, f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_and_scatter_follow_torch() {
        // x = [[0,1,2],[3,4,5]], gather axis 1 with [[2,0],[1,1]] -> [[2,0],[4,4]]
        let x: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let mut g = [0.0; 4];
        gather(&x, &[2, 3], 1, (&[2, 0, 1, 1], &[2, 2]), &mut g);
        assert_eq!(g, [2.0, 0.0, 4.0, 4.0]);
        let mut d = vec![0.0; 6];
        let src = [1.0, 2.0, 9.0, 3.0, 4.0, 9.0];
        scatter_add((&mut d, &[2, 3]), 1, (&[2, 0, 1, 1], &[2, 2]), (&src, &[2, 3]), &mut [0.0; 4]);
        assert_eq!(d, vec![2.0, 0.0, 1.0, 0.0, 7.0, 0.0]);
        let mut s = [0.0; 9];
        index_select(&x, (1, 2, 3), &[1, 1, 0], &mut s);
        assert_eq!(s, [3.0, 4.0, 5.0, 3.0, 4.0, 5.0, 0.0, 1.0, 2.0]);
    }
}
