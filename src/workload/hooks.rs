//! Hot-path hooks the scheduler hands to workers: inline verification ([`VerifyHook`], over the
//! generation map of `pattern`), precondition progress ([`ProgressHook`], publishing to
//! [`PrecondLive`], which the scheduler's snapshot holds) and stamp-only verification
//! ([`StampOnly`]). Called per I/O: no lock, no allocation after construction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::checkpoint::{PreconditionProgress, StripeProgress};
use crate::workload::pattern::{GenMap, Mismatch, VERIFY_UNIT, VerifyCounters};
use crate::workload::worker::BlockHook;

/// Live progress of a precondition phase: per worker stripe, the bytes of its sequential walk
/// (all passes, earlier runs included) whose writes completed, in walk order. Written by each
/// worker's [`ProgressHook`], read by checkpoints
/// ([`TargetShared::to_state`](crate::workload::scheduler::TargetShared::to_state)).
#[derive(Debug)]
pub struct PrecondLive {
    pub passes: u32,
    pub block_size: u32,
    /// `(start, len)` of each worker's stripe.
    pub stripes: Vec<(u64, u64)>,
    pub done: Vec<AtomicU64>,
}

impl PrecondLive {
    /// The checkpoint record: only writes that completed, as a prefix of each walk.
    pub fn progress(&self) -> PreconditionProgress {
        PreconditionProgress {
            passes: self.passes,
            block_size: self.block_size,
            stripes: self
                .stripes
                .iter()
                .zip(&self.done)
                .map(|(&(start, len), d)| StripeProgress {
                    start,
                    len,
                    done_bytes: d.load(Ordering::Acquire),
                })
                .collect(),
        }
    }
}

/// Tracks how far one precondition worker's sequential walk has completed, in walk order, and
/// publishes it to [`PrecondLive::done`]. Writes complete out of order, so it keeps the
/// submitted writes in a ring, in walk order, each with its place in the walk: everything
/// before the oldest write still in flight has completed, so that is the position. Completed
/// writes are only kept until the ring fills, then squeezed out (at most `iodepth` are in
/// flight, the ring holds twice that), so later writes may get ahead of a slow one by any
/// amount. A failed write stops the tracking (the position stays at or before its start: it may
/// not have landed); so does anything unexpected. Wraps the verify hook when there is one. No
/// lock, no allocation after construction; amortised O(1) per write when they complete in order.
pub(crate) struct ProgressHook {
    pub(crate) inner: Option<Box<dyn BlockHook>>,
    pub(crate) live: Arc<PrecondLive>,
    pub(crate) index: usize,
    /// The walk's completed bytes when this hook started (an earlier run or segment).
    pub(crate) base: u64,
    /// Bytes of the walk submitted through this hook.
    pub(crate) submitted: u64,
    /// Bytes of the walk (since `base`) known complete: the oldest write in flight's start.
    pub(crate) pos: u64,
    /// Submitted writes, oldest at `head`: (offset, start in the walk since `base`, len,
    /// completed). The head is always in flight (completed ones are popped).
    pub(crate) ring: Box<[(u64, u64, u32, bool)]>,
    pub(crate) head: usize,
    pub(crate) count: usize,
    pub(crate) stalled: bool,
}

impl ProgressHook {
    pub(crate) fn new(
        inner: Option<Box<dyn BlockHook>>,
        live: Arc<PrecondLive>,
        index: usize,
        done: u64,
        iodepth: u32,
    ) -> Self {
        ProgressHook {
            inner,
            live,
            index,
            base: done,
            submitted: 0,
            pos: 0,
            ring: vec![(0, 0, 0, false); 2 * iodepth.max(1) as usize + 1].into_boxed_slice(),
            head: 0,
            count: 0,
            stalled: false,
        }
    }

    /// Drops the completed writes behind the head, keeping the others in order.
    fn squeeze(&mut self) {
        let cap = self.ring.len();
        let mut kept = 0;
        for k in 0..self.count {
            let e = self.ring[(self.head + k) % cap];
            if !e.3 {
                self.ring[(self.head + kept) % cap] = e;
                kept += 1;
            }
        }
        self.count = kept;
    }

