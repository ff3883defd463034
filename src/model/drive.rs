//! The drive's condition as the gates judge it, one shape for every protocol.
//!
//! A results file keeps what each protocol reports in its own words (the NVMe SMART deltas in
//! [`DriveSoak`], a SATA disk's figures in its `ata` record). [`DriveCondition::of`] reads
//! either into the same five figures: the peak temperature, the drive's own alarm (NVMe's
//! critical-warning byte, ATA's SMART RETURN STATUS), available spare, percentage used and
//! whether the drive has a PCIe link. Each is a [`Figure`]: reported, not reported by this
//! drive (the gate stays "not evaluated", with the reason), or not a figure of this protocol at
//! all (the gate does not apply). A figure that is missing is never read as zero.
//!
//! This is the one place where the results record is told apart by protocol for judging; the
//! gates (`verdict`) read only the condition.

use crate::model::results::{AtaSoak, DriveSoak};
use crate::nvme::log::smart::{CRITICAL_WARNING_BITS, SmartLog};

/// The drive's volatile write cache, as it reports it: whether it has one, and whether it is
/// on. With one on, an acknowledged write is durable only after a flush (NVMe Flush, ATA
/// FLUSH CACHE); with none or one off, an acknowledged write is already on media.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteCache {
    /// The drive says it has no volatile write cache.
    Absent,
    Enabled,
    Disabled,
}

impl WriteCache {
    /// From "has one" and "it is on".
    pub fn from_bits(present: bool, enabled: bool) -> WriteCache {
        match (present, enabled) {
            (false, _) => WriteCache::Absent,
            (true, true) => WriteCache::Enabled,
            (true, false) => WriteCache::Disabled,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            WriteCache::Absent => "absent",
            WriteCache::Enabled => "enabled",
            WriteCache::Disabled => "disabled",
        }
    }

    pub fn present(self) -> bool {
        self != WriteCache::Absent
    }

    pub fn enabled(self) -> bool {
        self == WriteCache::Enabled
    }
}

/// Which command set the drive answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Nvme,
    Ata,
}

/// One figure of the drive's condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Figure<T> {
    /// The drive reported it.
    Reported(T),
    /// The protocol has such a figure but this drive did not report it (why, for the reader).
    Unreported(&'static str),
    /// The protocol has no such figure (why, for the reader).
    NotInProtocol(&'static str),
}

/// The highest temperature of the period, with how the drive's own unit shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Temperature {
    pub celsius: f64,
    /// `peak 41.85 °C (315 K)` from an NVMe kelvin reading, `peak 41 °C (314.15 K)` from an
    /// ATA whole-degree one.
    pub shown: String,
}

/// The drive's own alarm at the latest poll: NVMe's critical-warning bits (seen at any poll
/// of the period), ATA's SMART RETURN STATUS.
#[derive(Debug, Clone, PartialEq)]
pub struct Alarm {
    pub raised: bool,
    /// The figure the gate records (the warning bits; ATA: 1 when failing) and what it shows.
    pub value: f64,
    pub shown: String,
}

/// Available spare and the drive's own threshold, percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spare {
    pub latest: u8,
    pub threshold: u8,
}

/// What the gates read of a drive, whatever its protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveCondition {
    pub protocol: Protocol,
    pub temperature_peak: Figure<Temperature>,
    pub alarm: Figure<Alarm>,
    pub spare: Figure<Spare>,
    /// Percent of the rated life used, latest (may exceed 100).
    pub percentage_used: Figure<u8>,
    /// `NotInProtocol` when the drive has no PCIe link of its own to judge.
    pub pcie_link: Figure<()>,
}

impl DriveCondition {
    /// The condition of the drive a soak record describes.
    pub fn of(d: &DriveSoak) -> DriveCondition {
        match &d.ata {
            Some(a) => ata(a),
            None => nvme(d),
        }
    }
}

/// An NVMe drive: the SMART log's figures, always reported once a poll answered (the
/// composite temperature may still be 0 K, "not reported").
fn nvme(d: &DriveSoak) -> DriveCondition {
    let seen = d.critical_warning_seen | d.critical_warning_latest;
    DriveCondition {
        protocol: Protocol::Nvme,
        temperature_peak: match d.temperature_max_kelvin.filter(|k| *k > 0) {
            Some(k) => {
                let c = SmartLog::kelvin_to_celsius(k);
                Figure::Reported(Temperature {
                    celsius: c,
                    shown: format!("peak {c:.2} °C ({k} K)"),
                })
            }
            None => Figure::Unreported("the drive reported no composite temperature"),
        },
        alarm: Figure::Reported(Alarm {
            raised: seen != 0,
            value: f64::from(seen),
            shown: if seen == 0 {
                "never set".to_string()
            } else {
                format!("set: {}", warning_bits(seen))
            },
        }),
        spare: Figure::Reported(Spare {
            latest: d.available_spare_latest,
            threshold: d.available_spare_threshold,
        }),
        percentage_used: Figure::Reported(d.percentage_used_latest),
        pcie_link: Figure::Reported(()),
    }
}

