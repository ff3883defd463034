//! The qualification steps' record in the results file (`qualification_steps`: one
//! [`StepOutcome`] per purge or self-test run), the self-test's wait, and the lines that describe
//! a step in `check-config`'s plan and in the journal.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::spec::PhaseSpec;
use crate::model::units::format_duration;
use crate::nvme::caps::StepCaps;
use crate::nvme::log::selftest::SelfTestResult;
use crate::nvme::steps::{PurgeMethod, SelfTestKind};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// A purge completed, or a self-test completed without error.
    Passed,
    /// A self-test found a failure, or a sanitize failed.
    Failed,
    /// The controller has no Device Self-test (OACS bit 4 clear).
    NotSupported,
    /// Not run: the controller cannot do it, or the target is not one it may run on.
    Refused,
    /// Stopped on request (a self-test is aborted; a sanitize goes on in the drive).
    Aborted,
    /// Still running when the wait ran out (a self-test is then aborted).
    TimedOut,
    /// An admin command failed.
    #[default]
    Error,
}

impl StepStatus {
    pub fn name(self) -> &'static str {
        match self {
            StepStatus::Passed => "passed",
            StepStatus::Failed => "failed",
            StepStatus::NotSupported => "not supported",
            StepStatus::Refused => "refused",
            StepStatus::Aborted => "aborted",
            StepStatus::TimedOut => "timed out",
            StepStatus::Error => "error",
        }
    }
}

/// One purge or self-test, as the results file keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    /// Index of the phase in the plan (0-based) and the plan's loop it ran in.
    pub phase_index: usize,
    /// The phase's number as the log and the report give it (1-based; 0 in older files).
    #[serde(default)]
    pub phase: usize,
    #[serde(default)]
    pub loop_count: u64,
    /// `purge` or `self-test`.
    pub kind: String,
    /// The purge method (`format-user-data`, ...) or the self-test (`short`, `extended`).
    pub method: String,
    pub status: StepStatus,
    /// Unix times the step started and ended.
    pub started: f64,
    pub ended: f64,
    /// What happened, in words (the reason for a refusal or an error).
    #[serde(default)]
    pub detail: String,
    /// The controller (`nvme0`) and namespace the commands went to.
    #[serde(default)]
    pub controller: Option<String>,
    #[serde(default)]
    pub nsid: Option<u32>,
    /// A self-test's result descriptor from the Self-test log (06h).
    #[serde(default)]
    pub self_test: Option<SelfTestResult>,
    /// How long the step was allowed to wait, seconds.
    #[serde(default)]
    pub waited_limit_secs: f64,
}

impl StepOutcome {
    /// "self-test short: passed (completed without error)".
    pub fn line(&self) -> String {
        let detail = if self.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.detail)
        };
        format!(
            "{} {}: {}{detail}",
            self.kind,
            self.method,
            self.status.name()
        )
    }
}

/// Whether the results already record a completed purge for this phase of this loop of the
/// plan: a resumed plan never erases the drive twice.
pub fn purge_completed(steps: &[StepOutcome], phase_index: usize, loop_count: u64) -> bool {
    steps.iter().any(|s| {
        s.kind == "purge"
            && s.phase_index == phase_index
            && s.loop_count == loop_count
            && s.status == StepStatus::Passed
    })
}

/// The margin a self-test gets beyond the controller's estimate: a quarter of it, at least
/// 5 minutes.
pub fn self_test_margin(expected: Duration) -> Duration {
    (expected / 4).max(Duration::from_secs(300))
}

/// How long nvsoak waits for a self-test: `timeout` when configured, else the controller's
/// estimate (2 minutes for a short test; EDSTT for an extended one, or 4 hours when the
/// controller gives none) plus [`self_test_margin`].
pub fn self_test_wait(kind: SelfTestKind, timeout: Option<Duration>, caps: &StepCaps) -> Duration {
    if let Some(t) = timeout {
        return t;
    }
    let expected = kind.expected(caps).unwrap_or(Duration::from_secs(4 * 3600));
    expected + self_test_margin(expected)
}

