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
use crate::verdict::exit::RunOutcome;
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
    crate::report::status::drives_from_health(snap)
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
pub(crate) struct Running {
    pub(crate) settings: Settings,
    pub(crate) handles: Vec<TargetHandle>,
    pub(crate) plan_hash: String,
}

impl Running {
    fn snapshots(&self) -> Vec<SharedSnapshot> {
        self.handles.iter().map(|h| h.snapshot.clone()).collect()
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

/// Run the daemon until SIGTERM/SIGINT (or, with `exit_when_done`, until the plan ends, then
/// judge the targets' verdicts: [`crate::verdict::exit`]).
pub fn run(settings: Settings, flags: RunFlags) -> Result<RunOutcome> {
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
            // A spanning target is its members, in order.
            let keys = t
                .member_paths()
                .into_iter()
                .map(|p| {
                    crate::safety::identify(p)
                        .ok()
                        .map(|id| crate::state::device_key(&id))
                })
                .collect::<Option<Vec<String>>>()?;
            Some((t.name.clone(), keys.join(" + ")))
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
        p.remember(&crate::health::known::load(&settings.state.dir));
        let zero: Vec<crate::health::HostIo> = settings
            .targets
            .iter()
            .filter(|t| crate::safety::is_block_device(&t.path))
            .map(|t| crate::health::HostIo {
                path: t.path.clone(),
                ..Default::default()
            })
            .collect();
        p.poll(std::sync::Arc::new(zero));
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
            crate::state::results::archive(&settings.state.dir, &spec.name, why);
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
        h.snapshot.update_drive(|d| d.polls_from = Some(at));
        h.snapshot.update_drive_from(&pre);
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
    out: &crate::reload::apply::ReloadOutcome,
    running: &Running,
    targets: &TargetList,
    app: &DaemonApp,
    saver: &mut CheckpointSaver,
) {
    targets.set(running.snapshots());
    *crate::util::lock(&app.refused) = out.refused.clone();
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
            s.view(|v| v.stop_reason.clone())
                .map(|r| format!("{}: {r}", s.fixed.name))
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
            let targets = app.targets.get();
            let _ = tokio::task::spawn_blocking(move || {
                for s in targets.iter().filter(|s| s.fixed.is_block) {
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

/// What start-up hands the event loop: the plan that runs and what it runs with. The state
/// directory's lock is held for as long as this lives.
struct Started {
    global_stop: Arc<AtomicBool>,
    opts: RunOptions,
    running: Running,
    targets: TargetList,
    pre_poller: Option<(crate::health::Poller, f64)>,
    slow_checkpoint: Duration,
    _lock: crate::state::StateLock,
}

/// Start-up before the runtime serves anything: the web config and port, the state directory,
/// the runtime, the state directory's lock, the checkpoint, the pre-start health poll, every
/// target and its baseline.
fn start_up(
    settings: &Settings,
    wiring: &HealthWiring,
) -> Result<(crate::http::Prepared, tokio::runtime::Runtime, Started)> {
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("nvsoak-rt")
        .build()
        .context("starting the async runtime")?;
    // The error names the directory and why (another nvsoak holds it, it is not nvsoak's).
    let lock = crate::state::lock(&settings.state.dir)?;
    crate::safety::mark::use_state_dir(&settings.state.dir);
    let slow_checkpoint = test_slow_checkpoint();
    let plan_hash = crate::state::plan_hash(&settings.targets);
    let (mut loaded, fresh) = load_checkpoint(settings, &plan_hash)?;
    let pre_poller = pre_poll(settings, wiring);
    let handles = start_targets(settings, &opts, &global_stop, &mut loaded, fresh)?;
    if let Some((p, at)) = &pre_poller {
        set_baselines(&handles, p, *at);
    }
    let running = Running {
        settings: settings.clone(),
        handles,
        plan_hash,
    };
    let targets = TargetList::new(running.snapshots());
    let started = Started {
        global_stop,
        opts,
        running,
        targets,
        pre_poller,
        slow_checkpoint,
        _lock: lock,
    };
    Ok((prepared, runtime, started))
}

/// What serves while the targets run: the app HTTP asks, the server's task and its stop.
struct Serving {
    app: Arc<DaemonApp>,
    server_task: tokio::task::JoinHandle<Result<(), crate::http::HttpError>>,
    stop_tx: tokio::sync::watch::Sender<bool>,
}

/// On the runtime: the health poller (from the pre-start poll) and the HTTP server.
fn serve(
    prepared: crate::http::Prepared,
    targets: &TargetList,
    pre_poller: Option<(crate::health::Poller, f64)>,
    state_dir: &Path,
) -> Result<Serving> {
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
        state_dir: state_dir.to_path_buf(),
        checkpoint_stats: Arc::new(crate::state::SaveStats::default()),
        refused: Default::default(),
        auth: Some(prepared.auth_guard()),
    });
    let server = prepared.attach(app.clone())?;
    let addr = server.local_addr();
    tracing::info!(%addr, "serving /metrics");
    let server_task = tokio::spawn(async move {
        let mut rx = stop_rx;
        server
            .run(async move {
                let _ = rx.wait_for(|v| *v).await;
            })
            .await
    });
    Ok(Serving {
        app,
        server_task,
        stop_tx,
    })
}

/// The event loop until a signal (or, with --exit-when-done, the end of every plan): reloads,
/// checkpoint ticks, the once-a-second pulse. Returns the targets that stopped on an error
/// ("name: reason") when --exit-when-done ended it.
async fn event_loop(
    signals: Signals,
    st: &mut Started,
    flags: &RunFlags,
    app: &Arc<DaemonApp>,
    saver: &mut CheckpointSaver,
) -> Ended {
    let Signals {
        mut sigterm,
        mut sigint,
        mut sighup,
    } = signals;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut checkpoint_tick = tokio::time::interval(st.running.settings.state.checkpoint_interval);
    checkpoint_tick.tick().await;
    let mut pulse = Pulse::default();
    loop {
        tokio::select! {
            _ = sigterm.recv() => { tracing::info!("SIGTERM: stopping"); return Ended::Signal("SIGTERM"); }
            _ = sigint.recv() => { tracing::info!("SIGINT: stopping"); return Ended::Signal("SIGINT"); }
            _ = sighup.recv() => {
                tracing::info!("SIGHUP: reloading the config");
                // Opening files and joining stopped targets blocks: keep the other runtime
                // thread serving /metrics meanwhile.
                let out = tokio::task::block_in_place(|| {
                    crate::reload::apply::reload(&mut st.running, flags, &st.opts, &st.global_stop)
                });
                if out.applied {
                    after_reload(&out, &st.running, &st.targets, app, saver);
                    if out.checkpoint_interval_changed {
                        checkpoint_tick =
                            tokio::time::interval(st.running.settings.state.checkpoint_interval);
                        checkpoint_tick.tick().await;
                    }
                }
            }
            _ = checkpoint_tick.tick() => saver.tick(&st.running.plan_hash),
            _ = saver.settle(), if saver.busy() => {}
            _ = tick.tick() => {
                pulse.beat(app);
                if flags.exit_when_done && st.running.handles.iter().all(|h| h.is_finished()) {
                    let stopped_on_error = stopped_on_error_of(&st.running);
                    if stopped_on_error.is_empty() {
                        tracing::info!("every target finished its plan; exiting");
                    } else {
                        tracing::error!(
                            "every target stopped, {} of them on an error; exiting",
                            stopped_on_error.len()
                        );
                    }
                    return Ended::Done(stopped_on_error);
                }
            }
        }
    }
}

/// Why the event loop ended.
enum Ended {
    /// `--exit-when-done`: every target ended; those that stopped on an error, with why.
    Done(Vec<String>),
    /// A stop signal, by name.
    Signal(&'static str),
}

/// Where a target was when it stopped: `phase 3 of 3 (soak), 40 s into it`, with the
/// precondition's share written or the sweep's points measured.
fn where_it_was(v: &crate::workload::scheduler::TargetView, phases: usize) -> String {
    if phases > 0 && v.phase_index >= phases {
        return "after its last phase".into();
    }
    let mut s = format!(
        "phase {} of {phases} ({}), {:.0} s into it",
        v.phase_index + 1,
        v.phase,
        v.phase_elapsed_secs()
    );
    if let Some(p) = &v.precondition {
        let prog = p.progress();
        let total: u64 =
            prog.stripes.iter().map(|s| s.len).sum::<u64>() * u64::from(prog.passes.max(1));
        let done: u64 = prog.stripes.iter().map(|s| s.done_bytes).sum();
        if total > 0 {
            s.push_str(&format!(
                ", {:.1} % written",
                100.0 * done as f64 / total as f64
            ));
        }
    }
    if let Some(sw) = &v.sweep_progress {
        s.push_str(&format!(", {} sweep points measured", sw.points.len()));
    }
    s
}

/// The run's outcome from each target's verdict (see [`crate::verdict::exit`]); each verdict
/// is logged. `signal` names the signal that stopped the run before its end, if one did: every
/// target that had not finished is then INCOMPLETE, with where it was.
fn judge(
    targets: &TargetList,
    settings: &Settings,
    stopped_on_error: &[String],
    signal: Option<&str>,
) -> RunOutcome {
    let list: Vec<_> = targets
        .get()
        .iter()
        .map(|s| {
            let name = s.fixed.name.clone();
            let phases = settings
                .targets
                .iter()
                .find(|t| t.name == name)
                .map_or(0, |t| t.phases.len());
            let (verdict, at) = s.view(|v| (v.verdict.clone(), where_it_was(v, phases)));
            if let Some(v) = &verdict {
                let serial = s.drive(|d| d.identity.as_ref().map(|i| i.serial.clone()));
                tracing::info!(target_name = %name, serial = serial.as_deref().unwrap_or(""),
                    verdict = v.headline(), gates = %v.tally(),
                    failed = %v.failed_summary().join("; "),
                    not_evaluated = %v.not_evaluated_summary().join("; "), "verdict");
            }
            let prefix = format!("{name}: ");
            let stopped = stopped_on_error
                .iter()
                .find_map(|e| e.strip_prefix(&prefix).map(str::to_string))
                .or_else(|| {
                    let finished = verdict
                        .as_ref()
                        .is_some_and(|v| v.plan == crate::model::verdict::PlanState::Finished);
                    signal
                        .filter(|_| !finished)
                        .map(|sig| format!("stopped by {sig} before the end of its plan, at {at}"))
                });
            (name, verdict, stopped)
        })
        .collect();
    crate::verdict::exit::outcome(&list)
}

/// Shutdown: stop and drain the targets, the final poll, the final checkpoint (after the save
/// in flight, if any), then the HTTP server.
async fn shut_down(
    st: &mut Started,
    serving: Serving,
    saver: &mut CheckpointSaver,
    state_dir: &Path,
) {
    notify(&[sd_notify::NotifyState::Stopping]);
    stop_targets(&serving.app, &mut st.running, &st.global_stop, state_dir).await;
    saver.finish(&st.running.plan_hash).await;
    let _ = serving.stop_tx.send(true);
    match tokio::time::timeout(Duration::from_secs(1), serving.server_task).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "HTTP server ended with an error"),
        Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed"),
        _ => {}
    }
}

/// [`run`] with the health poller's sysfs root and transport chosen by the caller: the
/// integration tests run the whole daemon in-process on a fake sysfs tree with replayed log
/// pages. Installs the SIGTERM/SIGINT/SIGHUP handlers of the calling process.
pub fn run_with(settings: Settings, flags: RunFlags, wiring: HealthWiring) -> Result<RunOutcome> {
    let (prepared, runtime, mut st) = start_up(&settings, &wiring)?;
    if let Some(p) = flags.config_path.as_deref() {
        tracing::debug!(config = %p.display(), "SIGHUP reloads this config file");
    }
    let state_dir = settings.state.dir.clone();
    let result = runtime.block_on(async {
        // Before anything is served: a SIGTERM as soon as /healthz answers is a clean stop.
        let signals = Signals::install()?;
        let serving = serve(prepared, &st.targets, st.pre_poller.take(), &state_dir)?;
        if settings.targets.is_empty() {
            tracing::info!(
                "no targets (default_target = false): polling drive health only, writing nothing"
            );
        }
        notify(&[sd_notify::NotifyState::Ready]);
        let mut saver = CheckpointSaver {
            app: serving.app.clone(),
            dir: state_dir.clone(),
            slow: st.slow_checkpoint,
            in_flight: None,
            pending: None,
        };
        let app = serving.app.clone();
        let done = event_loop(signals, &mut st, &flags, &app, &mut saver).await;
        shut_down(&mut st, serving, &mut saver, &state_dir).await;
        // Judged after the final poll folded the last drive figures into the verdicts.
        // A signal under --exit-when-done is judged too: what had not finished is INCOMPLETE
        // (a script's `nvsoak run --exit-when-done && mark_passed` must not pass it).
        Ok::<RunOutcome, anyhow::Error>(match done {
            Ended::Done(stopped_on_error) => {
                judge(&st.targets, &st.running.settings, &stopped_on_error, None)
            }
            Ended::Signal(sig) if flags.exit_when_done => {
                judge(&st.targets, &st.running.settings, &[], Some(sig))
            }
            Ended::Signal(_) => RunOutcome::Stopped,
        })
    });
    runtime.shutdown_timeout(Duration::from_millis(500));
    result
}

fn status_line(app: &DaemonApp) -> String {
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
