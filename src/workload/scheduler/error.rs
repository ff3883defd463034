//! Why a target's plan ends early: the one error type of the scheduler, from a segment's stop
//! conditions and its workers up through the phases to `Runner::run`, which logs it and shows
//! its text as the target's `stop_reason`.

use thiserror::Error;

use crate::workload::worker::WorkerError;

/// What stops a target. Its `Display` text is the user-visible stop reason.
#[derive(Debug, Error)]
pub enum RunError {
    /// `max_errors` reached.
    #[error("stopped after {errors} I/O errors (max_errors = {max})")]
    TooManyErrors { errors: u64, max: u64 },
    /// A verification mismatch with `verify_fatal` set.
    #[error(
        "data verification failed ({mismatches} mismatches; see the log); verify_fatal stops the target"
    )]
    VerifyFatal { mismatches: u64 },
    /// A worker's engine failed while running (the worker's own message).
    #[error("{0}")]
    WorkerFatal(String),
    /// A worker could not start.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    #[error("worker thread panicked")]
    WorkerPanicked,
    /// A qualification step (purge) refused or failed: the plan does not go on without it.
    #[error("{0}")]
    Step(String),
    /// The operating system refused a worker thread.
    #[error("spawning worker thread failed: {0}")]
    Spawn(std::io::Error),
}

impl RunError {
    /// Whether a segment's stop condition or a worker's failure while running ended it (the
    /// segment ran), rather than its workers never starting.
    pub(crate) fn is_stop_condition(&self) -> bool {
        matches!(
            self,
            RunError::TooManyErrors { .. }
                | RunError::VerifyFatal { .. }
                | RunError::WorkerFatal(_)
                | RunError::WorkerPanicked
                | RunError::Worker(_)
        )
    }
}
