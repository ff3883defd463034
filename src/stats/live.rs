//! Live I/O totals of one target, readable at any instant.
//!
//! The interval reports a worker sends lag its completions by up to one stats interval, which
//! is too coarse for comparing nvsoak's bytes with a SMART read taken at one moment (the
//! accounting check). So each worker also owns a [`LiveCell`] of atomics that it bumps once per
//! reaped batch, and the health poller sums the cells of a target right after its SMART read.
//!
//! Architecture Invariant: the hot path only does relaxed `fetch_add`s on the worker's own,
//! cache-line aligned cell (no other writer, no lock, no allocation). The lock in [`LiveIo`] is
//! taken only when a worker starts or ends and when a reader sums.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Cumulative completed I/O of one direction pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveTotals {
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
}

impl LiveTotals {
    fn add(&mut self, o: &LiveTotals) {
        self.read_bytes += o.read_bytes;
        self.written_bytes += o.written_bytes;
        self.read_ops += o.read_ops;
        self.write_ops += o.write_ops;
    }
}

/// One worker's counters. Aligned to its own cache line so workers never share one.
#[repr(align(64))]
#[derive(Debug, Default)]
pub struct LiveCell {
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    read_ops: AtomicU64,
    write_ops: AtomicU64,
}

impl LiveCell {
    /// Add one reaped batch's successful completions.
    #[inline]
    pub fn add(&self, read_ops: u64, read_bytes: u64, write_ops: u64, written_bytes: u64) {
        // Relaxed is enough: each counter is read on its own, and a reader that misses the
        // newest batch sees it at its next read.
        if read_ops > 0 {
            self.read_ops.fetch_add(read_ops, Ordering::Relaxed);
            self.read_bytes.fetch_add(read_bytes, Ordering::Relaxed);
        }
        if write_ops > 0 {
            self.write_ops.fetch_add(write_ops, Ordering::Relaxed);
            self.written_bytes
                .fetch_add(written_bytes, Ordering::Relaxed);
        }
    }

    pub fn totals(&self) -> LiveTotals {
        LiveTotals {
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            read_ops: self.read_ops.load(Ordering::Relaxed),
            write_ops: self.write_ops.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// What workers that have ended did.
    retired: LiveTotals,
    cells: Vec<Arc<LiveCell>>,
}

/// A target's live totals: the sum over its running workers' cells plus what ended workers did.
/// Cumulative since the target started in this process.
#[derive(Debug, Default)]
pub struct LiveIo {
    inner: Mutex<Inner>,
}

impl LiveIo {
    pub fn new() -> Arc<Self> {
        Arc::new(LiveIo::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::util::lock(&self.inner)
    }

    /// A new cell for a worker; its counts leave the live set (into the retired totals) when
    /// the returned guard drops.
    pub fn register(self: &Arc<Self>) -> LiveGuard {
        let cell = Arc::new(LiveCell::default());
        self.lock().cells.push(cell.clone());
        LiveGuard {
            owner: self.clone(),
            cell,
        }
    }

    /// The totals now: every running worker's cell plus the retired totals, under the lock so
    /// that a worker ending meanwhile is counted exactly once.
    pub fn totals(&self) -> LiveTotals {
        let g = self.lock();
        let mut t = g.retired;
        for c in &g.cells {
            t.add(&c.totals());
        }
        t
    }

    fn retire(&self, cell: &Arc<LiveCell>) {
        let mut g = self.lock();
        if let Some(i) = g.cells.iter().position(|c| Arc::ptr_eq(c, cell)) {
            let c = g.cells.swap_remove(i);
            g.retired.add(&c.totals());
        }
    }
}

/// A worker's registration in a [`LiveIo`]; dereferences to its cell.
#[derive(Debug)]
pub struct LiveGuard {
    owner: Arc<LiveIo>,
    cell: Arc<LiveCell>,
}

impl std::ops::Deref for LiveGuard {
    type Target = LiveCell;
    fn deref(&self) -> &LiveCell {
        &self.cell
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.owner.retire(&self.cell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_survive_workers_ending_and_count_each_batch_once() {
        let live = LiveIo::new();
        let a = live.register();
        let b = live.register();
        a.add(2, 8192, 1, 4096);
        b.add(0, 0, 3, 3 * 65536);
        let t = live.totals();
        assert_eq!(
            t,
            LiveTotals {
                read_bytes: 8192,
                written_bytes: 4096 + 3 * 65536,
                read_ops: 2,
                write_ops: 4,
            }
        );
        drop(a);
        assert_eq!(live.totals(), t, "an ended worker's counts stay");
        b.add(0, 0, 1, 512);
        drop(b);
        let c = live.register();
        c.add(1, 4096, 0, 0);
        let t2 = live.totals();
        assert_eq!(t2.written_bytes, 4096 + 3 * 65536 + 512);
        assert_eq!(t2.write_ops, 5);
        assert_eq!(t2.read_ops, 3);
        assert_eq!(t2.read_bytes, 8192 + 4096);
    }

    #[test]
    fn concurrent_workers_add_up_exactly() {
        let live = LiveIo::new();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let g = live.register();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        g.add(1, 4096, 1, 512);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let t = live.totals();
        assert_eq!(t.read_ops, 40_000);
        assert_eq!(t.write_ops, 40_000);
        assert_eq!(t.read_bytes, 40_000 * 4096);
        assert_eq!(t.written_bytes, 40_000 * 512);
        assert!(live.lock().cells.is_empty(), "every guard retired its cell");
    }
}
