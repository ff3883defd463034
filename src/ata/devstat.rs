//! The General Purpose Log Directory (GP log 00h) and the Device Statistics log (GP log 04h).
//! Pure parsers: bytes in, structs out.
//!
//! Each Device Statistics page is 512 bytes of 8-byte little-endian entries. Entry 0 is the
//! header: revision (15:0), page number (23:16). In every statistic, bit 63 says the statistic
//! is supported and bit 62 that its value is valid (ACS-4 9.5: 61 normalized, 60 supports DSN,
//! 59 monitored condition met); the value is in bits 55:0, of which each statistic uses a
//! documented width. A statistic is used only when both bits 63 and 62 are set.

use super::{ParseError, SECTOR, need};

/// GP log addresses.
pub const LOG_DIRECTORY: u8 = 0x00;
pub const LOG_DEVICE_STATISTICS: u8 = 0x04;

/// Device Statistics pages nvsoak reads.
pub const PAGE_SUPPORTED: u8 = 0x00;
pub const PAGE_GENERAL: u8 = 0x01;
pub const PAGE_GENERAL_ERRORS: u8 = 0x04;
pub const PAGE_TEMPERATURE: u8 = 0x05;
pub const PAGE_TRANSPORT: u8 = 0x06;
pub const PAGE_SSD: u8 = 0x07;
pub const PAGES: [u8; 5] = [
    PAGE_GENERAL,
    PAGE_GENERAL_ERRORS,
    PAGE_TEMPERATURE,
    PAGE_TRANSPORT,
    PAGE_SSD,
];

const SUPPORTED: u64 = 1 << 63;
const VALID: u64 = 1 << 62;

/// The GP log directory: how many 512-byte pages each log address holds (0 = no such log).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogDirectory {
    pub version: u16,
    pub pages: Vec<u16>,
}

impl LogDirectory {
    pub fn pages_of(&self, log: u8) -> u16 {
        self.pages.get(usize::from(log)).copied().unwrap_or(0)
    }
    /// The Device Statistics log exists (IDENTIFY has no bit for it: this is authoritative).
    pub fn device_statistics(&self) -> bool {
        self.pages_of(LOG_DEVICE_STATISTICS) > 0
    }
}

/// Word 0 is the logging version; word N the page count of log N.
pub fn parse_log_directory(b: &[u8]) -> Result<LogDirectory, ParseError> {
    need("GP log directory", b, SECTOR)?;
    let w = |i: usize| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]);
    let mut pages = vec![0u16; 256];
    for (log, p) in pages.iter_mut().enumerate().skip(1) {
        *p = w(log);
    }
    Ok(LogDirectory {
        version: w(0),
        pages,
    })
}

/// The value of the statistic at byte `offset`, `bits` wide, when supported and valid.
fn stat(b: &[u8], offset: usize, bits: u32) -> Option<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[offset..offset + 8]);
    let q = u64::from_le_bytes(a);
    (q & SUPPORTED != 0 && q & VALID != 0).then(|| q & ((1u64 << bits) - 1))
}

/// A temperature statistic: a signed byte in °C; 80h means no valid value.
fn temp(b: &[u8], offset: usize) -> Option<i8> {
    stat(b, offset, 8)
        .map(|v| v as u8 as i8)
        .filter(|t| *t != i8::MIN)
}

/// Check a page's header against the page asked for.
fn header(b: &[u8], page: u8) -> Result<u16, ParseError> {
    const WHAT: &str = "Device Statistics page";
    need(WHAT, b, SECTOR)?;
    let revision = u16::from_le_bytes([b[0], b[1]]);
    if b[2] != page || revision == 0 {
        return Err(ParseError::Invalid {
            what: WHAT,
            detail: format!(
                "asked for page {page:#04x}, got page {:#04x} revision {revision}",
                b[2]
            ),
        });
    }
    Ok(revision)
}

/// Page 00h: the list of supported pages (count in byte 8, page numbers from byte 9).
pub fn parse_supported(b: &[u8]) -> Result<Vec<u8>, ParseError> {
    header(b, PAGE_SUPPORTED)?;
    let n = usize::from(b[8]).min(SECTOR - 9);
    Ok(b[9..9 + n].to_vec())
}

