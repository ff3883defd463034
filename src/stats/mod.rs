//! Per-worker statistics. A worker owns one [`WorkerStats`], records into it on the hot path
//! without locks or allocation, and every interval sends a [`WorkerReport`] (cumulative counters
//! plus that interval's HDR histograms) to its target's aggregator.
//!
//! Architecture Invariant: nothing in this module allocates in `record_*`.

use std::time::{Duration, Instant};

pub mod live;

use hdrhistogram::Histogram;

use crate::model::op::Op;
pub use crate::util::sched::CpuTime;

/// Upper bounds (seconds) of the Prometheus latency histogram: 10 µs to 10 s.
pub const LAT_BUCKETS: [f64; 19] = [
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
    250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0,
];
const LAT_BUCKETS_NS: [u64; 19] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Highest latency the HDR histograms track (values above are clamped): 60 s in ns.
pub const HDR_MAX_NS: u64 = 60_000_000_000;

/// errno values below this get their own counter; others share the last slot.
pub const ERRNO_SLOTS: usize = 160;

/// Distinct NVMe statuses counted one by one; more share `NvmeStatusCounts::other`.
pub const NVME_STATUS_SLOTS: usize = 8;

/// Failed passthrough commands by NVMe status (SCT and SC, bits 10:0), a fixed table so that
/// counting never allocates. A status is never 0 (success), so 0 marks a free slot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NvmeStatusCounts {
    pub slots: [(u16, u64); NVME_STATUS_SLOTS],
    /// Statuses beyond the table's distinct slots.
    pub other: u64,
}

impl NvmeStatusCounts {
    #[inline]
    pub fn add_n(&mut self, status: u16, n: u64) {
        for slot in self.slots.iter_mut() {
            if slot.0 == status || slot.0 == 0 {
                slot.0 = status;
                slot.1 += n;
                return;
            }
        }
        self.other += n;
    }
    pub fn total(&self) -> u64 {
        self.slots.iter().map(|s| s.1).sum::<u64>() + self.other
    }
    /// (status, count) for every status seen.
    pub fn iter(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.slots.iter().copied().filter(|s| s.0 != 0 && s.1 > 0)
    }
    pub fn merge(&mut self, o: &NvmeStatusCounts) {
        for (st, n) in o.iter() {
            self.add_n(st, n);
        }
        self.other += o.other;
    }
}

/// I/O error counts by errno, fixed size so that counting never allocates. A passthrough
/// command's NVMe status (an errno from `engine::NVME_STATUS_ERRNO_BASE` up) counts under the
/// errno the block layer would report (`engine::block_errno`: ENODATA or EIO), and by its
/// status in `.1`.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrnoCounts(pub [u64; ERRNO_SLOTS], pub NvmeStatusCounts);

impl Default for ErrnoCounts {
    fn default() -> Self {
        ErrnoCounts([0; ERRNO_SLOTS], NvmeStatusCounts::default())
    }
}

impl ErrnoCounts {
    #[inline]
    pub fn add(&mut self, errno: i32) {
        if let Some(st) = crate::engine::nvme_status(errno) {
            self.1.add_n(st, 1);
            self.0[crate::engine::block_errno(st) as usize] += 1;
            return;
        }
        let i = (errno.max(0) as usize).min(ERRNO_SLOTS - 1);
        self.0[i] += 1;
    }
    /// The NVMe statuses among the errors.
    pub fn nvme(&self) -> &NvmeStatusCounts {
        &self.1
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// (errno, count) for every non-zero slot. Slot `ERRNO_SLOTS-1` means "that or higher".
    pub fn iter(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (i as i32, *c))
    }
    pub fn merge(&mut self, other: &ErrnoCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += *b;
        }
        self.1.merge(&other.1);
    }
}

/// Cumulative counters of one op direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpCounters {
    pub ops: u64,
    pub bytes: u64,
    /// Non-cumulative bucket counts for `LAT_BUCKETS` plus a final +Inf slot.
    pub lat_buckets: [u64; 20],
    /// Sum of latencies in nanoseconds.
    pub lat_sum_ns: u64,
    pub errors: ErrnoCounts,
}

