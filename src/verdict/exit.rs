//! The exit status of `nvsoak run --exit-when-done`, from the targets' verdicts, so rack
//! automation can act on it:
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | PASS: every target finished its plan, and every gate that applies to it was evaluated and passed |
//! | 1 | nvsoak itself failed (bad config, a target that could not open, ...) |
//! | 2 | FAIL: at least one target failed a gate (even if it stopped before the end) |
//! | 3 | INCOMPLETE: no gate failed, but a target stopped before the end of its plan (an error, a vanished device, SIGINT or SIGTERM) or a gate that applies was not evaluated |

use crate::model::verdict::{PlanState, Verdict, VerdictStatus};

/// Every target finished and passed.
pub const EXIT_PASS: u8 = 0;
/// nvsoak could not run (what `main` returns for any error).
pub const EXIT_ERROR: u8 = 1;
/// A target failed a gate.
pub const EXIT_FAIL: u8 = 2;
/// A target could not finish its plan, and none failed a gate.
pub const EXIT_INCOMPLETE: u8 = 3;

/// What a run ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Not asked to judge (stopped by a signal without `--exit-when-done`: a daemon stopped by
    /// its service manager).
    Stopped,
    Pass,
    /// Each failed target with its failed gates: `disk0: io_errors: 12 errors (at most 0)`.
    Fail(Vec<String>),
    /// Each target that did not finish, with why.
    Incomplete(Vec<String>),
}

impl RunOutcome {
    pub fn code(&self) -> u8 {
        match self {
            RunOutcome::Stopped | RunOutcome::Pass => EXIT_PASS,
            RunOutcome::Fail(_) => EXIT_FAIL,
            RunOutcome::Incomplete(_) => EXIT_INCOMPLETE,
        }
    }

    /// The message for stderr, `None` for a pass.
    pub fn message(&self) -> Option<String> {
        match self {
            RunOutcome::Stopped | RunOutcome::Pass => None,
            RunOutcome::Fail(v) => Some(format!(
                "--exit-when-done: FAIL: {} failed qualification ({}); exit {EXIT_FAIL}",
                count(v.len()),
                v.join("; ")
            )),
            RunOutcome::Incomplete(v) => Some(format!(
                "--exit-when-done: INCOMPLETE: {} not judged PASS ({}); exit {EXIT_INCOMPLETE}",
                count(v.len()),
                v.join("; ")
            )),
        }
    }
}

fn count(n: usize) -> String {
    if n == 1 {
        "1 target".into()
    } else {
        format!("{n} targets")
    }
}

/// Judge a finished run: `targets` are each target's name, its verdict (from its results file,
/// `None` when it has none) and, when it stopped before the end (an error, a signal), why. Any
/// failed gate is a FAIL; else a target that stopped, has no final verdict or has a gate not
/// evaluated makes it INCOMPLETE (each such gate named); else PASS.
pub fn outcome(targets: &[(String, Option<Verdict>, Option<String>)]) -> RunOutcome {
    let failed: Vec<String> = targets
        .iter()
        .filter_map(|(name, v, _)| {
            let v = v.as_ref().filter(|v| v.status() == VerdictStatus::Fail)?;
            Some(format!("{name}: {}", v.failed_summary().join(", ")))
        })
        .collect();
    if !failed.is_empty() {
        return RunOutcome::Fail(failed);
    }
    let incomplete: Vec<String> = targets
        .iter()
        .filter_map(|(name, v, stopped)| match (stopped, v) {
            (Some(why), _) => Some(format!("{name}: {why}")),
            (None, Some(v)) if v.plan == PlanState::Finished => {
                let missing = v.not_evaluated_summary();
                (!missing.is_empty()).then(|| format!("{name}: {}", missing.join(", ")))
            }
            (None, Some(v)) => Some(format!(
                "{name}: the plan did not finish ({})",
                v.stop_reason.as_deref().unwrap_or("stopped")
            )),
            (None, None) => Some(format!("{name}: no verdict recorded")),
        })
        .collect();
    if incomplete.is_empty() {
        RunOutcome::Pass
    } else {
        RunOutcome::Incomplete(incomplete)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Gate, GateResult, GateState};
    use super::*;

    fn verdict(passed: bool, plan: PlanState) -> Verdict {
        Verdict {
            passed,
            plan,
            gates: vec![GateResult {
                gate: Gate::IoErrors,
                state: if passed {
                    GateState::Pass
                } else {
                    GateState::Fail
                },
                measured: "12 errors".into(),
                limit: "at most 0".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn every_target_finished_and_passed_is_exit_0() {
        let o = outcome(&[
            ("a".into(), Some(verdict(true, PlanState::Finished)), None),
            ("b".into(), Some(verdict(true, PlanState::Finished)), None),
        ]);
        assert_eq!(o, RunOutcome::Pass);
        assert_eq!(o.code(), 0);
        assert_eq!(o.message(), None);
    }

    #[test]
    fn a_failed_gate_is_exit_2_and_names_target_and_gate() {
        let o = outcome(&[
            ("a".into(), Some(verdict(true, PlanState::Finished)), None),
            (
                "b".into(),
                Some(verdict(false, PlanState::Stopped)),
                Some("max_errors = 20 reached".into()),
            ),
        ]);
        assert_eq!(o.code(), EXIT_FAIL);
        let m = o.message().expect("a message");
        assert!(m.contains("b: io_errors: 12 errors (at most 0)"), "{m}");
        assert!(!m.contains("a:"), "{m}");
    }

    #[test]
    fn a_stop_without_a_failed_gate_is_exit_3() {
        let o = outcome(&[
            ("a".into(), Some(verdict(true, PlanState::Finished)), None),
            (
                "b".into(),
                Some(verdict(true, PlanState::Stopped)),
                Some("worker failed".into()),
            ),
            ("c".into(), None, None),
        ]);
        assert_eq!(o.code(), EXIT_INCOMPLETE);
        let m = o.message().expect("a message");
        assert!(
            m.contains("b: worker failed") && m.contains("c: no verdict"),
            "{m}"
        );
    }
}
