//! The collectors: one per drive protocol, behind one interface ([`Collector`]). Each finds
//! its drives in sysfs, polls every present one on its own thread (`health::inflight`), and
//! keeps per drive the latest value of each page, the poll errors and the same endurance and
//! thermal derivations ([`Derived`], the same `nvsoak_*` metric names for every protocol).
//!
//! What is particular to a protocol lives in its collector: [`nvme`] (controllers, the SMART
//! and OCP pages) and [`ata`] (SATA disks, the SMART attributes and Device Statistics). The
//! poller (`health::poller`) runs them in one pass and publishes their drives in one snapshot.
//! Each turns its drive into the same protocol-neutral drive sample ([`sample`]), which is what
//! the readers past the collectors (the drive bookkeeping, the status rows) read.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use super::HostIoSource;
use super::derive::{Accounting, RatedEndurance, Throttle};
use crate::config::DeviceRatingOverride;
use crate::nvme::discover::Filter;
use crate::nvme::ratings::RatingsTable;

pub mod ata;
pub mod nvme;
pub mod sample;

pub use sample::{DriveFigures, DriveSample, PolledDrive, Reading};

/// One protocol's drives: found in sysfs, polled each on its own thread.
pub trait Collector {
    /// Walk sysfs under `sysfs_root` for this protocol's drives that `filter` allows: new ones
    /// are added, vanished ones stay with `present = false`.
    fn rescan(&mut self, sysfs_root: &Path, filter: &Filter);

    /// One poll of every present drive at Unix time `now`, each on its own thread, waiting for
    /// them until `deadline`; one still running then is reported and left running.
    fn poll(
        &mut self,
        now: f64,
        host: &Arc<dyn HostIoSource>,
        ratings: &Arc<RatingContext>,
        deadline: Instant,
    );

    /// Whether drive `name` has a poll still running past its deadline.
    fn is_polling(&self, name: &str) -> bool;
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
