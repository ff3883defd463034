//! The worker's loop: its state, one pass (report, stop checks, submit, wait or reap,
//! complete) and the hook's calls. Setup lives in [`setup`], the interval and final reports
//! in [`report`]; both are child modules so the loop's fields stay private to it.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::slots::Slots;
use super::{
    BlockHook, BsPicker, ExitReason, OffsetGen, Pacer, ReportTx, Rng, WorkerError, WorkerExit,
    WorkerOptions, WorkerPlan,
};
use crate::engine::{Caps, Completion, EngineError, IoEngine, IoReq};
use crate::model::spec::Op;
use crate::stats::WorkerStats;

mod report;
mod setup;

pub use setup::WORKER_NICE;

/// Longest single wait, so that `stop` is seen within a few milliseconds.
const MAX_WAIT_NS: u64 = 5_000_000;
/// How long a stopping worker waits for in-flight I/O before abandoning it. The daemon has to
/// exit within 5 s of SIGTERM.
const DRAIN_LIMIT_NS: u64 = 3_000_000_000;
const BACKOFF_MIN_NS: u64 = 1_000_000;
const BACKOFF_MAX_NS: u64 = 100_000_000;

struct Clock(Instant);
impl Clock {
    #[inline]
    fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    /// The instant `ns` nanoseconds after the clock started.
    #[inline]
    fn at(&self, ns: u64) -> Instant {
        self.0 + Duration::from_nanos(ns)
    }
}

