//! Hidden benchmark entry used by `scripts/bench-vs-fio`: runs one nvsoak worker exactly as the
//! daemon would (full latency recording, interval reports merged into histograms) and prints
//! `{"iops":..,"cpu_secs":..}` as JSON.
//!
//! Usage: `bench_worker PATH BS QD RW SECONDS [ENGINE]`, RW one of randread, randwrite, read,
//! write; ENGINE one of io_uring (default), psync, null.

use nvsoak::model::spec::EngineChoice;

fn main() {
    if let Err(e) = run() {
        eprintln!("bench_worker: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 5 {
        return Err("usage: bench_worker PATH BS QD RW SECONDS [ENGINE]".into());
    }
    let bs = nvsoak::model::units::parse_size(&a[1]).map_err(|e| format!("BS {:?}: {e}", a[1]))?;
    let qd: u32 = a[2].parse().map_err(|e| format!("QD {:?}: {e}", a[2]))?;
    let secs: f64 = a[4]
        .parse()
        .map_err(|e| format!("SECONDS {:?}: {e}", a[4]))?;
    let engine = match a.get(5).map(String::as_str).unwrap_or("io_uring") {
        "io_uring" => EngineChoice::IoUring,
        "psync" => EngineChoice::Psync,
        "null" => EngineChoice::Null,
        "auto" => EngineChoice::Auto,
        other => {
            return Err(format!(
                "ENGINE {other:?}: use io_uring, psync, null or auto"
            ));
        }
    };
    let bs = u32::try_from(bs).map_err(|_| format!("BS {:?} is too large", a[1]))?;
    let r = nvsoak::workload::worker::bench_worker(
        std::path::Path::new(&a[0]),
        bs,
        qd,
        &a[3],
        secs,
        engine,
    )
    .map_err(|e| e.to_string())?;
    println!(
        "{}",
        serde_json::to_string(&r).map_err(|e| format!("encoding the result: {e}"))?
    );
    Ok(())
}
