//! SMART / Health Information (log page 02h, 512 bytes). Pure parser.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0x02;
pub const LEN: usize = 512;

/// Critical warning bits and their `condition` label values.
pub const CRITICAL_WARNING_BITS: [(u8, &str); 6] = [
    (0, "spare"),
    (1, "temperature"),
    (2, "reliability"),
    (3, "read_only"),
    (4, "volatile_backup"),
    (5, "pmr_read_only"),
];

/// Every field of the SMART log, raw units as the drive reports them. Deserializable (missing
/// fields default to 0) so the checkpoint's soak-start copy can be read back.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SmartLog {
    /// @0
    pub critical_warning: u8,
    /// @1, kelvin
    pub temperature: u16,
    /// @3, percent
    pub avail_spare: u8,
    /// @4, percent
    pub spare_thresh: u8,
    /// @5, percent (may exceed 100)
    pub percent_used: u8,
    /// @6
    pub endurance_grp_critical_warning_summary: u8,
    /// @32, units of 512000 bytes
    pub data_units_read: u128,
    /// @48, units of 512000 bytes
    pub data_units_written: u128,
    /// @64
    pub host_read_commands: u128,
    /// @80
    pub host_write_commands: u128,
    /// @96, minutes
    pub controller_busy_time: u128,
    /// @112
    pub power_cycles: u128,
    /// @128, hours
    pub power_on_hours: u128,
    /// @144
    pub unsafe_shutdowns: u128,
    /// @160
    pub media_errors: u128,
    /// @176
    pub num_err_log_entries: u128,
    /// @192, minutes
    pub warning_temp_time: u32,
    /// @196, minutes
    pub critical_comp_time: u32,
    /// @200, 8 x kelvin, 0 = not implemented
    pub temp_sensor: [u16; 8],
    /// @216
    pub thm_temp1_trans_count: u32,
    /// @220
    pub thm_temp2_trans_count: u32,
    /// @224, seconds
    pub thm_temp1_total_time: u32,
    /// @228, seconds
    pub thm_temp2_total_time: u32,
}

impl SmartLog {
    /// Kelvin to celsius (the drive reports whole kelvin). Computed in hundredths so the
    /// result is the double nearest to the decimal value (323 K prints as 49.85).
    pub fn kelvin_to_celsius(k: u16) -> f64 {
        (f64::from(k) * 100.0 - 27_315.0) / 100.0
    }

    /// Implemented sensors as (1-based index, kelvin).
    pub fn sensors(&self) -> impl Iterator<Item = (usize, u16)> + '_ {
        self.temp_sensor
            .iter()
            .enumerate()
            .filter(|(_, k)| **k != 0)
            .map(|(i, k)| (i + 1, *k))
    }

    pub fn data_written_bytes(&self) -> u128 {
        self.data_units_written.saturating_mul(512_000)
    }

    pub fn data_read_bytes(&self) -> u128 {
        self.data_units_read.saturating_mul(512_000)
    }
}

