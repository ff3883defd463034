//! SATA: QEMU's `ide-hd` on the `pc` machine, served by the real libata (`ata_piix`) and SAT
//! translation, so nvsoak's `SG_IO` + `ATA PASS-THROUGH (16)` path answers for real.
//! `smartctl -j -a` (smartmontools) is the peer in the same guest: identity, WWN, every SMART
//! attribute's value, worst, threshold and raw value, and the SMART status must agree with
//! `nvsoak health --json`. QEMU aborts the Device Statistics log: nvsoak must report it as not
//! supported, log that once, and keep polling. Then the daemon soaks `/dev/sda` (allowed by its
//! serial) while it polls the disk. One boot.

use std::time::Duration;

use serde_json::Value;

use crate::daemon::{config, nvme_target, stop_daemon};
use crate::fixtures::json_u128;
use crate::harness::{APT_INSTALL, AtaDrive, Vm, VmSpec, which_tool};

const SERIAL: &str = "IW110TEST01";
const MODEL: &str = "ZA3840NM10001";
const WWN: u64 = 0x5000_c500_a1b2_c3d4;

const SCRIPT: &str = r#"
load_ata
wait_for /dev/sda 30 || echo 'no /dev/sda'
run smartctl smartctl -j -a /dev/sda
run soak nvsoak health --json /dev/sda
run soak_text nvsoak health /dev/sda
start_daemon /etc/nvsoak.toml
wait_host stop
stop_daemon daemon
run results cat /tmp/nvsoak-state/results/sata.json
run checkpoint cat /tmp/nvsoak-state/checkpoint.json
run report nvsoak report --format md --from /tmp/nvsoak-state/results/sata.json --out /tmp/report.md
run report_md cat /tmp/report.md
"#;

fn parse(vm: &Vm, what: &str, bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        vm.fail(&format!(
            "{what} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(bytes)
        ))
    })
}

