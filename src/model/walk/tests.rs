//! The computed state against a brute-force record of every unit: random legs (sequential and
//! permuted, several block sizes and workers, resumed walks, several passes), failed writes,
//! and restarts with writes after the last record.

use super::*;

/// A small deterministic generator for the tests.
struct R(u64);
impl R {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// What a read of a unit of ours holding `found` (None: not our block) passes under `e`.
fn accepts(e: Expect, found: Option<u32>) -> bool {
    match e {
        Expect::NeverWritten => found.is_none(),
        Expect::Exact(g) => found == Some(g),
        Expect::AtLeast(g) => found.is_some_and(|f| f >= g),
        Expect::Recovered(None) => true,
        Expect::Generation(_) | Expect::Recovered(Some(_)) => unreachable!("stored-map only"),
    }
}

/// Worker stripes over `blocks`, as `stripe_bounds` splits them.
fn stripes(blocks: u64, workers: u64) -> Vec<(u64, u64)> {
    (0..workers)
        .map(|i| {
            (
                blocks * i / workers,
                blocks * (i + 1) / workers - blocks * i / workers,
            )
        })
        .filter(|s| s.1 > 0)
        .collect()
}

/// Run one random leg on `map`, writing through `disk` (the truth). Some writes fail, and
/// those land or not at random. Returns the leg.
fn random_leg(map: &WalkMap, disk: &mut [Option<u32>], r: &mut R, fail_some: bool) -> Arc<Leg> {
    let block_units = [1u32, 2, 4, 16][r.below(4) as usize];
    let blocks = map.units() / block_units as u64;
    let workers = 1 + r.below(4);
    let slices: Vec<(u64, u64, u64)> = stripes(blocks, workers)
        .into_iter()
        .map(|(s, l)| (s, l, if r.below(3) == 0 { r.below(l) } else { 0 }))
        .collect();
    let plan = LegPlan {
        block_units,
        permuted: r.below(2) == 0,
        slices,
    };
    let leg = map.begin_leg(&plan).expect("plan fits");
    let legs = map.legs();
    let li = legs.len() - 1;
    let targets: Vec<u64> = leg.slices.iter().map(|s| r.below(s.len * 3 + 2)).collect();
    let mut done = vec![0u64; targets.len()];
    // Interleave the workers' writes.
    while done.iter().zip(&targets).any(|(d, t)| d < t) {
        let i = r.below(targets.len() as u64) as usize;
        if done[i] >= targets[i] {
            continue;
        }
        let k = done[i];
        let (unit, g) = leg.nth_write(i, k);
        map.issue_write(&leg, i, k);
        let lands = if fail_some && r.below(50) == 0 {
            map.fail_write(&legs, (li, i, k), unit, block_units as u64);
            r.below(2) == 0
        } else {
            map.complete_write(unit, block_units as u64);
            true
        };
        if lands {
            for u in unit..unit + block_units as u64 {
                disk[u as usize] = Some(g);
            }
        }
        done[i] += 1;
    }
    leg
}

fn check_all(map: &WalkMap, disk: &[Option<u32>], what: &str) {
    let legs = map.legs();
    for (u, &found) in disk.iter().enumerate() {
        let e = map.expect(&legs, u as u64);
        assert!(
            accepts(e, found),
            "{what}: unit {u} holds {found:?}, expected {e:?}"
        );
        // A lost write is always seen: the generation before the expected one is refused.
        if let Expect::Exact(g) | Expect::AtLeast(g) = e
            && g > 1
        {
            assert!(
                !accepts(e, Some(g - 1)),
                "{what}: unit {u} would hide a lost write"
            );
        }
        if e.is_recovered() {
            map.learn(u as u64, e, found);
        }
    }
}

#[test]
fn expectations_match_every_unit_over_random_legs() {
    for seed in 1..=40u64 {
        let mut r = R(seed);
        // Not a multiple of any block size, nor a power of two.
        let units = 300 + r.below(700);
        let map = WalkMap::new(units * VERIFY_UNIT as u64, seed);
        let mut disk = vec![None; units as usize];
        for leg in 0..6 {
            random_leg(&map, &mut disk, &mut r, false);
            let legs = map.legs();
            for (u, &found) in disk.iter().enumerate() {
                let e = map.expect(&legs, u as u64);
                let want = found.map_or(Expect::NeverWritten, Expect::Exact);
                assert_eq!(e, want, "seed {seed}, leg {leg}, unit {u}");
            }
        }
        assert!(map.legs().len() <= 6);
    }
}

#[test]
fn failed_writes_accept_old_or_new_once_and_then_only_what_was_found() {
    let mut seen_fail = 0;
    for seed in 100..140u64 {
        let mut r = R(seed);
        let units = 257 + r.below(500);
        let map = WalkMap::new(units * VERIFY_UNIT as u64, seed);
        let mut disk = vec![None; units as usize];
        for _ in 0..5 {
            random_leg(&map, &mut disk, &mut r, true);
            seen_fail += map.exceptions();
            check_all(&map, &disk, &format!("seed {seed}"));
        }
        // After the reads learnt every failed unit, each expects exactly what it holds.
        let legs = map.legs();
        for (u, &found) in disk.iter().enumerate() {
            let e = map.expect(&legs, u as u64);
            if let Some(f) = found {
                assert_eq!(e, Expect::Exact(f), "seed {seed} unit {u}");
            }
        }
    }
    assert!(seen_fail > 0, "no write failed in any seed");
}

#[test]
fn a_restart_accepts_writes_after_the_record_and_still_finds_lost_ones() {
    for seed in 200..240u64 {
        let mut r = R(seed);
        let units = 400 + r.below(400);
        let map = WalkMap::new(units * VERIFY_UNIT as u64, seed);
        let mut disk = vec![None; units as usize];
        for _ in 0..1 + r.below(3) {
            random_leg(&map, &mut disk, &mut r, false);
        }
        let rec = map.record();
        let recorded = disk.clone();
        // Writes after the record, then the crash: the record knows nothing of them.
        for _ in 0..r.below(3) {
            random_leg(&map, &mut disk, &mut r, false);
        }
        let json = serde_json::to_string(&rec).expect("serialises");
        let back: WalkRecord = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, rec);
        let map = WalkMap::restore(&back).expect("restores");
        check_all(&map, &disk, &format!("seed {seed} after restart"));
        // A unit that reverted to before its recorded generation is found.
        let legs = map.legs();
        for (u, &was) in recorded.iter().enumerate() {
            if let Some(g) = was
                && g > 1
            {
                let e = map.expect(&legs, u as u64);
                if disk[u] == was {
                    assert!(
                        !accepts(e, Some(g - 1)),
                        "seed {seed}: lost write at {u} hidden"
                    );
                }
            }
        }
        // New legs after the restart start past everything written before it.
        let before = disk.iter().flatten().copied().max().unwrap_or(0);
        let next = random_leg(&map, &mut disk, &mut r, false);
        assert!(next.gen_base >= rec.next_gen + RECOVERY_JUMP);
        assert!(
            next.gen_base > before,
            "a new leg reuses generation {before}"
        );
        check_all(
            &map,
            &disk,
            &format!("seed {seed} after restart and a new leg"),
        );
    }
}

