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

macro_rules! axis_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Axis {
            fn from(i: $t) -> Self {
                Axis::Index(i as isize)
            }
        }
    )*};
}
axis_from_int!(i32, i64, isize, usize, u32);

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

/// Resolves an axis against a rank and optional names.
pub(crate) fn resolve(op: &'static str, axis: &Axis, rank: usize, names: Option<&Names>) -> Result<usize> {
    match axis {
        Axis::Index(i) => {
            let r = rank as isize;
            if *i < -r || *i >= r {
                return fail(ErrorKind::AxisOutOfRange { op, axis: *i, rank });
            }
            Ok(if *i < 0 { (*i + r) as usize } else { *i as usize })
        }
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
