//! Drive health families: `nvme_*` (what the drive says) and the derived `nvsoak_*` endurance,
//! accounting and thermal figures. Every value reflects the latest background poll, not the
//! scrape; `nvsoak_health_poll_timestamp_seconds` says when that was.

use prometheus::proto::MetricFamily;

use super::{Family, push};
use crate::health::collect::Derived;
use crate::health::collect::nvme::{DeviceHealth, page};
use crate::health::{HealthSnapshot, derive};
use crate::nvme::log::smart::{CRITICAL_WARNING_BITS, SmartLog};

const POLLED: &str = "As of the latest background health poll.";

pub(super) const POLL_ERRORS_HELP: &str = "Failed admin commands by device and log page (NVMe: open, identify, identify_ns, smart, error, fw_slot, ocp, temp_threshold, ocp_error_recovery, ocp_latency_monitor, ocp_latency_monitor_feature, telemetry_ctrl; ATA: open, identify, smart, smart_status, devstat; both: timeout, a poll not answered within its deadline); a failed page keeps its last values.";

pub(super) const DEVICE_POLL_DURATION_HELP: &str = "How long this drive's latest poll took; while a poll runs past its deadline (half the poll interval, at most 10 s), how long it has been running.";

/// The derivations count wear-out in days; the metric is in base units.
fn days_to_seconds(days: f64) -> f64 {
    days * 86_400.0
}

fn help(text: &str) -> String {
    format!("{text} {POLLED}")
}

/// One family per metric name, filled device by device (NVMe and ATA alike).
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
}

fn c(k: u16) -> f64 {
    SmartLog::kelvin_to_celsius(k)
}

/// Every health family for the snapshot.
pub fn families(snap: &HealthSnapshot) -> Vec<MetricFamily> {
    let mut f = F { fams: Vec::new() };
    if let Some(ts) = snap.poll_timestamp_seconds {
        f.gauge(
            "nvsoak_health_poll_timestamp_seconds",
            "Unix time at which the latest background health poll finished; every nvme_ and derived health metric reflects that poll, not the scrape.",
            &[],
            ts,
        );
    }
    if let Some(d) = snap.poll_duration_seconds {
        f.gauge(
            "nvsoak_health_poll_duration_seconds",
            "How long the latest background health poll of all devices took.",
            &[],
            d,
        );
    }
    for d in &snap.devices {
        device(&mut f, d, snap.pcie.controller(&d.name));
    }
    super::pcie::families(&mut f, snap);
    for a in &snap.ata {
        super::ata::disk(&mut f, a);
    }
    let mut out = Vec::new();
    for (_, fam) in f.fams {
        push(&mut out, fam);
    }
    out
}

