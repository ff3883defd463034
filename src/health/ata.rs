//! The health poller's ATA side: SATA disks found in sysfs (`ata::discover`), polled through
//! an [`AtaTransport`] (IDENTIFY once, SMART READ DATA + THRESHOLDS, RETURN STATUS and the
//! Device Statistics log every poll), and the same endurance and thermal derivations as NVMe
//! drives ([`Derived`], the same `nvsoak_*` metric names).
//!
//! A command the drive aborts is "not supported" for that drive: remembered, logged once, not
//! asked again and not counted as a poll error. A missing `CAP_SYS_RAWIO` is one message for
//! the whole poller, logged once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::ata_sample::{AtaCounters, AtaSample};
use super::derive::{self, AccountingTracker, ThermalSample, ThrottleTracker, WriteHistory};
use super::poller::{Derived, RatingContext};
use super::{HostIo, HostIoSource};
use crate::ata::devstat::DeviceStats;
use crate::ata::discover::{self, AtaDisk};
use crate::ata::identify::Identify;
use crate::ata::smart::{Attribute, SmartStatus};
use crate::ata::transport::SgIo;
use crate::ata::vendor::{self, Family, WritesSource};
use crate::ata::{AtaError, AtaTransport, cmd};
use crate::nvme::discover::{Controller, Filter};

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
    history: WriteHistory,
    #[serde(skip)]
    accounting: AccountingTracker,
    #[serde(skip)]
    throttle: ThrottleTracker,
    #[serde(skip)]
    last_by_page: BTreeMap<&'static str, String>,
    /// The disk vanished and came back: IDENTIFY again to see whether it is the same drive.
    #[serde(skip)]
    reidentify: bool,
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

    fn fail(&mut self, page: &'static str, e: &AtaError, warned: &mut bool) {
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
    fn refuse(&mut self, what: &'static str, why: String) {
        if !self.unsupported.contains_key(what) {
            tracing::info!("health: {}: {why}; not asked again", self.name);
            self.unsupported.insert(what, why);
        }
    }

    pub fn supports(&self, what: &str) -> bool {
        !self.unsupported.contains_key(what)
    }
}

