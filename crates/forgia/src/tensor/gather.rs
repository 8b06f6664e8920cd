//! The strided gather: the elements of a layout over a buffer, packed row-major (what makes a
//! view contiguous). In parallel chunks above the pool's size threshold.

use rayon::prelude::*;

use super::layout::{for_each_offset, offset_of};
use super::{buffer, Layout, Size};
use crate::error::Result;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};

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
