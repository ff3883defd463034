//! Unit tests of the block pattern, the checks and the verify hook.

use super::block::{mix64, rd64};
use super::*;
use std::sync::atomic::Ordering;

const SEED: u64 = 0x1234_5678_9abc_def0;

fn unit(offset: u64, g: u32) -> Vec<u8> {
    let mut b = vec![0u8; VERIFY_UNIT];
    stamp(&mut b, offset, g, SEED);
    b
}

#[test]
fn stamp_check_round_trip() {
    let mut b = vec![0u8; 4 * VERIFY_UNIT];
    stamp(&mut b, 8192, 7, SEED);
    assert_eq!(check(&b, 8192, Expect::Generation(7), SEED), Ok(()));
    assert_eq!(rd64(&b, VERIFY_UNIT + 8), 8192 + 4096);
    // Deterministic, and distinct per offset and generation.
    assert_eq!(unit(4096, 3), unit(4096, 3));
    assert_ne!(unit(4096, 3)[64..], unit(8192, 3)[64..]);
    assert_ne!(unit(4096, 3)[64..], unit(4096, 4)[64..]);
}

#[test]
fn one_corrupt_byte_is_bad_checksum() {
    for pos in [100usize, 4095, 33] {
        let mut b = unit(0, 1);
        b[pos] ^= 0x10;
        let m = check(&b, 0, Expect::Generation(1), SEED).unwrap_err();
        assert_eq!(m.kind, VerifyKind::BadChecksum);
        assert_eq!(m.first_bad_byte, Some(pos as u32));
        assert_eq!(m.kind.label(), "bad_checksum");
    }
    // Corruption in the header's own crc field.
    let mut b = unit(0, 1);
    b[21] ^= 1;
    let m = check(&b, 0, Expect::Generation(1), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::BadChecksum);
    // Garbage without a magic where a block was written.
    let b = vec![0xa5u8; VERIFY_UNIT];
    let m = check(&b, 0, Expect::Generation(1), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::BadChecksum);
    assert!(m.found.is_none());
}

#[test]
fn block_at_another_offset_is_wrong_offset() {
    let b = unit(4096 * 10, 2);
    let m = check(&b, 4096 * 3, Expect::Generation(2), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::WrongOffset);
    assert_eq!(m.found.map(|h| h.offset), Some(4096 * 10));
    assert_eq!(m.offset, 4096 * 3);
    // Also where the map says never written.
    let m = check(&b, 4096 * 3, Expect::NeverWritten, SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::WrongOffset);
    let s = m.to_string();
    assert!(s.contains("wrong_offset at offset 12288"), "{s}");
    assert!(s.contains("found offset 40960"), "{s}");
}

