//! What the NVMe collector keeps of a drive's own pages beyond SMART ([`DrivePages`]): whether
//! the drive has each of OCP C1h and C3h and the telemetry header 08h, their latest values,
//! the Set Features C5h outcome and the drive events they raised. Polled by `ocp_pages`.

use std::collections::BTreeMap;

use crate::model::events::{DriveEvent, kind};
use crate::nvme::log::ocp_latency::LatencyMonitorLog;
use crate::nvme::log::ocp_recovery::ErrorRecoveryLog;
use crate::nvme::log::telemetry::TelemetryHeader;

/// The `log` label values of these pages (`nvsoak_health_poll_errors_total`,
/// `nvsoak_health_log_supported`).
pub mod page {
    pub const OCP_RECOVERY: &str = "ocp_error_recovery";
    pub const OCP_LATENCY: &str = "ocp_latency_monitor";
    pub const OCP_LATENCY_FEATURE: &str = "ocp_latency_monitor_feature";
    pub const TELEMETRY: &str = "telemetry_ctrl";
}

/// Whether a drive has a page, learnt once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Support {
    #[default]
    Unknown,
    Absent,
    Present,
}

/// At most this many events are kept per drive (the counts keep counting).
pub const MAX_EVENTS: usize = 64;

/// The state of these pages for one controller.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DrivePages {
    pub recovery_support: Support,
    pub recovery: Option<ErrorRecoveryLog>,
    pub latency_support: Support,
    pub latency: Option<LatencyMonitorLog>,
    pub telemetry_support: Support,
    pub telemetry: Option<TelemetryHeader>,
    /// nvsoak's Set Features C5h: `None` not asked (config off or not an OCP drive yet),
    /// `Some(true)` the drive took it, `Some(false)` it refused.
    pub latency_monitor_set: Option<bool>,
    /// The newest [`MAX_EVENTS`] events, oldest first.
    pub events: Vec<DriveEvent>,
    /// Events by kind since the poller started on this drive.
    pub event_counts: BTreeMap<String, u64>,
    /// The time of the latest event of each kind.
    pub last_event: BTreeMap<String, f64>,
}

impl DrivePages {
    pub(super) fn event(&mut self, time: f64, kind: &str, detail: String, device: &str) {
        tracing::warn!(device, kind, "health: {device}: drive event: {detail}");
        *self.event_counts.entry(kind.to_string()).or_insert(0) += 1;
        self.last_event.insert(kind.to_string(), time);
        self.events.push(DriveEvent {
            time,
            kind: kind.to_string(),
            detail,
        });
        if self.events.len() > MAX_EVENTS {
            let extra = self.events.len() - MAX_EVENTS;
            self.events.drain(..extra);
        }
    }

    /// The events at or after `since` (Unix time), oldest first.
    pub fn events_since(&self, since: f64) -> Vec<DriveEvent> {
        self.events
            .iter()
            .filter(|e| e.time >= since)
            .cloned()
            .collect()
    }

    /// Whether an event of `kind` happened at or after `since`: `None` when the page that
    /// reports it was never read on this drive (not supported, or not known yet).
    pub fn changed_since(&self, kind: &str, since: f64) -> Option<bool> {
        let read = match kind {
            kind::OCP_PANIC => self.recovery.is_some(),
            kind::TELEMETRY_GENERATION => self.telemetry.is_some(),
            _ => false,
        };
        read.then(|| self.last_event.get(kind).is_some_and(|t| *t >= since))
    }
}

/// The soak-wide figures of these pages for a target on drive `p` whose soak runs since `since`
/// (Unix time): whether a panic or a telemetry capture happened, the events, and the C3h
/// counters now (the caller keeps the first it saw as the start).
pub fn soak_figures(f: &mut crate::model::results::DriveSoak, p: &DrivePages, since: f64) {
    f.ocp_panic_changed = p.changed_since(kind::OCP_PANIC, since);
    f.telemetry_generation_changed = p.changed_since(kind::TELEMETRY_GENERATION, since);
    f.drive_events = p.events_since(since);
    f.ocp_latency_latest = p.latency.as_ref().map(|l| l.statics.counters);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_bounded_and_counted() {
        let mut p = DrivePages::default();
        for i in 0..(MAX_EVENTS + 5) {
            p.event(i as f64, kind::OCP_PANIC, format!("e{i}"), "nvme0");
        }
        assert_eq!(p.events.len(), MAX_EVENTS);
        assert_eq!(p.events[0].detail, "e5", "the oldest go first");
        assert_eq!(
            p.event_counts.get(kind::OCP_PANIC),
            Some(&(MAX_EVENTS as u64 + 5))
        );
    }
}
