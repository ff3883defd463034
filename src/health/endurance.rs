//! Endurance per drive (one NVMe subsystem: a dual-port drive's bytes counted once) and per
//! card (the sum of its drives, against the card's rating). Pure from the health snapshot.

use super::DeviceHealth;
use super::derive::{Accounting, DATA_UNIT_BYTES};
use crate::nvme::ratings::Rating;

use crate::pcie::PcieSnapshot;

/// One drive's write figures.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveFigures {
    pub id: String,
    pub controllers: Vec<String>,
    /// Lifetime bytes written, from SMART data units written. The controllers of one
    /// subsystem report the subsystem's namespaces, so the drive's figure is the largest of
    /// theirs, never their sum.
    pub written_bytes: Option<f64>,
    /// Bytes written since the soak's first SMART read (largest over the controllers).
    pub soak_written_bytes: Option<f64>,
    /// The accounting check of the drive (that of the controller whose drive-side figure is
    /// the largest: nvsoak's writes through either path land on the same namespace).
    pub accounting: Option<Accounting>,
    pub rated_bytes: Option<f64>,
    pub endurance_consumed_ratio: Option<f64>,
}

/// One card's write figures: the sum of its drives.
#[derive(Debug, Clone, PartialEq)]
pub struct CardFigures {
    pub id: String,
    pub written_bytes: Option<f64>,
    pub soak_written_bytes: Option<f64>,
    pub rating: Option<Rating>,
    pub endurance_consumed_ratio: Option<f64>,
}

fn written(d: &DeviceHealth) -> Option<f64> {
    d.smart
        .as_ref()
        .map(|s| s.data_units_written as f64 * DATA_UNIT_BYTES)
}

