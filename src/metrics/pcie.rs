//! PCIe families: `nvme_pcie_*` (each controller's path, link figures, degraded links and AER
//! counters of every function on it) and the `nvsoak_drive_*` / `nvsoak_card_*` identity and
//! endurance figures (a drive is one NVMe subsystem, a card the controllers behind one switch
//! upstream port or in one slot). Series are keyed by PCI `address`, `drive` or `card`;
//! `nvme_pcie_path_info` and `nvme_info` join them to controllers.

use super::family::F;
use crate::health::HealthSnapshot;
use crate::health::endurance;
use crate::pcie::PcieSnapshot;

/// GT/s to transfers per second (base unit).
const GT: f64 = 1e9;

/// The PCIe families of the snapshot, added to the health builder.
pub(super) fn families(f: &mut F, snap: &HealthSnapshot) {
    let p = &snap.pcie;
    paths(f, p);
    functions(f, p);
    let drives = endurance::drives(p, &snap.devices);
    drive_families(f, p, &drives);
    let cards = endurance::cards(p, &drives);
    card_families(f, p, &cards);
}

fn paths(f: &mut F, p: &PcieSnapshot) {
    for c in &p.controllers {
        for (i, a) in c.path.iter().enumerate() {
            let role = p.function(a).map_or("", |x| x.role.as_str());
            let hop = i.to_string();
            f.gauge(
                "nvme_pcie_path_info",
                "The PCI functions on a controller's path, value 1: hop 0 is the root port, the endpoint (the controller itself) last; role root_port, switch_upstream, switch_downstream or endpoint. Join the per-address nvme_pcie_ series to a device through it.",
                &[
                    ("device", &c.name),
                    ("address", a),
                    ("role", role),
                    ("hop", &hop),
                ],
                1.0,
            );
        }
    }
}

fn functions(f: &mut F, p: &PcieSnapshot) {
    for x in &p.functions {
        let l = [("address", x.address.as_str())];
        let link = &x.link;
        if let Some(v) = link.speed_gts {
            f.gauge(
                "nvme_pcie_link_speed_transfers_per_second",
                "Current PCIe link speed of the function (sysfs current_link_speed; 8 GT/s = 8e9).",
                &l,
                v * GT,
            );
        }
        if let Some(v) = link.max_speed_gts {
            f.gauge(
                "nvme_pcie_link_max_speed_transfers_per_second",
                "Maximum PCIe link speed the function supports (sysfs max_link_speed); absent when sysfs says Unknown.",
                &l,
                v * GT,
            );
        }
        if let Some(v) = link.width {
            f.gauge(
                "nvme_pcie_link_width_lanes",
                "Current PCIe link width of the function in lanes (sysfs current_link_width).",
                &l,
                f64::from(v),
            );
        }
        if let Some(v) = link.max_width {
            f.gauge(
                "nvme_pcie_link_max_width_lanes",
                "Maximum PCIe link width the function supports in lanes (sysfs max_link_width); absent when sysfs says 0.",
                &l,
                f64::from(v),
            );
        }
        if let Some(d) = x.degraded {
            f.gauge(
                "nvme_pcie_link_degraded",
                "1 if the link above this function (an endpoint or a switch upstream port) runs below the speed or width both of its ends support, else 0.",
                &l,
                if d { 1.0 } else { 0.0 },
            );
        }
        if let Some(aer) = &x.aer {
            for (severity, rows) in aer.by_severity() {
                for (name, n) in rows {
                    f.counter(
                        "nvme_pcie_aer_errors_total",
                        "PCIe AER errors the kernel counted for the function since boot (sysfs aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal), by severity and error name.",
                        &[
                            ("address", x.address.as_str()),
                            ("severity", severity),
                            ("error", name),
                        ],
                        *n as f64,
                    );
                }
            }
        }
    }
}

