//! What the ATA collector knows of one SATA disk ([`AtaHealth`]): identity, the latest SMART
//! attributes, RETURN STATUS and Device Statistics (a command that failed keeps its previous
//! value), the features the drive refused, the poll errors and the derivations' state.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::super::Derived;
use super::super::sample::DriveFigures;
use super::sample::{AtaCounters, AtaSample};
use crate::ata::AtaError;
use crate::ata::devstat::DeviceStats;
use crate::ata::discover::AtaDisk;
use crate::ata::identify::Identify;
use crate::ata::smart::{Attribute, SmartStatus};
use crate::ata::vendor::{self, Family, WritesSource};
use crate::health::HostIo;
use crate::health::derive::{AccountingTracker, ThrottleTracker, WriteHistory};

/// The `log` label values of `nvsoak_health_poll_errors_total` for ATA disks.
pub mod page {
    pub const OPEN: &str = "open";
    pub const IDENTIFY: &str = "identify";
    pub const SMART: &str = "smart";
    pub const SMART_STATUS: &str = "smart_status";
    pub const DEVSTAT: &str = "devstat";
    /// The disk did not answer a poll within its deadline (still in flight).
    pub const TIMEOUT: &str = "timeout";
    pub const ALL: [&str; 6] = [OPEN, IDENTIFY, SMART, SMART_STATUS, DEVSTAT, TIMEOUT];
}

/// What a drive said it does not support (ABRT, or the identify bits), learnt once.
pub mod feature {
    pub const SMART: &str = "smart";
    pub const SMART_STATUS: &str = "smart_status";
    pub const DEVSTAT: &str = "devstat";
}

/// The last known state of one ATA disk. Commands that failed keep their previous values.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AtaHealth {
    /// `sda`
    pub name: String,
    pub dev_path: PathBuf,
    /// From IDENTIFY (sysfs has no serial for a SCSI disk; empty until IDENTIFY answers).
    pub serial: String,
    pub model: String,
    pub firmware: String,
    /// `naa.5000c500a1b2c3d4`, empty when the drive reports no WWN.
    pub wwn: String,
    pub present: bool,
    /// The last SMART READ DATA succeeded.
    pub up: bool,
    pub identify: Option<Identify>,
    pub family: Option<Family>,
    pub attributes: Option<Vec<Attribute>>,
    pub smart_status: Option<SmartStatus>,
    pub devstat: Option<DeviceStats>,
    /// Features the drive refused (see [`feature`]), with the drive's answer.
    pub unsupported: BTreeMap<&'static str, String>,
    /// Lifetime host bytes written and where the figure came from.
    pub lifetime_written: Option<(u128, WritesSource)>,
    pub poll_errors: BTreeMap<&'static str, u64>,
    pub last_error: Option<String>,
    /// How long the latest poll took, or how long one still running past its deadline has run.
    pub poll_duration_seconds: Option<f64>,
    /// Polls of this disk that completed.
    pub polls: u64,
    pub derived: Derived,
    /// The first successful poll of this poller (since the daemon started, or since another
    /// drive took the name) and the latest one, with the host figures of that instant.
    #[serde(skip)]
    pub first_sample: Option<AtaSample>,
    #[serde(skip)]
    pub last_sample: Option<AtaSample>,
    #[serde(skip)]
    pub(in crate::health) history: WriteHistory,
    #[serde(skip)]
    pub(in crate::health) accounting: AccountingTracker,
    #[serde(skip)]
    pub(in crate::health) throttle: ThrottleTracker,
    #[serde(skip)]
    pub(in crate::health) last_by_page: BTreeMap<&'static str, String>,
    /// The disk vanished and came back: IDENTIFY again to see whether it is the same drive.
    #[serde(skip)]
    pub(in crate::health) reidentify: bool,
}

impl AtaHealth {
    pub fn new(d: &AtaDisk) -> Self {
        AtaHealth {
            name: d.name.clone(),
            dev_path: d.dev_path.clone(),
            serial: String::new(),
            model: d.model.clone(),
            firmware: d.firmware.clone(),
            wwn: d
                .wwid
                .strip_prefix("naa.")
                .map(|_| d.wwid.clone())
                .unwrap_or_default(),
            present: true,
            up: false,
            identify: None,
            family: vendor::family(&d.model),
            attributes: None,
            smart_status: None,
            devstat: None,
            unsupported: BTreeMap::new(),
            lifetime_written: None,
            poll_errors: BTreeMap::new(),
            last_error: None,
            poll_duration_seconds: None,
            polls: 0,
            derived: Derived::default(),
            first_sample: None,
            last_sample: None,
            history: WriteHistory::default(),
            accounting: AccountingTracker::default(),
            throttle: ThrottleTracker::default(),
            last_by_page: BTreeMap::new(),
            reidentify: false,
        }
    }

    /// The latest shared figures (`collect::sample`): from the same [`AtaCounters`] the soak
    /// figures use, so every figure has one source. What the drive does not report stays
    /// `None`: a disk without Device Statistics has no percentage used; none has a spare.
    pub fn figures(&self) -> DriveFigures {
        let c = AtaCounters::of(self);
        let ds = self.devstat.as_ref();
        DriveFigures {
            temperature_c: c.temperature_c.map(f64::from),
            // Device Statistics' specified maximum operating temperature.
            warning_temp_c: ds.and_then(|s| s.specified_max_temperature).map(f64::from),
            critical_temp_c: None,
            percentage_used: ds.and_then(|s| s.percentage_used_ratio()),
            available_spare: None,
            data_written_bytes: self.lifetime_written.map(|(b, _)| b as f64),
            // Reported uncorrectable errors stand in for the media errors.
            media_errors: c.uncorrectable,
            error_log_entries: None,
            critical_warning: None,
            smart_passed: c.smart_passed,
            reallocated_sectors: c.reallocated,
        }
    }

