//! ATA drive health families: `ata_*` (what the drive says: IDENTIFY, the SMART attribute
//! table and status, Device Statistics in base units) and, through `metrics::derived`, the same
//! derived `nvsoak_*` endurance and thermal figures NVMe drives get. Every value reflects the
//! latest background poll, not the scrape.

use super::family::{self, F};
use crate::ata::devstat::DeviceStats;
use crate::ata::smart::Attribute;
use crate::ata::vendor;
use crate::health::collect::ata::{AtaHealth, feature, page};

const TEMPERATURE_HELP: &str = "Temperature, kind current (Device Statistics 05h offset 8, else SMART attribute 194 or 190 raw byte 0), highest and lowest over the drive's life (05h offsets 32, 40), specified_max operating temperature (05h offset 88).";

/// Every family of one ATA disk, into the health families' builder.
pub(super) fn disk(f: &mut F, d: &AtaHealth) {
    let dev = d.name.as_str();
    let l = [("device", dev)];
    f.gauge(
        "ata_info",
        "ATA drive identity, value 1 (IDENTIFY DEVICE words 27-46 model, 10-19 serial, 23-26 firmware, 108-111 WWN).",
        &[
            ("device", dev),
            ("model", &d.model),
            ("serial", &d.serial),
            ("firmware", &d.firmware),
            ("wwn", &d.wwn),
        ],
        1.0,
    );
    f.gauge(
        "ata_up",
        "1 if the latest poll read the SMART attribute table (SMART READ DATA), 0 if it failed or the disk is gone from /sys/block.",
        &l,
        if d.up && d.present { 1.0 } else { 0.0 },
    );
    family::poll(f, dev, &page::ALL, &d.poll_errors, d.poll_duration_seconds);
    for what in [feature::SMART, feature::SMART_STATUS, feature::DEVSTAT] {
        f.gauge(
            "ata_feature_supported",
            "0 once the drive refused the feature (command aborted, or IDENTIFY says so): smart, smart_status, devstat (the Device Statistics log); it is not asked again.",
            &[("device", dev), ("feature", what)],
            if d.supports(what) { 1.0 } else { 0.0 },
        );
    }
    if let Some(id) = &d.identify {
        f.gauge(
            "ata_capacity_bytes",
            "User-addressable capacity: logical sectors (IDENTIFY words 100-103) x logical sector size.",
            &l,
            id.capacity_bytes() as f64,
        );
        family::write_cache(
            f,
            "ata",
            dev,
            crate::model::drive::WriteCache::from_bits(
                id.write_cache_supported,
                id.write_cache_enabled,
            ),
            "IDENTIFY DEVICE word 82 bit 5",
            "IDENTIFY DEVICE word 85 bit 5",
        );
    }
    if let Some(s) = d.smart_status {
        f.gauge(
            "ata_smart_status_passed",
            "1 if SMART RETURN STATUS says passed (LBA mid/high 4Fh/C2h), 0 if a pre-failure attribute is at or below its threshold (F4h/2Ch).",
            &l,
            if s.passed() { 1.0 } else { 0.0 },
        );
    }
    if let Some(t) = &d.attributes {
        attributes(f, dev, t);
    }
    if let Some(t) = vendor::temperature(d.attributes.as_deref().unwrap_or(&[]), d.devstat.as_ref())
    {
        f.gauge(
            "ata_temperature_celsius",
            TEMPERATURE_HELP,
            &[("device", dev), ("kind", "current")],
            f64::from(t),
        );
    }
    if let Some(s) = &d.devstat {
        devstat(f, dev, s);
    }
    if let Some((bytes, source)) = d.lifetime_written {
        f.counter(
            "nvsoak_drive_lifetime_written_bytes_total",
            "Lifetime host bytes written, as the endurance figures use it, and where it came from: source device_statistics (Device Statistics 01h, logical sectors written x sector size) or attribute_241 (IronWolf 110: GB, assumed GiB; other drives: Total_LBAs_Written x sector size; check nvsoak_accounting_ratio).",
            &[("device", dev), ("source", source.label())],
            bytes as f64,
        );
    }
    super::derived::drive(f, dev, &d.derived, d.attributes.is_some());
}