    /// Pops the completed writes at the head and publishes the new position.
    fn advance(&mut self) {
        let cap = self.ring.len();
        while self.count > 0 && self.ring[self.head].3 {
            self.head = (self.head + 1) % cap;
            self.count -= 1;
        }
        let pos = if self.count > 0 {
            self.ring[self.head].1
        } else {
            self.submitted
        };
        if pos > self.pos {
            self.pos = pos;
            if let Some(d) = self.live.done.get(self.index) {
                d.store(self.base + pos, Ordering::Release);
            }
        }
    }
}

impl BlockHook for ProgressHook {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        if let Some(h) = self.inner.as_mut() {
            h.before_write(buf, offset);
        }
        if self.stalled {
            return;
        }
        if self.count == self.ring.len() {
            self.squeeze();
        }
        let Ok(len) = u32::try_from(buf.len()) else {
            self.stalled = true;
            return;
        };
        if self.count == self.ring.len() || len == 0 {
            // More in flight than the iodepth, or an empty write: stop tracking.
            self.stalled = true;
            return;
        }
        let cap = self.ring.len();
        self.ring[(self.head + self.count) % cap] = (offset, self.submitted, len, false);
        self.count += 1;
        self.submitted += len as u64;
    }
    fn after_read(&mut self, buf: &[u8], offset: u64) {
        if let Some(h) = self.inner.as_mut() {
            h.after_read(buf, offset);
        }
    }
    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        // The inner hook (generation map) first: the position never runs ahead of the map.
        if let Some(h) = self.inner.as_mut() {
            h.after_write(offset, len, ok);
        }
        if self.stalled {
            return;
        }
        if !ok {
            // The position is already the oldest write in flight's start, at or before this
            // one's; it stays there.
            self.stalled = true;
            return;
        }
        let cap = self.ring.len();
        // The oldest write in flight at this offset (a short stripe may have two).
        let hit = (0..self.count)
            .map(|k| (self.head + k) % cap)
            .find(|&j| self.ring[j].0 == offset && !self.ring[j].3);
        let Some(j) = hit else {
            self.stalled = true;
            return;
        };
        self.ring[j].3 = true;
        if j == self.head {
            self.advance();
        }
    }
    fn read_failed(&mut self, offset: u64, len: usize, errno: i32) {
        if let Some(h) = self.inner.as_mut() {
            h.read_failed(offset, len, errno);
        }
    }
}

/// Which verification a segment's workers do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum HookMode {
    /// Stamp writes and check every read (`inline`, and the sweeps of `pass`).
    Full,
    /// Stamp writes only (the workload under `pass`).
    StampOnly,
}

/// Stamps writes through the generation map without checking reads.
pub(crate) struct StampOnly(pub(crate) VerifyHook);

impl BlockHook for StampOnly {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        self.0.before_write(buf, offset);
    }
    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        self.0.after_write(offset, len, ok);
    }
}

/// The worker's [`BlockHook`](crate::workload::worker::BlockHook) for `verify = "inline"`:
/// stamps every write through the shared [`GenMap`], checks every read against it, counts
/// mismatches in [`VerifyCounters`] and logs them: the target's first
/// [`LOG_FIRST`](crate::workload::verify_log::LOG_FIRST) in full, with the offset, LBA and the
/// expected and found header fields, then one summary line per interval
/// ([`crate::workload::verify_log`]).
///
/// Writes are recorded in the map when submitted (`before_write`), so a read submitted after a
/// write expects the new generation. The worker must therefore never have a read and a write of
/// the same unit in flight at once. A failed write (`after_write` with `ok` false) marks its
/// units recovered: either the old or the new block is accepted once. A write that was in
/// flight at the instant of a checkpoint and never landed because the process died right after
/// would read back as one generation older after the restart; with checkpoints a minute apart
/// and I/Os taking micro- to milliseconds, that window is negligible.
pub struct VerifyHook {
    map: std::sync::Arc<GenMap>,
    counters: std::sync::Arc<VerifyCounters>,
    target: String,
    lba_size: u32,
    /// Units checked since the last hand-over to `counters` (batched: one shared atomic add
    /// per [`CHECKED_BATCH`] units, not one per read).
    checked_units: u64,
}

