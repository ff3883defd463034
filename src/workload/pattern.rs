//! Data-verification pattern and generation map.
//!
//! Every written block carries, in each 4096-byte verify unit ([`VERIFY_UNIT`]), a 32-byte
//! header followed by a payload reproducible from (seed, offset, generation):
//!
//! | bytes  | field                                                            |
//! |--------|------------------------------------------------------------------|
//! | 0..8   | magic `NVSOAKv1` (little-endian u64 [`MAGIC`])                   |
//! | 8..16  | target byte offset of this unit                                  |
//! | 16..20 | generation: how many times this unit has been written (mod 2^16) |
//! | 20..24 | crc32c of the whole unit with these four bytes zeroed            |
//! | 24..32 | writer seed (random per soak, kept in the checkpoint)            |
//! | 32..   | payload: a fixed 64 KiB random pool, XORed with a per-unit key   |
//!
//! The payload is incompressible and differs per (seed, offset, generation), so neither a
//! compressing nor a deduplicating controller can shortcut it. Generating it costs one XOR per
//! word (the pool stays in L2); the crc32c is hardware-accelerated (SSE4.2 / ARMv8 CRC). A check
//! only computes the crc and compares header fields; the payload is regenerated only on a
//! mismatch, to name the first bad byte.
//!
//! ## Classification of a read unit
//!
//! With `E` the expectation from the [`GenMap`] and `H` the header found:
//!
//! - all zeroes, or no magic: fine if `E` is never-written (a block that still holds what was
//!   there before the soak); if `E` is a generation, all-zeroes is a **stale generation** (the
//!   write was lost, or the block was trimmed) and anything else is a **bad checksum**;
//! - magic, but `H.seed` is not ours: left over from another soak. Fine if never-written;
//!   else a **wrong offset** if `H.offset` differs, else a **stale generation** (our write was
//!   lost and the old content is still there);
//! - magic and our seed: crc mismatch → **bad checksum**; `H.offset` ≠ the unit's offset →
//!   **wrong offset** (a misdirected write landed here, including on a never-written unit);
//!   `H.generation` ≠ the expected one → **stale generation** (including our header on a unit
//!   the map says was never written);
//! - a failed read is **unreadable** ([`Mismatch::unreadable`]).
//!
//! ## Restarts
//!
//! The map is checkpointed every `state.checkpoint_interval`; writes between the last checkpoint
//! and a crash leave units on disk *newer* than the restored map. A restored map therefore marks
//! every unit **recovered** (one bit per unit, in memory only) until it is next written or read:
//!
//! - a recovered unit accepts a found generation equal to or newer than the map's (modulo 2^16,
//!   within half the range) with our seed and the right offset, and learns it. Any such newer
//!   block was written before the crash: this process's own writes clear the bit first. This is
//!   the "≤ highest generation issued before the crash" bound, per unit;
//! - an *older* generation, a foreign seed, a wrong offset or a bad crc are still mismatches, so
//!   a lost write of anything checkpointed is still found. What cannot be found is a lost write
//!   of a write made after the last checkpoint, because no record of it survived;
//! - the first write to a recovered unit jumps its generation by [`RECOVERY_JUMP`], past any
//!   generation written since the checkpoint, so that losing that write can never leave an
//!   older block that happens to carry the expected generation;
//! - a failed write marks its units recovered as well: the device may hold the old or the new
//!   block, and either is accepted once.
//!
//! So a restart never reports a false mismatch, and never hides one that the checkpoint could
//! have revealed.
//!
//! ## Memory
//!
//! The map holds a `u16` per 4 KiB unit plus one recovered bit: 2.125 bytes per 4 KiB, i.e.
//! **544 MiB per TiB of region** (512 MiB + 32 MiB per TiB, ≈ 495 MiB per TB). A 16-bit
//! generation wraps after 65 535 writes of one unit; a lost write is missed only if the block
//! left behind is a multiple of 65 535 writes old, and its crc, seed and offset still match.
//! Checkpoints store the map run-length encoded when that is smaller (after sequential passes,
//! a few bytes), else raw: never more than 2 bytes per unit plus a 37-byte frame.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::model::genmap::{Expect, GenMap, GenMapError, RECOVERY_JUMP, VERIFY_UNIT};

