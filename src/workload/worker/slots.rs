//! The worker's in-flight table: per-slot state of the I/Os it has queued.

use crate::model::spec::Op;

/// The in-flight table: per-slot state, indexed by `user_data`. Every vector is allocated once
/// for the queue depth; the free list never holds more than `depth` slots, so nothing grows.
pub(super) struct Slots {
    /// Free slots; a batch takes them from the end.
    pub(super) free: Vec<u16>,
    /// Submission time (clock ns).
    pub(super) t: Vec<u64>,
    pub(super) op: Vec<Op>,
    pub(super) off: Vec<u64>,
    pub(super) buf: Vec<u16>,
    /// Submitted length per slot, 0 while the slot is free.
    pub(super) len: Vec<u32>,
    pub(super) inflight: usize,
}

impl Slots {
    pub(super) fn new(depth: usize) -> Self {
        Slots {
            free: (0..depth as u16).rev().collect(),
            t: vec![0; depth],
            op: vec![Op::Read; depth],
            off: vec![0; depth],
            buf: vec![0; depth],
            len: vec![0; depth],
            inflight: 0,
        }
    }

    #[inline]
    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The free slot a batch's `k`-th I/O takes. Slots leave the free list only in
    /// [`Slots::take`], once the batch is queued.
    #[inline]
    pub(super) fn nth_free(&self, k: usize) -> u16 {
        self.free[self.free.len() - 1 - k]
    }

    #[inline]
    pub(super) fn fill(&mut self, slot: u16, op: Op, offset: u64, buf: u16, len: u32) {
        let s = slot as usize;
        self.op[s] = op;
        self.off[s] = offset;
        self.buf[s] = buf;
        self.len[s] = len;
    }

    #[inline]
    pub(super) fn stamp(&mut self, slot: u16, t: u64) {
        self.t[slot as usize] = t;
    }

    /// Marks the `n` slots handed out by `nth_free(0..n)` in flight, stamping each with the
    /// submission time `t` when given (one clock read for a whole batch).
    #[inline]
    pub(super) fn take(&mut self, n: usize, t: Option<u64>) {
        let base = self.free.len();
        if let Some(t) = t {
            for &slot in &self.free[base - n..base] {
                self.t[slot as usize] = t;
            }
        }
        self.free.truncate(base - n);
        self.inflight += n;
    }

    /// Frees slot `s` on its completion.
    #[inline]
    pub(super) fn release(&mut self, s: usize) {
        self.len[s] = 0;
        self.free.push(s as u16);
        self.inflight -= 1;
    }

    /// Whether an I/O would overlap one in flight where either of them writes. Linear in the
    /// queue depth; only run when a verification hook is installed.
    #[inline]
    pub(super) fn overlaps_inflight(&self, op: Op, offset: u64, len: u32) -> bool {
        let end = offset + len as u64;
        (0..self.len.len()).any(|s| {
            self.len[s] > 0
                && (op == Op::Write || self.op[s] == Op::Write)
                && self.off[s] < end
                && offset < self.off[s] + self.len[s] as u64
        })
    }
}
