//! Checkpoint save metric families, from [`crate::state::SaveStatsSnapshot`] at scrape time.

use prometheus::proto::MetricFamily;

use super::{Family, push};
use crate::state::SaveStatsSnapshot;

pub fn families(s: &SaveStatsSnapshot) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let mut saves = Family::counter(
        "nvsoak_checkpoint_saves_total",
        "Checkpoint saves that completed (written, fsynced and renamed into place).",
    );
    saves.add(&[], s.saves as f64);
    push(&mut out, saves);
    let mut failures = Family::counter(
        "nvsoak_checkpoint_save_failures_total",
        "Checkpoint saves that failed (the journal says why); the previous checkpoint stays in place and the next interval tries again.",
    );
    failures.add(&[], s.failures as f64);
    push(&mut out, failures);
    let mut skipped = Family::counter(
        "nvsoak_checkpoint_skipped_ticks_total",
        "Checkpoint intervals skipped because the previous save was still running.",
    );
    skipped.add(&[], s.skipped_ticks as f64);
    push(&mut out, skipped);
    let mut busy = Family::gauge(
        "nvsoak_checkpoint_save_in_progress",
        "1 while a checkpoint save runs (in the background), else 0.",
    );
    busy.add(&[], if s.in_flight { 1.0 } else { 0.0 });
    push(&mut out, busy);
    if let Some(t) = s.last_success_unix {
        let mut last = Family::gauge(
            "nvsoak_checkpoint_last_save_timestamp_seconds",
            "Unix time the last successful checkpoint save completed (absent until the first).",
        );
        last.add(&[], t);
        push(&mut out, last);
    }
    if let Some(d) = s.last_duration_secs {
        let mut dur = Family::gauge(
            "nvsoak_checkpoint_save_duration_seconds",
            "How long the last checkpoint save took, successful or not (generation maps of verified targets included).",
        );
        dur.add(&[], d);
        push(&mut out, dur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_snapshot() {
        let names = |f: &[MetricFamily]| -> Vec<String> {
            f.iter().map(|m| m.name().to_string()).collect()
        };
        let none = families(&SaveStatsSnapshot::default());
        assert!(!names(&none).contains(&"nvsoak_checkpoint_last_save_timestamp_seconds".into()));
        let s = SaveStatsSnapshot {
            saves: 3,
            failures: 2,
            skipped_ticks: 5,
            last_success_unix: Some(1.7e9),
            last_duration_secs: Some(0.25),
            in_flight: true,
        };
        let text = crate::metrics::encode_text(&families(&s)).expect("encodes");
        for want in [
            "nvsoak_checkpoint_saves_total 3",
            "nvsoak_checkpoint_save_failures_total 2",
            "nvsoak_checkpoint_skipped_ticks_total 5",
            "nvsoak_checkpoint_save_in_progress 1",
            "nvsoak_checkpoint_last_save_timestamp_seconds 1700000000",
            "nvsoak_checkpoint_save_duration_seconds 0.25",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
