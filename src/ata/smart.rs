//! SMART READ DATA (B0h/D0h), READ THRESHOLDS (B0h/D1h) and RETURN STATUS (B0h/DAh). Pure
//! parsers: bytes (or the returned registers) in, structs out.
//!
//! Both pages hold 30 entries of 12 bytes from offset 2. Data: id, flags (u16), value, worst,
//! raw (48 bits, little-endian), reserved. Thresholds: id, threshold, 10 reserved. Byte 511 is
//! a checksum making the 512 bytes sum to zero; like smartctl, a bad one is reported and the
//! page still used.

use super::{AtaRegs, ParseError, RegSource, SECTOR, need, sector_sum};

pub const ENTRIES: usize = 30;
const ENTRY_LEN: usize = 12;

/// One attribute of the SMART data page.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RawAttr {
    pub id: u8,
    pub flags: u16,
    pub value: u8,
    pub worst: u8,
    pub raw: u64,
}

/// The SMART data page.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct SmartData {
    pub revision: u16,
    /// The entries with a nonzero id, in page order.
    pub attrs: Vec<RawAttr>,
    /// Off-line data collection status, byte 362.
    pub offline_status: u8,
    /// Self-test execution status, byte 363.
    pub self_test_status: u8,
    pub checksum_ok: bool,
}

/// The thresholds page: (id, threshold) for every nonzero id.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Thresholds {
    pub revision: u16,
    pub entries: Vec<(u8, u8)>,
    pub checksum_ok: bool,
}

/// An attribute with its threshold and name, as smartctl's `ata_smart_attributes.table`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Attribute {
    pub id: u8,
    pub name: &'static str,
    pub flags: u16,
    pub value: u8,
    pub worst: u8,
    /// None when the thresholds page was not read or lists no entry for this id.
    pub thresh: Option<u8>,
    pub raw: u64,
}

impl Attribute {
    /// Flags bit 0: a pre-failure attribute (its threshold predicts failure).
    pub fn prefailure(&self) -> bool {
        self.flags & 1 != 0
    }
    /// Flags bit 1: updated during normal operation (not only off-line).
    pub fn updated_online(&self) -> bool {
        self.flags & 2 != 0
    }
    /// The normalized value is at or below a nonzero threshold (smartctl's `FAILING_NOW`).
    pub fn failing_now(&self) -> bool {
        matches!(self.thresh, Some(t) if t != 0 && self.value <= t)
    }
    /// The worst value was ever at or below a nonzero threshold (smartctl's `In_the_past`).
    pub fn failed_in_the_past(&self) -> bool {
        matches!(self.thresh, Some(t) if t != 0 && self.worst <= t)
    }
}

pub fn parse_data(b: &[u8]) -> Result<SmartData, ParseError> {
    need("SMART data", b, SECTOR)?;
    let attrs = (0..ENTRIES)
        .map(|i| &b[2 + ENTRY_LEN * i..2 + ENTRY_LEN * (i + 1)])
        .filter(|e| e[0] != 0)
        .map(|e| RawAttr {
            id: e[0],
            flags: u16::from_le_bytes([e[1], e[2]]),
            value: e[3],
            worst: e[4],
            raw: e[5..11]
                .iter()
                .rev()
                .fold(0u64, |a, x| a << 8 | u64::from(*x)),
        })
        .collect();
    Ok(SmartData {
        revision: u16::from_le_bytes([b[0], b[1]]),
        attrs,
        offline_status: b[362],
        self_test_status: b[363],
        checksum_ok: sector_sum(b) == 0,
    })
}

pub fn parse_thresholds(b: &[u8]) -> Result<Thresholds, ParseError> {
    need("SMART thresholds", b, SECTOR)?;
    let entries = (0..ENTRIES)
        .map(|i| (b[2 + ENTRY_LEN * i], b[3 + ENTRY_LEN * i]))
        .filter(|(id, _)| *id != 0)
        .collect();
    Ok(Thresholds {
        revision: u16::from_le_bytes([b[0], b[1]]),
        entries,
        checksum_ok: sector_sum(b) == 0,
    })
}

/// The attribute table: the data page's entries with their thresholds and names.
pub fn merge(data: &SmartData, thresholds: Option<&Thresholds>) -> Vec<Attribute> {
    data.attrs
        .iter()
        .map(|a| Attribute {
            id: a.id,
            name: attribute_name(a.id),
            flags: a.flags,
            value: a.value,
            worst: a.worst,
            thresh: thresholds.and_then(|t| {
                t.entries
                    .iter()
                    .find(|(id, _)| *id == a.id)
                    .map(|(_, th)| *th)
            }),
            raw: a.raw,
        })
        .collect()
}

/// SMART RETURN STATUS, from LBA mid/high of the returned registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SmartStatus {
    /// 4Fh/C2h.
    Passed,
    /// F4h/2Ch: a pre-failure attribute is at or below its threshold.
    ThresholdExceeded,
}

