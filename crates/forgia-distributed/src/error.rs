//! The errors of distributed training.

/// What went wrong in distributed training.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// MPI could not be started (or the job was built without it).
    #[error("cannot start the process group: {0}")]
    Init(String),
    /// A collective did not finish in time: another rank died, hangs, or is far behind.
    #[error("{what} did not finish within {seconds:.0} s: another rank has died or hangs")]
    Timeout {
        /// The collective.
        what: &'static str,
        /// The timeout, in seconds.
        seconds: f64,
    },
    /// The communication thread is gone (it stopped after an earlier failure).
    #[error("{what}: the communication thread has stopped")]
    Disconnected {
        /// The collective.
        what: &'static str,
    },
    /// A bad argument or call order, with what is wrong.
    #[error("{0}")]
    InvalidArgument(String),
    /// The ranks disagree (on the model's parameters, a batch size, ...).
    #[error("the ranks disagree: {0}")]
    Mismatch(String),
    /// An error of the tensor library.
    #[error(transparent)]
    Forgia(#[from] forgia::Error),
}

/// `Result` with [`DistError`].
pub type Result<T, E = DistError> = std::result::Result<T, E>;
