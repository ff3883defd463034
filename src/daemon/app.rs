//! What the HTTP server asks of the daemon ([`DaemonApp`]: metrics, the status page, the
//! report, and the checkpoint a save writes), and the list of the running targets' snapshots
//! it reads ([`TargetList`]).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::health::HostIoSource;
use crate::metrics::workload::{DaemonInfo, SoakTotals};
use crate::workload::scheduler::{self, SharedSnapshot};

/// What the HTTP server asks of the daemon.
pub struct DaemonApp {
    /// The running targets, in config order; swapped as a whole when SIGHUP reloads the config.
    pub targets: TargetList,
    pub health: Option<crate::health::HealthHandle>,
    pub started: Instant,
    /// The last hour of figures for the status page's charts (bounded).
    pub history: std::sync::Mutex<crate::report::history::History>,
    /// Where `results/` lives, for `/report`.
    pub state_dir: std::path::PathBuf,
    /// The background checkpoint saves (see [`CheckpointSaver`]).
    pub checkpoint_stats: Arc<crate::state::SaveStats>,
    /// The HTTP server's basic-auth counters.
    pub auth: Option<Arc<crate::http::auth::AuthGuard>>,
    /// Targets of the config whose start the last reload refused (shown down in `/metrics`).
    pub refused: std::sync::Mutex<Vec<crate::model::spec::RefusedTarget>>,
}

impl DaemonApp {
    pub fn target_snapshots(&self) -> Vec<scheduler::TargetSnapshot> {
        self.targets.get().iter().map(|s| s.snapshot()).collect()
    }

    fn soak_totals(&self, snaps: &[scheduler::TargetSnapshot]) -> Vec<SoakTotals> {
        snaps
            .iter()
            .map(|s| {
                let t = s.soak_totals();
                SoakTotals {
                    target: s.name.clone(),
                    read_bytes: t.read_bytes,
                    written_bytes: t.write_bytes,
                    errors: t.errors,
                    elapsed_secs: t.soak_elapsed_secs,
                }
            })
            .collect()
    }

    /// Refresh every block target's drive-side soak figures from the latest health poll (see
    /// [`crate::workload::drive::DriveTracking::update`]). Cheap: no I/O, one short write lock
    /// per target.
    pub fn update_drive_figures(&self) {
        let Some(h) = &self.health else { return };
        let health = h.snapshot();
        for shared in self.targets.get() {
            shared.update_drive_from(&health);
        }
    }

    /// Save the checkpoint of `targets` (atomically; see `state::save`). Blocking: the
    /// generation maps of verified targets can be gigabytes, so the daemon calls it off the
    /// event loop ([`CheckpointSaver`]). `slow` (test-only) is slept before writing.
    pub fn checkpoint(
        &self,
        dir: &std::path::Path,
        plan_hash: &str,
        targets: &[SharedSnapshot],
        slow: Duration,
    ) -> Result<(), crate::state::StateError> {
        self.update_drive_figures();
        if let Some(h) = &self.health {
            let known = h.snapshot().known();
            if let Err(e) = crate::health::known::save(dir, &known) {
                tracing::warn!(error = %e, "saving the list of known drives failed");
            }
        }
        let cp = crate::model::checkpoint::Checkpoint::new(
            plan_hash.to_string(),
            targets.iter().map(|s| s.to_state()).collect(),
        );
        let maps: Vec<(&str, &crate::workload::pattern::GenMap)> = targets
            .iter()
            .filter_map(|s| {
                let f = &s.fixed;
                f.verify.as_ref().map(|v| (f.name.as_str(), &*v.map))
            })
            .collect();
        if !slow.is_zero() {
            std::thread::sleep(slow);
        }
        crate::state::save(dir, &cp, &maps)
    }

    pub fn render_metrics(&self) -> String {
        let snaps = self.target_snapshots();
        let info = DaemonInfo {
            version: env!("CARGO_PKG_VERSION"),
            revision: option_env!("NVSOAK_GIT_REVISION").unwrap_or("unknown"),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            auth: self.auth.as_ref().map(|a| a.stats()),
            refused: crate::util::lock(&self.refused).clone(),
        };
        let mut fams = crate::metrics::workload::families(&snaps, &self.soak_totals(&snaps), &info);
        fams.extend(crate::metrics::state::families(
            &self.checkpoint_stats.snapshot(),
        ));
        fams.extend(crate::metrics::verdict::families_of(&snaps));
        if let Some(h) = &self.health {
            fams.extend(crate::metrics::health::families(&h.snapshot()));
        }
        match crate::metrics::encode_text(&fams) {
            Ok(t) => t,
            Err(e) => format!("# encoding metrics failed: {e}\n"),
        }
    }