/// `b"NVSOAKv1"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVSOAKv1");
/// Bytes of header at the start of each unit.
pub const HEADER_LEN: usize = 32;

const CRC_AT: usize = 20;
const UNIT_WORDS: usize = VERIFY_UNIT / 8;
const PAYLOAD_WORDS: usize = (VERIFY_UNIT - HEADER_LEN) / 8;
const POOL_WORDS: usize = 8192;

/// The header fields of a unit as found on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderView {
    pub magic: u64,
    pub offset: u64,
    pub generation: u32,
    pub seed: u64,
    /// crc32c stored in the header.
    pub crc: u32,
    /// crc32c computed over the unit as read.
    pub computed_crc: u32,
}

/// Kinds of verification failure; [`VerifyKind::label`] is the `kind` label of
/// `nvsoak_verify_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VerifyKind {
    /// A block for another offset is here (misdirected write).
    WrongOffset,
    /// An older (or otherwise unexpected) generation is here (lost write).
    StaleGeneration,
    /// The data does not match its checksum (corruption).
    BadChecksum,
    /// The read failed.
    Unreadable,
}

impl VerifyKind {
    pub const ALL: [VerifyKind; 4] = [
        VerifyKind::WrongOffset,
        VerifyKind::StaleGeneration,
        VerifyKind::BadChecksum,
        VerifyKind::Unreadable,
    ];

    pub fn label(self) -> &'static str {
        match self {
            VerifyKind::WrongOffset => "wrong_offset",
            VerifyKind::StaleGeneration => "stale_generation",
            VerifyKind::BadChecksum => "bad_checksum",
            VerifyKind::Unreadable => "unreadable",
        }
    }
}

/// One verification failure, with everything the log line needs. No heap: building one is
/// allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: VerifyKind,
    /// Target byte offset of the unit.
    pub offset: u64,
    /// 0 = never written.
    pub expected_generation: u32,
    pub expected_seed: u64,
    /// The header found, `None` if the unit had no magic or the read failed.
    pub found: Option<HeaderView>,
    /// For bad checksums of a unit with an intact header: the first byte (within the unit)
    /// that differs from the pattern that header describes.
    pub first_bad_byte: Option<u32>,
    /// For unreadable: the errno of the failed read.
    pub errno: Option<i32>,
}

impl Mismatch {
    /// A failed read of the unit at `offset`.
    pub fn unreadable(offset: u64, expected_generation: u32, seed: u64, errno: i32) -> Self {
        Mismatch {
            kind: VerifyKind::Unreadable,
            offset,
            expected_generation,
            expected_seed: seed,
            found: None,
            first_bad_byte: None,
            errno: Some(errno),
        }
    }

    /// The logical block address for an LBA size (512, 4096).
    pub fn lba(&self, lba_size: u32) -> u64 {
        self.offset / lba_size.max(1) as u64
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at offset {} (4K unit {}): expected generation {}{} seed {:#018x}",
            self.kind.label(),
            self.offset,
            self.offset / VERIFY_UNIT as u64,
            self.expected_generation,
            if self.expected_generation == 0 {
                " (never written)"
            } else {
                ""
            },
            self.expected_seed
        )?;
        match &self.found {
            Some(h) => write!(
                f,
                ", found offset {} generation {} seed {:#018x} crc {:#010x} (computed {:#010x})",
                h.offset, h.generation, h.seed, h.crc, h.computed_crc
            )?,
            None if self.kind == VerifyKind::Unreadable => {
                let e = self.errno.unwrap_or(0);
                write!(f, ", read failed: {}", crate::engine::describe_error(e))?
            }
            None => write!(f, ", found no header")?,
        }
        if let Some(b) = self.first_bad_byte {
            write!(f, ", first bad byte at unit offset {b}")?;
        }
        Ok(())
    }
}

