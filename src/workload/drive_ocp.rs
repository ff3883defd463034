//! The drive's own view (OCP C1h, C3h, drive events) across a restart: the soak-start panic
//! ID and count, the soak-start C3h bucket counters and the drive events seen so far are
//! checkpointed (`TargetState::ocp_at_soak_start`), so a resumed plan still judges "a panic
//! during the plan" and the C3h deltas from the original baseline.

use serde::{Deserialize, Serialize};

use crate::health::collect::nvme::pages::DrivePages;
use crate::model::events::{DriveEvent, LatencyCounts};
use crate::model::results::DriveSoak;
use crate::nvme::log::ocp_recovery::ErrorRecoveryLog;
use crate::workload::drive::DriveTracking;

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
    pub fn of(tr: &DriveTracking) -> Option<OcpBaseline> {
        let events = tr
            .figures
            .as_ref()
            .map(|f| f.drive_events.clone())
            .unwrap_or_default();
        let b = OcpBaseline {
            panic: tr.ocp_panic_start,
            latency: tr.ocp_latency_start,
            events,
        };
        (b != OcpBaseline::default()).then_some(b)
    }

    /// Back into `tr` on a resume.
    pub fn restore(self, tr: &mut DriveTracking) {
        tr.ocp_panic_start = self.panic;
        tr.ocp_latency_start = self.latency;
        tr.ocp_events_carried = self.events;
    }
}

/// After `health::collect::nvme::pages::soak_figures` filled `f` from this run's poller: the
/// C3h start and the C1h baseline are the soak's first (kept from the checkpoint on a resume),
/// a C1h that differs from the soak-start one is a panic during the plan even when this run's
/// poller saw no change, and the events of earlier runs come first.
pub(crate) fn update(tr: &mut DriveTracking, f: &mut DriveSoak, pages: &DrivePages) {
    if tr.ocp_latency_start.is_none() {
        tr.ocp_latency_start = f.ocp_latency_latest;
    }
    f.ocp_latency_start = tr.ocp_latency_start;
    if let Some(r) = &pages.recovery {
        let now = PanicMark::of(r);
        let start = *tr.ocp_panic_start.get_or_insert(now);
        if start != now {
            f.ocp_panic_changed = Some(true);
        }
    }
    if !tr.ocp_events_carried.is_empty() {
        let mut all = tr.ocp_events_carried.clone();
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
pub fn restore_json(tr: &mut DriveTracking, target: &str, v: Option<&serde_json::Value>) {
    let Some(v) = v else { return };
    match serde_json::from_value::<OcpBaseline>(v.clone()) {
        Ok(b) => b.restore(tr),
        Err(e) => tracing::warn!(target_name = %target, error = %e,
            "the checkpoint's OCP baseline does not parse; taking a new one"),
    }
}

/// [`OcpBaseline::of`] as the checkpoint stores it.
pub fn baseline_json(tr: &DriveTracking) -> Option<serde_json::Value> {
    OcpBaseline::of(tr).and_then(|b| serde_json::to_value(b).ok())
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
        let mut first = DriveTracking::default();
        let mut f = figures(5, vec![panic_event(10.0)]);
        update(&mut first, &mut f, &pages(0x11, 2));
        assert_eq!(
            f.ocp_panic_changed,
            Some(false),
            "the first read is the baseline"
        );
        assert_eq!(f.ocp_latency_start, Some(counts(5)));
        first.figures = Some(f);
        let mut st = crate::model::checkpoint::TargetState::new("ns0", "/dev/nvme0n1");
        st.ocp_at_soak_start = baseline_json(&first);
        let text = serde_json::to_string(&st).expect("json");
        let back: crate::model::checkpoint::TargetState =
            serde_json::from_str(&text).expect("load");
        assert_eq!(back, st);

        let mut resumed = DriveTracking::default();
        restore_json(&mut resumed, "ns0", back.ocp_at_soak_start.as_ref());
        assert_eq!(
            resumed.ocp_panic_start,
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
        let mut quiet = DriveTracking::default();
        restore_json(&mut quiet, "ns0", back.ocp_at_soak_start.as_ref());
        quiet.ocp_events_carried.clear();
        let mut f = figures(9, Vec::new());
        update(&mut quiet, &mut f, &pages(0x11, 3));
        assert_eq!(
            f.ocp_panic_changed,
            Some(true),
            "count 2 -> 3 over the restart"
        );
        // An earlier run's panic event alone still counts.
        let mut carried = DriveTracking::default();
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
        let mut tr = DriveTracking::default();
        restore_json(&mut tr, "ns0", Some(&serde_json::json!({"panic": "nope"})));
        assert_eq!(tr.ocp_panic_start, None);
        // Nothing seen: nothing checkpointed; a drive without C1h keeps `None`.
        assert_eq!(baseline_json(&tr), None);
        let mut f = figures(1, Vec::new());
        f.ocp_panic_changed = None;
        update(&mut tr, &mut f, &DrivePages::default());
        assert_eq!(f.ocp_panic_changed, None);
        assert_eq!(tr.ocp_panic_start, None);
    }
}