fn device(f: &mut F, d: &DeviceHealth, topo: Option<&crate::pcie::CtrlTopology>) {
    let dev = d.name.as_str();
    let t = topo.cloned().unwrap_or_default();
    let l = [("device", dev)];
    f.gauge(
        "nvme_info",
        "NVMe controller identity, value 1 (Identify Controller SN bytes 4..23, MN 24..63, FR 64..71; pci_address, slot, subsystem and card from sysfs, empty when unknown or not on a card).",
        &[
            ("device", dev),
            ("serial", &d.serial),
            ("model", &d.model),
            ("firmware", &d.firmware),
            ("pci_address", &t.address),
            ("slot", t.slot.as_deref().unwrap_or("")),
            ("subsystem", t.subsystem.as_deref().unwrap_or("")),
            ("card", t.card.as_deref().unwrap_or("")),
        ],
        1.0,
    );
    f.gauge(
        "nvme_up",
        "1 if the latest poll read the SMART log (02h), 0 if it failed or the controller is gone from /sys/class/nvme.",
        &l,
        if d.up && d.present { 1.0 } else { 0.0 },
    );
    for p in [
        page::OPEN,
        page::IDENTIFY,
        page::IDENTIFY_NS,
        page::SMART,
        page::ERROR,
        page::FW_SLOT,
        page::OCP,
        page::TEMP_THRESHOLD,
        page::TIMEOUT,
    ] {
        f.counter(
            "nvsoak_health_poll_errors_total",
            POLL_ERRORS_HELP,
            &[("device", dev), ("log", p)],
            d.poll_errors.get(p).copied().unwrap_or(0) as f64,
        );
    }
    if let Some(secs) = d.poll_duration_seconds {
        f.gauge(
            "nvsoak_health_device_poll_duration_seconds",
            DEVICE_POLL_DURATION_HELP,
            &l,
            secs,
        );
    }
    if let Some(id) = &d.id {
        if id.wctemp > 0 {
            f.gauge(
                "nvme_warning_temperature_threshold_celsius",
                "Warning composite temperature threshold WCTEMP (Identify Controller bytes 266..267, kelvin - 273.15).",
                &l,
                c(id.wctemp),
            );
        }
        if id.cctemp > 0 {
            f.gauge(
                "nvme_critical_temperature_threshold_celsius",
                "Critical composite temperature threshold CCTEMP (Identify Controller bytes 268..269, kelvin - 273.15).",
                &l,
                c(id.cctemp),
            );
        }
        if id.tnvmcap > 0 {
            f.gauge(
                "nvme_total_capacity_bytes",
                "Total NVM capacity TNVMCAP (Identify Controller bytes 280..295).",
                &l,
                id.tnvmcap as f64,
            );
        }
    }
    for n in &d.namespaces {
        let Some(id) = &n.id else { continue };
        let nl = [("device", dev), ("namespace", n.name.as_str())];
        f.gauge(
            "nvme_namespace_size_bytes",
            "Namespace size NSZE x LBA size (Identify Namespace bytes 0..7 and the LBA format FLBAS selects).",
            &nl,
            id.size_bytes() as f64,
        );
        f.gauge(
            "nvme_namespace_lba_size_bytes",
            "Logical block size of the namespace's current LBA format (Identify Namespace FLBAS byte 26, LBAF LBADS).",
            &nl,
            id.lba_size() as f64,
        );
    }
    if let Some(th) = &d.thresholds {
        for (dir, k) in [("over", th.over_kelvin), ("under", th.under_kelvin)] {
            if k > 0 {
                f.gauge(
                    "nvme_composite_temperature_threshold_celsius",
                    "Temperature Threshold feature (Get Features FID 04h, TMPSEL 0, THSEL over/under), kelvin - 273.15.",
                    &[("device", dev), ("direction", dir)],
                    c(k),
                );
            }
        }
    }
    if let Some(s) = &d.smart {
        smart(f, dev, s);
    }
    for (status, n) in &d.derived.error_log_status {
        f.counter(
            "nvme_error_log_status_total",
            "Error Information log (01h) entries seen since nvsoak started, each counted once by its Error Count (bytes 0..7), by status (SCT << 8 | SC, status field bytes 12..13 >> 1). A poll reads the newest ELPE+1 entries, at most 64.",
            &[("device", dev), ("status", status.as_str())],
            *n as f64,
        );
    }
    if let Some(fw) = &d.fw_slot {
        for (i, rev) in fw.slots.iter().enumerate() {
            if rev.is_empty() {
                continue;
            }
            let slot = (i + 1).to_string();
            f.gauge(
                "nvme_firmware_slot_info",
                "Firmware revision per slot (Firmware Slot log 03h, bytes 8 + 8 x (slot - 1)), value 1.",
                &[("device", dev), ("slot", &slot), ("revision", rev)],
                1.0,
            );
        }
        f.gauge(
            "nvme_firmware_active_slot",
            "Active firmware slot (Firmware Slot log 03h, AFI byte 0 bits 2:0).",
            &l,
            f64::from(fw.active_slot()),
        );
    }
    if let Some(o) = &d.ocp {
        ocp(f, dev, o);
    }
    super::ocp::device(f, d);
    derived(f, dev, &d.derived, d.smart.is_some());
}

