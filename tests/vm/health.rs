//! Scenario 1: `nvsoak health --json` against nvme-cli on the emulated controller, field by
//! field: every key of `nvme smart-log -o json`, and the serial, model, firmware and the other
//! identify fields nvsoak prints, compared with `nvme id-ctrl -o json`. Counters are made
//! non-zero first (direct I/O), and the critical warning is set (QMP bits plus the temperature
//! bit from a lowered threshold), so the comparison covers more than zeros.

use std::time::Duration;

use serde_json::Value;

use crate::fixtures::json_u128;
use crate::harness::{Drive, Vm, VmSpec};

const SCRIPT: &str = r#"
wait_for /dev/nvme1n1 10 || echo 'no /dev/nvme1n1'
dd if=/dev/urandom of=/dev/nvme0n1 bs=1M count=3 oflag=direct 2>/dev/null
dd if=/dev/nvme0n1 of=/dev/null bs=64k count=20 iflag=direct 2>/dev/null
dd if=/dev/urandom of=/dev/nvme1n1 bs=1M count=1 oflag=direct 2>/dev/null
echo '@@NVSOAK-WAIT-QMP'
wait_host qmp-done
nvme set-feature /dev/nvme0 -f 4 -v 0x13C >/dev/null
run cli_smart nvme smart-log /dev/nvme0 -o json
run cli_id nvme id-ctrl /dev/nvme0 -o json
run cli_ns nvme id-ns /dev/nvme0n1 -o json
run soak nvsoak health --json /dev/nvme0
run soak_all nvsoak health --json
run soak_text nvsoak health /dev/nvme0
run cli_smart1 nvme smart-log /dev/nvme1 -o json
"#;

fn parse(vm: &Vm, what: &str, bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        vm.fail(&format!(
            "{what} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(bytes)
        ))
    })
}

/// Equal as numbers (either may be a string, nvme-cli's 128-bit style) or as trimmed strings.
fn same(a: &Value, b: &Value) -> bool {
    match (json_u128(a), json_u128(b)) {
        (Some(x), Some(y)) => x == y,
        _ => match (a.as_str(), b.as_str()) {
            (Some(x), Some(y)) => x.trim_end() == y.trim_end(),
            _ => a == b,
        },
    }
}

#[test]
fn health_json_matches_nvme_cli() {
    crate::require_vm!();
    let mut spec = VmSpec::new("health", SCRIPT);
    spec.drives = vec![
        Drive::new("nvme0", "HEALTH0A"),
        Drive::new("nvme1", "HEALTH1B"),
    ];
    let mut vm = Vm::boot(&spec);
    vm.wait_text("@@NVSOAK-WAIT-QMP", Duration::from_secs(90));
    if let Err(e) = vm.qmp().set_critical_warning("nvme0", 0x04) {
        vm.fail(&format!("QMP: {e}"));
    }
    vm.send_line("qmp-done");
    let t = Duration::from_secs(60);
    let smart = vm.wait_ok("cli_smart", t);
    let id = vm.wait_ok("cli_id", t);
    let ns = vm.wait_ok("cli_ns", t);
    let soak = vm.wait_ok("soak", t);
    let soak_all = vm.wait_ok("soak_all", t);
    let soak_text = vm.wait_ok("soak_text", t);
    let smart1 = vm.wait_ok("cli_smart1", t);
    vm.finish(t);

    let smart = parse(&vm, "nvme smart-log -o json", &smart.stdout);
    let id = parse(&vm, "nvme id-ctrl -o json", &id.stdout);
    let ns = parse(&vm, "nvme id-ns -o json", &ns.stdout);
    let soak = parse(&vm, "nvsoak health --json /dev/nvme0", &soak.stdout);

    let mut diffs = Vec::new();
    let Some(smart_obj) = smart.as_object() else {
        vm.fail(&format!("smart-log JSON is not an object: {smart}"));
    };
    assert!(
        smart_obj.len() >= 15,
        "nvme-cli printed too few SMART keys: {smart}"
    );
    for (k, want) in smart_obj {
        match soak.get(k) {
            Some(got) if same(got, want) => {}
            got => diffs.push(format!("SMART {k}: nvme-cli {want}, nvsoak {got:?}")),
        }
    }
    for k in [
        "sn", "mn", "fr", "vid", "ssvid", "cntlid", "elpe", "wctemp", "cctemp", "tnvmcap",
    ] {
        match (soak.get(k), id.get(k)) {
            (Some(got), Some(want)) if same(got, want) => {}
            (got, want) => diffs.push(format!("id-ctrl {k}: nvme-cli {want:?}, nvsoak {got:?}")),
        }
    }
    match soak["namespaces"].get(0) {
        Some(n) if same(&n["nsze"], &ns["nsze"]) => {}
        n => diffs.push(format!(
            "namespace nsze: nvme-cli {}, nvsoak {n:?}",
            ns["nsze"]
        )),
    }
    if !diffs.is_empty() {
        vm.fail(&format!(
            "nvsoak health --json differs from nvme-cli:\n  {}\nnvsoak printed:\n{soak:#}",
            diffs.join("\n  ")
        ));
    }
    // Guard against a vacuous comparison: the interesting fields are really non-zero.
    assert_eq!(
        json_u128(&smart["critical_warning"]),
        Some(0x06),
        "QMP bit 2 + temperature bit 1"
    );
    assert!(
        json_u128(&smart["data_units_written"]).is_some_and(|v| v >= 7),
        "{smart}"
    );
    assert!(
        json_u128(&smart["host_read_commands"]).is_some_and(|v| v >= 20),
        "{smart}"
    );
    assert_eq!(soak["sn"].as_str().map(str::trim_end), Some("HEALTH0A"));
    let written = json_u128(&smart["data_units_written"]).unwrap_or_default();
    assert_eq!(
        json_u128(&soak["derived"]["data_written_bytes"]),
        Some(written * 512_000),
        "derived bytes are data units x 512000"
    );

    // Without a device argument: both controllers, each with its own serial and counters.
    let all = parse(&vm, "nvsoak health --json", &soak_all.stdout);
    let Some(all) = all.as_array() else {
        vm.fail(&format!(
            "nvsoak health --json without devices should print an array: {all}"
        ));
    };
    let serials: Vec<&str> = all
        .iter()
        .filter_map(|d| d["sn"].as_str())
        .map(str::trim_end)
        .collect();
    assert_eq!(serials.len(), 2, "two controllers: {serials:?}");
    assert!(
        serials.contains(&"HEALTH0A") && serials.contains(&"HEALTH1B"),
        "{serials:?}"
    );
    let smart1 = parse(&vm, "nvme smart-log /dev/nvme1 -o json", &smart1.stdout);
    let d1 = all
        .iter()
        .find(|d| d["sn"].as_str().map(str::trim_end) == Some("HEALTH1B"));
    let d1 = d1.unwrap_or_else(|| vm.fail("HEALTH1B missing"));
    assert!(
        same(&d1["data_units_written"], &smart1["data_units_written"]),
        "nvme1 counters: {d1}"
    );
    assert!(
        same(&d1["critical_warning"], &smart1["critical_warning"]),
        "nvme1 warning: {d1}"
    );
    assert_eq!(
        json_u128(&d1["critical_warning"]),
        Some(0),
        "nvme1 has no warning"
    );

    let text = soak_text.stdout_str();
    assert!(
        text.contains("HEALTH0A") && text.contains("QEMU NVMe Ctrl"),
        "text output:\n{text}"
    );
}
