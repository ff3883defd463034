//! The scheduler's side of `model::ocp_phases`: the drive's C3h counts at each phase's
//! start and end, from the drive tracking's latest figures (the health poller's last read).

use super::{Runner, now_unix};
use crate::model::events::LatencyCounts;
use crate::model::ocp_phases;
use crate::model::spec::PhaseSpec;

impl Runner {
    /// The latest C3h reading of the target's drive, and the soak's first one.
    fn ocp_latency_now(&self) -> (Option<LatencyCounts>, Option<LatencyCounts>) {
        self.snapshot.drive(|d| {
            (
                d.figures.as_ref().and_then(|f| f.ocp_latency_latest),
                d.ocp.latency_start,
            )
        })
    }

    /// Phase `index` starts (or resumes).
    pub(super) fn ocp_phase_began(&mut self, index: usize, phase: &PhaseSpec) {
        let (now, _) = self.ocp_latency_now();
        let loops = self.snapshot.view(|v| v.loop_count);
        ocp_phases::begin(
            &mut self.results.ocp_phases,
            index,
            phase.kind(),
            loops,
            now_unix(),
            now,
        );
    }

    /// The running phase's latest reading; `ended`: it ran to its end.
    pub(super) fn ocp_phase_refresh(&mut self, ended: bool) {
        let (now, first) = self.ocp_latency_now();
        ocp_phases::update(
            &mut self.results.ocp_phases,
            now,
            first,
            ended.then(now_unix),
        );
    }
}
