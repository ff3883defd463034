//! NVMe controller families, `nvme_*`: what the controller says in Identify, the SMART (02h),
//! Error Information (01h), Firmware Slot (03h) and OCP SMART extended (C0h) logs and the
//! Temperature Threshold feature, in base units. The OCP C1h/C3h/08h pages are
//! `metrics::ocp`'s, the derived `nvsoak_*` figures `metrics::derived`'s.

use super::family::{self, F};
use crate::health::collect::nvme::{DeviceHealth, page};
use crate::health::derive;
use crate::nvme::log::smart::{CRITICAL_WARNING_BITS, SmartLog};
use crate::pcie::CtrlTopology;

/// The pages whose failed commands are counted, a series each even at 0.
const POLLED_PAGES: [&str; 10] = [
    page::OPEN,
    page::IDENTIFY,
    page::IDENTIFY_NS,
    page::SMART,
    page::ERROR,
    page::FW_SLOT,
    page::OCP,
    page::TEMP_THRESHOLD,
    page::WRITE_CACHE,
    page::TIMEOUT,
];

fn c(k: u16) -> f64 {
    SmartLog::kelvin_to_celsius(k)
}

/// Every family of one controller, into the health families' builder.
pub(super) fn device(f: &mut F, d: &DeviceHealth, topo: Option<&CtrlTopology>) {
    let dev = d.name.as_str();
    identity(f, d, topo);
    family::poll(
        f,
        dev,
        &POLLED_PAGES,
        &d.poll_errors,
        d.poll_duration_seconds,
    );
    identify(f, d);
    if let Some(s) = &d.smart {
        smart(f, dev, s);
    }
    logs(f, d);
    if let Some(o) = &d.ocp {
        ocp(f, dev, o);
    }
    super::ocp::device(f, d);
    super::derived::drive(f, dev, &d.derived, d.smart.is_some());
}

/// `nvme_info` and `nvme_up`.
fn identity(f: &mut F, d: &DeviceHealth, topo: Option<&CtrlTopology>) {
    let dev = d.name.as_str();
    let t = topo.cloned().unwrap_or_default();
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
        &[("device", dev)],
        if d.up && d.present { 1.0 } else { 0.0 },
    );
}

/// Identify Controller's thresholds and capacity, each namespace's size, and the Temperature
/// Threshold feature.
fn identify(f: &mut F, d: &DeviceHealth) {
    let dev = d.name.as_str();
    let l = [("device", dev)];
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
    if let Some(wc) = d.write_cache {
        family::write_cache(
            f,
            "nvme",
            dev,
            wc,
            "Identify Controller VWC byte 525 bit 0",
            "Get Features FID 06h, WCE dword 0 bit 0",
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
}

/// The Error Information log's statuses and the Firmware Slot log.
fn logs(f: &mut F, d: &DeviceHealth) {
    let dev = d.name.as_str();
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
            &[("device", dev)],
            f64::from(fw.active_slot()),
        );
    }
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