/// Every field both tools read, as (what, smartctl, nvsoak) pairs that must be equal.
fn compare(peer: &Value, ours: &Value) -> Vec<String> {
    let mut diffs = Vec::new();
    let same = |diffs: &mut Vec<String>, what: &str, a: &Value, b: &Value| {
        let eq = match (json_u128(a), json_u128(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        };
        if !eq {
            diffs.push(format!("{what}: smartctl {a}, nvsoak {b}"));
        }
    };
    for k in ["model_name", "serial_number", "firmware_version"] {
        same(&mut diffs, k, &peer[k], &ours[k]);
    }
    for k in ["naa", "oui", "id"] {
        same(
            &mut diffs,
            &format!("wwn.{k}"),
            &peer["wwn"][k],
            &ours["wwn"][k],
        );
    }
    same(
        &mut diffs,
        "user_capacity.bytes",
        &peer["user_capacity"]["bytes"],
        &ours["user_capacity"]["bytes"],
    );
    same(
        &mut diffs,
        "smart_status.passed",
        &peer["smart_status"]["passed"],
        &ours["smart_status"]["passed"],
    );
    let table = |v: &Value| {
        v["ata_smart_attributes"]["table"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let (pt, ot) = (table(peer), table(ours));
    if pt.is_empty() || pt.len() != ot.len() {
        diffs.push(format!(
            "attribute tables: smartctl {} entries, nvsoak {}",
            pt.len(),
            ot.len()
        ));
    }
    for a in &pt {
        let id = &a["id"];
        let Some(b) = ot.iter().find(|b| &b["id"] == id) else {
            diffs.push(format!("attribute {id}: missing from nvsoak"));
            continue;
        };
        for k in ["name", "value", "worst", "thresh"] {
            same(&mut diffs, &format!("attribute {id} {k}"), &a[k], &b[k]);
        }
        same(
            &mut diffs,
            &format!("attribute {id} raw"),
            &a["raw"]["value"],
            &b["raw"]["value"],
        );
    }
    diffs
}

#[test]
fn sata_health_matches_smartctl_and_the_daemon_polls_while_soaking() {
    crate::require_vm!();
    if which_tool("smartctl", APT_INSTALL).is_none() {
        return;
    }
    let target = nvme_target("sata", "/dev/sda", SERIAL, 50, "15s");
    let cfg = config("1s", &target);
    let mut spec = VmSpec::new("sata", SCRIPT);
    spec.net = true;
    spec.ata = Some(AtaDrive {
        serial: SERIAL.into(),
        model: MODEL.into(),
        wwn: format!("{WWN:#x}"),
        size: 256 << 20,
    });
    spec.files
        .insert("/etc/nvsoak.toml".into(), cfg.into_bytes());
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(120);
    let peer = vm.wait_ok("smartctl", t);
    let soak = vm.wait_ok("soak", t);
    let text = vm.wait_ok("soak_text", t).stdout_str();
    let peer = parse(&vm, "smartctl -j -a /dev/sda", &peer.stdout);
    let ours = parse(&vm, "nvsoak health --json /dev/sda", &soak.stdout);

    let diffs = compare(&peer, &ours);
    if !diffs.is_empty() {
        vm.fail(&format!(
            "nvsoak and smartctl disagree:\n{}\nsmartctl: {peer:#}\nnvsoak: {ours:#}",
            diffs.join("\n")
        ));
    }
    assert_eq!(ours["serial_number"], SERIAL);
    assert_eq!(ours["model_name"], MODEL);
    assert_eq!(ours["smart_status"]["passed"], true);
    assert!(
        ours.get("ata_device_statistics").is_none(),
        "QEMU has no Device Statistics: {ours:#}"
    );
    let refused = ours["derived"]["unsupported"]["devstat"]
        .as_str()
        .unwrap_or("");
    assert!(
        refused.contains("not supported"),
        "devstat reported as not supported: {ours:#}"
    );
    assert!(text.contains("Device Statistics: not supported"), "{text}");

    // The daemon polls the disk while it soaks it: polls go on after devstat was refused.
    let m = vm.wait_metrics("ata polls while soaking", t, |m| {
        let polls_ok = m.get("ata_up", &[("device", "sda")]) == Some(1.0)
            && m.get(
                "nvsoak_health_poll_errors_total",
                &[("device", "sda"), ("log", "smart")],
            ) == Some(0.0)
            && m.sum("nvsoak_write_bytes_total", &[("target", "sata")])
                .is_some_and(|b| b > 0.0);
        polls_ok.then(|| m.clone())
    });
    let first_ts = m
        .get("nvsoak_health_poll_timestamp_seconds", &[])
        .unwrap_or(0.0);
    vm.wait_metrics("a later poll", t, |m2| {
        m2.get("nvsoak_health_poll_timestamp_seconds", &[])
            .filter(|ts| *ts >= first_ts + 2.0)
            .and(m2.get("ata_up", &[("device", "sda")]))
            .filter(|up| *up == 1.0)
    });
    assert_eq!(
        m.get(
            "ata_feature_supported",
            &[("device", "sda"), ("feature", "devstat")]
        ),
        Some(0.0)
    );
    assert_eq!(
        m.get("ata_smart_status_passed", &[("device", "sda")]),
        Some(1.0)
    );
    assert_eq!(
        m.get(
            "nvsoak_health_poll_errors_total",
            &[("device", "sda"), ("log", "devstat")]
        ),
        Some(0.0),
        "a refused log is not a poll error"
    );
    // The status page lists the SATA disk beside any NVMe drive, with its SMART status.
    let (code, page) = vm
        .http_get("/")
        .unwrap_or_else(|e| vm.fail(&format!("status page: {e}")));
    assert_eq!(code, 200);
    let row = page
        .split("<tr>")
        .find(|r| r.starts_with("<td>sda</td>"))
        .unwrap_or_else(|| vm.fail(&format!("no sda row on the status page:\n{page}")));
    assert!(row.contains(MODEL) && row.contains(SERIAL), "{row}");
    assert!(row.contains("<td class=\"ok\">up</td>"), "{row}");
    assert!(row.contains("<td class=\"ok\">passed,"), "{row}");
    let log = stop_daemon(&mut vm);
    let results = parse(&vm, "results", &vm.wait_ok("results", t).stdout);
    let checkpoint = parse(&vm, "checkpoint", &vm.wait_ok("checkpoint", t).stdout);
    vm.wait_ok("report", t);
    let md = vm.wait_ok("report_md", t).stdout_str();
    vm.finish(t);
    drive_during_the_soak(&results, &checkpoint, &md);
    let refusals = log
        .lines()
        .filter(|l| {
            l.contains("sda") && l.contains("not asked again") && l.contains("Device Statistics")
        })
        .count();
    assert_eq!(refusals, 1, "devstat refusal logged once:\n{log}");
}

/// The soak's drive figures for the emulated disk say honestly what QEMU gives: no Device
/// Statistics and no attribute 241, so no drive-side bytes written and no accounting check,
/// while nvsoak's own bytes over the same period are there.
fn drive_during_the_soak(results: &Value, checkpoint: &Value, md: &str) {
    assert_eq!(results["device"]["controller"], "sda", "{results:#}");
    assert_eq!(results["device"]["serial"], SERIAL, "{results:#}");
    let d = &results["soak"]["drive"];
    assert_eq!(d["device"], "sda", "{results:#}");
    let ata = &d["ata"];
    assert!(ata.is_object(), "ATA figures in the results file: {d:#}");
    assert_eq!(ata["written_source"], Value::Null, "{d:#}");
    assert_eq!(
        d["data_written_bytes"],
        Value::Null,
        "no drive-side bytes: {d:#}"
    );
    assert_eq!(d["accounting_agrees"], Value::Null, "{d:#}");
    assert_eq!(ata["smart_passed_latest"], true, "{d:#}");
    let ours = d["nvsoak_written_bytes"].as_u64().unwrap_or(0);
    assert!(ours > 0, "nvsoak's bytes between the two polls: {d:#}");
    assert!(
        d["latest_time"].as_f64() > d["start_time"].as_f64(),
        "two polls apart: {d:#}"
    );
    sata_gates(results, ata);
    let start = &checkpoint["targets"][0]["ata_at_soak_start"];
    assert!(
        start["counters"].is_object(),
        "the soak-start ATA counters are checkpointed: {checkpoint:#}"
    );
    assert!(md.contains("### Drive during the soak"), "{md}");
    assert!(md.contains("SATA disk sda"), "{md}");
    assert!(md.contains("no drive-side bytes written"), "{md}");
    assert!(
        md.contains("**The drive counts no bytes written") && !md.contains("accounting agrees"),
        "{md}"
    );
    assert!(
        md.contains("none: the drive reports neither Device Statistics nor attribute 241"),
        "{md}"
    );
    eprintln!(
        "sata soak: nvsoak wrote {ours} bytes between the soak-start and latest polls; QEMU reports no drive-side bytes written; power-on {} s",
        ata["power_on_secs"]
    );
}

/// The verdict's drive gates on a SATA disk read the ATA figures: QEMU's ide-hd reports a
/// temperature (SMART attribute 190), so the temperature gate is evaluated on it; it has no
/// Device Statistics, so percentage used is "not evaluated" with that reason, and ATA has no
/// available spare at all, so that gate does not apply.
fn sata_gates(results: &Value, ata: &Value) {
    let gates = results["verdict"]["gates"]
        .as_array()
        .unwrap_or_else(|| panic!("a verdict in the results file: {results:#}"));
    let gate = |name: &str| {
        gates
            .iter()
            .find(|g| g["gate"] == name)
            .unwrap_or_else(|| panic!("no {name} gate: {results:#}"))
    };
    let peak = ata["temperature_max_c"]
        .as_f64()
        .unwrap_or_else(|| panic!("QEMU's attribute 190 gives a temperature: {ata:#}"));
    let t = gate("temperature");
    assert_eq!(t["state"], "pass", "{t:#}");
    assert_eq!(t["value"].as_f64(), Some(peak), "{t:#}");
    let measured = t["measured"].as_str().unwrap_or("");
    assert!(
        measured.contains(&format!("peak {peak:.0} °C")) && measured.contains(" K)"),
        "{t:#}"
    );
    let p = gate("percentage_used");
    assert_eq!(p["state"], "not_evaluated", "{p:#}");
    assert!(
        p["note"].as_str().unwrap_or("").contains("Percentage Used"),
        "{p:#}"
    );
    let s = gate("available_spare");
    assert_eq!(s["state"], "not_applicable", "{s:#}");
    assert_eq!(
        s["note"], "a SATA drive reports no available spare",
        "{s:#}"
    );
    // ATA has no critical warning byte: the gate reads SMART RETURN STATUS, which QEMU's
    // disk answers as passed.
    let cw = gate("critical_warning");
    assert_eq!(cw["state"], "pass", "{cw:#}");
    assert_eq!(cw["measured"], "SMART RETURN STATUS: passed", "{cw:#}");
    eprintln!(
        "sata gates: temperature {measured}; percentage used not evaluated, spare not applicable"
    );
}
