//! Shape, strides and offset: how a tensor's elements sit in its storage. Every view is a new
//! `Layout` over the same storage.

use smallvec::SmallVec;

use super::size::Size;
use crate::error::{fail, ErrorKind, Result};

/// A tensor's dimensions (inline up to rank 4).
pub type Shape = SmallVec<[usize; 4]>;
/// Element strides per axis; 0 on a broadcast axis.
pub(crate) type Strides = SmallVec<[isize; 4]>;

/// Number of elements of a shape (1 for a scalar), for a shape already checked by
/// [`Size::of`] (every layout's is): unchecked, exact under that invariant.
#[inline]
pub(crate) fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major strides of a contiguous tensor of `shape`.
#[inline]
pub(crate) fn contiguous_strides(shape: &[usize]) -> Strides {
    let fill = |strides: &mut [isize]| {
        let mut acc = 1isize;
        for (s, &d) in strides.iter_mut().zip(shape).rev() {
            *s = acc;
            acc *= d.max(1) as isize;
        }
    };
    if shape.len() <= 4 {
        // Filled in place (`SmallVec::from_elem` goes through a generic clone loop; this is
        // on every op's path).
        let mut buf = [0isize; 4];
        fill(&mut buf[..shape.len()]);
        return SmallVec::from_buf_and_len(buf, shape.len());
    }
    let mut strides: Strides = SmallVec::from_elem(0, shape.len());
    fill(&mut strides);
    strides
}

/// A copy of a short slice as a `SmallVec` of inline capacity `N`, without a `memcpy` call:
/// `SmallVec::from_slice` copies through one (about a dozen instructions of call and setup for
/// a rank-1 shape), and every op copies shapes and strides several times.
#[inline]
pub(crate) fn copy_small<T: Copy + Default, const N: usize>(s: &[T]) -> SmallVec<[T; N]>
where
    [T; N]: smallvec::Array<Item = T>,
{
    if s.len() > N {
        return SmallVec::from_slice(s);
    }
    let mut buf = [T::default(); N];
    // A fixed trip count with guarded stores: unrolled, and not turned back into a `memcpy`.
    for i in 0..N {
        if i < s.len() {
            buf[i] = s[i];
        }
    }
    SmallVec::from_buf_and_len(buf, s.len())
}

/// True when two shapes are equal, compared element by element: slice equality calls
/// `memcmp`, a call per comparison on every op's path for shapes of a few dims.
#[inline]
pub(crate) fn same_shape(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Shape, strides and offset into the storage.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) shape: Shape,
    pub(crate) strides: Strides,
    pub(crate) offset: usize,
}

impl Clone for Layout {
    /// Copies the two small vectors with [`copy_small`] (`SmallVec`'s own `clone` goes through
    /// a generic element-by-element extend, `from_slice` through a `memcpy` call: both
    /// measurable on W1's per-op path).
    #[inline]
    fn clone(&self) -> Self {
        Layout { shape: copy_small(&self.shape), strides: copy_small(&self.strides), offset: self.offset }
    }
}

impl Layout {
    /// A row-major layout starting at element 0.
    #[inline]
    pub(crate) fn contiguous(shape: &[usize]) -> Self {
        Layout { shape: copy_small(shape), strides: contiguous_strides(shape), offset: 0 }
    }

    #[inline]
    pub(crate) fn rank(&self) -> usize {
        self.shape.len()
    }

