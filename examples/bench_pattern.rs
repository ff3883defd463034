//! Micro-benchmark of the verification pattern, used by `scripts/bench-verify`: the cost of
//! stamping a 4 KiB unit before a write and checking it after a read, alone and through the
//! generation map as a worker uses it. Prints one JSON object.
//!
//! Usage: `bench_pattern [SECONDS]` (default 1 per measurement).

use std::hint::black_box;
use std::time::Instant;

use nvsoak::workload::pattern::{self, Expect, GenMap, VERIFY_UNIT};

const UNITS: usize = 256; // a 1 MiB working set, like a worker's registered buffers

fn measure(secs: f64, mut f: impl FnMut(usize)) -> f64 {
    // Returns ns per unit.
    let start = Instant::now();
    let mut n = 0usize;
    while start.elapsed().as_secs_f64() < secs {
        for _ in 0..1024 {
            f(n);
            n += 1;
        }
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let seed = pattern::new_seed();
    let mut bufs = vec![0u8; UNITS * VERIFY_UNIT];
    for (i, u) in bufs.chunks_exact_mut(VERIFY_UNIT).enumerate() {
        pattern::stamp(u, (i * VERIFY_UNIT) as u64, 1, seed);
    }
    let stamp_ns = measure(secs, |n| {
        let i = n % UNITS;
        let u = &mut bufs[i * VERIFY_UNIT..(i + 1) * VERIFY_UNIT];
        pattern::stamp(
            u,
            (i * VERIFY_UNIT) as u64,
            (n / UNITS % 60000 + 1) as u32,
            seed,
        );
    });
    for (i, u) in bufs.chunks_exact_mut(VERIFY_UNIT).enumerate() {
        pattern::stamp(u, (i * VERIFY_UNIT) as u64, 1, seed);
    }
    let check_ns = measure(secs, |n| {
        let i = n % UNITS;
        let u = &bufs[i * VERIFY_UNIT..(i + 1) * VERIFY_UNIT];
        let r = pattern::check(u, (i * VERIFY_UNIT) as u64, Expect::Generation(1), seed);
        assert!(black_box(r).is_ok());
    });
    // Through the map, as a worker does: stamp_write + complete_write, then verify_read, over a
    // 1 GiB region (256 Ki units) with random offsets.
    let map = GenMap::new(0, 1 << 30, seed);
    let region_units = map.units();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next_off = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % region_units as u64) * VERIFY_UNIT as u64
    };
    let mut offs = [0u64; UNITS];
    for o in offs.iter_mut() {
        *o = next_off();
    }
    let write_ns = measure(secs, |n| {
        let i = n % UNITS;
        let u = &mut bufs[i * VERIFY_UNIT..(i + 1) * VERIFY_UNIT];
        map.stamp_write(u, offs[i]);
        map.complete_write(offs[i], VERIFY_UNIT);
    });
    let mut bad = 0u32;
    let read_ns = measure(secs, |n| {
        let i = n % UNITS;
        let u = &bufs[i * VERIFY_UNIT..(i + 1) * VERIFY_UNIT];
        bad += map.verify_read(u, offs[i], |_| {});
    });
    assert_eq!(bad, 0, "the benchmark's own blocks must verify");
    let gbps = |ns: f64| VERIFY_UNIT as f64 / ns;
    println!(
        "{{\"stamp_ns_per_4k\":{stamp_ns:.1},\"check_ns_per_4k\":{check_ns:.1},\
\"map_write_ns_per_4k\":{write_ns:.1},\"map_read_ns_per_4k\":{read_ns:.1},\
\"stamp_gb_per_s\":{:.2},\"check_gb_per_s\":{:.2},\"map_memory_bytes_per_tib\":{}}}",
        gbps(stamp_ns),
        gbps(check_ns),
        GenMap::new(0, 1 << 30, 0).memory_bytes() as u64 * 1024
    );
}
