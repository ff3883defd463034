//! The drive's own view beyond SMART (`health::collect::nvme::ocp_pages`): OCP Error Recovery
//! (C1h) and Latency Monitor (C3h) families, the telemetry controller-initiated header (08h), which of
//! these pages each drive has, and the drive events they raised. Every value reflects the
//! latest background poll, into the health families' builder. To stay within the per-drive
//! cardinality budget (README), C3h's thresholds, timestamps and measured latencies are not
//! exported; they are in the health snapshot and the bucket counts in the results file.

use super::family::F;
use crate::health::DeviceHealth;
use crate::health::collect::nvme::pages::{DrivePages, Support, page};
use crate::nvme::log::ocp_latency::BucketSet;

/// Every family of these pages for one controller.
pub(super) fn device(f: &mut F, d: &DeviceHealth) {
    let dev = d.name.as_str();
    let p = &d.pages;
    supported(f, dev, p);
    if let Some(r) = &p.recovery {
        let id = format!("{:#x}", r.panic_id);
        f.gauge(
            "nvme_ocp_panic_info",
            "The drive's current panic ID as a label (0x0: none), value 1 (OCP error recovery log C1h, bytes 4..11).",
            &[("device", dev), ("panic_id", &id)],
            1.0,
        );
        f.counter(
            "nvme_ocp_panics_total",
            "Panics the drive has counted (OCP error recovery log C1h, byte 31; OCP 2.5 drives, 0 on earlier ones).",
            &[("device", dev)],
            f64::from(r.panic_count),
        );
        f.gauge(
            "nvme_ocp_panic_reset_wait_seconds",
            "Time the drive asks the host to wait after a panic reset (OCP error recovery log C1h, bytes 0..1, ms / 1000).",
            &[("device", dev)],
            f64::from(r.panic_reset_wait_ms) / 1000.0,
        );
    }
    if let Some(l) = &p.latency {
        f.gauge(
            "nvme_ocp_latency_monitor_enabled",
            "1 if the drive's OCP latency monitor is enabled (OCP latency monitor log C3h, byte 0 bit 0).",
            &[("device", dev)],
            f64::from(u8::from(l.enabled())),
        );
        buckets(f, dev, "active", &l.active);
        buckets(f, dev, "static", &l.statics);
    }
    if let Some(t) = &p.telemetry {
        f.gauge(
            "nvme_telemetry_ctrl_data_generation",
            "The controller-initiated telemetry data generation number; it changes each time the drive captures new data (telemetry controller-initiated log 08h header, byte 383).",
            &[("device", dev)],
            f64::from(t.ctrl_generation),
        );
        f.gauge(
            "nvme_telemetry_ctrl_data_available",
            "1 if the drive holds controller-initiated telemetry data (telemetry controller-initiated log 08h header, byte 382).",
            &[("device", dev)],
            f64::from(t.ctrl_data_available),
        );
    }
    for (kind, n) in &p.event_counts {
        f.counter(
            "nvsoak_drive_events_total",
            "Drive events nvsoak saw since it started polling the drive: kind ocp_panic (C1h panic ID or count changed), telemetry_generation (08h controller-initiated data generation changed).",
            &[("device", dev), ("kind", kind)],
            *n as f64,
        );
    }
}

fn supported(f: &mut F, dev: &str, p: &DrivePages) {
    for (log, s) in [
        (page::OCP_RECOVERY, p.recovery_support),
        (page::OCP_LATENCY, p.latency_support),
        (page::TELEMETRY, p.telemetry_support),
    ] {
        let v = match s {
            Support::Unknown => continue,
            Support::Absent => 0.0,
            Support::Present => 1.0,
        };
        f.gauge(
            "nvsoak_health_log_supported",
            "1 if the drive has this optional log page, 0 if it refused it or lacks its GUID (then it is not asked for again); no series until known (log ocp_error_recovery C1h, ocp_latency_monitor C3h: OCP drives only; telemetry_ctrl 08h: Identify Controller LPA bit 3).",
            &[("device", dev), ("log", log)],
            v,
        );
    }
}

fn buckets(f: &mut F, dev: &str, set: &str, s: &BucketSet) {
    for i in 0..s.counters.len() {
        let b = i.to_string();
        for (op, n) in s.counters[i].each() {
            f.gauge(
                "nvme_ocp_latency_bucket_commands",
                "Commands whose latency fell in this bucket, by set (active: restarts with the bucket timer; static: since the feature was enabled) and op (OCP latency monitor log C3h, bytes 32..95 and 240..303). A gauge: the drive restarts the counts.",
                &[("device", dev), ("set", set), ("bucket", &b), ("op", op)],
                f64::from(n),
            );
        }
    }
}
