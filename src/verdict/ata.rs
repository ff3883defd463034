//! The drive gates for a target on a SATA disk: temperature and percentage used read the ATA
//! figures (`model::results::AtaSoak`), and available spare, which ATA does not report,
//! is "not applicable" with that reason (never passed on the zero an NVMe-shaped field holds).

use super::{judged, unknown, with_numbers};
use crate::model::results::AtaSoak;
use crate::model::verdict::{Gate, GateResult};

/// The temperature gate on the highest temperature the polls saw (SMART attribute 194/190 or
/// Device Statistics, whole °C), shown in kelvin as well.
pub(super) fn temperature(a: &AtaSoak, max: f64, limit: String) -> GateResult {
    let Some(c) = a.temperature_max_c else {
        return unknown(
            Gate::Temperature,
            limit,
            "the SATA drive reported no temperature (no SMART attribute 194/190, no Device Statistics temperature)",
        );
    };
    let c = f64::from(c);
    let k = c + 273.15;
    with_numbers(
        judged(
            Gate::Temperature,
            c <= max,
            format!("peak {c:.0} °C ({k:.2} K)"),
            limit,
        ),
        c,
        max,
    )
}

/// The critical-warning gate on a SATA disk: SMART RETURN STATUS at the latest poll (a
/// threshold-exceeded condition fails it; a drive that does not answer leaves it unjudged).
pub(super) fn smart_status(a: &AtaSoak, limit: String) -> GateResult {
    match a.smart_passed_latest {
        None => unknown(
            Gate::CriticalWarning,
            limit,
            "the SATA drive gave no SMART RETURN STATUS (its stand-in for the critical warning)",
        ),
        Some(ok) => {
            let measured = if ok {
                "SMART RETURN STATUS: passed"
            } else {
                "SMART RETURN STATUS: threshold exceeded (failing)"
            };
            let mut r = judged(Gate::CriticalWarning, ok, measured.to_string(), limit);
            r.value = Some(if ok { 0.0 } else { 1.0 });
            r.threshold = Some(0.0);
            r
        }
    }
}

/// ATA has no available-spare figure: the gate does not apply.
pub(super) fn spare(limit: String) -> GateResult {
    GateResult {
        limit,
        ..super::not_applicable(
            Gate::AvailableSpare,
            "a SATA drive reports no available spare",
        )
    }
}

/// Percentage Used Endurance Indicator (Device Statistics, Solid State Device page).
pub(super) fn percentage_used(a: &AtaSoak, max: u8, limit: String) -> GateResult {
    let Some(v) = a.percentage_used_latest else {
        return unknown(
            Gate::PercentageUsed,
            limit,
            "the SATA drive reports no Percentage Used Endurance Indicator (Device Statistics)",
        );
    };
    with_numbers(
        judged(Gate::PercentageUsed, v <= max, format!("{v} %"), limit),
        f64::from(v),
        f64::from(max),
    )
}
