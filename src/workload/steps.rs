//! The qualification steps' self-test wait and the lines that describe a step in
//! `check-config`'s plan and in the journal (their record is `model::steps`).

use std::time::Duration;

use crate::model::spec::PhaseSpec;
use crate::model::units::format_duration;
use crate::nvme::caps::StepCaps;
use crate::nvme::steps::{PurgeMethod, SelfTestKind};

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
