//! The daemon: starts every target's scheduler, the health poller and the HTTP server, talks to
//! systemd, and stops everything on SIGTERM/SIGINT within a few seconds.
//!
//! Architecture Invariant: tokio runs HTTP, signals, the poller and timers; workload threads are
//! plain OS threads that never enter the runtime.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::config::Settings;
use crate::health::HostIoSource;
use crate::metrics::workload::{DaemonInfo, SoakTotals};
use crate::workload::scheduler::{self, RunOptions, SharedSnapshot, TargetHandle};

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
}

impl DaemonApp {
    pub fn target_snapshots(&self) -> Vec<scheduler::TargetSnapshot> {
        self.targets
            .get()
            .iter()
            .map(|s| crate::util::read(s).clone())
            .collect()
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
    /// [`update_target_drive`]). Cheap: no I/O, one short write lock per target.
    pub fn update_drive_figures(&self) {
        let Some(h) = &self.health else { return };
        let health = h.snapshot();
        for shared in self.targets.get() {
            let mut g = crate::util::write(&shared);
            if g.is_block {
                update_target_drive(&mut g, &health);
            }
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
        let snaps: Vec<scheduler::TargetSnapshot> = targets
            .iter()
            .map(|s| crate::util::read(s).clone())
            .collect();
        let cp = crate::state::Checkpoint::new(
            plan_hash.to_string(),
            snaps.iter().map(|s| s.to_state()).collect(),
        );
        let maps: Vec<(&str, &crate::workload::pattern::GenMap)> = snaps
            .iter()
            .filter_map(|s| s.verify.as_ref().map(|v| (s.name.as_str(), &*v.map)))
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
        };
        let mut fams = crate::metrics::workload::families(&snaps, &self.soak_totals(&snaps), &info);
        fams.extend(crate::metrics::state::families(
            &self.checkpoint_stats.snapshot(),
        ));
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
        let history = crate::util::lock(&self.history);
        crate::report::status::render_status(&snaps, &drives, &history)
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

/// The drive-side soak figures of one block target from a health snapshot.
///
/// The target's drive is the one whose latest SMART sample carries the target's host figures
/// (the poller matched its path to a namespace or partition). Only polls from
/// `drive.polls_from` on (default: the target's start) describe this target; the daemon sets it
/// to its pre-start poll for the targets it starts with, so their baseline predates the first
/// write. On the first call that finds it in this run, the soak-start baseline is taken, unless
/// the checkpoint already brought one: the poller's first SMART read of this run when it
/// already saw this target, else the latest.
/// The baseline (SMART log and nvsoak's soak totals of that instant) is checkpointed, so the
/// deltas span the whole soak across restarts. Then the figures are recomputed from the
/// baseline to the latest successful poll ([`crate::workload::results::drive_soak`]).
pub fn update_target_drive(
    t: &mut scheduler::TargetSnapshot,
    health: &crate::health::HealthSnapshot,
) {
    use crate::health::{HostIo, SmartSample};
    use crate::workload::results::{DriveReading, HostAtSmart, drive_soak};
    let path = PathBuf::from(&t.path);
    let on = |s: &SmartSample| s.host.iter().find(|h| h.path == path).cloned();
    let Some((d, latest, latest_io)) = health.devices.iter().find_map(|d| {
        let s = d.last_sample.as_ref()?;
        let io = on(s)?;
        Some((d, s, io))
    }) else {
        return;
    };
    // The poller mapped the target's path to this controller (symlinks and partitions
    // resolved): the target's `device` label follows it.
    t.controller = Some(d.name.clone());
    // A poll from before this run's target started describes an earlier target on the path.
    let from = t.drive.polls_from.unwrap_or(t.started_at);
    if latest.time < from {
        return;
    }
    let carried = t.carried.clone();
    let host_at = |s: &SmartSample, io: &HostIo| HostAtSmart {
        time: s.time,
        read_bytes: carried.read_bytes + io.read_bytes,
        written_bytes: carried.write_bytes + io.written_bytes,
        read_ops: carried.read_ops + io.read_ops,
        write_ops: carried.write_ops + io.write_ops,
    };
    if t.drive.episodes_base.is_none() || t.smart_at_soak_start.is_none() {
        let (first, first_io) = d
            .first_sample
            .as_ref()
            .filter(|s| s.time >= from)
            .and_then(|s| on(s).map(|io| (s, io)))
            .unwrap_or((latest, latest_io.clone()));
        if t.drive.episodes_base.is_none() {
            // An episode under way at the first poll counts as one seen during the soak.
            t.drive.episodes_base = Some(
                first
                    .throttle_events
                    .saturating_sub(u64::from(first.throttling)),
            );
        }
        if t.smart_at_soak_start.is_none()
            && let Ok(v) = serde_json::to_value(&first.smart)
        {
            t.smart_at_soak_start = Some(v);
            t.drive.host_at_soak_start = Some(host_at(first, &first_io));
        }
    }
    let base = t.drive.episodes_base.unwrap_or(0);
    t.drive.episodes_this_run = latest.throttle_events.saturating_sub(base);
    let Some(start) = t
        .smart_at_soak_start
        .as_ref()
        .and_then(|v| serde_json::from_value::<crate::nvme::log::smart::SmartLog>(v.clone()).ok())
    else {
        return;
    };
    let start_time = t
        .drive
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
            smart: &start,
            host: t.drive.host_at_soak_start,
        },
        &DriveReading {
            time: latest.time,
            smart: &latest.smart,
            host: Some(host_at(latest, &latest_io)),
        },
        capacity,
    );
    f.device = d.name.clone();
    t.drive.identity = Some(crate::workload::results::DeviceIdentity {
        controller: d.name.clone(),
        model: d.model.clone(),
        serial: d.serial.clone(),
        firmware: d.firmware.clone(),
        capacity_bytes: d.capacity_bytes(),
    });
    f.throttle_episodes = Some(t.drive.episodes());
    f.rated_dwpd = rated.and_then(|r| r.dwpd);
    f.endurance_consumed_ratio = d.derived.endurance_consumed_ratio;
    f.iops_throttled = d.derived.throttle.throttled_iops;
    f.iops_unthrottled = d.derived.throttle.unthrottled_iops;
    t.drive.figures = Some(f);
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
            }
        })
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