/// A SATA disk: SMART attribute 194/190 or Device Statistics for the temperature (whole °C),
/// SMART RETURN STATUS for the alarm, the Device Statistics endurance indicator, no spare and
/// no PCIe link. The NVMe-shaped fields of its soak record stay zero and are never read.
fn ata(a: &AtaSoak) -> DriveCondition {
    DriveCondition {
        protocol: Protocol::Ata,
        temperature_peak: match a.temperature_max_c {
            Some(c) => {
                let c = f64::from(c);
                let k = c + 273.15;
                Figure::Reported(Temperature {
                    celsius: c,
                    shown: format!("peak {c:.0} °C ({k:.2} K)"),
                })
            }
            None => Figure::Unreported(
                "the SATA drive reported no temperature (no SMART attribute 194/190, no Device Statistics temperature)",
            ),
        },
        alarm: match a.smart_passed_latest {
            Some(ok) => Figure::Reported(Alarm {
                raised: !ok,
                value: if ok { 0.0 } else { 1.0 },
                shown: if ok {
                    "SMART RETURN STATUS: passed".to_string()
                } else {
                    "SMART RETURN STATUS: threshold exceeded (failing)".to_string()
                },
            }),
            None => Figure::Unreported(
                "the SATA drive gave no SMART RETURN STATUS (its stand-in for the critical warning)",
            ),
        },
        spare: Figure::NotInProtocol("a SATA drive reports no available spare"),
        percentage_used: match a.percentage_used_latest {
            Some(v) => Figure::Reported(v),
            None => Figure::Unreported(
                "the SATA drive reports no Percentage Used Endurance Indicator (Device Statistics)",
            ),
        },
        pcie_link: Figure::NotInProtocol("a SATA drive has no PCIe link"),
    }
}

/// `0x05 (spare, reliability)`: the raw byte and the names of its set bits.
fn warning_bits(v: u8) -> String {
    let names: Vec<&str> = CRITICAL_WARNING_BITS
        .iter()
        .filter(|(bit, _)| v & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        format!("0x{v:02x}")
    } else {
        format!("0x{v:02x} ({})", names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nvme_record_reads_its_smart_figures_and_a_zero_kelvin_is_unreported() {
        let d = DriveSoak {
            temperature_max_kelvin: Some(0),
            critical_warning_seen: 0x04,
            available_spare_latest: 90,
            available_spare_threshold: 10,
            percentage_used_latest: 3,
            ..Default::default()
        };
        let c = DriveCondition::of(&d);
        assert_eq!(c.protocol, Protocol::Nvme);
        assert!(matches!(c.temperature_peak, Figure::Unreported(_)));
        let Figure::Reported(a) = &c.alarm else {
            panic!("an NVMe drive always has its warning byte: {:?}", c.alarm);
        };
        assert!(a.raised);
        assert_eq!(a.value, 4.0);
        assert!(a.shown.starts_with("set: 0x04"), "{}", a.shown);
        assert_eq!(
            c.spare,
            Figure::Reported(Spare {
                latest: 90,
                threshold: 10
            })
        );
        assert_eq!(c.percentage_used, Figure::Reported(3));
        assert_eq!(c.pcie_link, Figure::Reported(()));
    }

    #[test]
    fn a_sata_record_never_reads_the_nvme_shaped_zeros() {
        let d = DriveSoak {
            ata: Some(AtaSoak {
                temperature_max_c: Some(41),
                smart_passed_latest: None,
                percentage_used_latest: None,
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = DriveCondition::of(&d);
        assert_eq!(c.protocol, Protocol::Ata);
        let Figure::Reported(t) = &c.temperature_peak else {
            panic!("the ATA peak was reported: {:?}", c.temperature_peak);
        };
        assert_eq!(t.celsius, 41.0);
        assert_eq!(t.shown, "peak 41 °C (314.15 K)");
        // The record's spare and percentage fields hold 0; the condition does not pass them on.
        assert!(matches!(c.alarm, Figure::Unreported(_)));
        assert!(matches!(c.spare, Figure::NotInProtocol(_)));
        assert!(matches!(c.percentage_used, Figure::Unreported(_)));
        assert!(matches!(c.pcie_link, Figure::NotInProtocol(_)));
    }
}
