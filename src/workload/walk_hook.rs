//! The inline-verify hook over the computed state (`model::walk`): the [`VerifyHook`]'s
//! job, with each write's generation taken from the worker's place in its leg instead of a
//! stored map, and each read's expectation worked out from the legs.
//!
//! [`VerifyHook`]: crate::workload::hooks::VerifyHook

use std::sync::Arc;

use crate::model::genmap::{Expect, VERIFY_UNIT};
use crate::model::walk::{Leg, WalkMap};
use crate::workload::hooks::report_mismatch;
use crate::workload::pattern::{Mismatch, VerifyCounters, check_unit, stamp_unit};

/// The worker's writing place in the segment's leg: the leg's index among the legs, its
/// slices (one, or a hot and a cold band), and how many writes each has counted.
struct Writer {
    leg: Arc<Leg>,
    leg_index: usize,
    slices: [usize; 2],
    bands: usize,
    next: [u64; 2],
    /// The block being written in pieces (`workload::worker::walker`): counted as written
    /// when its last piece is queued.
    open: Option<OpenBlock>,
}

/// A block whose pieces are being written: its band, its write index in that band's slice,
/// first unit, generation, and the byte its pieces have reached.
#[derive(Clone, Copy)]
struct OpenBlock {
    band: usize,
    k: u64,
    unit: u64,
    g: u32,
    reached: u64,
}

/// Stamps and checks one worker's I/O against a [`WalkMap`]. `check_reads` false: stamp only
/// (`verify = "pass"` outside its sweeps).
pub struct WalkHook {
    map: Arc<WalkMap>,
    /// The legs when the segment started (the map's list changes only between segments).
    legs: Arc<[Arc<Leg>]>,
    writer: Option<Writer>,
    check_reads: bool,
    counters: Arc<VerifyCounters>,
    target: String,
    lba_size: u32,
    checked_units: u64,
}

/// Units a hook checks before it adds them to the target's shared count.
const CHECKED_BATCH: u64 = 256;

impl WalkHook {
    /// `slices`: this worker's slice of the newest leg, and its cold band's when the leg has
    /// a hot band, when the segment writes (the leg was begun for it); `None` for a segment
    /// that only reads.
    pub fn new(
        target: &str,
        map: Arc<WalkMap>,
        slices: Option<(usize, Option<usize>)>,
        check_reads: bool,
        counters: Arc<VerifyCounters>,
        lba_size: u32,
    ) -> Self {
        // Built here, before the loop, so no worker's first unit pays for them.
        crate::workload::pattern::warm_crc_tables();
        let legs = map.legs();
        let writer = slices.and_then(|(hot, cold)| {
            let leg_index = legs.len().checked_sub(1)?;
            Some(Writer {
                leg: legs[leg_index].clone(),
                leg_index,
                slices: [hot, cold.unwrap_or(hot)],
                bands: 1 + cold.is_some() as usize,
                next: [0; 2],
                open: None,
            })
        });
        WalkHook {
            map,
            legs,
            writer,
            check_reads,
            counters,
            target: target.to_string(),
            lba_size: lba_size.max(1),
            checked_units: 0,
        }
    }

    fn block_bytes(w: &Writer) -> u64 {
        w.leg.block_units as u64 * VERIFY_UNIT as u64
    }

    /// The band and write index of the write at `offset`: the open block's (not counted yet),
    /// else the newest counted write of a band's slice there (a unit is never in flight twice:
    /// the worker holds back overlapping I/O).
    fn write_index(w: &Writer, offset: u64) -> Option<(usize, u64)> {
        let bb = Self::block_bytes(w);
        if let Some(o) = w.open
            && offset / bb == o.unit * VERIFY_UNIT as u64 / bb
        {
            return Some((o.band, o.k));
        }
        let block = offset / bb;
        let j = w.leg.perm.map_or(block, |p| p.inverse(block));
        (0..w.bands).find_map(|b| {
            let s = w.leg.slice(w.slices[b]);
            let o = j.checked_sub(s.start).filter(|&o| o < s.len)?;
            let last = (s.from + w.next[b]).checked_sub(1)?;
            let a = last - (last + s.len - o) % s.len;
            a.checked_sub(s.from).map(|k| (b, k))
        })
    }

