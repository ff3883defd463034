//! The health poller: discovers controllers, polls their pages, keeps the derivations' state,
//! and publishes an immutable [`HealthSnapshot`].
//!
//! [`Poller`] is synchronous (one poll = a few admin commands per device); [`spawn`] runs it on
//! tokio with the ioctls in `spawn_blocking`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::derive::{
    self, Accounting, AccountingTracker, ErrorLogTracker, RatedEndurance, ThermalSample, Throttle,
    ThrottleTracker, WriteHistory,
};
use super::{HostIo, HostIoSource};
use crate::config::{DeviceRatingOverride, HealthSettings};
use crate::nvme::discover::{self, Controller, Filter};
use crate::nvme::features::TempThresholds;
use crate::nvme::identify::{IdCtrl, IdNs};
use crate::nvme::ioctl::IoctlTransport;
use crate::nvme::log::{error::ErrorEntry, fwslot::FwSlotLog, ocp::OcpSmartLog, smart::SmartLog};
use crate::nvme::ratings::RatingsTable;
use crate::nvme::{AdminTransport, NvmeError, cmd};

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

/// Derived endurance and thermal figures for one drive.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Derived {
    pub rated: Option<RatedEndurance>,
    /// Lifetime host bytes written / rated bytes.
    pub endurance_consumed_ratio: Option<f64>,
    pub observed_dwpd_soak: Option<f64>,
    pub observed_dwpd_24h: Option<f64>,
    pub projected_wearout_days_tbw: Option<f64>,
    pub projected_wearout_days_percentage_used: Option<f64>,
    /// OCP physical media written / host bytes written (lifetime).
    pub write_amplification: Option<f64>,
    pub accounting: Option<Accounting>,
    pub throttle: Throttle,
    /// Error Information log entries seen since nvsoak started, by status label, each once.
    pub error_log_status: BTreeMap<String, u64>,
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
    pub ocp_support: OcpSupport,
    pub ocp: Option<OcpSmartLog>,
    /// The OCP C1h and C3h pages, the telemetry header and the drive events they raised
    /// (`health::ocp_pages`).
    pub pages: super::ocp_pages::DrivePages,
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
    history: WriteHistory,
    #[serde(skip)]
    accounting: AccountingTracker,
    #[serde(skip)]
    errors_seen: ErrorLogTracker,
    #[serde(skip)]
    throttle: ThrottleTracker,
    #[serde(skip)]
    permission_warned: bool,
    #[serde(skip)]
    last_by_page: BTreeMap<&'static str, String>,
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

    pub(super) fn fail(&mut self, page: &'static str, e: &NvmeError) {
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

impl super::inflight::Polled for DeviceHealth {
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
        let msg = super::inflight::running_message(&self.name, secs);
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

fn ns_of(c: &Controller) -> Vec<NamespaceHealth> {
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

/// Everything the poller knows, as of its last poll.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HealthSnapshot {
    pub devices: Vec<DeviceHealth>,
    /// SATA disks (`ata_*` metrics), polled in the same pass.
    pub ata: Vec<super::ata::AtaHealth>,
    /// Unix time at the end of the last poll.
    pub poll_timestamp_seconds: Option<f64>,
    pub poll_duration_seconds: Option<f64>,
    pub polls: u64,
    /// Why discovery or setup failed, if it did (bad regex, unreadable sysfs or ratings).
    pub setup_error: Option<String>,
    /// PCIe topology, link figures and AER counters of the controllers (`pcie::scan`).
    pub pcie: crate::pcie::PcieSnapshot,
}

impl HealthSnapshot {
    /// The drives to remember for the next run: every controller known now.
    pub fn known(&self) -> Vec<super::known::KnownDrive> {
        self.devices
            .iter()
            .map(|d| super::known::KnownDrive {
                name: d.name.clone(),
                serial: d.serial.clone(),
                model: d.model.clone(),
                firmware: d.firmware.clone(),
            })
            .collect()
    }
}

/// The ratings and overrides the derivations need.
#[derive(Debug, Clone)]
pub struct RatingContext {
    pub table: RatingsTable,
    pub overrides: Vec<DeviceRatingOverride>,
    /// `[health.latency_monitor]`: enable the OCP Latency Monitor (Set Features C5h) with
    /// these settings on OCP drives; `None` leaves the drive's feature as it is.
    pub latency_monitor: Option<crate::nvme::log::ocp_latency::LatencyMonitorConfig>,
}

impl Default for RatingContext {
    fn default() -> Self {
        RatingContext {
            table: RatingsTable::builtin(),
            overrides: Vec::new(),
            latency_monitor: None,
        }
    }
}

pub use crate::util::unix_now;

/// Whether `host` (a target's path, maybe a partition or a symlink) lies on controller `d`.
fn host_on_device(host: &HostIo, d: &DeviceHealth) -> bool {
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

/// Poll one device's pages through `t` and update its derivations. `now` is Unix time.
/// A failed page counts an error and leaves that page's previous value in place.
pub fn poll_device(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    now: f64,
    host: &dyn HostIoSource,
    ratings: &RatingContext,
) {
    if d.id.is_none() {
        match cmd::read_id_ctrl(t) {
            Ok(id) => {
                d.serial = id.sn.clone();
                d.model = id.mn.clone();
                d.firmware = id.fr.clone();
                d.id = Some(id);
            }
            Err(e) => d.fail(page::IDENTIFY, &e),
        }
    }
    for i in 0..d.namespaces.len() {
        if d.namespaces[i].id.is_none() {
            match cmd::read_id_ns(t, d.namespaces[i].nsid) {
                Ok(id) => d.namespaces[i].id = Some(id),
                Err(e) => d.fail(page::IDENTIFY_NS, &e),
            }
        }
    }
    let smart = cmd::read_smart(t);
    // nvsoak's own figures at the same instant as the drive's: the accounting check compares
    // the two, so they must not be taken a stats interval (or a few admin commands) apart.
    let host_io = host.host_io();
    match smart {
        Ok(s) => {
            d.smart = Some(s);
            d.up = true;
        }
        Err(e) => {
            d.up = false;
            d.fail(page::SMART, &e);
        }
    }
    let elpe = d.id.as_ref().map(|i| i.elpe).unwrap_or(15);
    match cmd::read_error_log(t, elpe) {
        Ok(es) => {
            d.errors_seen.update(&es);
            d.derived.error_log_status = d.errors_seen.by_status().clone();
            d.error_log = Some(es);
        }
        Err(e) => d.fail(page::ERROR, &e),
    }
    match cmd::read_fwslot(t) {
        Ok(f) => d.fw_slot = Some(f),
        Err(e) => d.fail(page::FW_SLOT, &e),
    }
    match cmd::read_temp_thresholds(t) {
        Ok(th) => d.thresholds = Some(th),
        Err(e) => d.fail(page::TEMP_THRESHOLD, &e),
    }
    match d.ocp_support {
        OcpSupport::Absent => {}
        OcpSupport::Unknown => {
            // Learn once: a rejected command or a page without the GUID means no OCP page.
            if let Some(id) = d.id.clone() {
                let idx = cmd::ocp_uuid_index(t, &id);
                match cmd::read_ocp(t, idx) {
                    Ok(Some(o)) => {
                        d.ocp = Some(o);
                        d.ocp_support = OcpSupport::Present { uuid_index: idx };
                    }
                    Ok(None) => d.ocp_support = OcpSupport::Absent,
                    Err(e) if e.status().is_some() => d.ocp_support = OcpSupport::Absent,
                    Err(e) => d.fail(page::OCP, &e),
                }
            }
        }
        OcpSupport::Present { uuid_index } => match cmd::read_ocp(t, uuid_index) {
            Ok(Some(o)) => d.ocp = Some(o),
            Ok(None) => {}
            Err(e) => d.fail(page::OCP, &e),
        },
    }
    if d.up {
        // The drive's own view (C1h, C3h, 08h): only from a drive that answered SMART.
        super::ocp_pages::poll(t, d, now, ratings.latency_monitor.as_ref());
    }
    derive_device(d, now, &host_io, ratings);
    if d.up
        && let Some(s) = d.smart.clone()
    {
        let sample = SmartSample {
            time: now,
            smart: s,
            host: host_io
                .iter()
                .filter(|h| host_on_device(h, d))
                .cloned()
                .collect(),
            throttle_events: d.derived.throttle.events,
            throttling: d.derived.throttle.throttling,
        };
        if d.first_sample.is_none() {
            d.first_sample = Some(sample.clone());
        }
        d.last_sample = Some(sample);
    }
}

fn derive_device(d: &mut DeviceHealth, now: f64, host: &[HostIo], ratings: &RatingContext) {
    let cap = d.capacity_bytes();
    // Recomputed each poll: the capacity may only be known once Identify Namespace succeeds.
    d.derived.rated = derive::rated_endurance(
        &ratings.overrides,
        &ratings.table,
        &d.name,
        &d.serial,
        &d.model,
        cap,
    );
    let mine: Vec<&HostIo> = host.iter().filter(|h| host_on_device(h, d)).collect();
    let host_written: u64 = mine.iter().map(|h| h.written_bytes).sum();
    let iops = (!mine.is_empty()).then(|| mine.iter().map(|h| h.iops).sum::<f64>());
    let Some(s) = d.smart.clone() else {
        return;
    };
    if !d.up {
        return; // stale page: don't feed it to the time series again
    }
    d.history.push(now, s.data_units_written, s.percent_used);
    let lifetime = s.data_units_written as f64 * derive::DATA_UNIT_BYTES;
    let rated = d.derived.rated.clone();
    let dwpd_cap = rated
        .as_ref()
        .and_then(|r| r.capacity_bytes)
        .unwrap_or(cap as f64);
    d.derived.endurance_consumed_ratio = rated
        .as_ref()
        .and_then(|r| r.bytes)
        .filter(|b| *b > 0.0)
        .map(|b| lifetime / b);
    d.derived.observed_dwpd_soak = d.history.dwpd_soak(dwpd_cap);
    d.derived.observed_dwpd_24h = d.history.dwpd_24h(dwpd_cap);
    d.derived.projected_wearout_days_tbw = match (
        rated.as_ref().and_then(|r| r.bytes),
        d.history.bytes_per_day_24h(),
    ) {
        (Some(b), Some(bpd)) => derive::days_to_rated(b, lifetime, bpd),
        _ => None,
    };
    d.derived.projected_wearout_days_percentage_used =
        d.history.days_to_percentage_used(now, s.percent_used);
    d.derived.write_amplification = d
        .ocp
        .as_ref()
        .filter(|_| lifetime > 0.0)
        .map(|o| o.physical_media_units_written as f64 / lifetime)
        .filter(|w| *w > 0.0);
    if !mine.is_empty() {
        d.derived.accounting = Some(d.accounting.update(host_written, s.data_units_written));
    }
    let sample = ThermalSample {
        transitions: [s.thm_temp1_trans_count, s.thm_temp2_trans_count],
        seconds: [s.thm_temp1_total_time, s.thm_temp2_total_time],
        temperature_k: s.temperature,
        wctemp_k: d.id.as_ref().map(|i| i.wctemp).unwrap_or(0),
        ocp_status: d.ocp.as_ref().map(|o| o.thermal_throttling_status),
        iops,
    };
    d.derived.throttle = d.throttle.update(sample).clone();
}

/// Open controller `c` and poll it into `d`, timing the poll (run on the controller's own
/// thread by `health::inflight`).
fn poll_opened(
    opener: &Opener,
    c: &Controller,
    d: &mut DeviceHealth,
    now: f64,
    host: &dyn HostIoSource,
    ratings: &RatingContext,
) {
    let started = Instant::now();
    match opener(c) {
        Ok(t) => poll_device(t.as_ref(), d, now, host, ratings),
        Err(e) => {
            d.up = false;
            d.fail(page::OPEN, &e);
        }
    }
    d.poll_duration_seconds = Some(started.elapsed().as_secs_f64());
    d.polls += 1;
}

/// Read every page of one controller once, with fresh state (for `nvsoak health` and tests).
pub fn poll_once(
    t: &dyn AdminTransport,
    c: &Controller,
    ratings: &RatingContext,
    host: &dyn HostIoSource,
) -> DeviceHealth {
    let mut d = DeviceHealth::new(c);
    poll_device(t, &mut d, unix_now(), host, ratings);
    d
}

/// Opens a transport for a controller.
pub type Opener =
    Arc<dyn Fn(&Controller) -> Result<Box<dyn AdminTransport>, NvmeError> + Send + Sync>;

/// The real opener: `IoctlTransport` on the controller's `/dev/nvmeX`.
pub fn ioctl_opener() -> Opener {
    Arc::new(|c: &Controller| {
        IoctlTransport::open(&c.dev_path).map(|t| Box::new(t) as Box<dyn AdminTransport>)
    })
}

/// The synchronous poller: discovery, rescans, per-device state.
pub struct Poller {
    settings: HealthSettings,
    sysfs_root: PathBuf,
    opener: Opener,
    filter: Option<Filter>,
    ratings: Arc<RatingContext>,
    devices: BTreeMap<String, DeviceHealth>,
    inflight: super::inflight::InFlight<DeviceHealth>,
    controllers: BTreeMap<String, Controller>,
    last_rescan: Option<Instant>,
    polls: u64,
    last_timestamp: Option<f64>,
    last_duration: Option<f64>,
    setup_error: Option<String>,
    ata: super::ata::AtaPoller,
    pcie: crate::pcie::PcieSnapshot,
}

impl Poller {
    /// Setup errors (a bad regex, an unreadable ratings file) are kept and exported in the
    /// snapshot rather than stopping the daemon; a bad filter polls nothing.
    pub fn new(settings: HealthSettings, sysfs_root: &Path, opener: Opener) -> Self {
        let mut setup_error = None;
        let filter = match Filter::new(&settings.include, &settings.exclude) {
            Ok(f) => Some(f),
            Err(e) => {
                setup_error = Some(e.to_string());
                None
            }
        };
        let table = match RatingsTable::load(settings.ratings_file.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                setup_error.get_or_insert(format!("{e}; using the built-in table"));
                RatingsTable::builtin()
            }
        };
        if setup_error.is_none() {
            setup_error = crate::pcie::unknown_card_rating(&settings.cards, &table);
        }
        if let Some(e) = &setup_error {
            tracing::error!("health: {e}");
        }
        Poller {
            ratings: Arc::new(RatingContext {
                table,
                overrides: settings.devices.clone(),
                latency_monitor: settings.latency_monitor,
            }),
            inflight: Default::default(),
            settings,
            sysfs_root: sysfs_root.to_path_buf(),
            opener,
            filter,
            devices: BTreeMap::new(),
            controllers: BTreeMap::new(),
            last_rescan: None,
            polls: 0,
            last_timestamp: None,
            last_duration: None,
            setup_error,
            ata: super::ata::AtaPoller::new(super::ata::sgio_opener()),
            pcie: Default::default(),
        }
    }

    /// Reach ATA disks through `opener` instead of `SG_IO` (tests use the replay transport).
    pub fn with_ata_opener(mut self, opener: super::ata::AtaOpener) -> Self {
        self.ata = super::ata::AtaPoller::new(opener);
        self
    }

    /// Drives an earlier run knew (`health::known`): each not known yet is kept as vanished
    /// (`present = false`, exported `nvme_up 0`) until a rescan finds it again.
    pub fn remember(&mut self, drives: &[super::known::KnownDrive]) {
        for k in drives {
            if self.devices.contains_key(&k.name) {
                continue;
            }
            let c = Controller {
                name: k.name.clone(),
                dev_path: PathBuf::from("/dev").join(&k.name),
                serial: k.serial.clone(),
                model: k.model.clone(),
                firmware: k.firmware.clone(),
                namespaces: Vec::new(),
            };
            let mut d = DeviceHealth::new(&c);
            d.present = false;
            d.last_error = Some("not found since the daemon restarted".to_string());
            self.devices.insert(k.name.clone(), d);
        }
    }

    /// Walk sysfs: new controllers are added, vanished ones stay with `present = false`.
    pub fn rescan(&mut self) {
        self.last_rescan = Some(Instant::now());
        let Some(filter) = self.filter.as_ref() else {
            return; // a bad include/exclude rule polls nothing (see setup_error)
        };
        self.ata.rescan(&self.sysfs_root, filter);
        let found = match discover::discover(&self.sysfs_root) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("health: {e}");
                return;
            }
        };
        let found: Vec<Controller> = found.into_iter().filter(|c| filter.allows(c)).collect();
        for d in self.devices.values_mut() {
            d.present = found.iter().any(|c| c.name == d.name);
            if !d.present {
                d.up = false;
            }
        }
        for c in found {
            match self.devices.get_mut(&c.name) {
                Some(d) if d.serial != c.serial && !c.serial.is_empty() && d.id.is_some() => {
                    // Another drive took the name: start over.
                    tracing::info!("health: {} is now serial {}", c.name, c.serial);
                    self.devices.insert(c.name.clone(), DeviceHealth::new(&c));
                }
                Some(d) => {
                    if d.namespaces
                        .iter()
                        .map(|n| &n.name)
                        .ne(c.namespaces.iter().map(|n| &n.name))
                    {
                        d.namespaces = ns_of(&c);
                    }
                }
                None => {
                    // The same drive back under a new name (the kernel hands out the lowest
                    // free instance): it carries its history over, and the old name's series
                    // go instead of reporting a drive that is down forever. Only a vanished
                    // entry qualifies: two live controllers may share a serial (dual port).
                    let returned = (!c.serial.is_empty())
                        .then(|| {
                            self.devices
                                .iter()
                                .find(|(_, d)| !d.present && d.serial == c.serial)
                                .map(|(k, _)| k.clone())
                        })
                        .flatten()
                        .and_then(|old| self.devices.remove(&old));
                    match returned {
                        Some(mut d) => {
                            tracing::info!(
                                "health: {} (serial {}) returned as {}",
                                d.name,
                                c.serial,
                                c.name
                            );
                            self.controllers.remove(&d.name);
                            d.name = c.name.clone();
                            d.dev_path = c.dev_path.clone();
                            d.namespaces = ns_of(&c);
                            d.present = true;
                            self.devices.insert(c.name.clone(), d);
                        }
                        None => {
                            tracing::info!("health: found {} ({} {})", c.name, c.model, c.serial);
                            self.devices.insert(c.name.clone(), DeviceHealth::new(&c));
                        }
                    }
                }
            }
            self.controllers.insert(c.name.clone(), c);
        }
    }

    fn rescan_due(&self) -> bool {
        self.last_rescan
            .is_none_or(|t| t.elapsed() >= self.settings.rescan_interval)
    }

    /// One poll of every present device (rescanning first when due), at Unix time `now`.
    /// Controllers are polled concurrently, each on its own thread; one that has not answered
    /// within half the poll interval is left running and reported (`health::inflight`).
    pub fn poll_at(&mut self, now: f64, host: Arc<dyn HostIoSource>) {
        let start = Instant::now();
        if self.rescan_due() {
            self.rescan();
        }
        let deadline = start + super::inflight::deadline_for(self.settings.poll_interval);
        let (opener, ratings) = (self.opener.clone(), self.ratings.clone());
        let controllers = &self.controllers;
        let h = host.clone();
        let job = |name: &str| -> Option<super::inflight::Job<DeviceHealth>> {
            let c = controllers.get(name)?.clone();
            let (opener, ratings, host) = (opener.clone(), ratings.clone(), h.clone());
            Some(Box::new(move |d: &mut DeviceHealth| {
                poll_opened(&opener, &c, d, now, host.as_ref(), &ratings)
            }))
        };
        self.inflight.dispatch(&mut self.devices, &job, deadline);
        self.ata.poll(now, host, self.ratings.clone(), deadline);
        self.scan_pcie(now);
        self.polls += 1;
        self.last_duration = Some(start.elapsed().as_secs_f64());
        self.last_timestamp = Some(unix_now());
    }

    /// Topology, link figures and AER counters of the present controllers, read on every poll
    /// (sysfs only: no ioctl, so a hung controller does not hold it up).
    fn scan_pcie(&mut self, now: f64) {
        let present: Vec<(String, String)> = self
            .devices
            .values()
            .filter(|d| d.present)
            .map(|d| (d.name.clone(), d.serial.clone()))
            .collect();
        let names: Vec<String> = present.iter().map(|(n, _)| n.clone()).collect();
        let mut snap = crate::pcie::scan(&self.sysfs_root, &names, Some(&self.pcie), now);
        crate::pcie::rate_cards(
            &mut snap,
            &self.settings.cards,
            &self.ratings.table,
            &present,
        );
        self.pcie = snap;
    }

    pub fn poll(&mut self, host: Arc<dyn HostIoSource>) {
        self.poll_at(unix_now(), host);
    }

    /// Whether controller `name` has a poll still running past its deadline.
    pub fn is_polling(&self, name: &str) -> bool {
        self.inflight.is_pending(name)
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        HealthSnapshot {
            devices: self.devices.values().cloned().collect(),
            ata: self.ata.snapshot(),
            poll_timestamp_seconds: self.last_timestamp,
            poll_duration_seconds: self.last_duration,
            polls: self.polls,
            setup_error: self.setup_error.clone(),
            pcie: self.pcie.clone(),
        }
    }

    pub fn device(&self, name: &str) -> Option<&DeviceHealth> {
        self.devices.get(name)
    }

    pub fn ata_disk(&self, name: &str) -> Option<&super::ata::AtaHealth> {
        self.ata.disk(name)
    }
}