/// Test-only: `NVSOAK_TEST_SLOW_CHECKPOINT_MS=<ms>` makes every checkpoint save sleep that long
/// before it writes (read once at start), so the integration tests can hold a save in flight.
/// Not for production use.
pub const TEST_SLOW_CHECKPOINT_ENV: &str = "NVSOAK_TEST_SLOW_CHECKPOINT_MS";

fn test_slow_checkpoint() -> Duration {
    let ms = std::env::var(TEST_SLOW_CHECKPOINT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if ms > 0 {
        tracing::warn!(
            "{TEST_SLOW_CHECKPOINT_ENV}={ms}: every checkpoint save is delayed (a test hook)"
        );
    }
    Duration::from_millis(ms)
}

/// Saves the checkpoint off the event loop: at most one save at a time, on tokio's blocking
/// pool, so a save of gigabytes of generation maps never stalls signals, the watchdog or the
/// loop's ticks. A checkpoint tick while a save runs is skipped (and counted); a save asked for
/// by a reload runs as soon as the one in flight ends; shutdown waits for it, then saves once
/// more.
struct CheckpointSaver {
    app: Arc<DaemonApp>,
    dir: PathBuf,
    /// Test-only delay of each save ([`TEST_SLOW_CHECKPOINT_ENV`]).
    slow: Duration,
    in_flight: Option<tokio::task::JoinHandle<()>>,
    /// Plan hash of a save asked for while one was in flight.
    pending: Option<String>,
}

impl CheckpointSaver {
    fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    fn spawn(&mut self, hash: String) {
        let (app, dir, slow) = (self.app.clone(), self.dir.clone(), self.slow);
        // The targets now, so the saved list always matches `hash`, even if a reload swaps
        // the list while the save runs.
        let targets = app.targets.get();
        app.checkpoint_stats.started();
        self.in_flight = Some(tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let res = app.checkpoint(&dir, &hash, &targets, slow);
            if let Err(e) = &res {
                tracing::warn!(error = %e,
                    "saving the checkpoint failed; the previous one stays in place, will retry at the next interval");
            }
            app.checkpoint_stats
                .finished(res.is_ok(), t0.elapsed().as_secs_f64());
        }));
    }

    /// A checkpoint tick: start a save unless one is still in flight (then skip this tick).
    fn tick(&mut self, hash: &str) {
        if self.busy() {
            self.app.checkpoint_stats.skipped_tick();
            tracing::debug!("checkpoint tick skipped: the previous save is still running");
        } else {
            self.spawn(hash.to_string());
        }
    }

    /// Save as soon as possible: now, or when the save in flight ends.
    fn request(&mut self, hash: &str) {
        if self.busy() {
            self.pending = Some(hash.to_string());
        } else {
            self.spawn(hash.to_string());
        }
    }

    /// Resolves when the save in flight ends, then starts a pending one. Never resolves while
    /// none is in flight (guard the `select!` branch with [`Self::busy`]).
    async fn settle(&mut self) {
        let Some(h) = self.in_flight.as_mut() else {
            return std::future::pending().await;
        };
        if let Err(e) = h.await {
            tracing::warn!(error = %e, "the checkpoint save task failed");
        }
        self.in_flight = None;
        if let Some(hash) = self.pending.take() {
            self.spawn(hash);
        }
    }

    /// Shutdown: wait for the save in flight (and a pending one), then save once more.
    async fn finish(&mut self, hash: &str) {
        while self.busy() {
            self.settle().await;
        }
        self.spawn(hash.to_string());
        self.settle().await;
    }
}