/// The Device Statistics figures nvsoak uses, in base units. `None` = not supported, not
/// valid, or the page was not read.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct DeviceStats {
    /// 01h @8.
    pub power_on_resets: Option<u64>,
    /// 01h @16 (hours, 32 bits) in seconds.
    pub power_on_seconds: Option<u64>,
    /// 01h @24 (logical sectors, 48 bits) in bytes.
    pub bytes_written: Option<u64>,
    /// 01h @40 (logical sectors, 48 bits) in bytes.
    pub bytes_read: Option<u64>,
    /// 04h @8, 32 bits.
    pub reported_uncorrectable: Option<u64>,
    /// 05h @8, °C.
    pub temperature_current: Option<i8>,
    /// 05h @32, °C, lifetime.
    pub temperature_highest: Option<i8>,
    /// 05h @40, °C, lifetime.
    pub temperature_lowest: Option<i8>,
    /// 05h @80 (minutes, 32 bits) in seconds.
    pub time_over_temperature_seconds: Option<u64>,
    /// 05h @88, °C.
    pub specified_max_temperature: Option<i8>,
    /// 06h @24, 32 bits.
    pub interface_crc_errors: Option<u64>,
    /// 07h @8, percent (may exceed 100).
    pub percentage_used: Option<u8>,
    /// The pages parsed into this, in order.
    pub pages: Vec<u8>,
}

impl DeviceStats {
    /// Percentage Used Endurance Indicator as a ratio (1.0 = rated endurance consumed).
    pub fn percentage_used_ratio(&self) -> Option<f64> {
        self.percentage_used.map(|p| f64::from(p) / 100.0)
    }

    /// Parse page `page` into `self`; `logical_sector_size` (from IDENTIFY) turns sector
    /// counts into bytes. Pages nvsoak does not read are checked and ignored.
    pub fn apply(
        &mut self,
        page: u8,
        b: &[u8],
        logical_sector_size: u32,
    ) -> Result<(), ParseError> {
        header(b, page)?;
        let lss = u64::from(logical_sector_size);
        match page {
            PAGE_GENERAL => {
                self.power_on_resets = stat(b, 8, 32);
                self.power_on_seconds = stat(b, 16, 32).map(|h| h * 3600);
                self.bytes_written = stat(b, 24, 48).map(|s| s.saturating_mul(lss));
                self.bytes_read = stat(b, 40, 48).map(|s| s.saturating_mul(lss));
            }
            PAGE_GENERAL_ERRORS => self.reported_uncorrectable = stat(b, 8, 32),
            PAGE_TEMPERATURE => {
                self.temperature_current = temp(b, 8);
                self.temperature_highest = temp(b, 32);
                self.temperature_lowest = temp(b, 40);
                self.time_over_temperature_seconds = stat(b, 80, 32).map(|m| m * 60);
                self.specified_max_temperature = temp(b, 88);
            }
            PAGE_TRANSPORT => self.interface_crc_errors = stat(b, 24, 32),
            PAGE_SSD => self.percentage_used = stat(b, 8, 8).map(|p| p as u8),
            _ => return Ok(()),
        }
        self.pages.push(page);
        Ok(())
    }
}

/// Hand-built pages: valid entries with distinct values, and entries that must be ignored
/// (supported but not valid, valid bit without supported, neither).
#[cfg(test)]
pub(crate) mod testdata {
    use super::{SECTOR, SUPPORTED, VALID};

    pub const OK: u64 = SUPPORTED | VALID;

