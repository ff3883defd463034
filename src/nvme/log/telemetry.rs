//! Telemetry Controller-Initiated log (LID 08h): the header only (its first 512 bytes). The
//! data areas (the full dump) are out of scope. Pure parser.
//!
//! Header layout (NVMe base specification, little-endian): log identifier @0, IEEE OUI @5..7,
//! data area 1/2/3 last block @8, @10, @12 (u16), data area 4 last block @16 (u32, NVMe 2.0),
//! host-initiated data generation number @381, controller-initiated data available @382,
//! controller-initiated data generation number @383, reason identifier @384..511.

use crate::nvme::{ParseError, le, need};

pub const LID_CTRL: u8 = 0x08;
/// The header: the first 512-byte block.
pub const HEADER_LEN: usize = 512;

const WHAT: &str = "telemetry controller-initiated log 08h header";

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct TelemetryHeader {
    /// @0, 08h for this page.
    pub log_identifier: u8,
    /// @5..7
    pub ieee_oui: [u8; 3],
    /// @8, @10, @12, @16
    pub data_area_last_block: [u32; 4],
    /// @381
    pub host_generation: u8,
    /// @382: 1 when the controller holds controller-initiated data not yet read in full.
    pub ctrl_data_available: u8,
    /// @383: changes each time the controller captures new controller-initiated data.
    pub ctrl_generation: u8,
    /// @384..511, vendor specific: kept as hex for the record.
    pub reason_identifier: String,
}

pub fn parse(b: &[u8]) -> Result<TelemetryHeader, ParseError> {
    need(WHAT, b, HEADER_LEN)?;
    if b[0] != LID_CTRL {
        return Err(ParseError::Invalid {
            what: WHAT,
            detail: format!("log identifier byte is {:#04x}, expected 0x08", b[0]),
        });
    }
    let reason = &b[384..512];
    let used = reason.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    Ok(TelemetryHeader {
        log_identifier: b[0],
        ieee_oui: [b[5], b[6], b[7]],
        data_area_last_block: [
            u32::from(le::u16(b, 8)),
            u32::from(le::u16(b, 10)),
            u32::from(le::u16(b, 12)),
            le::u32(b, 16),
        ],
        host_generation: b[381],
        ctrl_data_available: b[382],
        ctrl_generation: b[383],
        reason_identifier: reason[..used].iter().map(|x| format!("{x:02x}")).collect(),
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// A header with every field distinct and this controller-initiated generation number.
    pub fn header(generation: u8) -> Vec<u8> {
        let mut b = vec![0u8; super::HEADER_LEN];
        b[0] = 0x08;
        b[1..5].copy_from_slice(&[0xee; 4]); // reserved
        b[5..8].copy_from_slice(&[0x00, 0x1b, 0x44]);
        b[8..10].copy_from_slice(&0x0109u16.to_le_bytes());
        b[10..12].copy_from_slice(&0x020bu16.to_le_bytes());
        b[12..14].copy_from_slice(&0x030du16.to_le_bytes());
        b[16..20].copy_from_slice(&0x0004_0011u32.to_le_bytes());
        b[381] = 0x7d;
        b[382] = 1;
        b[383] = generation;
        b[384] = 0xab;
        b[385] = 0xcd;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field() {
        let h = parse(&testdata::header(0x2a)).expect("parse");
        assert_eq!(h.log_identifier, 8);
        assert_eq!(h.ieee_oui, [0x00, 0x1b, 0x44]);
        assert_eq!(
            h.data_area_last_block,
            [0x0109, 0x020b, 0x030d, 0x0004_0011]
        );
        assert_eq!(h.host_generation, 0x7d);
        assert_eq!(h.ctrl_data_available, 1);
        assert_eq!(h.ctrl_generation, 0x2a);
        assert_eq!(h.reason_identifier, "abcd");
    }

    #[test]
    fn rejects_short_or_foreign_pages() {
        let b = testdata::header(1);
        assert!(matches!(
            parse(&b[..383]),
            Err(ParseError::Short { need: 512, .. })
        ));
        let mut host = b.clone();
        host[0] = 0x07;
        let e = parse(&host).unwrap_err();
        assert!(e.to_string().contains("0x07"), "{e}");
    }
}