/// Options from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunFlags {
    /// Exit once every target's plan has finished (default: keep serving until signalled).
    pub exit_when_done: bool,
    /// The config file, read again on SIGHUP (`None`: the built-in default, nothing to reload).
    pub config_path: Option<PathBuf>,
    /// Command-line settings, applied again over the file after each reload.
    pub overrides: crate::reload::Overrides,
}

/// What runs now: the settings in effect, a handle per started target, and the plan hash the
/// checkpoint is saved under (always the hash of `settings.targets`).
struct Running {
    settings: Settings,
    handles: Vec<TargetHandle>,
    plan_hash: String,
}

impl Running {
    fn snapshots(&self) -> Vec<SharedSnapshot> {
        self.handles.iter().map(|h| h.snapshot.clone()).collect()
    }
}

/// What a SIGHUP did.
#[derive(Debug, Default)]
struct ReloadOutcome {
    applied: bool,
    checkpoint_interval_changed: bool,
    /// At least one target was (re)started.
    started_targets: bool,
}

/// SIGHUP: load and validate the config file again and apply it. An invalid file changes
/// nothing. Unchanged targets keep running untouched; removed ones are stopped; changed and new
/// ones are started from the start of their plan. Blocking (it opens files and joins threads).
fn reload(
    run: &mut Running,
    flags: &RunFlags,
    opts: &RunOptions,
    global_stop: &Arc<AtomicBool>,
) -> ReloadOutcome {
    let Some(path) = flags.config_path.as_deref() else {
        tracing::warn!(
            "SIGHUP: running the built-in default (no --config), so there is no file to reload"
        );
        return ReloadOutcome::default();
    };
    let mut new = match crate::config::load(Some(path)) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(config = %path.display(),
                "SIGHUP: config rejected, keeping the running config unchanged: {e}");
            return ReloadOutcome::default();
        }
    };
    flags.overrides.apply(&mut new);
    for key in crate::reload::needs_restart(&run.settings, &new) {
        tracing::warn!(config = %path.display(), key,
            "SIGHUP: {key} changed; it takes effect only after a restart, keeping the running value");
    }
    let merged = crate::reload::merge_live(&run.settings, &new);
    if let Err(e) = scheduler::check_aliases(&merged.targets) {
        tracing::error!(config = %path.display(),
            "SIGHUP: config rejected, keeping the running config unchanged: {e}");
        return ReloadOutcome::default();
    }
    let diff = crate::reload::diff_targets(&run.settings.targets, &merged.targets);
    let checkpoint_interval_changed =
        merged.state.checkpoint_interval != run.settings.state.checkpoint_interval;

    let mut stopped = Vec::new();
    for name in diff.to_stop() {
        if let Some(i) = run.handles.iter().position(|h| h.name == name) {
            let h = run.handles.remove(i);
            h.join();
            tracing::info!(target_name = %name, "SIGHUP: target stopped");
            stopped.push(name);
        }
    }
    let mut started = Vec::new();
    let mut failed = Vec::new();
    for spec in diff.to_start() {
        // A changed target starts its plan over: its earlier results go aside first.
        crate::workload::results::archive(&opts.state_dir, &spec.name, "restart");
        match scheduler::start(spec.clone(), opts.clone(), global_stop.clone(), None, None) {
            Ok(h) => {
                tracing::info!(target_name = %spec.name, path = %spec.path.display(), "target started");
                run.handles.push(h);
                started.push(spec.name.clone());
            }
            Err(e) => {
                tracing::error!(target_name = %spec.name, path = %spec.path.display(),
                    "SIGHUP: target could not be started, it stays stopped: {e}");
                failed.push(spec.name.clone());
            }
        }
    }
    // The running plan: the new config's targets, in its order, minus those that failed.
    let mut specs = merged.targets.clone();
    specs.retain(|t| run.handles.iter().any(|h| h.name == t.name));
    run.handles.sort_by_key(|h| {
        specs
            .iter()
            .position(|t| t.name == h.name)
            .unwrap_or(usize::MAX)
    });
    run.settings = merged;
    run.settings.targets = specs;
    run.plan_hash = crate::state::plan_hash(&run.settings.targets);
    tracing::info!(config = %path.display(),
        unchanged = ?diff.unchanged, stopped = ?stopped, started = ?started, failed = ?failed,
        "SIGHUP: config reloaded");
    ReloadOutcome {
        applied: true,
        checkpoint_interval_changed,
        started_targets: !started.is_empty(),
    }
}