fn sleep_ns(ns: u64) {
    if ns > 0 {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

/// A paced worker with nothing in flight sleeps only when its next I/O is due at least this
/// far ahead; closer deadlines are spun for. A sleep costs a syscall and a wake-up and overshoots by the
/// timer slack (50 µs by default, 1 µs for paced workers, see `setup.rs`) plus the
/// wake-up latency, so sleeping per I/O capped psync near 20k IOPS whatever the target.
const SLEEP_MIN_NS: u64 = 200_000;
/// Spinning for a deadline further away than this yields the CPU between clock reads.
const YIELD_MIN_NS: u64 = 20_000;

/// What changes from one pass of the loop to the next, apart from the slots and the stats.
struct LoopState {
    /// An I/O that would have overlapped one in flight (only checked with a hook).
    pending: Option<(Op, u64, u32)>,
    submitted_bytes: u64,
    pacer: Option<Pacer>,
    next_report: u64,
    last_report: u64,
    spare: Option<(Histogram<u64>, Histogram<u64>)>,
    /// Reports sent whose histograms have not come back through `recycle` yet.
    outstanding: usize,
    backoff: u64,
    backoff_until: u64,
    stopping: bool,
    receiver_gone: bool,
    reason: ExitReason,
    fatal: Option<String>,
    drain_deadline: Option<u64>,
    abandoned: bool,
}

/// One worker's loop: what setup precomputed, the engine, and the loop's state.
struct Worker {
    index: usize,
    stop: Arc<AtomicBool>,
    engine: Box<dyn IoEngine>,
    /// The engine's file: it stays open while the engine runs (psync uses the raw fd) and is
    /// closed after the engine is dropped (fields drop in declaration order).
    _fd: Arc<OwnedFd>,
    caps: Caps,
    engine_name: &'static str,
    hook: Option<Box<dyn BlockHook>>,
    recycle: Option<Receiver<(Histogram<u64>, Histogram<u64>)>>,
    live: Option<crate::stats::live::LiveGuard>,
    tx: ReportTx,
    stats: WorkerStats,
    rng: Rng,
    picker: BsPicker,
    offsets: OffsetGen,
    slots: Slots,
    out: Vec<Completion>,
    clock: Clock,
    depth: usize,
    mixed: bool,
    read_pct: u64,
    /// Completions to wait for when every slot is busy.
    reap_min: usize,
    limit: Option<u64>,
    interval_ns: u64,
    st: LoopState,
}

pub(super) fn run(
    plan: WorkerPlan,
    opts: WorkerOptions,
    tx: impl Into<ReportTx>,
) -> Result<WorkerExit, WorkerError> {
    let mut w = Worker::new(plan, opts, tx.into())?;
    loop {
        let now = w.clock.ns();
        if now >= w.st.next_report && !w.st.receiver_gone {
            w.report(now);
        }
        if !w.keep_going(now) {
            break;
        }
        let blocked = w.submit(now);
        if let Err(e) = w.wait_or_reap(now, blocked) {
            // The engine itself failed; what is still in flight cannot be reaped.
            w.st.fatal = Some(format!("{e}"));
            break;
        }
        if !w.out.is_empty() {
            w.complete();
        }
    }
    Ok(w.finish())
}

impl Worker {
    #[inline]
    fn limit_hit(&self) -> bool {
        self.limit.is_some_and(|l| self.st.submitted_bytes >= l)
    }

    /// The stop, limit and drain checks. False when the loop ends: stopping with nothing in
    /// flight, or the drain took too long (then `fatal` says so and the I/Os are abandoned).
    fn keep_going(&mut self, now: u64) -> bool {
        let limit_hit = self.limit_hit();
        let st = &mut self.st;
        if !st.stopping && self.stop.load(Ordering::Relaxed) {
            st.stopping = true;
        }
        if limit_hit && !st.stopping {
            st.stopping = true;
            st.reason = ExitReason::LimitReached;
        }
        if st.stopping && self.slots.inflight == 0 {
            return false;
        }
        if st.stopping {
            let deadline = *st.drain_deadline.get_or_insert(now + DRAIN_LIMIT_NS);
            if now > deadline {
                st.fatal = Some(format!(
                    "{} I/Os still in flight {} s after stopping (device hung?); abandoned them",
                    self.slots.inflight,
                    DRAIN_LIMIT_NS / 1_000_000_000
                ));
                st.abandoned = true;
                return false;
            }
        }
        true
    }

    /// How many I/Os this pass may queue: free slots, one for a sync engine, what the pacer
    /// has due; none while stopping or backing off.
    #[inline]
    fn submit_budget(&mut self, now: u64) -> usize {
        if self.st.stopping || now < self.st.backoff_until {
            return 0;
        }
        let mut can = self.slots.free_count();
        if self.caps.sync {
            can = can.min(1);
        }
        if let Some(p) = self.st.pacer.as_mut() {
            can = can.min(p.due(now) as usize);
        }
        can
    }

    /// The next I/O: op, block size and offset, trimmed to what the byte limit leaves.
    #[inline]
    fn next_io(&mut self) -> (Op, u64, u32) {
        let read_pct = self.read_pct;
        let op = if read_pct >= 100 || (read_pct > 0 && self.rng.below(100) < read_pct) {
            Op::Read
        } else {
            Op::Write
        };
        let bsi = self.picker.pick(&mut self.rng);
        let (offset, mut len) =
            self.offsets
                .next(&mut self.rng, bsi, self.picker.size(bsi), op == Op::Write);
        if let Some(l) = self.limit {
            len = len.min((l - self.st.submitted_bytes).min(u32::MAX as u64) as u32);
        }
        (op, offset, len)
    }

    /// Submit: queues as many I/Os as [`Worker::submit_budget`] allows. Returns whether the next
    /// I/O is blocked behind an overlapping one in flight.
    fn submit(&mut self, now: u64) -> bool {
        let can = self.submit_budget(now);
        let mut queued = 0usize;
        let mut blocked = false;
        while queued < can {
            let (op, offset, len) = match self.st.pending.take() {
                Some(p) => p,
                None => {
                    if self.limit_hit() {
                        break;
                    }
                    self.next_io()
                }
            };
            if self.hook.is_some() && self.slots.overlaps_inflight(op, offset, len) {
                self.st.pending = Some((op, offset, len));
                blocked = true;
                break;
            }
            if !self.queue_one(queued, op, offset, len) {
                break;
            }
            queued += 1;
        }
        if queued > 0 {
            let t = (!self.caps.sync).then(|| self.clock.ns());
            self.slots.take(queued, t);
            self.stats.submitted += queued as u64;
        }
        if self.st.fatal.is_some() {
            self.st.stopping = true;
        }
        blocked
    }

    /// Fills the slot of the batch's `k`-th I/O and queues it. False, with `fatal` set, when
    /// the engine refused it.
    #[inline]
    fn queue_one(&mut self, k: usize, op: Op, offset: u64, len: u32) -> bool {
        let slot = self.slots.nth_free(k);
        let buf = if self.mixed && op == Op::Read {
            slot + self.depth as u16
        } else {
            slot
        };
        if let Some(h) = self.hook.as_mut().filter(|_| op == Op::Write) {
            h.before_write(&mut self.engine.buffer(buf)[..len as usize], offset);
        }
        self.slots.fill(slot, op, offset, buf, len);
        if self.caps.sync {
            self.slots.stamp(slot, self.clock.ns());
        }
        let req = IoReq {
            op,
            offset,
            len,
            buf,
            user_data: slot as u64,
        };
        if let Err(e) = self.engine.queue(req) {
            self.st.fatal = Some(format!("queueing I/O failed: {e}"));
            return false;
        }
        self.st.submitted_bytes += len as u64;
        if let Some(p) = self.st.pacer.as_mut() {
            p.take();
        }
        true
    }

    /// Wait-or-reap: collects completions into `out`, waiting for them with a full queue, while
    /// draining, at the byte limit or behind an overlap, and otherwise waiting out a backoff or
    /// the pacer's schedule.
    fn wait_or_reap(&mut self, now: u64, blocked: bool) -> Result<usize, EngineError> {
        let limit_hit = self.limit_hit();
        let (inflight, full) = (self.slots.inflight, self.slots.free_count() == 0);
        let (stopping, backoff_until) = (self.st.stopping, self.st.backoff_until);
        if inflight > 0 && (full || stopping || limit_hit || blocked) {
            let min = if full { self.reap_min } else { 1 };
            self.engine.reap(min, &mut self.out)
        } else if !stopping && now < backoff_until {
            let r = self
                .engine
                .commit()
                .and_then(|_| self.engine.reap(0, &mut self.out));
            if self.out.is_empty() {
                sleep_ns((backoff_until - self.clock.ns().min(backoff_until)).min(MAX_WAIT_NS));
            }
            r
        } else if let Some(p) = self.st.pacer.as_ref() {
            let w = p.wait_ns(self.clock.ns());
            self.wait_paced(w)
        } else {
            self.engine
                .commit()
                .and_then(|_| self.engine.reap(0, &mut self.out))
        }
    }

    /// A paced worker ahead of schedule (or, for a sync engine, one I/O per pass: more may be
    /// due), with its next I/O due in `w` ns.
    fn wait_paced(&mut self, w: u64) -> Result<usize, EngineError> {
        let inflight = self.slots.inflight;
        let (engine, out) = (&mut self.engine, &mut self.out);
        if !self.caps.sync && inflight > 0 {
            // The ring's wait returns at the first completion or at the deadline (kernel
            // timeouts have no slack) and runs deferred completion work, so completions
            // are stamped when they happen and new I/Os start on schedule.
            engine.reap_timeout(Duration::from_nanos(w.clamp(1_000, MAX_WAIT_NS)), out)
        } else if inflight > 0 || w == 0 {
            engine.commit().and_then(|_| engine.reap(0, out))
        } else if w >= SLEEP_MIN_NS {
            let r = engine.commit();
            sleep_ns(w.min(MAX_WAIT_NS));
            r.map(|_| 0)
        } else {
            // Nothing in flight and the deadline too close to sleep for: spin, yielding
            // while it is not imminent.
            if w >= YIELD_MIN_NS {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            engine.commit().map(|_| 0)
        }
    }

    /// Complete: the batch in `out`, through the stats and the hook; frees its slots, bumps
    /// the live counters once and backs off when the whole batch failed.
    fn complete(&mut self) {
        let tc = self.clock.ns();
        let (mut ok, mut err) = (0u32, 0u32);
        // This batch's successful completions: (reads, read bytes, writes, written bytes).
        let mut batch = [0u64; 4];
        for c in self.out.drain(..) {
            let s = c.user_data as usize;
            let op = self.slots.op[s];
            let (off, len) = (self.slots.off[s], self.slots.len[s]);
            // Zero bytes for a non-empty I/O means the device ended under us (a removed or
            // shrunk disk reads back EOF): count it as ENXIO, never as a completed I/O.
            let result = if c.result == 0 && len > 0 {
                -libc::ENXIO
            } else {
                c.result
            };
            if result >= 0 {
                self.stats
                    .record(op, result as u64, tc.saturating_sub(self.slots.t[s]));
                let k = if op == Op::Read { 0 } else { 2 };
                batch[k] += 1;
                batch[k + 1] += result as u64;
                ok += 1;
            } else {
                self.stats.record_error(op, -result);
                err += 1;
            }
            if let Some(h) = self.hook.as_mut() {
                let buf = self.slots.buf[s];
                hook_completion(h.as_mut(), &mut *self.engine, buf, op, off, len, result);
            }
            self.slots.release(s);
        }
        if let Some(l) = self.live.as_ref() {
            l.add(batch[0], batch[1], batch[2], batch[3]);
        }
        let st = &mut self.st;
        if err > 0 && ok == 0 {
            st.backoff = (st.backoff * 2).clamp(BACKOFF_MIN_NS, BACKOFF_MAX_NS);
            st.backoff_until = tc + st.backoff;
        } else if ok > 0 {
            st.backoff = 0;
        }
    }
}

/// The hook's call for one completion with `result` (bytes, or a negative errno) of an I/O of
/// `len` bytes at `off` in buffer `buf`.
#[inline]
fn hook_completion(
    h: &mut dyn BlockHook,
    engine: &mut dyn IoEngine,
    buf: u16,
    op: Op,
    off: u64,
    len: u32,
    result: i32,
) {
    match (op, result >= 0) {
        (Op::Read, true) => {
            let b = engine.buffer(buf);
            h.after_read(&b[..(result as usize).min(b.len())], off);
        }
        (Op::Read, false) => h.read_failed(off, len as usize, -result),
        // A short write counts as failed: not every stamped unit landed.
        (Op::Write, done) => h.after_write(off, len as usize, done && result as u32 == len),
    }
}