    /// Count the open block written (its last piece is queued, or the worker stopped); the
    /// units no piece reached keep what they held, as exceptions.
    fn close(&mut self, stopped_at: Option<u64>) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let Some(o) = w.open.take() else {
            return;
        };
        let slice = w.slices[o.band];
        if let Some(reached) = stopped_at {
            let first = reached / VERIFY_UNIT as u64;
            let end = o.unit + w.leg.block_units as u64;
            self.map.keep_unwritten(
                &self.legs,
                (w.leg_index, slice, o.k),
                first,
                end.saturating_sub(first),
            );
        }
        self.map.issue_write(&w.leg, slice, o.k);
        w.next[o.band] += 1;
    }
}

impl Drop for WalkHook {
    fn drop(&mut self) {
        // The worker stopped inside a block: what its pieces wrote counts, the rest is kept.
        if let Some(reached) = self.writer.as_ref().and_then(|w| w.open).map(|o| o.reached) {
            self.close(Some(reached));
        }
        self.counters
            .add_checked(self.checked_units * VERIFY_UNIT as u64);
        if let Some(s) = self.counters.log.flush() {
            crate::workload::verify_log::log_summary(&self.target, &s);
        }
    }
}

impl crate::workload::worker::BlockHook for WalkHook {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        let seed = self.map.seed();
        let Some(w) = self.writer.as_mut() else {
            // Not planned as a writing segment: a write here has no place in the walk. Never
            // happens (the scheduler begins a leg for every segment that writes).
            debug_assert!(false, "a write in a read-only walk segment");
            return;
        };
        let bb = Self::block_bytes(w);
        let len = (buf.len() - buf.len() % VERIFY_UNIT) as u64;
        let g = match w.open {
            // The next piece of the open block.
            Some(o) if offset == o.reached => o.g,
            _ => {
                debug_assert!(w.open.is_none(), "a block left open");
                // A new block: the band whose next write it is.
                // Each band's next block is worked out once (one permutation step each).
                let next = |b: usize| (b, w.leg.nth_write(w.slices[b], w.next[b]));
                let (b, (unit, g)) = (0..w.bands)
                    .map(next)
                    .find(|(_, (u, _))| u * VERIFY_UNIT as u64 == offset)
                    .unwrap_or_else(|| next(0));
                debug_assert_eq!(
                    unit * VERIFY_UNIT as u64,
                    offset,
                    "the worker's placement and the walk disagree"
                );
                w.open = Some(OpenBlock {
                    band: b,
                    k: w.next[b],
                    unit,
                    g,
                    reached: offset,
                });
                g
            }
        };
        for (i, u) in buf[..len as usize]
            .chunks_exact_mut(VERIFY_UNIT)
            .enumerate()
        {
            stamp_unit(u, offset + (i * VERIFY_UNIT) as u64, g, seed);
        }
        let complete = w.open.as_mut().is_some_and(|o| {
            o.reached = offset + len;
            o.reached >= o.unit * VERIFY_UNIT as u64 + bb
        });
        if complete {
            self.close(None);
        }
    }

    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        let unit = offset / VERIFY_UNIT as u64;
        let units = (len / VERIFY_UNIT) as u64;
        if ok {
            self.map.complete_write(unit, units);
            return;
        }
        if let Some(w) = &self.writer
            && let Some((b, k)) = Self::write_index(w, offset)
        {
            self.map
                .fail_write(&self.legs, (w.leg_index, w.slices[b], k), unit, units);
        }
    }

    fn after_read(&mut self, buf: &[u8], offset: u64) {
        if !self.check_reads {
            return;
        }
        let seed = self.map.seed();
        let mut checked = 0u64;
        for (i, unit) in buf.chunks_exact(VERIFY_UNIT).enumerate() {
            let off = offset + (i * VERIFY_UNIT) as u64;
            let u = off / VERIFY_UNIT as u64;
            let e = self.map.expect(&self.legs, u);
            if e != Expect::NeverWritten {
                checked += 1;
            }
            match check_unit(unit, off, e, seed) {
                Ok(found) => {
                    if e.is_recovered() {
                        self.map.learn(u, e, found);
                    }
                }
                Err(m) => report_mismatch(&self.counters, &self.target, self.lba_size, &m),
            }
        }
        self.checked_units += checked;
        if self.checked_units >= CHECKED_BATCH {
            self.counters
                .add_checked(self.checked_units * VERIFY_UNIT as u64);
            self.checked_units = 0;
        }
    }

    fn read_failed(&mut self, offset: u64, _len: usize, errno: i32) {
        if !self.check_reads {
            return;
        }
        let e = self.map.expect(&self.legs, offset / VERIFY_UNIT as u64);
        let m = Mismatch::unreadable(offset, e.generation(), self.map.seed(), errno);
        report_mismatch(&self.counters, &self.target, self.lba_size, &m);
    }
}
