//! The worker hot loop: one plain OS thread per worker, owning its engine, its random
//! generator and its [`WorkerStats`]. It keeps `iodepth` I/Os in flight, picks op, block size
//! and offset per I/O, paces to a rate when asked, and sends a [`WorkerReport`] every
//! `report_interval`.
//!
//! Architecture Invariant: between setup and the final drain the loop takes no lock, does not
//! allocate per I/O (only the interval report swaps histograms), and never touches tokio or the
//! Prometheus registry. Everything the loop needs is precomputed in setup.
//!
//! Offsets: random access uses blocks of the job's smallest block size (at least 512 bytes);
//! sequential access advances by each I/O's length, so its offsets are aligned to the greatest
//! common divisor of the block sizes. Every I/O satisfies
//! `region_start <= offset && offset + len <= region_start + region_len`.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::engine::{self, EngineError, EngineSetup, IoEngine};
use crate::model::spec::{EngineChoice, JobSpec};
use crate::stats::WorkerReport;

/// Everything one worker needs; built by the scheduler.
pub struct WorkerPlan {
    /// Worker index within the job (`0..job.workers`).
    pub index: usize,
    pub job: JobSpec,
    /// Opened by the scheduler (O_DIRECT when `target.direct`).
    pub fd: Arc<OwnedFd>,
    /// The job's whole region (all workers), in bytes.
    pub region_start: u64,
    pub region_len: u64,
    pub engine: EngineChoice,
    /// This worker's share of the job's rate, in IOPS.
    pub rate_iops: Option<f64>,
    /// Stop after this many bytes (preconditioning passes); `None`: until `stop`. Rounded up to
    /// the job's alignment. For a precondition pass use [`stripe_bounds`]`(..).1 * passes`.
    pub limit_bytes: Option<u64>,
    pub seed: u64,
    pub report_interval: Duration,
    pub stop: Arc<AtomicBool>,
}

#[derive(Debug)]
pub struct WorkerExit {
    pub engine: &'static str,
    pub reason: ExitReason,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExitReason {
    /// `stop` was set, or the report receiver went away.
    Stopped,
    /// `limit_bytes` were transferred.
    LimitReached,
    /// The engine failed while running (after draining what it could).
    Fatal(String),
}

#[derive(Debug, Error)]
pub enum WorkerError {
    #[error("job {job}, worker {worker}: setting up the I/O engine failed: {source}")]
    Engine {
        job: String,
        worker: usize,
        #[source]
        source: EngineError,
    },
    #[error(
        "job {job}, worker {worker}: the region ({len} bytes at offset {start}) cannot hold a {bs}-byte block for this worker; enlarge the target or its region, or use fewer workers"
    )]
    RegionTooSmall {
        job: String,
        worker: usize,
        start: u64,
        len: u64,
        bs: u32,
    },
    #[error("job {job}: {reason}")]
    BadJob { job: String, reason: String },
}

/// Hook for data verification: stamps write buffers and checks read buffers. Runs on the hot
/// path, so implementations must not lock or allocate. The default methods do nothing.
///
/// With a hook installed the worker never has two overlapping I/Os of which one is a write in
/// flight at once (an I/O that would overlap waits until the earlier one completed), so a
/// hook can rely on completion order for any one block. Workers of the same job do not
/// coordinate with each other.
pub trait BlockHook: Send {
    /// Called with the exact bytes about to be written at `offset`.
    fn before_write(&mut self, _buf: &mut [u8], _offset: u64) {}
    /// Called with the bytes a successful read returned from `offset`.
    fn after_read(&mut self, _buf: &[u8], _offset: u64) {}
    /// Called when a write of `len` bytes at `offset` (stamped by `before_write`) completed:
    /// `ok` false if it failed.
    fn after_write(&mut self, _offset: u64, _len: usize, _ok: bool) {}
    /// Called when a read of `len` bytes at `offset` failed with `errno`.
    fn read_failed(&mut self, _offset: u64, _len: usize, _errno: i32) {}
}