    /// The drive's capacity (IDENTIFY), 0 until it answers.
    pub fn capacity_bytes(&self) -> u64 {
        self.identify
            .as_ref()
            .map(|i| u64::try_from(i.capacity_bytes()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }

    pub fn logical_sector_size(&self) -> u32 {
        self.identify
            .as_ref()
            .map(|i| i.logical_sector_size)
            .unwrap_or(512)
    }

    pub(super) fn fail(&mut self, page: &'static str, e: &AtaError, warned: &mut bool) {
        *self.poll_errors.entry(page).or_insert(0) += 1;
        let msg = e.to_string();
        if e.is_permission() {
            // Once for the whole poller: every disk fails the same way.
            if !*warned {
                tracing::warn!("health: {msg}");
                *warned = true;
            }
        } else if self.last_by_page.get(page) != Some(&msg) {
            tracing::warn!("health: {msg}");
            self.last_by_page.insert(page, msg.clone());
        }
        self.last_error = Some(msg);
    }

    /// Remember that the drive does not support `what`; logged once.
    pub(super) fn refuse(&mut self, what: &'static str, why: String) {
        if !self.unsupported.contains_key(what) {
            tracing::info!("health: {}: {why}; not asked again", self.name);
            self.unsupported.insert(what, why);
        }
    }

    pub fn supports(&self, what: &str) -> bool {
        !self.unsupported.contains_key(what)
    }
}

impl crate::health::inflight::Polled for AtaHealth {
    fn present(&self) -> bool {
        self.present
    }
    fn set_down(&mut self) {
        self.up = false;
    }
    fn still_running(&mut self, secs: f64) {
        self.up = false;
        self.poll_duration_seconds = Some(secs);
        *self.poll_errors.entry(page::TIMEOUT).or_insert(0) += 1;
        let msg = crate::health::inflight::running_message(&self.name, secs);
        if !self.last_by_page.contains_key(page::TIMEOUT) {
            tracing::warn!("{msg}");
            self.last_by_page.insert(page::TIMEOUT, msg.clone());
        }
        self.last_error = Some(msg);
    }
    fn thread_failed(&mut self) {
        self.up = false;
        *self.poll_errors.entry(page::TIMEOUT).or_insert(0) += 1;
        self.last_error = Some(format!("health: {}: the poll thread failed", self.name));
    }
    fn same_drive(&self, answer: &Self) -> bool {
        self.serial == answer.serial || self.serial.is_empty()
    }
    fn carry_into(&self, answer: &mut Self) {
        answer.present = self.present;
        answer.reidentify |= self.reidentify;
        if !answer.present {
            answer.up = false;
        }
        if let Some(&n) = self.poll_errors.get(page::TIMEOUT) {
            answer.poll_errors.insert(page::TIMEOUT, n);
        }
        answer.last_by_page.remove(page::TIMEOUT);
    }
}

/// Whether `host` (a target's path, maybe a partition or a symlink) lies on disk `d`.
pub(super) fn host_on_disk(host: &HostIo, d: &AtaHealth) -> bool {
    let p = std::fs::canonicalize(&host.path).unwrap_or_else(|_| host.path.clone());
    let Some(name) = p.file_name().map(|n| n.to_string_lossy().to_string()) else {
        return false;
    };
    name == d.name
        || name
            .strip_prefix(d.name.as_str())
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
}

fn raw(attrs: &[Attribute], id: u8) -> Option<u64> {
    attrs.iter().find(|a| a.id == id).map(|a| a.raw)
}

impl AtaCounters {
    /// The counters of `d`'s latest state.
    pub fn of(d: &AtaHealth) -> AtaCounters {
        let attrs: &[Attribute] = d.attributes.as_deref().unwrap_or(&[]);
        let ds = d.devstat.as_ref();
        let lss = d.logical_sector_size();
        let written = d.lifetime_written;
        AtaCounters {
            written_bytes: written.map(|(b, _)| u64::try_from(b).unwrap_or(u64::MAX)),
            written_source: written.map(|(_, s)| s),
            written_unit_bytes: written
                .map(|(_, s)| vendor::writes_unit_bytes(d.family, s, lss))
                .unwrap_or(0),
            read_bytes: ds.and_then(|s| s.bytes_read),
            power_on_seconds: ds
                .and_then(|s| s.power_on_seconds)
                .or_else(|| raw(attrs, 9).map(|h| (h & 0xffff_ffff) * 3600)),
            uncorrectable: ds
                .and_then(|s| s.reported_uncorrectable)
                .or_else(|| raw(attrs, 187).map(|v| v & 0xffff_ffff)),
            reallocated: raw(attrs, 5).map(|v| v & 0xffff_ffff),
            crc_errors: ds
                .and_then(|s| s.interface_crc_errors)
                .or_else(|| raw(attrs, 199).map(|v| v & 0xffff_ffff)),
            temperature_c: vendor::temperature(attrs, ds),
            percentage_used: ds.and_then(|s| s.percentage_used),
            smart_passed: d.smart_status.map(|s| s.passed()),
        }
    }
}
