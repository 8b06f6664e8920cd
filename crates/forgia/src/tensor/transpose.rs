//! Matrix transposition into a packed buffer, in 16×16 blocks of 8×8 register transposes
//! (AVX) inside 64-column tiles, split between the pool's threads for large matrices.
//!
//! Two users: the strided gather, for a view whose last two axes are a transposed matrix
//! (`w.t().contiguous()`), and the products, for a transposed right operand: the `gemm`
//! crate packs such an operand one element at a time, and transposing it here first costs a
//! fraction of that (see `kernels::gemm::packs_b`).

use rayon::prelude::*;

use crate::parallel::{self, PARALLEL_ELEMENTS};

/// Columns of the source per tile: the tile's destination rows are written in one sweep.
const TILE: usize = 64;

/// `dst[c * rows + r] = src[r * ld + c]` for `r < rows`, `c < cols`: the `rows × cols` matrix
/// at the start of `src` (row stride `ld`), transposed into the packed `cols × rows` `dst`.
/// Large matrices are split between the pool's threads by tiles of destination rows.
///
/// Panics when `ld < cols` (with `rows > 1`) or a slice is too short (internal invariants).
pub(crate) fn transpose(src: &[f32], rows: usize, cols: usize, ld: usize, dst: &mut [f32]) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(rows == 1 || ld >= cols, "transpose: row stride {ld} below the {cols} columns");
    assert!(src.len() >= (rows - 1) * ld + cols && dst.len() >= rows * cols, "transpose: slice too short");
    let dst = &mut dst[..rows * cols];
    let threads = parallel::kernel_threads();
    if threads > 1 && rows * cols >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            dst.par_chunks_mut(TILE * rows)
                .enumerate()
                .for_each(|(t, out)| tile(src, rows, ld, t * TILE, out.len() / rows, out, rows));
        });
    } else {
        for (t, out) in dst.chunks_mut(TILE * rows).enumerate() {
            tile(src, rows, ld, t * TILE, out.len() / rows, out, rows);
        }
    }
}

/// [`transpose`] into a destination of row stride `ldd`: `dst[c * ldd + r] = src[r * ld + c]`,
/// on the calling thread (for kernels that already run one per worker). The floats of `dst`
/// between its rows are left as they were.
///
/// Panics when `ld < cols` (with `rows > 1`), `ldd < rows` (with `cols > 1`) or a slice is too
/// short (internal invariants).
pub(crate) fn transpose_to(src: &[f32], rows: usize, cols: usize, ld: usize, dst: &mut [f32], ldd: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!((rows == 1 || ld >= cols) && (cols == 1 || ldd >= rows), "transpose_to: row stride below the row");
    assert!(
        src.len() >= (rows - 1) * ld + cols && dst.len() >= (cols - 1) * ldd + rows,
        "transpose_to: slice too short"
    );
    for c0 in (0..cols).step_by(TILE) {
        let width = TILE.min(cols - c0);
        tile(src, rows, ld, c0, width, &mut dst[c0 * ldd..], ldd);
    }
}

/// Source columns `c0 .. c0 + width` transposed into `out` (destination rows `c0 ..`, row
/// stride `ldd`), in 16×16 blocks ([`block16`]) and the rest one element at a time.
fn tile(src: &[f32], rows: usize, ld: usize, c0: usize, width: usize, out: &mut [f32], ldd: usize) {
    let (full_r, full_c) = (rows / 16 * 16, width / 16 * 16);
    assert!(width == 0 || out.len() >= (width - 1) * ldd + rows, "transpose: tile past its destination");
    #[cfg(target_arch = "x86_64")]
    if crate::runtime::isa() >= crate::runtime::Isa::Avx2 {
        for r in (0..full_r).step_by(16) {
            for c in (0..full_c).step_by(16) {
                // SAFETY: AVX is present (`isa` runs AVX2 or wider, checked above). The block reads rows r..r+16 at
                // columns c0+c..c0+c+16, all inside `src` (r + 15 < rows, c0 + c + 15 < cols,
                // and src holds (rows-1)·ld + cols floats, asserted by the callers); it writes
                // rows c..c+16 of `out` at columns r..r+16, inside its (width-1)·ldd + rows
                // floats (asserted above).
                unsafe { block16(src.as_ptr().add(r * ld + c0 + c), ld, out.as_mut_ptr().add(c * ldd + r), ldd) };
            }
        }
        edges(src, (rows, width), ld, c0, out, ldd, (full_r, full_c));
        return;
    }
    edges(src, (rows, width), ld, c0, out, ldd, (0, 0));
}

/// The elements of the tile outside its first `full_r × full_c` corner, one at a time.
fn edges(
    src: &[f32],
    (rows, width): (usize, usize),
    ld: usize,
    c0: usize,
    out: &mut [f32],
    ldd: usize,
    (full_r, full_c): (usize, usize),
) {
    for c in 0..width {
        let r_from = if c < full_c { full_r } else { 0 };
        for r in r_from..rows {
            out[c * ldd + r] = src[r * ld + c0 + c];
        }
    }
}

