//! Mask reductions over packed buffers: `any` / `all` along one block of axes, and the
//! coordinates of the nonzero elements. A mask element is true when it is nonzero (NaN
//! included), the project's mask convention (see `ops/compare.rs`).

/// `out[o, i] = 1` when any (`all == false`) or every (`all == true`) element of line `(o, i)`
/// of `x`, packed as `[outer, red, inner]`, is nonzero; else `0`. An empty line gives `0` for
/// any and `1` for all (PyTorch's identities). `out` has `outer * inner` elements.
pub(crate) fn any_all(x: &[f32], (outer, red, inner): (usize, usize, usize), all: bool, out: &mut [f32]) {
    if out.is_empty() {
        return; // nothing to write (an axis of size zero; the others may be huge)
    }
    for o in 0..outer {
        for i in 0..inner {
            let mut line = (0..red).map(|r| x[(o * red + r) * inner + i] != 0.0);
            let hit = if all { line.all(|t| t) } else { line.any(|t| t) };
            out[o * inner + i] = if hit { 1.0 } else { 0.0 };
        }
    }
}

/// The row-major coordinates of every nonzero element of `x`, packed with `shape`, written as
/// consecutive rows of `shape.len()` values into `out` (which holds exactly one row per nonzero
/// element: the caller counted them).
pub(crate) fn nonzero(x: &[f32], shape: &[usize], out: &mut [i64]) {
    let rank = shape.len();
    for (row, (flat, _)) in x.iter().enumerate().filter(|(_, &v)| v != 0.0).enumerate() {
        let mut rest = flat;
        for a in (0..rank).rev() {
            out[row * rank + a] = (rest % shape[a]) as i64;
            rest /= shape[a];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_all_and_nonzero_follow_torch() {
        // x = [[0, 2, 0], [NaN, 0, 0]]: any over axis 1 -> [1, 1], all over axis 0 -> [0, 0, 0].
        let x = [0.0, 2.0, 0.0, f32::NAN, 0.0, 0.0];
        let mut any = [9.0; 2];
        any_all(&x, (2, 3, 1), false, &mut any);
        assert_eq!(any, [1.0, 1.0]);
        let mut all = [9.0; 3];
        any_all(&x, (1, 2, 3), true, &mut all);
        assert_eq!(all, [0.0, 0.0, 0.0]);
        let mut empty = [9.0; 2];
        any_all(&[], (2, 0, 1), true, &mut empty);
        assert_eq!(empty, [1.0, 1.0]);
        let mut coords = [0i64; 4];
        nonzero(&x, &[2, 3], &mut coords);
        assert_eq!(coords, [0, 1, 1, 0]);
    }
}