/// Units a hook checks before it adds them to the target's shared count.
const CHECKED_BATCH: u64 = 256;

impl VerifyHook {
    /// `lba_size` is the device's logical block size (512 or 4096; 512 for files), for logs.
    pub fn new(
        target: &str,
        map: std::sync::Arc<GenMap>,
        counters: std::sync::Arc<VerifyCounters>,
        lba_size: u32,
    ) -> Self {
        // Built here, before the loop, so no worker's first unit pays for them.
        crate::workload::pattern::warm_crc_tables();
        VerifyHook {
            map,
            counters,
            target: target.to_string(),
            lba_size: lba_size.max(1),
            checked_units: 0,
        }
    }

    fn report(&mut self, m: &Mismatch) {
        report_mismatch(&self.counters, &self.target, self.lba_size, m);
    }
}

/// Count and (rate-limited) log one mismatch.
pub(crate) fn report_mismatch(
    counters: &VerifyCounters,
    target: &str,
    lba_size: u32,
    m: &Mismatch,
) {
    use crate::workload::verify_log::{Action, log_summary, now_ms};
    counters.add(m.kind, 1);
    let last = match counters.log.note(m.kind, m.offset, now_ms()) {
        Action::Full { last } => last,
        Action::Summarised(Some(s)) => return log_summary(target, &s),
        Action::Summarised(None) => return,
    };
    {
        tracing::error!(
            target_name = %target,
            kind = m.kind.label(),
            offset = m.offset,
            lba = m.lba(lba_size),
            expected_generation = m.expected_generation,
            found_offset = m.found.map(|h| h.offset),
            found_generation = m.found.map(|h| h.generation),
            found_seed = m.found.map(|h| h.seed),
            "data verification failed on target {target}: {m}{}",
            if last {
                "; further mismatches are summarised every 10 s"
            } else {
                ""
            }
        );
    }
}

/// A segment's end: the mismatches still pending a summary are logged now, not lost.
impl Drop for VerifyHook {
    fn drop(&mut self) {
        self.counters
            .add_checked(self.checked_units * VERIFY_UNIT as u64);
        if let Some(s) = self.counters.log.flush() {
            crate::workload::verify_log::log_summary(&self.target, &s);
        }
    }
}

