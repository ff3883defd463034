use super::*;
use crate::model::spec::{Access, BlockSizeMix, Skew};

fn job(access: Access, bs: &[(u32, u32)], workers: u32) -> JobSpec {
    JobSpec {
        name: "t".into(),
        description: String::new(),
        read_pct: 100,
        bs: BlockSizeMix {
            entries: bs.to_vec(),
        },
        access,
        iodepth: 4,
        workers,
        rate: None,
    }
}

#[test]
fn zeta_tail_approximation_matches_exact_sum() {
    // n beyond the exact prefix: compare with a direct sum.
    let n = 300_000u64;
    for theta in [0.5, 0.99, 1.2] {
        let exact: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
        let approx = zeta(n, theta);
        assert!(
            ((approx - exact) / exact).abs() < 1e-9,
            "theta {theta}: {approx} vs {exact}"
        );
    }
}

#[test]
fn zipf_follows_the_power_law() {
    // With theta = 0.99 over 1000 ranks, P(rank 0) = 1/zeta(1000) ≈ 0.134 and
    // P(rank 1) = 2^-0.99 / zeta(1000) ≈ 0.067.
    let z = Zipf::new(1000, 0.99);
    let mut rng = Rng::new(7);
    let n = 200_000;
    let mut counts = vec![0u32; 1000];
    for _ in 0..n {
        let r = z.next(&mut rng);
        assert!(r < 1000);
        counts[r as usize] += 1;
    }
    let zn = zeta(1000, 0.99);
    let p0 = counts[0] as f64 / n as f64;
    let p1 = counts[1] as f64 / n as f64;
    assert!((p0 - 1.0 / zn).abs() < 0.01, "p0 {p0}");
    assert!((p1 - 0.5f64.powf(0.99) / zn).abs() < 0.01, "p1 {p1}");
    // Top 10% of ranks take far more than 10% of draws.
    let top: u32 = counts[..100].iter().sum();
    assert!(top as f64 / n as f64 > 0.6, "top10 {top}");
    // Monotone on average: the first half is hotter than the second.
    let first: u32 = counts[..500].iter().sum();
    assert!(first > 2 * counts[500..].iter().sum::<u32>());
}

#[test]
fn zipf_small_n_and_theta_one() {
    let mut rng = Rng::new(1);
    for n in [1u64, 2, 3] {
        let z = Zipf::new(n, 1.0);
        for _ in 0..1000 {
            assert!(z.next(&mut rng) < n);
        }
    }
}

#[test]
fn bs_mix_selection_honours_weights() {
    let p = BsPicker::new(&[(4096, 60), (8192, 30), (65536, 10)]);
    let mut rng = Rng::new(3);
    let mut c = [0u32; 3];
    let n = 100_000;
    for _ in 0..n {
        c[p.pick(&mut rng)] += 1;
    }
    for (i, w) in [0.6, 0.3, 0.1].iter().enumerate() {
        let got = c[i] as f64 / n as f64;
        assert!((got - w).abs() < 0.01, "entry {i}: {got}");
    }
    assert_eq!(p.size(2), 65536);
    // A single size never touches the generator.
    let one = BsPicker::new(&[(4096, 1)]);
    let before = rng.clone().next_u64();
    assert_eq!(one.pick(&mut rng), 0);
    assert_eq!(rng.next_u64(), before);
}

#[test]
fn stripes_cover_the_region_exactly() {
    // 1 MiB + 3 blocks over 3 workers, region starting unaligned.
    let align = 4096;
    let (rs, rl) = (1000u64, (1 << 20) + 3 * 4096);
    let (s0, total) = aligned_region(rs, rl, align);
    assert_eq!(s0, 4096);
    let mut next = s0;
    let mut sum = 0;
    for i in 0..3 {
        let (s, l) = stripe_bounds(rs, rl, 3, i, align);
        assert_eq!(s, next, "stripe {i} starts where the previous ended");
        assert_eq!(s % align, 0);
        assert_eq!(l % align, 0);
        next = s + l;
        sum += l;
    }
    assert_eq!(sum, total);
    assert!(next <= rs + rl);
    // Lengths differ by at most one block.
    let lens: Vec<u64> = (0..3)
        .map(|i| stripe_bounds(rs, rl, 3, i, align).1)
        .collect();
    assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= align);
}

#[test]
fn alignment_rules() {
    let r = Access::Random {
        skew: Skew::Uniform,
    };
    assert_eq!(
        job_align(&job(r.clone(), &[(8192, 1), (12288, 1)], 1)),
        8192
    );
    assert_eq!(
        job_align(&job(Access::Sequential, &[(8192, 1), (12288, 1)], 1)),
        4096
    );
    assert_eq!(job_align(&job(r, &[(512, 1)], 1)), 512);
}