fn notify(state: &[sd_notify::NotifyState<'_>]) {
    // Not under systemd (no NOTIFY_SOCKET): sd_notify does nothing.
    let _ = sd_notify::notify(state);
}

/// Where the health poller finds controllers and how it talks to them.
pub struct HealthWiring {
    /// `/sys`, or a fake tree.
    pub sysfs_root: PathBuf,
    pub opener: crate::health::poller::Opener,
}

impl Default for HealthWiring {
    fn default() -> Self {
        HealthWiring {
            sysfs_root: PathBuf::from("/sys"),
            opener: crate::health::poller::ioctl_opener(),
        }
    }
}

/// Run the daemon until SIGTERM/SIGINT (or, with `exit_when_done`, until the plan ends).
pub fn run(settings: Settings, flags: RunFlags) -> Result<()> {
    run_with(settings, flags, HealthWiring::default())
}

/// The checkpoint to resume from, or why the run starts fresh. A checkpoint saved for another
/// device than a block target's path names now is not resumed.
fn load_checkpoint(
    settings: &Settings,
    plan_hash: &str,
) -> Result<(Option<crate::state::Loaded>, Option<crate::state::Fresh>)> {
    // Who each block target is now: a checkpoint saved for another device is not resumed.
    let devices: std::collections::BTreeMap<String, String> = settings
        .targets
        .iter()
        .filter(|t| crate::safety::is_block_device(&t.path))
        .filter_map(|t| {
            let id = crate::safety::identify(&t.path).ok()?;
            Some((t.name.clone(), crate::state::device_key(&id)))
        })
        .collect();
    let r = match crate::state::load_for(&settings.state.dir, plan_hash, &devices)
        .with_context(|| format!("reading the checkpoint in {}", settings.state.dir.display()))?
    {
        Ok(l) => (Some(l), None),
        Err(why) => (None, Some(why)),
    };
    Ok(r)
}

/// One health poll before any target writes: the soak-start SMART baseline of each block
/// target then predates its first write, so the drive's deltas cover the whole soak. The
/// targets' entries carry zero host figures (nothing written yet in this run).
fn pre_poll(settings: &Settings, wiring: &HealthWiring) -> Option<(crate::health::Poller, f64)> {
    settings.health.enabled.then(|| {
        let at = crate::health::poller::unix_now();
        let mut p = crate::health::Poller::new(
            settings.health.clone(),
            &wiring.sysfs_root,
            wiring.opener.clone(),
        );
        let zero: Vec<crate::health::HostIo> = settings
            .targets
            .iter()
            .filter(|t| crate::safety::is_block_device(&t.path))
            .map(|t| crate::health::HostIo {
                path: t.path.clone(),
                ..Default::default()
            })
            .collect();
        p.poll(&zero);
        (p, at)
    })
}

/// Start every target, refusing aliases first; on a failure the started ones are stopped.
fn start_targets(
    settings: &Settings,
    opts: &RunOptions,
    global_stop: &Arc<AtomicBool>,
    loaded: &mut Option<crate::state::Loaded>,
    fresh: Option<crate::state::Fresh>,
) -> Result<Vec<TargetHandle>> {
    // Two names for one device or file are refused before anything opens.
    scheduler::check_aliases(&settings.targets)?;
    let mut handles: Vec<TargetHandle> = Vec::new();
    for spec in &settings.targets {
        let resume = loaded
            .as_ref()
            .and_then(|l| l.checkpoint.target(&spec.name).cloned());
        let genmap = loaded.as_mut().and_then(|l| l.genmaps.remove(&spec.name));
        if resume.is_none() {
            // Starting over: the earlier results file goes aside, never overwritten.
            let why = fresh.map_or("orphan", crate::state::Fresh::results_reason);
            crate::workload::results::archive(&settings.state.dir, &spec.name, why);
        }
        match scheduler::start(
            spec.clone(),
            opts.clone(),
            global_stop.clone(),
            resume,
            genmap,
        ) {
            Ok(h) => {
                tracing::info!(target_name = %spec.name, path = %spec.path.display(), "target started");
                handles.push(h);
            }
            Err(e) => {
                global_stop.store(true, Ordering::SeqCst);
                for h in handles {
                    h.join();
                }
                return Err(e.into());
            }
        }
    }
    Ok(handles)
}

/// The pre-start poll describes these targets (nothing written yet): their baseline.
fn set_baselines(handles: &[TargetHandle], p: &crate::health::Poller, at: f64) {
    let pre = p.snapshot();
    for h in handles {
        let mut t = crate::util::write(&h.snapshot);
        t.drive.polls_from = Some(at);
        if t.is_block {
            update_target_drive(&mut t, &pre);
        }
    }
}

/// The signals the daemon acts on, installed before anything is served: a SIGTERM as soon as
/// /healthz answers is a clean stop.
struct Signals {
    sigterm: tokio::signal::unix::Signal,
    sigint: tokio::signal::unix::Signal,
    sighup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            sigterm: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            sigint: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            sighup: signal(SignalKind::hangup()).context("installing the SIGHUP handler")?,
        })
    }
}

