//! The strided gather: the elements of a layout over a buffer, packed row-major (what makes a
//! view contiguous). A transposed matrix (or a batch of them) goes through the blocked
//! transpose; other layouts in parallel chunks above the pool's size threshold.

use rayon::prelude::*;

use super::layout::{for_each_offset, offset_of};
use super::transpose::transpose;
use super::{buffer, Layout, Size};
use crate::error::Result;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

/// `(rows, cols, ld)` when the last two axes of `layout` are a transposed matrix worth the
/// blocked transpose: element `(i, j)` at `i + j·ld` with `ld >= rows`, both sides at least 8
/// (smaller ones go element by element as before).
fn transposed_matrices(layout: &Layout) -> Option<(usize, usize, usize)> {
    let r = layout.rank();
    if r < 2 {
        return None;
    }
    let (rows, cols) = (layout.shape[r - 2], layout.shape[r - 1]);
    let ld = usize::try_from(layout.strides[r - 1]).ok()?;
    (layout.strides[r - 2] == 1 && rows >= 8 && cols >= 8 && ld >= rows).then_some((rows, cols, ld))
}

/// The elements of `layout` over `src`, packed row-major, for op `op`.
///
/// # Errors
/// `WorkLimitExceeded` when a (broadcast) layout has more than [`crate::MAX_WORK`] elements,
/// `OutOfMemory` when the buffer cannot be allocated.
pub(crate) fn gather(op: &'static str, src: &[f32], layout: &Layout) -> Result<Vec<f32>> {
    let n = layout.numel();
    if let Some(r) = layout.contiguous_range() {
        let mut out = buffer(op, n)?;
        out.copy_from_slice(&src[r]);
        return Ok(out);
    }
    Size::work(op, &layout.shape, &[n])?;
    let rank = layout.rank();
    if let Some((rows, cols, ld)) = transposed_matrices(layout) {
        // Each matrix of the view is the transpose of a row-major `cols × rows` block.
        let mut out = buffer(op, n)?;
        for (b, block) in out.chunks_mut(rows * cols).enumerate() {
            let base = offset_of(layout, b * rows * cols);
            transpose(&src[base..], cols, rows, ld, block);
        }
        return Ok(out);
    }
    if n >= PARALLEL_ELEMENTS && rank > 0 {
        let inner = layout.shape[rank - 1];
        let stride = layout.strides[rank - 1];
        let mut out = buffer(op, n)?;
        let rows_per_chunk = (CHUNK_ELEMENTS / inner.max(1)).max(1);
        parallel::install(|| {
            out.par_chunks_mut(rows_per_chunk * inner).enumerate().for_each(|(c, chunk)| {
                for (r, row) in chunk.chunks_mut(inner).enumerate() {
                    let off = offset_of(layout, (c * rows_per_chunk + r) * inner);
                    // A broadcast row (what a sum's gradient expands to) is one value, a
                    // packed row one run; only other strides go element by element.
                    match stride {
                        0 => row.fill(src[off]),
                        1 => row.copy_from_slice(&src[off..off + row.len()]),
                        _ => {
                            let mut off = off as isize;
                            for v in row {
                                *v = src[off as usize];
                                off += stride;
                            }
                        }
                    }
                }
            })
        });
        return Ok(out);
    }
    let mut out = buffer(op, n)?;
    let mut i = 0;
    for_each_offset(layout, |o| {
        out[i] = src[o];
        i += 1;
    });
    Ok(out)
}