    #[inline]
    pub(crate) fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// True when the elements are row-major and packed (size-1 axes may have any stride). An
    /// empty layout is trivially packed, whatever its strides.
    #[inline]
    pub(crate) fn is_contiguous(&self) -> bool {
        // One walk from the last axis (this is on every op's path): the strides of the axes
        // above size 1 must be the running products, unless some extent is 0 (then there is
        // nothing to address). Partial products stay within the checked element count, or
        // become 0 after a zero extent.
        let (mut expected, mut packed, mut empty) = (1isize, true, false);
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            empty |= d == 0;
            packed &= d == 1 || s == expected;
            expected = expected.wrapping_mul(d as isize);
        }
        packed || empty
    }

    /// The contiguous range of storage this layout covers, if it is contiguous.
    /// An empty layout gives `0..0`: its offset may point past the end of its storage (a view
    /// sliced empty at the end of several axes), and it reads nothing anyway.
    #[inline]
    pub(crate) fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        let n = self.numel();
        if n == 0 {
            return Some(0..0);
        }
        self.strides_packed().then(|| self.offset..self.offset + n)
    }

    /// True when every axis above size 1 has the row-major stride (what [`Layout::is_contiguous`]
    /// checks, for a layout known not to be empty).
    #[inline]
    fn strides_packed(&self) -> bool {
        let (mut expected, mut packed) = (1isize, true);
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            packed &= d == 1 || s == expected;
            expected = expected.wrapping_mul(d as isize);
        }
        packed
    }

    /// Swaps two axes' positions (a free transpose).
    pub(crate) fn permuted(&self, perm: &[usize]) -> Layout {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// Elements `start, start+step, …` (`len` of them) along `axis`.
    pub(crate) fn narrowed(&self, axis: usize, start: usize, len: usize, step: usize) -> Layout {
        let mut out = self.clone();
        out.offset = (self.offset as isize + start as isize * self.strides[axis]) as usize;
        out.shape[axis] = len;
        out.strides[axis] = self.strides[axis] * step as isize;
        out
    }

    /// The same elements seen with a broadcast `shape` (stride 0 on stretched axes).
    /// The caller has checked that the shapes are compatible.
    pub(crate) fn broadcast_to(&self, shape: &[usize]) -> Layout {
        let extra = shape.len() - self.rank();
        let mut strides: Strides = SmallVec::from_elem(0, shape.len());
        for i in 0..self.rank() {
            if self.shape[i] == shape[i + extra] {
                strides[i + extra] = self.strides[i];
            }
        }
        Layout { shape: Shape::from_slice(shape), strides, offset: self.offset }
    }

    /// A view with `shape`, if the elements can be re-described without copying
    /// (always possible for contiguous layouts).
    pub(crate) fn reshaped(&self, shape: &[usize]) -> Option<Layout> {
        if self.is_contiguous() {
            return Some(Layout {
                shape: Shape::from_slice(shape),
                strides: contiguous_strides(shape),
                offset: self.offset,
            });
        }
        None
    }
}

/// The NumPy broadcast of two shapes.
///
/// # Errors
/// `ShapeMismatch` when they do not broadcast; `SizeOverflow` when the result's size does not
/// fit (`[2^40, 1]` with `[1, 2^40]`).
pub(crate) fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Shape> {
    if a == b {
        return Ok(Shape::from_slice(a)); // an existing layout's shape: already checked
    }
    let rank = a.len().max(b.len());
    let mut out: Shape = SmallVec::from_elem(0, rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank { a[i + a.len() - rank] } else { 1 };
        let db = if i + b.len() >= rank { b[i + b.len() - rank] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return fail(ErrorKind::ShapeMismatch { op, lhs: a.to_vec(), rhs: b.to_vec() }),
        };
    }
    Size::of(op, &out)?;
    Ok(out)
}

/// Walks the storage offsets of a layout in row-major order, calling `f(offset)` for each.
/// The innermost axis is a tight loop.
pub(crate) fn for_each_offset(layout: &Layout, mut f: impl FnMut(usize)) {
    let rank = layout.rank();
    if layout.numel() == 0 {
        return;
    }
    if rank == 0 {
        f(layout.offset);
        return;
    }
    let inner = layout.shape[rank - 1];
    let inner_stride = layout.strides[rank - 1];
    let mut index: SmallVec<[usize; 6]> = SmallVec::from_elem(0, rank - 1);
    let mut base = layout.offset as isize;
    loop {
        let mut off = base;
        for _ in 0..inner {
            f(off as usize);
            off += inner_stride;
        }
        // Odometer over the outer axes.
        let mut axis = rank - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            base += layout.strides[axis];
            if index[axis] < layout.shape[axis] {
                break;
            }
            base -= layout.strides[axis] * layout.shape[axis] as isize;
            index[axis] = 0;
        }
    }
}

/// The storage offset of the element with row-major linear index `linear`.
pub(crate) fn offset_of(layout: &Layout, mut linear: usize) -> usize {
    let mut off = layout.offset as isize;
    for (&d, &s) in layout.shape.iter().zip(&layout.strides).rev() {
        if d == 0 {
            continue;
        }
        off += (linear % d) as isize * s;
        linear /= d;
    }
    off as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(contiguous_strides(&[2, 3, 4]).as_slice(), &[12, 4, 1]);
    }

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(broadcast_shapes("t", &[2, 1, 3], &[4, 1]).unwrap().as_slice(), &[2, 4, 3]);
        assert!(broadcast_shapes("t", &[2, 3], &[4]).is_err());
    }

    #[test]
    fn offsets_walk_a_transposed_layout() {
        let l = Layout::contiguous(&[2, 3]).permuted(&[1, 0]);
        let mut seen = vec![];
        for_each_offset(&l, |o| seen.push(o));
        assert_eq!(seen, vec![0, 3, 1, 4, 2, 5]);
        for (i, &o) in seen.iter().enumerate() {
            assert_eq!(offset_of(&l, i), o);
        }
    }
}
