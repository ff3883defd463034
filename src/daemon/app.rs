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
    /// The rendered `/metrics` body, served again for up to [`metrics_max_age`]; see
    /// `http::cache`.
    pub metrics_cache: crate::http::cache::MetricsCache,
    /// The rendered status page, served again as the `/metrics` body is.
    pub status_cache: crate::http::cache::MetricsCache,
}

/// Longest time a rendered `/metrics` body is served again.
pub const METRICS_MAX_AGE: Duration = Duration::from_millis(250);

/// How long a rendered `/metrics` body is served again: one stats interval (the workers
/// publish once per interval, so a newer render shows the same soak figures), at most
/// [`METRICS_MAX_AGE`], since the daemon's own figures (the auth counters, checkpoint saves,
/// uptime) change at any moment. A scrape every 100 ms then renders about every 200 ms, off
/// its path (`http::cache` renders ahead); under a full I/O load a render waits for a CPU the
/// soak is using, which is what a scrape no longer waits for.
pub fn metrics_max_age(stats_interval: Duration) -> Duration {
    stats_interval.min(METRICS_MAX_AGE)
}

/// How long a rendered status page is served again: one stats interval, at most a second. The
/// page reloads itself every 10 s and its figures change once per interval; the longer age
/// leaves a render planned ahead of a reload (`http::cache`) more room on a loaded host than
/// `/metrics` has (at 200 targets the page is 3 MB, and its render under a full I/O load takes
/// 100-200 ms).
pub fn status_max_age(stats_interval: Duration) -> Duration {
    stats_interval.min(Duration::from_secs(1))
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
                f.verify
                    .as_ref()
                    .and_then(|v| v.state.as_stored())
                    .map(|m| (f.name.as_str(), m))
            })
            .collect();
        if !slow.is_zero() {
            std::thread::sleep(slow);
        }
        crate::state::save(dir, &cp, &maps)
    }

    /// Render `/metrics` from the latest snapshots. Logs, at debug under the `nvsoak::scrape`
    /// target, how long each part took and how long the thread waited for a CPU meanwhile.
    pub fn render_metrics(&self) -> String {
        let t0 = Instant::now();
        let sched0 = crate::util::sched::SchedStat::this_thread();
        let snaps = self.target_snapshots();
        let totals = self.soak_totals(&snaps);
        let t_snap = t0.elapsed();
        let fams = self.families(&snaps, &totals);
        let t_fams = t0.elapsed();
        let body = match crate::metrics::encode_text(&fams) {
            Ok(t) => t,
            Err(e) => format!("# encoding metrics failed: {e}\n"),
        };
        let total = t0.elapsed();
        let waited = sched0
            .zip(crate::util::sched::SchedStat::this_thread())
            .map(|(a, b)| b.since(&a).waited);
        tracing::debug!(
            target: "nvsoak::scrape",
            snapshot_us = t_snap.as_micros() as u64,
            families_us = (t_fams - t_snap).as_micros() as u64,
            encode_us = (total - t_fams).as_micros() as u64,
            total_us = total.as_micros() as u64,
            waited_us = waited.map(|w| w.as_micros() as u64),
            bytes = body.len(),
            "rendered /metrics"
        );
        body
    }

    fn families(
        &self,
        snaps: &[scheduler::TargetSnapshot],
        totals: &[SoakTotals],
    ) -> Vec<prometheus::proto::MetricFamily> {
        let info = DaemonInfo {
            version: env!("CARGO_PKG_VERSION"),
            revision: option_env!("NVSOAK_GIT_REVISION").unwrap_or("unknown"),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            auth: self.auth.as_ref().map(|a| a.stats()),
            refused: crate::util::lock(&self.refused).clone(),
        };
        let mut fams = crate::metrics::workload::families(snaps, totals, &info);
        fams.extend(crate::metrics::state::families(
            &self.checkpoint_stats.snapshot(),
        ));
        fams.extend(crate::metrics::verdict::families_of(snaps));
        if let Some(h) = &self.health {
            fams.extend(crate::metrics::health::families(&h.snapshot()));
        }
        fams
    }

    pub fn render_status(&self) -> String {
        let snaps = self.target_snapshots();
        let drives = match &self.health {
            Some(h) => crate::report::status::drives_from_health(&h.snapshot()),
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
            for d in crate::report::status::drives_from_health(&hh.snapshot()) {
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
    fn metrics_cache(&self) -> Option<&crate::http::cache::MetricsCache> {
        Some(&self.metrics_cache)
    }
    fn status_cache(&self) -> Option<&crate::http::cache::MetricsCache> {
        Some(&self.status_cache)
    }
    fn page(&self, path: &str) -> Option<crate::http::Page> {
        (path == "/report").then(|| crate::http::Page {
            content_type: "text/html; charset=utf-8",
            body: crate::report::report_page_html_live(&self.state_dir, &self.target_snapshots()),
        })
    }
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