#[test]
fn a_permuted_pass_writes_every_block_exactly_once() {
    for (units, workers) in [(1000u64, 1u64), (1001, 3), (4097, 4), (65_537, 7)] {
        let map = WalkMap::new(units * VERIFY_UNIT as u64, units);
        let slices: Vec<_> = stripes(units, workers)
            .into_iter()
            .map(|(s, l)| (s, l, 0))
            .collect();
        let leg = map
            .begin_leg(&LegPlan {
                block_units: 1,
                permuted: true,
                slices,
            })
            .expect("fits");
        let mut hits = vec![0u32; units as usize];
        let mut gens = std::collections::BTreeSet::new();
        for (i, s) in leg.slices.iter().enumerate() {
            for k in 0..s.len {
                let (u, g) = leg.nth_write(i, k);
                hits[u as usize] += 1;
                gens.insert(g);
            }
        }
        assert!(
            hits.iter().all(|&h| h == 1),
            "{units} units, {workers} workers"
        );
        assert_eq!(gens.len(), 1, "one pass, one generation");
        // Scattered: the first 100 writes of worker 0 are not in order.
        let first: Vec<u64> = (0..100.min(leg.slices[0].len))
            .map(|k| leg.nth_write(0, k).0)
            .collect();
        assert!(first.windows(2).filter(|w| w[1] == w[0] + 1).count() < 10);
    }
}

#[test]
fn a_leg_that_wrote_everything_drops_the_older_ones() {
    let units = 512u64;
    let map = WalkMap::new(units * VERIFY_UNIT as u64, 5);
    let mut disk = vec![None; units as usize];
    let mut r = R(9);
    random_leg(&map, &mut disk, &mut r, false);
    random_leg(&map, &mut disk, &mut r, false);
    // A full sequential pass by two workers.
    let leg = map
        .begin_leg(&LegPlan {
            block_units: 4,
            permuted: false,
            slices: vec![(0, 64, 0), (64, 64, 10)],
        })
        .expect("fits");
    for i in 0..2 {
        for k in 0..64 {
            let (u, g) = leg.nth_write(i, k);
            map.issue_write(&leg, i, k);
            map.complete_write(u, 4);
            for x in u..u + 4 {
                disk[x as usize] = Some(g);
            }
        }
    }
    random_leg(&map, &mut disk, &mut r, false);
    assert_eq!(map.legs().len(), 2, "the full pass and the leg after it");
    check_all(&map, &disk, "after the drop");
}

