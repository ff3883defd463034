//! Benchmark entry (scripts/bench-vs-fio through examples/bench_worker.rs).

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{ExitReason, WorkerOptions, WorkerPlan, spawn_with};
use crate::model::spec::{Access, EngineChoice, JobSpec, Skew};
use crate::stats::WorkerReport;

/// Why [`bench_worker`] could not measure.
#[doc(hidden)]
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("rw: unknown pattern {0:?} (randread, randwrite, read, write)")]
    Pattern(String),
    #[error("{}: opening with O_DIRECT failed: {source}", path.display())]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Size {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("spawning the worker failed: {0}")]
    Spawn(std::io::Error),
    #[error("worker thread panicked")]
    WorkerPanicked,
    #[error(transparent)]
    Worker(#[from] super::WorkerError),
    /// The engine failed while running (the worker's own message).
    #[error("{0}")]
    Fatal(String),
}

/// What [`bench_worker`] measured.
#[doc(hidden)]
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    pub engine: &'static str,
    pub ops: u64,
    pub secs: f64,
    pub iops: f64,
    /// User plus system CPU of the whole process over the run (all threads).
    pub cpu_secs: f64,
    pub iops_per_cpu_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn rusage_cpu_secs() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike;
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            (u.user_time().num_microseconds() + u.system_time().num_microseconds()) as f64 * 1e-6
        }
        Err(_) => 0.0,
    }
}

/// The read percentage and access of a `bench_worker` pattern.
fn bench_pattern(rw: &str) -> Result<(u8, Access), BenchError> {
    let random = Access::Random {
        skew: Skew::Uniform,
    };
    match rw {
        "randread" => Ok((100, random)),
        "randwrite" => Ok((0, random)),
        "read" => Ok((100, Access::Sequential)),
        "write" => Ok((0, Access::Sequential)),
        other => Err(BenchError::Pattern(other.to_string())),
    }
}

/// What the consumer of a benchmark's reports saw.
struct BenchSeen {
    seg_hist: Histogram<u64>,
    last_ops: u64,
    engine: &'static str,
}

/// The consumer side of [`bench_worker`]: takes reports until the final one, doing what the
/// scheduler does with each, and sets `stop` at `deadline`.
fn consume_bench_reports(
    rx: &Receiver<WorkerReport>,
    back_tx: &Sender<(Histogram<u64>, Histogram<u64>)>,
    stop: &AtomicBool,
    deadline: Instant,
) -> BenchSeen {
    let mut seen = BenchSeen {
        seg_hist: crate::stats::new_hdr(),
        last_ops: 0,
        engine: "none",
    };
    let mut stop_sent = false;
    loop {
        let now = Instant::now();
        if !stop_sent && now >= deadline {
            stop.store(true, Ordering::SeqCst);
            stop_sent = true;
        }
        let wait = deadline
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        match rx.recv_timeout(wait.min(Duration::from_millis(100))) {
            Ok(r) => {
                seen.engine = r.engine;
                // What the scheduler does each interval: merge, then quantiles.
                let _ = seen.seg_hist.add(&r.read_hist);
                let _ = seen.seg_hist.add(&r.write_hist);
                for (q, _) in crate::stats::QUANTILES {
                    std::hint::black_box(r.read_hist.value_at_quantile(q));
                    std::hint::black_box(r.write_hist.value_at_quantile(q));
                }
                seen.last_ops = r.read.ops + r.write.ops;
                let done = r.done;
                let _ = back_tx.send((r.read_hist, r.write_hist));
                if done {
                    return seen;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return seen,
        }
    }
}

/// Run one worker on `path` the way the daemon does (full stats, a report every second, the
/// consumer merging interval histograms and computing quantiles) for `seconds`, and measure
/// IOPS and the process's CPU time. `rw`: `randread`, `randwrite`, `read` or `write`
/// (sequential). The file is opened with O_DIRECT.
#[doc(hidden)]
pub fn bench_worker(
    path: &std::path::Path,
    bs: u32,
    qd: u32,
    rw: &str,
    seconds: f64,
    engine: EngineChoice,
) -> Result<BenchResult, BenchError> {
    use std::os::unix::fs::OpenOptionsExt;
    let (read_pct, access) = bench_pattern(rw)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|source| BenchError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    let len = f
        .metadata()
        .map_err(|source| BenchError::Size {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    let job = JobSpec {
        name: format!("bench-{rw}"),
        description: "bench_worker".into(),
        read_pct,
        bs: crate::model::spec::BlockSizeMix::single(bs),
        access,
        iodepth: qd,
        workers: 1,
        rate: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let plan = WorkerPlan {
        index: 0,
        job,
        fd: Arc::new(OwnedFd::from(f)),
        region_start: 0,
        region_len: len,
        engine,
        rate_iops: None,
        limit_bytes: None,
        seed: 42,
        report_interval: Duration::from_secs(1),
        stop: stop.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (back_tx, back_rx) = std::sync::mpsc::channel();
    let cpu0 = rusage_cpu_secs();
    let t0 = Instant::now();
    let h = spawn_with(
        plan,
        WorkerOptions {
            recycle: Some(back_rx),
            ..Default::default()
        },
        tx,
    )
    .map_err(BenchError::Spawn)?;
    let seen = consume_bench_reports(&rx, &back_tx, &stop, t0 + Duration::from_secs_f64(seconds));
    let secs = t0.elapsed().as_secs_f64();
    let exit = h.join().map_err(|_| BenchError::WorkerPanicked)??;
    if let ExitReason::Fatal(m) = exit.reason {
        return Err(BenchError::Fatal(m));
    }
    let cpu = rusage_cpu_secs() - cpu0;
    let ops = seen.last_ops;
    Ok(BenchResult {
        engine: seen.engine,
        ops,
        secs,
        iops: ops as f64 / secs,
        cpu_secs: cpu,
        iops_per_cpu_sec: if cpu > 0.0 { ops as f64 / cpu } else { 0.0 },
        p50_us: seen.seg_hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: seen.seg_hist.value_at_quantile(0.99) as f64 / 1e3,
    })
}
