//! The bytes of one verify unit: the 32-byte header layout (magic, offset, generation, crc32c,
//! seed), the fixed payload pool XORed with a per-unit key, stamping a unit or a buffer, and
//! the random writer seed of a soak. The layout is the on-device format (see the module docs
//! of `pattern`); changing it makes every earlier soak's blocks unreadable as ours.

use std::sync::OnceLock;

use super::VERIFY_UNIT;

/// `b"NVSOAKv1"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVSOAKv1");
/// Bytes of header at the start of each unit.
pub const HEADER_LEN: usize = 32;

pub(super) const CRC_AT: usize = 20;
const UNIT_WORDS: usize = VERIFY_UNIT / 8;
pub(super) const PAYLOAD_WORDS: usize = (VERIFY_UNIT - HEADER_LEN) / 8;
pub(super) const POOL_WORDS: usize = 8192;

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

#[inline]
pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload pool: 64 KiB (+ one unit, so no window wraps) of splitmix64 output from a fixed
/// seed. The same in every process and version of this format.
pub(super) fn pool() -> &'static [u64] {
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
pub(super) fn rd64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
pub(super) fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(super) fn unit_crc(unit: &[u8]) -> u32 {
    let c = crc32c::crc32c(&unit[..CRC_AT]);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, &unit[CRC_AT + 4..])
}

/// The payload of (offset, generation, seed): the pool window it starts at, and the key XORed
/// into every word of it.
#[inline]
pub(super) fn payload_key(offset: u64, generation: u32, seed: u64) -> (usize, u64) {
    let key = unit_key(offset, generation, seed);
    ((key >> 51) as usize % POOL_WORDS, key)
}

/// Write the payload words of pool window `start` XORed with `key` into `payload` (4064 bytes).
#[inline]
fn fill_payload(payload: &mut [u8], start: usize, key: u64) {
    let src = &pool()[start..start + PAYLOAD_WORDS];
    for (dst, w) in payload.chunks_exact_mut(8).zip(src) {
        dst.copy_from_slice(&(w ^ key).to_le_bytes());
    }
}

/// Whether `payload` (4064 bytes) is exactly pool window `start` XORed with `key`. Reads every
/// word (no early exit, so it vectorises); one pass, no writes.
#[inline]
pub(super) fn payload_matches(payload: &[u8], start: usize, key: u64) -> bool {
    let src = &pool()[start..start + PAYLOAD_WORDS];
    payload.chunks_exact(8).zip(src).fold(0u64, |acc, (b, w)| {
        acc | (u64::from_le_bytes(b.try_into().expect("8 bytes")) ^ key ^ w)
    }) == 0
}

/// Stamp one unit. The crc comes from [`super::crc_tables`], not from a pass over the unit.
#[inline]
pub fn stamp_unit(unit: &mut [u8], offset: u64, generation: u32, seed: u64) {
    debug_assert_eq!(unit.len(), VERIFY_UNIT);
    let (start, key) = payload_key(offset, generation, seed);
    let crc = super::crc_tables::stamped_crc(offset, generation, seed, start, key);
    unit[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    unit[8..16].copy_from_slice(&offset.to_le_bytes());
    unit[16..20].copy_from_slice(&generation.to_le_bytes());
    unit[20..24].copy_from_slice(&crc.to_le_bytes());
    unit[24..32].copy_from_slice(&seed.to_le_bytes());
    fill_payload(&mut unit[HEADER_LEN..], start, key);
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
