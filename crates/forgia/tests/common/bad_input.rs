//! Helpers of the bad-input tables (`tests/bad_input*.rs`): deterministic operands, the error
//! kinds a row may expect, and the loop that checks a table.

use forgia::{ErrorKind, Indices, Tensor};

/// A constant of `shape` with small positive values (`0.1 … 0.7`, repeating).
pub fn t(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i % 7) as f32 * 0.1 + 0.1).collect(), shape).unwrap()
}

/// Index data of `shape`.
pub fn idx(v: &[i64], shape: &[usize]) -> Indices {
    Indices::new(v.to_vec(), shape).unwrap()
}

/// The error kind a row expects.
pub type Check = fn(&ErrorKind) -> bool;

/// Shapes that do not fit together (a rank mismatch counts).
pub fn shape(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::ShapeMismatch { .. } | ErrorKind::RankMismatch { .. })
}
/// An axis outside the rank.
pub fn axis(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::AxisOutOfRange { .. })
}
/// An index outside its axis.
pub fn index(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::IndexOutOfRange { .. })
}
/// An argument outside its domain.
pub fn arg(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::InvalidArgument { .. })
}
/// An op that needs at least one element.
pub fn empty(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::EmptyTensor { .. })
}
/// A reshape to a different element count.
pub fn reshape(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::InvalidReshape { .. })
}
/// A size too large to hold or to compute.
pub fn overflow(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::SizeOverflow { .. } | ErrorKind::OutOfMemory { .. } | ErrorKind::WorkLimitExceeded { .. })
}

/// The op name an error carries, for the kinds these tables produce.
pub fn op_of(k: &ErrorKind) -> &'static str {
    match k {
        ErrorKind::ShapeMismatch { op, .. }
        | ErrorKind::RankMismatch { op, .. }
        | ErrorKind::AxisOutOfRange { op, .. }
        | ErrorKind::InvalidArgument { op, .. }
        | ErrorKind::IndexOutOfRange { op, .. }
        | ErrorKind::EmptyTensor { op, .. }
        | ErrorKind::InvalidReshape { op, .. }
        | ErrorKind::SizeOverflow { op, .. }
        | ErrorKind::OutOfMemory { op, .. }
        | ErrorKind::WorkLimitExceeded { op, .. } => op,
        other => panic!("unexpected kind {other:?}"),
    }
}

/// Checks a table of `(name, result, expected kind)` rows: every row must be an error of its
/// kind with a message; all failures are reported together.
pub fn check_rows(rows: Vec<(&str, forgia::Result<Tensor>, Check)>) {
    let mut failures = vec![];
    for (name, result, check) in rows {
        match result {
            Ok(v) => failures.push(format!("{name}: accepted, gave shape {:?}", v.shape())),
            Err(e) if !check(e.kind()) => failures.push(format!("{name}: wrong kind: {e:?}")),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