/// Builds the engine inside the worker thread (io_uring rings must be created by their
/// submitter thread).
pub type EngineFactory =
    Box<dyn FnOnce(EngineSetup) -> Result<Box<dyn IoEngine>, EngineError> + Send>;

/// Reports a worker with `recycle` keeps queued at most before it coalesces intervals.
pub const MAX_OUTSTANDING: usize = 2;

/// Where a worker sends its reports. A bounded channel (`sync_channel`, sized for every
/// worker's [`MAX_OUTSTANDING`] reports plus its final one) never allocates per send, so with
/// recycling the steady state allocates nothing at any interval; an unbounded channel
/// allocates a block every few dozen reports.
#[derive(Clone)]
pub enum ReportTx {
    Unbounded(Sender<WorkerReport>),
    Bounded(SyncSender<WorkerReport>),
}

impl ReportTx {
    fn send(&self, r: WorkerReport) -> Result<(), ()> {
        match self {
            ReportTx::Unbounded(t) => t.send(r).map_err(drop),
            ReportTx::Bounded(t) => t.send(r).map_err(drop),
        }
    }
}

impl From<Sender<WorkerReport>> for ReportTx {
    fn from(t: Sender<WorkerReport>) -> Self {
        ReportTx::Unbounded(t)
    }
}

impl From<SyncSender<WorkerReport>> for ReportTx {
    fn from(t: SyncSender<WorkerReport>) -> Self {
        ReportTx::Bounded(t)
    }
}

/// Capacity of a bounded report channel for `workers` workers with recycling: each has at
/// most [`MAX_OUTSTANDING`] reports queued, plus its final one.
pub fn report_capacity(workers: usize) -> usize {
    workers.max(1) * (MAX_OUTSTANDING + 1)
}

/// Optional extras for [`spawn_with`].
#[derive(Default)]
pub struct WorkerOptions {
    /// Replaces `engine::open(plan.engine, ..)`, e.g. with a recording wrapper in tests.
    pub engine_factory: Option<EngineFactory>,
    pub hook: Option<Box<dyn BlockHook>>,
    /// Histogram pairs handed back by the consumer of reports, reused instead of allocating.
    pub recycle: Option<Receiver<(Histogram<u64>, Histogram<u64>)>>,
    /// The target's live totals, bumped once per reaped batch (for the accounting check).
    pub live: Option<crate::stats::live::LiveGuard>,
    /// Sequential access: bytes into this worker's stripe where its walk starts (a resumed
    /// precondition); see [`OffsetGen::start_at`]. 0: the stripe's start.
    pub seq_start: u64,
    /// Verification's permuted walk for this worker (writes in the order of a slice of the
    /// leg's permutation, reads within it); `None`: the job's own placement.
    pub walk: Option<WalkPlace>,
    /// The passthrough engines' generic device of `plan.fd`, shared by every worker on that
    /// descriptor and resolved once (`EngineSetup::passthru`); `None`: the engine resolves it.
    pub passthru: Option<engine::passthru::SharedNode>,
}

/// Spawn the worker thread. It sends a [`WorkerReport`] every `report_interval` and a final
/// one with `done = true` after draining.
pub fn spawn(
    plan: WorkerPlan,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    spawn_with(plan, WorkerOptions::default(), tx)
}

/// [`spawn`] with an engine built by `factory` (tests wrap the real engine to record I/Os).
pub fn spawn_with_engine(
    plan: WorkerPlan,
    factory: EngineFactory,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    spawn_with(
        plan,
        WorkerOptions {
            engine_factory: Some(factory),
            ..Default::default()
        },
        tx,
    )
}

pub fn spawn_with(
    plan: WorkerPlan,
    opts: WorkerOptions,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    let tx = tx.into();
    std::thread::Builder::new()
        .name(format!("nvsoak-w{}", plan.index))
        .spawn(move || run(plan, opts, tx))
}

mod bench;
mod pieces;
mod run;
mod slots;
mod walker;

pub use bench::{BenchError, BenchResult, bench_worker};
pub use pieces::*;
pub use run::WORKER_NICE;
use run::run;
pub use walker::{Band, WalkPlace};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod alloc_count;

#[cfg(test)]
mod hot_path;
