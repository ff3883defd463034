//! Stamping writes with the generation map's next generations and checking reads against it,
//! unit by unit, learning recovered units as they check out. The map is the record
//! `model::genmap`; these methods are the verifier's, so they live beside the pattern.

use super::{Expect, GenMap, Mismatch, VERIFY_UNIT, check_unit, stamp_unit};

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
