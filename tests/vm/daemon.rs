//! Scenario 2: the daemon on a real controller. `nvsoak run` soaks `/dev/nvme0n1` (allowed by
//! its serial) with a mixed random workload while the host scrapes `/metrics` through the
//! forwarded port. The drive's own accounting, read with nvme-cli before and after, must agree
//! with what nvsoak says it did: data units written within one unit (512,000 bytes) of
//! nvsoak's written bytes, and host write commands equal to nvsoak's write ops. The results
//! file's drive-side soak figures (from the daemon's own SMART polls) must agree the same way.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures::json_u128;
use crate::harness::{Vm, VmSpec};
use crate::prom::Metrics;

/// A config with the exporter on every guest interface (the host reaches it through
/// user-mode networking) and fast health polling. `targets` is raw TOML `[[target]]` tables.
pub fn config(poll_interval: &str, targets: &str) -> String {
    format!(
        r#"[exporter]
listen = ":9757"
[state]
dir = "/tmp/nvsoak-state"
[stats]
interval = "1s"
[health]
enabled = true
poll_interval = "{poll_interval}"
rescan_interval = "2s"
{targets}"#
    )
}

/// One block-device target running an inline random job for `duration`.
pub fn nvme_target(name: &str, path: &str, serial: &str, read_pct: u32, duration: &str) -> String {
    format!(
        r#"
[[target]]
name = "{name}"
path = "{path}"
allow_destroy = "{serial}"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = {read_pct}, bs = "4k", access = "random", iodepth = 8, workers = 1 }}
duration = "{duration}"
"#
    )
}

/// A VM with networking whose script starts the daemon on `/etc/nvsoak.toml` after `pre`, then
/// waits for the host's `stop` and stops it (result key `daemon`), then runs `post`.
pub fn daemon_spec(name: &str, config: &str, pre: &str, post: &str) -> VmSpec {
    daemon_spec_mid(name, config, pre, "", post)
}

/// Like [`daemon_spec`], with `mid` run while the daemon runs (before waiting for `stop`).
pub fn daemon_spec_mid(name: &str, config: &str, pre: &str, mid: &str, post: &str) -> VmSpec {
    let script = format!(
        "wait_for /dev/nvme0n1 10 || echo 'no /dev/nvme0n1'\n{pre}\nstart_daemon /etc/nvsoak.toml\n\
         {mid}\nwait_host stop\nstop_daemon daemon\n{post}\n"
    );
    let mut spec = VmSpec::new(name, &script);
    spec.net = true;
    spec.files
        .insert("/etc/nvsoak.toml".into(), config.as_bytes().to_vec());
    spec
}

/// Stops the daemon (`stop` on the console) and checks it exited 0 within 10 s of SIGTERM.
/// Returns its log.
#[track_caller]
pub fn stop_daemon(vm: &mut Vm) -> String {
    vm.send_line("stop");
    let secs = vm.wait_ok("daemon.secs", Duration::from_secs(60));
    let r = vm.wait_result("daemon", Duration::from_secs(30));
    let log = r.stdout_str();
    if r.status != 0 {
        vm.fail(&format!(
            "nvsoak run exited {} after SIGTERM; its log:\n{log}",
            r.status
        ));
    }
    let secs: u64 = secs.stdout_str().trim().parse().unwrap_or(u64::MAX);
    if secs > 10 {
        vm.fail(&format!(
            "nvsoak run took {secs} s to exit after SIGTERM; its log:\n{log}"
        ));
    }
    log
}

/// Scrapes until two scrapes at least `gap` apart agree on `f`, i.e. the value stopped moving.
#[track_caller]
pub fn stable<T: PartialEq + Clone>(
    vm: &Vm,
    what: &str,
    timeout: Duration,
    f: impl Fn(&Metrics) -> Option<T>,
) -> (T, Metrics) {
    let gap = Duration::from_millis(1200);
    let mut last: Option<(T, Instant)> = None;
    vm.wait_metrics(what, timeout, |m| {
        let v = f(m)?;
        match &last {
            Some((prev, at)) if *prev == v && at.elapsed() >= gap => return Some((v, m.clone())),
            Some((prev, _)) if *prev == v => {}
            _ => last = Some((v.clone(), Instant::now())),
        }
        None
    })
}

