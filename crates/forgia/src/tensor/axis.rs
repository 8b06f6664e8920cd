//! Axis arguments: a positional index (negative counts from the end) or an axis name, and
//! sets of them for reductions.

use smallvec::SmallVec;

use crate::error::{fail, ErrorKind, Result};

/// One axis, by position (negative allowed, like PyTorch) or by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Position; `-1` is the last axis.
    Index(isize),
    /// The name given with [`crate::Tensor::with_names`].
    Name(String),
}

impl From<isize> for Axis {
    fn from(i: isize) -> Self {
        Axis::Index(i)
    }
}

/// Other integer axes convert without wrapping: an unsigned axis is never read as a negative one
/// (`usize::MAX` is not `-1`); a value past `isize`'s range saturates, which is out of range
/// for every tensor.
macro_rules! axis_from_int {
    ($($t:ty => $past:expr),*) => {$(
        impl From<$t> for Axis {
            fn from(i: $t) -> Self {
                Axis::Index(isize::try_from(i).unwrap_or_else(|_| $past(i)))
            }
        }
    )*};
}
axis_from_int!(
    i32 => |i: i32| if i < 0 { isize::MIN } else { isize::MAX },
    i64 => |i: i64| if i < 0 { isize::MIN } else { isize::MAX },
    usize => |_| isize::MAX,
    u32 => |_| isize::MAX,
    u64 => |_| isize::MAX
);

impl From<&str> for Axis {
    fn from(name: &str) -> Self {
        Axis::Name(name.to_string())
    }
}

impl From<String> for Axis {
    fn from(name: String) -> Self {
        Axis::Name(name)
    }
}

impl From<&Axis> for Axis {
    fn from(a: &Axis) -> Self {
        a.clone()
    }
}

/// A set of axes for a reduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axes(pub Vec<Axis>);

impl<T: Into<Axis>> From<T> for Axes {
    fn from(a: T) -> Self {
        Axes(vec![a.into()])
    }
}

impl<T: Into<Axis> + Clone> From<&[T]> for Axes {
    fn from(a: &[T]) -> Self {
        Axes(a.iter().cloned().map(Into::into).collect())
    }
}

impl<T: Into<Axis>, const N: usize> From<[T; N]> for Axes {
    fn from(a: [T; N]) -> Self {
        Axes(a.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<Axis>> From<Vec<T>> for Axes {
    fn from(a: Vec<T>) -> Self {
        Axes(a.into_iter().map(Into::into).collect())
    }
}

/// Axis names of a tensor, one optional name per axis.
pub(crate) type Names = std::sync::Arc<Vec<Option<String>>>;

/// Resolves a position `i` among `slots` places (`rank` for an existing axis, `rank + 1` for an
/// inserted one): `-slots..slots`, negative counting from the end.
pub(crate) fn resolve_index(op: &'static str, i: isize, rank: usize, slots: usize) -> Result<usize> {
    let s = slots as isize;
    if i < -s || i >= s {
        return fail(ErrorKind::AxisOutOfRange { op, axis: i, rank, low: -s, high: s - 1 });
    }
    Ok(if i < 0 { (i + s) as usize } else { i as usize })
}

/// Resolves an axis to insert (`unsqueeze`, `stack`) against the input's rank: `0..=rank`, and
/// negative counting from the end of the output (PyTorch's rule). Names are not accepted: the
/// new axis has none.
pub(crate) fn resolve_insert(op: &'static str, axis: &Axis, rank: usize) -> Result<usize> {
    match axis {
        Axis::Index(i) => resolve_index(op, *i, rank, rank + 1),
        Axis::Name(name) => fail(ErrorKind::UnknownAxisName { op, name: name.clone(), names: vec![None; rank] }),
    }
}

/// Resolves an axis against a rank and optional names.
pub(crate) fn resolve(op: &'static str, axis: &Axis, rank: usize, names: Option<&Names>) -> Result<usize> {
    match axis {
        Axis::Index(i) => resolve_index(op, *i, rank, rank),
        Axis::Name(name) => {
            let found = names.and_then(|ns| ns.iter().position(|n| n.as_deref() == Some(name)));
            match found {
                Some(p) => Ok(p),
                None => fail(ErrorKind::UnknownAxisName {
                    op,
                    name: name.clone(),
                    names: names.map(|n| n.to_vec()).unwrap_or_else(|| vec![None; rank]),
                }),
            }
        }
    }
}

/// Checks the axes of a reduction over a 0-d tensor: PyTorch accepts axis 0 and -1 there (the
/// tensor is read as having one axis of size 1), each at most once; names are unknown.
pub(crate) fn check_scalar_axes(op: &'static str, axes: &Axes) -> Result<()> {
    let mut seen = false;
    for a in &axes.0 {
        match a {
            Axis::Index(i) => resolve_index(op, *i, 0, 1)?,
            Axis::Name(name) => return fail(ErrorKind::UnknownAxisName { op, name: name.clone(), names: vec![] }),
        };
        if std::mem::replace(&mut seen, true) {
            return fail(ErrorKind::DuplicateAxis { op, axis: 0 });
        }
    }
    Ok(())
}

/// Resolves a set of axes to sorted, distinct positions.
pub(crate) fn resolve_set(
    op: &'static str,
    axes: &Axes,
    rank: usize,
    names: Option<&Names>,
) -> Result<SmallVec<[usize; 4]>> {
    let mut out: SmallVec<[usize; 4]> = SmallVec::new();
    for a in &axes.0 {
        let p = resolve(op, a, rank, names)?;
        if out.contains(&p) {
            return fail(ErrorKind::DuplicateAxis { op, axis: p });
        }
        out.push(p);
    }
    out.sort_unstable();
    Ok(out)
}
