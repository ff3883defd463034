//! Error Information (log page 01h): 64-byte entries, newest first. Pure parser.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0x01;
pub const ENTRY_LEN: usize = 64;
/// nvsoak reads at most this many of the newest entries per poll.
pub const MAX_ENTRIES: usize = 64;

/// One error information entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ErrorEntry {
    /// @0, unique and increasing; 0 marks an empty entry.
    pub error_count: u64,
    /// @8
    pub sqid: u16,
    /// @10
    pub cmdid: u16,
    /// @12 bits 15:1: the status field (SC [7:0], SCT [10:8], CRD, M, DNR).
    pub status: u16,
    /// @12 bit 0
    pub phase: bool,
    /// @14
    pub parm_error_location: u16,
    /// @16
    pub lba: u64,
    /// @24
    pub nsid: u32,
    /// @28
    pub vs: u8,
    /// @29
    pub trtype: u8,
    /// @32
    pub cs: u64,
    /// @40
    pub trtype_spec_info: u16,
}

impl ErrorEntry {
    /// `0xSCT_SC` as a label, e.g. `0x281` for an unrecovered read error.
    pub fn status_label(&self) -> String {
        format!("{:#x}", self.status & 0x7ff)
    }
}

/// Parse as many whole entries as the buffer holds, dropping empty ones (error count 0).
pub fn parse(b: &[u8]) -> Result<Vec<ErrorEntry>, ParseError> {
    need("Error Information log 01h", b, ENTRY_LEN)?;
    let mut out = Vec::new();
    for e in b.chunks_exact(ENTRY_LEN) {
        let error_count = le::u64(e, 0);
        if error_count == 0 {
            continue;
        }
        let sf = le::u16(e, 12);
        out.push(ErrorEntry {
            error_count,
            sqid: le::u16(e, 8),
            cmdid: le::u16(e, 10),
            status: sf >> 1,
            phase: sf & 1 != 0,
            parm_error_location: le::u16(e, 14),
            lba: le::u64(e, 16),
            nsid: le::u32(e, 24),
            vs: e[28],
            trtype: e[29],
            cs: le::u64(e, 32),
            trtype_spec_info: le::u16(e, 40),
        });
    }
    Ok(out)
}

/// How many entries to request: ELPE is 0-based; nvsoak reads at most [`MAX_ENTRIES`].
pub fn entries_to_read(elpe: u8) -> usize {
    (usize::from(elpe) + 1).min(MAX_ENTRIES)
}

#[cfg(test)]
pub(crate) mod testdata {
    /// Four entries: three with distinct fields, one empty (error count 0) in between.
    pub fn error_log() -> Vec<u8> {
        let mut b = vec![0u8; 4 * super::ENTRY_LEN];
        let mut put = |i: usize, count: u64, status: u16, lba: u64| {
            let e = &mut b[i * 64..(i + 1) * 64];
            e[0..8].copy_from_slice(&count.to_le_bytes());
            e[8..10].copy_from_slice(&(i as u16 + 1).to_le_bytes());
            e[10..12].copy_from_slice(&(0x100 + i as u16).to_le_bytes());
            e[12..14].copy_from_slice(&((status << 1) | 1).to_le_bytes());
            e[14..16].copy_from_slice(&0x0a0bu16.to_le_bytes());
            e[16..24].copy_from_slice(&lba.to_le_bytes());
            e[24..28].copy_from_slice(&1u32.to_le_bytes());
            e[28] = 0x5a;
            e[29] = 3;
            e[32..40].copy_from_slice(&0xc5c5u64.to_le_bytes());
            e[40..42].copy_from_slice(&0x4242u16.to_le_bytes());
        };
        put(0, 9, 0x281, 800); // unrecovered read error
        put(1, 8, 0x281, 801);
        put(3, 7, 0x002, 0); // invalid field
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDBUILT: &[u8] = include_bytes!("../../../tests/fixtures/nvme/handbuilt/error.bin");

    #[test]
    fn parses_entries_and_skips_empty_ones() {
        assert_eq!(
            HANDBUILT,
            testdata::error_log().as_slice(),
            "fixture drifted"
        );
        let es = parse(HANDBUILT).expect("parse");
        assert_eq!(es.len(), 3);
        let e = &es[0];
        assert_eq!(e.error_count, 9);
        assert_eq!(e.sqid, 1);
        assert_eq!(e.cmdid, 0x100);
        assert_eq!(e.status, 0x281);
        assert!(e.phase);
        assert_eq!(e.parm_error_location, 0x0a0b);
        assert_eq!(e.lba, 800);
        assert_eq!(e.nsid, 1);
        assert_eq!(e.vs, 0x5a);
        assert_eq!(e.trtype, 3);
        assert_eq!(e.cs, 0xc5c5);
        assert_eq!(e.trtype_spec_info, 0x4242);
        assert_eq!(es[2].sqid, 4);
        let labels: Vec<String> = es.iter().map(|e| e.status_label()).collect();
        assert_eq!(labels, ["0x281", "0x281", "0x2"]);
    }

    #[test]
    fn qemu_error_log_is_empty() {
        let b = include_bytes!("../../../tests/fixtures/nvme/qemu-7.2/error.bin");
        assert_eq!(b.len(), 4096);
        assert!(parse(b).expect("parse").is_empty());
    }

    #[test]
    fn entry_count_is_bounded() {
        assert_eq!(entries_to_read(0), 1);
        assert_eq!(entries_to_read(15), 16);
        assert_eq!(entries_to_read(255), 64);
    }
}
