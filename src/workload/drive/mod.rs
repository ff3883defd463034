//! Drive-side soak tracking of one block target ([`DriveTracking`]): which drive it is on, its
//! soak-start baseline (the drive's counters and nvsoak's totals of that instant,
//! checkpointed), throttle episodes, and the figures computed from the baseline to the latest
//! poll. It reads the health snapshot's protocol-neutral drive samples
//! (`health::collect::sample`) once, for every protocol; only the soak figures themselves are
//! the protocol's own computation (NVMe: [`crate::model::results::drive_soak`] on the SMART
//! log; ATA: the collector's `ata::soak::ata_soak`). The daemon feeds it every new health
//! poll; it decides everything about drives, the daemon only wires it.

use std::path::Path;

use crate::health::collect::ata::sample::AtaCounters;
use crate::health::collect::ata::soak::{AtaBaseline, AtaReading, ata_soak};
use crate::health::collect::{DriveSample, Reading};
use crate::health::{HealthSnapshot, HostIo};
use crate::model::drive::Protocol;
use crate::model::results::{DeviceIdentity, DriveReading, DriveSoak, HostAtSmart, drive_soak};
use crate::model::totals::Totals;
use crate::nvme::log::smart::SmartLog;
use crate::workload::drive_ocp::{self, OcpTracking};

/// A block target's drive-side soak bookkeeping: the soak-start baseline (SMART log and host
/// figures, checkpointed), episode counts (checkpointed), the latest figures, which the
/// scheduler copies into the results file, and the controller the poller found the target on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveTracking {
    /// The drive's SMART log at soak start, for per-soak deltas of drive counters: from the
    /// first poll after the target started ([`DriveTracking::update`]), or the checkpoint's.
    pub smart_at_soak_start: Option<SmartLog>,
    /// nvsoak's soak totals when the soak-start SMART log was read.
    pub host_at_soak_start: Option<HostAtSmart>,
    /// Throttle episodes seen in earlier runs of this soak (from the checkpoint).
    pub episodes_carried: u64,
    /// The poller's episode count this run's episodes are counted from.
    pub episodes_base: Option<u64>,
    pub episodes_this_run: u64,
    /// The latest drive-side figures.
    pub figures: Option<DriveSoak>,
    /// A spanning target: the rated card its members are all on (from the latest poll).
    pub card: Option<crate::model::results::SpanCard>,
    /// The drive's identity from the poller (Identify Controller), for the results file.
    pub identity: Option<DeviceIdentity>,
    /// Polls at or after this Unix time describe this target (default: the target's start).
    /// The daemon sets it to its pre-start poll for the targets it starts with.
    pub polls_from: Option<f64>,
    /// The NVMe controller the target is on (`nvme0`), for `nvsoak_target_info`'s `device`
    /// label: from the opened device node at start, then from the health poller's mapping of
    /// the target to a controller (the one mapping both use), so `/dev/disk/by-id` paths join.
    pub controller: Option<String>,
    /// Critical-warning bits seen set at any poll of this run (OR), for the verdict's gate.
    pub warning_seen: u8,
    /// Highest composite temperature seen at any poll of this run, kelvin (0: none).
    pub temperature_max_kelvin: u16,
    /// A SATA disk's counters at soak start (`health::collect::ata::soak`), from the first poll
    /// after the target started, or the checkpoint's; `smart_at_soak_start` stays empty.
    pub ata_at_soak_start: Option<AtaCounters>,
    /// The highest temperature (°C) the polls of a SATA disk saw during the soak.
    pub temperature_max_c: Option<i16>,
    /// Whether a PCIe link on the drive's paths (every controller of its subsystem, every port
    /// up to the root) was seen degraded since this run of the target started: `None` when
    /// sysfs does not say (`pcie::link_degraded_during`), for a verdict gate.
    pub link_degraded: Option<bool>,
    /// The drive's temperature (°C) at the latest poll, when it reports one: for the soak's
    /// progress lines in the journal.
    pub temperature_c: Option<f64>,
    /// The drive's own view of an OCP drive (C1h panics, C3h counters, drive events): its
    /// soak-start marks and the events of earlier runs (`workload::drive_ocp`).
    pub ocp: OcpTracking,
}

impl AsRef<OcpTracking> for DriveTracking {
    fn as_ref(&self) -> &OcpTracking {
        &self.ocp
    }
}

/// What the drive bookkeeping needs to know of its target.
pub struct DriveTarget<'a> {
    pub path: &'a Path,
    /// Unix time this run of the target started.
    pub started_at: f64,
    pub soak_started: Option<f64>,
    /// Totals carried over from the checkpoint of an earlier run.
    pub carried: &'a Totals,
}

