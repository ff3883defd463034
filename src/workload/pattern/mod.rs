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
//! word (the pool stays in L2). Neither side makes a crc pass over the unit: stamping takes
//! the crc32c from tables of its header fields and payload key (`crc_tables`: a CRC is affine,
//! so the crc of a stamped unit is an XOR of precomputed parts), and a check compares the
//! payload with the one its header names in one read-only pass, so a unit that matches has
//! that same crc. Only a unit that differs is summed in full (and regenerated, to name the
//! first bad byte). The classification below is the same as with a full crc pass.
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
//!
//! ## Where each part lives
//!
//! - `block`: the unit's bytes: header layout, payload pool, stamping, the writer seed;
//! - `check`: classifying a read unit against an expectation ([`Mismatch`], [`VerifyKind`]);
//! - `map`: stamping writes and checking reads through a [`GenMap`] (the map itself, its
//!   bookkeeping and its serialised form are the record `model::genmap`);
//! - `counters`: the per-target tally of mismatches ([`VerifyCounters`]).

mod block;
mod check;
mod counters;
mod crc_tables;
mod map;
mod state;
#[cfg(test)]
mod tests;

pub use crate::model::genmap::{Expect, GenMap, GenMapError, RECOVERY_JUMP, VERIFY_UNIT};
pub use crate::model::walk::walk_fits;
pub use block::{HEADER_LEN, HeaderView, MAGIC, new_seed, stamp, stamp_unit};
pub use check::{Mismatch, VerifyKind, check, check_unit};
pub use counters::VerifyCounters;
pub use crc_tables::warm as warm_crc_tables;
pub use state::VerifyState;

/// The inline-verify hook lives with the other hot-path hooks.
pub use crate::workload::hooks::VerifyHook;
