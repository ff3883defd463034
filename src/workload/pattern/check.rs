//! Classifying a read unit against what the generation map expects: the kinds of failure
//! ([`VerifyKind`], the `kind` label of `nvsoak_verify_errors_total`), the record of one
//! failure ([`Mismatch`]) and the checks themselves ([`check_unit`], [`check`]), by the rules
//! in the module docs of `pattern`. Allocation-free.

use super::block::{
    CRC_AT, HEADER_LEN, HeaderView, MAGIC, payload_key, payload_matches, rd32, rd64, stamp_unit,
    unit_crc,
};
use super::{Expect, VERIFY_UNIT};

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

/// The crc32c of `unit` as read (crc field zeroed), whose magic is ours. When the payload is
/// exactly what stamping writes for the header's own (offset, generation, seed), the unit is
/// that stamped unit byte for byte, so its crc is the stamped one from the tables: one compare
/// pass instead of a crc pass. Anything else is summed in full.
#[inline]
fn read_crc(unit: &[u8]) -> u32 {
    let (offset, generation, seed) = (rd64(unit, 8), rd32(unit, 16), rd64(unit, 24));
    let (start, key) = payload_key(offset, generation, seed);
    if payload_matches(&unit[HEADER_LEN..], start, key) {
        super::crc_tables::stamped_crc(offset, generation, seed, start, key)
    } else {
        unit_crc(unit)
    }
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
        computed_crc: read_crc(unit),
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
        Expect::Exact(g) => h.generation == g,
        Expect::AtLeast(g) => h.generation >= g,
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