impl OpCounters {
    #[inline]
    pub fn record(&mut self, bytes: u64, lat_ns: u64) {
        self.ops += 1;
        self.bytes += bytes;
        self.lat_sum_ns += lat_ns;
        // Linear scan over 19 bounds beats a binary search at this size.
        let mut i = 0;
        while i < LAT_BUCKETS_NS.len() && lat_ns > LAT_BUCKETS_NS[i] {
            i += 1;
        }
        self.lat_buckets[i] += 1;
    }
    pub fn merge(&mut self, o: &OpCounters) {
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.lat_sum_ns += o.lat_sum_ns;
        for (a, b) in self.lat_buckets.iter_mut().zip(o.lat_buckets.iter()) {
            *a += *b;
        }
        self.errors.merge(&o.errors);
    }
}

pub fn new_hdr() -> Histogram<u64> {
    // 1 µs floor, 60 s ceiling, 3 significant digits. Fixed bounds, so `record` never resizes.
    // The arguments are constants that satisfy hdrhistogram's rules (low >= 1, high >= 2*low,
    // sigfig <= 5), so this cannot fail.
    Histogram::new_with_bounds(1_000, HDR_MAX_NS, 3).expect("constant HDR bounds are valid")
}

/// Everything a worker records.
pub struct WorkerStats {
    pub read: OpCounters,
    pub write: OpCounters,
    pub read_hist: Histogram<u64>,
    pub write_hist: Histogram<u64>,
    /// Engine the worker runs (`io_uring`, `psync`, `null`); copied into every report.
    pub engine: &'static str,
    /// I/Os handed to the engine so far (cumulative). After the final drain it equals
    /// completed plus failed I/Os of both directions.
    pub submitted: u64,
    /// The worker thread's CPU time as of its latest report (the worker sets it, once per
    /// report, from [`crate::util::sched::thread_cpu`]).
    pub cpu: CpuTime,
}

impl Default for WorkerStats {
    fn default() -> Self {
        Self::new()
    }
}

impl WorkerStats {
    pub fn new() -> Self {
        WorkerStats {
            read: OpCounters::default(),
            write: OpCounters::default(),
            read_hist: new_hdr(),
            write_hist: new_hdr(),
            engine: "none",
            submitted: 0,
            cpu: CpuTime::default(),
        }
    }

    #[inline]
    pub fn record(&mut self, op: Op, bytes: u64, lat_ns: u64) {
        let v = lat_ns.clamp(1_000, HDR_MAX_NS);
        match op {
            Op::Read => {
                self.read.record(bytes, lat_ns);
                let _ = self.read_hist.record(v);
            }
            Op::Write => {
                self.write.record(bytes, lat_ns);
                let _ = self.write_hist.record(v);
            }
        }
    }

    #[inline]
    pub fn record_error(&mut self, op: Op, errno: i32) {
        match op {
            Op::Read => self.read.errors.add(errno),
            Op::Write => self.write.errors.add(errno),
        }
    }

    /// Build a report: cumulative counters are copied, interval histograms are handed over and
    /// replaced by the (reset) recycled ones, so the steady state allocates nothing.
    pub fn take_report(
        &mut self,
        worker: usize,
        interval: Duration,
        ended: Instant,
        recycled: Option<(Histogram<u64>, Histogram<u64>)>,
        done: bool,
    ) -> WorkerReport {
        let (mut r, mut w) = recycled.unwrap_or_else(|| (new_hdr(), new_hdr()));
        r.reset();
        w.reset();
        let read_hist = std::mem::replace(&mut self.read_hist, r);
        let write_hist = std::mem::replace(&mut self.write_hist, w);
        WorkerReport {
            worker,
            engine: self.engine,
            submitted: self.submitted,
            cpu: self.cpu,
            interval,
            ended,
            read: self.read.clone(),
            write: self.write.clone(),
            read_hist,
            write_hist,
            done,
        }
    }
}

/// What a worker sends each interval.
pub struct WorkerReport {
    pub worker: usize,
    /// Engine the worker runs (`io_uring`, `psync`, `null`).
    pub engine: &'static str,
    /// I/Os handed to the engine, cumulative. In the final report (`done`) this equals
    /// `read.ops + write.ops + read.errors.total() + write.errors.total()`: nothing was lost.
    pub submitted: u64,
    /// The worker thread's CPU time since it started, cumulative.
    pub cpu: CpuTime,
    /// Wall time this report's histograms and counter deltas cover, ending at `ended`.
    pub interval: Duration,
    /// The worker's clock when it took this report: the interval is `ended - interval` to
    /// `ended`. Rates come from these timestamps, not from when the consumer got the report.
    pub ended: Instant,
    /// Cumulative since the worker started.
    pub read: OpCounters,
    pub write: OpCounters,
    /// This interval only.
    pub read_hist: Histogram<u64>,
    pub write_hist: Histogram<u64>,
    /// Last report of this worker.
    pub done: bool,
}

