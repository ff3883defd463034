//! What the NVMe collector knows of one controller ([`DeviceHealth`]): identity, the latest
//! value of every page (a page that failed keeps its previous value), the poll errors by page,
//! the derivations' state, and the first and latest SMART reads with nvsoak's own figures of
//! the same instant ([`SmartSample`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::super::Derived;
use super::super::sample::DriveFigures;
use crate::health::HostIo;
use crate::health::derive::{AccountingTracker, ErrorLogTracker, ThrottleTracker, WriteHistory};
use crate::model::drive::WriteCache;
use crate::nvme::NvmeError;
use crate::nvme::discover::Controller;
use crate::nvme::features::TempThresholds;
use crate::nvme::identify::{IdCtrl, IdNs};
use crate::nvme::log::{error::ErrorEntry, fwslot::FwSlotLog, ocp::OcpSmartLog, smart::SmartLog};

/// The `log` label values of `nvsoak_health_poll_errors_total`.
pub mod page {
    pub const OPEN: &str = "open";
    pub const IDENTIFY: &str = "identify";
    pub const IDENTIFY_NS: &str = "identify_ns";
    pub const SMART: &str = "smart";
    pub const ERROR: &str = "error";
    pub const FW_SLOT: &str = "fw_slot";
    pub const OCP: &str = "ocp";
    pub const TEMP_THRESHOLD: &str = "temp_threshold";
    pub const WRITE_CACHE: &str = "write_cache";
    /// The controller did not answer a poll within its deadline (still in flight).
    pub const TIMEOUT: &str = "timeout";
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NamespaceHealth {
    pub name: String,
    pub nsid: u32,
    pub dev_path: PathBuf,
    pub id: Option<IdNs>,
}

/// Whether the drive has an OCP C0h page, learnt on the first poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OcpSupport {
    #[default]
    Unknown,
    Absent,
    Present {
        uuid_index: u8,
    },
}

/// A successful SMART read and nvsoak's own figures for the targets on this drive, read right
/// after it (the same instant, for per-soak deltas and the accounting check), with the
/// throttling state after this poll.
#[derive(Debug, Clone, PartialEq)]
pub struct SmartSample {
    /// Unix time of the poll.
    pub time: f64,
    pub smart: SmartLog,
    /// The targets on this drive (matched like the accounting check: namespace or partition).
    pub host: Vec<HostIo>,
    /// Throttle episodes counted by this poller so far, and whether this poll was throttled.
    pub throttle_events: u64,
    pub throttling: bool,
}

/// The last known state of one controller. Pages that failed keep their previous values.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceHealth {
    /// `nvme0`
    pub name: String,
    pub dev_path: PathBuf,
    /// From sysfs, replaced by Identify when that succeeds.
    pub serial: String,
    pub model: String,
    pub firmware: String,
    /// Still listed in sysfs at the last rescan.
    pub present: bool,
    /// The last SMART read succeeded.
    pub up: bool,
    pub id: Option<IdCtrl>,
    pub namespaces: Vec<NamespaceHealth>,
    pub smart: Option<SmartLog>,
    pub error_log: Option<Vec<ErrorEntry>>,
    pub fw_slot: Option<FwSlotLog>,
    pub thresholds: Option<TempThresholds>,
    /// The volatile write cache (Identify VWC and Get Features 06h); `None` until known.
    pub write_cache: Option<WriteCache>,
    pub ocp_support: OcpSupport,
    pub ocp: Option<OcpSmartLog>,
    /// The OCP C1h and C3h pages, the telemetry header and the drive events they raised
    /// (`ocp_pages`).
    pub pages: super::pages::DrivePages,
    /// Failed reads by page, cumulative.
    pub poll_errors: BTreeMap<&'static str, u64>,
    /// The last failure's message, for logs and `nvsoak health`.
    pub last_error: Option<String>,
    /// How long this controller's latest poll took, or, while one is still running past its
    /// deadline, how long it has been running.
    pub poll_duration_seconds: Option<f64>,
    /// Polls of this controller that completed (each page answered or failed).
    pub polls: u64,
    pub derived: Derived,
    /// The first successful SMART read of this poller (since the daemon started, or since
    /// another drive took the name) and the latest one, with the host figures of that instant.
    #[serde(skip)]
    pub first_sample: Option<SmartSample>,
    #[serde(skip)]
    pub last_sample: Option<SmartSample>,
    #[serde(skip)]
    pub(in crate::health) history: WriteHistory,
    #[serde(skip)]
    pub(in crate::health) accounting: AccountingTracker,
    #[serde(skip)]
    pub(in crate::health) errors_seen: ErrorLogTracker,
    #[serde(skip)]
    pub(in crate::health) throttle: ThrottleTracker,
    #[serde(skip)]
    pub(in crate::health) permission_warned: bool,
    #[serde(skip)]
    pub(in crate::health) last_by_page: BTreeMap<&'static str, String>,
}

impl DeviceHealth {
    pub fn new(c: &Controller) -> Self {
        DeviceHealth {
            name: c.name.clone(),
            dev_path: c.dev_path.clone(),
            serial: c.serial.clone(),
            model: c.model.clone(),
            firmware: c.firmware.clone(),
            present: true,
            up: false,
            id: None,
            namespaces: ns_of(c),
            smart: None,
            error_log: None,
            fw_slot: None,
            thresholds: None,
            write_cache: None,
            ocp_support: OcpSupport::Unknown,
            ocp: None,
            pages: Default::default(),
            poll_errors: BTreeMap::new(),
            last_error: None,
            poll_duration_seconds: None,
            polls: 0,
            derived: Derived::default(),
            first_sample: None,
            last_sample: None,
            history: WriteHistory::default(),
            accounting: AccountingTracker::default(),
            errors_seen: ErrorLogTracker::default(),
            throttle: ThrottleTracker::default(),
            permission_warned: false,
            last_by_page: BTreeMap::new(),
        }
    }