/// The plan line of a step phase for `check-config`, with its time estimate.
pub fn plan_line(p: &PhaseSpec) -> Option<String> {
    Some(match p {
        PhaseSpec::Purge { method, timeout } => {
            let how = match method {
                PurgeMethod::FormatUserData => "Format NVM with a user data erase (SES 1)",
                PurgeMethod::FormatCrypto => "Format NVM with a cryptographic erase (SES 2)",
                PurgeMethod::SanitizeBlock => "Sanitize, block erase",
                PurgeMethod::SanitizeCrypto => "Sanitize, crypto erase",
                PurgeMethod::SanitizeOverwrite => "Sanitize, overwrite (one pass)",
            };
            let scope = if method.is_sanitize() {
                "the whole NVM subsystem (refused when the controller has other namespaces)"
            } else {
                "the namespace (refused when Identify's FNA says it reaches others and there are)"
            };
            format!(
                "purge: {how} of {scope}, checked against Identify Controller first; seconds to minutes on most drives, waits at most {}; destroys all data (needs allow_destroy), never re-run once completed",
                format_duration(*timeout)
            )
        }
        PhaseSpec::SelfTest { test, timeout } => {
            let est = match (test, timeout) {
                (_, Some(t)) => format!("waits at most {}", format_duration(*t)),
                (SelfTestKind::Short, None) => {
                    let e = Duration::from_secs(120);
                    format!(
                        "at most 2m per the spec, waits at most {}",
                        format_duration(e + self_test_margin(e))
                    )
                }
                (SelfTestKind::Extended, None) => "the controller's estimate (EDSTT, read at the start) plus a quarter of it (at least 5m)".to_string(),
            };
            format!(
                "self-test: a {} device self-test (admin 14h) of the namespace, result from the Self-test log (06h); {est}; aborted on stop; \"not supported\" when OACS bit 4 is clear",
                test.name()
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completed_purge_is_found_for_its_phase_and_loop_only() {
        let rec = |phase_index, loop_count, kind: &str, status| StepOutcome {
            phase_index,
            loop_count,
            kind: kind.into(),
            status,
            ..Default::default()
        };
        let steps = vec![
            rec(0, 0, "purge", StepStatus::Passed),
            rec(2, 0, "purge", StepStatus::Error),
            rec(3, 0, "self-test", StepStatus::Passed),
        ];
        assert!(purge_completed(&steps, 0, 0));
        assert!(!purge_completed(&steps, 0, 1), "the next loop purges again");
        assert!(
            !purge_completed(&steps, 2, 0),
            "a failed purge is run again"
        );
        assert!(!purge_completed(&steps, 3, 0), "a self-test is not a purge");
        assert!(!purge_completed(&[], 0, 0));
    }

    #[test]
    fn outcome_round_trips_and_old_records_load() {
        let o = StepOutcome {
            phase_index: 2,
            phase: 3,
            loop_count: 1,
            kind: "self-test".into(),
            method: "extended".into(),
            status: StepStatus::Failed,
            started: 10.0,
            ended: 20.0,
            detail: "completed with one or more failed segments".into(),
            controller: Some("nvme3".into()),
            nsid: Some(4),
            self_test: Some(SelfTestResult {
                code: 2,
                result: 7,
                segment: Some(3),
                failing_lba: Some(99),
                ..Default::default()
            }),
            waited_limit_secs: 4500.0,
        };
        let j = serde_json::to_string(&o).expect("json");
        assert!(j.contains("\"status\":\"failed\""), "{j}");
        let back: StepOutcome = serde_json::from_str(&j).expect("parse");
        assert_eq!(back, o);
        assert_eq!(
            o.line(),
            "self-test extended: failed (completed with one or more failed segments)"
        );
        // A record with only the first fields loads.
        let old: StepOutcome = serde_json::from_str(
            r#"{"phase_index":0,"kind":"purge","method":"format-user-data","status":"not_supported","started":1,"ended":2}"#,
        )
        .expect("old");
        assert_eq!(old.status, StepStatus::NotSupported);
        assert_eq!(old.controller, None);
    }

    #[test]
    fn self_test_waits() {
        let caps = StepCaps {
            edstt_minutes: 60,
            ..Default::default()
        };
        assert_eq!(
            self_test_wait(SelfTestKind::Short, None, &caps),
            Duration::from_secs(120 + 300)
        );
        assert_eq!(
            self_test_wait(SelfTestKind::Extended, None, &caps),
            Duration::from_secs(3600 + 900)
        );
        assert_eq!(
            self_test_wait(SelfTestKind::Extended, None, &StepCaps::default()),
            Duration::from_secs(5 * 3600)
        );
        assert_eq!(
            self_test_wait(SelfTestKind::Extended, Some(Duration::from_secs(7)), &caps),
            Duration::from_secs(7)
        );
    }
}
