//! The health families' builder ([`F`]) and what every drive protocol shares in it: the
//! "as of the latest poll" help suffix, the poll error and poll duration families. The NVMe
//! (`metrics::nvme`), ATA (`metrics::ata`), OCP page (`metrics::ocp`) and PCIe
//! (`metrics::pcie`) families all fill one [`F`]; `metrics::health` drives them.

use std::collections::BTreeMap;

use super::{Family, push};
use prometheus::proto::MetricFamily;

const POLLED: &str = "As of the latest background health poll.";

const POLL_ERRORS_HELP: &str = "Failed admin commands by device and log page (NVMe: open, identify, identify_ns, smart, error, fw_slot, ocp, temp_threshold, ocp_error_recovery, ocp_latency_monitor, ocp_latency_monitor_feature, telemetry_ctrl; ATA: open, identify, smart, smart_status, devstat; both: timeout, a poll not answered within its deadline); a failed page keeps its last values.";

const DEVICE_POLL_DURATION_HELP: &str = "How long this drive's latest poll took; while a poll runs past its deadline (half the poll interval, at most 10 s), how long it has been running.";

fn help(text: &str) -> String {
    format!("{text} {POLLED}")
}

/// One family per metric name, filled device by device (NVMe and ATA alike); a family's help
/// text is the one given when its name is first used.
#[derive(Default)]
pub(super) struct F {
    fams: Vec<(String, Family)>,
}

impl F {
    fn idx(&mut self, name: &str, help_text: &str, counter: bool) -> usize {
        if let Some(i) = self.fams.iter().position(|(n, _)| n == name) {
            return i;
        }
        let h = help(help_text);
        let fam = if counter {
            Family::counter(name, &h)
        } else {
            Family::gauge(name, &h)
        };
        self.fams.push((name.to_string(), fam));
        self.fams.len() - 1
    }
    pub(super) fn gauge(&mut self, name: &str, help_text: &str, labels: &[(&str, &str)], v: f64) {
        let i = self.idx(name, help_text, false);
        self.fams[i].1.add(labels, v);
    }
    pub(super) fn counter(&mut self, name: &str, help_text: &str, labels: &[(&str, &str)], v: f64) {
        let i = self.idx(name, help_text, true);
        self.fams[i].1.add(labels, v);
    }
    /// A gauge only when `v` is a finite value.
    pub(super) fn opt(
        &mut self,
        name: &str,
        help_text: &str,
        labels: &[(&str, &str)],
        v: Option<f64>,
    ) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.gauge(name, help_text, labels, v);
        }
    }
    /// The families, in the order their names were first used.
    pub(super) fn finish(self) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        for (_, fam) in self.fams {
            push(&mut out, fam);
        }
        out
    }
}

/// The poll's own figures for one drive of any protocol: failed commands by page (`pages`,
/// each a series even at 0) and how long the latest poll took.
pub(super) fn poll(
    f: &mut F,
    dev: &str,
    pages: &[&str],
    errors: &BTreeMap<&'static str, u64>,
    duration: Option<f64>,
) {
    for p in pages {
        f.counter(
            "nvsoak_health_poll_errors_total",
            POLL_ERRORS_HELP,
            &[("device", dev), ("log", p)],
            errors.get(p).copied().unwrap_or(0) as f64,
        );
    }
    if let Some(secs) = duration {
        f.gauge(
            "nvsoak_health_device_poll_duration_seconds",
            DEVICE_POLL_DURATION_HELP,
            &[("device", dev)],
            secs,
        );
    }
}

/// `{proto}_volatile_write_cache_present` and, when there is one, `..._enabled`: whether an
/// acknowledged write is on media only after a flush. `present_src`, `enabled_src`: where each
/// comes from, for the help text.
pub(super) fn write_cache(
    f: &mut F,
    proto: &str,
    dev: &str,
    wc: crate::model::drive::WriteCache,
    present_src: &str,
    enabled_src: &str,
) {
    let l = [("device", dev)];
    f.gauge(
        &format!("{proto}_volatile_write_cache_present"),
        &format!("1 if the drive has a volatile write cache ({present_src}): acknowledged writes are durable only after a flush while it is enabled."),
        &l,
        if wc.present() { 1.0 } else { 0.0 },
    );
    if wc.present() {
        f.gauge(
            &format!("{proto}_volatile_write_cache_enabled"),
            &format!("1 if the volatile write cache is enabled ({enabled_src}), 0 if it is off (writes go to media before they are acknowledged)."),
            &l,
            if wc.enabled() { 1.0 } else { 0.0 },
        );
    }
}
