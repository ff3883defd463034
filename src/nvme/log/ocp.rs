//! OCP Datacenter NVMe SSD "SMART / Health Information Extended" (log page C0h, 512 bytes).
//! Used only when bytes 496..511 hold the OCP GUID. Pure parser.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0xc0;
pub const LEN: usize = 512;

/// Bytes 496..511 of a genuine OCP C0h page.
pub const GUID: [u8; 16] = [
    0xc5, 0xaf, 0x10, 0x28, 0xea, 0xbf, 0xf2, 0xa4, 0x9c, 0x4f, 0x6f, 0x7c, 0xc9, 0x14, 0xd5, 0xaf,
];

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct OcpSmartLog {
    /// @0, bytes
    pub physical_media_units_written: u128,
    /// @16, bytes
    pub physical_media_units_read: u128,
    /// @32 (48-bit raw count)
    pub bad_user_nand_blocks_raw: u64,
    /// @38, normalized
    pub bad_user_nand_blocks_normalized: u16,
    /// @40 (48-bit raw count)
    pub bad_system_nand_blocks_raw: u64,
    /// @46
    pub bad_system_nand_blocks_normalized: u16,
    /// @48
    pub xor_recovery_count: u64,
    /// @56
    pub uncorrectable_read_error_count: u64,
    /// @64
    pub soft_ecc_error_count: u64,
    /// @72
    pub end_to_end_detected: u32,
    /// @76
    pub end_to_end_corrected: u32,
    /// @80, percent
    pub system_data_percent_used: u8,
    /// @81 (56-bit)
    pub refresh_counts: u64,
    /// @88
    pub user_data_erase_count_max: u32,
    /// @92
    pub user_data_erase_count_min: u32,
    /// @96
    pub thermal_throttling_event_count: u8,
    /// @97: 0 unthrottled, 1 first level, 2 second level, 3 shutdown
    pub thermal_throttling_status: u8,
    /// @104
    pub pcie_correctable_error_count: u64,
    /// @112
    pub incomplete_shutdowns: u32,
    /// @120, percent
    pub percent_free_blocks: u8,
    /// @128, percent
    pub capacitor_health: u16,
    /// @176, bytes
    pub endurance_estimate: u128,
    /// @494
    pub log_page_version: u16,
}

pub fn guid_matches(b: &[u8]) -> bool {
    b.len() >= LEN && b[496..512] == GUID
}

