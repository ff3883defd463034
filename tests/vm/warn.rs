//! Scenarios 3 and 4: the drive raises critical warning bits while the daemon runs, and the
//! per-bit gauges follow within a poll interval. Bits 2 and 4 come from QMP (`qom-set
//! smart_critical_warning`); bit 1 from lowering the over-temperature threshold below the
//! controller's fixed 323 K with Set Features (FID 04h) inside the guest.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::daemon::{config, daemon_spec, daemon_spec_mid, nvme_target, stop_daemon};
use crate::harness::Vm;
use crate::prom::Metrics;

/// `health.poll_interval` in these scenarios.
const POLL: Duration = Duration::from_secs(1);
/// Scrape and TCG scheduling slack on top of one poll interval.
const SLACK: Duration = Duration::from_secs(4);

const CONDITIONS: &[(&str, u8)] = &[
    ("spare", 0x01),
    ("temperature", 0x02),
    ("reliability", 0x04),
    ("read_only", 0x08),
    ("volatile_backup", 0x10),
    ("pmr_read_only", 0x20),
];

fn d() -> [(&'static str, &'static str); 1] {
    [("device", "nvme0")]
}

/// The per-bit gauges as a byte, if every one of them is present and 0 or 1.
fn bits(m: &Metrics) -> Option<u8> {
    let mut v = 0u8;
    for (cond, bit) in CONDITIONS {
        let x = m.get(
            "nvme_critical_warning_active",
            &[("device", "nvme0"), ("condition", cond)],
        )?;
        if x == 1.0 {
            v |= bit;
        } else if x != 0.0 {
            return None;
        }
    }
    Some(v)
}

/// Waits until the per-bit gauges read exactly `want`, then checks the raw gauge agrees.
#[track_caller]
fn expect_bits(vm: &Vm, want: u8, since: Instant, timeout: Duration) -> Metrics {
    let m = vm.wait_metrics(
        &format!("nvme_critical_warning_active bits = {want:#04x}"),
        timeout,
        |m| (bits(m) == Some(want)).then(|| m.clone()),
    );
    eprintln!(
        "warn: bits {want:#04x} visible {:.2} s after the change",
        since.elapsed().as_secs_f64()
    );
    assert_eq!(
        m.get("nvme_critical_warning", &d()),
        Some(f64::from(want)),
        "raw critical warning"
    );
    m
}

#[test]
fn critical_warning_bits_from_qmp_reach_per_bit_gauges() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 100, "120s"),
    );
    let mut vm = Vm::boot(&daemon_spec("warn-qmp", &cfg, "", ""));
    expect_bits(&vm, 0, Instant::now(), Duration::from_secs(90));
    let mut qmp = vm.qmp();
    for bits in [0x04u8, 0x10] {
        if let Err(e) = qmp.qom_set("nvme0", "smart_critical_warning", json!(bits)) {
            vm.fail(&format!("QMP qom-set {bits:#x}: {e}"));
        }
        // Gauges for the other bits stay 0: expect_bits matches the whole byte.
        expect_bits(&vm, bits, Instant::now(), POLL + SLACK);
    }
    assert_eq!(
        vm.http_get("/metrics").map(|(c, _)| c),
        Ok(200),
        "still serving"
    );
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
}

#[test]
fn lowered_temperature_threshold_sets_the_temperature_bit() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 100, "120s"),
    );
    let spec = daemon_spec_mid(
        "warn-temp",
        &cfg,
        "",
        "wait_host setfeat\nrun setfeat nvme set-feature /dev/nvme0 -f 4 -v 0x13C",
        "",
    );
    let mut vm = Vm::boot(&spec);
    let before = expect_bits(&vm, 0, Instant::now(), Duration::from_secs(90));
    let over = [("device", "nvme0"), ("direction", "over")];
    let thr = before.get("nvme_composite_temperature_threshold_celsius", &over);
    assert!(
        thr.is_some_and(|t| (t - 69.85).abs() < 0.01),
        "default over-temperature threshold 343 K: {thr:?}"
    );
    assert_eq!(before.get("nvsoak_thermal_throttling", &d()), Some(0.0));

    vm.send_line("setfeat");
    vm.wait_ok("setfeat", Duration::from_secs(30));
    let t0 = Instant::now();
    let _m = expect_bits(&vm, 0x02, t0, POLL + SLACK);
    // The threshold gauge follows once a poll reads it back (316 K = 42.85 °C).
    let m = vm.wait_metrics("the lowered threshold", POLL + SLACK, |x| {
        x.get("nvme_composite_temperature_threshold_celsius", &over)
            .filter(|t| (t - 42.85).abs() < 0.01)
            .map(|_| x.clone())
    });
    // As designed, throttling is about thermal management transitions, the OCP status, or
    // the composite temperature reaching WCTEMP (343 K); 323 K is below it, so the temperature
    // bit alone does not mean throttling.
    assert_eq!(
        m.get("nvsoak_thermal_throttling", &d()),
        Some(0.0),
        "no throttling at 49.85 °C"
    );
    assert_eq!(
        m.get("nvme_temperature_celsius", &d())
            .map(|t| (t * 100.0).round()),
        Some(4985.0)
    );
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
}