#[test]
fn older_block_is_stale_generation() {
    let old = unit(0, 4);
    let m = check(&old, 0, Expect::Generation(5), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
    assert_eq!(m.expected_generation, 5);
    assert_eq!(m.found.map(|h| h.generation), Some(4));
    // Lost write leaving zeroes.
    let z = vec![0u8; VERIFY_UNIT];
    let m = check(&z, 0, Expect::Generation(1), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
    // Our header where the map says never written.
    let m = check(&old, 0, Expect::NeverWritten, SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
    // A previous soak's block (other seed) where we wrote: lost write.
    let mut other = vec![0u8; VERIFY_UNIT];
    stamp(&mut other, 0, 5, SEED ^ 1);
    let m = check(&other, 0, Expect::Generation(5), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
}

#[test]
fn never_written_units_are_recognised() {
    let z = vec![0u8; 2 * VERIFY_UNIT];
    assert_eq!(check(&z, 0, Expect::NeverWritten, SEED), Ok(()));
    // Whatever was there before the soak, or another soak's block, is fine too.
    let junk = vec![0x5au8; VERIFY_UNIT];
    assert_eq!(check(&junk, 0, Expect::NeverWritten, SEED), Ok(()));
    let mut other = vec![0u8; VERIFY_UNIT];
    stamp(&mut other, 0, 5, SEED ^ 1);
    assert_eq!(check(&other, 0, Expect::NeverWritten, SEED), Ok(()));
}

#[test]
fn recovered_accepts_newer_not_older() {
    let b = unit(0, 9);
    assert_eq!(
        check_unit(&b, 0, Expect::Recovered(Some(7)), SEED),
        Ok(Some(9))
    );
    assert_eq!(
        check_unit(&b, 0, Expect::Recovered(Some(9)), SEED),
        Ok(Some(9))
    );
    assert_eq!(
        check_unit(&b, 0, Expect::Recovered(None), SEED),
        Ok(Some(9))
    );
    let m = check_unit(&b, 0, Expect::Recovered(Some(10)), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
    // Modular: 2 is newer than 65530.
    let b = unit(0, 2);
    assert!(check_unit(&b, 0, Expect::Recovered(Some(65530)), SEED).is_ok());
    // Zeroes where something was checkpointed: still a lost write.
    let z = vec![0u8; VERIFY_UNIT];
    let m = check_unit(&z, 0, Expect::Recovered(Some(3)), SEED).unwrap_err();
    assert_eq!(m.kind, VerifyKind::StaleGeneration);
    assert_eq!(check_unit(&z, 0, Expect::Recovered(None), SEED), Ok(None));
}

#[test]
fn genmap_write_read_cycle() {
    let map = GenMap::new(0, 64 * 4096, SEED);
    let mut buf = vec![0u8; 2 * VERIFY_UNIT];
    assert_eq!(map.expect(8192), Expect::NeverWritten);
    map.stamp_write(&mut buf, 8192);
    map.complete_write(8192, buf.len());
    assert_eq!(map.get(8192), 1);
    assert_eq!(map.get(12288), 1);
    assert_eq!(map.verify_read(&buf, 8192, |_| panic!("no mismatch")), 0);
    let old = buf.clone();
    map.stamp_write(&mut buf, 8192);
    map.complete_write(8192, buf.len());
    assert_eq!(map.get(8192), 2);
    let mut seen = Vec::new();
    assert_eq!(map.verify_read(&old, 8192, |m| seen.push(*m)), 2);
    assert!(seen.iter().all(|m| m.kind == VerifyKind::StaleGeneration));
    assert_eq!(seen[1].offset, 12288);
    // Wrap skips 0.
    map.set(0, 65535);
    assert_eq!(map.next(0), 1);
}

#[test]
fn genmap_restart_semantics() {
    let map = GenMap::new(0, 16 * 4096, SEED);
    let mut b = vec![0u8; VERIFY_UNIT];
    for _ in 0..3 {
        map.stamp_write(&mut b, 0);
        map.complete_write(0, VERIFY_UNIT);
    }
    let saved = map.to_bytes(); // checkpoint at generation 3
    let at_gen3 = b.clone();
    map.stamp_write(&mut b, 0); // written after the checkpoint: generation 4 on disk
    map.complete_write(0, VERIFY_UNIT);
    let mut other = vec![0u8; VERIFY_UNIT];
    map.stamp_write(&mut other, 4096);
    map.complete_write(4096, VERIFY_UNIT);

    let r = GenMap::from_bytes(&saved).unwrap();
    assert_eq!(r.recovered_units(), 16);
    assert_eq!(r.expect(0), Expect::Recovered(Some(3)));
    // Newer than the checkpoint: accepted and learnt, no false mismatch.
    assert_eq!(r.verify_read(&b, 0, |m| panic!("{m}")), 0);
    assert_eq!(r.expect(0), Expect::Generation(4));
    assert_eq!(r.verify_read(&other, 4096, |m| panic!("{m}")), 0);
    assert_eq!(r.get(4096), 1);
    // Now exact again: the generation-3 block is a lost write.
    assert_eq!(r.verify_read(&at_gen3, 0, |_| {}), 1);

    // An older block than the checkpoint is still caught right after restart.
    let r = GenMap::from_bytes(&saved).unwrap();
    let mut gen2 = vec![0u8; VERIFY_UNIT];
    stamp(&mut gen2, 0, 2, SEED);
    let mut kinds = vec![];
    assert_eq!(r.verify_read(&gen2, 0, |m| kinds.push(m.kind)), 1);
    assert_eq!(kinds, vec![VerifyKind::StaleGeneration]);
    // First write of a recovered unit jumps past anything written since the checkpoint.
    assert_eq!(r.next(0), 3 + RECOVERY_JUMP as u32);
    r.stamp_write(&mut b, 0);
    r.complete_write(0, VERIFY_UNIT);
    assert_eq!(r.expect(0), Expect::Generation(3 + RECOVERY_JUMP as u32));
    // A failed write accepts the old or the new block once.
    r.fail_write(0, VERIFY_UNIT);
    assert!(matches!(r.expect(0), Expect::Recovered(Some(_))));
}

#[test]
fn genmap_serialise_round_trip() {
    let map = GenMap::new(1 << 20, 1000 * 4096, SEED);
    for i in 0..1000u64 {
        if i % 7 == 0 || (300..600).contains(&i) {
            map.set((1 << 20) + i * 4096, (i % 5 + 1) as u32);
        }
    }
    map.set((1 << 20) + 999 * 4096, 65535);
    let bytes = map.to_bytes();
    let back = GenMap::from_bytes(&bytes).unwrap();
    assert!(map.same_generations(&back));
    assert_eq!(back.base(), 1 << 20);
    assert_eq!(back.seed(), SEED);
    assert_eq!(back.units(), 1000);
    // Compact: a blank map of 1 TiB worth of units would be a few bytes; here, runs.
    let blank = GenMap::new(0, 1 << 30, SEED);
    assert!(blank.to_bytes().len() < 64, "{}", blank.to_bytes().len());
    // Damage is detected.
    let mut bad = bytes.clone();
    bad[40] ^= 1;
    assert!(GenMap::from_bytes(&bad).is_err());
    assert!(GenMap::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    assert!(GenMap::from_bytes(&[]).is_err());
    // Random generations: raw encoding, never larger than 2 bytes per unit plus the frame.
    let noisy = GenMap::new(0, 5000 * 4096, SEED);
    let mut x = 12345u64;
    for i in 0..5000u64 {
        x = mix64(x);
        noisy.set(i * 4096, (x % 60000 + 1) as u32);
    }
    let b = noisy.to_bytes();
    assert_eq!(b.len(), 33 + 2 * 5000 + 4);
    assert!(GenMap::from_bytes(&b).unwrap().same_generations(&noisy));
}

#[test]
fn verify_hook_counts_and_records() {
    use crate::workload::worker::BlockHook;
    use std::sync::Arc;
    let map = Arc::new(GenMap::new(0, 64 * 4096, SEED));
    let counters = Arc::new(VerifyCounters::default());
    let mut h = VerifyHook::new("t0", map.clone(), counters.clone(), 512);
    let mut buf = vec![0u8; 2 * VERIFY_UNIT];
    h.before_write(&mut buf, 4096);
    assert_eq!((map.get(4096), map.get(8192)), (1, 1));
    h.after_write(4096, buf.len(), true);
    h.after_read(&buf, 4096);
    assert_eq!(counters.total(), 0);
    assert!(!counters.tripped.load(Ordering::Relaxed));
    let old = buf.clone();
    h.before_write(&mut buf, 4096);
    h.after_read(&old, 4096); // the second write was lost
    assert_eq!(counters.get(VerifyKind::StaleGeneration), 2);
    assert!(counters.tripped.load(Ordering::Relaxed));
    // A failed write accepts the old block (or the new one) once.
    let gen2 = {
        let mut b = vec![0u8; 2 * VERIFY_UNIT];
        stamp(&mut b, 4096, 2, SEED);
        b
    };
    h.before_write(&mut buf, 4096);
    h.after_write(4096, buf.len(), false);
    assert!(matches!(map.expect(4096), Expect::Recovered(Some(_))));
    h.after_read(&gen2, 4096); // it did not land
    assert_eq!(counters.total(), 2);
    assert_eq!(map.expect(4096), Expect::Generation(2));
    h.before_write(&mut buf, 4096);
    h.after_write(4096, buf.len(), false);
    h.after_read(&buf, 4096); // it landed after all
    assert_eq!(counters.total(), 2);
    assert_eq!(map.expect(4096), Expect::Generation(3));
    // A failed first write: zeroes (never written) are fine.
    let mut fresh = vec![0u8; VERIFY_UNIT];
    h.before_write(&mut fresh, 40960);
    h.after_write(40960, VERIFY_UNIT, false);
    h.after_read(&vec![0u8; VERIFY_UNIT], 40960);
    assert_eq!(counters.total(), 2);
    h.after_read(&old, 4096);
    assert_eq!(
        counters.total(),
        4,
        "older than the last record: still stale"
    );
    h.read_failed(0, 4096, libc::EIO);
    assert_eq!(counters.get(VerifyKind::Unreadable), 1);
    let labels = counters.by_label();
    assert_eq!(labels[1], ("stale_generation", 4));
    let restored = VerifyCounters::default();
    restored.restore(&[("bad_checksum".to_string(), 7)].into());
    assert_eq!(restored.get(VerifyKind::BadChecksum), 7);
}

#[test]
fn labels_and_memory() {
    let labels: Vec<_> = VerifyKind::ALL.iter().map(|k| k.label()).collect();
    assert_eq!(
        labels,
        [
            "wrong_offset",
            "stale_generation",
            "bad_checksum",
            "unreadable"
        ]
    );
    let m = GenMap::new(0, 1 << 30, 1);
    // 2 bytes + 1 bit per 4 KiB unit.
    assert_eq!(m.memory_bytes(), (1 << 18) * 2 + (1 << 18) / 8);
    let u = Mismatch::unreadable(4096, 3, 1, libc::EIO);
    assert_eq!(u.kind.label(), "unreadable");
    assert_eq!(u.lba(512), 8);
    assert!(u.to_string().contains("read failed"), "{u}");
}

/// The tabled crc of a stamped unit is the crc32c crate's crc of it, for any header fields;
/// and a check reports the unit's true crc whether or not its payload was touched.
#[test]
fn tabled_crc_is_the_crc32c_of_the_unit_and_checks_see_the_true_crc() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let full = |u: &[u8]| {
        let mut z = u.to_vec();
        z[20..24].fill(0);
        crc32c::crc32c(&z)
    };
    let mut u = vec![0u8; VERIFY_UNIT];
    for round in 0..400 {
        let offset = match round % 4 {
            0 => next() & !(VERIFY_UNIT as u64 - 1),
            1 => !(VERIFY_UNIT as u64 - 1),
            2 => 0,
            _ => next() % (1 << 44) * VERIFY_UNIT as u64,
        };
        let generation = if round % 3 == 0 {
            u32::MAX
        } else {
            next() as u32
        };
        let seed = next() | 1;
        stamp_unit(&mut u, offset, generation, seed);
        let stored = u32::from_le_bytes(u[20..24].try_into().expect("4 bytes"));
        assert_eq!(stored, full(&u), "round {round}");
        assert!(check(&u, offset, Expect::Exact(generation), seed).is_ok());
        // One bit flipped anywhere but the crc field: the check's crc is the real one.
        let at = loop {
            let at = (next() % VERIFY_UNIT as u64) as usize;
            if !(20..24).contains(&at) {
                break at;
            }
        };
        u[at] ^= 1 << (next() % 8);
        let want = full(&u);
        match check_unit(&u, offset, Expect::Exact(generation), seed) {
            Err(m) => {
                if let Some(h) = m.found {
                    assert_eq!(h.computed_crc, want, "round {round}, byte {at}");
                }
            }
            Ok(_) => panic!("round {round}: a flipped bit at {at} passed"),
        }
    }
}
