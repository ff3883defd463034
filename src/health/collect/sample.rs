//! The drive sample: every drive of a health snapshot as the readers past the collectors see
//! it, whatever its protocol ([`PolledDrive`]).
//!
//! A collector keeps what its protocol reports in its own words (an NVMe controller's
//! [`DeviceHealth`], a SATA disk's [`AtaHealth`]). Each turns its drive into the same shape
//! here: the identity, whether the last poll answered, the derivations ([`Derived`]), the
//! first and latest successful polls as [`DriveSample`]s (time, nvsoak's own host figures of
//! that instant, the throttle state, and the protocol's counters as the soak figures and the
//! checkpoint baseline need them), and the latest shared figures as [`DriveFigures`]
//! (temperature, wear, spare, bytes written, error counts, the drive's own alarm), in the
//! same units for every protocol.
//!
//! Readers (`workload::drive`'s bookkeeping, `report`'s status rows) go through
//! [`HealthSnapshot::drives`] and never tell the collectors' records apart themselves; this
//! is the one place that does.

use std::path::Path;

use super::Derived;
use super::ata::AtaHealth;
use super::ata::sample::AtaCounters;
use super::nvme::DeviceHealth;
use super::nvme::pages::DrivePages;
use crate::health::{HealthSnapshot, HostIo};
use crate::model::drive::Protocol;
use crate::model::results::DeviceIdentity;
use crate::nvme::log::smart::SmartLog;

/// The protocol's own counters at one poll: what that protocol's soak figures are computed
/// from and what the checkpoint keeps as the soak-start baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading<'a> {
    /// The SMART / Health Information log.
    Nvme(&'a SmartLog),
    /// The SMART attributes and Device Statistics, read into base units.
    Ata(&'a AtaCounters),
}

/// One successful poll of a drive, with nvsoak's own figures for the targets on it read right
/// after it (the same instant) and the throttle state after the poll.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriveSample<'a> {
    /// Unix time of the poll.
    pub time: f64,
    pub reading: Reading<'a>,
    /// The targets on this drive (a namespace, the disk itself or a partition of either).
    pub host: &'a [HostIo],
    /// Throttle episodes counted by this poller so far, and whether this poll was throttled.
    pub throttle_events: u64,
    pub throttling: bool,
}

impl DriveSample<'_> {
    /// nvsoak's figures for the target at `path`, when it is on this drive.
    pub fn host_of(&self, path: &Path) -> Option<&HostIo> {
        self.host.iter().find(|h| h.path == path)
    }
}

/// A drive's figures at its latest poll that every protocol may have, in the same units;
/// `None` when the drive does not report one (or its protocol has no such figure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveFigures {
    pub temperature_c: Option<f64>,
    /// The drive's warning and critical temperatures (NVMe WCTEMP / CCTEMP; ATA: the Device
    /// Statistics' specified maximum as the warning one).
    pub warning_temp_c: Option<f64>,
    pub critical_temp_c: Option<f64>,
    /// Percentage used as a ratio (1.0 = 100 %, may exceed 1).
    pub percentage_used: Option<f64>,
    pub available_spare: Option<f64>,
    /// Lifetime host bytes written as the drive counts them.
    pub data_written_bytes: Option<f64>,
    /// NVMe media errors; ATA: reported uncorrectable errors.
    pub media_errors: Option<u64>,
    pub error_log_entries: Option<u64>,
    /// NVMe's critical-warning byte.
    pub critical_warning: Option<u8>,
    /// ATA: SMART RETURN STATUS passed, and attribute 5 (reallocated sectors).
    pub smart_passed: Option<bool>,
    pub reallocated_sectors: Option<u64>,
}

