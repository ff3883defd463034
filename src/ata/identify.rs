//! IDENTIFY DEVICE (ECh) data, 256 little-endian words. Pure parser: bytes in, struct out.
//!
//! Word numbers below are ACS-4's. Words 83, 84, 86 and 87 (and 106) are only meaningful when
//! their bits 15:14 read 01b; word 255 carries the signature A5h (7:0) and a checksum (15:8)
//! that makes the 512 bytes sum to zero.

use super::{ParseError, SECTOR, need, sector_sum};

/// The IDENTIFY DEVICE fields nvsoak uses.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Identify {
    /// Words 10-19.
    pub serial: String,
    /// Words 23-26.
    pub firmware: String,
    /// Words 27-46.
    pub model: String,
    /// User-addressable logical sectors: words 100-103 (48-bit), 230-233 when word 69 bit 3
    /// says they are larger, else words 60-61.
    pub sectors: u64,
    /// Bytes per logical sector (words 106, 117-118; 512 by default).
    pub logical_sector_size: u32,
    /// Bytes per physical sector (word 106 bits 13, 3:0).
    pub physical_sector_size: u32,
    /// World wide name, words 108-111 (0 when not reported).
    pub wwn: u64,
    /// Word 82 bit 0.
    pub smart_supported: bool,
    /// Word 85 bit 0.
    pub smart_enabled: bool,
    /// The volatile write cache: supported (word 82 bit 5) and enabled (word 85 bit 5).
    pub write_cache_supported: bool,
    pub write_cache_enabled: bool,
    /// General Purpose Logging: word 84 bit 5 or word 87 bit 5. READ LOG EXT and the GP log
    /// directory (whose entry for log 04h says whether Device Statistics exist: IDENTIFY has
    /// no bit for them) need it.
    pub gpl_supported: bool,
    /// 48-bit addressing, word 83 bit 10.
    pub lba48: bool,
    /// DATA SET MANAGEMENT / TRIM, word 169 bit 0.
    pub trim_supported: bool,
    /// Nominal media rotation rate, word 217 (1 = non-rotating, i.e. an SSD; 0 = not reported).
    pub rotation_rate: u16,
    /// Word 255 carries the A5h signature (and so a checksum that was verified).
    pub checksum_present: bool,
}

impl Identify {
    pub fn capacity_bytes(&self) -> u128 {
        u128::from(self.sectors) * u128::from(self.logical_sector_size)
    }
    /// The NAA nibble of the WWN (5 = IEEE registered), as smartctl's `wwn.naa`.
    pub fn wwn_naa(&self) -> u8 {
        (self.wwn >> 60) as u8
    }
    /// The IEEE OUI of the WWN, as smartctl's `wwn.oui`.
    pub fn wwn_oui(&self) -> u32 {
        ((self.wwn >> 36) & 0xff_ffff) as u32
    }
    /// The vendor-specific identifier of the WWN, as smartctl's `wwn.id`.
    pub fn wwn_id(&self) -> u64 {
        self.wwn & 0xf_ffff_ffff
    }
    /// As sysfs `wwid` shows it for a libata disk: `naa.5000c500a1b2c3d4`.
    pub fn wwn_string(&self) -> Option<String> {
        (self.wwn != 0).then(|| format!("naa.{:016x}", self.wwn))
    }
}

/// Word `i` (0-based) of an IDENTIFY page; the caller checks the length.
fn word(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[2 * i], b[2 * i + 1]])
}

/// ATA strings hold two characters per word, the first in the high byte: swap, then trim.
fn ata_string(b: &[u8], first: usize, last: usize) -> String {
    let bytes: Vec<u8> = (first..=last)
        .flat_map(|i| word(b, i).to_be_bytes())
        .collect();
    String::from_utf8_lossy(&bytes)
        .trim_matches(|c: char| c == ' ' || c == '\0')
        .to_string()
}

/// Bits 15:14 = 01b: the word holds valid data.
fn valid(w: u16) -> bool {
    w & 0xc000 == 0x4000
}

