//! Firmware Slot Information (log page 03h, 512 bytes). Pure parser.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0x03;
pub const LEN: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct FwSlotLog {
    /// Active firmware info @0: bits 2:0 the active slot, bits 6:4 the slot activated at the
    /// next reset (0 = none).
    pub afi: u8,
    /// Firmware revision per slot 1..7 @8 + 8 * i; empty = slot unused.
    pub slots: [String; 7],
}

impl FwSlotLog {
    pub fn active_slot(&self) -> u8 {
        self.afi & 0x7
    }
    pub fn next_slot(&self) -> u8 {
        (self.afi >> 4) & 0x7
    }
    /// The revision in the active slot.
    pub fn active_revision(&self) -> Option<&str> {
        let s = usize::from(self.active_slot());
        (1..=7)
            .contains(&s)
            .then(|| self.slots[s - 1].as_str())
            .filter(|r| !r.is_empty())
    }
}

pub fn parse(b: &[u8]) -> Result<FwSlotLog, ParseError> {
    need("Firmware Slot log 03h", b, 64)?;
    let slots = std::array::from_fn(|i| le::ascii(b, 8 + 8 * i, 8));
    Ok(FwSlotLog { afi: b[0], slots })
}

#[cfg(test)]
pub(crate) mod testdata {
    pub fn fw_slot() -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0] = 0x32; // active slot 2, slot 3 at next reset
        b[8..16].copy_from_slice(b"1.0.0   ");
        b[16..24].copy_from_slice(b"2.0.1   ");
        b[24..32].copy_from_slice(b"3.0.2-rc");
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDBUILT: &[u8] = include_bytes!("../../../tests/fixtures/nvme/handbuilt/fw-slot.bin");

    #[test]
    fn parses_slots() {
        assert_eq!(HANDBUILT, testdata::fw_slot().as_slice(), "fixture drifted");
        let f = parse(HANDBUILT).expect("parse");
        assert_eq!(f.active_slot(), 2);
        assert_eq!(f.next_slot(), 3);
        assert_eq!(f.slots[0], "1.0.0");
        assert_eq!(f.slots[2], "3.0.2-rc");
        assert_eq!(f.slots[3], "");
        assert_eq!(f.active_revision(), Some("2.0.1"));
    }

    #[test]
    fn parses_the_qemu_page() {
        let f = parse(include_bytes!(
            "../../../tests/fixtures/nvme/qemu-7.2/fw-slot.bin"
        ))
        .expect("parse");
        assert_eq!(f.active_slot(), 1);
        assert_eq!(f.active_revision(), Some("1.0"));
        assert_eq!(f.next_slot(), 0);
    }
}
