//! Checked shape arithmetic, in one place: element counts, contiguous strides, sizes computed
//! from arguments (repeats, paddings, factors), byte sizes, GEMM end offsets, and the work
//! limit of one op call. Every constructor, op, module and loader that makes a shape goes
//! through [`Size`]; an overflow is `Err(SizeOverflow)`, never a wrapped product.
//!
//! The invariant it keeps: every layout's shape has a **span** (the product of its sizes,
//! counting an empty axis as 1) of at most `isize::MAX`. Then its element count, its
//! contiguous strides and every offset of a view into real storage fit in `isize`, so the
//! unchecked arithmetic on an existing layout (`Layout::numel`, the stride walks) is exact.
//! A `[0, 2^62]` tensor is legal (and empty); `[0, 2^32, 2^32]` is not (its strides overflow).

use crate::error::{fail, ErrorKind, Result};

/// The most work one op call may do, in element visits or multiply-adds: 2^40. A matmul
/// whose `batch · m · n · k` passes it, or a copy or reduction that would walk more logical
/// elements of a broadcast view than this, fails with
/// [`ErrorKind::WorkLimitExceeded`] instead of running for hours. Ordinary work is far below
/// it (a 16384 × 4096 by 4096 × 4096 product is 2^38).
pub const MAX_WORK: u128 = 1 << 40;

/// The product of `factors`, saturating at `usize::MAX`: a work estimate for sizes that may
/// pair a huge axis with an empty one (`[2^63, 0]` times anything is no work, but `3 · 2^63`
/// overflows before the zero is reached).
pub(crate) fn work(factors: &[usize]) -> usize {
    if factors.contains(&0) {
        return 0;
    }
    factors.iter().fold(1usize, |acc, &f| acc.saturating_mul(f))
}

/// The checked size of a shape: constructing one proves its span fits in `isize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Size {
    numel: usize,
}

impl Size {
    /// Checks `shape` for op `op`.
    ///
    /// # Errors
    /// `SizeOverflow` when its span (the product of its sizes, empty axes counted as 1)
    /// passes `isize::MAX`.
    #[inline]
    pub(crate) fn of(op: &'static str, shape: &[usize]) -> Result<Size> {
        let mut span = 1usize;
        let mut numel = 1usize;
        for &d in shape {
            span = match span.checked_mul(d.max(1)) {
                Some(s) if s <= isize::MAX as usize => s,
                _ => return overflow(op, shape),
            };
            numel *= d; // at most `span`
        }
        Ok(Size { numel })
    }

    /// The element count.
    pub(crate) fn numel(self) -> usize {
        self.numel
    }

    /// `a * b` for a size computed from arguments (a repeat count, an upsampling factor);
    /// `shape` is the operand, named in the error.
    pub(crate) fn mul(op: &'static str, shape: &[usize], a: usize, b: usize) -> Result<usize> {
        a.checked_mul(b).map_or_else(|| overflow(op, shape), Ok)
    }

    /// `a + b` for a size computed from arguments (a padding, a concatenation).
    pub(crate) fn add(op: &'static str, shape: &[usize], a: usize, b: usize) -> Result<usize> {
        a.checked_add(b).map_or_else(|| overflow(op, shape), Ok)
    }

    /// The bytes of `n` floats, `None` when that count overflows.
    pub(crate) fn bytes(n: usize) -> Option<usize> {
        n.checked_mul(std::mem::size_of::<f32>())
    }

    /// One past the largest offset a `rows × cols` strided read from `offset` touches (0 for
    /// an empty read), `None` when that offset does not fit in `usize`.
    pub(crate) fn end(offset: usize, rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<usize> {
        if rows == 0 || cols == 0 {
            return Some(0);
        }
        let r = (rows - 1).checked_mul(row_stride)?;
        let c = (cols - 1).checked_mul(col_stride)?;
        offset.checked_add(r)?.checked_add(c)?.checked_add(1)
    }

    /// Refuses `work` (the product of `factors`, exact in `u128` up to its saturation) above
    /// [`MAX_WORK`]; `shape` is the operand whose size decides it.
    pub(crate) fn work(op: &'static str, shape: &[usize], factors: &[usize]) -> Result<()> {
        let work = factors.iter().fold(1u128, |acc, &f| acc.saturating_mul(f as u128));
        if work > MAX_WORK {
            return fail(ErrorKind::WorkLimitExceeded { op, shape: shape.to_vec(), work });
        }
        Ok(())
    }
}

fn overflow<T>(op: &'static str, shape: &[usize]) -> Result<T> {
    fail(ErrorKind::SizeOverflow { op, shape: shape.to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_shapes_with_huge_sizes_are_legal_while_their_strides_fit() {
        assert_eq!(Size::of("t", &[0, 1 << 62]).unwrap().numel(), 0);
        assert_eq!(Size::of("t", &[]).unwrap().numel(), 1);
        assert!(Size::of("t", &[0, 1 << 32, 1 << 32]).is_err());
        assert!(Size::of("t", &[4, 1 << 62]).is_err());
        assert!(Size::of("t", &[1 << 63]).is_err());
    }

    #[test]
    fn end_offsets_are_checked_near_usize_max() {
        assert_eq!(Size::end(5, 0, 3, 7, 1), Some(0));
        assert_eq!(Size::end(1, 2, 3, 10, 1), Some(14));
        assert_eq!(Size::end(0, 2, 2, usize::MAX, 0), None);
        assert_eq!(Size::end(usize::MAX, 1, 1, 0, 0), None);
    }

    #[test]
    fn work_saturates_instead_of_wrapping() {
        assert!(Size::work("t", &[], &[1 << 20, 1 << 20]).is_ok());
        assert!(Size::work("t", &[], &[usize::MAX, usize::MAX, usize::MAX]).is_err());
    }
}