impl DriveTracking {
    /// Throttle episodes over the whole soak.
    pub fn episodes(&self) -> u64 {
        self.episodes_carried + self.episodes_this_run
    }

    /// The checkpoint's baseline and episodes of a resumed soak. The checkpoint keeps the
    /// SMART log as JSON; one that does not parse is dropped (a new baseline is taken).
    pub fn restore(&mut self, target: &str, st: &crate::model::checkpoint::TargetState) {
        self.smart_at_soak_start = st.smart_at_soak_start.as_ref().and_then(|v| {
            serde_json::from_value::<SmartLog>(v.clone())
                .inspect_err(|e| {
                    tracing::warn!(target_name = %target, error = %e,
                    "the checkpoint's soak-start SMART log does not parse; taking a new baseline")
                })
                .ok()
        });
        self.host_at_soak_start = st.host_at_soak_start;
        self.episodes_carried = st.drive_throttle_episodes;
        // A warning or a peak seen before the restart still counts for the verdict.
        self.warning_seen = st.drive_warning_seen;
        self.temperature_max_kelvin = st.drive_temperature_max_kelvin;
        let ata = st.ata_at_soak_start.as_ref().and_then(|v| {
            serde_json::from_value::<AtaBaseline>(v.clone())
                .inspect_err(|e| {
                    tracing::warn!(target_name = %target, error = %e,
                    "the checkpoint's soak-start ATA counters do not parse; taking a new baseline")
                })
                .ok()
        });
        self.ata_at_soak_start = ata.as_ref().map(|a| a.counters.clone());
        self.temperature_max_c = ata.and_then(|a| a.temperature_max_c);
        drive_ocp::restore_json(&mut self.ocp, target, st.ocp_at_soak_start.as_ref());
    }

    /// The soak-start ATA counters as the checkpoint stores them.
    pub fn ata_at_soak_start_json(&self) -> Option<serde_json::Value> {
        self.ata_at_soak_start.as_ref().and_then(|c| {
            serde_json::to_value(AtaBaseline {
                counters: c.clone(),
                temperature_max_c: self.temperature_max_c,
            })
            .ok()
        })
    }

    /// The soak-start SMART log as the checkpoint stores it.
    pub fn smart_at_soak_start_json(&self) -> Option<serde_json::Value> {
        self.smart_at_soak_start
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
    }

    /// Refresh from a health snapshot.
    ///
    /// The target's drive is the one whose latest sample carries the target's host figures
    /// (the poller matched its path to a namespace, a disk or a partition), whatever its
    /// protocol ([`HealthSnapshot::drives`]). Only polls from `polls_from` on (default: the
    /// target's start) describe this target; the daemon sets it to its pre-start poll for the
    /// targets it starts with, so their baseline predates the first write. On the first call
    /// that finds it in this run, the soak-start baseline is taken, unless the checkpoint
    /// already brought one: the poller's first sample of this run when it already saw this
    /// target, else the latest. Then the figures are recomputed from the baseline to the latest
    /// successful poll ([`DriveTracking::soak`]).
    pub fn update(&mut self, t: &DriveTarget<'_>, health: &HealthSnapshot) {
        let Some((d, latest, latest_io)) = health.drives().find_map(|d| {
            let s = d.latest()?;
            let io = s.host_of(t.path)?.clone();
            Some((d, s, io))
        }) else {
            return;
        };
        // The poller mapped the target's path to this drive (symlinks and partitions
        // resolved): the target's `device` label follows it.
        self.controller = Some(d.name().to_string());
        self.temperature_c = d.figures().temperature_c;
        // A poll from before this run's target started describes an earlier target on the path.
        let from = self.polls_from.unwrap_or(t.started_at);
        if d.protocol() == Protocol::Nvme {
            self.link_degraded = crate::pcie::link_degraded_during(&health.pcie, d.name(), from);
        }
        if latest.time < from {
            return;
        }
        if self.episodes_base.is_none() || !self.has_baseline(&latest.reading) {
            let (first, first_io) = d
                .first()
                .filter(|s| s.time >= from)
                .and_then(|s| s.host_of(t.path).cloned().map(|io| (s, io)))
                .unwrap_or((latest, latest_io.clone()));
            self.take_baseline(&first, &host_at(t.carried, first.time, &first_io));
        }
        let base = self.episodes_base.unwrap_or(0);
        self.episodes_this_run = latest.throttle_events.saturating_sub(base);
        let start_time = self
            .host_at_soak_start
            .map(|h| h.time)
            .or(t.soak_started)
            .unwrap_or(latest.time);
        let derived = d.derived();
        let rated = derived.rated.as_ref();
        let capacity = rated
            .and_then(|r| r.capacity_bytes)
            .map(|c| c as u64)
            .or(Some(d.capacity_bytes()))
            .filter(|c| *c > 0);
        let host = host_at(t.carried, latest.time, &latest_io);
        let Some(mut f) = self.soak(start_time, &latest, host, capacity) else {
            return;
        };
        f.device = d.name().to_string();
        self.identity = Some(d.identity());
        f.throttle_episodes = Some(self.episodes());
        f.rated_dwpd = rated.and_then(|r| r.dwpd);
        f.endurance_consumed_ratio = derived.endurance_consumed_ratio;
        f.iops_throttled = derived.throttle.throttled_iops;
        f.iops_unthrottled = derived.throttle.unthrottled_iops;
        if let Some(pages) = d.pages() {
            crate::health::collect::nvme::pages::soak_figures(&mut f, pages, start_time);
            drive_ocp::update(&mut self.ocp, &mut f, pages);
        }
        self.figures = Some(f);
    }