    pub fn page(no: u8, entries: &[(usize, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; SECTOR];
        b[0] = 1; // revision 1
        b[2] = no;
        for (o, q) in entries {
            b[*o..*o + 8].copy_from_slice(&q.to_le_bytes());
        }
        b
    }

    pub fn supported() -> Vec<u8> {
        let mut b = page(0, &[]);
        let list = [0u8, 1, 4, 5, 6, 7];
        b[8] = list.len() as u8;
        b[9..9 + list.len()].copy_from_slice(&list);
        b
    }

    pub fn general() -> Vec<u8> {
        page(
            1,
            &[
                (8, OK | 17),
                (16, OK | 12_345),
                // Junk in bits 55:48 must not leak into the 48-bit count.
                (24, OK | 0x00ab_0000_0000_0000 | 7_000_000_000),
                (32, OK | 999),
                (40, SUPPORTED | 5_000), // supported, value not valid
            ],
        )
    }

    pub fn general_errors() -> Vec<u8> {
        page(4, &[(8, OK | 3), (16, OK | 44)])
    }

    pub fn temperature() -> Vec<u8> {
        page(
            5,
            &[
                (8, OK | 41),
                (32, OK | 0x4e),  // 78 °C
                (40, OK | 0xfb),  // -5 °C
                (48, VALID | 60), // valid bit alone: ignored
                (80, OK | 90),    // minutes
                (88, OK | 0x80),  // 80h: no valid value
            ],
        )
    }

    pub fn transport() -> Vec<u8> {
        page(6, &[(8, OK | 11), (16, 22), (24, OK | 0xdead_0007)])
    }

    pub fn ssd() -> Vec<u8> {
        page(7, &[(8, OK | 0x2000 | 104)])
    }

    pub fn log_directory(devstat_pages: u16) -> Vec<u8> {
        let mut b = vec![0u8; SECTOR];
        b[0] = 1;
        b[2 * 4..2 * 4 + 2].copy_from_slice(&devstat_pages.to_le_bytes());
        b[2 * 0x30..2 * 0x30 + 2].copy_from_slice(&9u16.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(lss: u32) -> DeviceStats {
        let mut s = DeviceStats::default();
        let pages = [
            (PAGE_GENERAL, testdata::general()),
            (PAGE_GENERAL_ERRORS, testdata::general_errors()),
            (PAGE_TEMPERATURE, testdata::temperature()),
            (PAGE_TRANSPORT, testdata::transport()),
            (PAGE_SSD, testdata::ssd()),
        ];
        for (no, b) in pages {
            s.apply(no, &b, lss).expect("apply");
        }
        s
    }

    #[test]
    fn valid_entries_in_base_units_and_invalid_ones_dropped() {
        let s = all(512);
        assert_eq!(s.power_on_resets, Some(17));
        assert_eq!(s.power_on_seconds, Some(12_345 * 3600));
        assert_eq!(s.bytes_written, Some(7_000_000_000 * 512));
        assert_eq!(s.bytes_read, None, "supported but not valid");
        assert_eq!(s.reported_uncorrectable, Some(3));
        assert_eq!(s.temperature_current, Some(41));
        assert_eq!(s.temperature_highest, Some(78));
        assert_eq!(s.temperature_lowest, Some(-5));
        assert_eq!(s.time_over_temperature_seconds, Some(90 * 60));
        assert_eq!(s.specified_max_temperature, None, "80h is no value");
        assert_eq!(s.interface_crc_errors, Some(0xdead_0007));
        assert_eq!(
            s.percentage_used,
            Some(104),
            "bits above 7:0 are not the value"
        );
        assert_eq!(s.percentage_used_ratio(), Some(1.04));
        assert_eq!(s.pages, PAGES.to_vec());
        // Bytes follow the logical sector size.
        assert_eq!(all(4096).bytes_written, Some(7_000_000_000 * 4096));
    }

    #[test]
    fn a_page_with_the_wrong_header_is_an_error() {
        let mut s = DeviceStats::default();
        let e = s.apply(PAGE_SSD, &testdata::general(), 512).unwrap_err();
        assert!(e.to_string().contains("asked for page 0x07"), "{e}");
        assert!(s.pages.is_empty());
        let mut zero_rev = testdata::ssd();
        zero_rev[0] = 0;
        assert!(s.apply(PAGE_SSD, &zero_rev, 512).is_err());
        assert!(s.apply(PAGE_SSD, &[0u8; 16], 512).is_err());
    }

    #[test]
    fn supported_pages_and_log_directory() {
        assert_eq!(
            parse_supported(&testdata::supported()).expect("parse"),
            vec![0, 1, 4, 5, 6, 7]
        );
        let d = parse_log_directory(&testdata::log_directory(8)).expect("parse");
        assert_eq!(d.version, 1);
        assert_eq!(d.pages_of(LOG_DEVICE_STATISTICS), 8);
        assert_eq!(d.pages_of(0x30), 9);
        assert!(d.device_statistics());
        let none = parse_log_directory(&testdata::log_directory(0)).expect("parse");
        assert!(!none.device_statistics());
    }
}