fn drive_families(f: &mut F, p: &PcieSnapshot, drives: &[endurance::DriveFigures]) {
    for d in drives {
        let l = [("drive", d.id.as_str())];
        let nqn = p.drive(&d.id).and_then(|x| x.nqn.as_deref()).unwrap_or("");
        let ctrls = d.controllers.join(",");
        f.gauge(
            "nvsoak_drive_info",
            "One drive (one NVMe subsystem; both controllers of a dual-port drive are one drive), value 1: its subsystem NQN and controllers.",
            &[("drive", &d.id), ("nqn", nqn), ("controllers", &ctrls)],
            1.0,
        );
        if let Some(v) = d.written_bytes {
            f.counter(
                "nvsoak_drive_written_bytes_total",
                "Bytes written to the drive in its life (SMART data units written x 512000), counted once however many controllers report it.",
                &l,
                v,
            );
        }
        if let Some(v) = d.soak_written_bytes {
            f.gauge(
                "nvsoak_drive_soak_written_bytes",
                "Bytes written to the drive since the soak's first SMART read, counted once however many controllers report it.",
                &l,
                v,
            );
        }
        if let Some(v) = d.endurance_consumed_ratio {
            f.gauge(
                "nvsoak_drive_endurance_consumed_ratio",
                "The drive's lifetime bytes written over its rated endurance.",
                &l,
                v,
            );
        }
        if let Some(r) = d.accounting.and_then(|a| a.ratio) {
            f.gauge(
                "nvsoak_drive_accounting_ratio",
                "Bytes the drive counted written over bytes nvsoak wrote to it since the soak started (the accounting check, per drive).",
                &l,
                r,
            );
        }
    }
}

