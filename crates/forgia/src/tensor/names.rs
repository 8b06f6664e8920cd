//! How axis names travel through ops (shared/DESIGN.md, "Axes"): every op keeps the names of
//! the axes it keeps, a new axis has no name, and an op between named operands aligns them as
//! it broadcasts — from the right, like the shapes — failing when two names meet that differ.
//! These few functions are the one place each rule is written; ops call them.

use super::axis::Names;
use crate::error::{fail, ErrorKind, Result};

/// `None` when no axis has a name: an all-unnamed list is stored as no names at all.
fn normalized(names: Vec<Option<String>>) -> Option<Names> {
    names.iter().any(Option::is_some).then(|| names.into())
}

/// The names left when the axes in `removed` (positions of the input) are dropped, as a
/// reduction without `keepdim` or `squeeze` drops them.
pub(crate) fn without(names: Option<&Names>, removed: &[usize]) -> Option<Names> {
    let n = names?;
    normalized(n.iter().enumerate().filter(|(i, _)| !removed.contains(i)).map(|(_, v)| v.clone()).collect())
}

/// The names with an unnamed axis inserted at output position `at` (`unsqueeze`, `stack`).
pub(crate) fn inserted(names: Option<&Names>, at: usize) -> Option<Names> {
    let mut n = names?.to_vec();
    n.insert(at, None);
    Some(n.into())
}

/// The names of the output axes, each taken from input axis `from[i]` (`None` for an axis
/// made by the op): permutations, and ops whose output axes come from one operand.
pub(crate) fn picked(names: Option<&Names>, from: &[Option<usize>]) -> Option<Names> {
    let n = names?;
    normalized(from.iter().map(|a| a.and_then(|a| n[a].clone())).collect())
}

/// The output names of an op that broadcasts `a` (rank `ra`) with `b` (rank `rb`) to rank
/// `rank`: axes are matched from the right, as broadcasting matches sizes. Two axes match
/// when their names are equal or one is unnamed (the output takes the name). Fails with
/// `AxisNameMismatch` when two different names meet, or when a name would land on two output
/// axes (the operands hold it at different positions: they are not aligned, PyTorch's rule).
pub(crate) fn broadcast(
    op: &'static str,
    a: Option<&Names>,
    ra: usize,
    b: Option<&Names>,
    rb: usize,
    rank: usize,
) -> Result<Option<Names>> {
    if a.is_none() && b.is_none() {
        return Ok(None);
    }
    let at = |n: Option<&Names>, r: usize, i: usize| -> Option<String> {
        let n = n?;
        // Output axis `i` is the operand's axis `i - (rank - r)` when that exists.
        (i + r >= rank).then(|| n[i + r - rank].clone()).flatten()
    };
    let mismatch = || {
        let full = |n: Option<&Names>, r: usize| n.map(|n| n.to_vec()).unwrap_or_else(|| vec![None; r]);
        fail(ErrorKind::AxisNameMismatch { op, lhs: full(a, ra), rhs: full(b, rb) })
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        out.push(match (at(a, ra, i), at(b, rb, i)) {
            (Some(x), Some(y)) if x != y => return mismatch(),
            (x, y) => x.or(y),
        });
    }
    for (i, n) in out.iter().enumerate() {
        if n.is_some() && out[..i].contains(n) {
            return mismatch();
        }
    }
    Ok(normalized(out))
}

/// The names shared by operands that must agree axis for axis (`concat`): the unified names
/// of all of them, as [`broadcast`] unifies two of the same rank.
pub(crate) fn unified<'a>(
    op: &'static str,
    all: impl IntoIterator<Item = (Option<&'a Names>, usize)>,
) -> Result<Option<Names>> {
    let mut acc: Option<Names> = None;
    let mut rank = None;
    for (n, r) in all {
        let r0 = *rank.get_or_insert(r);
        acc = broadcast(op, acc.as_ref(), r0, n, r, r0.max(r))?;
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: &[Option<&str>]) -> Names {
        v.iter().map(|s| s.map(str::to_string)).collect::<Vec<_>>().into()
    }

    #[test]
    fn broadcasting_aligns_names_from_the_right() {
        let a = n(&[Some("batch"), Some("feat")]);
        let b = n(&[Some("feat")]);
        assert_eq!(broadcast("add", Some(&a), 2, Some(&b), 1, 2).unwrap(), Some(a.clone()));
        let c = n(&[Some("batch")]);
        assert!(broadcast("add", Some(&a), 2, Some(&c), 1, 2).is_err());
    }

    #[test]
    fn an_unnamed_axis_takes_the_other_operands_name() {
        let a = n(&[None, Some("feat")]);
        let b = n(&[Some("batch"), None]);
        assert_eq!(broadcast("mul", Some(&a), 2, Some(&b), 2, 2).unwrap(), Some(n(&[Some("batch"), Some("feat")])));
    }

    #[test]
    fn a_name_at_two_positions_is_a_misalignment() {
        let a = n(&[Some("x"), None]);
        let b = n(&[None, Some("x")]);
        assert!(broadcast("add", Some(&a), 2, Some(&b), 2, 2).is_err());
    }

    #[test]
    fn dropping_every_name_leaves_no_names() {
        let a = n(&[Some("x"), None]);
        assert_eq!(without(Some(&a), &[0]), None);
        assert_eq!(inserted(Some(&a), 1), Some(n(&[Some("x"), None, None])));
    }
}
