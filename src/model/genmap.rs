//! The generation map: the record of which generation every 4 KiB verify unit of a region
//! was last written with, and its serialised form (the `genmap-*.bin` sidecars of the
//! checkpoint). The block pattern that carries a generation on the device, and the checking of
//! a read against this map, are the verifier's (`workload::pattern`); saving and loading the
//! sidecar files is `state`'s. This module does no I/O of its own: [`GenMap::write_to`] writes
//! into any [`Write`] and [`GenMap::from_bytes`] parses bytes already read.
//!
//! ## Restarts
//!
//! The map is checkpointed every `state.checkpoint_interval`; writes between the last checkpoint
//! and a crash leave units on disk *newer* than the restored map. A restored map therefore marks
//! every unit **recovered** (one bit per unit, in memory only) until it is next written or read:
//! a recovered unit accepts a found generation equal to or newer than the map's and learns it
//! ([`GenMap::learn`]); the first write to a recovered unit jumps its generation by
//! [`RECOVERY_JUMP`]; a failed write marks its units recovered as well
//! ([`GenMap::undo_write`]). The verifier's module docs give the whole argument.
//!
//! ## Memory
//!
//! The map holds a `u16` per 4 KiB unit plus one recovered bit: 2.125 bytes per 4 KiB, i.e.
//! **544 MiB per TiB of region**. Serialised, it is run-length encoded when that is smaller
//! (after sequential passes, a few bytes), else raw: never more than 2 bytes per unit plus a
//! 37-byte frame.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

/// Size of one verify unit; block sizes are multiples of it when verify is on.
pub const VERIFY_UNIT: usize = 4096;
/// How far the generation of a recovered unit jumps at its first write after a restart.
pub const RECOVERY_JUMP: u16 = 4096;

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
    /// Computed state ([`crate::model::walk`]): written last with exactly this generation,
    /// compared in full 32 bits.
    Exact(u32),
    /// Computed state, after a restart or a failed write: this generation or a newer one of
    /// ours (32 bits, no wrap).
    AtLeast(u32),
}

impl Expect {
    /// The generation expected, 0 for never written.
    pub fn generation(self) -> u32 {
        match self {
            Expect::NeverWritten | Expect::Recovered(None) => 0,
            Expect::Generation(g)
            | Expect::Recovered(Some(g))
            | Expect::Exact(g)
            | Expect::AtLeast(g) => g,
        }
    }

    /// The generation expected, `None` for never written.
    pub fn generation_opt(self) -> Option<u32> {
        match self {
            Expect::NeverWritten | Expect::Recovered(None) => None,
            e => Some(e.generation()),
        }
    }

    /// A read may find a newer block than expected, which is then learnt.
    pub fn is_recovered(self) -> bool {
        matches!(self, Expect::Recovered(_) | Expect::AtLeast(_))
    }
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

    /// Mark every unit recovered (done by [`GenMap::from_bytes`]; see the module docs).
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

    /// Record a completed write of `len` bytes at `offset` stamped with its next generations.
    pub fn complete_write(&self, offset: u64, len: usize) {
        for u in 0..len / VERIFY_UNIT {
            let off = offset + (u * VERIFY_UNIT) as u64;
            self.set(off, self.next(off));
        }
    }

    /// A write already recorded at submission (as the verify hook does) failed: step each
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

    /// A recovered unit at `offset` checked out on a read, holding our block of generation
    /// `found` (or, with `None`, something acceptable that is not ours): record the generation
    /// and clear the unit's recovered bit.
    #[inline]
    pub fn learn(&self, offset: u64, found: Option<u32>) {
        let i = self.idx(offset);
        if let Some(g) = found {
            self.gens[i].store(g as u16, Ordering::Relaxed);
        }
        self.clear_recovered(i);
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

#[inline]
fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
