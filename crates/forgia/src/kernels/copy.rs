//! Strided scatters (overwriting and adding) from a packed buffer into a layout (the gather is the value layer's:
//! `tensor::gather`).

use crate::tensor::layout::for_each_offset;
use crate::tensor::Layout;

/// Writes the packed `values` into `dst` at the positions of `layout`.
pub(crate) fn scatter(dst: &mut [f32], layout: &Layout, values: &[f32]) {
    let mut i = 0;
    for_each_offset(layout, |o| {
        dst[o] = values[i];
        i += 1;
    });
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