/// The daemon's view of the background poller. Cheap to clone.
#[derive(Clone)]
pub struct HealthHandle {
    snap: Arc<RwLock<Arc<HealthSnapshot>>>,
    kick: Arc<tokio::sync::Notify>,
}

impl HealthHandle {
    /// The latest poll's snapshot (empty before the first poll completes).
    pub fn snapshot(&self) -> Arc<HealthSnapshot> {
        self.snap
            .read()
            .map(|g| Arc::clone(&g))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Ask for a poll now instead of at the next interval.
    pub fn poll_now(&self) {
        self.kick.notify_one();
    }

    /// Wait until a snapshot with at least `polls` polls is published, or `timeout` passes.
    pub async fn wait_for_polls(
        &self,
        polls: u64,
        timeout: Duration,
    ) -> Option<Arc<HealthSnapshot>> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.snapshot();
            if s.polls >= polls {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Start the background poller on the current tokio runtime; it stops when `stop` turns true
/// or its sender is dropped. With `settings.enabled` false it publishes an empty snapshot and
/// never polls.
pub fn spawn(
    settings: HealthSettings,
    host: Arc<dyn HostIoSource>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> HealthHandle {
    spawn_with(settings, host, stop, PathBuf::from("/sys"), ioctl_opener())
}

/// [`spawn`] with the sysfs root and the transport opener chosen by the caller (tests use a
/// fake sysfs tree and the replay transport).
pub fn spawn_with(
    settings: HealthSettings,
    host: Arc<dyn HostIoSource>,
    stop: tokio::sync::watch::Receiver<bool>,
    sysfs_root: PathBuf,
    opener: Opener,
) -> HealthHandle {
    if !settings.enabled {
        return HealthHandle {
            snap: Arc::new(RwLock::new(Arc::new(HealthSnapshot::default()))),
            kick: Arc::new(tokio::sync::Notify::new()),
        };
    }
    spawn_prepared(Poller::new(settings, &sysfs_root, opener), host, stop)
}

/// [`spawn_with`] for a poller built (and maybe polled) by the caller: the daemon polls once
/// before its targets start, for a soak-start baseline taken before the first write. Its
/// snapshot is published at once; the background loop polls again right away.
pub fn spawn_prepared(
    poller: Poller,
    host: Arc<dyn HostIoSource>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> HealthHandle {
    let handle = HealthHandle {
        snap: Arc::new(RwLock::new(Arc::new(poller.snapshot()))),
        kick: Arc::new(tokio::sync::Notify::new()),
    };
    if !poller.settings.enabled {
        return handle;
    }
    let h = handle.clone();
    let interval = poller.settings.poll_interval.max(Duration::from_millis(10));
    tokio::spawn(async move {
        let mut poller = Some(poller);
        loop {
            if *stop.borrow() {
                break;
            }
            let Some(mut p) = poller.take() else { break };
            let src = host.clone();
            let began = Instant::now();
            let joined = tokio::task::spawn_blocking(move || {
                p.poll(src);
                let snap = p.snapshot();
                (p, snap)
            })
            .await;
            match joined {
                Ok((p, snap)) => {
                    poller = Some(p);
                    if let Ok(mut g) = h.snap.write() {
                        *g = Arc::new(snap);
                    }
                }
                Err(e) => {
                    tracing::error!("health: the poll task failed: {e}; health polling stops");
                    break;
                }
            }
            // Polls start an interval apart, however long this one took.
            let rest = interval.saturating_sub(began.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(rest) => {}
                _ = h.kick.notified() => {}
                r = stop.changed() => { if r.is_err() { break; } }
            }
        }
    });
    handle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::NoHostIo;
    use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use crate::nvme::discover::fake;
    use crate::nvme::identify::testdata as idt;
    use crate::nvme::log::{
        error::testdata as errt, fwslot::testdata as fwt, smart::testdata as smt,
    };
    use crate::nvme::replay::{ReplayTransport, Reply};

    fn full_replay(dev: &str) -> ReplayTransport {
        let t = ReplayTransport::new(dev);
        t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(idt::id_ctrl(), 0));
        t.on_loose(OPC_IDENTIFY, 0x00, Reply::Data(idt::id_ns(), 0));
        t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smt::smart(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Data(errt::error_log(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x03, Reply::Data(fwt::fw_slot(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Status(0x4109));
        t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Status(0x4109));
        t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
        t
    }

    fn ctrl() -> Controller {
        Controller {
            name: "nvme0".into(),
            dev_path: "/dev/nvme0".into(),
            serial: "sysfs-serial".into(),
            model: "sysfs-model".into(),
            firmware: "x".into(),
            namespaces: vec![discover::Namespace {
                name: "nvme0n1".into(),
                nsid: 1,
                dev_path: "/dev/nvme0n1".into(),
            }],
        }
    }

    #[test]
    fn poll_once_reads_every_page() {
        let t = full_replay("/dev/nvme0");
        let d = poll_once(&t, &ctrl(), &RatingContext::default(), &NoHostIo);
        assert!(d.up);
        assert_eq!(
            d.serial, "SN-HANDBUILT-0001",
            "identify replaces the sysfs strings"
        );
        assert_eq!(d.smart.as_ref().map(|s| s.temperature), Some(318));
        assert_eq!(d.error_log.as_ref().map(|e| e.len()), Some(3));
        assert_eq!(d.fw_slot.as_ref().map(|f| f.active_slot()), Some(2));
        assert_eq!(d.thresholds.map(|t| t.over_kelvin), Some(343));
        assert_eq!(
            d.namespaces[0].id.as_ref().map(|n| n.lba_size()),
            Some(4096)
        );
        assert_eq!(
            d.ocp_support,
            OcpSupport::Absent,
            "rejected C0h = no OCP page, not an error"
        );
        assert!(d.poll_errors.is_empty(), "{:?}", d.poll_errors);
        // Identify, namespace, SMART, error (ELPE 62 -> 63 entries), fw slot, 2 features,
        // UUID list (CTRATT bit 9), C0h, the telemetry header (LPA bit 3).
        let ops: Vec<(u8, u32)> = t
            .sent()
            .iter()
            .map(|c| (c.opcode, c.cdw10 & 0xff))
            .collect();
        assert_eq!(
            ops,
            vec![
                (6, 1),
                (6, 0),
                (2, 2),
                (2, 1),
                (2, 3),
                (0xa, 4),
                (0xa, 4),
                (6, 0x17),
                (2, 0xc0),
                (2, 0x08)
            ]
        );
    }

    #[test]
    fn a_failed_page_leaves_the_others_in_place() {
        let t = full_replay("/dev/nvme0");
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        poll_device(&t, &mut d, 1000.0, &NoHostIo, &ctx);
        // The error log and SMART now fail; everything else keeps its last value.
        t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Status(0x0006));
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Errno(libc::EIO));
        poll_device(&t, &mut d, 1030.0, &NoHostIo, &ctx);
        assert!(!d.up, "nvme_up follows the SMART read");
        assert_eq!(
            d.smart.as_ref().map(|s| s.temperature),
            Some(318),
            "last SMART kept"
        );
        assert_eq!(
            d.error_log.as_ref().map(|e| e.len()),
            Some(3),
            "last error log kept"
        );
        assert_eq!(d.poll_errors.get(page::ERROR), Some(&1));
        assert_eq!(d.poll_errors.get(page::SMART), Some(&1));
        assert_eq!(d.poll_errors.get(page::FW_SLOT), None);
        assert!(
            d.last_error
                .as_deref()
                .is_some_and(|m| m.contains("reading")),
            "{:?}",
            d.last_error
        );
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smt::smart(), 0));
        poll_device(&t, &mut d, 1060.0, &NoHostIo, &ctx);
        assert!(d.up);
        assert_eq!(d.poll_errors.get(page::ERROR), Some(&2));
    }

    #[test]
    fn accounting_matches_host_io_by_namespace() {
        let t = full_replay("/dev/nvme0");
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        let host = |w: u64| {
            vec![
                HostIo {
                    path: "/dev/nvme0n1".into(),
                    written_bytes: w,
                    iops: 100.0,
                    ..Default::default()
                },
                HostIo {
                    path: "/dev/nvme1n1".into(),
                    written_bytes: 999_999_999,
                    ..Default::default()
                },
            ]
        };
        poll_device(&t, &mut d, 0.0, &host(0), &ctx);
        let mut page = smt::smart();
        let duw = crate::nvme::log::smart::parse(&page)
            .expect("parse")
            .data_units_written;
        page[48..64].copy_from_slice(&(duw + 10).to_le_bytes());
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(page, 0));
        poll_device(&t, &mut d, 30.0, &host(5_120_000), &ctx);
        let a = d.derived.accounting.expect("accounting");
        assert_eq!(a.host_written_bytes, 5_120_000.0);
        assert_eq!(a.drive_written_bytes, 5_120_000.0);
        assert_eq!(a.ratio, Some(1.0));
        assert_eq!(d.derived.throttle.unthrottled_iops, Some(100.0));
    }

    #[test]
    fn smart_samples_keep_the_first_read_and_follow_the_latest() {
        let t = full_replay("/dev/nvme0");
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        let host = |w: u64| {
            vec![
                HostIo {
                    path: "/dev/nvme0n1".into(),
                    written_bytes: w,
                    ..Default::default()
                },
                HostIo {
                    path: "/dev/nvme1n1".into(),
                    written_bytes: 1,
                    ..Default::default()
                },
            ]
        };
        poll_device(&t, &mut d, 10.0, &host(100), &ctx);
        let first = d.first_sample.clone().expect("first sample");
        assert_eq!(first.time, 10.0);
        assert_eq!(first.host.len(), 1, "only the targets on this drive");
        assert_eq!(first.host[0].written_bytes, 100);
        assert_eq!(Some(&first.smart), d.smart.as_ref());
        poll_device(&t, &mut d, 40.0, &host(200), &ctx);
        assert_eq!(
            d.first_sample.as_ref(),
            Some(&first),
            "the first read stays"
        );
        assert_eq!(d.last_sample.as_ref().map(|s| s.time), Some(40.0));
        // A failed SMART read leaves the latest sample at the last good one.
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Errno(libc::EIO));
        poll_device(&t, &mut d, 70.0, &host(300), &ctx);
        let last = d.last_sample.as_ref().expect("last");
        assert_eq!((last.time, last.host[0].written_bytes), (40.0, 200));
    }

    /// The host figures are read right after the SMART command, before any other page, so the
    /// accounting check compares two figures of the same instant.
    #[test]
    fn host_io_is_read_right_after_the_smart_command() {
        struct Probe {
            t: Arc<ReplayTransport>,
            seen: std::sync::Mutex<Vec<(u8, u32)>>,
        }
        impl HostIoSource for Probe {
            fn host_io(&self) -> Vec<HostIo> {
                let sent = self.t.sent();
                let last = sent.last().map(|c| (c.opcode, c.cdw10)).unwrap_or((0, 0));
                self.seen.lock().expect("lock").push(last);
                Vec::new()
            }
        }
        let t = Arc::new(full_replay("/dev/nvme0"));
        let probe = Probe {
            t: Arc::clone(&t),
            seen: std::sync::Mutex::new(Vec::new()),
        };
        let mut d = DeviceHealth::new(&ctrl());
        poll_device(t.as_ref(), &mut d, 0.0, &probe, &RatingContext::default());
        let seen = probe.seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1, "one read per device poll");
        assert_eq!(seen[0].0, OPC_GET_LOG_PAGE);
        assert_eq!(
            seen[0].1 & 0xff,
            0x02,
            "the last command before it was SMART 02h"
        );
        assert!(
            t.sent().len() > 3 + 1,
            "other pages were read after it: {}",
            t.sent().len()
        );
    }

