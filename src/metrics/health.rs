//! Drive health families: `nvme_*` (what the drive says) and the derived `nvsoak_*` endurance,
//! accounting and thermal figures. Every value reflects the latest background poll, not the
//! scrape; `nvsoak_health_poll_timestamp_seconds` says when that was.
//!
//! This module only orders the protocols' families into one builder ([`F`]): NVMe controllers
//! (`metrics::nvme`, with their OCP pages in `metrics::ocp`), the PCIe paths and cards
//! (`metrics::pcie`), ATA disks (`metrics::ata`); every drive's derived figures come from
//! `metrics::derived`, the same for every protocol.

use prometheus::proto::MetricFamily;

use super::family::F;
use crate::health::HealthSnapshot;

/// Every health family for the snapshot.
pub fn families(snap: &HealthSnapshot) -> Vec<MetricFamily> {
    let mut f = F::default();
    if let Some(ts) = snap.poll_timestamp_seconds {
        f.gauge(
            "nvsoak_health_poll_timestamp_seconds",
            "Unix time at which the latest background health poll finished; every nvme_ and derived health metric reflects that poll, not the scrape.",
            &[],
            ts,
        );
    }
    if let Some(d) = snap.poll_duration_seconds {
        f.gauge(
            "nvsoak_health_poll_duration_seconds",
            "How long the latest background health poll of all devices took.",
            &[],
            d,
        );
    }
    for d in &snap.devices {
        super::nvme::device(&mut f, d, snap.pcie.controller(&d.name));
    }
    super::pcie::families(&mut f, snap);
    for a in &snap.ata {
        super::ata::disk(&mut f, a);
    }
    f.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::collect::RatingContext;
    use crate::health::collect::nvme::poll_once;
    use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use crate::nvme::discover::{Controller, Namespace};
    use crate::nvme::replay::{ReplayTransport, Reply};

    fn snap() -> HealthSnapshot {
        let t = ReplayTransport::new("/dev/nvme0");
        t.on_loose(
            OPC_IDENTIFY,
            0x01,
            Reply::Data(crate::nvme::identify::testdata::id_ctrl(), 0),
        );
        t.on_loose(
            OPC_IDENTIFY,
            0x00,
            Reply::Data(crate::nvme::identify::testdata::id_ns(), 0),
        );
        t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x02,
            Reply::Data(crate::nvme::log::smart::testdata::smart(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x01,
            Reply::Data(crate::nvme::log::error::testdata::error_log(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x03,
            Reply::Data(crate::nvme::log::fwslot::testdata::fw_slot(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc0,
            Reply::Data(crate::nvme::log::ocp::testdata::ocp(), 0),
        );
        t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
        let c = Controller {
            name: "nvme0".into(),
            dev_path: "/dev/nvme0".into(),
            serial: String::new(),
            model: String::new(),
            firmware: String::new(),
            namespaces: vec![Namespace {
                name: "nvme0n1".into(),
                nsid: 1,
                dev_path: "/dev/nvme0n1".into(),
            }],
        };
        let d = poll_once(&t, &c, &RatingContext::default(), &crate::health::NoHostIo);
        HealthSnapshot {
            devices: vec![d],
            poll_timestamp_seconds: Some(1_700_000_000.0),
            poll_duration_seconds: Some(0.25),
            polls: 1,
            setup_error: None,
            ..Default::default()
        }
    }

    #[test]
    fn units_and_labels() {
        let text = super::super::encode_text(&families(&snap())).expect("encode");
        for want in [
            "nvme_up{device=\"nvme0\"} 1",
            "nvme_info{device=\"nvme0\",serial=\"SN-HANDBUILT-0001\",model=\"HWE62P43032M000N nvsoak handbuilt model\",firmware=\"FW1.2.3\",pci_address=\"\",slot=\"\",subsystem=\"\",card=\"\"} 1",
            "nvme_critical_warning{device=\"nvme0\"} 37",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"spare\"} 1",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"temperature\"} 0",
            "nvme_critical_warning_active{device=\"nvme0\",condition=\"pmr_read_only\"} 1",
            "nvme_temperature_celsius{device=\"nvme0\"} 44.85",
            "nvme_temperature_sensor_celsius{device=\"nvme0\",sensor=\"8\"} 34.85",
            "nvme_percentage_used_ratio{device=\"nvme0\"} 1.04",
            "nvme_available_spare_ratio{device=\"nvme0\"} 0.97",
            "nvme_controller_busy_seconds_total{device=\"nvme0\"} 5760",
            "nvme_power_on_seconds_total{device=\"nvme0\"} 46080000",
            "nvme_warning_temperature_seconds_total{device=\"nvme0\"} 11520",
            "nvme_thermal_transitions_total{device=\"nvme0\",level=\"2\"} 220",
            "nvme_thermal_management_seconds_total{device=\"nvme0\",level=\"1\"} 224",
            "nvme_warning_temperature_threshold_celsius{device=\"nvme0\"} 69.85",
            "nvme_namespace_lba_size_bytes{device=\"nvme0\",namespace=\"nvme0n1\"} 4096",
            "nvme_total_capacity_bytes{device=\"nvme0\"} 3200631791616",
            "nvme_error_log_status_total{device=\"nvme0\",status=\"0x281\"} 2",
            "nvme_ocp_thermal_throttling_status{device=\"nvme0\"} 1",
            "nvsoak_thermal_throttling{device=\"nvme0\"} 1",
            "nvsoak_thermal_throttle_events_total{device=\"nvme0\"} 1",
            "nvsoak_health_poll_errors_total{device=\"nvme0\",log=\"smart\"} 0",
            "nvsoak_health_poll_timestamp_seconds 1700000000",
            "nvme_firmware_slot_info{device=\"nvme0\",slot=\"2\",revision=\"2.0.1\"} 1",
        ] {
            assert!(text.contains(want), "missing `{want}` in\n{text}");
        }
        // Data units x 512000: (3 * 2^64 + 48) units.
        let line = text
            .lines()
            .find(|l| l.starts_with("nvme_data_written_bytes_total{"))
            .expect("written");
        let v: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("value");
        let want = ((3u128 << 64) + 48) as f64 * 512_000.0;
        assert!((v - want).abs() / want < 1e-12, "{v} vs {want}");
        assert!(
            text.contains(
                "# HELP nvme_temperature_celsius Composite temperature (SMART log 02h, bytes 1..2"
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE nvme_media_errors_total counter"),
            "{text}"
        );
    }

    #[test]
    fn one_family_per_name_with_two_devices() {
        let mut s = snap();
        let mut d2 = s.devices[0].clone();
        d2.name = "nvme1".into();
        d2.up = false;
        s.devices.push(d2);
        let fams = families(&s);
        let mut names: Vec<&str> = fams.iter().map(|f| f.name()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate family");
        let text = super::super::encode_text(&fams).expect("encode");
        assert!(text.contains("nvme_up{device=\"nvme1\"} 0"), "{text}");
    }
}
