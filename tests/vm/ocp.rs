//! The drive's own view on a drive without it: QEMU 7.2's controller has no OCP pages (C0h,
//! C1h, C3h) and no telemetry pages (Identify Controller LPA bit 3 clear). nvsoak must report
//! each as not supported (`nvsoak_health_log_supported 0`), say so once in its log, count no
//! poll error for them, and keep polling the rest (`nvme_up 1` over several polls).

use std::time::Duration;

use crate::daemon::{config, daemon_spec, nvme_target, poll_after, poll_ts, stop_daemon};
use crate::harness::Vm;

const LOGS: [&str; 3] = [
    "ocp_error_recovery",
    "ocp_latency_monitor",
    "telemetry_ctrl",
];

// The guest daemon once "never answered /metrics": its allow_destroy named a serial the VM's
// drive does not have (OCP00001, not the harness's SOAK0001), so it refused the target and
// exited at startup; its log said so.
#[test]
fn ocp_and_telemetry_pages_are_reported_unsupported_once_and_polling_goes_on() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 50, "8s"),
    );
    let spec = daemon_spec("ocp-absent", &cfg, "", "");
    let mut vm = Vm::boot(&spec);
    let d = [("device", "nvme0")];
    let first = vm.wait_metrics(
        "the three pages known as unsupported",
        Duration::from_secs(180),
        |m| {
            LOGS.iter()
                .all(|log| {
                    m.get(
                        "nvsoak_health_log_supported",
                        &[("device", "nvme0"), ("log", log)],
                    ) == Some(0.0)
                })
                .then(|| m.clone())
        },
    );
    let mut ts = poll_ts(&first).unwrap_or_else(|| vm.fail("no poll timestamp"));
    // Three more polls: still unsupported, SMART still read, no poll error for these pages.
    for _ in 0..3 {
        let m = poll_after(&vm, ts, Duration::from_secs(30));
        ts = poll_ts(&m).unwrap_or_else(|| vm.fail("no poll timestamp"));
        assert_eq!(m.get("nvme_up", &d), Some(1.0), "SMART keeps being read");
        assert!(m.get("nvme_temperature_celsius", &d).is_some());
        for log in LOGS {
            assert_eq!(
                m.get(
                    "nvsoak_health_log_supported",
                    &[("device", "nvme0"), ("log", log)]
                ),
                Some(0.0),
                "{log}"
            );
            let errs = m
                .sum(
                    "nvsoak_health_poll_errors_total",
                    &[("device", "nvme0"), ("log", log)],
                )
                .unwrap_or(0.0);
            assert_eq!(errs, 0.0, "a refusal is not a poll error: {log}");
        }
        for absent in [
            "nvme_ocp_panic_info",
            "nvme_ocp_latency_bucket_commands",
            "nvme_telemetry_ctrl_data_generation",
        ] {
            assert!(m.find(absent, &d).next().is_none(), "{absent} exported");
        }
    }
    let log = stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("not supported by the drive"))
        .collect();
    assert_eq!(lines.len(), 1, "said once:\n{log}");
    for page in ["C1h", "C3h", "08h"] {
        assert!(lines[0].contains(page), "{page} named: {}", lines[0]);
    }
    assert!(
        !log.contains("Set Features C5h"),
        "the latency monitor is left alone when the config does not ask:\n{log}"
    );
}