fn attributes(f: &mut F, dev: &str, table: &[Attribute]) {
    for a in table {
        let id = a.id.to_string();
        let l = [("device", dev), ("id", id.as_str()), ("name", a.name)];
        f.gauge(
            "ata_smart_attribute_value",
            "Normalized SMART attribute value (SMART READ DATA, entry byte 3); name as smartctl gives it.",
            &l,
            f64::from(a.value),
        );
        f.gauge(
            "ata_smart_attribute_worst",
            "Worst normalized value the drive has recorded (SMART READ DATA, entry byte 4).",
            &l,
            f64::from(a.worst),
        );
        if let Some(th) = a.thresh {
            f.gauge(
                "ata_smart_attribute_threshold",
                "Failure threshold of the attribute (SMART READ THRESHOLDS); a value at or below a nonzero threshold is failing.",
                &l,
                f64::from(th),
            );
        }
        f.gauge(
            "ata_smart_attribute_raw",
            "Raw attribute value, 48 bits (SMART READ DATA, entry bytes 5..10); its unit is the vendor's.",
            &l,
            a.raw as f64,
        );
    }
}

fn devstat(f: &mut F, dev: &str, s: &DeviceStats) {
    let l = [("device", dev)];
    let counters: [(&str, &str, Option<u64>); 7] = [
        (
            "ata_written_bytes_total",
            "Logical sectors written x logical sector size (Device Statistics 01h, offset 24).",
            s.bytes_written,
        ),
        (
            "ata_read_bytes_total",
            "Logical sectors read x logical sector size (Device Statistics 01h, offset 40).",
            s.bytes_read,
        ),
        (
            "ata_power_on_seconds_total",
            "Power-on hours x 3600 (Device Statistics 01h, offset 16).",
            s.power_on_seconds,
        ),
        (
            "ata_power_on_resets_total",
            "Lifetime power-on resets (Device Statistics 01h, offset 8).",
            s.power_on_resets,
        ),
        (
            "ata_reported_uncorrectable_errors_total",
            "Number of reported uncorrectable errors (Device Statistics 04h, offset 8).",
            s.reported_uncorrectable,
        ),
        (
            "ata_interface_crc_errors_total",
            "Number of interface CRC errors (Device Statistics 06h, offset 24).",
            s.interface_crc_errors,
        ),
        (
            "ata_over_temperature_seconds_total",
            "Time in over-temperature, minutes x 60 (Device Statistics 05h, offset 80).",
            s.time_over_temperature_seconds,
        ),
    ];
    for (name, h, v) in counters {
        if let Some(v) = v {
            f.counter(name, h, &l, v as f64);
        }
    }
    let temps = [
        ("highest", s.temperature_highest),
        ("lowest", s.temperature_lowest),
        ("specified_max", s.specified_max_temperature),
    ];
    for (kind, v) in temps {
        if let Some(t) = v {
            f.gauge(
                "ata_temperature_celsius",
                TEMPERATURE_HELP,
                &[("device", dev), ("kind", kind)],
                f64::from(t),
            );
        }
    }
    if let Some(r) = s.percentage_used_ratio() {
        f.gauge(
            "ata_percentage_used_ratio",
            "Percentage Used Endurance Indicator / 100 (Device Statistics 07h, offset 8); may exceed 1.",
            &l,
            r,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::ata::cmd;
    use crate::ata::transport::Reply;
    use crate::health::collect::RatingContext;
    use crate::health::collect::ata::testdata::{disk, full_replay, status_regs};
    use crate::health::{HealthSnapshot, NoHostIo};

    fn text(replay: &crate::ata::transport::Replay) -> String {
        let d = crate::health::collect::ata::poll_once(
            replay,
            &disk("sda"),
            &RatingContext::default(),
            &NoHostIo,
        );
        let snap = HealthSnapshot {
            ata: vec![d],
            poll_timestamp_seconds: Some(1_700_000_000.0),
            ..Default::default()
        };
        super::super::encode_text(&super::super::health::families(&snap)).expect("encode")
    }

    #[test]
    fn ata_families_in_base_units_with_id_and_name_labels() {
        let text = text(&full_replay("/dev/sda"));
        for want in [
            "ata_info{device=\"sda\",model=\"ZA3840NM10001 nvsoak handbuilt\",serial=\"IW110SN0000000042\",firmware=\"SF1.2.3\",wwn=\"naa.5000c500a1b2c3d4\"} 1",
            "ata_up{device=\"sda\"} 1",
            "ata_smart_status_passed{device=\"sda\"} 1",
            "ata_smart_attribute_value{device=\"sda\",id=\"5\",name=\"Reallocated_Sector_Ct\"} 100",
            "ata_smart_attribute_worst{device=\"sda\",id=\"5\",name=\"Reallocated_Sector_Ct\"} 99",
            "ata_smart_attribute_threshold{device=\"sda\",id=\"5\",name=\"Reallocated_Sector_Ct\"} 10",
            "ata_smart_attribute_raw{device=\"sda\",id=\"241\",name=\"Lifetime_Wts_Frm_Hst_GB\"} 188900966474565",
            "ata_written_bytes_total{device=\"sda\"} 3584000000000",
            "ata_power_on_seconds_total{device=\"sda\"} 44442000",
            "ata_reported_uncorrectable_errors_total{device=\"sda\"} 3",
            "ata_interface_crc_errors_total{device=\"sda\"} 3735879687",
            "ata_over_temperature_seconds_total{device=\"sda\"} 5400",
            "ata_temperature_celsius{device=\"sda\",kind=\"current\"} 41",
            "ata_temperature_celsius{device=\"sda\",kind=\"highest\"} 78",
            "ata_temperature_celsius{device=\"sda\",kind=\"lowest\"} -5",
            "ata_percentage_used_ratio{device=\"sda\"} 1.04",
            "ata_feature_supported{device=\"sda\",feature=\"devstat\"} 1",
            "nvsoak_drive_lifetime_written_bytes_total{device=\"sda\",source=\"device_statistics\"} 3584000000000",
            "nvsoak_rated_endurance_bytes{device=\"sda\"} 7000000000000000",
            "nvsoak_rated_info{device=\"sda\",source=\"table\",series=\"Seagate IronWolf 110\"} 1",
            "nvsoak_endurance_consumed_ratio{device=\"sda\"} 0.000512",
            "nvsoak_health_poll_errors_total{device=\"sda\",log=\"devstat\"} 0",
            "nvsoak_thermal_throttling{device=\"sda\"} 0",
        ] {
            assert!(text.contains(want), "missing {want}\n{text}");
        }
        assert!(
            !text.contains("ata_read_bytes_total"),
            "read count not valid in the page"
        );
        assert!(
            !text.contains("kind=\"specified_max\""),
            "80h is no valid value"
        );
        assert!(
            text.contains("# HELP nvsoak_health_poll_errors_total Failed admin commands"),
            "help text without an NVMe drive registering it first\n{text}"
        );
        assert!(text.contains("# TYPE ata_written_bytes_total counter"));
        // No 241 threshold on 9: absent, not zero.
        assert!(!text.contains("ata_smart_attribute_threshold{device=\"sda\",id=\"9\""));
    }

    /// `promtool check metrics` finds nothing to say about the ATA families (names, units,
    /// counters' `_total`, help texts).
    #[test]
    fn ata_families_pass_promtool_check_metrics() {
        crate::metrics::promtool::assert_clean(&text(&full_replay("/dev/sda")));
    }

    #[test]
    fn a_failing_drive_and_missing_devstat() {
        let t = full_replay("/dev/sda");
        t.on(
            &cmd::smart_return_status(),
            Reply::Regs(Vec::new(), status_regs(false)),
        );
        t.on(&cmd::read_devstat_page(0), Reply::Abort);
        let text = text(&t);
        assert!(
            text.contains("ata_smart_status_passed{device=\"sda\"} 0"),
            "{text}"
        );
        assert!(text.contains("ata_feature_supported{device=\"sda\",feature=\"devstat\"} 0"));
        assert!(!text.contains("ata_written_bytes_total"));
        assert!(text.contains(
            "nvsoak_drive_lifetime_written_bytes_total{device=\"sda\",source=\"attribute_241\"}"
        ));
        assert!(
            text.contains("ata_temperature_celsius{device=\"sda\",kind=\"current\"} 36"),
            "from attribute 194 raw byte 0\n{text}"
        );
    }
}
