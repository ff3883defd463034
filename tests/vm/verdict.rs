//! The verdict on the emulated NVMe drive: `nvsoak run --exit-when-done` runs a short soak in the
//! guest; a clean one PASSes (exit 0, every drive gate evaluated and passed), and one during
//! which a critical warning bit is raised through QMP, then cleared again, FAILs with the
//! critical-warning gate (exit 2): a bit seen at any poll of the plan fails it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::daemon::{config, nvme_target};
use crate::harness::{Vm, VmSpec};

/// A VM that runs the soak to its end with `--exit-when-done`, then emits the exit status
/// (key `verdict`, with the log as `verdict.err`), the results file and the OCPTV record.
fn spec(name: &str, duration: &str) -> VmSpec {
    // Verified: a PASS needs the data checked (the verify gate is evaluated only then).
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 70, duration)
            .replace("allow_destroy = ", "verify = \"inline\"\nallow_destroy = "),
    );
    let script = "wait_for /dev/nvme0n1 10 || echo 'no /dev/nvme0n1'\n\
         run verdict nvsoak run --config /etc/nvsoak.toml --exit-when-done\n\
         run results cat /tmp/nvsoak-state/results/ns0.json\n\
         run ocptv cat /tmp/nvsoak-state/results/ns0.ocptv.jsonl\n";
    let mut spec = VmSpec::new(name, script);
    spec.net = true;
    spec.files
        .insert("/etc/nvsoak.toml".into(), cfg.as_bytes().to_vec());
    spec
}

/// The exit status and log of the run, then the results file's verdict and the OCPTV lines.
fn outcome(vm: &Vm) -> (i32, String, Value, Vec<Value>) {
    let r = vm.wait_result("verdict", Duration::from_secs(300));
    let log = vm
        .wait_result("verdict.err", Duration::from_secs(10))
        .stdout_str();
    let results = vm.wait_ok("results", Duration::from_secs(30)).stdout_str();
    let results: Value = match serde_json::from_str(&results) {
        Ok(v) => v,
        Err(e) => vm.fail(&format!(
            "the results file is not JSON ({e}):\n{results}\nlog:\n{log}"
        )),
    };
    let ocptv = vm.wait_ok("ocptv", Duration::from_secs(30)).stdout_str();
    let lines = ocptv
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        .collect();
    (r.status, log, results["verdict"].clone(), lines)
}

fn gate<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["gates"]
        .as_array()
        .and_then(|g| g.iter().find(|x| x["gate"] == name))
        .unwrap_or(&Value::Null)
}

#[test]
fn a_clean_soak_on_the_emulated_nvme_passes_with_exit_0() {
    crate::require_vm!();
    clean_soak_passes(crate::harness::GuestKernel::V6_1);
}

/// The daemon's whole start-up (config, write-safety checks, exporter without TLS, health
/// poller, engine set-up) and a verified PASS, on 6.12.
#[test]
fn a_clean_soak_on_the_emulated_nvme_passes_with_exit_0_on_6_12() {
    crate::require_vm!();
    clean_soak_passes(crate::harness::GuestKernel::V6_12);
}

fn clean_soak_passes(kernel: crate::harness::GuestKernel) {
    let mut s = spec(&format!("verdict-pass-{}", kernel.line()), "20s");
    s.kernel = kernel;
    let mut vm = Vm::boot(&s);
    let (status, log, v, ocptv) = outcome(&vm);
    if status != 0 {
        vm.fail(&format!(
            "expected exit 0 (PASS), got {status}; log:\n{log}\nverdict: {v}"
        ));
    }
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["status"], "pass", "{v}");
    assert_eq!(v["plan"], "finished", "{v}");
    // On a drive the drive gates have their data: evaluated, and passed.
    for g in [
        "verify_errors",
        "io_errors",
        "media_errors",
        "error_log_entries",
        "critical_warning",
        "temperature",
        "available_spare",
        "percentage_used",
        "accounting",
    ] {
        assert_eq!(gate(&v, g)["state"], "pass", "{g}: {}", gate(&v, g));
    }
    // QEMU 7.2's composite temperature is a fixed 323 K.
    let t = gate(&v, "temperature")["value"].as_f64();
    assert!(t.is_some_and(|c| (c - 49.85).abs() < 1e-9), "{t:?}");
    let end = &ocptv.last().cloned().unwrap_or(Value::Null)["testRunArtifact"]["testRunEnd"];
    assert_eq!(end["result"], "PASS", "{ocptv:?}");
    assert!(log.contains("verdict") && log.contains("PASS"), "{log}");
    vm.finish(Duration::from_secs(30));
}

