//! The daemon: starts every target's scheduler, the health poller and the HTTP server, talks to
//! systemd, and stops everything on SIGTERM/SIGINT within a few seconds. This module is the
//! start-up, the event loop and the shutdown; [`app`] is what HTTP asks, [`checkpoint`] the
//! checkpoint loop, [`lifecycle`] the running targets and [`judge`] the outcome.
//!
//! Architecture Invariant: tokio runs HTTP, signals, the poller and timers; workload threads are
//! plain OS threads that never enter the runtime.

mod app;
mod checkpoint;
mod judge;
mod lifecycle;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

pub use app::{DaemonApp, TargetList};
pub use checkpoint::TEST_SLOW_CHECKPOINT_ENV;

use app::status_line;
use checkpoint::{CheckpointSaver, load_checkpoint, test_slow_checkpoint};
use judge::judge;
use lifecycle::{
    Running, after_reload, pre_poll, set_baselines, start_targets, stop_targets,
    stopped_on_error_of,
};

use crate::config::Settings;
use crate::health::HostIoSource;
use crate::verdict::exit::RunOutcome;
use crate::workload::scheduler::RunOptions;

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
        progress_interval: settings.log.progress_interval,
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
    let targets = start_targets(settings, &opts, &global_stop, &mut loaded, fresh)?;
    if let Some((p, at)) = &pre_poller {
        set_baselines(&targets, p, *at);
    }
    let running = Running {
        settings: settings.clone(),
        targets,
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
    stats_interval: Duration,
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
        metrics_cache: crate::http::cache::MetricsCache::new(app::metrics_max_age(stats_interval)),
        status_cache: crate::http::cache::MetricsCache::of(
            crate::http::cache::Body::Status,
            app::status_max_age(stats_interval),
        ),
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
                    st.running.reload(flags, &st.opts, &st.global_stop)
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
                if flags.exit_when_done && st.running.targets.all_finished() {
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
        let serving = serve(
            prepared,
            &st.targets,
            st.pre_poller.take(),
            &state_dir,
            settings.stats.interval,
        )?;
        if settings.targets.is_empty() {
            tracing::info!(
                "no targets (default_target = false): polling drive health only, writing nothing"
            );
        }
        notify(&[sd_notify::NotifyState::Ready]);
        let mut saver =
            CheckpointSaver::new(serving.app.clone(), state_dir.clone(), st.slow_checkpoint);
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