/// The once-a-second work of the event loop: the systemd watchdog, the status page's history,
/// drive figures after each new health poll, and the systemd status line when it changes.
#[derive(Default)]
struct Pulse {
    seen_polls: u64,
    last_status: String,
}

impl Pulse {
    fn beat(&mut self, app: &DaemonApp) {
        notify(&[sd_notify::NotifyState::Watchdog]);
        app.sample_history();
        if let Some(h) = &app.health {
            let polls = h.snapshot().polls;
            if polls != self.seen_polls {
                self.seen_polls = polls;
                app.update_drive_figures();
            }
        }
        let status = status_line(app);
        if status != self.last_status {
            notify(&[sd_notify::NotifyState::Status(&status)]);
            self.last_status = status;
        }
    }
}

/// After a SIGHUP reload was applied: publish the new target list, poll at once so targets
/// it started get their soak-start SMART baseline within moments of their first writes (not a
/// poll interval later), and save the checkpoint now (or right after the save in flight) so
/// the one on disk matches the plan that runs.
fn after_reload(
    out: &ReloadOutcome,
    running: &Running,
    targets: &TargetList,
    app: &DaemonApp,
    saver: &mut CheckpointSaver,
) {
    targets.set(running.snapshots());
    if out.started_targets
        && let Some(h) = &app.health
    {
        h.poll_now();
    }
    saver.request(&running.plan_hash);
}

