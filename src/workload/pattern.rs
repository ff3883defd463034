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

use std::io::{self, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

/// Size of one verify unit; block sizes are multiples of it when verify is on.
pub const VERIFY_UNIT: usize = 4096;
/// `b"NVSOAKv1"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVSOAKv1");
/// Bytes of header at the start of each unit.
pub const HEADER_LEN: usize = 32;
/// How far the generation of a recovered unit jumps at its first write after a restart.
pub const RECOVERY_JUMP: u16 = 4096;

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

/// What the map expects in a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Not written in this soak (as far as the map knows).
    NeverWritten,
    /// Last written with this generation.
    Generation(u32),
    /// Recovered after a restart or a failed write: last recorded as `None` (never) or
    /// `Some(g)`, and newer generations from before the crash are accepted.
    Recovered(Option<u32>),
}

impl Expect {
    /// The generation expected, 0 for never written.
    pub fn generation(self) -> u32 {
        match self {
            Expect::NeverWritten | Expect::Recovered(None) => 0,
            Expect::Generation(g) | Expect::Recovered(Some(g)) => g,
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

/// Errors reading a serialised generation map.
#[derive(Debug, thiserror::Error)]
pub enum GenMapError {
    #[error("generation map: {0}")]
    Io(#[from] io::Error),
    #[error("generation map: {0}; the checkpoint sidecar is damaged, reset the state")]
    Format(String),
}

/// The generation of every verify unit of a region (or a worker's stripe): 0 = never written,
/// else the unit's write count modulo 2^16 (skipping 0). Each entry is an atomic accessed with
/// relaxed ordering, so workers that own disjoint units share one map lock-free (plain loads and
/// stores on x86), and the checkpointer can serialise it while they run.
pub struct GenMap {
    /// Target offset of unit 0.
    base: u64,
    gens: Box<[AtomicU16]>,
    /// One bit per unit: recovered (see the module docs). Never serialised.
    recovered: Box<[AtomicU64]>,
    seed: u64,
}

impl std::fmt::Debug for GenMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenMap")
            .field("base", &self.base)
            .field("units", &self.gens.len())
            .field("seed", &self.seed)
            .finish()
    }
}

const SER_MAGIC: &[u8; 8] = b"NVGENMP1";
const SER_RAW: u8 = 0;
const SER_RLE: u8 = 1;

impl GenMap {
    /// A map of `len` bytes of target starting at offset `base` (both multiples of
    /// [`VERIFY_UNIT`]; a trailing partial unit is not covered), every unit never written.
    pub fn new(base: u64, len: u64, seed: u64) -> Self {
        let units = (len / VERIFY_UNIT as u64) as usize;
        GenMap {
            base,
            gens: (0..units).map(|_| AtomicU16::new(0)).collect(),
            recovered: (0..units.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            seed,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn units(&self) -> usize {
        self.gens.len()
    }
    /// Bytes of memory the map uses.
    pub fn memory_bytes(&self) -> usize {
        self.gens.len() * 2 + self.recovered.len() * 8
    }
    /// True if `offset..offset+len` lies inside the map.
    pub fn covers(&self, offset: u64, len: usize) -> bool {
        offset >= self.base
            && (offset - self.base).is_multiple_of(VERIFY_UNIT as u64)
            && (offset - self.base + len as u64) <= self.gens.len() as u64 * VERIFY_UNIT as u64
    }

    #[inline]
    fn idx(&self, offset: u64) -> usize {
        debug_assert!(
            self.covers(offset, VERIFY_UNIT),
            "offset {offset} outside the map"
        );
        ((offset - self.base) / VERIFY_UNIT as u64) as usize
    }

    /// The generation recorded for the unit at `offset` (0 = never written).
    #[inline]
    pub fn get(&self, offset: u64) -> u32 {
        self.gens[self.idx(offset)].load(Ordering::Relaxed) as u32
    }

    /// Record generation `g` for the unit at `offset` and clear its recovered bit.
    #[inline]
    pub fn set(&self, offset: u64, g: u32) {
        let i = self.idx(offset);
        self.gens[i].store(g as u16, Ordering::Relaxed);
        self.clear_recovered(i);
    }

    #[inline]
    fn is_recovered(&self, i: usize) -> bool {
        self.recovered[i / 64].load(Ordering::Relaxed) & (1 << (i % 64)) != 0
    }

    #[inline]
    fn clear_recovered(&self, i: usize) {
        let w = &self.recovered[i / 64];
        let bit = 1u64 << (i % 64);
        if w.load(Ordering::Relaxed) & bit != 0 {
            w.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// Mark every unit recovered (done by [`GenMap::read_from`]; see the module docs).
    pub fn mark_all_recovered(&self) {
        let n = self.gens.len();
        for (wi, w) in self.recovered.iter().enumerate() {
            let bits_here = (n - wi * 64).min(64);
            let v = if bits_here == 64 {
                u64::MAX
            } else {
                (1u64 << bits_here) - 1
            };
            w.store(v, Ordering::Relaxed);
        }
    }

    /// Number of units still marked recovered.
    pub fn recovered_units(&self) -> u64 {
        self.recovered
            .iter()
            .map(|w| w.load(Ordering::Relaxed).count_ones() as u64)
            .sum()
    }

    /// What a read of the unit at `offset` should find.
    #[inline]
    pub fn expect(&self, offset: u64) -> Expect {
        let i = self.idx(offset);
        let g = self.gens[i].load(Ordering::Relaxed) as u32;
        let known = (g != 0).then_some(g);
        if self.is_recovered(i) {
            Expect::Recovered(known)
        } else {
            match known {
                None => Expect::NeverWritten,
                Some(g) => Expect::Generation(g),
            }
        }
    }

    /// The generation the next write of the unit at `offset` carries.
    #[inline]
    pub fn next(&self, offset: u64) -> u32 {
        let i = self.idx(offset);
        let g = self.gens[i].load(Ordering::Relaxed);
        let step = if self.is_recovered(i) {
            RECOVERY_JUMP
        } else {
            1
        };
        let mut n = g.wrapping_add(step);
        if n == 0 {
            n = 1;
        }
        n as u32
    }

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
            stamp_unit(unit, off, self.next(off), self.seed);
        }
    }

    /// Record a completed write of `len` bytes at `offset` stamped by [`GenMap::stamp_write`].
    pub fn complete_write(&self, offset: u64, len: usize) {
        for u in 0..len / VERIFY_UNIT {
            let off = offset + (u * VERIFY_UNIT) as u64;
            self.set(off, self.next(off));
        }
    }

    /// A write already recorded at submission (as [`VerifyHook`] does) failed: step each
    /// unit's generation back and mark it recovered, so the old block (or the new one, if the
    /// write landed after all) is accepted once.
    pub fn undo_write(&self, offset: u64, len: usize) {
        for u in 0..len / VERIFY_UNIT {
            let i = self.idx(offset + (u * VERIFY_UNIT) as u64);
            let g = self.gens[i].load(Ordering::Relaxed);
            // Back past a recovery jump as well; generation 1 may be a first write (or a
            // wrap), so it goes back to "never", which accepts anything ours at this offset.
            let prev = if g <= 1 {
                0
            } else {
                g.wrapping_sub(RECOVERY_JUMP).max(1)
            };
            self.gens[i].store(prev, Ordering::Relaxed);
            self.recovered[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
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
            match check_unit(unit, off, exp, self.seed) {
                Ok(found) => {
                    if let Expect::Recovered(_) = exp {
                        let i = self.idx(off);
                        if let Some(g) = found {
                            self.gens[i].store(g as u16, Ordering::Relaxed);
                        }
                        self.clear_recovered(i);
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

    /// Units written at least once.
    pub fn written_units(&self) -> u64 {
        self.gens
            .iter()
            .filter(|g| g.load(Ordering::Relaxed) != 0)
            .count() as u64
    }

    /// Serialise: magic, base, units, seed (u64 LE each after the magic), an encoding byte,
    /// then the entries either raw (u16 LE each) or run-length encoded (LEB128 run length, u16
    /// value), whichever is smaller, then a crc32c of everything before it.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let mut w = CrcWriter {
            inner: w,
            crc: 0,
            buf: Vec::with_capacity(64 * 1024),
        };
        w.put(SER_MAGIC)?;
        w.put(&self.base.to_le_bytes())?;
        w.put(&(self.gens.len() as u64).to_le_bytes())?;
        w.put(&self.seed.to_le_bytes())?;
        let n = self.gens.len();
        let load = |i: usize| self.gens[i].load(Ordering::Relaxed);
        // Run-length encoding when it is smaller (sequential passes leave long runs), raw
        // entries otherwise (random writes): never more than the raw size plus the header.
        let mut rle_len = 0usize;
        let mut i = 0;
        while i < n {
            let v = load(i);
            let mut j = i + 1;
            while j < n && load(j) == v {
                j += 1;
            }
            let bits = 64 - ((j - i) as u64).leading_zeros() as usize;
            rle_len += bits.div_ceil(7).max(1) + 2;
            i = j;
        }
        if rle_len >= 2 * n {
            w.put(&[SER_RAW])?;
            for i in 0..n {
                w.put(&load(i).to_le_bytes())?;
            }
        } else {
            w.put(&[SER_RLE])?;
            let mut i = 0;
            while i < n {
                let v = load(i);
                let mut j = i + 1;
                while j < n && load(j) == v {
                    j += 1;
                }
                let mut run = (j - i) as u64;
                loop {
                    let b = (run & 0x7f) as u8;
                    run >>= 7;
                    if run == 0 {
                        w.put(&[b])?;
                        break;
                    }
                    w.put(&[b | 0x80])?;
                }
                w.put(&v.to_le_bytes())?;
                i = j;
            }
        }
        w.flush_buf()?;
        let crc = w.crc;
        w.inner.write_all(&crc.to_le_bytes())
    }

    /// Parse a serialised map (see [`GenMap::write_to`]); units come back marked recovered.
    pub fn from_bytes(data: &[u8]) -> Result<GenMap, GenMapError> {
        let bad = |m: &str| GenMapError::Format(m.to_string());
        if data.len() < 8 + 24 + 4 {
            return Err(bad("too short"));
        }
        let (body, crc) = data.split_at(data.len() - 4);
        let want = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if crc32c::crc32c(body) != want {
            return Err(bad("checksum mismatch"));
        }
        if &body[..8] != SER_MAGIC {
            return Err(bad("bad magic"));
        }
        let base = rd64(body, 8);
        let units = rd64(body, 16);
        let seed = rd64(body, 24);
        if units > (1 << 36) {
            return Err(bad("implausible unit count"));
        }
        let map = GenMap::new(base, units * VERIFY_UNIT as u64, seed);
        let mode = *body.get(32).ok_or_else(|| bad("truncated header"))?;
        let mut p = 33;
        let mut i = 0usize;
        if mode == SER_RAW {
            let raw = &body[p..];
            if raw.len() != map.gens.len() * 2 {
                return Err(bad("raw entries do not match the unit count"));
            }
            for (g, b) in map.gens.iter().zip(raw.chunks_exact(2)) {
                g.store(u16::from_le_bytes([b[0], b[1]]), Ordering::Relaxed);
            }
            p = body.len();
            i = map.gens.len();
        } else if mode != SER_RLE {
            return Err(bad("unknown encoding"));
        }
        while p < body.len() {
            let mut run: u64 = 0;
            let mut shift = 0;
            loop {
                let b = *body.get(p).ok_or_else(|| bad("truncated run length"))?;
                p += 1;
                if shift > 56 {
                    return Err(bad("run length too long"));
                }
                run |= ((b & 0x7f) as u64) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            let v = body.get(p..p + 2).ok_or_else(|| bad("truncated value"))?;
            p += 2;
            let v = u16::from_le_bytes([v[0], v[1]]);
            let end = i
                .checked_add(run as usize)
                .filter(|&e| e <= map.gens.len() && run > 0)
                .ok_or_else(|| bad("runs exceed the unit count"))?;
            for g in &map.gens[i..end] {
                g.store(v, Ordering::Relaxed);
            }
            i = end;
        }
        if i != map.gens.len() {
            return Err(bad("runs do not cover every unit"));
        }
        map.mark_all_recovered();
        Ok(map)
    }
}

/// Accessors and helpers only the unit tests use.
#[cfg(test)]
impl GenMap {
    pub fn base(&self) -> u64 {
        self.base
    }

    /// A write failed: the device may hold the old or the new blocks, so accept either once.
    pub fn fail_write(&self, offset: u64, len: usize) {
        for u in 0..len / VERIFY_UNIT {
            let i = self.idx(offset + (u * VERIFY_UNIT) as u64);
            self.recovered[i / 64].fetch_or(1 << (i % 64), Ordering::Relaxed);
        }
    }

    /// Serialise into a vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_to(&mut v).expect("writing to a Vec cannot fail");
        v
    }

    /// True if both maps record the same generations (ignoring recovered bits).
    pub fn same_generations(&self, other: &GenMap) -> bool {
        self.base == other.base
            && self.seed == other.seed
            && self.gens.len() == other.gens.len()
            && self
                .gens
                .iter()
                .zip(other.gens.iter())
                .all(|(a, b)| a.load(Ordering::Relaxed) == b.load(Ordering::Relaxed))
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

struct CrcWriter<'a, W: Write> {
    inner: &'a mut W,
    crc: u32,
    buf: Vec<u8>,
}

impl<W: Write> CrcWriter<'_, W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= 60 * 1024 {
            self.flush_buf()?;
        }
        Ok(())
    }
    fn flush_buf(&mut self) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        self.inner.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

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