#[test]
fn sequential_walks_the_stripe_and_wraps_trimming_at_the_end() {
    // Stripe of 10 KiB (2.5 x 4 KiB): 4k, 4k, 2k, then back to the start.
    let j = job(Access::Sequential, &[(4096, 1), (2048, 1)], 1);
    let p = BsPicker::new(&j.bs.entries);
    let mut g = OffsetGen::new(&j, p.sizes(), 0, 10 * 1024, 0).unwrap();
    let mut rng = Rng::new(0);
    let got: Vec<(u64, u32)> = (0..4).map(|_| g.next(&mut rng, 0, 4096, true)).collect();
    assert_eq!(got, vec![(0, 4096), (4096, 4096), (8192, 2048), (0, 4096)]);
}

#[test]
fn sequential_start_position_continues_the_walk() {
    // Two workers over 20 KiB at offset 8 KiB: stripe 1 is [18k, 28k).
    let j = job(Access::Sequential, &[(2048, 1)], 2);
    let p = BsPicker::new(&j.bs.entries);
    let fresh = OffsetGen::new(&j, p.sizes(), 8 << 10, 20 << 10, 1).unwrap();
    let mut rng = Rng::new(0);
    let mut g = fresh.clone();
    g.start_at(6 << 10);
    let got: Vec<u64> = (0..4).map(|_| g.next(&mut rng, 0, 2048, true).0).collect();
    assert_eq!(got, vec![24 << 10, 26 << 10, 18 << 10, 20 << 10]);
    // Past the stripe's end it wraps (a later pass); unaligned positions round down.
    let mut g = fresh.clone();
    g.start_at((10 << 10) * 3 + 4096 + 100);
    assert_eq!(g.next(&mut rng, 0, 2048, true).0, (18 << 10) + 4096);
    // Random access ignores it.
    let r = job(
        Access::Random {
            skew: Skew::Uniform,
        },
        &[(2048, 1)],
        1,
    );
    let mut g = OffsetGen::new(&r, p.sizes(), 0, 1 << 20, 0).unwrap();
    g.start_at(4096);
    assert!(g.next(&mut rng, 0, 2048, true).0 < 1 << 20);
}

#[test]
fn random_offsets_stay_inside_for_every_size() {
    let j = job(
        Access::Random {
            skew: Skew::Zipf { theta: 1.1 },
        },
        &[(4096, 1), (65536, 1)],
        1,
    );
    let p = BsPicker::new(&j.bs.entries);
    let (rs, rl) = (8192u64, 1 << 20);
    let mut g = OffsetGen::new(&j, p.sizes(), rs, rl, 0).unwrap();
    let mut rng = Rng::new(9);
    for _ in 0..50_000 {
        let i = p.pick(&mut rng);
        let (off, len) = g.next(&mut rng, i, p.size(i), true);
        assert_eq!(off % 4096, 0);
        assert!(off >= rs && off + len as u64 <= rs + rl, "{off}+{len}");
    }
    assert_eq!(
        OffsetGen::new(&j, p.sizes(), 0, 32768, 0).err(),
        Some(65536)
    );
}

#[test]
fn hot_band_fraction() {
    let j = job(
        Access::Random {
            skew: Skew::HotBand {
                fraction: 0.1,
                access: 0.9,
            },
        },
        &[(4096, 1)],
        1,
    );
    let p = BsPicker::new(&j.bs.entries);
    let mut g = OffsetGen::new(&j, p.sizes(), 0, 4096 * 1000, 0).unwrap();
    let mut rng = Rng::new(5);
    let n = 100_000;
    let hot = (0..n)
        .filter(|_| g.next(&mut rng, 0, 4096, true).0 < 4096 * 100)
        .count();
    let f = hot as f64 / n as f64;
    assert!((f - 0.9).abs() < 0.01, "{f}");
}

#[test]
fn pacer_keeps_the_schedule_and_caps_bursts() {
    // 1000 IOPS: one every 1 ms.
    let mut p = Pacer::new(1000.0, 8, 0);
    assert_eq!(p.due(0), 1);
    p.take();
    assert_eq!(p.due(500_000), 0);
    assert_eq!(p.wait_ns(500_000), 500_000);
    // 3.5 ms later: 3 due (at 1, 2, 3 ms).
    assert_eq!(p.due(3_500_000), 3);
    // A long stall allows at most max_burst.
    assert_eq!(p.due(1_000_000_000), 8);
    for _ in 0..8 {
        p.take();
    }
    assert_eq!(p.due(1_000_000_000), 0);
}

#[test]
fn pacer_catches_up_a_late_wake_up_beyond_the_queue_depth() {
    // 100k IOPS at depth 4: waking 1 ms late owes 100 I/Os, not 4 (the old cap, which lost
    // the rest of every oversleep and flattened paced psync near 24k IOPS).
    let mut p = Pacer::new(100_000.0, 4, 0);
    assert_eq!(p.due(999_999), 100);
    // Beyond the catch-up window the debt is capped.
    assert_eq!(p.due(1_000_000_000), 500);
}

#[test]
fn rng_below_is_in_range_and_roughly_uniform() {
    let mut r = Rng::new(42);
    let mut c = [0u32; 10];
    for _ in 0..100_000 {
        c[r.below(10) as usize] += 1;
    }
    assert!(c.iter().all(|&x| (9_000..11_000).contains(&x)), "{c:?}");
    for _ in 0..1000 {
        let f = r.f64();
        assert!((0.0..1.0).contains(&f));
    }
}