#[test]
fn the_state_of_16_tb_is_bytes_and_a_bad_record_is_refused() {
    let units = 16_000_000_000_000u64 / VERIFY_UNIT as u64;
    let map = WalkMap::new(units * VERIFY_UNIT as u64, 77);
    for _ in 0..50 {
        let slices: Vec<_> = stripes(units, 16)
            .into_iter()
            .map(|(s, l)| (s, l, 0))
            .collect();
        let leg = map
            .begin_leg(&LegPlan {
                block_units: 1,
                permuted: true,
                slices,
            })
            .expect("fits");
        for i in 0..16 {
            let (u, _) = leg.nth_write(i, 999);
            map.issue_write(&leg, i, 999);
            map.complete_write(u, 1);
        }
    }
    assert!(
        map.memory_bytes() < 64 * 1024,
        "{} bytes",
        map.memory_bytes()
    );
    let rec = map.record();
    assert!(serde_json::to_vec(&rec).expect("json").len() < 64 * 1024);
    let mut bad = rec.clone();
    bad.legs[0].slices[0].1 = u64::MAX;
    assert!(WalkMap::restore(&bad).is_err());
    let mut bad = rec;
    bad.exceptions.push((units, "exact".into(), 3));
    assert!(WalkMap::restore(&bad).is_err());
}

#[test]
fn written_units_counts_each_position_once_even_after_a_slice_wraps() {
    let units = 256u64;
    let map = WalkMap::new(units * VERIFY_UNIT as u64, 3);
    // Two workers of 2-unit blocks: 64 blocks each. Worker 0 writes 10 blocks; worker 1
    // wraps its slice (70 writes over 64 positions), so it wrote all 64 positions once.
    let leg = map
        .begin_leg(&LegPlan {
            block_units: 2,
            permuted: true,
            slices: vec![(0, 64, 5), (64, 64, 0)],
        })
        .expect("fits");
    let mut seen = vec![false; units as usize];
    for (i, n) in [(0usize, 10u64), (1, 70)] {
        for k in 0..n {
            let (u, _) = leg.nth_write(i, k);
            map.issue_write(&leg, i, k);
            map.complete_write(u, 2);
            seen[u as usize] = true;
            seen[u as usize + 1] = true;
        }
    }
    let truth = seen.iter().filter(|&&s| s).count() as u64;
    assert_eq!(truth, 2 * (10 + 64));
    let legs = map.read_back_legs().expect("no leg covered the region");
    assert_eq!(WalkMap::written_units(&legs), truth);
    assert_eq!(
        leg.slices[1].written(),
        64,
        "a wrapped slice wrote each position once"
    );
}

#[test]
fn a_block_stopped_inside_counts_what_it_wrote_and_keeps_the_rest() {
    let units = 256u64;
    let map = WalkMap::new(units * VERIFY_UNIT as u64, 8);
    let mut disk = vec![None; units as usize];
    let mut r = R(4);
    // Two passes of whole 16-unit blocks, then a leg whose first block stops after 5 units.
    let plan = LegPlan {
        block_units: 16,
        permuted: true,
        slices: vec![(0, 16, 0)],
    };
    let leg = map.begin_leg(&plan).expect("fits");
    for k in 0..32 {
        let (u, g) = leg.nth_write(0, k);
        map.issue_write(&leg, 0, k);
        map.complete_write(u, 16);
        for x in u..u + 16 {
            disk[x as usize] = Some(g);
        }
    }
    let never = map
        .begin_leg(&LegPlan {
            block_units: 16,
            permuted: true,
            slices: vec![(0, 16, 3)],
        })
        .expect("fits");
    let legs = map.legs();
    let (u, g) = never.nth_write(0, 0);
    for x in u..u + 5 {
        disk[x as usize] = Some(g);
    }
    map.complete_write(u, 5);
    map.keep_unwritten(&legs, (1, 0, 0), u + 5, 11);
    map.issue_write(&never, 0, 0);
    check_all(&map, &disk, "stopped inside a block");
    // The kept units expect exactly what they held: one generation older is a lost write.
    let held = disk[u as usize + 5].expect("written by the first leg");
    assert_eq!(map.expect(&map.legs(), u + 5), Expect::Exact(held));
    // A restart reads the kept units as "that or newer".
    let back = WalkMap::restore(&map.record()).expect("restores");
    assert_eq!(back.expect(&back.legs(), u + 5), Expect::AtLeast(held));
    let _ = random_leg(&back, &mut disk, &mut r, false);
    check_all(&back, &disk, "after the restart");
}
