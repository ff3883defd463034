//! Each controller's poll on its own thread, so one slow or hung controller (an admin command
//! the kernel does not return from) never holds up the others.
//!
//! [`InFlight::dispatch`] hands each present controller's state (a clone of its
//! [`DeviceHealth`]) to a short-lived thread that opens it and reads its pages, then waits up to a
//! deadline for the answers. A controller that has not answered by then stays in flight: it is
//! marked down with a `timeout` poll error, and later polls skip it (no second thread piles up
//! behind a stuck ioctl) and count another `timeout` each, its poll duration growing, until its
//! thread returns; that late answer is merged at the start of the next poll.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::HostIoSource;
use super::poller::{DeviceHealth, Opener, RatingContext, page, poll_device};
use crate::nvme::discover::Controller;

/// A controller's poll still running on its thread.
struct Pending {
    started: Instant,
    rx: Receiver<DeviceHealth>,
}

/// What a poll needs that every controller's thread shares.
pub(super) struct PollContext {
    pub opener: Opener,
    pub host: Arc<dyn HostIoSource>,
    pub ratings: Arc<RatingContext>,
    /// Unix time of this poll.
    pub now: f64,
}

/// The controllers whose poll has not answered yet.
#[derive(Default)]
pub(super) struct InFlight {
    pending: BTreeMap<String, Pending>,
}

impl InFlight {
    /// Poll every present controller in `devices` concurrently and wait until `deadline` for
    /// the answers; see the module documentation for a controller that does not answer.
    pub fn dispatch(
        &mut self,
        devices: &mut BTreeMap<String, DeviceHealth>,
        controllers: &BTreeMap<String, Controller>,
        ctx: &PollContext,
        deadline: Instant,
    ) {
        self.collect_late(devices);
        let mut waiting = Vec::new();
        for (name, d) in devices.iter_mut() {
            if !d.present {
                d.up = false;
                continue;
            }
            let Some(c) = controllers.get(name) else {
                continue;
            };
            if let Some(p) = self.pending.get(name) {
                still_running(d, p.started);
                continue;
            }
            match spawn_poll(c, d.clone(), ctx) {
                Ok(rx) => {
                    let started = Instant::now();
                    self.pending.insert(name.clone(), Pending { started, rx });
                    waiting.push(name.clone());
                }
                Err(e) => {
                    // No thread to spare: poll here, in line, as before.
                    tracing::warn!("health: no thread for polling {name} ({e}); polling in line");
                    poll_here(c, d, ctx);
                }
            }
        }
        for name in waiting {
            self.wait_for(&name, devices, deadline);
        }
    }

    /// Whether `name` has a poll still running.
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending.contains_key(name)
    }

    fn wait_for(
        &mut self,
        name: &str,
        devices: &mut BTreeMap<String, DeviceHealth>,
        deadline: Instant,
    ) {
        let Some(p) = self.pending.get(name) else {
            return;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match p.rx.recv_timeout(left) {
            Ok(answer) => {
                self.pending.remove(name);
                merge(devices, name, answer);
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(d) = devices.get_mut(name) {
                    still_running(d, p.started);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.pending.remove(name);
                if let Some(d) = devices.get_mut(name) {
                    d.up = false;
                    d.fail_with(
                        page::TIMEOUT,
                        format!("health: {name}: the poll thread failed"),
                    );
                }
            }
        }
    }

    /// Merge the answers that arrived since the last poll.
    fn collect_late(&mut self, devices: &mut BTreeMap<String, DeviceHealth>) {
        let names: Vec<String> = self.pending.keys().cloned().collect();
        for name in names {
            let Some(p) = self.pending.get(&name) else {
                continue;
            };
            match p.rx.try_recv() {
                Ok(answer) => {
                    let secs = p.started.elapsed().as_secs_f64();
                    tracing::info!("health: {name} answered its poll after {secs:.1} s");
                    self.pending.remove(&name);
                    merge(devices, &name, answer);
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.pending.remove(&name);
                }
            }
        }
    }
}

/// A controller still answering an earlier poll: down, one more `timeout`, its duration so far.
fn still_running(d: &mut DeviceHealth, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    d.up = false;
    d.poll_duration_seconds = Some(secs);
    d.fail_with(
        page::TIMEOUT,
        format!(
            "health: {} has not answered a poll started {secs:.0} s ago; polling it again once it does",
            d.name
        ),
    );
}

/// The thread's answer replaces the state it started from; what happened to the entry
/// meanwhile (a rescan's `present`, the timeouts counted while waiting) is kept.
fn merge(devices: &mut BTreeMap<String, DeviceHealth>, name: &str, mut answer: DeviceHealth) {
    let Some(cur) = devices.get_mut(name) else {
        return; // the controller was dropped or renamed meanwhile
    };
    if cur.serial != answer.serial && !cur.serial.is_empty() && cur.id.is_some() {
        return; // another drive took the name meanwhile
    }
    answer.present = cur.present;
    if !answer.present {
        answer.up = false;
    }
    if let Some(&n) = cur.poll_errors.get(page::TIMEOUT) {
        answer.poll_errors.insert(page::TIMEOUT, n);
    }
    *cur = answer;
}

fn poll_here(c: &Controller, d: &mut DeviceHealth, ctx: &PollContext) {
    let started = Instant::now();
    match (ctx.opener)(c) {
        Ok(t) => poll_device(t.as_ref(), d, ctx.now, ctx.host.as_ref(), &ctx.ratings),
        Err(e) => {
            d.up = false;
            d.fail(page::OPEN, &e);
        }
    }
    d.poll_duration_seconds = Some(started.elapsed().as_secs_f64());
    d.polls += 1;
}

fn spawn_poll(
    c: &Controller,
    mut d: DeviceHealth,
    ctx: &PollContext,
) -> std::io::Result<Receiver<DeviceHealth>> {
    let (tx, rx) = mpsc::sync_channel(1);
    let c = c.clone();
    let ctx = PollContext {
        opener: ctx.opener.clone(),
        host: ctx.host.clone(),
        ratings: ctx.ratings.clone(),
        now: ctx.now,
    };
    std::thread::Builder::new()
        .name(format!("poll-{}", c.name))
        .stack_size(256 * 1024)
        .spawn(move || {
            poll_here(&c, &mut d, &ctx);
            // The poller may have given up on this answer (daemon stopping): nothing to do.
            let _ = tx.send(d);
        })?;
    Ok(rx)
}

/// How long a poll waits for its controllers: half the interval (so the next poll still
/// starts on time), at least 10 ms and at most 10 s.
pub(super) fn deadline_for(poll_interval: Duration) -> Duration {
    (poll_interval / 2).clamp(Duration::from_millis(10), Duration::from_secs(10))
}