    /// The latest shared figures (`collect::sample`), from the SMART log and Identify data;
    /// without a SMART log they stay `None`. A temperature of 0 K is "not reported".
    pub fn figures(&self) -> DriveFigures {
        let k2c = |k: u16| (k != 0).then(|| SmartLog::kelvin_to_celsius(k));
        let smart = self.smart.as_ref();
        DriveFigures {
            temperature_c: smart.and_then(|s| k2c(s.temperature)),
            warning_temp_c: self.id.as_ref().and_then(|i| k2c(i.wctemp)),
            critical_temp_c: self.id.as_ref().and_then(|i| k2c(i.cctemp)),
            percentage_used: smart.map(|s| s.percent_used as f64 / 100.0),
            available_spare: smart.map(|s| s.avail_spare as f64 / 100.0),
            data_written_bytes: smart.map(|s| s.data_written_bytes() as f64),
            media_errors: smart.map(|s| u64::try_from(s.media_errors).unwrap_or(u64::MAX)),
            error_log_entries: smart
                .map(|s| u64::try_from(s.num_err_log_entries).unwrap_or(u64::MAX)),
            critical_warning: smart.map(|s| s.critical_warning),
            smart_passed: None,
            reallocated_sectors: None,
        }
    }

    /// Capacity for DWPD: TNVMCAP, else the namespaces' sizes.
    pub fn capacity_bytes(&self) -> u64 {
        let t = self.id.as_ref().map(|i| i.tnvmcap).unwrap_or(0);
        let cap = if t > 0 {
            t
        } else {
            self.namespaces
                .iter()
                .filter_map(|n| n.id.as_ref())
                .map(|i| i.size_bytes())
                .sum()
        };
        u64::try_from(cap).unwrap_or(u64::MAX)
    }

    pub(in crate::health) fn fail(&mut self, page: &'static str, e: &NvmeError) {
        self.failed(page, e.to_string(), e.is_permission());
    }

    /// A failure that is not an NVMe error (a poll that timed out).
    fn fail_with(&mut self, page: &'static str, msg: String) {
        self.failed(page, msg, false);
    }

    fn failed(&mut self, page: &'static str, msg: String, permission: bool) {
        *self.poll_errors.entry(page).or_insert(0) += 1;
        if permission {
            // Once per device: the workload keeps running, the health pages stay empty.
            if !self.permission_warned {
                tracing::warn!("{msg}");
                self.permission_warned = true;
            }
        } else if self.last_by_page.get(page) != Some(&msg) {
            // Once per page and message, not once per poll.
            tracing::warn!("{msg}");
            self.last_by_page.insert(page, msg.clone());
        }
        self.last_error = Some(msg);
    }
}

impl crate::health::inflight::Polled for DeviceHealth {
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
        // Logged when the poll first overruns, not at every poll while it hangs.
        if !self.last_by_page.contains_key(page::TIMEOUT) {
            tracing::warn!("{msg}");
            self.last_by_page.insert(page::TIMEOUT, msg.clone());
        }
        self.last_error = Some(msg);
    }
    fn thread_failed(&mut self) {
        self.up = false;
        let msg = format!("health: {}: the poll thread failed", self.name);
        self.fail_with(page::TIMEOUT, msg);
    }
    fn same_drive(&self, answer: &Self) -> bool {
        self.serial == answer.serial || self.serial.is_empty() || self.id.is_none()
    }
    fn carry_into(&self, answer: &mut Self) {
        answer.present = self.present;
        if !answer.present {
            answer.up = false;
        }
        if let Some(&n) = self.poll_errors.get(page::TIMEOUT) {
            answer.poll_errors.insert(page::TIMEOUT, n);
        }
        answer.last_by_page.remove(page::TIMEOUT);
    }
}

pub(super) fn ns_of(c: &Controller) -> Vec<NamespaceHealth> {
    c.namespaces
        .iter()
        .map(|n| NamespaceHealth {
            name: n.name.clone(),
            nsid: n.nsid,
            dev_path: n.dev_path.clone(),
            id: None,
        })
        .collect()
}

/// Whether `host` (a target's path, maybe a partition or a symlink) lies on controller `d`.
pub(super) fn host_on_device(host: &HostIo, d: &DeviceHealth) -> bool {
    let p = std::fs::canonicalize(&host.path).unwrap_or_else(|_| host.path.clone());
    let Some(mut name) = p.file_name().map(|n| n.to_string_lossy().to_string()) else {
        return false;
    };
    // A passthrough target named by its generic node (`ng0n1`) is that namespace's
    // (`nvme0n1`): the kernel names both from the controller instance and the namespace ID
    // (with native multipath the block device takes the subsystem's instance instead, and a
    // target on one is named by its block device).
    if let Some(rest) = name.strip_prefix("ng") {
        name = format!("nvme{rest}");
    }
    d.namespaces.iter().any(|n| {
        name == n.name
            || name
                .strip_prefix(n.name.as_str())
                .and_then(|r| r.strip_prefix('p'))
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
    })
}
