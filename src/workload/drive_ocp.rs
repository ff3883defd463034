//! The drive's own view (OCP C1h, C3h, drive events) across a restart: the soak-start panic
//! ID and count, the soak-start C3h bucket counters and the drive events seen so far are
//! checkpointed (`TargetState::ocp_at_soak_start`), so a resumed plan still judges "a panic
//! during the plan" and the C3h deltas from the original baseline.
//!
//! [`OcpTracking`] is this part of a target's drive bookkeeping (`workload::drive` holds one
//! in `DriveTracking::ocp`); it knows nothing else of the target.

use serde::{Deserialize, Serialize};

use crate::health::collect::nvme::pages::DrivePages;
use crate::model::events::{DriveEvent, LatencyCounts};
use crate::model::results::DriveSoak;
use crate::nvme::log::ocp_recovery::ErrorRecoveryLog;

/// The OCP side of a target's drive bookkeeping.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OcpTracking {
    /// The drive's OCP C3h static bucket counters at the first C3h read of this run.
    pub latency_start: Option<LatencyCounts>,
    /// The drive's OCP C1h panic ID and count at the first C1h read of the soak (or the
    /// checkpoint's).
    pub panic_start: Option<PanicMark>,
    /// The drive events of earlier runs (from the checkpoint).
    pub events_carried: Vec<DriveEvent>,
    /// The drive events of the soak so far (all runs), as the latest figures carry them.
    pub events: Vec<DriveEvent>,
}

/// The C1h figures a panic changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PanicMark {
    pub panic_id: u64,
    pub panic_count: u8,
}

impl PanicMark {
    pub fn of(r: &ErrorRecoveryLog) -> PanicMark {
        PanicMark {
            panic_id: r.panic_id,
            panic_count: r.panic_count,
        }
    }
}

/// What the checkpoint keeps of the drive's own view for a soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OcpBaseline {
    /// C1h at the first read of the soak; `None`: no C1h page read yet.
    pub panic: Option<PanicMark>,
    /// C3h static bucket counters at the first read of the soak.
    pub latency: Option<LatencyCounts>,
    /// The drive events seen during the soak so far (all runs), oldest first.
    pub events: Vec<DriveEvent>,
}

impl OcpBaseline {
    /// What `tr` holds, for the checkpoint; `None` when there is nothing to keep.
    pub fn of(tr: &OcpTracking) -> Option<OcpBaseline> {
        let b = OcpBaseline {
            panic: tr.panic_start,
            latency: tr.latency_start,
            events: tr.events.clone(),
        };
        (b != OcpBaseline::default()).then_some(b)
    }

    /// Back into `tr` on a resume.
    pub fn restore(self, tr: &mut OcpTracking) {
        tr.panic_start = self.panic;
        tr.latency_start = self.latency;
        tr.events_carried = self.events;
    }
}

/// After `health::collect::nvme::pages::soak_figures` filled `f` from this run's poller: the
/// C3h start and the C1h baseline are the soak's first (kept from the checkpoint on a resume),
/// a C1h that differs from the soak-start one is a panic during the plan even when this run's
/// poller saw no change, and the events of earlier runs come first.
pub(crate) fn update(tr: &mut OcpTracking, f: &mut DriveSoak, pages: &DrivePages) {
    merge(tr, f, pages);
    tr.events = f.drive_events.clone();
}

fn merge(tr: &mut OcpTracking, f: &mut DriveSoak, pages: &DrivePages) {
    if tr.latency_start.is_none() {
        tr.latency_start = f.ocp_latency_latest;
    }
    f.ocp_latency_start = tr.latency_start;
    if let Some(r) = &pages.recovery {
        let now = PanicMark::of(r);
        let start = *tr.panic_start.get_or_insert(now);
        if start != now {
            f.ocp_panic_changed = Some(true);
        }
    }
    if !tr.events_carried.is_empty() {
        let mut all = tr.events_carried.clone();
        for e in std::mem::take(&mut f.drive_events) {
            if !all.contains(&e) {
                all.push(e);
            }
        }
        if f.ocp_panic_changed == Some(false)
            && all
                .iter()
                .any(|e| e.kind == crate::model::events::kind::OCP_PANIC)
        {
            f.ocp_panic_changed = Some(true);
        }
        f.drive_events = all;
    }
}

/// The checkpoint's JSON of [`OcpBaseline`]; one that does not parse is dropped (logged).
pub fn restore_json(tr: &mut OcpTracking, target: &str, v: Option<&serde_json::Value>) {
    let Some(v) = v else { return };
    match serde_json::from_value::<OcpBaseline>(v.clone()) {
        Ok(b) => b.restore(tr),
        Err(e) => tracing::warn!(target_name = %target, error = %e,
            "the checkpoint's OCP baseline does not parse; taking a new one"),
    }
}

/// [`OcpBaseline::of`] as the checkpoint stores it (of a target's `DriveTracking`, or of the
/// [`OcpTracking`] itself).
pub fn baseline_json(tr: &impl AsRef<OcpTracking>) -> Option<serde_json::Value> {
    OcpBaseline::of(tr.as_ref()).and_then(|b| serde_json::to_value(b).ok())
}

