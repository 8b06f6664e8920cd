//! The dropout mask as a pure function of (seed, element index): nothing is stored, the
//! backward regenerates it.

use rayon::prelude::*;

use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};
use crate::tensor::mix64;

/// True when element `index` is kept: `mix64(seed ^ mix64(index))` read as a uniform in
/// `[0, 1)` (its top 24 bits) is at least `p`.
#[inline]
pub(crate) fn keep(seed: u64, index: u64, p: f32) -> bool {
    let h = mix64(seed ^ mix64(index));
    (h >> 40) as f32 * (1.0 / (1u64 << 24) as f32) >= p
}

/// `out[i] = x[i] · scale` where element `i` is kept (`x = None` gives the mask itself,
/// `scale`); dropped elements are left as they are, so the caller hands a zeroed `out`.
pub(crate) fn apply(x: Option<&[f32]>, seed: u64, p: f32, scale: f32, out: &mut [f32]) {
    let len = out.len();
    let body = |start: usize, o: &mut [f32]| {
        for (j, o) in o.iter_mut().enumerate() {
            let i = start + j;
            if keep(seed, i as u64, p) {
                *o = x.map_or(1.0, |x| x[i]) * scale;
            }
        }
    };
    if len >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(CHUNK_ELEMENTS).enumerate().for_each(|(c, o)| body(c * CHUNK_ELEMENTS, o))
        });
    } else {
        body(0, out);
    }
}