#[test]
fn a_critical_warning_raised_through_qmp_fails_the_verdict_with_exit_2() {
    crate::require_vm!();
    let mut vm = Vm::boot(&spec("verdict-warn", "45s"));
    let warn = |m: &crate::prom::Metrics| m.get("nvme_critical_warning", &[("device", "nvme0")]);
    // The daemon runs and has polled the drive: no warning yet.
    vm.wait_metrics("the first poll", Duration::from_secs(120), |m| {
        (warn(m) == Some(0.0)).then_some(())
    });
    let mut qmp = vm.qmp();
    if let Err(e) = qmp.qom_set("nvme0", "smart_critical_warning", json!(0x04)) {
        vm.fail(&format!("QMP qom-set: {e}"));
    }
    let t0 = Instant::now();
    vm.wait_metrics("the reliability bit polled", Duration::from_secs(10), |m| {
        (warn(m) == Some(4.0)).then_some(())
    });
    let seen = Instant::now();
    eprintln!(
        "verdict: bit seen {:.2} s after qom-set",
        t0.elapsed().as_secs_f64()
    );
    // The verdict follows within one poll (1 s) plus one stats interval (1 s): the scheduler
    // judges at every interval, with no results-file write needed (that comes a minute later).
    let fail = |m: &crate::prom::Metrics| {
        m.get(
            "nvsoak_qualification_gate_state",
            &[
                ("target", "ns0"),
                ("gate", "critical_warning"),
                ("state", "fail"),
            ],
        ) == Some(1.0)
            && m.find(
                "nvsoak_qualification_verdict",
                &[("target", "ns0"), ("verdict", "fail")],
            )
            .any(|s| s.value == 1.0)
            && m.get("nvsoak_qualification_passed", &[("target", "ns0")]) == Some(0.0)
    };
    vm.wait_metrics(
        "the verdict FAIL in /metrics",
        Duration::from_secs(10),
        |m| fail(m).then_some(()),
    );
    let lag = seen.elapsed().as_secs_f64();
    eprintln!("verdict: FAIL in /metrics {lag:.2} s after the bit was");
    // One poll plus one interval is 2 s; the bound leaves room for a loaded TCG guest and the
    // scrape, and is still far below the results-file write (60 s) the verdict used to wait for.
    if lag > 6.0 {
        vm.fail(&format!(
            "the verdict took {lag:.2} s to follow the critical warning (one poll plus one interval is 2 s)"
        ));
    }
    // Cleared again before the plan ends: the gate still fails (set at some poll).
    if let Err(e) = qmp.qom_set("nvme0", "smart_critical_warning", json!(0)) {
        vm.fail(&format!("QMP qom-set 0: {e}"));
    }
    vm.wait_metrics("the bit cleared", Duration::from_secs(10), |m| {
        (warn(m) == Some(0.0)).then_some(())
    });
    let (status, log, v, ocptv) = outcome(&vm);
    if status != 2 {
        vm.fail(&format!(
            "expected exit 2 (FAIL), got {status}; log:\n{log}\nverdict: {v}"
        ));
    }
    assert!(
        log.contains("--exit-when-done: FAIL")
            && log.contains("ns0: critical_warning: set: 0x04 (reliability)"),
        "the failed gate is not named:\n{log}"
    );
    assert_eq!(v["passed"], false);
    let cw = gate(&v, "critical_warning");
    assert_eq!(cw["state"], "fail", "{cw}");
    assert_eq!(cw["measured"], "set: 0x04 (reliability)");
    // Only that gate failed.
    let failed: Vec<&Value> = v["gates"]
        .as_array()
        .map(|g| g.iter().filter(|x| x["state"] == "fail").collect())
        .unwrap_or_default();
    assert_eq!(failed.len(), 1, "{v}");
    assert!(
        ocptv
            .iter()
            .any(|l| l["testStepArtifact"]["diagnosis"]["verdict"] == "critical_warning-fail"),
        "{ocptv:?}"
    );
    vm.finish(Duration::from_secs(30));
}