#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload pool: 64 KiB (+ one unit, so no window wraps) of splitmix64 output from a fixed
/// seed. The same in every process and version of this format.
fn pool() -> &'static [u64] {
    static POOL: OnceLock<Box<[u64]>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut x: u64 = 0x6e76_736f_616b_7031; // "nvsoakp1"
        (0..POOL_WORDS + UNIT_WORDS)
            .map(|_| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                mix64(x)
            })
            .collect()
    })
}

#[inline]
fn unit_key(offset: u64, generation: u32, seed: u64) -> u64 {
    mix64(seed ^ mix64(offset ^ ((generation as u64) << 48) ^ 0x5851_f42d_4c95_7f2d))
}

#[inline]
fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn unit_crc(unit: &[u8]) -> u32 {
    let c = crc32c::crc32c(&unit[..CRC_AT]);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, &unit[CRC_AT + 4..])
}

/// Write the payload words for (offset, generation, seed) into `payload` (4064 bytes).
#[inline]
fn fill_payload(payload: &mut [u8], offset: u64, generation: u32, seed: u64) {
    let key = unit_key(offset, generation, seed);
    let start = (key >> 51) as usize % POOL_WORDS;
    let src = &pool()[start..start + PAYLOAD_WORDS];
    for (dst, w) in payload.chunks_exact_mut(8).zip(src) {
        dst.copy_from_slice(&(w ^ key).to_le_bytes());
    }
}