/// With --exit-when-done: the targets that stopped on an error ("name: reason"). A target
/// that stopped on an error (max_errors, verify_fatal, a device that never came back) did not
/// finish its plan: the daemon then exits non-zero.
fn stopped_on_error_of(running: &Running) -> Vec<String> {
    running
        .snapshots()
        .iter()
        .filter_map(|s| {
            let t = crate::util::read(s);
            t.stop_reason.as_ref().map(|r| format!("{}: {r}", t.name))
        })
        .collect()
}

/// Shutdown, first part: stop the targets (their workers drain in-flight I/O) within 4 s,
/// then one last health poll so the results files' drive figures cover the soak to its end.
async fn stop_targets(
    app: &Arc<DaemonApp>,
    running: &mut Running,
    global_stop: &Arc<AtomicBool>,
    state_dir: &Path,
) {
    let stopping_since = Instant::now();
    global_stop.store(true, Ordering::SeqCst);
    // Workers drain their in-flight I/O; join them off the runtime.
    let handles = std::mem::take(&mut running.handles);
    let joined = tokio::task::spawn_blocking(move || {
        for h in handles {
            h.join();
        }
    });
    let all_joined = tokio::time::timeout(Duration::from_secs(4), joined)
        .await
        .is_ok();
    if !all_joined {
        tracing::warn!("targets did not stop within 4 s; exiting anyway");
    }
    // One last poll after the last write, so the results files' drive figures (and the
    // checkpoint's) cover the soak to its end. Bounded (at most 1.5 s, and within 4.5 s of
    // the stop request), so shutdown keeps its 5 s promise.
    let budget = Duration::from_millis(4500)
        .saturating_sub(stopping_since.elapsed())
        .min(Duration::from_millis(1500));
    if all_joined
        && !budget.is_zero()
        && let Some(h) = &app.health
    {
        let polls = h.snapshot().polls;
        h.poll_now();
        if h.wait_for_polls(polls + 1, budget).await.is_some() {
            app.update_drive_figures();
            let dir = state_dir.to_path_buf();
            let snaps = app.target_snapshots();
            let _ = tokio::task::spawn_blocking(move || {
                for s in snaps.iter().filter(|s| s.is_block) {
                    scheduler::refresh_results_drive(&dir, s);
                }
            })
            .await;
        } else {
            tracing::warn!(
                "no final health poll within {budget:?}; the results keep the previous one"
            );
        }
    }
}