fn soak_written(d: &DeviceHealth) -> Option<f64> {
    let (a, b) = (d.first_sample.as_ref()?, d.last_sample.as_ref()?);
    let units = b
        .smart
        .data_units_written
        .saturating_sub(a.smart.data_units_written);
    Some(units as f64 * DATA_UNIT_BYTES)
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn sum_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Per-drive figures for every drive in `topo`, from the controllers in `devices`.
pub fn drives(topo: &PcieSnapshot, devices: &[DeviceHealth]) -> Vec<DriveFigures> {
    topo.drives
        .iter()
        .map(|drive| {
            let ctrls: Vec<&DeviceHealth> = devices
                .iter()
                .filter(|d| drive.controllers.contains(&d.name))
                .collect();
            let mut f = DriveFigures {
                id: drive.id.clone(),
                controllers: drive.controllers.clone(),
                written_bytes: None,
                soak_written_bytes: None,
                accounting: None,
                rated_bytes: None,
                endurance_consumed_ratio: None,
            };
            for d in &ctrls {
                f.written_bytes = max_opt(f.written_bytes, written(d));
                f.soak_written_bytes = max_opt(f.soak_written_bytes, soak_written(d));
                if let Some(a) = &d.derived.accounting
                    && f.accounting
                        .as_ref()
                        .is_none_or(|b| a.drive_written_bytes > b.drive_written_bytes)
                {
                    f.accounting = Some(*a);
                }
                if f.rated_bytes.is_none() {
                    f.rated_bytes = d.derived.rated.as_ref().and_then(|r| r.bytes);
                }
            }
            f.endurance_consumed_ratio = match (f.written_bytes, f.rated_bytes) {
                (Some(w), Some(r)) if r > 0.0 => Some(w / r),
                _ => None,
            };
            f
        })
        .collect()
}

/// Per-card figures: the sum of the card's drives (each counted once), against its rating.
pub fn cards(topo: &PcieSnapshot, drives: &[DriveFigures]) -> Vec<CardFigures> {
    topo.cards
        .iter()
        .map(|card| {
            let mut f = CardFigures {
                id: card.id.clone(),
                written_bytes: None,
                soak_written_bytes: None,
                rating: card.rating.clone(),
                endurance_consumed_ratio: None,
            };
            for d in drives.iter().filter(|d| card.drives.contains(&d.id)) {
                f.written_bytes = sum_opt(f.written_bytes, d.written_bytes);
                f.soak_written_bytes = sum_opt(f.soak_written_bytes, d.soak_written_bytes);
            }
            let rated = f.rating.as_ref().and_then(|r| r.tbw_bytes);
            f.endurance_consumed_ratio = match (f.written_bytes, rated) {
                (Some(w), Some(r)) if r > 0.0 => Some(w / r),
                _ => None,
            };
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::SmartSample;
    use crate::nvme::discover::Controller;
    use crate::nvme::log::smart::SmartLog;
    use crate::pcie::topology::{Card, Drive};

    fn dev(name: &str, first: u128, last: u128) -> DeviceHealth {
        let c = Controller {
            name: name.into(),
            dev_path: format!("/dev/{name}").into(),
            serial: "S".into(),
            model: "M".into(),
            firmware: "F".into(),
            namespaces: Vec::new(),
        };
        let mut d = DeviceHealth::new(&c);
        let log = |u: u128| SmartLog {
            data_units_written: u,
            ..Default::default()
        };
        d.smart = Some(log(last));
        d.first_sample = Some(SmartSample {
            time: 1.0,
            smart: log(first),
            host: Vec::new(),
            throttle_events: 0,
            throttling: false,
        });
        d.last_sample = Some(SmartSample {
            time: 2.0,
            smart: log(last),
            host: Vec::new(),
            throttle_events: 0,
            throttling: false,
        });
        d
    }

    fn topo() -> PcieSnapshot {
        let drive = |id: &str, c: &[&str]| Drive {
            id: id.into(),
            nqn: None,
            controllers: c.iter().map(|s| s.to_string()).collect(),
        };
        PcieSnapshot {
            drives: vec![
                drive("ss0", &["nvme0"]),
                drive("ss1", &["nvme1"]),
                drive("dual", &["nvme2", "nvme3"]),
            ],
            cards: vec![Card {
                id: "0000:02:00.0".into(),
                upstream_port: Some("0000:02:00.0".into()),
                slot: Some("2".into()),
                controllers: vec!["nvme0".into(), "nvme1".into()],
                drives: vec!["ss0".into(), "ss1".into()],
                rating: crate::nvme::ratings::RatingsTable::builtin()
                    .lookup("Liqid Element AIC", 0),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_dual_port_drive_is_counted_once() {
        // Both controllers of the dual-port drive report the shared namespace's units.
        let devs = vec![
            dev("nvme0", 10, 30),
            dev("nvme1", 100, 107),
            dev("nvme2", 1000, 1050),
            dev("nvme3", 1000, 1050),
        ];
        let ds = drives(&topo(), &devs);
        let dual = ds.iter().find(|d| d.id == "dual").expect("dual");
        assert_eq!(dual.written_bytes, Some(1050.0 * 512_000.0));
        assert_eq!(dual.soak_written_bytes, Some(50.0 * 512_000.0));
        assert_eq!(dual.controllers, vec!["nvme2", "nvme3"]);
        let ss0 = ds.iter().find(|d| d.id == "ss0").expect("ss0");
        assert_eq!(ss0.soak_written_bytes, Some(20.0 * 512_000.0));
    }

    #[test]
    fn a_card_sums_its_drives_against_its_rating() {
        let devs = vec![dev("nvme0", 10, 30), dev("nvme1", 100, 107)];
        let ds = drives(&topo(), &devs);
        let cs = cards(&topo(), &ds);
        assert_eq!(cs.len(), 1);
        let c = &cs[0];
        assert_eq!(c.written_bytes, Some(137.0 * 512_000.0));
        assert_eq!(c.soak_written_bytes, Some(27.0 * 512_000.0));
        let r = c.rating.as_ref().expect("Liqid rating");
        assert_eq!(r.series, "Element AIC");
        assert_eq!(r.tbw_bytes, Some(30_765e12));
        assert_eq!(r.perf.random_read_iops, Some(1_250_000.0));
        assert_eq!(r.perf.random_write_iops, Some(900_000.0));
        assert_eq!(r.perf.seq_read_bytes_per_second, Some(7.0e9));
        assert_eq!(r.perf.seq_write_bytes_per_second, Some(6.3e9));
        let want = 137.0 * 512_000.0 / 30_765e12;
        assert!((c.endurance_consumed_ratio.expect("ratio") - want).abs() < 1e-18);
    }

    #[test]
    fn no_smart_no_figures() {
        let mut d = dev("nvme0", 1, 2);
        d.smart = None;
        d.first_sample = None;
        let ds = drives(&topo(), &[d]);
        let ss0 = ds.iter().find(|d| d.id == "ss0").expect("ss0");
        assert_eq!(ss0.written_bytes, None);
        assert_eq!(ss0.soak_written_bytes, None);
        let cs = cards(&topo(), &ds);
        assert_eq!(cs[0].written_bytes, None);
        assert_eq!(cs[0].endurance_consumed_ratio, None);
    }
}