    /// A poller over the fake sysfs tree at `root`, rescanning at every poll, every controller
    /// answered by the same replayed drive.
    fn replay_poller(root: &Path) -> Poller {
        let t: Arc<ReplayTransport> = Arc::new(full_replay("/dev/nvme0"));
        let opener: Opener =
            Arc::new(
                move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>),
            );
        let mut s = crate::config::builtin_default().health;
        s.rescan_interval = Duration::ZERO;
        Poller::new(s, root, opener)
    }

    /// A controller whose admin commands block until the test opens the gate: a hung ioctl.
    struct Hung {
        inner: Arc<ReplayTransport>,
        open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    }

    impl AdminTransport for Hung {
        fn device(&self) -> String {
            self.inner.device()
        }
        fn admin(&self, cmd: &crate::nvme::AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*open {
                open = cv.wait(open).unwrap_or_else(|e| e.into_inner());
            }
            drop(open);
            self.inner.admin(cmd, data)
        }
    }

    /// One hung controller among several: the others are polled at every poll, the hung one is
    /// reported (down, `timeout` errors, a growing poll duration) and not polled twice at once,
    /// and its late answer is taken once it comes.
    #[test]
    fn a_hung_controller_does_not_hold_up_the_others() {
        let root = tempfile::tempdir().expect("tempdir");
        for i in 0..6 {
            fake::add_ctrl(
                root.path(),
                &format!("nvme{i}"),
                &format!("S{i}"),
                "M",
                &[1],
            );
        }
        let good: Arc<ReplayTransport> = Arc::new(full_replay("/dev/nvme0"));
        let open = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let opened_hung = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (g, o, n) = (good.clone(), open.clone(), opened_hung.clone());
        let opener: Opener = Arc::new(move |c: &Controller| {
            if c.name == "nvme3" {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let inner = Arc::new(full_replay("/dev/nvme3"));
                let open = o.clone();
                return Ok(Box::new(Hung { inner, open }) as Box<dyn AdminTransport>);
            }
            Ok(Box::new(Arc::clone(&g)) as Box<dyn AdminTransport>)
        });
        let mut s = crate::config::builtin_default().health;
        s.poll_interval = Duration::from_millis(400); // deadline 200 ms
        let mut p = Poller::new(s, root.path(), opener);
        for round in 1..=3u64 {
            p.poll_at(round as f64, Arc::new(NoHostIo));
            for i in [0, 1, 2, 4, 5] {
                let d = p.device(&format!("nvme{i}")).expect("listed");
                assert_eq!(d.polls, round, "nvme{i} polled every round");
                assert!(d.up, "nvme{i} up");
                assert_eq!(d.poll_errors.get(page::TIMEOUT), None);
            }
            let h = p.device("nvme3").expect("listed");
            assert!(!h.up, "the hung controller is down");
            assert_eq!(h.polls, 0);
            assert_eq!(h.poll_errors.get(page::TIMEOUT).copied(), Some(round));
            assert!(h.poll_duration_seconds.unwrap_or(0.0) > 0.0);
            assert!(p.is_polling("nvme3"));
        }
        assert_eq!(
            opened_hung.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "no second poll piles up behind the hung one"
        );
        let stuck_for = p.device("nvme3").and_then(|d| d.poll_duration_seconds);
        // Release it: its thread finishes, and the next poll takes the answer first.
        {
            let (lock, cv) = &*open;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        let mut rounds = 0;
        while p.is_polling("nvme3") || p.device("nvme3").is_some_and(|d| d.polls < 2) {
            rounds += 1;
            assert!(
                rounds < 200,
                "the released controller's answer never arrived"
            );
            p.poll_at(10.0 + rounds as f64, Arc::new(NoHostIo));
        }
        let h = p.device("nvme3").expect("listed");
        assert!(h.up, "answered once released");
        assert_eq!(h.serial, "SN-HANDBUILT-0001");
        assert!(
            h.poll_errors.get(page::TIMEOUT).copied().unwrap_or(0) >= 3,
            "timeouts kept"
        );
        assert!(
            h.poll_duration_seconds < stuck_for,
            "a normal poll's duration again"
        );
        let snap = p.snapshot();
        let text =
            crate::metrics::encode_text(&crate::metrics::health::families(&snap)).expect("encode");
        assert!(
            text.contains("nvsoak_health_poll_errors_total{device=\"nvme3\",log=\"timeout\"}"),
            "{text}"
        );
        assert!(text.contains("nvsoak_health_device_poll_duration_seconds{device=\"nvme0\"}"));
    }

    #[test]
    fn vanished_drive_stays_with_up_zero_and_returns() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        let mut p = replay_poller(root.path());
        p.poll_at(0.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").expect("found").up);
        std::fs::remove_dir_all(root.path().join("class/nvme/nvme0")).expect("unplug");
        p.poll_at(30.0, Arc::new(NoHostIo));
        let d = p.device("nvme0").expect("still listed");
        assert!(!d.present);
        assert!(!d.up);
        assert!(d.smart.is_some(), "last values kept");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        fake::add_ctrl(root.path(), "nvme1", "S2", "M", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").expect("back").up);
        assert!(p.device("nvme1").is_some(), "hot-added drive appears");
        assert_eq!(p.snapshot().polls, 3);
    }

    #[test]
    fn drive_returning_under_a_new_name_carries_over_and_drops_the_old_name() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        fake::add_ctrl(root.path(), "nvme1", "SN-OTHER", "M", &[1]);
        let mut p = replay_poller(root.path());
        p.poll_at(0.0, Arc::new(NoHostIo));
        let serial = p.device("nvme0").expect("found").serial.clone();
        std::fs::remove_dir_all(root.path().join("class/nvme/nvme0")).expect("unplug");
        p.poll_at(30.0, Arc::new(NoHostIo));
        assert!(!p.device("nvme0").expect("still listed").present);
        // Back as nvme2 (nvme1 is another drive, present all along).
        fake::add_ctrl(root.path(), "nvme2", &serial, "M", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").is_none(), "the old name's entry is gone");
        let d = p.device("nvme2").expect("returned");
        assert!(d.present && d.up);
        assert_eq!(d.name, "nvme2");
        assert_eq!(d.namespaces[0].name, "nvme2n1");
        assert_eq!(
            d.history.len(),
            2,
            "the write history carried over (a fresh entry would have one sample)"
        );
        assert!(p.device("nvme1").is_some_and(|d| d.present));
        assert_eq!(p.snapshot().devices.len(), 2);
    }

    #[test]
    fn drives_an_earlier_run_knew_are_exported_down_until_found() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        let mut first = replay_poller(root.path());
        first.poll_at(0.0, Arc::new(NoHostIo));
        let mut known = first.snapshot().known();
        known.push(super::super::known::KnownDrive {
            name: "nvme7".into(),
            serial: "GONE7".into(),
            model: "OLD MODEL".into(),
            firmware: "F7".into(),
        });
        // The next run: nvme7 is not in sysfs any more.
        let mut p = replay_poller(root.path());
        p.remember(&known);
        p.poll_at(30.0, Arc::new(NoHostIo));
        let gone = p.device("nvme7").expect("remembered");
        assert!(!gone.present && !gone.up);
        assert!(p.device("nvme0").expect("found").up);
        let text = crate::metrics::encode_text(&crate::metrics::health::families(&p.snapshot()))
            .expect("encode");
        assert!(text.contains("nvme_up{device=\"nvme7\"} 0"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("nvme_info{") && l.contains("GONE7") && l.contains("nvme7")),
            "{text}"
        );
        // It comes back: up again, under its name.
        fake::add_ctrl(root.path(), "nvme7", "GONE7", "OLD MODEL", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme7").expect("back").up);
    }
}