impl SmartStatus {
    /// As smartctl's `smart_status.passed`.
    pub fn passed(self) -> bool {
        self == SmartStatus::Passed
    }
}

pub fn parse_status(r: &AtaRegs) -> Result<SmartStatus, ParseError> {
    const WHAT: &str = "SMART RETURN STATUS";
    if r.source == RegSource::None {
        return Err(ParseError::Invalid {
            what: WHAT,
            detail: "the device returned no ATA registers (a SAT translator without CK_COND \
                     support); the SMART status cannot be read through it"
                .into(),
        });
    }
    match (r.lba_mid(), r.lba_high()) {
        (0x4f, 0xc2) => Ok(SmartStatus::Passed),
        (0xf4, 0x2c) => Ok(SmartStatus::ThresholdExceeded),
        (mid, high) => Err(ParseError::Invalid {
            what: WHAT,
            detail: format!("LBA mid/high {mid:#04x}/{high:#04x} is neither passed nor failed"),
        }),
    }
}

/// smartmontools' default attribute names (drivedb.h `DEFAULT` entry); vendor tables override
/// some of them for particular drive families.
pub fn attribute_name(id: u8) -> &'static str {
    match id {
        1 => "Raw_Read_Error_Rate",
        2 => "Throughput_Performance",
        3 => "Spin_Up_Time",
        4 => "Start_Stop_Count",
        5 => "Reallocated_Sector_Ct",
        6 => "Read_Channel_Margin",
        7 => "Seek_Error_Rate",
        8 => "Seek_Time_Performance",
        9 => "Power_On_Hours",
        10 => "Spin_Retry_Count",
        11 => "Calibration_Retry_Count",
        12 => "Power_Cycle_Count",
        13 => "Read_Soft_Error_Rate",
        175 => "Program_Fail_Count_Chip",
        176 => "Erase_Fail_Count_Chip",
        177 => "Wear_Leveling_Count",
        178 => "Used_Rsvd_Blk_Cnt_Chip",
        179 => "Used_Rsvd_Blk_Cnt_Tot",
        180 => "Unused_Rsvd_Blk_Cnt_Tot",
        181 => "Program_Fail_Cnt_Total",
        182 => "Erase_Fail_Count_Total",
        183 => "Runtime_Bad_Block",
        184 => "End-to-End_Error",
        187 => "Reported_Uncorrect",
        188 => "Command_Timeout",
        189 => "High_Fly_Writes",
        190 => "Airflow_Temperature_Cel",
        191 => "G-Sense_Error_Rate",
        192 => "Power-Off_Retract_Count",
        193 => "Load_Cycle_Count",
        194 => "Temperature_Celsius",
        195 => "Hardware_ECC_Recovered",
        196 => "Reallocated_Event_Count",
        197 => "Current_Pending_Sector",
        198 => "Offline_Uncorrectable",
        199 => "UDMA_CRC_Error_Count",
        200 => "Multi_Zone_Error_Rate",
        201 => "Soft_Read_Error_Rate",
        202 => "Data_Address_Mark_Errs",
        203 => "Run_Out_Cancel",
        204 => "Soft_ECC_Correction",
        205 => "Thermal_Asperity_Rate",
        206 => "Flying_Height",
        207 => "Spin_High_Current",
        208 => "Spin_Buzz",
        209 => "Offline_Seek_Performnce",
        220 => "Disk_Shift",
        221 => "G-Sense_Error_Rate",
        222 => "Loaded_Hours",
        223 => "Load_Retry_Count",
        224 => "Load_Friction",
        225 => "Load_Cycle_Count",
        226 => "Load-in_Time",
        227 => "Torq-amp_Count",
        228 => "Power-off_Retract_Count",
        230 => "Head_Amplitude",
        231 => "Temperature_Celsius",
        232 => "Available_Reservd_Space",
        233 => "Media_Wearout_Indicator",
        240 => "Head_Flying_Hours",
        241 => "Total_LBAs_Written",
        242 => "Total_LBAs_Read",
        250 => "Read_Error_Retry_Rate",
        254 => "Free_Fall_Sensor",
        _ => "Unknown_Attribute",
    }
}

/// Hand-built pages with every field distinct, shared by the tests here and in `cmd`.
#[cfg(test)]
pub(crate) mod testdata {
    use super::{ENTRY_LEN, SECTOR};

    /// (id, flags, value, worst, raw)
    pub const ATTRS: [(u8, u16, u8, u8, u64); 5] = [
        (5, 0x0033, 100, 99, 0x0000_0000_0007),
        (9, 0x0032, 98, 97, 0x0000_0000_4e21),
        (194, 0x0022, 64, 41, 0x0029_0012_0024),
        (233, 0x0032, 96, 95, 0x0001_2345_6789),
        (241, 0x0032, 94, 93, 0xabcd_ef01_2345),
    ];
    /// (id, threshold): 9 has none listed, 5 and 233 nonzero.
    pub const THRESH: [(u8, u8); 4] = [(5, 10), (194, 0), (233, 96), (241, 0)];