impl AsRef<OcpTracking> for OcpTracking {
    fn as_ref(&self) -> &OcpTracking {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::events::kind;
    use crate::nvme::log::ocp_latency::PerOp;

    fn pages(panic_id: u64, panic_count: u8) -> DrivePages {
        DrivePages {
            recovery: Some(ErrorRecoveryLog {
                panic_id,
                panic_count,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn counts(read: u32) -> LatencyCounts {
        let mut c = LatencyCounts::default();
        c[1] = PerOp {
            read,
            write: read + 1,
            deallocate: read + 2,
        };
        c
    }

    /// This run's figures as `soak_figures` leaves them: no change seen by this run's poller.
    fn figures(latency: u32, events: Vec<DriveEvent>) -> DriveSoak {
        DriveSoak {
            ocp_panic_changed: Some(false),
            ocp_latency_latest: Some(counts(latency)),
            drive_events: events,
            ..Default::default()
        }
    }

    fn panic_event(time: f64) -> DriveEvent {
        DriveEvent {
            time,
            kind: kind::OCP_PANIC.into(),
            detail: format!("OCP panic at {time}"),
        }
    }

    /// The baseline goes through the checkpoint's JSON (a `TargetState` round trip) and a
    /// resumed run judges from it: a C1h that moved while the daemon was down is a panic, the
    /// C3h start is the first run's, the first run's events come first.
    #[test]
    fn the_checkpoint_keeps_the_ocp_baseline_across_a_restart() {
        let mut first = OcpTracking::default();
        let mut f = figures(5, vec![panic_event(10.0)]);
        update(&mut first, &mut f, &pages(0x11, 2));
        assert_eq!(
            f.ocp_panic_changed,
            Some(false),
            "the first read is the baseline"
        );
        assert_eq!(f.ocp_latency_start, Some(counts(5)));
        let mut st = crate::model::checkpoint::TargetState::new("ns0", "/dev/nvme0n1");
        st.ocp_at_soak_start = baseline_json(&first);
        let text = serde_json::to_string(&st).expect("json");
        let back: crate::model::checkpoint::TargetState =
            serde_json::from_str(&text).expect("load");
        assert_eq!(back, st);

        let mut resumed = OcpTracking::default();
        restore_json(&mut resumed, "ns0", back.ocp_at_soak_start.as_ref());
        assert_eq!(
            resumed.panic_start,
            Some(PanicMark {
                panic_id: 0x11,
                panic_count: 2
            })
        );
        // Same C1h, new C3h counts, a new event this run.
        let mut f = figures(9, vec![panic_event(20.0)]);
        f.ocp_panic_changed = Some(true);
        update(&mut resumed, &mut f, &pages(0x11, 2));
        assert_eq!(
            f.ocp_latency_start,
            Some(counts(5)),
            "the first run's start"
        );
        assert_eq!(f.ocp_latency_latest, Some(counts(9)));
        assert_eq!(
            f.drive_events.iter().map(|e| e.time).collect::<Vec<_>>(),
            vec![10.0, 20.0]
        );
        // The C1h moved while the daemon was down: this run's poller saw no change.
        let mut quiet = OcpTracking::default();
        restore_json(&mut quiet, "ns0", back.ocp_at_soak_start.as_ref());
        quiet.events_carried.clear();
        let mut f = figures(9, Vec::new());
        update(&mut quiet, &mut f, &pages(0x11, 3));
        assert_eq!(
            f.ocp_panic_changed,
            Some(true),
            "count 2 -> 3 over the restart"
        );
        // An earlier run's panic event alone still counts.
        let mut carried = OcpTracking::default();
        restore_json(&mut carried, "ns0", back.ocp_at_soak_start.as_ref());
        let mut f = figures(9, Vec::new());
        update(&mut carried, &mut f, &pages(0x11, 2));
        assert_eq!(f.ocp_panic_changed, Some(true));
    }

    #[test]
    fn old_checkpoints_load_and_bad_baselines_are_dropped() {
        let mut old = serde_json::to_value(crate::model::checkpoint::TargetState::new(
            "ns0",
            "/dev/nvme0n1",
        ))
        .expect("json");
        let fields = old.as_object_mut().expect("object");
        assert!(fields.remove("ocp_at_soak_start").is_some());
        let st: crate::model::checkpoint::TargetState =
            serde_json::from_value(old).expect("old checkpoint");
        assert_eq!(st.ocp_at_soak_start, None);
        let mut tr = OcpTracking::default();
        restore_json(&mut tr, "ns0", Some(&serde_json::json!({"panic": "nope"})));
        assert_eq!(tr.panic_start, None);
        // Nothing seen: nothing checkpointed; a drive without C1h keeps `None`.
        assert_eq!(baseline_json(&tr), None);
        let mut f = figures(1, Vec::new());
        f.ocp_panic_changed = None;
        update(&mut tr, &mut f, &DrivePages::default());
        assert_eq!(f.ocp_panic_changed, None);
        assert_eq!(tr.panic_start, None);
    }
}