fn smart(f: &mut F, dev: &str, s: &SmartLog) {
    let l = [("device", dev)];
    f.gauge(
        "nvme_critical_warning",
        "Critical warning byte, raw (SMART log 02h, byte 0).",
        &l,
        f64::from(s.critical_warning),
    );
    for (bit, cond) in CRITICAL_WARNING_BITS {
        f.gauge(
            "nvme_critical_warning_active",
            "One critical warning bit (SMART log 02h, byte 0): spare bit 0, temperature 1, reliability 2, read_only 3, volatile_backup 4, pmr_read_only 5.",
            &[("device", dev), ("condition", cond)],
            f64::from((s.critical_warning >> bit) & 1),
        );
    }
    f.gauge(
        "nvme_endurance_group_critical_warning",
        "Endurance group critical warning summary (SMART log 02h, byte 6).",
        &l,
        f64::from(s.endurance_grp_critical_warning_summary),
    );
    f.gauge(
        "nvme_temperature_celsius",
        "Composite temperature (SMART log 02h, bytes 1..2, kelvin - 273.15).",
        &l,
        c(s.temperature),
    );
    for (i, k) in s.sensors() {
        let sensor = i.to_string();
        f.gauge(
            "nvme_temperature_sensor_celsius",
            "Temperature sensor 1..8, implemented ones only (SMART log 02h, bytes 200..215, kelvin - 273.15).",
            &[("device", dev), ("sensor", &sensor)],
            c(k),
        );
    }
    f.gauge(
        "nvme_available_spare_ratio",
        "Available spare, 0..1 (SMART log 02h, byte 3, percent / 100).",
        &l,
        f64::from(s.avail_spare) / 100.0,
    );
    f.gauge(
        "nvme_available_spare_threshold_ratio",
        "Available spare threshold, 0..1 (SMART log 02h, byte 4, percent / 100).",
        &l,
        f64::from(s.spare_thresh) / 100.0,
    );
    f.gauge(
        "nvme_percentage_used_ratio",
        "Percentage used as a ratio; may exceed 1 (SMART log 02h, byte 5, percent / 100, not clamped).",
        &l,
        f64::from(s.percent_used) / 100.0,
    );
    smart_counters(f, dev, s);
}

/// The SMART log's counters (bytes 32..231), in base units.
fn smart_counters(f: &mut F, dev: &str, s: &SmartLog) {
    let l = [("device", dev)];
    let counters: [(&str, &str, f64); 10] = [
        (
            "nvme_data_read_bytes_total",
            "Data read by the host (SMART log 02h, bytes 32..47, data units x 512000).",
            s.data_units_read as f64 * derive::DATA_UNIT_BYTES,
        ),
        (
            "nvme_data_written_bytes_total",
            "Data written by the host (SMART log 02h, bytes 48..63, data units x 512000).",
            s.data_units_written as f64 * derive::DATA_UNIT_BYTES,
        ),
        (
            "nvme_host_read_commands_total",
            "Host read commands completed (SMART log 02h, bytes 64..79).",
            s.host_read_commands as f64,
        ),
        (
            "nvme_host_write_commands_total",
            "Host write commands completed (SMART log 02h, bytes 80..95).",
            s.host_write_commands as f64,
        ),
        (
            "nvme_controller_busy_seconds_total",
            "Controller busy time (SMART log 02h, bytes 96..111, minutes x 60).",
            s.controller_busy_time as f64 * 60.0,
        ),
        (
            "nvme_power_cycles_total",
            "Power cycles (SMART log 02h, bytes 112..127).",
            s.power_cycles as f64,
        ),
        (
            "nvme_power_on_seconds_total",
            "Power-on time (SMART log 02h, bytes 128..143, hours x 3600).",
            s.power_on_hours as f64 * 3600.0,
        ),
        (
            "nvme_unsafe_shutdowns_total",
            "Unsafe shutdowns (SMART log 02h, bytes 144..159).",
            s.unsafe_shutdowns as f64,
        ),
        (
            "nvme_media_errors_total",
            "Media and data integrity errors (SMART log 02h, bytes 160..175).",
            s.media_errors as f64,
        ),
        (
            "nvme_error_log_entries_total",
            "Error information log entries over the controller's life (SMART log 02h, bytes 176..191).",
            s.num_err_log_entries as f64,
        ),
    ];
    for (name, h, v) in counters {
        f.counter(name, h, &l, v);
    }
    f.counter(
        "nvme_warning_temperature_seconds_total",
        "Time at or above the warning composite temperature threshold (SMART log 02h, bytes 192..195, minutes x 60).",
        &l,
        f64::from(s.warning_temp_time) * 60.0,
    );
    f.counter(
        "nvme_critical_temperature_seconds_total",
        "Time at or above the critical composite temperature threshold (SMART log 02h, bytes 196..199, minutes x 60).",
        &l,
        f64::from(s.critical_comp_time) * 60.0,
    );
    for (level, tr, secs) in [
        ("1", s.thm_temp1_trans_count, s.thm_temp1_total_time),
        ("2", s.thm_temp2_trans_count, s.thm_temp2_total_time),
    ] {
        f.counter(
            "nvme_thermal_transitions_total",
            "Transitions into thermal management temperature level 1 or 2 (SMART log 02h, bytes 216..219 and 220..223).",
            &[("device", dev), ("level", level)],
            f64::from(tr),
        );
        f.counter(
            "nvme_thermal_management_seconds_total",
            "Time in thermal management temperature level 1 or 2 (SMART log 02h, bytes 224..227 and 228..231, seconds).",
            &[("device", dev), ("level", level)],
            f64::from(secs),
        );
    }
}

