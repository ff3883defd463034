//! OCP Datacenter NVMe SSD "Error Recovery" log (log page C1h, 512 bytes, OCP 2.0 and 2.5).
//! Used only when bytes 496..511 hold the page's GUID. Pure parser.
//!
//! Layout (little-endian): panic reset wait time @0 (u16, ms), panic reset action @2,
//! device recovery action 1 @3, panic ID @4 (u64), device capabilities @12 (u32), vendor
//! specific recovery opcode @16, VS command CDW12 @20 and CDW13 @24 (u32), VS command timeout
//! @28 (2.0), device recovery action 2 @29 and its timeout @30, panic count @31 and the
//! previous panic IDs @32..63 (2.5; zero on older drives), log page version @494, GUID @496.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0xc1;
pub const LEN: usize = 512;

/// Bytes 496..511: the GUID 5A1983BA3DFD4DABAE3430FE2131D944h, stored little-endian.
pub const GUID: [u8; 16] = [
    0x44, 0xd9, 0x31, 0x21, 0xfe, 0x30, 0x34, 0xae, 0xab, 0x4d, 0xfd, 0x3d, 0xba, 0x83, 0x19, 0x5a,
];

const WHAT: &str = "OCP error recovery log C1h";

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ErrorRecoveryLog {
    /// @0, milliseconds to wait after a panic reset.
    pub panic_reset_wait_ms: u16,
    /// @2, bit field: 0 controller reset, 1 subsystem reset, 2 PCIe FLR, 3 PERST#, 4 power
    /// cycle, 5 PCIe hot reset.
    pub panic_reset_action: u8,
    /// @3, bit field: 0 none, 1 format, 2 vendor specific command, 3 vendor analysis,
    /// 4 replace the device, 5 sanitize, 6 permanent data loss.
    pub device_recovery_action_1: u8,
    /// @4, the current panic (0 = none).
    pub panic_id: u64,
    /// @12, bit 0 panic reported through an AEN, bit 1 through CFS.
    pub device_capabilities: u32,
    /// @16
    pub vendor_recovery_opcode: u8,
    /// @20
    pub vs_cmd_cdw12: u32,
    /// @24
    pub vs_cmd_cdw13: u32,
    /// @28, seconds (OCP 2.0).
    pub vs_cmd_timeout: u8,
    /// @29, the same bits as action 1 (OCP 2.0 and later).
    pub device_recovery_action_2: u8,
    /// @30
    pub device_recovery_action_2_timeout: u8,
    /// @31, panics since manufacture (OCP 2.5; 0 on earlier drives).
    pub panic_count: u8,
    /// @32..63, the four previous panic IDs, newest first (OCP 2.5).
    pub previous_panic_ids: [u64; 4],
    /// @494
    pub log_page_version: u16,
}

pub fn guid_matches(b: &[u8]) -> bool {
    b.len() >= LEN && b[496..512] == GUID
}

pub fn parse(b: &[u8]) -> Result<ErrorRecoveryLog, ParseError> {
    need(WHAT, b, LEN)?;
    if !guid_matches(b) {
        return Err(ParseError::BadGuid { what: WHAT });
    }
    Ok(ErrorRecoveryLog {
        panic_reset_wait_ms: le::u16(b, 0),
        panic_reset_action: b[2],
        device_recovery_action_1: b[3],
        panic_id: le::u64(b, 4),
        device_capabilities: le::u32(b, 12),
        vendor_recovery_opcode: b[16],
        vs_cmd_cdw12: le::u32(b, 20),
        vs_cmd_cdw13: le::u32(b, 24),
        vs_cmd_timeout: b[28],
        device_recovery_action_2: b[29],
        device_recovery_action_2_timeout: b[30],
        panic_count: b[31],
        previous_panic_ids: [
            le::u64(b, 32),
            le::u64(b, 40),
            le::u64(b, 48),
            le::u64(b, 56),
        ],
        log_page_version: le::u16(b, 494),
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// Every field distinct; `panic_id` and `panic_count` as given.
    pub fn with_panic(panic_id: u64, panic_count: u8) -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0..2].copy_from_slice(&0x0102u16.to_le_bytes());
        b[2] = 0x05;
        b[3] = 0x0a;
        b[4..12].copy_from_slice(&panic_id.to_le_bytes());
        b[12..16].copy_from_slice(&0x0000_0003u32.to_le_bytes());
        b[16] = 0xd4;
        b[17..20].copy_from_slice(&[0xee, 0xee, 0xee]); // reserved: ignored
        b[20..24].copy_from_slice(&0x1415_1617u32.to_le_bytes());
        b[24..28].copy_from_slice(&0x1819_1a1bu32.to_le_bytes());
        b[28] = 28;
        b[29] = 0x30;
        b[30] = 30;
        b[31] = panic_count;
        b[32..40].copy_from_slice(&0x2020_0000_0000_0001u64.to_le_bytes());
        b[40..48].copy_from_slice(&0x2828_0000_0000_0002u64.to_le_bytes());
        b[48..56].copy_from_slice(&0x3030_0000_0000_0003u64.to_le_bytes());
        b[56..64].copy_from_slice(&0x3838_0000_0000_0004u64.to_le_bytes());
        b[494..496].copy_from_slice(&3u16.to_le_bytes());
        b[496..512].copy_from_slice(&super::GUID);
        b
    }

    pub fn recovery() -> Vec<u8> {
        with_panic(0x0b0a_0908_0706_0504, 7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field() {
        let o = parse(&testdata::recovery()).expect("parse");
        assert_eq!(o.panic_reset_wait_ms, 0x0102);
        assert_eq!(o.panic_reset_action, 0x05);
        assert_eq!(o.device_recovery_action_1, 0x0a);
        assert_eq!(o.panic_id, 0x0b0a_0908_0706_0504);
        assert_eq!(o.device_capabilities, 3);
        assert_eq!(o.vendor_recovery_opcode, 0xd4);
        assert_eq!(o.vs_cmd_cdw12, 0x1415_1617);
        assert_eq!(o.vs_cmd_cdw13, 0x1819_1a1b);
        assert_eq!(o.vs_cmd_timeout, 28);
        assert_eq!(o.device_recovery_action_2, 0x30);
        assert_eq!(o.device_recovery_action_2_timeout, 30);
        assert_eq!(o.panic_count, 7);
        assert_eq!(
            o.previous_panic_ids,
            [
                0x2020_0000_0000_0001,
                0x2828_0000_0000_0002,
                0x3030_0000_0000_0003,
                0x3838_0000_0000_0004
            ]
        );
        assert_eq!(o.log_page_version, 3);
    }

    #[test]
    fn guid_is_the_spec_value() {
        // 5A1983BA3DFD4DABAE3430FE2131D944h read as a little-endian 128-bit number.
        assert_eq!(
            u128::from_le_bytes(GUID),
            0x5A19_83BA_3DFD_4DAB_AE34_30FE_2131_D944
        );
    }

    #[test]
    fn rejects_short_pages_and_other_guids() {
        let b = testdata::recovery();
        assert!(matches!(
            parse(&b[..511]),
            Err(ParseError::Short { need: 512, .. })
        ));
        let mut other = b.clone();
        other[496..512].copy_from_slice(&crate::nvme::log::ocp::GUID);
        assert!(!guid_matches(&other));
        let e = parse(&other).unwrap_err();
        assert!(e.to_string().contains("C1h"), "{e}");
    }
}