fn sector_sizes(b: &[u8]) -> (u32, u32) {
    let w106 = word(b, 106);
    if !valid(w106) {
        return (512, 512);
    }
    let logical = if w106 & (1 << 12) != 0 {
        let words = u32::from(word(b, 117)) | u32::from(word(b, 118)) << 16;
        words.saturating_mul(2).max(512)
    } else {
        512
    };
    let physical = if w106 & (1 << 13) != 0 {
        logical
            .checked_shl(u32::from(w106 & 0xf))
            .unwrap_or(logical)
    } else {
        logical
    };
    (logical, physical)
}

fn user_sectors(b: &[u8], lba48: bool) -> u64 {
    let quad = |i: usize| (0..4).fold(0u64, |a, k| a | u64::from(word(b, i + k)) << (16 * k));
    let w69 = word(b, 69);
    if lba48 {
        let s = quad(100);
        if w69 & (1 << 3) != 0 {
            // Extended Number of User Addressable Sectors, words 230-233.
            return s.max(quad(230));
        }
        s
    } else {
        u64::from(word(b, 60)) | u64::from(word(b, 61)) << 16
    }
}

pub fn parse(b: &[u8]) -> Result<Identify, ParseError> {
    const WHAT: &str = "IDENTIFY DEVICE data";
    need(WHAT, b, SECTOR)?;
    let w255 = word(b, 255);
    let checksum_present = w255 & 0xff == 0xa5;
    if checksum_present {
        let sum = sector_sum(b);
        if sum != 0 {
            return Err(ParseError::Checksum {
                what: WHAT,
                got: (w255 >> 8) as u8,
                sum,
            });
        }
    }
    let (w82, w83, w84, w85, w87) = (
        word(b, 82),
        word(b, 83),
        word(b, 84),
        word(b, 85),
        word(b, 87),
    );
    let w82_valid = w82 != 0 && w82 != 0xffff;
    let lba48 = valid(w83) && w83 & (1 << 10) != 0;
    let (logical_sector_size, physical_sector_size) = sector_sizes(b);
    let wwn = (0..4).fold(0u64, |a, k| a << 16 | u64::from(word(b, 108 + k)));
    Ok(Identify {
        serial: ata_string(b, 10, 19),
        firmware: ata_string(b, 23, 26),
        model: ata_string(b, 27, 46),
        sectors: user_sectors(b, lba48),
        logical_sector_size,
        physical_sector_size,
        wwn,
        smart_supported: w82_valid && w82 & 1 != 0,
        smart_enabled: w82_valid && w85 & 1 != 0,
        write_cache_supported: w82_valid && w82 & (1 << 5) != 0,
        write_cache_enabled: w82_valid && w82 & (1 << 5) != 0 && w85 & (1 << 5) != 0,
        gpl_supported: (valid(w84) && w84 & (1 << 5) != 0) || (valid(w87) && w87 & (1 << 5) != 0),
        lba48,
        trim_supported: word(b, 169) & 1 != 0,
        rotation_rate: word(b, 217),
        checksum_present,
    })
}

/// A hand-built IDENTIFY page with a distinct value in every field nvsoak reads.
#[cfg(test)]
pub(crate) mod testdata {
    use super::SECTOR;

    fn put(b: &mut [u8], i: usize, w: u16) {
        b[2 * i..2 * i + 2].copy_from_slice(&w.to_le_bytes());
    }

    fn put_str(b: &mut [u8], first: usize, s: &[u8]) {
        for (k, pair) in s.chunks(2).enumerate() {
            let hi = pair[0];
            let lo = pair.get(1).copied().unwrap_or(b' ');
            put(b, first + k, u16::from_be_bytes([hi, lo]));
        }
    }