/// One 16×16 block: `dst[j * ldd + i] = src[i * lds + j]`, as four 8×8 blocks into a local
/// buffer, then 16 whole rows out. Each source row's 64 bytes are read by two consecutive
/// 8×8 blocks and each destination row's 64 bytes are written at once: with a row stride of
/// a power of two (4 KiB for 1024 floats) all the rows of a block fall in one set of the L1
/// cache, and 8×8 blocks straight into `dst` evicted each half-written line before its other
/// half came (1.1 ns per element on a 1024 × 1024 matrix in W3's profile).
///
/// # Safety
/// AVX must be available; `src` must be readable for 16 rows of 16 floats at stride `lds`,
/// and `dst` writable for 16 rows of 16 floats at stride `ldd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn block16(src: *const f32, lds: usize, dst: *mut f32, ldd: usize) {
    let mut tmp = [0f32; 256];
    let t = tmp.as_mut_ptr();
    // SAFETY: the four 8×8 corners of the caller's 16×16 source block, into the 16×16 `tmp`.
    unsafe {
        block8(src, lds, t, 16);
        block8(src.add(8), lds, t.add(8 * 16), 16);
        block8(src.add(8 * lds), lds, t.add(8), 16);
        block8(src.add(8 * lds + 8), lds, t.add(8 * 16 + 8), 16);
    }
    for j in 0..16 {
        // SAFETY: row j of `tmp` into row j of the caller's 16×16 destination block.
        unsafe { std::ptr::copy_nonoverlapping(t.add(j * 16), dst.add(j * ldd), 16) };
    }
}

/// One 8×8 block: `dst[j * ldd + i] = src[i * lds + j]`.
///
/// # Safety
/// AVX must be available; `src` must be readable for 8 rows of 8 floats at stride `lds`, and
/// `dst` writable for 8 rows of 8 floats at stride `ldd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn block8(src: *const f32, lds: usize, dst: *mut f32, ldd: usize) {
    use std::arch::x86_64::*;
    // SAFETY (every load and store below): inside the 8 rows of 8 floats the caller vouches for.
    let [r0, r1, r2, r3, r4, r5, r6, r7] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.add(i * lds)) });
    // Pairs of rows interleaved, then quads, then the 128-bit halves swapped across.
    let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
    let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
    let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
    let (s0, s1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
    let (s2, s3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
    let (s4, s5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
    let (s6, s7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
    let out = [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ];
    for (j, v) in out.into_iter().enumerate() {
        unsafe { _mm256_storeu_ps(dst.add(j * ldd), v) };
    }
}

#[cfg(test)]
mod tests {
    use super::{transpose, transpose_to};

    #[test]
    fn transposes_every_shape_and_row_stride_against_the_definition() {
        for &(rows, cols, pad) in &[
            (1, 1, 0),
            (1, 9, 0),
            (9, 1, 3),
            (8, 8, 0),
            (7, 13, 2),
            (16, 64, 0),
            (17, 65, 5),
            (64, 129, 1),
            (3, 200, 0),
        ] {
            let ld = cols + pad;
            let src: Vec<f32> = (0..rows * ld).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; rows * cols];
            transpose(&src, rows, cols, ld, &mut dst);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(dst[c * rows + r], src[r * ld + c], "{rows}x{cols} ld {ld} at ({r}, {c})");
                }
            }
        }
    }

    #[test]
    fn a_large_transpose_split_between_threads_matches_the_serial_one() {
        let (rows, cols) = (700, 401); // past the parallel threshold, ragged tiles and blocks
        let src: Vec<f32> = (0..rows * cols).map(|i| (i % 1013) as f32).collect();
        let mut pooled = vec![0.0; rows * cols];
        transpose(&src, rows, cols, cols, &mut pooled);
        let mut serial = vec![0.0; rows * cols];
        crate::parallel::serially(|| transpose(&src, rows, cols, cols, &mut serial));
        assert_eq!(pooled, serial);
        assert!((0..rows).all(|r| (0..cols).all(|c| pooled[c * rows + r] == src[r * cols + c])));
    }

    #[test]
    fn a_transpose_into_a_wider_destination_leaves_the_floats_between_its_rows() {
        for &(rows, cols, ld, ldd) in &[(1, 1, 1, 1), (9, 1, 4, 9), (1, 9, 9, 3), (17, 70, 75, 20), (32, 130, 130, 37)]
        {
            let src: Vec<f32> = (0..(rows - 1) * ld + cols).map(|i| i as f32).collect();
            let mut dst = vec![-1.0; (cols - 1) * ldd + rows + 2];
            transpose_to(&src, rows, cols, ld, &mut dst, ldd);
            for (i, &v) in dst.iter().enumerate() {
                let (c, r) = (i / ldd, i % ldd);
                let want = if c < cols && r < rows { src[r * ld + c] } else { -1.0 };
                assert_eq!(v, want, "{rows}x{cols} ld {ld} into ldd {ldd} at {i}");
            }
        }
    }
}
