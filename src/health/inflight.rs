//! Each drive's poll on its own thread, so one slow or hung drive (an admin or ATA command the
//! kernel does not return from) never holds up the others.
//!
//! [`InFlight::dispatch`] hands each present drive's state (a clone) to a short-lived thread
//! that opens the drive and reads its pages, then waits up to a deadline for the answers. A
//! drive that has not answered by then stays in flight: it is marked down with a `timeout` poll
//! error, and later polls skip it (no second thread piles up behind a stuck command) and count
//! another `timeout` each, its poll duration growing, until its thread returns; that late
//! answer is merged at the start of the next poll. NVMe controllers ([`DeviceHealth`]) and SATA
//! disks (`AtaHealth`) go through the same machinery, each in its own [`InFlight`].

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A drive's state as the poller keeps it, from the in-flight machinery's point of view.
pub(super) trait Polled: Clone + Send + 'static {
    fn present(&self) -> bool;
    fn set_down(&mut self);
    /// A poll still running past its deadline, for `secs` so far: down, one more `timeout`.
    fn still_running(&mut self, secs: f64);
    /// The poll's thread died without an answer.
    fn thread_failed(&mut self);
    /// Whether `answer` still describes the drive under this name (none other took it).
    fn same_drive(&self, answer: &Self) -> bool;
    /// What changed on this entry while its poll ran (a rescan's `present`, the timeouts
    /// counted while waiting), carried into the answer that replaces it.
    fn carry_into(&self, answer: &mut Self);
}

/// One drive's poll, run on its thread.
pub(super) type Job<T> = Box<dyn FnOnce(&mut T) + Send>;

/// A drive's poll still running on its thread.
struct Pending<T> {
    started: Instant,
    rx: Receiver<T>,
}

/// The drives whose poll has not answered yet.
pub(super) struct InFlight<T> {
    pending: BTreeMap<String, Pending<T>>,
}

impl<T> Default for InFlight<T> {
    fn default() -> Self {
        InFlight {
            pending: BTreeMap::new(),
        }
    }
}

impl<T: Polled> InFlight<T> {
    /// Poll every present drive in `items` concurrently (`job` gives each one's poll, `None`
    /// for a drive that cannot be reached) and wait until `deadline` for the answers.
    pub fn dispatch(
        &mut self,
        items: &mut BTreeMap<String, T>,
        job: &dyn Fn(&str) -> Option<Job<T>>,
        deadline: Instant,
    ) {
        self.collect_late(items);
        let mut waiting = Vec::new();
        for (name, d) in items.iter_mut() {
            if !d.present() {
                d.set_down();
                continue;
            }
            if let Some(p) = self.pending.get(name) {
                d.still_running(p.started.elapsed().as_secs_f64());
                continue;
            }
            let Some(poll) = job(name) else {
                continue;
            };
            let (tx, rx) = mpsc::sync_channel(1);
            let mut mine = d.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("poll-{name}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    poll(&mut mine);
                    // The poller may have given up on this answer (daemon stopping).
                    let _ = tx.send(mine);
                });
            match spawned {
                Ok(_) => {
                    let started = Instant::now();
                    self.pending.insert(name.clone(), Pending { started, rx });
                    waiting.push(name.clone());
                }
                Err(e) => {
                    tracing::warn!("health: no thread for polling {name} ({e}); skipped this poll");
                    d.set_down();
                }
            }
        }
        for name in waiting {
            self.wait_for(&name, items, deadline);
        }
    }

    /// Whether `name` has a poll still running.
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending.contains_key(name)
    }

    fn wait_for(&mut self, name: &str, items: &mut BTreeMap<String, T>, deadline: Instant) {
        let Some(p) = self.pending.get(name) else {
            return;
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match p.rx.recv_timeout(left) {
            Ok(answer) => {
                self.pending.remove(name);
                merge(items, name, answer);
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(d) = items.get_mut(name) {
                    d.still_running(p.started.elapsed().as_secs_f64());
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.pending.remove(name);
                if let Some(d) = items.get_mut(name) {
                    d.thread_failed();
                }
            }
        }
    }

    /// Merge the answers that arrived since the last poll.
    fn collect_late(&mut self, items: &mut BTreeMap<String, T>) {
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
                    merge(items, &name, answer);
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => {
                    self.pending.remove(&name);
                }
            }
        }
    }
}

/// The thread's answer replaces the state it started from, keeping what changed meanwhile.
fn merge<T: Polled>(items: &mut BTreeMap<String, T>, name: &str, mut answer: T) {
    let Some(cur) = items.get_mut(name) else {
        return; // the drive was dropped or renamed meanwhile
    };
    if !cur.same_drive(&answer) {
        return; // another drive took the name meanwhile
    }
    cur.carry_into(&mut answer);
    *cur = answer;
}

/// The message of a poll still running.
pub(super) fn running_message(name: &str, secs: f64) -> String {
    format!(
        "health: {name} has not answered a poll started {secs:.0} s ago; polling it again once it does"
    )
}

/// How long a poll waits for its drives: half the interval (so the next poll still starts on
/// time), at least 10 ms and at most 10 s.
pub(super) fn deadline_for(poll_interval: Duration) -> Duration {
    (poll_interval / 2).clamp(Duration::from_millis(10), Duration::from_secs(10))
}