    /// Pass `sign` false to leave word 255 without the A5h signature.
    pub fn identify(sign: bool) -> Vec<u8> {
        let mut b = vec![0u8; SECTOR];
        put_str(&mut b, 10, b"   IW110SN0000000042");
        put_str(&mut b, 23, b"SF1.2.3 ");
        put_str(&mut b, 27, b"ZA3840NM10001 nvsoak handbuilt          ");
        put(&mut b, 60, 0xffff);
        put(&mut b, 61, 0x0fff);
        put(&mut b, 69, 0);
        put(&mut b, 82, 0x7069); // SMART (bit 0) and others
        put(&mut b, 83, 0x4000 | 1 << 10);
        put(&mut b, 84, 0x4000 | 1 << 5 | 1 << 8);
        put(&mut b, 85, 0x7069);
        put(&mut b, 87, 0x4000 | 1 << 5 | 1 << 8);
        // 7,501,476,528 sectors = 0x1_BF1F_72B0.
        put(&mut b, 100, 0x72b0);
        put(&mut b, 101, 0xbf1f);
        put(&mut b, 102, 0x0001);
        put(&mut b, 103, 0);
        // 512-byte logical, 8 per physical (4096).
        put(&mut b, 106, 0x4000 | 1 << 13 | 3);
        put(&mut b, 108, 0x5000);
        put(&mut b, 109, 0xc500);
        put(&mut b, 110, 0xa1b2);
        put(&mut b, 111, 0xc3d4);
        put(&mut b, 169, 1);
        put(&mut b, 217, 1);
        if sign {
            put(&mut b, 255, 0x00a5);
            let sum = super::sector_sum(&b);
            b[511] = 0u8.wrapping_sub(sum);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field_of_a_handbuilt_page() {
        let id = parse(&testdata::identify(true)).expect("parse");
        assert_eq!(id.serial, "IW110SN0000000042");
        assert_eq!(id.firmware, "SF1.2.3");
        assert_eq!(id.model, "ZA3840NM10001 nvsoak handbuilt");
        assert!(id.lba48);
        assert_eq!(id.sectors, 7_501_476_528);
        assert_eq!(id.logical_sector_size, 512);
        assert_eq!(id.physical_sector_size, 4096);
        assert_eq!(id.capacity_bytes(), 7_501_476_528u128 * 512);
        assert_eq!(id.wwn, 0x5000_c500_a1b2_c3d4);
        assert_eq!(
            (id.wwn_naa(), id.wwn_oui(), id.wwn_id()),
            (5, 0x000c50, 0x0_a1b2_c3d4)
        );
        assert_eq!(id.wwn_string().as_deref(), Some("naa.5000c500a1b2c3d4"));
        assert!(id.smart_supported && id.smart_enabled);
        assert!(
            id.write_cache_supported && id.write_cache_enabled,
            "words 82/85 bit 5"
        );
        assert!(id.gpl_supported);
        assert!(id.trim_supported);
        assert_eq!(id.rotation_rate, 1);
        assert!(id.checksum_present);
    }

    #[test]
    fn a_bad_checksum_is_an_error_and_no_signature_skips_it() {
        let mut b = testdata::identify(true);
        b[54] = b[54].wrapping_add(1);
        assert!(matches!(
            parse(&b),
            Err(ParseError::Checksum { sum: 1, .. })
        ));
        let id = parse(&testdata::identify(false)).expect("parse unsigned");
        assert!(!id.checksum_present);
        assert_eq!(id.serial, "IW110SN0000000042");
    }

    #[test]
    fn long_logical_sectors_and_28_bit_capacity() {
        let mut b = testdata::identify(false);
        // 4096-byte logical sectors (2048 words), one per physical; no 48-bit addressing.
        b[2 * 106..2 * 106 + 2].copy_from_slice(&(0x4000u16 | 1 << 12).to_le_bytes());
        b[2 * 117..2 * 117 + 2].copy_from_slice(&2048u16.to_le_bytes());
        b[2 * 83..2 * 83 + 2].copy_from_slice(&0x4000u16.to_le_bytes());
        // Invalid words 84 and 87: GPL is not taken from them.
        b[2 * 84..2 * 84 + 2].copy_from_slice(&0x0020u16.to_le_bytes());
        b[2 * 87..2 * 87 + 2].copy_from_slice(&0x0020u16.to_le_bytes());
        let id = parse(&b).expect("parse");
        assert_eq!(
            (id.logical_sector_size, id.physical_sector_size),
            (4096, 4096)
        );
        assert!(!id.lba48);
        assert_eq!(id.sectors, 0x0fff_ffff);
        assert!(!id.gpl_supported);
    }

    #[test]
    fn short_page_is_an_error() {
        assert!(matches!(
            parse(&[0u8; 100]),
            Err(ParseError::Short { need: 512, .. })
        ));
    }
}