impl crate::workload::worker::BlockHook for VerifyHook {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        let len = buf.len() - buf.len() % VERIFY_UNIT;
        self.map.stamp_write(&mut buf[..len], offset);
        self.map.complete_write(offset, len);
    }

    fn after_read(&mut self, buf: &[u8], offset: u64) {
        // Split borrows: no Arc clone (a shared refcount) per I/O.
        let VerifyHook {
            map,
            counters,
            target,
            lba_size,
            checked_units,
        } = self;
        let (_, checked) = map.verify_read_counted(buf, offset, |m| {
            report_mismatch(counters, target, *lba_size, m)
        });
        *checked_units += u64::from(checked);
        if *checked_units >= CHECKED_BATCH {
            counters.add_checked(*checked_units * VERIFY_UNIT as u64);
            *checked_units = 0;
        }
    }

    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        if !ok {
            self.map.undo_write(offset, len);
        }
    }

    fn read_failed(&mut self, offset: u64, len: usize, errno: i32) {
        let exp = self.map.expect(offset).generation();
        let m = Mismatch::unreadable(offset, exp, self.map.seed(), errno);
        let _ = len;
        self.report(&m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::worker::Rng;

    fn live(stripes: Vec<(u64, u64)>, passes: u32, bs: u32) -> Arc<PrecondLive> {
        Arc::new(PrecondLive {
            passes,
            block_size: bs,
            done: stripes.iter().map(|_| AtomicU64::new(0)).collect(),
            stripes,
        })
    }

    fn write(h: &mut ProgressHook, off: u64, len: usize) {
        let mut buf = vec![0u8; len];
        h.before_write(&mut buf, off);
    }

    #[test]
    fn progress_hook_records_only_the_completed_prefix() {
        let l = live(vec![(0, 64 << 10)], 1, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, 0, 4);
        for i in 0..4 {
            write(&mut h, i * 4096, 4096);
        }
        // Later writes complete first: nothing is recorded until the oldest has.
        h.after_write(4096, 4096, true);
        h.after_write(8192, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 0);
        h.after_write(0, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 12288);
        write(&mut h, 16384, 4096);
        h.after_write(12288, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        // A failed write holds the position at its start for good.
        write(&mut h, 20480, 4096);
        h.after_write(20480, 4096, false);
        h.after_write(16384, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        write(&mut h, 24576, 4096);
        h.after_write(24576, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        assert_eq!(l.progress().stripes[0].done_bytes, 16384);
    }

    /// A slow write while later ones complete and new ones take their place: the hook keeps
    /// the completed ones behind the slow one only until its ring fills, so the position moves
    /// on once the slow one completes. (It used to keep them all, in a ring of `iodepth + 1`,
    /// and stopped tracking for good when that filled: a precondition pulled or killed after
    /// that resumed from where the slow write was, however long ago.)
    #[test]
    fn progress_hook_survives_later_writes_overtaking_a_slow_one() {
        let l = live(vec![(0, 1 << 20)], 1, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, 0, 2);
        write(&mut h, 0, 4096);
        // At most 2 in flight: the slow write at 0 and one more, completing and replaced.
        for i in 1..=20u64 {
            write(&mut h, i * 4096, 4096);
            h.after_write(i * 4096, 4096, true);
        }
        assert_eq!(l.done[0].load(Ordering::Relaxed), 0);
        h.after_write(0, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 21 * 4096);
        // And it keeps tracking: two more, the newer first.
        write(&mut h, 21 * 4096, 4096);
        write(&mut h, 22 * 4096, 4096);
        h.after_write(22 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 21 * 4096);
        h.after_write(21 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 23 * 4096);
        // A failure with an older write in flight: the position is the older one's start.
        write(&mut h, 23 * 4096, 4096);
        write(&mut h, 24 * 4096, 4096);
        h.after_write(24 * 4096, 4096, false);
        h.after_write(23 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 23 * 4096);
    }

    /// Random completion orders: after every completion the published position is exactly the
    /// completed prefix of the walk.
    #[test]
    fn progress_hook_position_is_the_completed_prefix_under_any_order() {
        let bs = 4096u64;
        for (seed, depth) in [(1u64, 1usize), (2, 3), (3, 8), (4, 32)] {
            let l = live(vec![(0, 1 << 30)], 1, bs as u32);
            let mut h = ProgressHook::new(None, l.clone(), 0, 0, depth as u32);
            let mut rng = Rng::new(seed);
            let mut inflight: Vec<u64> = Vec::new();
            let mut completed = vec![false; 5000];
            let mut next = 0u64;
            while next < 4000 || !inflight.is_empty() {
                while next < 4000 && inflight.len() < depth {
                    write(&mut h, next * bs, bs as usize);
                    inflight.push(next);
                    next += 1;
                }
                // Mostly the newest first, so the oldest lags far behind now and then.
                let k = if rng.below(4) == 0 {
                    rng.below(inflight.len() as u64) as usize
                } else {
                    inflight.len() - 1
                };
                let b = inflight.swap_remove(k);
                h.after_write(b * bs, bs as usize, true);
                completed[b as usize] = true;
                let prefix = completed.iter().take_while(|c| **c).count() as u64;
                assert_eq!(
                    l.done[0].load(Ordering::Relaxed),
                    prefix * bs,
                    "seed {seed}, iodepth {depth}"
                );
            }
            assert_eq!(l.done[0].load(Ordering::Relaxed), 4000 * bs);
        }
    }

    #[test]
    fn progress_hook_counts_wraps_and_short_blocks_from_its_start() {
        // Resumed at 8 KiB into the second pass of a 10 KiB stripe: 2k (trimmed), then wrap.
        let l = live(vec![(4096, 10 << 10)], 3, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, (10 << 10) + 8192, 2);
        write(&mut h, 4096 + 8192, 2048);
        write(&mut h, 4096, 4096);
        h.after_write(4096, 4096, true);
        h.after_write(4096 + 8192, 2048, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 24 << 10);
        assert_eq!(
            l.progress().stripes[0].resume_point(3, 4096),
            (4096, 6 << 10)
        );
    }
}
