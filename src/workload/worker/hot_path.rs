use super::*;
use crate::model::spec::{Access, BlockSizeMix, Skew};
use std::io::Write;
use std::sync::atomic::Ordering;

/// Allocations made by the worker loop (run on this thread) for `ios` I/Os.
fn allocs_for(engine: EngineChoice, ios: u64) -> u64 {
    let mut f = tempfile::Builder::new()
        .prefix("nvsoak-alloc-")
        .tempfile_in("/dev/shm")
        .or_else(|_| tempfile::NamedTempFile::new())
        .expect("temp file");
    f.write_all(&vec![1u8; 1 << 20]).unwrap();
    let file = f.reopen().unwrap();
    let plan = WorkerPlan {
        index: 0,
        job: JobSpec {
            name: "alloc".into(),
            description: String::new(),
            read_pct: 70,
            bs: BlockSizeMix {
                entries: vec![(4096, 3), (8192, 1)],
            },
            access: Access::Random {
                skew: Skew::Zipf { theta: 0.9 },
            },
            iodepth: 16,
            workers: 1,
            rate: None,
        },
        fd: Arc::new(OwnedFd::from(file)),
        region_start: 0,
        region_len: 1 << 20,
        engine,
        rate_iops: None,
        limit_bytes: Some(ios * 4096),
        seed: 1,
        // No interval report during the run: only the final one.
        report_interval: Duration::from_secs(3600),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let before = alloc_count::COUNT.with(|c| c.get());
    let exit = run(plan, WorkerOptions::default(), tx).expect("worker");
    let after = alloc_count::COUNT.with(|c| c.get());
    assert_eq!(exit.reason, ExitReason::LimitReached);
    let last = rx.try_iter().last().expect("final report");
    assert!(last.read.ops + last.write.ops > ios / 2);
    after - before
}

#[test]
fn the_loop_does_not_allocate_per_io() {
    for engine in [
        EngineChoice::IoUring,
        EngineChoice::Psync,
        EngineChoice::Null,
    ] {
        let small = allocs_for(engine, 1_000);
        let large = allocs_for(engine, 50_000);
        assert_eq!(
            small,
            large,
            "{}: allocations grow with the number of I/Os",
            engine.as_str()
        );
    }
}
/// Allocations of the worker loop (run on this thread) at a 1 ms stats interval, with a
/// consumer that hands every report's histograms back, until `reports` reports arrived.
fn allocs_at_1ms(engine: EngineChoice, reports: usize) -> (u64, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let plan = WorkerPlan {
        index: 0,
        job: JobSpec {
            name: "alloc-1ms".into(),
            description: String::new(),
            read_pct: 70,
            bs: BlockSizeMix {
                entries: vec![(4096, 1)],
            },
            access: Access::Random {
                skew: Skew::Uniform,
            },
            iodepth: 8,
            workers: 1,
            rate: None,
        },
        fd: Arc::new(OwnedFd::from(
            std::fs::File::open("/dev/null").expect("opening /dev/null"),
        )),
        region_start: 0,
        region_len: 1 << 20,
        engine,
        rate_iops: None,
        limit_bytes: None,
        seed: 1,
        report_interval: Duration::from_millis(1),
        stop: stop.clone(),
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<crate::stats::WorkerReport>(report_capacity(1));
    let (back_tx, back_rx) = std::sync::mpsc::channel();
    let consumer = std::thread::spawn(move || {
        let mut n = 0usize;
        while let Ok(r) = rx.recv() {
            n += 1;
            if n == reports {
                stop.store(true, Ordering::Relaxed);
            }
            let _ = back_tx.send((r.read_hist, r.write_hist));
        }
        n
    });
    let opts = WorkerOptions {
        recycle: Some(back_rx),
        ..WorkerOptions::default()
    };
    let before = alloc_count::COUNT.with(|c| c.get());
    let exit = run(plan, opts, tx).expect("worker");
    let after = alloc_count::COUNT.with(|c| c.get());
    assert_eq!(exit.reason, ExitReason::Stopped);
    let got = consumer.join().expect("consumer");
    assert!(got >= reports, "{got} reports");
    (after - before, got)
}

#[test]
fn reports_at_a_1ms_interval_do_not_allocate_in_the_steady_state() {
    let (short, n_short) = allocs_at_1ms(EngineChoice::Null, 50);
    let (long, n_long) = allocs_at_1ms(EngineChoice::Null, 1000);
    eprintln!("1 ms interval: {short} allocations for {n_short} reports, {long} for {n_long}");
    // The only allocations after setup are histogram pairs while the pool fills (at most
    // MAX_OUTSTANDING + 1 pairs, however many reports): a timing-dependent few, never one
    // per report or per channel block (an unbounded channel costs ~30 here).
    let pool = 4 * (MAX_OUTSTANDING as u64 + 1);
    assert!(
        long <= short + pool,
        "{} more allocations for {} more reports at a 1 ms interval",
        long.saturating_sub(short),
        n_long - n_short
    );
}