    pub fn render_status(&self) -> String {
        let snaps = self.target_snapshots();
        let drives = match &self.health {
            Some(h) => drives_from_health(&h.snapshot()),
            None => Vec::new(),
        };
        let why = crate::report::nodrives::no_drives_reason(
            self.health.as_ref().map(|h| h.snapshot()).as_deref(),
        );
        let history = crate::util::lock(&self.history);
        crate::report::status::render_status_why(&snaps, &drives, &history, &why)
    }

    /// Sample the current figures into the status page's history (once per second).
    pub fn sample_history(&self) {
        let snaps = self.target_snapshots();
        let now = scheduler::now_unix();
        let mut h = crate::util::lock(&self.history);
        h.push(now, &snaps);
        if let Some(hh) = &self.health {
            for d in drives_from_health(&hh.snapshot()) {
                if let Some(t) = d.temperature_c {
                    h.push_device(now, &d.device, t);
                }
            }
        }
    }
}

impl crate::http::App for DaemonApp {
    fn metrics(&self) -> String {
        self.render_metrics()
    }
    fn status_page(&self) -> String {
        self.render_status()
    }
    fn page(&self, path: &str) -> Option<crate::http::Page> {
        (path == "/report").then(|| crate::http::Page {
            content_type: "text/html; charset=utf-8",
            body: crate::report::report_page_html(&self.state_dir),
        })
    }
}

/// What the status page shows of each drive, from the latest health poll.
pub fn drives_from_health(
    snap: &crate::health::HealthSnapshot,
) -> Vec<crate::report::status::DriveStatus> {
    // 0 K: the drive reports no value.
    let k2c = |k: u16| (k != 0).then(|| crate::nvme::log::smart::SmartLog::kelvin_to_celsius(k));
    snap.devices
        .iter()
        .map(|d| {
            let smart = d.smart.as_ref();
            crate::report::status::DriveStatus {
                device: d.name.clone(),
                model: d.model.clone(),
                serial: d.serial.clone(),
                up: d.up,
                temperature_c: smart.and_then(|s| k2c(s.temperature)),
                warning_temp_c: d.id.as_ref().and_then(|i| k2c(i.wctemp)),
                critical_temp_c: d.id.as_ref().and_then(|i| k2c(i.cctemp)),
                percentage_used: smart.map(|s| s.percent_used as f64 / 100.0),
                available_spare: smart.map(|s| s.avail_spare as f64 / 100.0),
                data_written_bytes: smart.map(|s| s.data_written_bytes() as f64),
                rated_endurance_bytes: d.derived.rated.as_ref().and_then(|r| r.bytes),
                throttling: Some(d.derived.throttle.throttling),
                throttle_events: Some(d.derived.throttle.events),
                media_errors: smart.map(|s| u64::try_from(s.media_errors).unwrap_or(u64::MAX)),
                error_log_entries: smart
                    .map(|s| u64::try_from(s.num_err_log_entries).unwrap_or(u64::MAX)),
                critical_warning: smart.map(|s| s.critical_warning),
                ..Default::default()
            }
        })
        .chain(snap.ata.iter().map(crate::report::status_ata::drive_status))
        .collect()
}

/// The snapshots of the running targets, shared by the HTTP server, the health poller's
/// accounting check and the daemon loop, which replaces the list on a config reload.
#[derive(Clone, Default)]
pub struct TargetList(Arc<RwLock<Vec<SharedSnapshot>>>);

impl TargetList {
    pub fn new(v: Vec<SharedSnapshot>) -> Self {
        TargetList(Arc::new(RwLock::new(v)))
    }

    /// The current list (cheap: clones the `Arc`s).
    pub fn get(&self) -> Vec<SharedSnapshot> {
        crate::util::read(&self.0).clone()
    }

    pub fn set(&self, v: Vec<SharedSnapshot>) {
        match self.0.write() {
            Ok(mut g) => *g = v,
            Err(p) => *p.into_inner() = v,
        }
    }
}

impl HostIoSource for TargetList {
    fn host_io(&self) -> Vec<crate::health::HostIo> {
        scheduler::TargetsHostIo(self.get()).host_io()
    }
}

pub(super) fn status_line(app: &DaemonApp) -> String {
    let parts: Vec<String> = app
        .targets
        .get()
        .iter()
        .map(|s| {
            let name = &s.fixed.name;
            s.view(|v| {
                if v.running {
                    format!("{name}: {} {} {:.0} IOPS", v.phase, v.profile, v.iops)
                } else {
                    format!("{name}: finished")
                }
            })
        })
        .collect();
    parts.join("; ")
}