pub fn parse(b: &[u8]) -> Result<SmartLog, ParseError> {
    need("SMART log 02h", b, 232)?;
    let mut temp_sensor = [0u16; 8];
    for (i, t) in temp_sensor.iter_mut().enumerate() {
        *t = le::u16(b, 200 + 2 * i);
    }
    Ok(SmartLog {
        critical_warning: b[0],
        temperature: le::u16(b, 1),
        avail_spare: b[3],
        spare_thresh: b[4],
        percent_used: b[5],
        endurance_grp_critical_warning_summary: b[6],
        data_units_read: le::u128(b, 32),
        data_units_written: le::u128(b, 48),
        host_read_commands: le::u128(b, 64),
        host_write_commands: le::u128(b, 80),
        controller_busy_time: le::u128(b, 96),
        power_cycles: le::u128(b, 112),
        power_on_hours: le::u128(b, 128),
        unsafe_shutdowns: le::u128(b, 144),
        media_errors: le::u128(b, 160),
        num_err_log_entries: le::u128(b, 176),
        warning_temp_time: le::u32(b, 192),
        critical_comp_time: le::u32(b, 196),
        temp_sensor,
        thm_temp1_trans_count: le::u32(b, 216),
        thm_temp2_trans_count: le::u32(b, 220),
        thm_temp1_total_time: le::u32(b, 224),
        thm_temp2_total_time: le::u32(b, 228),
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// A page where every field has a distinct value; the 128-bit counters sit above 2^64.
    pub fn smart() -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0] = 0b10_0101; // spare, reliability, pmr_read_only
        b[1..3].copy_from_slice(&318u16.to_le_bytes());
        b[3] = 97;
        b[4] = 10;
        b[5] = 104; // above 100: must not be clamped
        b[6] = 0x04;
        let mut put = |o: usize, v: u128| b[o..o + 16].copy_from_slice(&v.to_le_bytes());
        put(32, (1u128 << 64) + 32);
        put(48, (3u128 << 64) + 48);
        put(64, 64_000_064);
        put(80, 80_000_080);
        put(96, 96);
        put(112, 112);
        put(128, 12_800);
        put(144, 144);
        put(160, (1u128 << 100) + 160);
        put(176, 176);
        b[192..196].copy_from_slice(&192u32.to_le_bytes());
        b[196..200].copy_from_slice(&196u32.to_le_bytes());
        for (i, k) in [301u16, 302, 0, 304, 0, 0, 0, 308].iter().enumerate() {
            b[200 + 2 * i..202 + 2 * i].copy_from_slice(&k.to_le_bytes());
        }
        b[216..220].copy_from_slice(&216u32.to_le_bytes());
        b[220..224].copy_from_slice(&220u32.to_le_bytes());
        b[224..228].copy_from_slice(&224u32.to_le_bytes());
        b[228..232].copy_from_slice(&228u32.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDBUILT: &[u8] = include_bytes!("../../../tests/fixtures/nvme/handbuilt/smart.bin");

    #[test]
    fn parses_every_field_of_the_handbuilt_page() {
        assert_eq!(HANDBUILT, testdata::smart().as_slice(), "fixture drifted");
        let s = parse(HANDBUILT).expect("parse");
        assert_eq!(s.critical_warning, 0b10_0101);
        assert_eq!(s.temperature, 318);
        assert_eq!(s.avail_spare, 97);
        assert_eq!(s.spare_thresh, 10);
        assert_eq!(s.percent_used, 104);
        assert_eq!(s.endurance_grp_critical_warning_summary, 4);
        assert_eq!(s.data_units_read, (1u128 << 64) + 32);
        assert_eq!(s.data_units_written, (3u128 << 64) + 48);
        assert_eq!(s.host_read_commands, 64_000_064);
        assert_eq!(s.host_write_commands, 80_000_080);
        assert_eq!(s.controller_busy_time, 96);
        assert_eq!(s.power_cycles, 112);
        assert_eq!(s.power_on_hours, 12_800);
        assert_eq!(s.unsafe_shutdowns, 144);
        assert_eq!(s.media_errors, (1u128 << 100) + 160);
        assert_eq!(s.num_err_log_entries, 176);
        assert_eq!(s.warning_temp_time, 192);
        assert_eq!(s.critical_comp_time, 196);
        assert_eq!(s.temp_sensor, [301, 302, 0, 304, 0, 0, 0, 308]);
        assert_eq!(
            s.sensors().collect::<Vec<_>>(),
            vec![(1, 301), (2, 302), (4, 304), (8, 308)]
        );
        assert_eq!(s.thm_temp1_trans_count, 216);
        assert_eq!(s.thm_temp2_trans_count, 220);
        assert_eq!(s.thm_temp1_total_time, 224);
        assert_eq!(s.thm_temp2_total_time, 228);
        assert_eq!(s.data_written_bytes(), ((3u128 << 64) + 48) * 512_000);
    }

    #[test]
    fn parses_the_qemu_page() {
        // Captured from QEMU 7.2's emulated controller (by the VM harness, tests/vm).
        let s = parse(include_bytes!(
            "../../../tests/fixtures/nvme/qemu-7.2/smart.bin"
        ))
        .expect("parse");
        assert_eq!(
            s.temperature, 323,
            "QEMU fixes the composite temperature at 323 K"
        );
        assert_eq!(s.avail_spare, 0);
        assert_eq!(s.percent_used, 0);
        assert_eq!(s.media_errors, 0);
        assert!(s.power_on_hours < 10, "a fresh VM");
        assert_eq!(s.sensors().count(), 0);
        // nvme-cli's reading of the same page (smart.json beside it): 7 read, 11 written.
        assert_eq!((s.data_units_read, s.data_units_written), (7, 11));
        assert_eq!((s.host_read_commands, s.host_write_commands), (11, 15));
        assert_eq!(s.critical_warning, 0);
        let w = parse(include_bytes!(
            "../../../tests/fixtures/nvme/qemu-7.2/smart-warn.bin"
        ))
        .expect("parse");
        assert_eq!(w.critical_warning, 22, "QMP bits plus the temperature bit");
    }

    #[test]
    fn short_page_is_an_error() {
        let e = parse(&[0u8; 200]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "SMART log 02h is 200 bytes, need at least 232"
        );
    }

    #[test]
    fn celsius_conversion() {
        assert_eq!(SmartLog::kelvin_to_celsius(323).to_string(), "49.85");
        assert_eq!(SmartLog::kelvin_to_celsius(0), -273.15);
    }
}