fn card_families(f: &mut F, p: &PcieSnapshot, cards: &[endurance::CardFigures]) {
    for c in cards {
        let Some(card) = p.card(&c.id) else { continue };
        let l = [("card", c.id.as_str())];
        let series = c
            .rating
            .as_ref()
            .map(|r| format!("{} {}", r.vendor, r.series))
            .unwrap_or_default();
        f.gauge(
            "nvsoak_card_info",
            "One card (controllers of at least two drives behind one PCIe switch upstream port, or in one physical slot), value 1: its upstream port, slot, drive count and rating series ([[health.card]]).",
            &[
                ("card", &c.id),
                ("upstream_port", card.upstream_port.as_deref().unwrap_or("")),
                ("slot", card.slot.as_deref().unwrap_or("")),
                ("drives", &card.drives.len().to_string()),
                ("series", &series),
            ],
            1.0,
        );
        if let Some(v) = c.written_bytes {
            f.counter(
                "nvsoak_card_written_bytes_total",
                "Bytes written to the card's drives in their life, each drive counted once.",
                &l,
                v,
            );
        }
        if let Some(v) = c.soak_written_bytes {
            f.gauge(
                "nvsoak_card_soak_written_bytes",
                "Bytes written to the card's drives since the soak's first SMART read.",
                &l,
                v,
            );
        }
        if let Some(v) = c.endurance_consumed_ratio {
            f.gauge(
                "nvsoak_card_endurance_consumed_ratio",
                "The card's lifetime bytes written over the card's rated endurance.",
                &l,
                v,
            );
        }
        let Some(r) = &c.rating else { continue };
        if let Some(v) = r.tbw_bytes {
            f.gauge(
                "nvsoak_card_rated_endurance_bytes",
                "The card's rated bytes written (config/drives.toml series named by [[health.card]]).",
                &l,
                v,
            );
        }
        for (op, v) in [
            ("random_read", r.perf.random_read_iops),
            ("random_write", r.perf.random_write_iops),
        ] {
            if let Some(v) = v {
                f.gauge(
                    "nvsoak_card_rated_iops",
                    "The card's rated 4K random IOPS (config/drives.toml), by operation.",
                    &[("card", c.id.as_str()), ("op", op)],
                    v,
                );
            }
        }
        for (op, v) in [
            ("seq_read", r.perf.seq_read_bytes_per_second),
            ("seq_write", r.perf.seq_write_bytes_per_second),
        ] {
            if let Some(v) = v {
                f.gauge(
                    "nvsoak_card_rated_bytes_per_second",
                    "The card's rated sequential throughput (config/drives.toml), by operation.",
                    &[("card", c.id.as_str()), ("op", op)],
                    v,
                );
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::health::HealthSnapshot;
    use crate::nvme::ratings::RatingsTable;
    use crate::pcie::topology::fake::*;

    /// A fixture tree's topology: a card (switch in slot 7, Liqid-rated) of two drives, with a
    /// degraded link and AER errors (also the metrics catalogue's fixture, `cli::metrics`).
    pub(crate) fn card() -> crate::pcie::PcieSnapshot {
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        let (rp, up, dn1, dn2) = (
            "0000:00:04.0",
            "0000:02:00.0",
            "0000:03:00.0",
            "0000:03:01.0",
        );
        controller(r, "nvme0", &[rp, up, dn1, "0000:04:00.0"]);
        controller(r, "nvme1", &[rp, up, dn2, "0000:05:00.0"]);
        slot(r, "7", "0000:02:00");
        subsystem(r, "nvme-subsys0", "nqn.zero", &["nvme0"]);
        subsystem(r, "nvme-subsys1", "nqn.one", &["nvme1"]);
        link(
            &function(r, &[rp]),
            "8.0 GT/s PCIe",
            "16.0 GT/s PCIe",
            4,
            16,
        );
        link(
            &function(r, &[rp, up]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            8,
        );
        link(
            &function(r, &[rp, up, dn1, "0000:04:00.0"]),
            "2.5 GT/s",
            "8.0 GT/s",
            1,
            4,
        );
        aer(
            &function(r, &[rp, up]),
            &[("RxErr", 6)],
            &[("DLP", 2)],
            &[("TLP", 1)],
        );
        let names = vec!["nvme0".to_string(), "nvme1".to_string()];
        let mut p = crate::pcie::scan(r, &names, None, 10.0);
        let rule = crate::config::CardRating {
            matcher: "slot:7".into(),
            rating: "Liqid Element AIC".into(),
        };
        crate::pcie::rate_cards(&mut p, &[rule], &RatingsTable::builtin(), &[]);
        p
    }

    /// The exposition of [`card`].
    fn text() -> String {
        let snap = HealthSnapshot {
            pcie: card(),
            ..Default::default()
        };
        super::super::encode_text(&super::super::health::families(&snap)).expect("encode")
    }

    #[test]
    fn paths_links_aer_drives_and_cards() {
        let text = text();
        for want in [
            "nvme_pcie_path_info{device=\"nvme0\",address=\"0000:00:04.0\",role=\"root_port\",hop=\"0\"} 1",
            "nvme_pcie_path_info{device=\"nvme0\",address=\"0000:02:00.0\",role=\"switch_upstream\",hop=\"1\"} 1",
            "nvme_pcie_path_info{device=\"nvme1\",address=\"0000:03:01.0\",role=\"switch_downstream\",hop=\"2\"} 1",
            "nvme_pcie_path_info{device=\"nvme1\",address=\"0000:05:00.0\",role=\"endpoint\",hop=\"3\"} 1",
            "nvme_pcie_link_speed_transfers_per_second{address=\"0000:02:00.0\"} 8000000000",
            "nvme_pcie_link_max_speed_transfers_per_second{address=\"0000:00:04.0\"} 16000000000",
            "nvme_pcie_link_width_lanes{address=\"0000:02:00.0\"} 4",
            "nvme_pcie_link_max_width_lanes{address=\"0000:02:00.0\"} 8",
            "nvme_pcie_link_degraded{address=\"0000:02:00.0\"} 1",
            "nvme_pcie_link_degraded{address=\"0000:04:00.0\"} 1",
            "nvme_pcie_aer_errors_total{address=\"0000:02:00.0\",severity=\"correctable\",error=\"RxErr\"} 6",
            "nvme_pcie_aer_errors_total{address=\"0000:02:00.0\",severity=\"nonfatal\",error=\"DLP\"} 2",
            "nvme_pcie_aer_errors_total{address=\"0000:02:00.0\",severity=\"fatal\",error=\"TLP\"} 1",
            "nvsoak_drive_info{drive=\"nvme-subsys0\",nqn=\"nqn.zero\",controllers=\"nvme0\"} 1",
            "nvsoak_card_info{card=\"0000:02:00.0\",upstream_port=\"0000:02:00.0\",slot=\"7\",drives=\"2\",series=\"Liqid Element AIC\"} 1",
            "nvsoak_card_rated_endurance_bytes{card=\"0000:02:00.0\"} 30765000000000000",
            "nvsoak_card_rated_iops{card=\"0000:02:00.0\",op=\"random_read\"} 1250000",
            "nvsoak_card_rated_iops{card=\"0000:02:00.0\",op=\"random_write\"} 900000",
            "nvsoak_card_rated_bytes_per_second{card=\"0000:02:00.0\",op=\"seq_read\"} 7000000000",
            "nvsoak_card_rated_bytes_per_second{card=\"0000:02:00.0\",op=\"seq_write\"} 6300000000",
            "# TYPE nvme_pcie_aer_errors_total counter",
        ] {
            assert!(text.contains(want), "missing `{want}` in\n{text}");
        }
        // No degraded verdict for upper ends, no AER series for functions without AER.
        assert!(!text.contains("nvme_pcie_link_degraded{address=\"0000:00:04.0\"}"));
        assert!(!text.contains("nvme_pcie_aer_errors_total{address=\"0000:04:00.0\""));
        // A downstream port whose maximum is Unknown exports no maximum.
        assert!(!text.contains("nvme_pcie_link_max_width_lanes{address=\"0000:03:00.0\"}"));
    }

    #[test]
    fn pcie_families_pass_promtool_check_metrics() {
        crate::metrics::promtool::assert_clean(&text());
    }
}
