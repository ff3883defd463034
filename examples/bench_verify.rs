//! End-to-end cost of `verify = "inline"`, used by `scripts/bench-verify`: one nvsoak worker
//! exactly as the daemon runs it (io_uring, O_DIRECT; 4K random 50/50 read/write, 64K
//! sequential writes, or SQL 80-20's mixed sizes and hot band) on the same file, alternating rounds without a hook, with the
//! [`VerifyHook`] over the stored generation map, and with the [`WalkHook`] over the computed
//! state (the permuted walk for random, the stripe walk for sequential), and prints one JSON
//! object with the median IOPS of each, their ratios to verification off, and each state's size.
//!
//! Usage: `bench_verify PATH SECONDS ROUNDS QD [ENGINE] [4k-rand|64k-seq|db]` (PATH preallocated,
//! e.g. 1 GiB in /dev/shm).

use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nvsoak::model::spec::{Access, BlockSizeMix, EngineChoice, JobSpec, Skew};
use nvsoak::model::walk::{LegPlan, WalkMap};
use nvsoak::workload::pattern::{self, GenMap, VerifyCounters, VerifyHook};
use nvsoak::workload::walk_hook::WalkHook;
use nvsoak::workload::worker::{
    self, Band, BlockHook, ExitReason, WalkPlace, WorkerOptions, WorkerPlan,
};

/// The measured job: 4K random 50/50, or 64K sequential writes.
#[derive(Clone, Copy, PartialEq)]
enum Profile {
    Rand4k,
    Seq64k,
    /// The built-in sql-80-20's transfer mix and hot band, one worker.
    Db,
}

impl Profile {
    fn job(self, qd: u32) -> JobSpec {
        let (read_pct, bs, access, description) = match self {
            Profile::Rand4k => (
                50,
                4096,
                Access::Random {
                    skew: Skew::Uniform,
                },
                "4K random 50/50",
            ),
            Profile::Seq64k => (0, 65536, Access::Sequential, "64K sequential write"),
            Profile::Db => (
                80,
                0,
                Access::Random {
                    skew: Skew::HotBand {
                        fraction: 0.2,
                        access: 0.8,
                    },
                },
                "SQL 80-20: 4K/8K/64K, 80% of I/Os to 20% of the region",
            ),
        };
        let bs = match bs {
            0 => BlockSizeMix {
                entries: vec![(4096, 10), (8192, 80), (65536, 10)],
            },
            b => BlockSizeMix::single(b),
        };
        JobSpec {
            name: "bench-verify".into(),
            description: description.into(),
            read_pct,
            bs,
            access,
            iodepth: qd,
            workers: 1,
            rate: None,
        }
    }
}

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
    (qd, profile): (u32, Profile),
    engine: EngineChoice,
    (hook, walk): (Option<Box<dyn BlockHook>>, Option<WalkPlace>),
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
        job: profile.job(qd),
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
            walk,
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

/// The computed side of a round: its hook, the worker's place (random only) and the state's
/// size in bytes.
type WalkSide = (Box<dyn BlockHook>, Option<WalkPlace>, usize);

/// A fresh computed state with one leg for the profile: the hook and the worker's place.
fn walk_side(
    len: u64,
    profile: Profile,
    counters: &Arc<VerifyCounters>,
) -> Result<WalkSide, String> {
    let map = Arc::new(WalkMap::new(len, pattern::new_seed()));
    let bs = profile.job(1).bs.max() as u64;
    let blocks = len / bs;
    // The hot band's slice first, as the scheduler plans it for one worker.
    let hot = match profile {
        Profile::Db => Some(blocks.div_ceil(5)),
        _ => None,
    };
    let slices = match hot {
        Some(h) => vec![(0, h, 0), (h, blocks - h, 0)],
        None => vec![(0, blocks, 0)],
    };
    let leg = map
        .begin_leg(&LegPlan {
            block_units: (bs / 4096) as u32,
            permuted: profile != Profile::Seq64k,
            slices,
        })
        .map_err(|e| e.to_string())?;
    let band = |i: usize| Band {
        start: leg.slice(i).start,
        len: leg.slice(i).len,
        from: 0,
    };
    let place = leg.perm.map(|perm| WalkPlace {
        perm,
        band: band(0),
        cold: hot.map(|_| band(1)),
        hot_share: if hot.is_some() { 0.8 } else { 1.0 },
        block: bs,
        in_order: false,
    });
    let bytes = map.memory_bytes();
    let hook = WalkHook::new(
        "bench",
        map,
        Some((0, hot.map(|_| 1))),
        true,
        counters.clone(),
        512,
    );
    Ok((Box::new(hook), place, bytes))
}

fn run() -> Result<(), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        return Err(
            "usage: bench_verify PATH SECONDS ROUNDS QD [ENGINE] [4k-rand|64k-seq|db]".into(),
        );
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
    let profile = match a.get(5).map(String::as_str).unwrap_or("4k-rand") {
        "4k-rand" => Profile::Rand4k,
        "64k-seq" => Profile::Seq64k,
        "db" => Profile::Db,
        other => return Err(format!("PROFILE {other:?}: use 4k-rand, 64k-seq or db")),
    };
    let len = std::fs::metadata(&a[0])
        .map_err(|e| format!("{}: {e}", a[0]))?
        .len();
    let mut iops: [Vec<f64>; 3] = Default::default();
    let mut per_cpu: [Vec<f64>; 3] = Default::default();
    let counters = Arc::new(VerifyCounters::default());
    let (mut map_bytes, mut walk_bytes) = (0, 0);
    let job = (qd, profile);
    for _ in 0..rounds.max(1) {
        let (i, c) = one_round(&a[0], secs, job, engine, (None, None))?;
        iops[0].push(i);
        per_cpu[0].push(c);
        // A fresh seed and state each round: blocks of earlier rounds are foreign, never
        // false mismatches.
        let map = Arc::new(GenMap::new(0, len, pattern::new_seed()));
        map_bytes = map.memory_bytes();
        let hook = VerifyHook::new("bench", map, counters.clone(), 512);
        let (i, c) = one_round(&a[0], secs, job, engine, (Some(Box::new(hook)), None))?;
        iops[1].push(i);
        per_cpu[1].push(c);
        let (hook, place, bytes) = walk_side(len, profile, &counters)?;
        walk_bytes = bytes;
        let (i, c) = one_round(&a[0], secs, job, engine, (Some(hook), place))?;
        iops[2].push(i);
        per_cpu[2].push(c);
    }
    let m: Vec<f64> = iops.iter_mut().map(|v| median(v)).collect();
    let c: Vec<f64> = per_cpu.iter_mut().map(|v| median(v)).collect();
    println!(
        "{{\"iops_off\":{:.0},\"iops_inline\":{:.0},\"iops_walk\":{:.0},\"ratio\":{:.3},\"walk_ratio\":{:.3},\
\"iops_per_cpu_sec_off\":{:.0},\"iops_per_cpu_sec_inline\":{:.0},\"iops_per_cpu_sec_walk\":{:.0},\
\"cpu_ratio\":{:.3},\"walk_cpu_ratio\":{:.3},\"rounds\":{},\"verify_errors\":{},\"map_bytes\":{map_bytes},\
\"walk_bytes\":{walk_bytes}}}",
        m[0],
        m[1],
        m[2],
        m[1] / m[0],
        m[2] / m[0],
        c[0],
        c[1],
        c[2],
        c[1] / c[0],
        c[2] / c[0],
        iops[0].len(),
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