pub fn smart(vm: &Vm, key: &str) -> Value {
    let r = vm.wait_ok(key, Duration::from_secs(60));
    serde_json::from_slice(&r.stdout)
        .unwrap_or_else(|e| vm.fail(&format!("{key}: smart-log printed no JSON ({e})")))
}

pub fn counter(vm: &Vm, v: &Value, k: &str) -> u128 {
    json_u128(&v[k]).unwrap_or_else(|| vm.fail(&format!("smart-log JSON lacks {k}: {v}")))
}

#[test]
fn daemon_soaks_real_namespace_and_drive_accounting_agrees() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 50, "6s"),
    );
    let spec = daemon_spec(
        "daemon",
        &cfg,
        // The block layer merges adjacent 4k random writes that meet in one plug into one
        // NVMe command; with merging off, each nvsoak op is exactly one host command.
        "echo 2 > /sys/block/nvme0n1/queue/nomerges\nrun before nvme smart-log /dev/nvme0 -o json",
        "run after nvme smart-log /dev/nvme0 -o json\n\
         run results cat /tmp/nvsoak-state/results/ns0.json\n\
         run checkpoint cat /tmp/nvsoak-state/checkpoint.json",
    );
    let mut vm = Vm::boot(&spec);
    let t = [("target", "ns0")];

    // During the run: the workload is live and /metrics serves.
    let mid = vm.wait_metrics("write ops during the soak", Duration::from_secs(90), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(1.0)
            && m.sum("nvsoak_write_ops_total", &t).is_some_and(|v| v > 0.0))
        .then(|| m.clone())
    });
    assert_eq!(
        mid.get("nvsoak_target_up", &t),
        Some(1.0),
        "target up during the soak"
    );

    // After the phase: the final counters.
    vm.wait_metrics("the phase to finish", Duration::from_secs(60), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)).then_some(())
    });
    let ((wops, wbytes, rops), fin) = stable(&vm, "final counters", Duration::from_secs(30), |m| {
        Some((
            m.sum("nvsoak_write_ops_total", &t)? as u128,
            m.sum("nvsoak_write_bytes_total", &t)? as u128,
            m.sum("nvsoak_read_ops_total", &t)? as u128,
        ))
    });
    assert_eq!(
        fin.get("nvsoak_target_up", &t),
        Some(1.0),
        "target still up after its plan"
    );
    assert_eq!(
        fin.sum("nvsoak_io_errors_total", &t).unwrap_or(0.0),
        0.0,
        "no I/O errors"
    );
    let log = stop_daemon(&mut vm);
    let before = smart(&vm, "before");
    let after = smart(&vm, "after");
    let results = smart(&vm, "results");
    let checkpoint = smart(&vm, "checkpoint");
    vm.finish(Duration::from_secs(30));

    // The daemon's own view: the results file's drive figures, soak start to the final poll,
    // paired with nvsoak's bytes over the same period.
    let drive = &results["soak"]["drive"];
    let get = |k: &str| {
        drive[k]
            .as_u64()
            .unwrap_or_else(|| vm.fail(&format!("results soak.drive.{k} missing: {results}")))
    };
    let (dw, ours) = (get("data_written_bytes"), get("nvsoak_written_bytes"));
    assert!(
        dw.abs_diff(ours) <= 2 * 512_000,
        "results file: drive data written {dw} bytes vs nvsoak's {ours} bytes over the same period: off by more than 2 data units"
    );
    // The baseline poll precedes the first write and the daemon polls once more after the last
    // one at shutdown, so the period is the whole soak.
    assert_eq!(
        u128::from(ours),
        wbytes,
        "the period's bytes are the whole soak's"
    );
    assert_eq!(drive["accounting_agrees"], Value::Bool(true), "{drive}");
    assert_eq!(drive["device"], "nvme0");
    assert_eq!(get("media_errors"), 0);
    // Commands completed by the drive but not yet reaped by nvsoak at a SMART read: at most
    // the iodepth (8) at either end.
    let (hw, ow) = (get("host_write_commands"), get("nvsoak_write_ops"));
    assert!(
        hw.abs_diff(ow) <= 16,
        "results file: drive host write commands {hw} vs nvsoak write ops {ow}"
    );
    assert_eq!(
        results["device"]["serial"], "SOAK0001",
        "identity from Identify"
    );
    // The checkpoint's soak-start SMART log comes from the poll taken before the target's
    // first write: nothing was written between nvme-cli's before read and it.
    let start = &checkpoint["targets"][0]["smart_at_soak_start"];
    let s0 = counter(&vm, start, "data_units_written");
    assert_eq!(
        s0,
        counter(&vm, &before, "data_units_written"),
        "soak-start data units written: {start}"
    );
    assert_eq!(
        counter(&vm, start, "host_write_commands"),
        counter(&vm, &before, "host_write_commands"),
        "soak-start host write commands: {start}"
    );
    eprintln!(
        "daemon: results file drive data written {dw} bytes vs nvsoak {ours} bytes over the same period; host write commands {hw} vs write ops {ow}"
    );

    assert!(
        wops > 1000 && rops > 1000,
        "a real workload ran: {wops} writes, {rops} reads\n{log}"
    );
    assert_eq!(wbytes, wops * 4096, "4k writes");
    let du = counter(&vm, &after, "data_units_written").saturating_sub(counter(
        &vm,
        &before,
        "data_units_written",
    ));
    let du_bytes = du * 512_000;
    assert!(
        du_bytes.abs_diff(wbytes) < 512_000,
        "drive data units written delta {du} ({du_bytes} bytes) vs nvsoak's {wbytes} bytes written: off by more than one data unit"
    );
    let hwc = counter(&vm, &after, "host_write_commands").saturating_sub(counter(
        &vm,
        &before,
        "host_write_commands",
    ));
    assert_eq!(
        hwc, wops,
        "drive host write commands delta vs nvsoak write ops"
    );
    let hrc = counter(&vm, &after, "host_read_commands").saturating_sub(counter(
        &vm,
        &before,
        "host_read_commands",
    ));
    eprintln!(
        "daemon: nvsoak {wops} writes ({wbytes} bytes), {rops} reads; drive: data units written +{du}, host write commands +{hwc}, host read commands +{hrc}"
    );
    // nvme-cli's own admin commands are not host reads, but the kernel may read the partition
    // table; nvsoak's reads are a lower bound.
    assert!(
        hrc >= rops,
        "drive host read commands delta {hrc} vs nvsoak read ops {rops}"
    );
}