    fn seal(b: &mut [u8]) {
        b[511] = 0u8.wrapping_sub(crate::ata::sector_sum(&b[..511]));
    }

    pub fn data() -> Vec<u8> {
        let mut b = vec![0u8; SECTOR];
        b[0] = 0x10;
        for (i, (id, flags, value, worst, raw)) in ATTRS.iter().enumerate() {
            // Leave slot 1 empty: a hole in the table is skipped.
            let o = 2 + ENTRY_LEN * if i == 0 { 0 } else { i + 1 };
            b[o] = *id;
            b[o + 1..o + 3].copy_from_slice(&flags.to_le_bytes());
            b[o + 3] = *value;
            b[o + 4] = *worst;
            b[o + 5..o + 11].copy_from_slice(&raw.to_le_bytes()[..6]);
            b[o + 11] = 0xee; // reserved, ignored
        }
        b[362] = 0x82;
        b[363] = 0xf3;
        seal(&mut b);
        b
    }

    pub fn thresholds() -> Vec<u8> {
        let mut b = vec![0u8; SECTOR];
        b[0] = 0x10;
        for (i, (id, t)) in THRESH.iter().enumerate() {
            let o = 2 + ENTRY_LEN * i;
            b[o] = *id;
            b[o + 1] = *t;
        }
        seal(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_attribute_table_with_thresholds() {
        let d = parse_data(&testdata::data()).expect("data");
        assert_eq!(d.revision, 0x10);
        assert!(d.checksum_ok);
        assert_eq!((d.offline_status, d.self_test_status), (0x82, 0xf3));
        assert_eq!(d.attrs.len(), 5, "the empty slot is skipped");
        let t = parse_thresholds(&testdata::thresholds()).expect("thresholds");
        assert!(t.checksum_ok);
        let table = merge(&d, Some(&t));
        let got: Vec<_> = table
            .iter()
            .map(|a| (a.id, a.flags, a.value, a.worst, a.raw))
            .collect();
        assert_eq!(got, testdata::ATTRS.to_vec());
        let names: Vec<_> = table.iter().map(|a| a.name).collect();
        assert_eq!(
            names,
            [
                "Reallocated_Sector_Ct",
                "Power_On_Hours",
                "Temperature_Celsius",
                "Media_Wearout_Indicator",
                "Total_LBAs_Written"
            ]
        );
        let th: Vec<_> = table.iter().map(|a| a.thresh).collect();
        assert_eq!(th, [Some(10), None, Some(0), Some(96), Some(0)]);
        assert!(table[0].prefailure() && table[0].updated_online());
        assert!(!table[1].prefailure());
        // 233: value 96 at its threshold 96 fails now; threshold 0 never fails.
        let failing: Vec<_> = table
            .iter()
            .filter(|a| a.failing_now())
            .map(|a| a.id)
            .collect();
        assert_eq!(failing, [233]);
        assert!(table[3].failed_in_the_past());
        assert!(!table[2].failing_now());
        assert!(merge(&d, None).iter().all(|a| a.thresh.is_none()));
    }

    #[test]
    fn a_bad_checksum_is_reported_not_fatal() {
        let mut b = testdata::data();
        b[511] = b[511].wrapping_add(1);
        let d = parse_data(&b).expect("parse");
        assert!(!d.checksum_ok);
        assert_eq!(d.attrs.len(), 5);
        assert!(parse_data(&b[..100]).is_err());
        assert!(parse_thresholds(&b[..511]).is_err());
    }

    #[test]
    fn return_status_passed_and_failed() {
        let r = |lba: u64, source| AtaRegs {
            lba,
            status: 0x50,
            source,
            ..AtaRegs::default()
        };
        assert_eq!(
            parse_status(&r(0xc2_4f00, RegSource::Descriptor)),
            Ok(SmartStatus::Passed)
        );
        let failed = parse_status(&r(0x2c_f400, RegSource::Fixed)).expect("failed");
        assert_eq!(failed, SmartStatus::ThresholdExceeded);
        assert!(!failed.passed());
        assert!(parse_status(&r(0x00_0000, RegSource::Descriptor)).is_err());
        let none = parse_status(&r(0xc2_4f00, RegSource::None)).unwrap_err();
        assert!(none.to_string().contains("no ATA registers"), "{none}");
    }

    #[test]
    fn names_follow_smartmontools_defaults() {
        assert_eq!(attribute_name(177), "Wear_Leveling_Count");
        assert_eq!(attribute_name(197), "Current_Pending_Sector");
        assert_eq!(attribute_name(198), "Offline_Uncorrectable");
        assert_eq!(attribute_name(199), "UDMA_CRC_Error_Count");
        assert_eq!(attribute_name(231), "Temperature_Celsius");
        assert_eq!(attribute_name(242), "Total_LBAs_Read");
        assert_eq!(attribute_name(100), "Unknown_Attribute");
    }
}
