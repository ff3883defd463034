//! The run's outcome at its end: each target's verdict, and where a target stopped by a signal
//! was in its plan.

use super::app::TargetList;
use crate::config::Settings;
use crate::verdict::exit::RunOutcome;

/// Where a target was when it stopped: `phase 3 of 3 (soak), 40 s into it`, with the
/// precondition's share written or the sweep's points measured.
fn where_it_was(v: &crate::workload::scheduler::TargetView, phases: usize) -> String {
    if phases > 0 && v.phase_index >= phases {
        return "after its last phase".into();
    }
    let mut s = format!(
        "phase {} of {phases} ({}), {:.0} s into it",
        v.phase_index + 1,
        v.phase,
        v.phase_elapsed_secs()
    );
    if let Some(p) = &v.precondition {
        let prog = p.progress();
        let total: u64 =
            prog.stripes.iter().map(|s| s.len).sum::<u64>() * u64::from(prog.passes.max(1));
        let done: u64 = prog.stripes.iter().map(|s| s.done_bytes).sum();
        if total > 0 {
            s.push_str(&format!(
                ", {:.1} % written",
                100.0 * done as f64 / total as f64
            ));
        }
    }
    if let Some(sw) = &v.sweep_progress {
        s.push_str(&format!(", {} sweep points measured", sw.points.len()));
    }
    s
}

/// The run's outcome from each target's verdict (see [`crate::verdict::exit`]); each verdict
/// is logged. `signal` names the signal that stopped the run before its end, if one did: every
/// target that had not finished is then INCOMPLETE, with where it was.
pub(super) fn judge(
    targets: &TargetList,
    settings: &Settings,
    stopped_on_error: &[String],
    signal: Option<&str>,
) -> RunOutcome {
    let list: Vec<_> = targets
        .get()
        .iter()
        .map(|s| {
            let name = s.fixed.name.clone();
            let phases = settings
                .targets
                .iter()
                .find(|t| t.name == name)
                .map_or(0, |t| t.phases.len());
            let (verdict, at) = s.view(|v| (v.verdict.clone(), where_it_was(v, phases)));
            if let Some(v) = &verdict {
                let serial = s.drive(|d| d.identity.as_ref().map(|i| i.serial.clone()));
                tracing::info!(target_name = %name, serial = serial.as_deref().unwrap_or(""),
                    verdict = v.headline(), gates = %v.tally(),
                    failed = %v.failed_summary().join("; "),
                    not_evaluated = %v.not_evaluated_summary().join("; "), "verdict");
            }
            let prefix = format!("{name}: ");
            let stopped = stopped_on_error
                .iter()
                .find_map(|e| e.strip_prefix(&prefix).map(str::to_string))
                .or_else(|| {
                    let finished = verdict
                        .as_ref()
                        .is_some_and(|v| v.plan == crate::model::verdict::PlanState::Finished);
                    signal
                        .filter(|_| !finished)
                        .map(|sig| format!("stopped by {sig} before the end of its plan, at {at}"))
                });
            (name, verdict, stopped)
        })
        .collect();
    crate::verdict::exit::outcome(&list)
}
