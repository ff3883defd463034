//! The status page's view of one drive, [`DriveStatus`]: the same flat, protocol-neutral row
//! for every drive the health poller knows, so the page's drive table (`status.rs`) reads one
//! shape whatever the protocol. An NVMe controller's row is built here ([`nvme`]), a SATA
//! disk's in `status_ata.rs`; `status::drives_from_health` lists them all.

use crate::health::DeviceHealth;
use crate::health::collect::Derived;

/// One drive as the status page shows it. `None` fields are shown as "-".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveStatus {
    /// Controller name, e.g. `nvme0`.
    pub device: String,
    pub model: String,
    pub serial: String,
    /// The last poll succeeded.
    pub up: bool,
    pub temperature_c: Option<f64>,
    pub warning_temp_c: Option<f64>,
    pub critical_temp_c: Option<f64>,
    /// Percentage used as a ratio (1.0 = 100 %, may exceed 1).
    pub percentage_used: Option<f64>,
    pub available_spare: Option<f64>,
    pub data_written_bytes: Option<f64>,
    pub rated_endurance_bytes: Option<f64>,
    pub throttling: Option<bool>,
    pub throttle_events: Option<u64>,
    pub media_errors: Option<u64>,
    pub error_log_entries: Option<u64>,
    pub critical_warning: Option<u8>,
    /// SATA disks: SMART RETURN STATUS passed, and attribute 5 (reallocated sectors).
    pub smart_passed: Option<bool>,
    pub reallocated_sectors: Option<u64>,
}

/// What every drive's row has whatever its protocol: its names, whether its last poll
/// succeeded, and the poller's endurance and throttling derivations (`health::collect`'s
/// [`Derived`], the same for every protocol). The protocol's figures are left `None`.
pub fn base(name: &str, model: &str, serial: &str, up: bool, derived: &Derived) -> DriveStatus {
    DriveStatus {
        device: name.to_string(),
        model: model.to_string(),
        serial: serial.to_string(),
        up,
        rated_endurance_bytes: derived.rated.as_ref().and_then(|r| r.bytes),
        throttling: Some(derived.throttle.throttling),
        throttle_events: Some(derived.throttle.events),
        ..Default::default()
    }
}

/// One NVMe controller as the status page shows it, from its latest SMART log and Identify
/// data; without a SMART log its figures stay `None`.
pub fn nvme(d: &DeviceHealth) -> DriveStatus {
    // 0 K: the drive reports no value.
    let k2c = |k: u16| (k != 0).then(|| crate::nvme::log::smart::SmartLog::kelvin_to_celsius(k));
    let smart = d.smart.as_ref();
    DriveStatus {
        temperature_c: smart.and_then(|s| k2c(s.temperature)),
        warning_temp_c: d.id.as_ref().and_then(|i| k2c(i.wctemp)),
        critical_temp_c: d.id.as_ref().and_then(|i| k2c(i.cctemp)),
        percentage_used: smart.map(|s| s.percent_used as f64 / 100.0),
        available_spare: smart.map(|s| s.avail_spare as f64 / 100.0),
        data_written_bytes: smart.map(|s| s.data_written_bytes() as f64),
        media_errors: smart.map(|s| u64::try_from(s.media_errors).unwrap_or(u64::MAX)),
        error_log_entries: smart.map(|s| u64::try_from(s.num_err_log_entries).unwrap_or(u64::MAX)),
        critical_warning: smart.map(|s| s.critical_warning),
        ..base(&d.name, &d.model, &d.serial, d.up, &d.derived)
    }
}