/// One drive of a snapshot, whatever its protocol.
#[derive(Debug, Clone, Copy)]
pub enum PolledDrive<'a> {
    Nvme(&'a DeviceHealth),
    Ata(&'a AtaHealth),
}

impl<'a> PolledDrive<'a> {
    pub fn protocol(&self) -> Protocol {
        match self {
            PolledDrive::Nvme(_) => Protocol::Nvme,
            PolledDrive::Ata(_) => Protocol::Ata,
        }
    }

    /// `nvme0`, `sda`.
    pub fn name(&self) -> &'a str {
        match self {
            PolledDrive::Nvme(d) => &d.name,
            PolledDrive::Ata(d) => &d.name,
        }
    }

    pub fn model(&self) -> &'a str {
        match self {
            PolledDrive::Nvme(d) => &d.model,
            PolledDrive::Ata(d) => &d.model,
        }
    }

    pub fn serial(&self) -> &'a str {
        match self {
            PolledDrive::Nvme(d) => &d.serial,
            PolledDrive::Ata(d) => &d.serial,
        }
    }

    /// Whether the drive's last poll answered.
    pub fn up(&self) -> bool {
        match self {
            PolledDrive::Nvme(d) => d.up,
            PolledDrive::Ata(d) => d.up,
        }
    }

    /// Capacity for DWPD (NVMe: TNVMCAP, else the namespaces; ATA: IDENTIFY), 0 unknown.
    pub fn capacity_bytes(&self) -> u64 {
        match self {
            PolledDrive::Nvme(d) => d.capacity_bytes(),
            PolledDrive::Ata(d) => d.capacity_bytes(),
        }
    }

    /// The drive's identity as the results file keeps it.
    pub fn identity(&self) -> DeviceIdentity {
        let (name, model, serial, firmware) = match self {
            PolledDrive::Nvme(d) => (&d.name, &d.model, &d.serial, &d.firmware),
            PolledDrive::Ata(d) => (&d.name, &d.model, &d.serial, &d.firmware),
        };
        DeviceIdentity {
            controller: name.clone(),
            model: model.clone(),
            serial: serial.clone(),
            firmware: firmware.clone(),
            capacity_bytes: self.capacity_bytes(),
        }
    }

    /// The endurance and thermal derivations, the same for every protocol.
    pub fn derived(&self) -> &'a Derived {
        match self {
            PolledDrive::Nvme(d) => &d.derived,
            PolledDrive::Ata(d) => &d.derived,
        }
    }

    /// The first successful poll of this poller (since the daemon started, or since another
    /// drive took the name).
    pub fn first(&self) -> Option<DriveSample<'a>> {
        match self {
            PolledDrive::Nvme(d) => d.first_sample.as_ref().map(nvme_sample),
            PolledDrive::Ata(d) => d.first_sample.as_ref().map(ata_sample),
        }
    }

    /// The latest successful poll.
    pub fn latest(&self) -> Option<DriveSample<'a>> {
        match self {
            PolledDrive::Nvme(d) => d.last_sample.as_ref().map(nvme_sample),
            PolledDrive::Ata(d) => d.last_sample.as_ref().map(ata_sample),
        }
    }

    /// The latest shared figures (each collector reads its own pages into them).
    pub fn figures(&self) -> DriveFigures {
        match self {
            PolledDrive::Nvme(d) => d.figures(),
            PolledDrive::Ata(d) => d.figures(),
        }
    }

    /// The drive's own view of an OCP NVMe drive (C1h, C3h, telemetry, drive events); `None`
    /// for a protocol without such pages.
    pub fn pages(&self) -> Option<&'a DrivePages> {
        match self {
            PolledDrive::Nvme(d) => Some(&d.pages),
            PolledDrive::Ata(_) => None,
        }
    }
}

fn nvme_sample(s: &super::nvme::SmartSample) -> DriveSample<'_> {
    DriveSample {
        time: s.time,
        reading: Reading::Nvme(&s.smart),
        host: &s.host,
        throttle_events: s.throttle_events,
        throttling: s.throttling,
    }
}

fn ata_sample(s: &super::ata::sample::AtaSample) -> DriveSample<'_> {
    DriveSample {
        time: s.time,
        reading: Reading::Ata(&s.counters),
        host: &s.host,
        throttle_events: s.throttle_events,
        throttling: s.throttling,
    }
}

impl HealthSnapshot {
    /// Every drive of the snapshot: the NVMe controllers, then the SATA disks.
    pub fn drives(&self) -> impl Iterator<Item = PolledDrive<'_>> {
        self.devices
            .iter()
            .map(PolledDrive::Nvme)
            .chain(self.ata.iter().map(PolledDrive::Ata))
    }
}
