//! Vendor knowledge about ATA SMART attributes: the names a drive family gives its attributes
//! (smartmontools' drivedb.h entry for that family, so `nvsoak health --json` names them as
//! `smartctl -j -a` does), and which attributes carry lifetime writes for drives without the
//! Device Statistics log. Pure: model strings and attribute tables in, figures out.

use super::devstat::DeviceStats;
use super::smart::{Attribute, attribute_name};

/// A drive family with its own attribute table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Seagate IronWolf 110 SATA SSD (ZA240NM10001, ZA480NM10011, ZA3840NM10001, ...;
    /// drivedb.h "Seagate IronWolf 110 SATA SSD").
    IronWolf110,
}

/// The family of a drive, from its IDENTIFY model string (some tools prefix it with
/// "Seagate IronWolf ").
pub fn family(model: &str) -> Option<Family> {
    let m = model.trim();
    let idx = m.find("ZA")?;
    let rest = &m[idx + 2..];
    // ZA<capacity in GB>NM1<4 digits>
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    let ok = (3..=5).contains(&digits)
        && tail.starts_with("NM1")
        && tail.len() >= 7
        && tail.as_bytes()[3..7].iter().all(u8::is_ascii_digit);
    ok.then_some(Family::IronWolf110)
}

/// The attribute's name for this family, else smartmontools' default name.
pub fn attribute_name_for(family: Option<Family>, id: u8) -> &'static str {
    match family {
        Some(Family::IronWolf110) => ironwolf_110_name(id).unwrap_or_else(|| attribute_name(id)),
        None => attribute_name(id),
    }
}

/// As `smartctl -a` names them on an IronWolf 110 (drivedb.h).
fn ironwolf_110_name(id: u8) -> Option<&'static str> {
    Some(match id {
        100 => "Flash_GB_Erased",
        102 => "Lifetime_PS4_Entry_Ct",
        103 => "Lifetime_PS3_Exit_Ct",
        170 => "Grown_Bad_Block_Ct",
        171 => "Program_Fail_Count",
        172 => "Erase_Fail_Count",
        173 => "Avg_Program/Erase_Ct",
        174 => "Unexpected_Pwr_Loss_Ct",
        177 => "Wear_Range_Delta",
        183 => "SATA_Downshift_Count",
        187 => "Uncorrectable_ECC_Ct",
        195 => "RAISE_ECC_Cor_Ct",
        198 => "Uncor_Read_Error_Ct",
        230 => "Drv_Life_Protect_Status",
        231 => "SSD_Life_Left",
        232 => "Available_Reservd_Space",
        233 => "Lifetime_Wts_To_Flsh_GB",
        241 => "Lifetime_Wts_Frm_Hst_GB",
        242 => "Lifetime_Rds_Frm_Hst_GB",
        243 => "Free_Space",
        _ => return None,
    })
}

/// Rename a table's attributes for the drive's family.
pub fn name_attributes(family: Option<Family>, attrs: &mut [Attribute]) {
    for a in attrs {
        a.name = attribute_name_for(family, a.id);
    }
}

/// Where a lifetime-writes figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritesSource {
    /// Device Statistics page 01h, logical sectors written x logical sector size.
    DeviceStatistics,
    /// Vendor attribute 241 (IronWolf 110: GB from the host, assumed GiB; other drives:
    /// Total_LBAs_Written x logical sector size). Calibrate with the accounting check.
    Attribute241,
}

impl WritesSource {
    pub fn label(self) -> &'static str {
        match self {
            WritesSource::DeviceStatistics => "device_statistics",
            WritesSource::Attribute241 => "attribute_241",
        }
    }
}

/// The unit assumed for the IronWolf 110's "GB" counters (233, 241, 242). drivedb.h names them
/// GB without saying which; the soak's accounting check (drive delta / nvsoak's own writes)
/// shows how far off the assumption is.
pub const IRONWOLF_GB: u128 = 1 << 30;

fn raw_of(attrs: &[Attribute], id: u8) -> Option<u64> {
    attrs.iter().find(|a| a.id == id).map(|a| a.raw)
}

/// Lifetime host bytes written: Device Statistics when the drive has them, else attribute 241
/// in the family's unit.
pub fn host_writes(
    family: Option<Family>,
    attrs: &[Attribute],
    devstat: Option<&DeviceStats>,
    logical_sector_size: u32,
) -> Option<(u128, WritesSource)> {
    if let Some(b) = devstat.and_then(|d| d.bytes_written) {
        return Some((u128::from(b), WritesSource::DeviceStatistics));
    }
    let raw = u128::from(raw_of(attrs, 241)?);
    let bytes = match family {
        Some(Family::IronWolf110) => raw * IRONWOLF_GB,
        None => raw * u128::from(logical_sector_size.max(512)),
    };
    Some((bytes, WritesSource::Attribute241))
}