fn ocp(f: &mut F, dev: &str, o: &crate::nvme::log::ocp::OcpSmartLog) {
    let l = [("device", dev)];
    let counters: [(&str, &str, f64); 8] = [
        (
            "nvme_ocp_physical_media_written_bytes_total",
            "Physical media units written, bytes (OCP SMART extended log C0h, bytes 0..15).",
            o.physical_media_units_written as f64,
        ),
        (
            "nvme_ocp_physical_media_read_bytes_total",
            "Physical media units read, bytes (OCP SMART extended log C0h, bytes 16..31).",
            o.physical_media_units_read as f64,
        ),
        (
            "nvme_ocp_xor_recovery_total",
            "XOR recovery count (OCP SMART extended log C0h, bytes 48..55).",
            o.xor_recovery_count as f64,
        ),
        (
            "nvme_ocp_uncorrectable_read_errors_total",
            "Uncorrectable read error count (OCP SMART extended log C0h, bytes 56..63).",
            o.uncorrectable_read_error_count as f64,
        ),
        (
            "nvme_ocp_soft_ecc_errors_total",
            "Soft ECC error count (OCP SMART extended log C0h, bytes 64..71).",
            o.soft_ecc_error_count as f64,
        ),
        (
            "nvme_ocp_thermal_throttling_events_total",
            "Thermal throttling event count (OCP SMART extended log C0h, byte 96).",
            f64::from(o.thermal_throttling_event_count),
        ),
        (
            "nvme_ocp_pcie_correctable_errors_total",
            "PCIe correctable error count (OCP SMART extended log C0h, bytes 104..111).",
            o.pcie_correctable_error_count as f64,
        ),
        (
            "nvme_ocp_incomplete_shutdowns_total",
            "Incomplete shutdowns (OCP SMART extended log C0h, bytes 112..115).",
            f64::from(o.incomplete_shutdowns),
        ),
    ];
    for (name, h, v) in counters {
        f.counter(name, h, &l, v);
    }
    let gauges: [(&str, &str, f64); 6] = [
        (
            "nvme_ocp_bad_user_nand_blocks",
            "Bad user NAND blocks, raw count (OCP SMART extended log C0h, bytes 32..37).",
            o.bad_user_nand_blocks_raw as f64,
        ),
        (
            "nvme_ocp_bad_system_nand_blocks",
            "Bad system NAND blocks, raw count (OCP SMART extended log C0h, bytes 40..45).",
            o.bad_system_nand_blocks_raw as f64,
        ),
        (
            "nvme_ocp_thermal_throttling_status",
            "Current thermal throttling status: 0 none, 1 first level, 2 second level, 3 shutdown (OCP SMART extended log C0h, byte 97).",
            f64::from(o.thermal_throttling_status),
        ),
        (
            "nvme_ocp_endurance_estimate_bytes",
            "Endurance estimate, bytes (OCP SMART extended log C0h, bytes 176..191).",
            o.endurance_estimate as f64,
        ),
        (
            "nvme_ocp_system_data_used_ratio",
            "System data percent used as a ratio (OCP SMART extended log C0h, byte 80, percent / 100).",
            f64::from(o.system_data_percent_used) / 100.0,
        ),
        (
            "nvme_ocp_free_blocks_ratio",
            "Percent free blocks as a ratio (OCP SMART extended log C0h, byte 120, percent / 100).",
            f64::from(o.percent_free_blocks) / 100.0,
        ),
    ];
    for (name, h, v) in gauges {
        f.gauge(name, h, &l, v);
    }
}