/// The health poll's timestamp (guest clock) in a scrape.
pub fn poll_ts(m: &Metrics) -> Option<f64> {
    m.get("nvsoak_health_poll_timestamp_seconds", &[])
}

/// Waits for a scrape whose health poll is newer than `after` (a poll timestamp).
#[track_caller]
pub fn poll_after(vm: &Vm, after: f64, timeout: Duration) -> Metrics {
    vm.wait_metrics("a newer health poll", timeout, |m| {
        poll_ts(m).filter(|t| *t > after).map(|_| m.clone())
    })
}

/// Runs the 6 s soak on nvme0n1 and returns (a scrape during the run, the final nvsoak
/// counters, the first scrape whose health poll started after the workload finished).
fn soak_to_final_poll(vm: &Vm) -> (Metrics, (u128, u128), Metrics) {
    let t = [("target", "ns0")];
    let mid = vm.wait_metrics(
        "health and write ops during the soak",
        Duration::from_secs(90),
        |m| {
            (m.get("nvsoak_phase_running", &t) == Some(1.0)
                && m.sum("nvsoak_write_ops_total", &t).is_some_and(|v| v > 0.0)
                && m.get("nvme_up", &[("device", "nvme0")]).is_some())
            .then(|| m.clone())
        },
    );
    let done = vm.wait_metrics("the phase to finish", Duration::from_secs(60), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)).then(|| m.clone())
    });
    let fin = |m: &Metrics| -> Option<(u128, u128)> {
        Some((
            m.sum("nvsoak_write_ops_total", &t)? as u128,
            m.sum("nvsoak_write_bytes_total", &t)? as u128,
        ))
    };
    if fin(&done).is_none() {
        vm.fail("no write counters after the phase");
    }
    // The last stats publication may land just after the phase is marked finished.
    let (before, settled) = stable(vm, "final write counters", Duration::from_secs(30), fin);
    let ts =
        poll_ts(&settled).unwrap_or_else(|| vm.fail("no nvsoak_health_poll_timestamp_seconds"));
    let last = poll_after(vm, ts, Duration::from_secs(30));
    if fin(&last) != Some(before) {
        vm.fail(&format!(
            "nvsoak's write counters moved after its plan finished: {before:?} then {:?}",
            fin(&last)
        ));
    }
    (mid, before, last)
}

