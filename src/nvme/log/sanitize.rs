//! Sanitize Status log (log page 81h, 512 bytes). Pure parser.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0x81;
pub const LEN: usize = 512;

/// The state of the most recent sanitize operation (SSTAT bits 2:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SanitizeState {
    /// The subsystem was never sanitized.
    Never,
    Completed,
    InProgress,
    Failed,
    /// Completed, and the media was not deallocated afterwards (No-Deallocate).
    CompletedNoDeallocate,
    Reserved(u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SanitizeStatus {
    /// Progress of the operation in progress, in 65536ths (SPROG @0..1).
    pub progress: u16,
    pub state: SanitizeState,
    /// Overwrite passes completed (SSTAT bits 7:3).
    pub overwrite_passes: u8,
    /// Global Data Erased (SSTAT bit 8): no user data written since the last sanitize.
    pub global_data_erased: bool,
    /// The command dword 10 of the operation (SCDW10 @4..7).
    pub cdw10: u32,
    /// Estimated seconds for an overwrite, block erase and crypto erase (@8, @12, @16;
    /// FFFFFFFFh = no estimate).
    pub estimate_overwrite: u32,
    pub estimate_block: u32,
    pub estimate_crypto: u32,
}

impl SanitizeStatus {
    /// Progress as a fraction 0..1.
    pub fn fraction(&self) -> f64 {
        f64::from(self.progress) / 65536.0
    }
}

pub fn parse(b: &[u8]) -> Result<SanitizeStatus, ParseError> {
    need("Sanitize Status log 81h", b, 20)?;
    let sstat = le::u16(b, 2);
    let state = match sstat & 0x7 {
        0 => SanitizeState::Never,
        1 => SanitizeState::Completed,
        2 => SanitizeState::InProgress,
        3 => SanitizeState::Failed,
        4 => SanitizeState::CompletedNoDeallocate,
        n => SanitizeState::Reserved(n as u8),
    };
    Ok(SanitizeStatus {
        progress: le::u16(b, 0),
        state,
        overwrite_passes: ((sstat >> 3) & 0x1f) as u8,
        global_data_erased: sstat & 0x100 != 0,
        cdw10: le::u32(b, 4),
        estimate_overwrite: le::u32(b, 8),
        estimate_block: le::u32(b, 12),
        estimate_crypto: le::u32(b, 16),
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// The checked-in fixture: in progress at a quarter, 3 overwrite passes, global data
    /// erased, SCDW10 0x213, estimates 7200 / 180 / 9 s.
    pub fn status() -> Vec<u8> {
        page(0x4000, 2 | (3 << 3) | 0x100, 0x0000_0213)
    }

    pub fn page(progress: u16, sstat: u16, cdw10: u32) -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0..2].copy_from_slice(&progress.to_le_bytes());
        b[2..4].copy_from_slice(&sstat.to_le_bytes());
        b[4..8].copy_from_slice(&cdw10.to_le_bytes());
        b[8..12].copy_from_slice(&7200u32.to_le_bytes());
        b[12..16].copy_from_slice(&180u32.to_le_bytes());
        b[16..20].copy_from_slice(&9u32.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field() {
        // In progress (2), 3 overwrite passes done, global data erased.
        const HANDBUILT: &[u8] =
            include_bytes!("../../../tests/fixtures/nvme/handbuilt/sanitize.bin");
        assert_eq!(HANDBUILT, testdata::status().as_slice(), "fixture drifted");
        let s = parse(HANDBUILT).expect("parse");
        assert_eq!(s.progress, 0x4000);
        assert!((s.fraction() - 0.25).abs() < 1e-9);
        assert_eq!(s.state, SanitizeState::InProgress);
        assert_eq!(s.overwrite_passes, 3);
        assert!(s.global_data_erased);
        assert_eq!(s.cdw10, 0x213);
        assert_eq!(
            (s.estimate_overwrite, s.estimate_block, s.estimate_crypto),
            (7200, 180, 9)
        );
    }

    #[test]
    fn states() {
        for (v, st) in [
            (0, SanitizeState::Never),
            (1, SanitizeState::Completed),
            (3, SanitizeState::Failed),
            (4, SanitizeState::CompletedNoDeallocate),
            (6, SanitizeState::Reserved(6)),
        ] {
            let s = parse(&testdata::page(0xffff, v, 0)).expect("parse");
            assert_eq!(s.state, st);
            assert!(!s.global_data_erased);
            assert_eq!(s.overwrite_passes, 0);
        }
        assert!(parse(&[0u8; 8]).is_err());
    }
}
