//! Why a target's plan ends early: the one error type of the scheduler, from a segment's stop
//! conditions and its workers up through the phases to `Runner::run`, which logs it and shows
//! its text as the target's `stop_reason`.

use std::time::Duration;

use thiserror::Error;

use crate::model::steps::StepStatus;
use crate::model::units::format_duration;
use crate::nvme::NvmeError;
use crate::nvme::claimed::ClaimedError;
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
    #[error("purge {}: {source}", status.name())]
    Purge {
        status: StepStatus,
        source: PurgeError,
    },
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

/// Why a purge was refused or failed. Its `Display` text is the step's recorded detail.
#[derive(Debug, Error)]
pub enum PurgeError {
    /// The claimed descriptor's namespace or its controller could not be found or opened.
    #[error(transparent)]
    Controller(#[from] ClaimedError),
    /// An admin command (Identify, Format NVM, Sanitize, a log page) failed.
    #[error(transparent)]
    Nvme(#[from] NvmeError),
    /// The controller does not offer this method (the reason from its capabilities).
    #[error("{method} refused: {why}")]
    Unsupported { method: &'static str, why: String },
    /// The method would erase namespaces the target does not own.
    #[error(
        "{method} would also erase {} on {controller} (a sanitize acts on the whole subsystem; FNA {fna:#04x}); not purging namespaces nvsoak was not given",
        others.join(", ")
    )]
    OtherNamespaces {
        method: &'static str,
        others: Vec<String>,
        controller: String,
        fna: u8,
    },
    /// The drive reported the erase failed (the reason from its status log).
    #[error("{0}")]
    Drive(String),
    /// A sanitize had not finished when the wait ran out.
    #[error(
        "the sanitize was still running at {progress_pct:.0}% after {}",
        format_duration(*waited)
    )]
    StillRunning { progress_pct: f64, waited: Duration },
}
