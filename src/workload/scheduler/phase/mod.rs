//! One file per phase kind. Each implements [`Phase`]: what it publishes before it starts (its
//! resume state, so that no checkpoint sees the phase without it), and how it runs. A new phase
//! kind is a new file with one `impl Phase` and an arm in [`for_spec`].

use std::sync::Arc;
use std::time::Duration;

use crate::model::checkpoint::PreconditionProgress;
use crate::model::results::SweepResult;
use crate::model::spec::PhaseSpec;
use crate::workload::scheduler::{PrecondLive, RunError, Runner, precondition_job};

pub mod precondition;
pub mod progress;
pub mod soak;
pub mod steps;
pub mod sweep;

/// Where the checkpoint says a phase got to, for the phase it names.
#[derive(Debug, Default)]
pub(crate) struct Resume {
    /// Seconds of the phase already run.
    pub done_secs: f64,
    pub precondition: Option<PreconditionProgress>,
    pub sweep: Option<SweepResult>,
}

/// The progress a phase shows in the snapshot (and so in checkpoints) from its start.
#[derive(Debug, Default, Clone)]
pub(crate) struct Published {
    pub precondition: Option<Arc<PrecondLive>>,
    pub sweep: Option<SweepResult>,
}

/// A phase kind.
pub(crate) trait Phase {
    /// Set up from the checkpoint's progress, before the snapshot names the phase; returns what
    /// the snapshot shows.
    fn prepare(&mut self, _r: &mut Runner, _resume: Resume) -> Published {
        Published::default()
    }
    /// Run the phase to its end, a stop, or an error (which stops the target).
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError>;
}

/// The runner of one configured phase.
pub(crate) fn for_spec(spec: &PhaseSpec) -> Box<dyn Phase> {
    match spec {
        PhaseSpec::Precondition {
            passes,
            block_size,
            iodepth,
            workers,
        } => Box::new(precondition::Precondition {
            job: precondition_job(*passes, *block_size, *iodepth, *workers),
            passes: *passes,
            block_size: *block_size,
            live: None,
        }),
        PhaseSpec::Sweep {
            job,
            max_duration,
            point_duration,
            points,
        } => Box::new(sweep::Sweep {
            job: job.clone(),
            max_duration: *max_duration,
            point_duration: *point_duration,
            points: points.clone(),
            resume: None,
        }),
        PhaseSpec::Soak {
            jobs,
            duration,
            rotate,
            steady,
        } => Box::new(soak::Soak {
            jobs: jobs.clone(),
            duration: *duration,
            left: *duration,
            rotate: *rotate,
            steady: steady.clone(),
        }),
        PhaseSpec::Purge { method, timeout } => Box::new(steps::Purge {
            method: *method,
            timeout: *timeout,
        }),
        PhaseSpec::SelfTest { test, timeout } => Box::new(steps::SelfTest {
            test: *test,
            timeout: *timeout,
        }),
    }
}

/// What is left of `d` after `done_secs`.
pub(crate) fn remaining(d: Option<Duration>, done_secs: f64) -> Option<Duration> {
    d.map(|d| d.saturating_sub(Duration::from_secs_f64(done_secs)))
}
