//! The ATA collector: SATA disks found in sysfs (`ata::discover`), polled through
//! an [`AtaTransport`] (IDENTIFY once, SMART READ DATA + THRESHOLDS, RETURN STATUS and the
//! Device Statistics log every poll), and the same endurance and thermal derivations as NVMe
//! drives ([`Derived`], the same `nvsoak_*` metric names).
//!
//! A command the drive aborts is "not supported" for that drive: remembered, logged once, not
//! asked again and not counted as a poll error. A missing `CAP_SYS_RAWIO` is one message for
//! the whole poller, logged once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{Collector, RatingContext};
use crate::ata::discover::{self, AtaDisk};
use crate::ata::transport::SgIo;
use crate::ata::vendor;
use crate::ata::{AtaError, AtaTransport, cmd};
use crate::health::derive::{self, ThermalSample};
use crate::health::inflight::{InFlight, Job};
use crate::health::{HostIo, HostIoSource};
use crate::nvme::discover::{Controller, Filter};

mod record;
pub mod sample;
pub mod soak;
#[cfg(test)]
pub(crate) mod testdata;
#[cfg(test)]
mod tests;

use record::host_on_disk;
pub use record::{AtaHealth, feature, page};
use sample::{AtaCounters, AtaSample};

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

/// The ATA disks the collector knows, and how it reaches them.
pub struct AtaCollector {
    opener: AtaOpener,
    disks: BTreeMap<String, AtaHealth>,
    found: BTreeMap<String, AtaDisk>,
    /// The missing-capability warning is logged once for all disks, from any poll thread.
    permission_warned: Arc<AtomicBool>,
    inflight: InFlight<AtaHealth>,
}

impl AtaCollector {
    pub fn new(opener: AtaOpener) -> Self {
        AtaCollector {
            opener,
            disks: BTreeMap::new(),
            found: BTreeMap::new(),
            permission_warned: Arc::new(AtomicBool::new(false)),
            inflight: Default::default(),
        }
    }

    pub fn snapshot(&self) -> Vec<AtaHealth> {
        self.disks.values().cloned().collect()
    }

    pub fn disk(&self, name: &str) -> Option<&AtaHealth> {
        self.disks.get(name)
    }
}

impl Collector for AtaCollector {
    /// Walk `<sysfs_root>/block`: new disks are added, vanished ones stay with
    /// `present = false`. A disk that comes back is identified again: the same serial keeps
    /// its history, another drive under the name starts over.
    fn rescan(&mut self, sysfs_root: &Path, filter: &Filter) {
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
    fn poll(
        &mut self,
        now: f64,
        host: &Arc<dyn HostIoSource>,
        ratings: &Arc<RatingContext>,
        deadline: Instant,
    ) {
        let (opener, warned, found) = (&self.opener, &self.permission_warned, &self.found);
        let job = |name: &str| -> Option<Job<AtaHealth>> {
            let disk = found.get(name)?.clone();
            let (opener, warned) = (opener.clone(), warned.clone());
            let (host, ratings) = (host.clone(), ratings.clone());
            Some(Box::new(move |d: &mut AtaHealth| {
                let started = Instant::now();
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
    fn is_polling(&self, name: &str) -> bool {
        self.inflight.is_pending(name)
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
