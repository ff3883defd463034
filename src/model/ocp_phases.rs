//! The drive's own latency-outlier counts (OCP Latency Monitor log C3h, static buckets) per
//! phase of the plan: the latest C3h reading when each phase starts and when it ends, kept in
//! the results file (`TargetResults::ocp_phases`), so the report compares the phases. A
//! resumed phase keeps the start its first run recorded (the results file is reloaded on a
//! resume), so its deltas span the restart.

use serde::{Deserialize, Serialize};

use crate::model::events::LatencyCounts;
use crate::nvme::log::ocp_latency::PerOp;

/// One phase run's C3h counts at its two ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OcpPhaseCounts {
    /// Index into the target's phase list (0-based), its kind, and the plan loop it ran in.
    pub phase_index: usize,
    /// The phase's number as the log and the report give it (1-based; 0 in older files).
    pub phase: usize,
    pub kind: String,
    pub loop_count: u64,
    /// Unix times the phase started (its first run) and ended; `None` while it runs.
    pub started: f64,
    pub ended: Option<f64>,
    /// The drive's C3h static bucket counters at the start and at the end (or latest).
    pub start: Option<LatencyCounts>,
    pub end: Option<LatencyCounts>,
}

impl OcpPhaseCounts {
    /// Outliers counted during the phase per bucket; `None` without both ends or when a
    /// counter went backwards (the drive reset its log).
    pub fn delta(&self) -> Option<LatencyCounts> {
        let (a, b) = (self.start?, self.end?);
        let mut d = LatencyCounts::default();
        for i in 0..d.len() {
            d[i] = PerOp {
                read: b[i].read.checked_sub(a[i].read)?,
                write: b[i].write.checked_sub(a[i].write)?,
                deallocate: b[i].deallocate.checked_sub(a[i].deallocate)?,
            };
        }
        Some(d)
    }
}

/// A phase starts with C3h reading `counts` (the latest, if any). A phase the list already
/// has unended for the same index and loop is a resumed one: its first start stays.
pub fn begin(
    list: &mut Vec<OcpPhaseCounts>,
    phase_index: usize,
    kind: &str,
    loop_count: u64,
    now: f64,
    counts: Option<LatencyCounts>,
) {
    if let Some(p) = list
        .last_mut()
        .filter(|p| p.phase_index == phase_index && p.loop_count == loop_count && p.ended.is_none())
    {
        if p.start.is_none() {
            p.start = counts;
        }
        return;
    }
    list.push(OcpPhaseCounts {
        phase_index,
        phase: phase_index + 1,
        kind: kind.to_string(),
        loop_count,
        started: now,
        ended: None,
        start: counts,
        end: None,
    });
}

/// The running phase's latest reading (`ended`: `Some` when it ended). A phase that started
/// before the drive's first C3h read takes `first` (the soak's first reading) as its start
/// when it is the first phase recorded.
pub fn update(
    list: &mut [OcpPhaseCounts],
    counts: Option<LatencyCounts>,
    first: Option<LatencyCounts>,
    ended: Option<f64>,
) {
    let only = list.len() == 1;
    let Some(p) = list.last_mut().filter(|p| p.ended.is_none()) else {
        return;
    };
    if p.start.is_none() && only {
        p.start = first;
    }
    if counts.is_some() {
        p.end = counts;
    }
    p.ended = ended;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters with every field distinct, `base` apart per step.
    fn counts(base: u32) -> LatencyCounts {
        let mut c = LatencyCounts::default();
        for (i, b) in c.iter_mut().enumerate() {
            let i = i as u32;
            *b = PerOp {
                read: base + 10 * i + 1,
                write: base + 10 * i + 2,
                deallocate: base + 10 * i + 3,
            };
        }
        c
    }

    #[test]
    fn phases_record_their_start_and_end_and_the_delta() {
        let mut l = Vec::new();
        begin(&mut l, 0, "precondition", 0, 10.0, Some(counts(100)));
        let mut mid = counts(100);
        mid[2].write += 7;
        mid[0].read += 1;
        update(&mut l, Some(mid), None, None);
        assert_eq!(l[0].ended, None, "still running");
        update(&mut l, None, None, Some(20.0));
        begin(&mut l, 1, "soak", 0, 20.0, Some(mid));
        let mut end = mid;
        end[3].deallocate += 4;
        update(&mut l, Some(end), None, Some(30.0));
        assert_eq!(l.len(), 2);
        let d0 = l[0].delta().expect("delta");
        assert_eq!((d0[0].read, d0[2].write, d0[3].deallocate), (1, 7, 0));
        let d1 = l[1].delta().expect("delta");
        assert_eq!((d1[0].read, d1[2].write, d1[3].deallocate), (0, 0, 4));
        assert_eq!((l[1].kind.as_str(), l[1].ended), ("soak", Some(30.0)));
    }

    #[test]
    fn a_resumed_phase_keeps_its_first_start_and_a_reset_gives_no_delta() {
        let mut l = Vec::new();
        begin(&mut l, 1, "soak", 0, 10.0, Some(counts(50)));
        update(&mut l, Some(counts(60)), None, None);
        // The results file goes through JSON (a restart reloads it), then the phase resumes.
        let text = serde_json::to_string(&l).expect("json");
        let mut l: Vec<OcpPhaseCounts> = serde_json::from_str(&text).expect("load");
        begin(&mut l, 1, "soak", 0, 99.0, Some(counts(70)));
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].started, l[0].start), (10.0, Some(counts(50))));
        update(&mut l, Some(counts(80)), None, Some(120.0));
        assert_eq!(l[0].delta().map(|d| d[1].write), Some(30));
        // The same phase in the next loop is a new record.
        begin(&mut l, 1, "soak", 1, 130.0, Some(counts(80)));
        assert_eq!(l.len(), 2);
        // The drive's counters went backwards: no delta, not a negative or wrapped one.
        update(&mut l, Some(counts(0)), None, Some(140.0));
        assert_eq!(l[1].delta(), None);
    }

    #[test]
    fn the_first_phase_before_any_read_takes_the_soaks_first_reading() {
        let mut l = Vec::new();
        begin(&mut l, 0, "soak", 0, 1.0, None);
        update(&mut l, Some(counts(9)), Some(counts(5)), None);
        assert_eq!(l[0].start, Some(counts(5)));
        assert_eq!(l[0].delta().map(|d| d[0].read), Some(4));
        // A later phase with no start reading has no delta (its start is not known).
        update(&mut l, None, None, Some(2.0));
        begin(&mut l, 1, "soak", 0, 2.0, None);
        update(&mut l, Some(counts(20)), Some(counts(5)), Some(3.0));
        assert_eq!(l[1].delta(), None);
        // A drive without C3h: nothing at either end.
        let mut none = Vec::new();
        begin(&mut none, 0, "soak", 0, 1.0, None);
        update(&mut none, None, None, Some(2.0));
        assert_eq!(none[0].delta(), None);
        let old: crate::model::results::TargetResults =
            serde_json::from_str(r#"{"version":2,"host":"h","target":"t","path":"/p","device":null,"sweeps":[],"steady":[],"soak":null}"#)
                .expect("an older results file loads");
        assert!(old.ocp_phases.is_empty());
    }
}