impl super::inflight::Polled for AtaHealth {
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
fn host_on_disk(host: &HostIo, d: &AtaHealth) -> bool {
    let p = std::fs::canonicalize(&host.path).unwrap_or_else(|_| host.path.clone());
    let Some(name) = p.file_name().map(|n| n.to_string_lossy().to_string()) else {
        return false;
    };
    name == d.name
        || name
            .strip_prefix(d.name.as_str())
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
}

/// IDENTIFY; false when the command was refused for lack of the capability (every other
/// command would be too).
fn read_identify(t: &dyn AtaTransport, d: &mut AtaHealth, warned: &mut bool) -> bool {
    match cmd::read_identify(t) {
        Ok(id) => {
            d.reidentify = false;
            if !d.serial.is_empty() && d.serial != id.serial {
                tracing::info!("health: {} is now serial {}", d.name, id.serial);
                let disk = AtaDisk {
                    name: d.name.clone(),
                    dev_path: d.dev_path.clone(),
                    model: String::new(),
                    firmware: String::new(),
                    wwid: String::new(),
                };
                *d = AtaHealth::new(&disk);
            }
            d.serial = id.serial.clone();
            d.model = id.model.clone();
            d.firmware = id.firmware.clone();
            d.wwn = id.wwn_string().unwrap_or_default();
            d.family = vendor::family(&id.model);
            if !id.smart_supported {
                d.refuse(
                    feature::SMART,
                    "IDENTIFY says SMART is not supported".into(),
                );
            }
            if !id.gpl_supported {
                d.refuse(
                    feature::DEVSTAT,
                    "Device Statistics not supported (IDENTIFY: no General Purpose Logging)".into(),
                );
            }
            d.identify = Some(id);
            true
        }
        Err(e) => {
            d.fail(page::IDENTIFY, &e, warned);
            !e.is_permission()
        }
    }
}

/// SMART READ DATA + THRESHOLDS; the host figures are read right after it (same instant).
fn read_attributes(
    t: &dyn AtaTransport,
    d: &mut AtaHealth,
    host: &dyn HostIoSource,
    warned: &mut bool,
) -> Vec<HostIo> {
    let r = cmd::read_smart_attributes(t);
    let host_io = host.host_io();
    match r {
        Ok(mut table) => {
            vendor::name_attributes(d.family, &mut table);
            d.attributes = Some(table);
            d.up = true;
        }
        Err(e) if e.is_not_supported() => {
            d.up = false;
            d.refuse(feature::SMART, e.to_string());
        }
        Err(e) => {
            d.up = false;
            d.fail(page::SMART, &e, warned);
        }
    }
    host_io
}

fn read_status(t: &dyn AtaTransport, d: &mut AtaHealth, warned: &mut bool) {
    if !d.supports(feature::SMART_STATUS) {
        return;
    }
    match cmd::read_smart_status(t) {
        Ok(s) => {
            if !s.passed() && d.smart_status != Some(s) {
                tracing::warn!(
                    "health: {}: SMART RETURN STATUS says a pre-failure attribute is at or below its threshold",
                    d.name
                );
            }
            d.smart_status = Some(s);
        }
        Err(e) if e.is_not_supported() => d.refuse(feature::SMART_STATUS, e.to_string()),
        Err(e) => d.fail(page::SMART_STATUS, &e, warned),
    }
}

fn read_devstat(t: &dyn AtaTransport, d: &mut AtaHealth, warned: &mut bool) {
    if !d.supports(feature::DEVSTAT) {
        return;
    }
    match cmd::read_device_statistics(t, d.logical_sector_size()) {
        Ok(s) => d.devstat = Some(s),
        Err(e) if e.is_not_supported() => d.refuse(feature::DEVSTAT, e.to_string()),
        Err(e) => d.fail(page::DEVSTAT, &e, warned),
    }
}

/// Poll one disk through `t` and update its derivations. `now` is Unix time; `warned` is the
/// poller's "the missing capability was logged" flag.
pub fn poll_disk(
    t: &dyn AtaTransport,
    d: &mut AtaHealth,
    now: f64,
    host: &dyn HostIoSource,
    ratings: &RatingContext,
    warned: &mut bool,
) {
    if (d.identify.is_none() || d.reidentify) && !read_identify(t, d, warned) {
        d.up = false;
        return;
    }
    let host_io = if d.supports(feature::SMART) {
        read_attributes(t, d, host, warned)
    } else {
        host.host_io()
    };
    if d.supports(feature::SMART) {
        read_status(t, d, warned);
    }
    if d.identify.is_some() {
        // The sector size and the GPL bit come from IDENTIFY.
        read_devstat(t, d, warned);
    }
    derive_disk(d, now, &host_io, ratings);
    if d.up {
        let sample = AtaSample {
            time: now,
            counters: AtaCounters::of(d),
            host: host_io
                .iter()
                .filter(|h| host_on_disk(h, d))
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

/// The NVMe derivations, fed from what an ATA drive reports.
fn derive_disk(d: &mut AtaHealth, now: f64, host: &[HostIo], ratings: &RatingContext) {
    let cap = d.capacity_bytes();
    d.derived.rated = derive::rated_endurance(
        &ratings.overrides,
        &ratings.table,
        &d.name,
        &d.serial,
        &d.model,
        cap,
    );
    let attrs = d.attributes.clone().unwrap_or_default();
    let lss = d.logical_sector_size();
    d.lifetime_written = vendor::host_writes(d.family, &attrs, d.devstat.as_ref(), lss);
    if !d.up {
        return; // stale figures: don't feed them to the time series again
    }
    let mine: Vec<&HostIo> = host.iter().filter(|h| host_on_disk(h, d)).collect();
    let host_written: u64 = mine.iter().map(|h| h.written_bytes).sum();
    let iops = (!mine.is_empty()).then(|| mine.iter().map(|h| h.iops).sum::<f64>());
    let pu = d.devstat.as_ref().and_then(|s| s.percentage_used);
    if let Some((bytes, _)) = d.lifetime_written {
        feed_writes(
            d,
            now,
            bytes,
            pu,
            cap,
            (!mine.is_empty()).then_some(host_written),
        );
        d.derived.write_amplification = vendor::flash_writes(d.family, &attrs)
            .filter(|_| bytes > 0)
            .map(|f| f as f64 / bytes as f64)
            .filter(|w| *w > 0.0);
    }
    let ds = d.devstat.as_ref();
    let to_k = |c: i16| u16::try_from(i32::from(c) + 273).unwrap_or(0);
    let sample = ThermalSample {
        transitions: [0, 0],
        seconds: [
            ds.and_then(|s| s.time_over_temperature_seconds)
                .map(|s| u32::try_from(s).unwrap_or(u32::MAX))
                .unwrap_or(0),
            0,
        ],
        temperature_k: vendor::temperature(&attrs, ds).map(to_k).unwrap_or(0),
        wctemp_k: ds
            .and_then(|s| s.specified_max_temperature)
            .map(|c| to_k(i16::from(c)))
            .unwrap_or(0),
        ocp_status: None,
        iops,
    };
    d.derived.throttle = d.throttle.update(sample).clone();
}

fn feed_writes(
    d: &mut AtaHealth,
    now: f64,
    lifetime: u128,
    percentage_used: Option<u8>,
    cap: u64,
    host_written: Option<u64>,
) {
    d.history
        .push_bytes(now, lifetime, percentage_used.unwrap_or(0));
    let rated = d.derived.rated.clone();
    let dwpd_cap = rated
        .as_ref()
        .and_then(|r| r.capacity_bytes)
        .unwrap_or(cap as f64);
    let lifetime_f = lifetime as f64;
    d.derived.endurance_consumed_ratio = rated
        .as_ref()
        .and_then(|r| r.bytes)
        .filter(|b| *b > 0.0)
        .map(|b| lifetime_f / b);
    d.derived.observed_dwpd_soak = d.history.dwpd_soak(dwpd_cap);
    d.derived.observed_dwpd_24h = d.history.dwpd_24h(dwpd_cap);
    d.derived.projected_wearout_days_tbw = match (
        rated.as_ref().and_then(|r| r.bytes),
        d.history.bytes_per_day_24h(),
    ) {
        (Some(b), Some(bpd)) => derive::days_to_rated(b, lifetime_f, bpd),
        _ => None,
    };
    d.derived.projected_wearout_days_percentage_used =
        percentage_used.and_then(|p| d.history.days_to_percentage_used(now, p));
    if let Some(h) = host_written {
        d.derived.accounting = Some(d.accounting.update_bytes(h, lifetime));
    }
}

/// Opens a transport for a disk.
pub type AtaOpener = Arc<dyn Fn(&AtaDisk) -> Result<Box<dyn AtaTransport>, AtaError> + Send + Sync>;

/// The real opener: `SG_IO` on the disk's `/dev/sdX`.
pub fn sgio_opener() -> AtaOpener {
    Arc::new(|d: &AtaDisk| SgIo::open(&d.dev_path).map(|t| Box::new(t) as Box<dyn AtaTransport>))
}

/// The include/exclude rules apply to disks as to controllers: name, serial, model.
fn allowed(filter: &Filter, d: &AtaDisk, serial: &str) -> bool {
    filter.allows(&Controller {
        name: d.name.clone(),
        dev_path: d.dev_path.clone(),
        serial: serial.to_string(),
        model: d.model.clone(),
        firmware: d.firmware.clone(),
        namespaces: Vec::new(),
    })
}

/// The ATA disks the poller knows, and how it reaches them.
pub struct AtaPoller {
    opener: AtaOpener,
    disks: BTreeMap<String, AtaHealth>,
    found: BTreeMap<String, AtaDisk>,
    /// The missing-capability warning is logged once for all disks, from any poll thread.
    permission_warned: Arc<AtomicBool>,
    inflight: super::inflight::InFlight<AtaHealth>,
}

impl AtaPoller {
    pub fn new(opener: AtaOpener) -> Self {
        AtaPoller {
            opener,
            disks: BTreeMap::new(),
            found: BTreeMap::new(),
            permission_warned: Arc::new(AtomicBool::new(false)),
            inflight: Default::default(),
        }
    }

    /// Walk `<sysfs_root>/block`: new disks are added, vanished ones stay with
    /// `present = false`. A disk that comes back is identified again: the same serial keeps
    /// its history, another drive under the name starts over.
    pub fn rescan(&mut self, sysfs_root: &Path, filter: &Filter) {
        let found = match discover::discover(sysfs_root) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(
                    "health: cannot list SATA disks in {}: {e}",
                    sysfs_root.join("block").display()
                );
                return;
            }
        };
        let found: Vec<AtaDisk> = found
            .into_iter()
            .filter(|d| {
                let serial = self.disks.get(&d.name).map(|h| h.serial.as_str());
                allowed(filter, d, serial.unwrap_or(""))
            })
            .collect();
        let names: BTreeSet<&str> = found.iter().map(|d| d.name.as_str()).collect();
        for h in self.disks.values_mut() {
            let present = names.contains(h.name.as_str());
            if present && !h.present {
                h.reidentify = true;
            }
            h.present = present;
            if !h.present {
                h.up = false;
            }
        }
        for disk in found {
            if !self.disks.contains_key(&disk.name) {
                tracing::info!("health: found SATA disk {} ({})", disk.name, disk.model);
                self.disks.insert(disk.name.clone(), AtaHealth::new(&disk));
            }
            self.found.insert(disk.name.clone(), disk);
        }
    }

    /// One poll of every present disk, each on its own thread, waiting for them until
    /// `deadline` (see `health::inflight`).
    pub fn poll(
        &mut self,
        now: f64,
        host: Arc<dyn HostIoSource>,
        ratings: Arc<RatingContext>,
        deadline: std::time::Instant,
    ) {
        let (opener, warned, found) = (&self.opener, &self.permission_warned, &self.found);
        let job = |name: &str| -> Option<super::inflight::Job<AtaHealth>> {
            let disk = found.get(name)?.clone();
            let (opener, warned) = (opener.clone(), warned.clone());
            let (host, ratings) = (host.clone(), ratings.clone());
            Some(Box::new(move |d: &mut AtaHealth| {
                let started = std::time::Instant::now();
                let mut w = warned.load(Ordering::Relaxed);
                match opener(&disk) {
                    Ok(t) => poll_disk(t.as_ref(), d, now, host.as_ref(), &ratings, &mut w),
                    Err(e) => {
                        d.up = false;
                        d.fail(page::OPEN, &e, &mut w);
                    }
                }
                if w {
                    warned.store(true, Ordering::Relaxed);
                }
                d.poll_duration_seconds = Some(started.elapsed().as_secs_f64());
                d.polls += 1;
            }))
        };
        self.inflight.dispatch(&mut self.disks, &job, deadline);
    }

    /// Whether disk `name` has a poll still running past its deadline.
    pub fn is_polling(&self, name: &str) -> bool {
        self.inflight.is_pending(name)
    }

    pub fn snapshot(&self) -> Vec<AtaHealth> {
        self.disks.values().cloned().collect()
    }

    pub fn disk(&self, name: &str) -> Option<&AtaHealth> {
        self.disks.get(name)
    }
}

/// Read one disk once, with fresh state (for `nvsoak health` and tests).
pub fn poll_once(
    t: &dyn AtaTransport,
    disk: &AtaDisk,
    ratings: &RatingContext,
    host: &dyn HostIoSource,
) -> AtaHealth {
    let mut d = AtaHealth::new(disk);
    let mut warned = false;
    poll_disk(
        t,
        &mut d,
        crate::util::unix_now(),
        host,
        ratings,
        &mut warned,
    );
    d
}

/// The hand-built IronWolf 110 drive, shared by the tests here and in `metrics::ata`.
#[cfg(test)]
pub(crate) mod testdata {
    use super::*;
    use crate::ata::transport::{Replay, Reply};
    use crate::ata::{
        AtaRegs, RegSource, devstat::testdata as ds, identify, smart::testdata as st,
    };

    pub fn good() -> AtaRegs {
        AtaRegs {
            status: 0x50,
            source: RegSource::Descriptor,
            ..AtaRegs::default()
        }
    }

    pub fn status_regs(passed: bool) -> AtaRegs {
        AtaRegs {
            lba: if passed { 0xc2_4f00 } else { 0x2c_f400 },
            ..good()
        }
    }

    /// Every command answered: the hand-built IronWolf 110 pages.
    pub fn full_replay(dev: &str) -> Replay {
        let t = Replay::new(dev);
        t.on(
            &cmd::identify(),
            Reply::Regs(identify::testdata::identify(true), good()),
        );
        t.on(&cmd::smart_read_data(), Reply::Regs(st::data(), good()));
        t.on(
            &cmd::smart_read_thresholds(),
            Reply::Regs(st::thresholds(), good()),
        );
        t.on(
            &cmd::smart_return_status(),
            Reply::Regs(Vec::new(), status_regs(true)),
        );
        for (p, page) in [
            (0, ds::supported()),
            (1, ds::general()),
            (4, ds::general_errors()),
            (5, ds::temperature()),
            (6, ds::transport()),
            (7, ds::ssd()),
        ] {
            t.on(&cmd::read_devstat_page(p), Reply::Regs(page, good()));
        }
        t
    }

    pub fn disk(name: &str) -> AtaDisk {
        AtaDisk {
            name: name.into(),
            dev_path: PathBuf::from("/dev").join(name),
            model: "ZA3840NM10001".into(),
            firmware: "011J".into(),
            wwid: "naa.5000c500a1b2c3d4".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testdata::{disk, full_replay, good, status_regs};
    use super::*;
    use crate::ata::devstat::testdata as ds;
    use crate::ata::transport::{Replay, Reply};
    use crate::health::NoHostIo;

    #[test]
    fn a_poll_reads_identity_attributes_status_and_device_statistics() {
        let t = full_replay("/dev/sda");
        let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
        assert!(d.up);
        assert_eq!(d.serial, "IW110SN0000000042");
        assert_eq!(d.model, "ZA3840NM10001 nvsoak handbuilt");
        assert_eq!(d.firmware, "SF1.2.3");
        assert_eq!(d.wwn, "naa.5000c500a1b2c3d4");
        assert_eq!(d.family, Some(Family::IronWolf110));
        let table = d.attributes.as_ref().expect("table");
        let a241 = table.iter().find(|a| a.id == 241).expect("241");
        assert_eq!(a241.name, "Lifetime_Wts_Frm_Hst_GB", "family names");
        assert_eq!(a241.raw, 0xabcd_ef01_2345);
        assert_eq!(
            table.iter().find(|a| a.id == 5).and_then(|a| a.thresh),
            Some(10)
        );
        assert_eq!(d.smart_status, Some(SmartStatus::Passed));
        let s = d.devstat.as_ref().expect("devstat");
        assert_eq!(s.bytes_written, Some(7_000_000_000 * 512));
        assert_eq!(s.percentage_used, Some(104));
        assert_eq!(
            d.lifetime_written,
            Some((7_000_000_000u128 * 512, WritesSource::DeviceStatistics))
        );
        assert!(d.poll_errors.is_empty(), "{:?}", d.poll_errors);
        assert!(d.unsupported.is_empty(), "{:?}", d.unsupported);
        let sent: Vec<(u8, u16)> = t.sent().iter().map(|c| (c.command, c.features)).collect();
        assert_eq!(
            sent[..4],
            [(0xec, 0), (0xb0, 0xd0), (0xb0, 0xd1), (0xb0, 0xda)],
            "IDENTIFY, SMART data, thresholds, status, then the log pages"
        );
        assert_eq!(sent.len(), 4 + 6);
    }

    /// The IronWolf 110 entry of config/drives.toml matches the model string the drive
    /// reports, and its 7,000 TBW rating for 3.84 TB feeds the endurance figures.
    #[test]
    fn the_ironwolf_110_rating_gives_endurance_and_of_rated() {
        let t = full_replay("/dev/sda");
        let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
        let r = d.derived.rated.as_ref().expect("rated");
        assert_eq!(r.series.as_deref(), Some("Seagate IronWolf 110"));
        assert_eq!(r.bytes, Some(7_000e12));
        assert_eq!(r.warranty_years, Some(5.0));
        assert_eq!(r.capacity_bytes, Some(3_840e9));
        let consumed = d.derived.endurance_consumed_ratio.expect("of rated");
        assert!(
            (consumed - 7_000_000_000.0 * 512.0 / 7_000e12).abs() < 1e-12,
            "{consumed}"
        );
        // The bare model numbers other capacities report match too.
        let table = crate::nvme::ratings::RatingsTable::builtin();
        for (m, cap, tbw) in [
            ("ZA240NM10001", 240_057_409_536u64, Some(438e12)),
            ("ZA480NM10011", 480_103_981_056, None),
        ] {
            let row = table.lookup(m, cap).expect(m);
            assert_eq!(row.series, "IronWolf 110", "{m}");
            if let Some(tbw) = tbw {
                assert_eq!(row.tbw_bytes, Some(tbw), "{m}");
            } else {
                assert!(row.tbw_bytes.is_some_and(|b| b > 0.0), "{m}: from 1 DWPD");
            }
        }
    }

    #[test]
    fn devstat_refused_is_unsupported_once_and_polling_continues() {
        // QEMU aborts READ LOG EXT of log 04h.
        let t = full_replay("/dev/sda");
        t.on(&cmd::read_devstat_page(0), Reply::Abort);
        let mut d = AtaHealth::new(&disk("sda"));
        let mut warned = false;
        let ctx = RatingContext::default();
        poll_disk(&t, &mut d, 0.0, &NoHostIo, &ctx, &mut warned);
        assert!(d.up);
        assert!(!d.supports(feature::DEVSTAT));
        assert!(
            d.unsupported[feature::DEVSTAT].contains("not supported by the drive"),
            "{:?}",
            d.unsupported
        );
        assert!(
            d.poll_errors.is_empty(),
            "not a poll error: {:?}",
            d.poll_errors
        );
        let first = t.sent().len();
        poll_disk(&t, &mut d, 30.0, &NoHostIo, &ctx, &mut warned);
        let again: Vec<u8> = t.sent()[first..].iter().map(|c| c.command).collect();
        assert_eq!(again, [0xb0, 0xb0, 0xb0], "SMART only: no IDENTIFY, no log");
        assert!(d.up && d.devstat.is_none());
        // Without Device Statistics, lifetime writes come from attribute 241 (GiB).
        assert_eq!(
            d.lifetime_written,
            Some((0xabcd_ef01_2345u128 << 30, WritesSource::Attribute241))
        );
        assert_eq!(
            d.derived.write_amplification,
            Some(0x1_2345_6789u64 as f64 / 0xabcd_ef01_2345u64 as f64),
            "233 / 241"
        );
    }

    #[test]
    fn a_failing_drive_and_a_failed_read_keep_their_last_values() {
        let t = full_replay("/dev/sda");
        t.on(
            &cmd::smart_return_status(),
            Reply::Regs(Vec::new(), status_regs(false)),
        );
        let mut d = AtaHealth::new(&disk("sda"));
        let mut warned = false;
        let ctx = RatingContext::default();
        poll_disk(&t, &mut d, 0.0, &NoHostIo, &ctx, &mut warned);
        assert_eq!(d.smart_status, Some(SmartStatus::ThresholdExceeded));
        t.on(&cmd::smart_read_data(), Reply::Errno(libc::EIO));
        poll_disk(&t, &mut d, 30.0, &NoHostIo, &ctx, &mut warned);
        assert!(!d.up, "ata_up follows SMART READ DATA");
        assert!(d.attributes.is_some(), "last table kept");
        assert_eq!(d.poll_errors.get(page::SMART), Some(&1));
        assert!(d.supports(feature::SMART), "an I/O error is not a refusal");
    }

    #[test]
    fn without_cap_sys_rawio_every_disk_fails_with_one_message() {
        let t = Replay::new("/dev/sda");
        t.on(&cmd::identify(), Reply::Errno(libc::EPERM));
        t.on(&cmd::smart_read_data(), Reply::Errno(libc::EPERM));
        let ctx = RatingContext::default();
        let mut warned = false;
        let mut a = AtaHealth::new(&disk("sda"));
        let mut b = AtaHealth::new(&disk("sdb"));
        poll_disk(&t, &mut a, 0.0, &NoHostIo, &ctx, &mut warned);
        assert!(warned, "logged");
        poll_disk(&t, &mut b, 0.0, &NoHostIo, &ctx, &mut warned);
        for d in [&a, &b] {
            assert!(!d.up);
            assert_eq!(d.poll_errors.get(page::IDENTIFY), Some(&1));
            assert!(
                d.last_error
                    .as_deref()
                    .is_some_and(|m| m.contains("CAP_SYS_RAWIO")),
                "{:?}",
                d.last_error
            );
        }
    }

    #[test]
    fn accounting_and_throttling_come_from_the_drive_figures() {
        let t = full_replay("/dev/sda");
        let mut d = AtaHealth::new(&disk("sda"));
        let mut warned = false;
        let ctx = RatingContext::default();
        let host = |w: u64| {
            vec![
                HostIo {
                    path: "/dev/sda1".into(),
                    written_bytes: w,
                    iops: 50.0,
                    ..Default::default()
                },
                HostIo {
                    path: "/dev/sdb".into(),
                    written_bytes: 999,
                    ..Default::default()
                },
            ]
        };
        poll_disk(&t, &mut d, 0.0, &host(0), &ctx, &mut warned);
        let mut page = ds::general();
        let sectors = 7_000_000_000u64 + 2_000;
        page[24..32].copy_from_slice(&(ds::OK | sectors).to_le_bytes());
        t.on(&cmd::read_devstat_page(1), Reply::Regs(page, good()));
        poll_disk(&t, &mut d, 86_400.0, &host(1_024_000), &ctx, &mut warned);
        let a = d.derived.accounting.expect("accounting");
        assert_eq!(a.host_written_bytes, 1_024_000.0);
        assert_eq!(a.drive_written_bytes, 1_024_000.0, "2000 sectors of 512");
        assert_eq!(a.ratio, Some(1.0));
        let dwpd = d.derived.observed_dwpd_soak.expect("dwpd");
        assert!((dwpd - 1_024_000.0 / 3_840e9).abs() < 1e-12, "{dwpd}");
        // 41 °C, no valid specified maximum (80h), time over temperature unchanged.
        assert!(!d.derived.throttle.throttling);
        assert_eq!(d.derived.throttle.unthrottled_iops, Some(50.0));
    }

    /// A disk whose commands block until the gate opens: a hung SG_IO.
    struct Hung {
        inner: Replay,
        open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    }

    impl AtaTransport for Hung {
        fn device(&self) -> String {
            self.inner.device()
        }
        fn ata(
            &self,
            cmd: &crate::ata::AtaCmd,
            buf: &mut [u8],
        ) -> Result<crate::ata::AtaRegs, AtaError> {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*open {
                open = cv.wait(open).unwrap_or_else(|e| e.into_inner());
            }
            drop(open);
            self.inner.ata(cmd, buf)
        }
    }

    /// One hung SATA disk does not hold up the others: they are polled every round, it is
    /// down with `timeout` errors and a poll duration, and its late answer is taken.
    #[test]
    fn a_hung_disk_does_not_hold_up_the_others() {
        let root = tempfile::tempdir().expect("tempdir");
        for n in ["sda", "sdb", "sdc"] {
            crate::ata::discover::fake::add_disk(root.path(), n, "ATA", "ZA3840NM10001", "");
        }
        let good = Arc::new(full_replay("/dev/sda"));
        let open = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let o = open.clone();
        let opener: AtaOpener = Arc::new(move |d: &AtaDisk| {
            if d.name == "sdb" {
                let inner = full_replay("/dev/sdb");
                return Ok(Box::new(Hung {
                    inner,
                    open: o.clone(),
                }) as Box<dyn AtaTransport>);
            }
            Ok(Box::new(Arc::clone(&good)) as Box<dyn AtaTransport>)
        });
        let mut s = crate::config::builtin_default().health;
        s.poll_interval = std::time::Duration::from_millis(400);
        let mut p =
            crate::health::Poller::new(s, root.path(), crate::health::poller::ioctl_opener())
                .with_ata_opener(opener);
        for round in 1..=3u64 {
            p.poll_at(round as f64, Arc::new(NoHostIo));
            for n in ["sda", "sdc"] {
                let d = p.ata_disk(n).expect("listed");
                assert_eq!(d.polls, round, "{n} polled every round");
                assert!(d.up, "{n} up");
            }
            let h = p.ata_disk("sdb").expect("listed");
            assert!(!h.up && h.polls == 0);
            assert_eq!(h.poll_errors.get(page::TIMEOUT).copied(), Some(round));
            assert!(h.poll_duration_seconds.unwrap_or(0.0) > 0.0);
        }
        {
            let (lock, cv) = &*open;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        let mut rounds = 0;
        while p.ata_disk("sdb").is_some_and(|d| d.polls < 2) {
            rounds += 1;
            assert!(rounds < 200, "the released disk's answer never arrived");
            p.poll_at(10.0 + rounds as f64, Arc::new(NoHostIo));
        }
        let h = p.ata_disk("sdb").expect("listed");
        assert!(h.up, "answered once released");
        assert!(h.poll_errors.get(page::TIMEOUT).copied().unwrap_or(0) >= 3);
        let text = crate::metrics::encode_text(&crate::metrics::health::families(&p.snapshot()))
            .expect("encode");
        assert!(
            text.contains("nvsoak_health_poll_errors_total{device=\"sdb\",log=\"timeout\"}"),
            "{text}"
        );
        assert!(text.contains("nvsoak_health_device_poll_duration_seconds{device=\"sda\"}"));
    }

    #[test]
    fn the_poller_finds_ata_disks_in_sysfs_and_follows_them() {
        let root = tempfile::tempdir().expect("tempdir");
        crate::ata::discover::fake::add_disk(
            root.path(),
            "sda",
            "ATA",
            "ZA3840NM10001",
            "naa.5000c500a1b2c3d4",
        );
        crate::ata::discover::fake::add_disk(root.path(), "sdb", "Samsung", "T5", "");
        let t = Arc::new(full_replay("/dev/sda"));
        let opener: AtaOpener =
            Arc::new(move |_d: &AtaDisk| Ok(Box::new(Arc::clone(&t)) as Box<dyn AtaTransport>));
        let mut s = crate::config::builtin_default().health;
        s.rescan_interval = std::time::Duration::ZERO;
        let mut p =
            crate::health::Poller::new(s, root.path(), crate::health::poller::ioctl_opener())
                .with_ata_opener(opener);
        p.poll_at(0.0, Arc::new(NoHostIo));
        let snap = p.snapshot();
        assert_eq!(snap.ata.len(), 1, "the USB-bridged disk is not listed");
        assert!(snap.ata[0].up);
        assert!(snap.devices.is_empty());
        std::fs::remove_dir_all(root.path().join("block/sda")).expect("unplug");
        p.poll_at(30.0, Arc::new(NoHostIo));
        let d = p.ata_disk("sda").expect("still listed");
        assert!(!d.present && !d.up);
        assert!(d.attributes.is_some(), "last values kept");
    }
}