/// Stamp one unit.
#[inline]
pub fn stamp_unit(unit: &mut [u8], offset: u64, generation: u32, seed: u64) {
    debug_assert_eq!(unit.len(), VERIFY_UNIT);
    unit[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    unit[8..16].copy_from_slice(&offset.to_le_bytes());
    unit[16..20].copy_from_slice(&generation.to_le_bytes());
    unit[20..24].copy_from_slice(&[0; 4]);
    unit[24..32].copy_from_slice(&seed.to_le_bytes());
    fill_payload(&mut unit[HEADER_LEN..], offset, generation, seed);
    let crc = unit_crc(unit);
    unit[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Stamp `buf` (one or more whole units) for the target offset `offset`: every unit gets the
/// same generation. Allocation-free.
///
/// # Panics
/// If `buf.len()` is not a multiple of [`VERIFY_UNIT`].
pub fn stamp(buf: &mut [u8], offset: u64, generation: u32, seed: u64) {
    assert!(
        buf.len().is_multiple_of(VERIFY_UNIT),
        "verify buffers are whole 4 KiB units"
    );
    for (i, unit) in buf.chunks_exact_mut(VERIFY_UNIT).enumerate() {
        stamp_unit(unit, offset + (i * VERIFY_UNIT) as u64, generation, seed);
    }
}

fn all_zero(b: &[u8]) -> bool {
    b.chunks_exact(8)
        .all(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")) == 0)
        && b.chunks_exact(8).remainder().iter().all(|&x| x == 0)
}

fn first_bad_byte(unit: &[u8], h: &HeaderView) -> Option<u32> {
    let mut want = [0u8; VERIFY_UNIT];
    stamp_unit(&mut want, h.offset, h.generation, h.seed);
    // The crc field itself is not compared: it is what disagrees.
    want[CRC_AT..CRC_AT + 4].copy_from_slice(&unit[CRC_AT..CRC_AT + 4]);
    want.iter()
        .zip(unit)
        .position(|(a, b)| a != b)
        .map(|p| p as u32)
}

/// Generation comparison modulo 2^16: true if `found` is `base` or up to half the range newer.
#[inline]
fn not_older(found: u32, base: u32) -> bool {
    (found as u16).wrapping_sub(base as u16) < 0x8000
}

/// Check one unit read from target offset `offset`. On success returns the generation found if
/// the unit holds our block (`None` if it holds something else that is acceptable there).
#[inline]
pub fn check_unit(
    unit: &[u8],
    offset: u64,
    expected: Expect,
    seed: u64,
) -> Result<Option<u32>, Mismatch> {
    debug_assert_eq!(unit.len(), VERIFY_UNIT);
    let never = matches!(expected, Expect::NeverWritten | Expect::Recovered(None));
    let mismatch = |kind, found, first_bad_byte| Mismatch {
        kind,
        offset,
        expected_generation: expected.generation(),
        expected_seed: seed,
        found,
        first_bad_byte,
        errno: None,
    };
    let magic = rd64(unit, 0);
    if magic != MAGIC {
        if never {
            return Ok(None);
        }
        let kind = if all_zero(unit) {
            VerifyKind::StaleGeneration
        } else {
            VerifyKind::BadChecksum
        };
        return Err(mismatch(kind, None, None));
    }
    let h = HeaderView {
        magic,
        offset: rd64(unit, 8),
        generation: rd32(unit, 16),
        crc: rd32(unit, CRC_AT),
        seed: rd64(unit, 24),
        computed_crc: unit_crc(unit),
    };
    if h.seed != seed {
        // Another soak's block.
        if never {
            return Ok(None);
        }
        if h.crc != h.computed_crc {
            return Err(mismatch(VerifyKind::BadChecksum, Some(h), None));
        }
        let kind = if h.offset != offset {
            VerifyKind::WrongOffset
        } else {
            VerifyKind::StaleGeneration
        };
        return Err(mismatch(kind, Some(h), None));
    }
    if h.crc != h.computed_crc {
        let fb = first_bad_byte(unit, &h);
        return Err(mismatch(VerifyKind::BadChecksum, Some(h), fb));
    }
    if h.offset != offset {
        return Err(mismatch(VerifyKind::WrongOffset, Some(h), None));
    }
    let ok = match expected {
        Expect::NeverWritten => false,
        Expect::Generation(g) => h.generation as u16 == g as u16,
        Expect::Recovered(None) => h.generation != 0,
        Expect::Recovered(Some(g)) => not_older(h.generation, g),
    };
    if ok {
        Ok(Some(h.generation))
    } else {
        Err(mismatch(VerifyKind::StaleGeneration, Some(h), None))
    }
}

/// Check `buf` (one or more whole units, all with the same expectation) read from target
/// offset `offset`; returns the first mismatch. Allocation-free.
pub fn check(buf: &[u8], offset: u64, expected: Expect, seed: u64) -> Result<(), Mismatch> {
    for (i, unit) in buf.chunks_exact(VERIFY_UNIT).enumerate() {
        check_unit(unit, offset + (i * VERIFY_UNIT) as u64, expected, seed)?;
    }
    Ok(())
}

/// A fresh random writer seed for a new soak (never 0).
pub fn new_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    h.write_u64(now);
    h.write_u32(std::process::id());
    mix64(h.finish()).max(1)
}
/// The verifier's side of the generation map: stamping writes with the map's next
/// generations and checking reads against it (the map itself is a record of `model`).
impl GenMap {
    /// Stamp a write buffer for target offset `offset`, each unit with its next generation.
    /// Call [`GenMap::complete_write`] when the write succeeds; a write recorded at submission
    /// that fails is stepped back with [`GenMap::undo_write`]. Allocation-free.
    pub fn stamp_write(&self, buf: &mut [u8], offset: u64) {
        assert!(
            buf.len().is_multiple_of(VERIFY_UNIT),
            "verify buffers are whole 4 KiB units"
        );
        for (i, unit) in buf.chunks_exact_mut(VERIFY_UNIT).enumerate() {
            let off = offset + (i * VERIFY_UNIT) as u64;
            stamp_unit(unit, off, self.next(off), self.seed());
        }
    }

    /// Verify a completed read of `buf` at `offset` against the map, unit by unit. Calls
    /// `on_mismatch` for each bad unit and returns how many there were. Recovered units that
    /// check out are learnt (their generation recorded, the bit cleared). Allocation-free.
    pub fn verify_read(&self, buf: &[u8], offset: u64, on_mismatch: impl FnMut(&Mismatch)) -> u32 {
        self.verify_read_counted(buf, offset, on_mismatch).0
    }

    /// [`GenMap::verify_read`], also returning how many of the units had been written (a
    /// generation or a recovery to check against): (mismatches, units checked).
    pub fn verify_read_counted(
        &self,
        buf: &[u8],
        offset: u64,
        mut on_mismatch: impl FnMut(&Mismatch),
    ) -> (u32, u32) {
        let mut bad = 0;
        let mut checked = 0;
        for (u, unit) in buf.chunks_exact(VERIFY_UNIT).enumerate() {
            let off = offset + (u * VERIFY_UNIT) as u64;
            let exp = self.expect(off);
            if !matches!(exp, Expect::NeverWritten) {
                checked += 1;
            }
            match check_unit(unit, off, exp, self.seed()) {
                Ok(found) => {
                    if let Expect::Recovered(_) = exp {
                        self.learn(off, found);
                    }
                }
                Err(m) => {
                    bad += 1;
                    on_mismatch(&m);
                }
            }
        }
        (bad, checked)
    }
}

/// Verification failures of one target by kind, shared between its workers (each adds with
/// relaxed atomics) and the metrics collector (`nvsoak_verify_errors_total{target,kind}`).
#[derive(Debug, Default)]
pub struct VerifyCounters {
    counts: [AtomicU64; 4],
    /// Bytes of units read back and checked against a generation this target wrote (units
    /// never written are not counted): whether data was verified at all, for the verify gate.
    /// Each hook adds its own count in batches (`VerifyHook`), so this trails by at most a few
    /// reads per worker.
    checked_bytes: AtomicU64,
    /// Set by the first mismatch; with `verify_fatal` the scheduler stops the target on it.
    pub tripped: std::sync::atomic::AtomicBool,
    /// The journal's view: the first few mismatches in full, then summaries.
    pub log: crate::workload::verify_log::MismatchLog,
}

impl VerifyCounters {
    fn index(kind: VerifyKind) -> usize {
        match kind {
            VerifyKind::WrongOffset => 0,
            VerifyKind::StaleGeneration => 1,
            VerifyKind::BadChecksum => 2,
            VerifyKind::Unreadable => 3,
        }
    }
    pub fn add(&self, kind: VerifyKind, n: u64) {
        self.counts[Self::index(kind)].fetch_add(n, Ordering::Relaxed);
        self.tripped.store(true, Ordering::Relaxed);
    }
    pub fn get(&self, kind: VerifyKind) -> u64 {
        self.counts[Self::index(kind)].load(Ordering::Relaxed)
    }
    pub fn total(&self) -> u64 {
        VerifyKind::ALL.iter().map(|k| self.get(*k)).sum()
    }
    /// (kind label, count) for each kind, for metrics and checkpoints.
    pub fn by_label(&self) -> [(&'static str, u64); 4] {
        VerifyKind::ALL.map(|k| (k.label(), self.get(k)))
    }
    pub fn add_checked(&self, bytes: u64) {
        self.checked_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Bytes verified so far (see `checked_bytes`), this run and the runs before it.
    pub fn checked_bytes(&self) -> u64 {
        self.checked_bytes.load(Ordering::Relaxed)
    }
    /// Start from the verified bytes carried over from a checkpoint.
    pub fn restore_checked(&self, bytes: u64) {
        self.checked_bytes.store(bytes, Ordering::Relaxed);
    }
    /// Start from counts carried over from a checkpoint.
    pub fn restore(&self, by_label: &std::collections::BTreeMap<String, u64>) {
        for k in VerifyKind::ALL {
            if let Some(n) = by_label.get(k.label()) {
                self.counts[Self::index(k)].store(*n, Ordering::Relaxed);
            }
        }
    }
}

/// The inline-verify hook lives with the other hot-path hooks.
pub use crate::workload::hooks::VerifyHook;

#[cfg(test)]
mod tests {
    use super::*;

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
}
