//! The crc32c of a stamped unit, computed from its header fields and payload key by table
//! lookups instead of by reading its 4 KiB.
//!
//! A CRC with a fixed length is affine over GF(2): for messages `a`, `b` of one length `L`,
//! `crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0^L)`. So `lin(x) = crc(x) ^ crc(0^4096)` is linear,
//! and a stamped unit (crc field zeroed) is the XOR of parts whose `lin` is known in advance:
//!
//! - the magic at bytes 0..8 (a constant);
//! - each byte of offset, generation and seed (bytes 8..20 and 24..32): one 256-entry table per
//!   byte position;
//! - the payload, which is a pool window (one entry per window start) XORed with the 8-byte
//!   key repeated over every payload word: one 256-entry table per key byte.
//!
//! About 30 lookups replace a pass over 4 KiB; the value is bit-for-bit the crc32c of the unit
//! (the tests compare it against the crc32c crate on random units). The tables (61 KiB) are
//! built once per process, in about 2 ms.

use std::sync::OnceLock;

use super::VERIFY_UNIT;
use super::block::{HEADER_LEN, MAGIC, PAYLOAD_WORDS, POOL_WORDS, pool};

/// Header bytes that vary between units: offset (8..16), generation (16..20), seed (24..32).
const HEADER_VARIABLE: [usize; 20] = [
    8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 24, 25, 26, 27, 28, 29, 30, 31,
];

struct Tables {
    /// `lin(magic) ^ crc(0^4096)`: the constant part of every unit's crc.
    base: u32,
    /// `lin` of byte value `b` at header position `HEADER_VARIABLE[i]`.
    header: Box<[[u32; 256]; 20]>,
    /// `lin` of key byte `j` having value `b`, repeated over every payload word.
    key: Box<[[u32; 256]; 8]>,
    /// `lin` of the payload holding the pool window starting at word `s`.
    window: Box<[u32]>,
}

/// A 256-entry table of a linear map on one byte, from its values on the 8 single bits.
fn byte_table(bit: impl FnMut(usize) -> u32) -> [u32; 256] {
    let basis: [u32; 8] = std::array::from_fn(bit);
    let mut t = [0u32; 256];
    for b in 1..256usize {
        let low = b.trailing_zeros() as usize;
        t[b] = t[b & (b - 1)] ^ basis[low];
    }
    t
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let zero = crc32c::crc32c(&[0u8; VERIFY_UNIT]);
        let mut buf = vec![0u8; VERIFY_UNIT];
        let mut lin = |set: &dyn Fn(&mut [u8])| {
            buf.fill(0);
            set(&mut buf);
            crc32c::crc32c(&buf) ^ zero
        };
        let base = lin(&|b| b[..8].copy_from_slice(&MAGIC.to_le_bytes())) ^ zero;
        let header = Box::new(std::array::from_fn(|i| {
            let at = HEADER_VARIABLE[i];
            byte_table(|k| lin(&|b| b[at] = 1 << k))
        }));
        let key = Box::new(std::array::from_fn(|j| {
            byte_table(|k| {
                lin(&|b| {
                    for w in b[HEADER_LEN..].chunks_exact_mut(8) {
                        w[j] = 1 << k;
                    }
                })
            })
        }));
        let words = pool();
        let window = (0..POOL_WORDS)
            .map(|s| {
                lin(&|b| {
                    for (dst, w) in b[HEADER_LEN..]
                        .chunks_exact_mut(8)
                        .zip(&words[s..s + PAYLOAD_WORDS])
                    {
                        dst.copy_from_slice(&w.to_le_bytes());
                    }
                })
            })
            .collect();
        Tables {
            base,
            header,
            key,
            window,
        }
    })
}

/// Build the tables now rather than on the first unit stamped or checked.
pub fn warm() {
    tables();
}

/// The crc32c (crc field zeroed) of the unit that stamping writes for (offset, generation,
/// seed), whose payload is pool window `start` XORed with `key`.
#[inline]
pub(super) fn stamped_crc(offset: u64, generation: u32, seed: u64, start: usize, key: u64) -> u32 {
    let t = tables();
    let mut var = [0u8; 20];
    var[..8].copy_from_slice(&offset.to_le_bytes());
    var[8..12].copy_from_slice(&generation.to_le_bytes());
    var[12..].copy_from_slice(&seed.to_le_bytes());
    let mut c = t.base ^ t.window[start];
    for (table, &b) in t.header.iter().zip(&var) {
        c ^= table[b as usize];
    }
    for (table, b) in t.key.iter().zip(key.to_le_bytes()) {
        c ^= table[b as usize];
    }
    c
}