/// The derived `nvsoak_*` figures, the same names for NVMe and ATA drives; `polled` says the
/// drive's health page was read at least once (the throttling state means something).
pub(super) fn derived(f: &mut F, dev: &str, x: &Derived, polled: bool) {
    let l = [("device", dev)];
    if let Some(r) = &x.rated {
        let source = match r.source {
            derive::RatingSource::Config => "config",
            derive::RatingSource::Table => "table",
        };
        f.gauge(
            "nvsoak_rated_info",
            "Where the rated endurance comes from (source config or table; series from config/drives.toml), value 1.",
            &[
                ("device", dev),
                ("source", source),
                ("series", r.series.as_deref().unwrap_or("")),
            ],
            1.0,
        );
        if let Some(b) = r.bytes {
            f.gauge(
                "nvsoak_rated_endurance_bytes",
                "Rated bytes written over the warranty (config [[health.device]], else config/drives.toml; DWPD x capacity x 365 x years when no TBW).",
                &l,
                b,
            );
        }
        if let Some(w) = r.dwpd {
            f.gauge(
                "nvsoak_rated_dwpd",
                "Rated drive writes per day (config [[health.device]], else config/drives.toml).",
                &l,
                w,
            );
        }
        if let Some(y) = r.warranty_years {
            f.gauge(
                "nvsoak_rated_warranty_seconds",
                "Warranty period the rated endurance refers to (years x 365 days).",
                &l,
                y * derive::YEAR_SECONDS,
            );
        }
    }
    let opt = |f: &mut F, name: &str, h: &str, labels: &[(&str, &str)], v: Option<f64>| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            f.gauge(name, h, labels, v);
        }
    };
    opt(
        f,
        "nvsoak_endurance_consumed_ratio",
        "Lifetime host bytes written (NVMe: SMART 02h bytes 48..63 x 512000; ATA: nvsoak_drive_lifetime_written_bytes) / rated endurance bytes.",
        &l,
        x.endurance_consumed_ratio,
    );
    opt(
        f,
        "nvsoak_observed_dwpd",
        "Observed drive writes per day from lifetime bytes written (NVMe: SMART 02h bytes 48..63; ATA: nvsoak_drive_lifetime_written_bytes): window soak = since the poller started, 24h = the last 24 hours.",
        &[("device", dev), ("window", "soak")],
        x.observed_dwpd_soak,
    );
    opt(
        f,
        "nvsoak_observed_dwpd",
        "",
        &[("device", dev), ("window", "24h")],
        x.observed_dwpd_24h,
    );
    opt(
        f,
        "nvsoak_projected_wearout_seconds",
        "Projected time until wear-out, in seconds: basis tbw = rated bytes at the last 24 h write rate; basis percentage_used = 100 % at the slope of percentage used (NVMe: SMART 02h byte 5; ATA: Device Statistics 07h) since the poller started.",
        &[("device", dev), ("basis", "tbw")],
        x.projected_wearout_days_tbw.map(days_to_seconds),
    );
    opt(
        f,
        "nvsoak_projected_wearout_seconds",
        "",
        &[("device", dev), ("basis", "percentage_used")],
        x.projected_wearout_days_percentage_used
            .map(days_to_seconds),
    );
    opt(
        f,
        "nvsoak_write_amplification_ratio",
        "Lifetime write amplification: flash bytes written / host bytes written (NVMe: OCP C0h bytes 0..15 / SMART 02h bytes 48..63 x 512000; ATA IronWolf 110: attribute 233 / 241).",
        &l,
        x.write_amplification,
    );
    if let Some(a) = &x.accounting {
        f.gauge(
            "nvsoak_accounting_host_written_bytes",
            "Bytes nvsoak itself wrote to this drive (an NVMe controller's namespaces, an ATA disk and its partitions) since the first poll that saw both.",
            &l,
            a.host_written_bytes,
        );
        f.gauge(
            "nvsoak_accounting_drive_written_bytes",
            "The drive's lifetime bytes written delta over the same period (NVMe: SMART 02h bytes 48..63 x 512000, rounded up to 512000 bytes by the drive; ATA: nvsoak_drive_lifetime_written_bytes).",
            &l,
            a.drive_written_bytes,
        );
        opt(
            f,
            "nvsoak_accounting_ratio",
            "Drive-reported / host-written bytes over the same period; far from 1 beyond rounding means the drive's SMART accounting disagrees with the host.",
            &l,
            a.ratio,
        );
    }
    if polled {
        let t = &x.throttle;
        f.gauge(
            "nvsoak_thermal_throttling",
            "1 while throttling: thermal management counts or times (NVMe SMART 02h bytes 216..231; ATA time over temperature, Device Statistics 05h) rose since the previous poll, OCP C0h byte 97 is non-zero, or the temperature >= WCTEMP (ATA: the specified maximum operating temperature).",
            &l,
            if t.throttling { 1.0 } else { 0.0 },
        );
        f.counter(
            "nvsoak_thermal_throttle_events_total",
            "Throttling episodes (0 -> 1 changes of nvsoak_thermal_throttling) since the poller started.",
            &l,
            t.events as f64,
        );
        opt(
            f,
            "nvsoak_throttled_iops",
            "Mean workload IOPS on this device over polls that found it throttling.",
            &l,
            t.throttled_iops,
        );
        opt(
            f,
            "nvsoak_unthrottled_iops",
            "Mean workload IOPS on this device over polls that found it not throttling.",
            &l,
            t.unthrottled_iops,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::collect::RatingContext;
    use crate::health::collect::nvme::poll_once;
    use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use crate::nvme::discover::{Controller, Namespace};
    use crate::nvme::replay::{ReplayTransport, Reply};

    fn snap() -> HealthSnapshot {
        let t = ReplayTransport::new("/dev/nvme0");
        t.on_loose(
            OPC_IDENTIFY,
            0x01,
            Reply::Data(crate::nvme::identify::testdata::id_ctrl(), 0),
        );
        t.on_loose(
            OPC_IDENTIFY,
            0x00,
            Reply::Data(crate::nvme::identify::testdata::id_ns(), 0),
        );
        t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x02,
            Reply::Data(crate::nvme::log::smart::testdata::smart(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x01,
            Reply::Data(crate::nvme::log::error::testdata::error_log(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x03,
            Reply::Data(crate::nvme::log::fwslot::testdata::fw_slot(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc0,
            Reply::Data(crate::nvme::log::ocp::testdata::ocp(), 0),
        );
        t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
        let c = Controller {
            name: "nvme0".into(),
            dev_path: "/dev/nvme0".into(),
            serial: String::new(),
            model: String::new(),
            firmware: String::new(),
            namespaces: vec![Namespace {
                name: "nvme0n1".into(),
                nsid: 1,
                dev_path: "/dev/nvme0n1".into(),
            }],
        };
        let d = poll_once(&t, &c, &RatingContext::default(), &crate::health::NoHostIo);
        HealthSnapshot {
            devices: vec![d],
            poll_timestamp_seconds: Some(1_700_000_000.0),
            poll_duration_seconds: Some(0.25),
            polls: 1,
            setup_error: None,
            ..Default::default()
        }
    }

    #[test]
    fn units_and_labels() {
        let text = super::super::encode_text(&families(&snap())).expect("encode");
        for want in [
            "nvme_up{device=\"nvme0\"} 1",
            "nvme_info{device=\"nvme0\",serial=\"SN-HANDBUILT-0001\",model=\"HWE62P43032M000N nvsoak handbuilt model\",firmware=\"FW1.2.3\",pci_address=\"\",slot=\"\",subsystem=\"\",card=\"\"} 1",
            "nvme_critical_warning{device=\"nvme0\"} 37",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"spare\"} 1",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"temperature\"} 0",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"pmr_read_only\"} 1",
            "nvme_temperature_celsius{device=\"nvme0\"} 44.85",
            "nvme_temperature_sensor_celsius{device=\"nvme0\",sensor=\"8\"} 34.85",
            "nvme_percentage_used_ratio{device=\"nvme0\"} 1.04",
            "nvme_available_spare_ratio{device=\"nvme0\"} 0.97",
            "nvme_controller_busy_seconds_total{device=\"nvme0\"} 5760",
            "nvme_power_on_seconds_total{device=\"nvme0\"} 46080000",
            "nvme_warning_temperature_seconds_total{device=\"nvme0\"} 11520",
            "nvme_thermal_transitions_total{device=\"nvme0\",level=\"2\"} 220",
            "nvme_thermal_management_seconds_total{device=\"nvme0\",level=\"1\"} 224",
            "nvme_warning_temperature_threshold_celsius{device=\"nvme0\"} 69.85",
            "nvme_namespace_lba_size_bytes{device=\"nvme0\",namespace=\"nvme0n1\"} 4096",
            "nvme_total_capacity_bytes{device=\"nvme0\"} 3200631791616",
            "nvme_error_log_status_total{device=\"nvme0\",status=\"0x281\"} 2",
            "nvme_ocp_thermal_throttling_status{device=\"nvme0\"} 1",
            "nvsoak_thermal_throttling{device=\"nvme0\"} 1",
            "nvsoak_thermal_throttle_events_total{device=\"nvme0\"} 1",
            "nvsoak_health_poll_errors_total{device=\"nvme0\",log=\"smart\"} 0",
            "nvsoak_health_poll_timestamp_seconds 1700000000",
            "nvme_firmware_slot_info{device=\"nvme0\",slot=\"2\",revision=\"2.0.1\"} 1",
        ] {
            assert!(text.contains(want), "missing `{want}` in\n{text}");
        }
        // Data units x 512000: (3 * 2^64 + 48) units.
        let line = text
            .lines()
            .find(|l| l.starts_with("nvme_data_written_bytes_total{"))
            .expect("written");
        let v: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("value");
        let want = ((3u128 << 64) + 48) as f64 * 512_000.0;
        assert!((v - want).abs() / want < 1e-12, "{v} vs {want}");
        assert!(
            text.contains(
                "# HELP nvme_temperature_celsius Composite temperature (SMART log 02h, bytes 1..2"
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE nvme_media_errors_total counter"),
            "{text}"
        );
    }

    #[test]
    fn one_family_per_name_with_two_devices() {
        let mut s = snap();
        let mut d2 = s.devices[0].clone();
        d2.name = "nvme1".into();
        d2.up = false;
        s.devices.push(d2);
        let fams = families(&s);
        let mut names: Vec<&str> = fams.iter().map(|f| f.name()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate family");
        let text = super::super::encode_text(&fams).expect("encode");
        assert!(text.contains("nvme_up{device=\"nvme1\"} 0"), "{text}");
    }
}
