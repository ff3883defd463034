//! The daemon: starts every target's scheduler, the health poller and the HTTP server, talks to
//! systemd, and stops everything on SIGTERM/SIGINT within a few seconds.
//!
//! Architecture Invariant: tokio runs HTTP, signals, the poller and timers; workload threads are
//! plain OS threads that never enter the runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::config::Settings;
use crate::health::HostIoSource;
use crate::metrics::workload::{DaemonInfo, SoakTotals};
use crate::workload::scheduler::{self, RunOptions, SharedSnapshot, TargetHandle};

/// What the HTTP server asks of the daemon.
pub struct DaemonApp {
    pub targets: Vec<SharedSnapshot>,
    pub health: Option<crate::health::HealthHandle>,
    pub started: Instant,
}

impl DaemonApp {
    pub fn target_snapshots(&self) -> Vec<scheduler::TargetSnapshot> {
        self.targets
            .iter()
            .map(|s| match s.read() {
                Ok(g) => g.clone(),
                Err(p) => p.into_inner().clone(),
            })
            .collect()
    }

    fn soak_totals(&self, snaps: &[scheduler::TargetSnapshot]) -> Vec<SoakTotals> {
        snaps
            .iter()
            .map(|s| {
                let (r, w) = s.totals();
                SoakTotals {
                    target: s.name.clone(),
                    read_bytes: r.bytes,
                    written_bytes: w.bytes,
                    errors: r.errors.total() + w.errors.total(),
                    elapsed_secs: self.started.elapsed().as_secs_f64(),
                }
            })
            .collect()
    }

    pub fn render_metrics(&self) -> String {
        let snaps = self.target_snapshots();
        let info = DaemonInfo {
            version: env!("CARGO_PKG_VERSION"),
            revision: option_env!("NVSOAK_GIT_REVISION").unwrap_or("unknown"),
            uptime_secs: self.started.elapsed().as_secs_f64(),
        };
        let fams = crate::metrics::workload::families(&snaps, &self.soak_totals(&snaps), &info);
        if let Some(h) = &self.health {
            // HEALTH-METRICS: enabled once metrics::health lands.
            let _ = h.snapshot();
        }
        match crate::metrics::encode_text(&fams) {
            Ok(t) => t,
            Err(e) => format!("# encoding metrics failed: {e}\n"),
        }
    }

    pub fn render_status(&self) -> String {
        let snaps = self.target_snapshots();
        let mut rows = String::new();
        for s in &snaps {
            rows.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td></tr>",
                html_escape(&s.name),
                html_escape(&s.path),
                html_escape(&s.phase),
                html_escape(&s.profile),
                s.iops
            ));
        }
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>nvsoak</title></head><body>\
             <h1>nvsoak {}</h1><p><a href=\"/metrics\">/metrics</a></p>\
             <table><tr><th>target</th><th>path</th><th>phase</th><th>profile</th><th>IOPS</th></tr>{rows}</table>\
             </body></html>",
            env!("CARGO_PKG_VERSION")
        )
    }
}

impl crate::http::App for DaemonApp {
    fn metrics(&self) -> String {
        self.render_metrics()
    }
    fn status_page(&self) -> String {
        self.render_status()
    }
}

pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Options from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunFlags {
    /// Exit once every target's plan has finished (default: keep serving until signalled).
    pub exit_when_done: bool,
}

fn notify(state: &[sd_notify::NotifyState<'_>]) {
    // Not under systemd (no NOTIFY_SOCKET): sd_notify does nothing.
    let _ = sd_notify::notify(state);
}

/// Run the daemon until SIGTERM/SIGINT (or, with `exit_when_done`, until the plan ends).
pub fn run(settings: Settings, flags: RunFlags) -> Result<()> {
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

    let mut handles: Vec<TargetHandle> = Vec::new();
    for spec in &settings.targets {
        match scheduler::start(spec.clone(), opts.clone(), global_stop.clone()) {
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
    let snapshots: Vec<SharedSnapshot> = handles.iter().map(|h| h.snapshot.clone()).collect();

    let result = runtime.block_on(async {
        let host_io: Arc<dyn HostIoSource> =
            Arc::new(scheduler::TargetsHostIo(snapshots.clone()));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let health = if settings.health.enabled {
            Some(crate::health::spawn(
                settings.health.clone(),
                host_io,
                stop_rx.clone(),
            ))
        } else {
            None
        };
        let app = Arc::new(DaemonApp {
            targets: snapshots.clone(),
            health,
            started: Instant::now(),
        });
        let server = crate::http::bind(
            crate::http::ServerOptions {
                listen: settings.exporter.listen,
                web_config: settings.exporter.web_config_file.clone(),
                max_connections: settings.exporter.max_connections,
            },
            app.clone(),
        )
        .await
        .with_context(|| format!("serving on {}", settings.exporter.listen))?;
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

        notify(&[sd_notify::NotifyState::Ready]);
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("installing the SIGINT handler")?;
        let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("installing the SIGHUP handler")?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut last_status = String::new();
        loop {
            tokio::select! {
                _ = sigterm.recv() => { tracing::info!("SIGTERM: stopping"); break; }
                _ = sigint.recv() => { tracing::info!("SIGINT: stopping"); break; }
                _ = sighup.recv() => { tracing::warn!("SIGHUP: config reload is not supported yet; keeping the running config"); }
                _ = tick.tick() => {
                    notify(&[sd_notify::NotifyState::Watchdog]);
                    let status = status_line(&app);
                    if status != last_status {
                        notify(&[sd_notify::NotifyState::Status(&status)]);
                        last_status = status;
                    }
                    if flags.exit_when_done && handles.iter().all(|h| h.is_finished()) {
                        tracing::info!("every target finished its plan; exiting");
                        break;
                    }
                }
            }
        }
        notify(&[sd_notify::NotifyState::Stopping]);
        global_stop.store(true, Ordering::SeqCst);
        // Workers drain their in-flight I/O; join them off the runtime.
        let joined = tokio::task::spawn_blocking(move || {
            for h in handles {
                h.join();
            }
        });
        if tokio::time::timeout(Duration::from_secs(4), joined).await.is_err() {
            tracing::warn!("targets did not stop within 4 s; exiting anyway");
        }
        let _ = stop_tx.send(true);
        match tokio::time::timeout(Duration::from_secs(1), server_task).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "HTTP server ended with an error"),
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP server task failed"),
            _ => {}
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
