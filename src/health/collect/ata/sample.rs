//! What a SATA disk counted at one successful poll ([`AtaCounters`]), and the poller's first
//! and latest such readings with nvsoak's own figures of the same instant ([`AtaSample`]), for
//! the "drive during the soak" deltas and the accounting check (`ata::soak`, read by `workload::drive`).
//!
//! Each figure says where it came from: Device Statistics when the drive reports it, else the
//! SMART attribute that carries it (241 for host writes, 9 power-on hours, 187 reported
//! uncorrectable, 199 interface CRC errors, 5 reallocated sectors). Pure: from the disk's
//! latest state, no I/O.

use serde::{Deserialize, Serialize};

use crate::ata::vendor::WritesSource;
use crate::health::HostIo;

/// One poll's counters of an ATA drive, in base units; `None` when the drive does not report
/// the figure. Kept as the soak-start baseline (JSON in the checkpoint), so every field is
/// `serde(default)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AtaCounters {
    /// Lifetime host bytes written, from `written_source`.
    pub written_bytes: Option<u64>,
    pub written_source: Option<WritesSource>,
    /// The step of the written counter in bytes (a logical sector for Device Statistics, the
    /// family's unit for attribute 241): the accounting check allows one step at each end.
    pub written_unit_bytes: u64,
    /// Lifetime bytes read (Device Statistics only).
    pub read_bytes: Option<u64>,
    pub power_on_seconds: Option<u64>,
    /// Device Statistics 04h, else attribute 187.
    pub uncorrectable: Option<u64>,
    /// Attribute 5 (Reallocated_Sector_Ct), low 32 bits of the raw value.
    pub reallocated: Option<u64>,
    /// Device Statistics 06h, else attribute 199.
    pub crc_errors: Option<u64>,
    pub temperature_c: Option<i16>,
    /// Device Statistics 07h (percent, may exceed 100).
    pub percentage_used: Option<u8>,
    /// SMART RETURN STATUS: passed (`Some(false)`: a pre-failure attribute at or below its
    /// threshold).
    pub smart_passed: Option<bool>,
}

/// A successful poll of an ATA disk, with nvsoak's figures for the targets on it read right
/// after its SMART read, and the throttling state after the poll.
#[derive(Debug, Clone, PartialEq)]
pub struct AtaSample {
    /// Unix time of the poll.
    pub time: f64,
    pub counters: AtaCounters,
    /// The targets on this disk (the disk itself or a partition of it).
    pub host: Vec<HostIo>,
    pub throttle_events: u64,
    pub throttling: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::cmd;
    use crate::ata::transport::Reply;
    use crate::health::NoHostIo;
    use crate::health::collect::RatingContext;
    use crate::health::collect::ata::poll_once;
    use crate::health::collect::ata::testdata::{disk, full_replay};

    #[test]
    fn counters_come_from_device_statistics_first() {
        let t = full_replay("/dev/sda");
        let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
        let c = AtaCounters::of(&d);
        assert_eq!(c.written_bytes, Some(7_000_000_000 * 512));
        assert_eq!(c.written_source, Some(WritesSource::DeviceStatistics));
        assert_eq!(c.written_unit_bytes, 512);
        assert_eq!(c.read_bytes, None, "the read entry is supported, not valid");
        assert_eq!(c.power_on_seconds, Some(12_345 * 3600));
        assert_eq!(c.uncorrectable, Some(3));
        assert_eq!(c.crc_errors, Some(0xdead_0007));
        assert_eq!(c.temperature_c, Some(41));
        assert_eq!(c.percentage_used, Some(104));
        assert_eq!(c.smart_passed, Some(true));
        let a5 = d
            .attributes
            .as_ref()
            .and_then(|a| a.iter().find(|a| a.id == 5))
            .map(|a| a.raw & 0xffff_ffff);
        assert!(a5.is_some());
        assert_eq!(c.reallocated, a5);
        // The JSON the checkpoint keeps reads back field for field.
        let v = serde_json::to_value(&c).expect("json");
        assert_eq!(serde_json::from_value::<AtaCounters>(v).expect("back"), c);
    }

    #[test]
    fn without_device_statistics_the_attributes_stand_in() {
        let t = full_replay("/dev/sda");
        t.on(&cmd::read_devstat_page(0), Reply::Abort);
        let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
        assert!(d.devstat.is_none());
        let c = AtaCounters::of(&d);
        let attrs = d.attributes.clone().expect("attributes");
        let raw = |id: u8| attrs.iter().find(|a| a.id == id).map(|a| a.raw);
        assert_eq!(c.written_source, Some(WritesSource::Attribute241));
        assert_eq!(
            c.written_unit_bytes,
            1 << 30,
            "IronWolf 110: GB, assumed GiB"
        );
        // The fixture's raw value in GiB is beyond u64 bytes: saturated, not wrapped.
        let bytes = raw(241).map(|r| u64::try_from(u128::from(r) << 30).unwrap_or(u64::MAX));
        assert_eq!(bytes, Some(u64::MAX));
        assert_eq!(c.written_bytes, bytes, "attribute 241 in GiB");
        assert_eq!(c.power_on_seconds, raw(9).map(|h| (h & 0xffff_ffff) * 3600));
        assert_eq!(c.uncorrectable, None, "no devstat, no attribute 187");
        assert_eq!(c.temperature_c, Some(0x24), "attribute 194, raw byte 0");
        assert_eq!(c.percentage_used, None);
        assert_eq!(c.read_bytes, None);
    }
}
