//! Strided gathers and scatters between a layout and a packed buffer.

use rayon::prelude::*;

use crate::error::Result;
use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};
use crate::tensor::layout::{for_each_offset, offset_of};
use crate::tensor::{Layout, Size};

/// The elements of `layout` over `src`, packed row-major, for op `op`.
///
/// # Errors
/// `WorkLimitExceeded` when a (broadcast) layout has more than [`crate::MAX_WORK`] elements,
/// `OutOfMemory` when the buffer cannot be allocated.
pub(crate) fn gather(op: &'static str, src: &[f32], layout: &Layout) -> Result<Vec<f32>> {
    let n = layout.numel();
    if let Some(r) = layout.contiguous_range() {
        let mut out = crate::tensor::buffer(op, n)?;
        out.copy_from_slice(&src[r]);
        return Ok(out);
    }
    Size::work(op, &layout.shape, &[n])?;
    let rank = layout.rank();
    if n >= PARALLEL_ELEMENTS && rank > 0 {
        let inner = layout.shape[rank - 1];
        let stride = layout.strides[rank - 1];
        let mut out = crate::tensor::buffer(op, n)?;
        let rows_per_chunk = (CHUNK_ELEMENTS / inner.max(1)).max(1);
        parallel::install(|| {
            out.par_chunks_mut(rows_per_chunk * inner).enumerate().for_each(|(c, chunk)| {
                for (r, row) in chunk.chunks_mut(inner).enumerate() {
                    let mut off = offset_of(layout, (c * rows_per_chunk + r) * inner) as isize;
                    for v in row {
                        *v = src[off as usize];
                        off += stride;
                    }
                }
            })
        });
        return Ok(out);
    }
    let mut out = crate::tensor::buffer(op, n)?;
    let mut i = 0;
    for_each_offset(layout, |o| {
        out[i] = src[o];
        i += 1;
    });
    Ok(out)
}

/// Adds the packed `values` into `dst` at the positions of `layout` (positions may repeat on
/// broadcast axes; every repeat adds).
pub(crate) fn scatter_add(dst: &mut [f32], layout: &Layout, values: &[f32]) {
    let mut i = 0;
    for_each_offset(layout, |o| {
        dst[o] += values[i];
        i += 1;
    });
}