/// [`run`] with the health poller's sysfs root and transport chosen by the caller: the
/// integration tests run the whole daemon in-process on a fake sysfs tree with replayed log
/// pages. Installs the SIGTERM/SIGINT/SIGHUP handlers of the calling process.
pub fn run_with(settings: Settings, flags: RunFlags, wiring: HealthWiring) -> Result<()> {
    // The web config and the port first: a busy port or a bad certificate exits here, before
    // the state directory, any target file or any I/O.
    let prepared = crate::http::prepare(crate::http::ServerOptions {
        listen: settings.exporter.listen,
        web_config: settings.exporter.web_config_file.clone(),
        max_connections: settings.exporter.max_connections,
    })?;
    let global_stop = Arc::new(AtomicBool::new(false));
    let opts = RunOptions {
        stats_interval: settings.stats.interval,
        state_dir: settings.state.dir.clone(),
    };
    std::fs::create_dir_all(&settings.state.dir).with_context(|| {
        format!(
            "creating state directory {} (set state.dir)",
            settings.state.dir.display()
        )
    })?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("nvsoak-rt")
        .build()
        .context("starting the async runtime")?;

    let _lock = crate::state::lock(&settings.state.dir).with_context(|| {
        format!(
            "locking state directory {} (is another nvsoak using it?)",
            settings.state.dir.display()
        )
    })?;
    let slow_checkpoint = test_slow_checkpoint();
    let plan_hash = crate::state::plan_hash(&settings.targets);
    let (mut loaded, fresh) = load_checkpoint(&settings, &plan_hash)?;

    let pre_poller = pre_poll(&settings, &wiring);

    let handles = start_targets(&settings, &opts, &global_stop, &mut loaded, fresh)?;
    if let Some((p, at)) = &pre_poller {
        set_baselines(&handles, p, *at);
    }
    let config_path: Option<&Path> = flags.config_path.as_deref();
    let mut running = Running {
        settings: settings.clone(),
        handles,
        plan_hash,
    };
    let targets = TargetList::new(running.snapshots());
    if let Some(p) = config_path {
        tracing::debug!(config = %p.display(), "SIGHUP reloads this config file");
    }

    let result = runtime.block_on(async {
        // Before anything is served: a SIGTERM as soon as /healthz answers is a clean stop.
        let Signals {
            mut sigterm,
            mut sigint,
            mut sighup,
        } = Signals::install()?;
        let host_io: Arc<dyn HostIoSource> = Arc::new(targets.clone());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let health =
            pre_poller.map(|(p, _)| crate::health::spawn_prepared(p, host_io, stop_rx.clone()));
        let app = Arc::new(DaemonApp {
            targets: targets.clone(),
            health,
            started: Instant::now(),
            history: std::sync::Mutex::new(crate::report::history::History::new(
                3600,
                Duration::from_secs(1),
            )),
            state_dir: settings.state.dir.clone(),
            checkpoint_stats: Arc::new(crate::state::SaveStats::default()),
            auth: Some(prepared.auth_guard()),
        });
        let server = prepared.attach(app.clone())?;
        let addr = server.local_addr();
        tracing::info!(%addr, "serving /metrics");
        if settings.targets.is_empty() {
            tracing::info!(
                "no targets (default_target = false): polling drive health only, writing nothing"
            );
        }
        let server_task = tokio::spawn(async move {
            let mut rx = stop_rx;
            server
                .run(async move {
                    let _ = rx.wait_for(|v| *v).await;
                })
                .await
        });

        notify(&[sd_notify::NotifyState::Ready]);
        // With --exit-when-done: the targets that stopped on an error ("name: reason").
        let mut stopped_on_error: Vec<String> = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut checkpoint_tick = tokio::time::interval(settings.state.checkpoint_interval);
        checkpoint_tick.tick().await;
        let state_dir = settings.state.dir.clone();
        let mut saver = CheckpointSaver {
            app: app.clone(),
            dir: state_dir.clone(),
            slow: slow_checkpoint,
            in_flight: None,
            pending: None,
        };
        let mut pulse = Pulse::default();
        loop {
            tokio::select! {
                _ = sigterm.recv() => { tracing::info!("SIGTERM: stopping"); break; }
                _ = sigint.recv() => { tracing::info!("SIGINT: stopping"); break; }
                _ = sighup.recv() => {
                    tracing::info!("SIGHUP: reloading the config");
                    // Opening files and joining stopped targets blocks: keep the other runtime
                    // thread serving /metrics meanwhile.
                    let out = tokio::task::block_in_place(|| {
                        reload(&mut running, &flags, &opts, &global_stop)
                    });
                    if out.applied {
                        after_reload(&out, &running, &targets, &app, &mut saver);
                        if out.checkpoint_interval_changed {
                            checkpoint_tick =
                                tokio::time::interval(running.settings.state.checkpoint_interval);
                            checkpoint_tick.tick().await;
                        }
                    }
                }
                _ = checkpoint_tick.tick() => saver.tick(&running.plan_hash),
                _ = saver.settle(), if saver.busy() => {}
                _ = tick.tick() => {
                    pulse.beat(&app);
                    if flags.exit_when_done && running.handles.iter().all(|h| h.is_finished()) {
                        stopped_on_error = stopped_on_error_of(&running);
                        if stopped_on_error.is_empty() {
                            tracing::info!("every target finished its plan; exiting");
                        } else {
                            tracing::error!(
                                "every target stopped, {} of them on an error; exiting",
                                stopped_on_error.len()
                            );
                        }
                        break;
                    }
                }
            }
        }
        notify(&[sd_notify::NotifyState::Stopping]);
        stop_targets(&app, &mut running, &global_stop, &state_dir).await;
        // The final checkpoint, after the save in flight (if any) ended.
        saver.finish(&running.plan_hash).await;
        let _ = stop_tx.send(true);
        match tokio::time::timeout(Duration::from_secs(1), server_task).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "HTTP server ended with an error"),
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed"),
            _ => {}
        }
        if !stopped_on_error.is_empty() {
            anyhow::bail!(
                "--exit-when-done: {} target(s) stopped on an error instead of finishing the plan ({})",
                stopped_on_error.len(),
                stopped_on_error.join("; ")
            );
        }
        Ok::<(), anyhow::Error>(())
    });
    runtime.shutdown_timeout(Duration::from_millis(500));
    result
}