/// Quantiles the exporter publishes per interval.
pub const QUANTILES: [(f64, &str); 4] = [
    (0.50, "0.5"),
    (0.99, "0.99"),
    (0.999, "0.999"),
    (0.9999, "0.9999"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive() {
        let mut c = OpCounters::default();
        c.record(4096, 10_000); // exactly 10 µs -> first bucket
        c.record(4096, 10_001); // just above -> second
        c.record(4096, 20_000_000_000); // 20 s -> +Inf
        assert_eq!(c.lat_buckets[0], 1);
        assert_eq!(c.lat_buckets[1], 1);
        assert_eq!(c.lat_buckets[19], 1);
        assert_eq!(c.ops, 3);
        assert_eq!(c.bytes, 3 * 4096);
    }

    #[test]
    fn report_hands_over_interval_histogram() {
        let mut s = WorkerStats::new();
        s.record(Op::Read, 4096, 100_000);
        s.record(Op::Read, 4096, 200_000);
        let r = s.take_report(0, Duration::from_secs(1), Instant::now(), None, false);
        assert_eq!(r.read_hist.len(), 2);
        assert_eq!(s.read_hist.len(), 0);
        assert_eq!(r.read.ops, 2);
        s.record(Op::Read, 4096, 100_000);
        let r2 = s.take_report(
            0,
            Duration::from_secs(1),
            Instant::now(),
            Some((r.read_hist, r.write_hist)),
            false,
        );
        assert_eq!(r2.read_hist.len(), 1);
        assert_eq!(r2.read.ops, 3);
    }

    #[test]
    fn report_carries_engine_and_submitted() {
        let mut s = WorkerStats::new();
        assert_eq!(s.engine, "none");
        s.engine = "io_uring";
        s.submitted = 3;
        s.record(Op::Write, 8192, 50_000);
        s.record_error(Op::Write, 5);
        let r = s.take_report(2, Duration::from_millis(500), Instant::now(), None, true);
        assert_eq!(
            (r.worker, r.engine, r.submitted, r.done),
            (2, "io_uring", 3, true)
        );
        assert_eq!(r.write.ops + r.write.errors.total(), 2);
    }

    #[test]
    fn errno_counts() {
        let mut e = ErrnoCounts::default();
        e.add(5);
        e.add(5);
        e.add(28);
        e.add(9999);
        let v: Vec<_> = e.iter().collect();
        assert_eq!(v, vec![(5, 2), (28, 1), ((ERRNO_SLOTS - 1) as i32, 1)]);
        assert_eq!(e.total(), 4);
    }

    #[test]
    fn nvme_statuses_count_as_the_block_layers_errno_and_by_status() {
        let base = crate::engine::NVME_STATUS_ERRNO_BASE;
        let mut e = ErrnoCounts::default();
        e.add(base + 0x281);
        e.add(base + 0x281);
        e.add(base + 0x280);
        e.add(libc::ENOSPC);
        assert_eq!(e.total(), 4);
        // Unrecovered read error and write fault are media errors (ENODATA); invalid field
        // in command (0x002) is not (EIO).
        assert_eq!(e.0[libc::ENODATA as usize], 3);
        e.add(base + 0x002);
        assert_eq!(e.0[libc::EIO as usize], 1);
        let v: Vec<_> = e.nvme().iter().collect();
        assert_eq!(v, vec![(0x281, 2), (0x280, 1), (0x002, 1)]);
        // More distinct statuses than slots share `other`; merging keeps every count.
        let mut f = ErrnoCounts::default();
        for st in 1..=(NVME_STATUS_SLOTS as i32 + 3) {
            f.add(base + st);
        }
        assert_eq!(f.nvme().other, 3);
        e.merge(&f);
        assert_eq!(e.nvme().total(), 4 + NVME_STATUS_SLOTS as u64 + 3);
        assert_eq!(e.nvme().iter().find(|s| s.0 == 0x281), Some((0x281, 2)));
        assert_eq!(e.nvme().iter().find(|s| s.0 == 0x002), Some((0x002, 2)));
        assert_eq!(e.total(), 5 + NVME_STATUS_SLOTS as u64 + 3);
    }
}