pub fn parse(b: &[u8]) -> Result<OcpSmartLog, ParseError> {
    need("OCP SMART extended log C0h", b, LEN)?;
    if !guid_matches(b) {
        return Err(ParseError::BadGuid {
            what: "OCP SMART extended log C0h",
        });
    }
    Ok(OcpSmartLog {
        physical_media_units_written: le::u128(b, 0),
        physical_media_units_read: le::u128(b, 16),
        bad_user_nand_blocks_raw: le::uint(b, 32, 6),
        bad_user_nand_blocks_normalized: le::u16(b, 38),
        bad_system_nand_blocks_raw: le::uint(b, 40, 6),
        bad_system_nand_blocks_normalized: le::u16(b, 46),
        xor_recovery_count: le::u64(b, 48),
        uncorrectable_read_error_count: le::u64(b, 56),
        soft_ecc_error_count: le::u64(b, 64),
        end_to_end_detected: le::u32(b, 72),
        end_to_end_corrected: le::u32(b, 76),
        system_data_percent_used: b[80],
        refresh_counts: le::uint(b, 81, 7),
        user_data_erase_count_max: le::u32(b, 88),
        user_data_erase_count_min: le::u32(b, 92),
        thermal_throttling_event_count: b[96],
        thermal_throttling_status: b[97],
        pcie_correctable_error_count: le::u64(b, 104),
        incomplete_shutdowns: le::u32(b, 112),
        percent_free_blocks: b[120],
        capacitor_health: le::u16(b, 128),
        endurance_estimate: le::u128(b, 176),
        log_page_version: le::u16(b, 494),
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    pub fn ocp() -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0..16].copy_from_slice(&((1u128 << 70) + 1).to_le_bytes());
        b[16..32].copy_from_slice(&0x10_0000_0016u128.to_le_bytes());
        b[32..38].copy_from_slice(&[0x20, 0, 0, 0, 0, 0x01]); // 2^40 + 0x20
        b[38..40].copy_from_slice(&38u16.to_le_bytes());
        b[40..46].copy_from_slice(&[0x28, 0, 0, 0, 0, 0]);
        b[46..48].copy_from_slice(&46u16.to_le_bytes());
        b[48..56].copy_from_slice(&48u64.to_le_bytes());
        b[56..64].copy_from_slice(&56u64.to_le_bytes());
        b[64..72].copy_from_slice(&64u64.to_le_bytes());
        b[72..76].copy_from_slice(&72u32.to_le_bytes());
        b[76..80].copy_from_slice(&76u32.to_le_bytes());
        b[80] = 80;
        b[81..88].copy_from_slice(&[0x51, 0, 0, 0, 0, 0, 0x02]);
        b[88..92].copy_from_slice(&88u32.to_le_bytes());
        b[92..96].copy_from_slice(&92u32.to_le_bytes());
        b[96] = 96;
        b[97] = 1;
        b[104..112].copy_from_slice(&104u64.to_le_bytes());
        b[112..116].copy_from_slice(&112u32.to_le_bytes());
        b[120] = 120;
        b[128..130].copy_from_slice(&128u16.to_le_bytes());
        b[176..192].copy_from_slice(&((1u128 << 65) + 176).to_le_bytes());
        b[494..496].copy_from_slice(&4u16.to_le_bytes());
        b[496..512].copy_from_slice(&super::GUID);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDBUILT: &[u8] = include_bytes!("../../../tests/fixtures/nvme/handbuilt/ocp-c0.bin");

    #[test]
    fn parses_every_field() {
        assert_eq!(HANDBUILT, testdata::ocp().as_slice(), "fixture drifted");
        let o = parse(HANDBUILT).expect("parse");
        assert_eq!(o.physical_media_units_written, (1u128 << 70) + 1);
        assert_eq!(o.physical_media_units_read, 0x10_0000_0016);
        assert_eq!(o.bad_user_nand_blocks_raw, (1u64 << 40) + 0x20);
        assert_eq!(o.bad_user_nand_blocks_normalized, 38);
        assert_eq!(o.bad_system_nand_blocks_raw, 0x28);
        assert_eq!(o.bad_system_nand_blocks_normalized, 46);
        assert_eq!(o.xor_recovery_count, 48);
        assert_eq!(o.uncorrectable_read_error_count, 56);
        assert_eq!(o.soft_ecc_error_count, 64);
        assert_eq!(o.end_to_end_detected, 72);
        assert_eq!(o.end_to_end_corrected, 76);
        assert_eq!(o.system_data_percent_used, 80);
        assert_eq!(o.refresh_counts, (2u64 << 48) + 0x51);
        assert_eq!(o.user_data_erase_count_max, 88);
        assert_eq!(o.user_data_erase_count_min, 92);
        assert_eq!(o.thermal_throttling_event_count, 96);
        assert_eq!(o.thermal_throttling_status, 1);
        assert_eq!(o.pcie_correctable_error_count, 104);
        assert_eq!(o.incomplete_shutdowns, 112);
        assert_eq!(o.percent_free_blocks, 120);
        assert_eq!(o.capacitor_health, 128);
        assert_eq!(o.endurance_estimate, (1u128 << 65) + 176);
        assert_eq!(o.log_page_version, 4);
    }

    #[test]
    fn rejects_a_page_without_the_guid() {
        let mut b = testdata::ocp();
        b[511] ^= 0xff;
        assert!(!guid_matches(&b));
        assert!(matches!(parse(&b), Err(ParseError::BadGuid { .. })));
        assert!(matches!(parse(&b[..100]), Err(ParseError::Short { .. })));
    }
}
