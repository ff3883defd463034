//! The NVMe collector: controllers found in sysfs (`nvme::discover`), each polled through an
//! [`AdminTransport`] (Identify once, then SMART, the error log, firmware slots, temperature
//! thresholds, the OCP C0h page and the drive's own pages of [`ocp_pages`] at every poll), and
//! the endurance and thermal derivations ([`Derived`]).
//!
//! A controller that vanished stays, down, until a rescan finds it again (under its name or,
//! by serial, under a new one); drives an earlier run knew are kept the same way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::{Collector, RatingContext};
use crate::health::derive::{self, ThermalSample};
use crate::health::inflight::{InFlight, Job};
use crate::health::{HostIo, HostIoSource};
use crate::model::drive::WriteCache;
use crate::nvme::discover::{self, Controller, Filter};
use crate::nvme::ioctl::IoctlTransport;
use crate::nvme::{AdminTransport, NvmeError, cmd};
use crate::util::unix_now;

pub mod ocp_pages;
pub mod pages;
mod record;
#[cfg(test)]
pub(crate) mod tests;

pub use record::{DeviceHealth, NamespaceHealth, OcpSupport, SmartSample, page};
use record::{host_on_device, ns_of};

/// Poll one device's pages through `t` and update its derivations. `now` is Unix time.
/// A failed page counts an error and leaves that page's previous value in place.
pub fn poll_device(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    now: f64,
    host: &dyn HostIoSource,
    ratings: &RatingContext,
) {
    read_identity(t, d);
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
    read_logs(t, d);
    read_ocp(t, d);
    if d.up {
        // The drive's own view (C1h, C3h, 08h): only from a drive that answered SMART.
        ocp_pages::poll(t, d, now, ratings.latency_monitor.as_ref());
    }
    derive_device(d, now, &host_io, ratings);
    keep_sample(d, now, &host_io);
}

/// Identify Controller and each namespace's Identify, until they answer once.
fn read_identity(t: &dyn AdminTransport, d: &mut DeviceHealth) {
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
}

/// The error log (new entries counted by status), firmware slots, temperature thresholds and
/// the volatile write cache (Identify's VWC, then Get Features 06h when there is one).
fn read_logs(t: &dyn AdminTransport, d: &mut DeviceHealth) {
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
    match d.id.as_ref().map(|id| id.write_cache_present()) {
        Some(false) => d.write_cache = Some(WriteCache::Absent),
        Some(true) => match cmd::read_write_cache(t) {
            Ok(on) => d.write_cache = Some(WriteCache::from_bits(true, on)),
            Err(e) => d.fail(page::WRITE_CACHE, &e),
        },
        None => {}
    }
}

/// The OCP C0h page: whether the drive has one is learnt on the first poll that has Identify.
fn read_ocp(t: &dyn AdminTransport, d: &mut DeviceHealth) {
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
}

/// A poll that read SMART is the latest sample (and the first, if none was kept yet), with the
/// host figures of the targets on this drive.
fn keep_sample(d: &mut DeviceHealth, now: f64, host_io: &[HostIo]) {
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

/// The controllers the NVMe collector knows, and how it reaches them.
pub struct NvmeCollector {
    opener: Opener,
    devices: BTreeMap<String, DeviceHealth>,
    inflight: InFlight<DeviceHealth>,
    controllers: BTreeMap<String, Controller>,
}

impl NvmeCollector {
    pub fn new(opener: Opener) -> Self {
        NvmeCollector {
            opener,
            devices: BTreeMap::new(),
            inflight: Default::default(),
            controllers: BTreeMap::new(),
        }
    }

    /// Drives an earlier run knew (`health::known`): each not known yet is kept as vanished
    /// (`present = false`, exported `nvme_up 0`) until a rescan finds it again.
    pub fn remember(&mut self, drives: &[crate::health::known::KnownDrive]) {
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

    /// A controller found at a rescan: known under its name (the same drive, or another drive
    /// that took the name), back under a new name, or new.
    fn found(&mut self, c: Controller) {
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
            None => self.arrived(&c),
        }
        self.controllers.insert(c.name.clone(), c);
    }

    /// A name not known yet. The same drive back under a new name (the kernel hands out the
    /// lowest free instance) carries its history over, and the old name's series go instead of
    /// reporting a drive that is down forever. Only a vanished entry qualifies: two live
    /// controllers may share a serial (dual port).
    fn arrived(&mut self, c: &Controller) {
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
                d.namespaces = ns_of(c);
                d.present = true;
                self.devices.insert(c.name.clone(), d);
            }
            None => {
                tracing::info!("health: found {} ({} {})", c.name, c.model, c.serial);
                self.devices.insert(c.name.clone(), DeviceHealth::new(c));
            }
        }
    }

    pub fn snapshot(&self) -> Vec<DeviceHealth> {
        self.devices.values().cloned().collect()
    }

    pub fn device(&self, name: &str) -> Option<&DeviceHealth> {
        self.devices.get(name)
    }

    /// The present controllers' names and serials (what the PCIe scan follows).
    pub fn present(&self) -> Vec<(String, String)> {
        self.devices
            .values()
            .filter(|d| d.present)
            .map(|d| (d.name.clone(), d.serial.clone()))
            .collect()
    }
}

impl Collector for NvmeCollector {
    /// Walk `<sysfs_root>/class/nvme`: new controllers are added, vanished ones stay with
    /// `present = false`.
    fn rescan(&mut self, sysfs_root: &Path, filter: &Filter) {
        let found = match discover::discover(sysfs_root) {
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
            self.found(c);
        }
    }

    fn poll(
        &mut self,
        now: f64,
        host: &Arc<dyn HostIoSource>,
        ratings: &Arc<RatingContext>,
        deadline: Instant,
    ) {
        let (opener, controllers) = (&self.opener, &self.controllers);
        let job = |name: &str| -> Option<Job<DeviceHealth>> {
            let c = controllers.get(name)?.clone();
            let (opener, ratings, host) = (opener.clone(), ratings.clone(), host.clone());
            Some(Box::new(move |d: &mut DeviceHealth| {
                poll_opened(&opener, &c, d, now, host.as_ref(), &ratings)
            }))
        };
        self.inflight.dispatch(&mut self.devices, &job, deadline);
    }

    fn is_polling(&self, name: &str) -> bool {
        self.inflight.is_pending(name)
    }
}