    /// Whether the soak-start baseline of the protocol `reading` is of is already taken.
    fn has_baseline(&self, reading: &Reading<'_>) -> bool {
        match reading {
            Reading::Nvme(_) => self.smart_at_soak_start.is_some(),
            Reading::Ata(_) => self.ata_at_soak_start.is_some(),
        }
    }

    /// The soak-start baseline from `first`, the first sample of this run that describes the
    /// target: the episode base, and the protocol's counters with nvsoak's totals, unless the
    /// checkpoint brought them.
    fn take_baseline(&mut self, first: &DriveSample<'_>, host: &HostAtSmart) {
        if self.episodes_base.is_none() {
            // An episode under way at the first poll counts as one seen during the soak.
            self.episodes_base = Some(
                first
                    .throttle_events
                    .saturating_sub(u64::from(first.throttling)),
            );
        }
        if self.has_baseline(&first.reading) {
            return;
        }
        match first.reading {
            Reading::Nvme(smart) => self.smart_at_soak_start = Some(smart.clone()),
            Reading::Ata(c) => self.ata_at_soak_start = Some(c.clone()),
        }
        self.host_at_soak_start = Some(*host);
    }

    /// The drive-side figures from the soak-start baseline to `latest` (nvsoak's totals then:
    /// `host`), by the protocol's own computation; `None` while there is no baseline. Keeps
    /// the highest temperature and (NVMe) the warning bits seen over the soak.
    fn soak(
        &mut self,
        start_time: f64,
        latest: &DriveSample<'_>,
        host: HostAtSmart,
        capacity: Option<u64>,
    ) -> Option<DriveSoak> {
        match latest.reading {
            Reading::Nvme(smart) => {
                let mut f = drive_soak(
                    &DriveReading {
                        time: start_time,
                        smart: self.smart_at_soak_start.as_ref()?,
                        host: self.host_at_soak_start,
                    },
                    &DriveReading {
                        time: latest.time,
                        smart,
                        host: Some(host),
                    },
                    capacity,
                );
                f.link_degraded = self.link_degraded;
                self.warning_seen |= smart.critical_warning;
                self.temperature_max_kelvin = self.temperature_max_kelvin.max(smart.temperature);
                f.critical_warning_seen |= self.warning_seen;
                f.temperature_max_kelvin = f
                    .temperature_max_kelvin
                    .max(Some(self.temperature_max_kelvin))
                    .filter(|k| *k > 0);
                Some(f)
            }
            Reading::Ata(counters) => {
                let f = ata_soak(
                    &AtaReading {
                        time: start_time,
                        counters: self.ata_at_soak_start.as_ref()?,
                        host: self.host_at_soak_start,
                    },
                    &AtaReading {
                        time: latest.time,
                        counters,
                        host: Some(host),
                    },
                    capacity,
                    self.temperature_max_c,
                );
                self.temperature_max_c = f.ata.as_ref().and_then(|a| a.temperature_max_c);
                Some(f)
            }
        }
    }
}

/// nvsoak's soak totals at a sample taken at `time`: the checkpoint's plus this run's from
/// the poller.
pub(crate) fn host_at(carried: &Totals, time: f64, io: &HostIo) -> HostAtSmart {
    HostAtSmart {
        time,
        read_bytes: carried.read_bytes + io.read_bytes,
        written_bytes: carried.write_bytes + io.written_bytes,
        read_ops: carried.read_ops + io.read_ops,
        write_ops: carried.write_ops + io.write_ops,
    }
}

#[cfg(test)]
mod tests;
