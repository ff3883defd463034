//! Drive-side soak tracking of one block target ([`DriveTracking`]): which controller it is on,
//! its soak-start baseline (the SMART log and nvsoak's totals of that instant, checkpointed),
//! throttle episodes, and the figures [`crate::model::results::drive_soak`] computes from the
//! baseline to the latest poll. The daemon feeds it every new health poll; it decides
//! everything about drives, the daemon only wires it.

use std::path::Path;

use crate::health::{HealthSnapshot, HostIo, SmartSample};
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
    /// A SATA disk's counters at soak start (`workload::drive_ata`), from the first poll
    /// after the target started, or the checkpoint's; `smart_at_soak_start` stays empty.
    pub ata_at_soak_start: Option<crate::health::collect::ata::sample::AtaCounters>,
    /// The highest temperature (°C) the polls of a SATA disk saw during the soak.
    pub temperature_max_c: Option<i16>,
    /// Whether a PCIe link on the drive's paths (every controller of its subsystem, every port
    /// up to the root) was seen degraded since this run of the target started: `None` when
    /// sysfs does not say (`pcie::link_degraded_during`), for a verdict gate.
    pub link_degraded: Option<bool>,
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
            serde_json::from_value::<crate::workload::drive_ata::AtaBaseline>(v.clone())
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
            serde_json::to_value(crate::workload::drive_ata::AtaBaseline {
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
    /// The target's drive is the one whose latest SMART sample carries the target's host
    /// figures (the poller matched its path to a namespace or partition). Only polls from
    /// `polls_from` on (default: the target's start) describe this target; the daemon sets it
    /// to its pre-start poll for the targets it starts with, so their baseline predates the
    /// first write. On the first call that finds it in this run, the soak-start baseline is
    /// taken, unless the checkpoint already brought one: the poller's first SMART read of this
    /// run when it already saw this target, else the latest. Then the figures are recomputed
    /// from the baseline to the latest successful poll ([`drive_soak`]).
    pub fn update(&mut self, t: &DriveTarget<'_>, health: &HealthSnapshot) {
        let on = |s: &SmartSample| s.host.iter().find(|h| h.path == t.path).cloned();
        let Some((d, latest, latest_io)) = health.devices.iter().find_map(|d| {
            let s = d.last_sample.as_ref()?;
            let io = on(s)?;
            Some((d, s, io))
        }) else {
            // Not on an NVMe namespace: maybe on a SATA disk.
            crate::workload::drive_ata::update(self, t, health);
            return;
        };
        // The poller mapped the target's path to this controller (symlinks and partitions
        // resolved): the target's `device` label follows it.
        self.controller = Some(d.name.clone());
        // A poll from before this run's target started describes an earlier target on the path.
        let from = self.polls_from.unwrap_or(t.started_at);
        self.link_degraded = crate::pcie::link_degraded_during(&health.pcie, &d.name, from);
        if latest.time < from {
            return;
        }
        if self.episodes_base.is_none() || self.smart_at_soak_start.is_none() {
            let (first, first_io) = d
                .first_sample
                .as_ref()
                .filter(|s| s.time >= from)
                .and_then(|s| on(s).map(|io| (s, io)))
                .unwrap_or((latest, latest_io.clone()));
            self.take_baseline(first, &host_at(t.carried, first.time, &first_io));
        }
        let base = self.episodes_base.unwrap_or(0);
        self.episodes_this_run = latest.throttle_events.saturating_sub(base);
        let Some(start) = &self.smart_at_soak_start else {
            return;
        };
        let start_time = self
            .host_at_soak_start
            .map(|h| h.time)
            .or(t.soak_started)
            .unwrap_or(latest.time);
        let rated = d.derived.rated.as_ref();
        let capacity = rated
            .and_then(|r| r.capacity_bytes)
            .map(|c| c as u64)
            .or(Some(d.capacity_bytes()))
            .filter(|c| *c > 0);
        let mut f = drive_soak(
            &DriveReading {
                time: start_time,
                smart: start,
                host: self.host_at_soak_start,
            },
            &DriveReading {
                time: latest.time,
                smart: &latest.smart,
                host: Some(host_at(t.carried, latest.time, &latest_io)),
            },
            capacity,
        );
        f.device = d.name.clone();
        f.link_degraded = self.link_degraded;
        self.warning_seen |= latest.smart.critical_warning;
        self.temperature_max_kelvin = self.temperature_max_kelvin.max(latest.smart.temperature);
        f.critical_warning_seen |= self.warning_seen;
        f.temperature_max_kelvin = f
            .temperature_max_kelvin
            .max(Some(self.temperature_max_kelvin))
            .filter(|k| *k > 0);
        self.identity = Some(DeviceIdentity {
            controller: d.name.clone(),
            model: d.model.clone(),
            serial: d.serial.clone(),
            firmware: d.firmware.clone(),
            capacity_bytes: d.capacity_bytes(),
        });
        f.throttle_episodes = Some(self.episodes());
        f.rated_dwpd = rated.and_then(|r| r.dwpd);
        f.endurance_consumed_ratio = d.derived.endurance_consumed_ratio;
        f.iops_throttled = d.derived.throttle.throttled_iops;
        f.iops_unthrottled = d.derived.throttle.unthrottled_iops;
        crate::health::collect::nvme::pages::soak_figures(&mut f, &d.pages, start_time);
        drive_ocp::update(&mut self.ocp, &mut f, &d.pages);
        self.figures = Some(f);
    }

    /// The soak-start baseline from `first`, the first sample of this run that describes the
    /// target: the episode base, and the SMART log with nvsoak's totals, unless the checkpoint
    /// brought one.
    fn take_baseline(&mut self, first: &SmartSample, host: &HostAtSmart) {
        if self.episodes_base.is_none() {
            // An episode under way at the first poll counts as one seen during the soak.
            self.episodes_base = Some(
                first
                    .throttle_events
                    .saturating_sub(u64::from(first.throttling)),
            );
        }
        if self.smart_at_soak_start.is_none() {
            self.smart_at_soak_start = Some(first.smart.clone());
            self.host_at_soak_start = Some(*host);
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
mod tests {
    use super::*;
    use crate::health::{DeviceHealth, HealthSnapshot, HostIo, SmartSample};
    use crate::nvme::discover::{Controller, Namespace};
    use crate::nvme::log::smart::SmartLog;
    use crate::workload::scheduler::{self, TargetShared};

    fn device(first: Option<SmartSample>, last: Option<SmartSample>) -> DeviceHealth {
        let mut d = DeviceHealth::new(&Controller {
            name: "nvme0".into(),
            dev_path: "/dev/nvme0".into(),
            serial: "S".into(),
            model: "M".into(),
            firmware: "F".into(),
            namespaces: vec![Namespace {
                name: "nvme0n1".into(),
                nsid: 1,
                dev_path: "/dev/nvme0n1".into(),
            }],
        });
        d.first_sample = first;
        d.last_sample = last;
        d
    }

    fn sample(time: f64, units: u128, written: u64, events: u64, throttling: bool) -> SmartSample {
        SmartSample {
            time,
            smart: SmartLog {
                data_units_written: units,
                ..Default::default()
            },
            host: vec![HostIo {
                path: "/dev/nvme0n1".into(),
                written_bytes: written,
                ..Default::default()
            }],
            throttle_events: events,
            throttling,
        }
    }

    fn target(started_at: f64) -> scheduler::TargetSnapshot {
        scheduler::TargetSnapshot {
            name: "t".into(),
            path: "/dev/nvme0n1".into(),
            is_block: true,
            started_at,
            ..Default::default()
        }
    }

    /// The daemon's update of one target, on a full copy of it.
    fn update_target_drive(t: &mut scheduler::TargetSnapshot, health: &HealthSnapshot) {
        let on = DriveTarget {
            path: Path::new(&t.path),
            started_at: t.started_at,
            soak_started: t.soak_started,
            carried: &t.carried,
        };
        t.drive.update(&on, health);
        t.controller = t.drive.controller.clone();
    }

    fn snap(d: DeviceHealth) -> HealthSnapshot {
        HealthSnapshot {
            devices: vec![d],
            ..Default::default()
        }
    }

    #[test]
    fn a_by_id_target_maps_to_the_controller_the_poller_found() {
        // The target is named through a /dev/disk/by-id link: parsing its name finds no
        // controller, the poller's mapping (which resolves it) does, and the label follows.
        let by_id = "/dev/disk/by-id/nvme-M_S";
        let mut t = target(100.0);
        t.path = by_id.into();
        assert_eq!(crate::nvme::controller_of_node(by_id), None);
        let mut s = sample(130.0, 1, 0, 0, false);
        s.host[0].path = by_id.into();
        update_target_drive(&mut t, &snap(device(Some(s.clone()), Some(s))));
        assert_eq!(t.controller.as_deref(), Some("nvme0"));
        let info = crate::metrics::workload::DaemonInfo {
            version: "v",
            revision: "r",
            uptime_secs: 0.0,
            auth: None,
            refused: Vec::new(),
        };
        let fams = crate::metrics::workload::families(std::slice::from_ref(&t), &[], &info);
        let f = fams
            .iter()
            .find(|f| f.name() == "nvsoak_target_info")
            .expect("nvsoak_target_info");
        let device: Vec<String> = f.get_metric()[0]
            .get_label()
            .iter()
            .filter(|l| l.name() == "device")
            .map(|l| l.value().to_string())
            .collect();
        assert_eq!(device, vec!["nvme0".to_string()]);
    }

    #[test]
    fn prestart_poll_is_the_baseline_and_later_polls_run_from_it() {
        // Taken before the target started: its host entry is zero, the carried totals count.
        let mut pre = sample(99.5, 7, 0, 2, true);
        pre.smart.host_write_commands = 70;
        let mut t = target(100.0);
        t.carried.write_bytes = 1 << 20;
        t.drive.polls_from = Some(99.0);
        update_target_drive(&mut t, &snap(device(Some(pre.clone()), Some(pre.clone()))));
        let start: SmartLog = t.drive.smart_at_soak_start.clone().expect("baseline");
        assert_eq!(start.data_units_written, 7);
        assert_eq!(start.host_write_commands, 70);
        let base = t.drive.host_at_soak_start.expect("host baseline");
        assert_eq!((base.time, base.written_bytes), (99.5, 1 << 20));
        assert_eq!(
            t.drive.episodes_base,
            Some(1),
            "the episode under way counts"
        );
        // The next poll (after the target started) keeps that baseline.
        let later = sample(130.0, 17, 10 * 512_000, 2, false);
        update_target_drive(&mut t, &snap(device(Some(pre), Some(later))));
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.data_written_bytes, Some(10 * 512_000));
        assert_eq!(f.nvsoak_written_bytes, Some(10 * 512_000));
        // A target that already has a baseline (a resumed soak) keeps it.
        let mut resumed = target(100.0);
        resumed.drive.polls_from = Some(98.0);
        resumed.drive.smart_at_soak_start = Some(SmartLog {
            data_units_written: 1,
            ..Default::default()
        });
        let other = sample(99.0, 99, 0, 0, false);
        update_target_drive(
            &mut resumed,
            &snap(device(Some(other.clone()), Some(other))),
        );
        assert_eq!(
            resumed.drive.smart_at_soak_start,
            Some(SmartLog {
                data_units_written: 1,
                ..Default::default()
            })
        );
        assert!(resumed.drive.host_at_soak_start.is_none());
    }

    #[test]
    fn baseline_is_the_first_poll_of_the_run_and_deltas_run_to_the_latest() {
        let mut t = target(100.0);
        // The poller's first read (throttling already: that episode counts), then a later one.
        let h = snap(device(
            Some(sample(101.0, 10, 4096, 1, true)),
            Some(sample(131.0, 30, 4096 + 10 * 512_000, 3, false)),
        ));
        update_target_drive(&mut t, &h);
        let start: SmartLog = t.drive.smart_at_soak_start.clone().expect("baseline");
        assert_eq!(
            start.data_units_written, 10,
            "the first poll, not the latest"
        );
        let base = t.drive.host_at_soak_start.expect("host baseline");
        assert_eq!((base.time, base.written_bytes), (101.0, 4096));
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.device, "nvme0");
        assert_eq!(f.data_written_bytes, Some(20 * 512_000));
        assert_eq!(f.nvsoak_written_bytes, Some(10 * 512_000));
        assert_eq!(f.accounting_agrees, Some(false));
        assert_eq!(
            f.throttle_episodes,
            Some(3),
            "events 3, one under way at the start"
        );
        // The checkpoint carries the baseline and the episodes.
        let st = TargetShared::from(t.clone()).to_state();
        assert_eq!(
            st.smart_at_soak_start,
            t.drive
                .smart_at_soak_start
                .as_ref()
                .and_then(|s| serde_json::to_value(s).ok())
        );
        assert_eq!(st.host_at_soak_start, Some(base));
        assert_eq!(st.drive_throttle_episodes, 3);
    }

    #[test]
    fn a_warning_and_the_peak_temperature_seen_before_a_restart_survive_it() {
        let mut d = DriveTracking {
            warning_seen: 0x04,
            temperature_max_kelvin: 351,
            ..Default::default()
        };
        let mut st = crate::model::checkpoint::TargetState::new("t", "/dev/x");
        st.drive_warning_seen = d.warning_seen;
        st.drive_temperature_max_kelvin = d.temperature_max_kelvin;
        let json = serde_json::to_string(&st).expect("ser");
        let back: crate::model::checkpoint::TargetState = serde_json::from_str(&json).expect("de");
        d = DriveTracking::default();
        d.restore("t", &back);
        assert_eq!((d.warning_seen, d.temperature_max_kelvin), (0x04, 351));
        // A checkpoint from before these fields loads with none seen.
        let mut v: serde_json::Value = serde_json::from_str(&json).expect("value");
        if let Some(m) = v.as_object_mut() {
            m.remove("drive_warning_seen");
            m.remove("drive_temperature_max_kelvin");
        }
        let old: crate::model::checkpoint::TargetState =
            serde_json::from_value(v).expect("old loads");
        assert_eq!(old.drive_warning_seen, 0);
    }

    #[test]
    fn a_resumed_soak_keeps_its_baseline_and_adds_the_carried_totals() {
        let mut t = target(1000.0);
        t.drive.smart_at_soak_start = Some(SmartLog {
            data_units_written: 5,
            ..Default::default()
        });
        t.drive.host_at_soak_start = Some(crate::model::results::HostAtSmart {
            time: 10.0,
            written_bytes: 0,
            ..Default::default()
        });
        t.carried.write_bytes = 2 * 512_000;
        t.drive.episodes_carried = 2;
        // This run's own counters restart at 0; the poller's first read predates nothing.
        let h = snap(device(
            Some(sample(1001.0, 8, 0, 0, false)),
            Some(sample(1031.0, 9, 2 * 512_000, 1, true)),
        ));
        update_target_drive(&mut t, &h);
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.start_time, 10.0);
        assert_eq!(f.data_written_bytes, Some(4 * 512_000));
        assert_eq!(
            f.nvsoak_written_bytes,
            Some(4 * 512_000),
            "carried + this run"
        );
        assert_eq!(f.accounting_agrees, Some(true));
        assert_eq!(f.throttle_episodes, Some(3));
    }

    #[test]
    fn polls_before_the_target_started_are_not_its_baseline() {
        // A target started by a reload: the poller's first read belongs to the old one.
        let mut t = target(500.0);
        let h = snap(device(
            Some(sample(1.0, 1, 999, 0, false)),
            Some(sample(400.0, 7, 999, 0, false)),
        ));
        update_target_drive(&mut t, &h);
        assert!(t.drive.smart_at_soak_start.is_none() && t.drive.figures.is_none());
        let h = snap(device(
            Some(sample(1.0, 1, 999, 0, false)),
            Some(sample(530.0, 8, 0, 0, false)),
        ));
        update_target_drive(&mut t, &h);
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.start_time, 530.0);
        assert_eq!(f.data_written_bytes, Some(0));
        // A file target or another drive's namespace: nothing.
        let mut other = target(0.0);
        other.path = "/dev/nvme1n1".into();
        update_target_drive(&mut other, &h);
        assert!(other.drive.figures.is_none() && other.drive.smart_at_soak_start.is_none());
    }

    /// The drive's own view reaches the soak figures: a panic after the soak started is
    /// `ocp_panic_changed`, a drive without a telemetry page leaves that figure `None`, and the
    /// C3h counters keep the first reading as the start.
    #[test]
    fn ocp_panics_and_latency_counts_reach_the_soak_figures() {
        use crate::model::events::{DriveEvent, kind};
        use crate::nvme::log::ocp_latency::{LatencyMonitorLog, PerOp};
        let mut t = target(100.0);
        let s = sample(130.0, 1, 0, 0, false);
        let mut d = device(Some(s.clone()), Some(s));
        d.pages.recovery = Some(Default::default());
        let mut l = LatencyMonitorLog::default();
        l.statics.counters[2] = PerOp {
            read: 5,
            write: 6,
            deallocate: 7,
        };
        d.pages.latency = Some(l.clone());
        update_target_drive(&mut t, &snap(d.clone()));
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.ocp_panic_changed, Some(false));
        assert_eq!(f.telemetry_generation_changed, None, "no 08h page");
        assert!(f.drive_events.is_empty());
        assert_eq!(f.ocp_latency_start.map(|c| c[2].read), Some(5));
        // Later: a panic at 150 s and more outliers.
        d.pages.events.push(DriveEvent {
            time: 150.0,
            kind: kind::OCP_PANIC.into(),
            detail: "OCP panic: panic ID 0x0 -> 0x9".into(),
        });
        d.pages.last_event.insert(kind::OCP_PANIC.into(), 150.0);
        l.statics.counters[2].read = 9;
        d.pages.latency = Some(l);
        update_target_drive(&mut t, &snap(d));
        let f = t.drive.figures.clone().expect("figures");
        assert_eq!(f.ocp_panic_changed, Some(true));
        assert_eq!(f.drive_events.len(), 1);
        assert_eq!(
            f.ocp_latency_start.map(|c| c[2].read),
            Some(5),
            "the start stays"
        );
        assert_eq!(f.ocp_latency_latest.map(|c| c[2].read), Some(9));
        // An older results file without these fields still loads.
        let old: crate::model::results::DriveSoak =
            serde_json::from_str(r#"{"device":"nvme0","start_time":1.0,"latest_time":2.0}"#)
                .expect("old file");
        assert_eq!(old.ocp_panic_changed, None);
        assert!(old.drive_events.is_empty());
    }
}
