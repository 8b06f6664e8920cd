//! The one error type of the library: an [`Error`] wrapping a `#[non_exhaustive]` [`ErrorKind`]
//! whose variants carry the op name and the shapes involved.

use std::fmt;

pub(crate) mod check;

/// Shorthand for `std::result::Result<T, forgia::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong, with the op name and the shapes involved.
///
/// Bad input from a caller (shapes, axes, indices, files, options) always arrives here as an
/// `Err`; panics are reserved for broken internal invariants.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Two operands whose shapes do not fit together (broadcasting, matmul, seeds, …).
    #[error("{op}: shapes {lhs:?} and {rhs:?} do not match")]
    ShapeMismatch {
        /// The op that checked the shapes.
        op: &'static str,
        /// The first shape.
        lhs: Vec<usize>,
        /// The second shape.
        rhs: Vec<usize>,
    },
    /// An operand of the wrong rank.
    #[error("{op}: expected {expected}, got shape {shape:?}")]
    RankMismatch {
        /// The op.
        op: &'static str,
        /// What rank the op wants, in words ("rank 2", "rank >= 1").
        expected: &'static str,
        /// The shape it got.
        shape: Vec<usize>,
    },
    /// An axis index outside the op's valid range: `-rank..rank` for most ops, `-(rank+1)..=rank`
    /// for ops that insert an axis (`unsqueeze`, `stack`), `-1..=0` for reducing a 0-d tensor.
    #[error("{op}: axis {axis} out of range for rank {rank} (valid axes: {low}..={high})")]
    AxisOutOfRange {
        /// The op.
        op: &'static str,
        /// The axis as given (an unsigned axis past `isize::MAX` reads `isize::MAX`).
        axis: isize,
        /// The rank of the tensor.
        rank: usize,
        /// The lowest valid axis.
        low: isize,
        /// The highest valid axis.
        high: isize,
    },
    /// An axis named that the tensor does not carry.
    #[error("{op}: no axis named {name:?} in {names:?}")]
    UnknownAxisName {
        /// The op.
        op: &'static str,
        /// The name asked for.
        name: String,
        /// The tensor's axis names.
        names: Vec<Option<String>>,
    },
    /// Axis names of two operands that disagree.
    #[error("{op}: axis names {lhs:?} and {rhs:?} do not match")]
    AxisNameMismatch {
        /// The op.
        op: &'static str,
        /// Names of the first operand.
        lhs: Vec<Option<String>>,
        /// Names of the second operand.
        rhs: Vec<Option<String>>,
    },
    /// The same axis given twice.
    #[error("{op}: axis {axis} given more than once")]
    DuplicateAxis {
        /// The op.
        op: &'static str,
        /// The (normalized) axis.
        axis: usize,
    },
    /// A reshape whose element counts differ, or a view that cannot be expressed.
    #[error("{op}: cannot reshape {from:?} into {to:?}")]
    InvalidReshape {
        /// The op.
        op: &'static str,
        /// The source shape.
        from: Vec<usize>,
        /// The requested shape (with `usize::MAX` for an inferred `-1` axis).
        to: Vec<usize>,
    },
    /// A data buffer whose length does not match the shape.
    #[error("{op}: {got} values do not fill shape {shape:?} ({expected} elements)")]
    LengthMismatch {
        /// The op.
        op: &'static str,
        /// The shape.
        shape: Vec<usize>,
        /// Elements the shape holds.
        expected: usize,
        /// Elements supplied.
        got: usize,
    },
    /// An op that needs at least one element got an empty tensor.
    #[error("{op}: empty tensor of shape {shape:?}")]
    EmptyTensor {
        /// The op.
        op: &'static str,
        /// The shape.
        shape: Vec<usize>,
    },
    /// `item()` or a scalar-only op on a tensor with more than one element.
    #[error("{op}: expected one element, got shape {shape:?}")]
    NotScalar {
        /// The op.
        op: &'static str,
        /// The shape.
        shape: Vec<usize>,
    },
    /// An integer index outside its axis.
    #[error("{op}: index {index} out of range for axis of size {size}")]
    IndexOutOfRange {
        /// The op.
        op: &'static str,
        /// The offending index.
        index: i64,
        /// The size of the axis indexed.
        size: usize,
    },
    /// A scalar argument outside its domain (a zero step, a negative eps, …).
    #[error("{op}: invalid {arg}: {reason}")]
    InvalidArgument {
        /// The op.
        op: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A shape whose element count, strides or byte size do not fit in a machine word (the
    /// product of its sizes, counting empty axes as 1, passes `isize::MAX`), or a size
    /// computed from the arguments (a repeat, a padding, an upsampling factor) that overflows.
    #[error("{op}: the size of shape {shape:?} overflows")]
    SizeOverflow {
        /// The op.
        op: &'static str,
        /// The shape (the operand's when the overflowing shape cannot be written down).
        shape: Vec<usize>,
    },
    /// An allocation the machine could not satisfy (a fallible allocation failed).
    #[error("{op}: out of memory allocating {bytes} bytes")]
    OutOfMemory {
        /// The op.
        op: &'static str,
        /// The bytes asked for (`usize::MAX` when even that count overflows).
        bytes: usize,
    },
    /// An op whose work (element visits, multiply-adds) passes
    /// [`MAX_WORK`](crate::MAX_WORK): refused rather than run for hours, typically on a
    /// broadcast view whose logical size is far beyond its storage.
    #[error("{op}: {work} element visits on shape {shape:?} pass the limit of one op call")]
    WorkLimitExceeded {
        /// The op.
        op: &'static str,
        /// The shape whose size decides the work.
        shape: Vec<usize>,
        /// The work asked for.
        work: u128,
    },
    /// `backward` on a tensor that carries no graph (a constant).
    #[error("backward: the tensor has no gradient graph (it is a constant)")]
    NoGradientGraph,
    /// `backward` on an output with more than one element and no seed.
    #[error("backward: output of shape {shape:?} needs an explicit seed (backward_with_grad)")]
    MissingOutputGradient {
        /// The output's shape.
        shape: Vec<usize>,
    },
    /// A second `backward` over a graph whose first pass did not retain it.
    #[error("backward: this graph was already backpropagated (use retain_graph to run it again)")]
    BackwardAlreadyRun,
    /// A pass reached a node whose record was released by an earlier, non-retained pass.
    #[error("backward: the graph through {op} was released by an earlier pass (use retain_graph)")]
    GraphReleased {
        /// The op whose record is gone.
        op: &'static str,
    },
    /// Two passes reached the same interior node at once.
    #[error("backward: another backward pass is running through the same graph")]
    ConcurrentBackward,
    /// A backward record returned a gradient of the wrong shape.
    #[error("{op}: backward returned a gradient of shape {got:?} for operand {operand} of shape {expected:?}")]
    GradientShapeMismatch {
        /// The op whose record misbehaved.
        op: &'static str,
        /// The operand slot.
        operand: usize,
        /// The operand's shape.
        expected: Vec<usize>,
        /// The returned shape.
        got: Vec<usize>,
    },
    /// A backward record panicked (a custom op's backward, a checkpointed block): the pass was
    /// rolled back like any other failure, so the graph is idle and, if retained, runnable.
    #[error("{op}: backward panicked: {message}")]
    BackwardPanicked {
        /// The op whose record panicked.
        op: &'static str,
        /// The panic's message (its payload when that is a string).
        message: String,
    },
    /// A backward record returned no gradient for an operand that needs one.
    #[error("{op}: backward returned no gradient for operand {operand}")]
    MissingBackwardGradient {
        /// The op.
        op: &'static str,
        /// The operand slot.
        operand: usize,
    },
    /// Mutable data access on a tensor that is part of a graph.
    #[error("{op}: mutable access to a tensor with a gradient node (use no_grad, or detach)")]
    MutableDataRequiresNoGrad {
        /// The accessor.
        op: &'static str,
    },
    /// A `create_graph` pass through a record that uses a fused, non-differentiable kernel.
    #[error("{op}: backward of this op is not differentiable (create_graph unsupported)")]
    DoubleBackwardUnsupported {
        /// The op.
        op: &'static str,
    },
    /// Anomaly mode found a NaN or infinity in a gradient.
    #[error("{op}: backward produced a non-finite gradient for operand {operand}")]
    AnomalyDetected {
        /// The op whose record produced it.
        op: &'static str,
        /// The operand slot.
        operand: usize,
    },
    /// A checkpointed block returned a tensor that does not depend on any variable.
    #[error("checkpoint: the block's output is not differentiable")]
    CheckpointOutputNotDifferentiable,
    /// An error from a user-supplied closure (checkpoint block, gradcheck loss, custom op).
    #[error("{context}: {source}")]
    Nested {
        /// Where the nested error surfaced.
        context: &'static str,
        /// The error itself.
        source: Box<Error>,
    },
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A malformed or mismatched checkpoint file.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// The library's error: a boxed [`ErrorKind`] (keeps `Result` one pointer wide).
pub struct Error(Box<ErrorKind>);

impl Error {
    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// Unwraps into the kind.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }

    /// The same error reported by `outer`: an op built from other public ops (`repeat` from
    /// `reshape` and `broadcast_to`, `dot` from `matmul`) names itself, not the op it called,
    /// in the errors of the checks its callees make for it. Engine and file errors keep their
    /// own names.
    pub(crate) fn in_op(mut self, outer: &'static str) -> Error {
        use ErrorKind as K;
        match &mut *self.0 {
            K::ShapeMismatch { op, .. }
            | K::RankMismatch { op, .. }
            | K::AxisOutOfRange { op, .. }
            | K::UnknownAxisName { op, .. }
            | K::AxisNameMismatch { op, .. }
            | K::DuplicateAxis { op, .. }
            | K::InvalidReshape { op, .. }
            | K::LengthMismatch { op, .. }
            | K::EmptyTensor { op, .. }
            | K::NotScalar { op, .. }
            | K::IndexOutOfRange { op, .. }
            | K::InvalidArgument { op, .. }
            | K::SizeOverflow { op, .. }
            | K::OutOfMemory { op, .. }
            | K::WorkLimitExceeded { op, .. } => *op = outer,
            _ => {}
        }
        self
    }
}

/// Runs the body of the composite op `op`, reporting its callees' input errors as `op`'s own
/// ([`Error::in_op`]).
pub(crate) fn within<T>(op: &'static str, body: impl FnOnce() -> Result<T>) -> Result<T> {
    body().map_err(|e| e.in_op(op))
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// Builds an `Err(Error)` from a kind; used by every check in `ops/` and `tensor/`.
pub(crate) fn fail<T>(kind: ErrorKind) -> Result<T> {
    Err(Error::from(kind))
}
