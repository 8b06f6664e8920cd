//! The `gemm` crate's microkernel as the implicit GEMMs call it (`conv/implicit.rs`,
//! `conv/implicit_panels.rs`, `conv/implicit_weight.rs`): which one runs on this machine, how a
//! row of output pixels is cut into its tiles, and one call on operands at any strides.

use gemm_common::microkernel::MicroKernelFn;

/// The microkernel: `rows` output channels (whole vectors of `lanes`) by `cols` pixels.
#[derive(Clone, Copy)]
pub(super) struct Micro {
    pub(super) lanes: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
    /// The narrowest output row the driver takes with this kernel when it calls it kernel row
    /// by kernel row (`implicit::Calls::KernelRows`; by taps it takes any).
    pub(super) min_ow: usize,
    /// True when the weight gradient takes it too (`conv/implicit_weight.rs`).
    pub(super) weight_gradient: bool,
    /// The kernel for `vectors` vectors of rows (1-based: index `vectors - 1`) by `cols`
    /// columns (index `cols - 1`).
    pick: fn(usize, usize) -> MicroKernelFn<f32>,
}

/// The microkernel for the instruction set the kernels run with, if the driver has one.
///
/// AVX2's (16 × 6, two vectors by six columns in its 12 accumulators) ran slower than im2col
/// at 7 pixels a row called by kernel rows, where a row's tiles are 4 + 3 (eight or six
/// accumulators for the FMAs' four cycles of latency), and faster at 14, 28 and 56; by taps,
/// where two of a 3×3 kernel's three taps reach 6 of the 7 columns and run whole tiles, faster
/// at 7 too (session twenty-eight); and in the weight gradient, where
/// each call reads 16 of every pixel's `O` floats of the output gradient and so a quarter of
/// each cache line it loads at 64 channels, slower at every size (docs/BENCHMARKS.md, session
/// twenty-seven, with the instruction set capped to AVX2 on the AVX-512 EPYC).
pub(super) fn micro() -> Option<Micro> {
    micro_for(crate::runtime::isa())
}

/// The driver's microkernel for the instruction set `isa`, if it has one and `isa` is no
/// wider than the one the kernels run with (so the CPU has its instructions).
pub(super) fn micro_for(isa: crate::runtime::Isa) -> Option<Micro> {
    if isa > crate::runtime::isa() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    match isa {
        crate::runtime::Isa::Avx512 => {
            return Some(Micro {
                lanes: 16,
                rows: 64,
                cols: 6,
                min_ow: 1,
                weight_gradient: true,
                pick: |v, c| gemm_f32::microkernel::avx512f::f32::UKR[v][c],
            })
        }
        crate::runtime::Isa::Avx2 => {
            return Some(Micro {
                lanes: 8,
                rows: 16,
                cols: 6,
                min_ow: 14,
                weight_gradient: false,
                pick: |v, c| gemm_f32::microkernel::fma::f32::UKR[v][c],
            })
        }
        crate::runtime::Isa::Baseline => {}
    }
    None
}

/// The microkernel calls along an output row of `ow` pixels, `(first pixel, pixels)`: tiles
/// of `cols`, except that a last tile of one or two pixels is merged with the one before
/// and the two split evenly (7 = 4 + 3, 14 = 6 + 4 + 4): a kernel of one column reads as many
/// weights per step as a full one for a sixth of its work, and at 7×7 the 1-pixel tiles took
/// a fifth of the time (docs/BENCHMARKS.md, session twenty-six).
pub(super) fn column_tiles(ow: usize, cols: usize) -> impl Iterator<Item = (usize, usize)> {
    let (full, rest) = (ow / cols, ow % cols);
    let split = full > 0 && rest > 0 && rest <= 2;
    let plain = if split { full - 1 } else { full };
    let tail: [(usize, usize); 2] = if split {
        let (a, b) = ((cols + rest).div_ceil(2), (cols + rest) / 2);
        [(plain * cols, a), (plain * cols + a, b)]
    } else {
        [(plain * cols, rest), (0, 0)]
    };
    (0..plain).map(move |t| (t * cols, cols)).chain(tail.into_iter().filter(|&(_, n)| n > 0))
}

/// `dst += lhs · rhs` by the microkernel for `m` rows (whole vectors) by `n` columns over `k`
/// steps: `lhs` holds `m` consecutive floats a step (`lhs_cs` apart), `rhs` element
/// `(step, j)` is at `step·rs + j·cs` of its slice, `dst` element `(i, j)` at `i·rs + j·cs`
/// of its (operands as `(slice, strides)`).
pub(super) fn product(
    mk: Micro,
    (m, n, k): (usize, usize, usize),
    (dst, dst_rs, dst_cs): (&mut [f32], usize, usize),
    (lhs, lhs_cs): (&[f32], usize),
    (rhs, rhs_rs, rhs_cs): (&[f32], usize, usize),
) {
    assert!(m.is_multiple_of(mk.lanes) && (1..=mk.rows).contains(&m) && (1..=mk.cols).contains(&n) && k > 0);
    assert!(
        dst.len() > (m - 1) * dst_rs + (n - 1) * dst_cs
            && lhs.len() >= (k - 1) * lhs_cs + m
            && rhs.len() > (k - 1) * rhs_rs + (n - 1) * rhs_cs,
        "implicit product: operand past its slice"
    );
    // SAFETY: the microkernel for `m / lanes` vectors by `n` columns (mk.pick's table, its
    // instruction set present: `micro_for` makes a `Micro` for no other) reads `k` steps of
    // `m` floats of `lhs` (`lhs_cs` apart) and of `n` floats of `rhs` at the given strides,
    // and adds to the `m × n` floats of `dst` at the given strides (alpha 1, status 1), all
    // inside the slices by the assertions above.
    unsafe {
        (mk.pick)(m / mk.lanes - 1, n - 1)(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            lhs.as_ptr(),
            rhs.as_ptr(),
            dst_cs as isize,
            dst_rs as isize,
            lhs_cs as isize,
            rhs_rs as isize,
            rhs_cs as isize,
            1.0,
            1.0,
            1,
            false,
            false,
            false,
            lhs.as_ptr(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_tiles_cover_a_row_once_without_a_tile_of_one_or_two_after_a_full_one() {
        for ow in 1..=40 {
            let tiles: Vec<(usize, usize)> = column_tiles(ow, 6).collect();
            let mut next = 0;
            for &(first, n) in &tiles {
                assert!(first == next && (1..=6).contains(&n), "{ow} pixels: {tiles:?}");
                next += n;
            }
            assert_eq!(next, ow, "{ow} pixels: {tiles:?}");
            assert!(ow <= 2 || tiles.iter().all(|&(_, n)| n > 2), "{ow} pixels: {tiles:?}");
        }
        assert_eq!(column_tiles(7, 6).collect::<Vec<_>>(), [(0, 4), (4, 3)]);
        assert_eq!(column_tiles(14, 6).collect::<Vec<_>>(), [(0, 6), (6, 4), (10, 4)]);
    }
}