fn status_line(app: &DaemonApp) -> String {
    let snaps = app.target_snapshots();
    let parts: Vec<String> = snaps
        .iter()
        .map(|s| {
            if s.running {
                format!("{}: {} {} {:.0} IOPS", s.name, s.phase, s.profile, s.iops)
            } else {
                format!("{}: finished", s.name)
            }
        })
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::{DeviceHealth, HealthSnapshot, HostIo, SmartSample};
    use crate::nvme::discover::{Controller, Namespace};
    use crate::nvme::log::smart::SmartLog;

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
        let start: SmartLog =
            serde_json::from_value(t.smart_at_soak_start.clone().expect("baseline")).expect("log");
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
        resumed.smart_at_soak_start = Some(serde_json::json!({"data_units_written": 1}));
        let other = sample(99.0, 99, 0, 0, false);
        update_target_drive(
            &mut resumed,
            &snap(device(Some(other.clone()), Some(other))),
        );
        assert_eq!(
            resumed.smart_at_soak_start,
            Some(serde_json::json!({"data_units_written": 1}))
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
        let start: SmartLog =
            serde_json::from_value(t.smart_at_soak_start.clone().expect("baseline")).expect("log");
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
        let st = t.to_state();
        assert_eq!(st.smart_at_soak_start, t.smart_at_soak_start);
        assert_eq!(st.host_at_soak_start, Some(base));
        assert_eq!(st.drive_throttle_episodes, 3);
    }

    #[test]
    fn a_resumed_soak_keeps_its_baseline_and_adds_the_carried_totals() {
        let mut t = target(1000.0);
        t.smart_at_soak_start = serde_json::to_value(SmartLog {
            data_units_written: 5,
            ..Default::default()
        })
        .ok();
        t.drive.host_at_soak_start = Some(crate::workload::results::HostAtSmart {
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
        assert!(t.smart_at_soak_start.is_none() && t.drive.figures.is_none());
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
        assert!(other.drive.figures.is_none() && other.smart_at_soak_start.is_none());
    }
}