#[test]
fn daemon_exports_nvme_health_matching_its_own_io() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 50, "6s"),
    );
    let spec = daemon_spec(
        "daemon-health",
        &cfg,
        "echo 2 > /sys/block/nvme0n1/queue/nomerges",
        "",
    );
    let mut vm = Vm::boot(&spec);
    let (mid, (wops, wbytes), last) = soak_to_final_poll(&vm);
    let d = [("device", "nvme0")];

    // During the run.
    assert_eq!(mid.get("nvme_up", &d), Some(1.0), "nvme_up during the soak");
    let info = mid
        .find("nvme_info", &d)
        .next()
        .unwrap_or_else(|| vm.fail("no nvme_info{device=nvme0}"));
    assert_eq!(
        info.labels.get("serial").map(String::as_str),
        Some("SOAK0001")
    );
    assert_eq!(
        info.labels.get("model").map(String::as_str),
        Some("QEMU NVMe Ctrl")
    );
    for name in [
        "nvme_critical_warning",
        "nvme_temperature_celsius",
        "nvme_data_written_bytes_total",
        "nvme_data_read_bytes_total",
        "nvme_host_write_commands_total",
        "nvme_host_read_commands_total",
        "nvme_power_on_seconds_total",
        "nvme_media_errors_total",
        "nvme_warning_temperature_threshold_celsius",
    ] {
        assert!(
            mid.get(name, &d).is_some(),
            "{name}{{device=\"nvme0\"}} missing during the soak"
        );
    }
    let temp = mid.get("nvme_temperature_celsius", &d).unwrap_or_default();
    assert!(
        (temp - 49.85).abs() < 0.01,
        "QEMU's 323 K is 49.85 °C, got {temp}"
    );

    // After the last poll: the drive's totals (from zero at boot) against nvsoak's.
    let stop_log = stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
    assert_eq!(last.get("nvme_up", &d), Some(1.0));
    let drive_bytes = last
        .get("nvme_data_written_bytes_total", &d)
        .unwrap_or(-1.0) as u128;
    let drive_cmds = last
        .get("nvme_host_write_commands_total", &d)
        .unwrap_or(-1.0) as u128;
    eprintln!(
        "daemon-health: nvsoak {wops} writes / {wbytes} bytes; drive {drive_cmds} commands / {drive_bytes} bytes"
    );
    assert!(
        wops > 1000,
        "a real workload ran: {wops} writes\n{stop_log}"
    );
    assert!(
        drive_bytes.abs_diff(wbytes) < 512_000,
        "nvme_data_written_bytes_total {drive_bytes} vs nvsoak_write_bytes_total {wbytes}: more than one data unit apart"
    );
    assert_eq!(
        drive_cmds, wops,
        "nvme_host_write_commands_total vs nvsoak_write_ops_total"
    );
}

/// The accounting gauges compare nvsoak's written bytes with the drive's data-units-written
/// delta since the first poll. Both deltas must cover the same span, so they agree to within
/// one data unit at each end.
#[test]
fn accounting_gauges_agree_within_one_data_unit_per_boundary() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 50, "6s"),
    );
    let spec = daemon_spec("accounting", &cfg, "", "");
    let mut vm = Vm::boot(&spec);
    let (_, _, last) = soak_to_final_poll(&vm);
    stop_daemon(&mut vm);
    let d = [("device", "nvme0")];
    let host = last.get("nvsoak_accounting_host_written_bytes", &d);
    let drive = last.get("nvsoak_accounting_drive_written_bytes", &d);
    let (Some(host), Some(drive)) = (host, drive) else {
        vm.fail(&format!(
            "accounting gauges missing: host {host:?}, drive {drive:?}"
        ));
    };
    assert!(host > 0.0, "nvsoak wrote something");
    eprintln!("accounting: host {host} bytes, drive {drive} bytes");
    assert!(
        (host - drive).abs() <= 2.0 * 512_000.0,
        "nvsoak_accounting_host_written_bytes {host} vs nvsoak_accounting_drive_written_bytes {drive}"
    );
}