/// The step of a lifetime-writes counter from `source`, in bytes: one logical sector for
/// Device Statistics and generic attribute 241, the family's unit for its own 241.
pub fn writes_unit_bytes(
    family: Option<Family>,
    source: WritesSource,
    logical_sector_size: u32,
) -> u64 {
    let sector = u64::from(logical_sector_size.max(512));
    match (source, family) {
        (WritesSource::Attribute241, Some(Family::IronWolf110)) => IRONWOLF_GB as u64,
        _ => sector,
    }
}

/// Lifetime flash (NAND) bytes written, where the family reports it (IronWolf 110: 233).
pub fn flash_writes(family: Option<Family>, attrs: &[Attribute]) -> Option<u128> {
    match family {
        Some(Family::IronWolf110) => raw_of(attrs, 233).map(|r| u128::from(r) * IRONWOLF_GB),
        None => None,
    }
}

/// The current temperature (°C): Device Statistics, else attribute 194 or 190 (raw byte 0).
pub fn temperature(attrs: &[Attribute], devstat: Option<&DeviceStats>) -> Option<i16> {
    if let Some(t) = devstat.and_then(|d| d.temperature_current) {
        return Some(i16::from(t));
    }
    [194u8, 190]
        .into_iter()
        .find_map(|id| raw_of(attrs, id))
        .map(|r| i16::from(r as u8 as i8))
        .filter(|t| *t > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(id: u8, raw: u64) -> Attribute {
        Attribute {
            id,
            name: attribute_name(id),
            flags: 0x32,
            value: 100,
            worst: 100,
            thresh: Some(0),
            raw,
        }
    }

    #[test]
    fn ironwolf_110_model_strings_match() {
        for m in [
            "ZA240NM10001",
            "ZA480NM10011",
            "ZA3840NM10001",
            "ZA1920NM10002",
            "Seagate IronWolf ZA250NM10002",
            "ZA3840NM10001 nvsoak handbuilt",
        ] {
            assert_eq!(family(m), Some(Family::IronWolf110), "{m}");
        }
        for m in [
            "ZA3840NM",
            "QEMU HARDDISK",
            "ZA12NM10001",
            "ZA960NX10001",
            "",
        ] {
            assert_eq!(family(m), None, "{m}");
        }
    }

    #[test]
    fn names_follow_the_family_table() {
        let fam = Some(Family::IronWolf110);
        assert_eq!(attribute_name_for(fam, 241), "Lifetime_Wts_Frm_Hst_GB");
        assert_eq!(attribute_name_for(fam, 233), "Lifetime_Wts_To_Flsh_GB");
        assert_eq!(
            attribute_name_for(fam, 9),
            "Power_On_Hours",
            "default names for the rest"
        );
        assert_eq!(attribute_name_for(None, 241), "Total_LBAs_Written");
        let mut t = vec![attr(241, 1), attr(5, 0)];
        name_attributes(fam, &mut t);
        assert_eq!(t[0].name, "Lifetime_Wts_Frm_Hst_GB");
        assert_eq!(t[1].name, "Reallocated_Sector_Ct");
    }

    #[test]
    fn lifetime_writes_prefer_device_statistics_then_241() {
        // The values of the IronWolf 110 240 GB in the smartctl output quoted in the module doc.
        let t = [
            attr(233, 163_817),
            attr(241, 141_921),
            attr(194, 0x31_0012_0019),
        ];
        let fam = Some(Family::IronWolf110);
        assert_eq!(
            host_writes(fam, &t, None, 512),
            Some((141_921u128 << 30, WritesSource::Attribute241))
        );
        assert_eq!(flash_writes(fam, &t), Some(163_817u128 << 30));
        assert_eq!(
            host_writes(None, &t, None, 4096),
            Some((141_921u128 * 4096, WritesSource::Attribute241)),
            "Total_LBAs_Written in logical sectors"
        );
        assert_eq!(flash_writes(None, &t), None);
        let ds = DeviceStats {
            bytes_written: Some(7_000),
            temperature_current: Some(41),
            ..DeviceStats::default()
        };
        assert_eq!(
            host_writes(fam, &t, Some(&ds), 512),
            Some((7_000, WritesSource::DeviceStatistics))
        );
        assert_eq!(host_writes(fam, &[attr(5, 0)], None, 512), None);
        assert_eq!(temperature(&t, Some(&ds)), Some(41));
        assert_eq!(temperature(&t, None), Some(25), "194 raw byte 0");
        assert_eq!(temperature(&[attr(190, 0x2a)], None), Some(42));
        assert_eq!(temperature(&[attr(5, 0)], None), None);
    }
}
