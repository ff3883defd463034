//! End-to-end cost of `verify = "inline"`, used by `scripts/bench-verify`: one nvsoak worker
//! exactly as the daemon runs it (4K random 50/50 read/write, io_uring, O_DIRECT) on the same
//! file, alternating rounds without a hook and with the [`VerifyHook`] (stamp every write, check
//! every read), and prints one JSON object with the median IOPS of each and their ratio.
//!
//! Usage: `bench_verify PATH SECONDS ROUNDS QD [ENGINE]` (PATH preallocated, e.g. 1 GiB in
//! /dev/shm).

use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nvsoak::model::spec::{Access, BlockSizeMix, EngineChoice, JobSpec, Skew};
use nvsoak::workload::pattern::{self, GenMap, VerifyCounters, VerifyHook};
use nvsoak::workload::worker::{self, BlockHook, ExitReason, WorkerOptions, WorkerPlan};

/// CPU seconds (user + system) of the whole process, io_uring's io-wq workers included.
fn cpu_secs() -> f64 {
    let mut ru: libc::rusage = unsafe {
        // SAFETY: rusage is plain old data; all-zero is a valid value.
        std::mem::zeroed()
    };
    // SAFETY: getrusage only writes the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// (IOPS, I/Os per CPU-second) of one round.
fn one_round(
    path: &str,
    secs: f64,
    qd: u32,
    engine: EngineChoice,
    hook: Option<Box<dyn BlockHook>>,
) -> Result<(f64, f64), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| format!("{path}: opening with O_DIRECT failed: {e}"))?;
    let len = f.metadata().map_err(|e| format!("{path}: {e}"))?.len();
    let stop = Arc::new(AtomicBool::new(false));
    let plan = WorkerPlan {
        index: 0,
        job: JobSpec {
            name: "bench-verify".into(),
            description: "4K random 50/50".into(),
            read_pct: 50,
            bs: BlockSizeMix::single(4096),
            access: Access::Random {
                skew: Skew::Uniform,
            },
            iodepth: qd,
            workers: 1,
            rate: None,
        },
        fd: Arc::new(OwnedFd::from(f)),
        region_start: 0,
        region_len: len,
        engine,
        rate_iops: None,
        limit_bytes: None,
        seed: 42,
        report_interval: Duration::from_millis(500),
        stop: stop.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    let cpu0 = cpu_secs();
    let h = worker::spawn_with(
        plan,
        WorkerOptions {
            hook,
            ..Default::default()
        },
        tx,
    )
    .map_err(|e| format!("spawning the worker failed: {e}"))?;
    let deadline = t0 + Duration::from_secs_f64(secs);
    let mut ops = 0;
    loop {
        if Instant::now() >= deadline {
            stop.store(true, Ordering::SeqCst);
        }
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => {
                ops = r.read.ops + r.write.ops;
                if r.done {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = (cpu_secs() - cpu0).max(1e-9);
    let exit = h
        .join()
        .map_err(|_| "worker thread panicked".to_string())?
        .map_err(|e| e.to_string())?;
    if let ExitReason::Fatal(m) = exit.reason {
        return Err(m);
    }
    Ok((ops as f64 / elapsed, ops as f64 / cpu))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run() -> Result<(), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        return Err("usage: bench_verify PATH SECONDS ROUNDS QD [ENGINE]".into());
    }
    let secs: f64 = a[1].parse().map_err(|e| format!("SECONDS: {e}"))?;
    let rounds: usize = a[2].parse().map_err(|e| format!("ROUNDS: {e}"))?;
    let qd: u32 = a[3].parse().map_err(|e| format!("QD: {e}"))?;
    let engine = match a.get(4).map(String::as_str).unwrap_or("io_uring") {
        "io_uring" => EngineChoice::IoUring,
        "psync" => EngineChoice::Psync,
        "auto" => EngineChoice::Auto,
        other => return Err(format!("ENGINE {other:?}: use io_uring, psync or auto")),
    };
    let len = std::fs::metadata(&a[0])
        .map_err(|e| format!("{}: {e}", a[0]))?
        .len();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
    let counters = Arc::new(VerifyCounters::default());
    let mut map_bytes = 0;
    for _ in 0..rounds.max(1) {
        let (iops, per_cpu) = one_round(&a[0], secs, qd, engine, None)?;
        off.push(iops);
        off_cpu.push(per_cpu);
        // A fresh seed and map each round: blocks of earlier rounds are foreign, never false
        // mismatches.
        let map = Arc::new(GenMap::new(0, len, pattern::new_seed()));
        map_bytes = map.memory_bytes();
        let hook = VerifyHook::new("bench", map, counters.clone(), 512);
        let (iops, per_cpu) = one_round(&a[0], secs, qd, engine, Some(Box::new(hook)))?;
        on.push(iops);
        on_cpu.push(per_cpu);
    }
    let (m_off, m_on) = (median(&mut off), median(&mut on));
    let (c_off, c_on) = (median(&mut off_cpu), median(&mut on_cpu));
    println!(
        "{{\"iops_off\":{m_off:.0},\"iops_inline\":{m_on:.0},\"ratio\":{:.3},\
\"iops_per_cpu_sec_off\":{c_off:.0},\"iops_per_cpu_sec_inline\":{c_on:.0},\"cpu_ratio\":{:.3},\
\"rounds\":{},\"verify_errors\":{},\"map_bytes\":{map_bytes}}}",
        m_on / m_off,
        c_on / c_off,
        off.len(),
        counters.total()
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_verify: {e}");
        std::process::exit(2);
    }
}
