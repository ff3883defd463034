//! NVMe passthrough (`engine = "io_uring_cmd"`) on the emulated namespace: the target is the
//! block device `/dev/nvme0n1` (checked and held), the I/O goes to its generic device
//! `/dev/ng0n1` as NVMe Read/Write commands. The soak counts its operations, verifies clean,
//! agrees with the drive's data units written, and bypasses the block layer (the namespace's
//! block statistics do not move, where the same soak on the block path moves them by every
//! I/O). blkdebug media errors come back with their NVMe status (sct 0x2 sc 0x81), in the
//! metrics and the log. A generic node named as the target, or a namespace the config does
//! not allow, is refused.

use std::fmt::Write as _;
use std::time::Duration;

use crate::daemon::{config, daemon_spec, stop_daemon};
use crate::harness::{Vm, VmSpec};

fn soak_config(name: &str, path: &str, serial: &str, engine: &str) -> String {
    format!(
        r#"[exporter]
listen = "127.0.0.1:9757"
[state]
dir = "/tmp/state-{name}"
[health]
enabled = true
poll_interval = "1s"
[[target]]
name = "{name}"
path = "{path}"
allow_destroy = "{serial}"
engine = "{engine}"
verify = "inline"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 16, workers = 1 }}
duration = "4s"
"#
    )
}

/// Reads plus writes completed by the block layer on nvme0n1 (`stat` fields 1 and 5).
const BLKSTAT: &str = r#"blk() { awk '{ print $1 + $5 }' /sys/block/nvme0n1/stat; }"#;

#[test]
fn passthrough_soak_verifies_agrees_and_bypasses_the_block_layer() {
    crate::require_vm!();
    let script = format!(
        r#"{BLKSTAT}
wait_for /dev/ng0n1 10 || echo 'no /dev/ng0n1'
ls -l /dev/ng0n1 > /tmp/ng
emit ng /tmp/ng
b0=$(blk)
run cmd nvsoak run --config /etc/cmd.toml --exit-when-done
b1=$(blk)
run blk nvsoak run --config /etc/blk.toml --exit-when-done
b2=$(blk)
echo "$b0 $b1 $b2" > /tmp/bstat
emit bstat /tmp/bstat
emit rcmd /tmp/state-c/results/c.json
emit rblk /tmp/state-b/results/b.json
"#
    );
    let mut spec = VmSpec::new("passthru", &script);
    spec.files.insert(
        "/etc/cmd.toml".into(),
        soak_config("c", "/dev/nvme0n1", "SOAK0001", "io_uring_cmd").into_bytes(),
    );
    spec.files.insert(
        "/etc/blk.toml".into(),
        soak_config("b", "/dev/nvme0n1", "SOAK0001", "io_uring").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(240);
    let ng = vm.wait_ok("ng", t).stdout_str();
    assert!(
        ng.starts_with('c'),
        "/dev/ng0n1 is a character device: {ng}"
    );
    let cmd = vm.wait_result("cmd", t);
    assert_eq!(cmd.status, 0, "passthrough soak: {}", cmd.stderr);
    let blk = vm.wait_result("blk", t);
    assert_eq!(blk.status, 0, "block-path soak: {}", blk.stderr);
    let b: Vec<u64> = vm
        .wait_ok("bstat", t)
        .stdout_str()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    assert_eq!(b.len(), 3, "{b:?}");
    let parse =
        |s: String| -> serde_json::Value { serde_json::from_str(&s).expect("results JSON") };
    let rc = parse(vm.wait_ok("rcmd", t).stdout_str());
    let rb = parse(vm.wait_ok("rblk", t).stdout_str());
    vm.finish(Duration::from_secs(60));
    let n = |v: &serde_json::Value, k: &str| v["soak"][k].as_u64().unwrap_or(0);
    let (c_ops, b_ops) = (
        n(&rc, "read_ops") + n(&rc, "write_ops"),
        n(&rb, "read_ops") + n(&rb, "write_ops"),
    );
    let (c_blk, b_blk) = (b[1] - b[0], b[2] - b[1]);
    println!(
        "passthrough: {c_ops} ops, {c_blk} block-layer I/Os; block path: {b_ops} ops, {b_blk} block-layer I/Os"
    );
    assert!(
        n(&rc, "read_ops") > 100 && n(&rc, "write_ops") > 100,
        "passthrough soak did I/O: {}",
        rc["soak"]
    );
    assert_eq!(
        (n(&rc, "errors"), n(&rc, "verify_errors")),
        (0, 0),
        "passthrough: no I/O or verify errors: {}",
        rc["soak"]
    );
    let drive = &rc["soak"]["drive"];
    assert_eq!(
        drive["accounting_agrees"],
        serde_json::Value::Bool(true),
        "the drive's data units written agree with the passthrough soak's bytes: {drive}"
    );
    // Passthrough commands are not block-layer reads and writes; the block path's are.
    assert!(
        (c_blk as f64) < 0.01 * c_ops as f64,
        "passthrough moved the block statistics by {c_blk} for {c_ops} ops"
    );
    assert!(
        b_blk as f64 > 0.9 * b_ops as f64,
        "block path: {b_blk} block-layer I/Os for {b_ops} ops"
    );
}

/// First 512-byte sector of the bad band, and how many 4 KiB blocks it covers.
const BAD_SECTOR: u64 = 65536;
const BAD_BLOCKS: u64 = 64;

fn blkdebug_conf() -> String {
    let mut s = String::new();
    for i in 0..BAD_BLOCKS {
        let _ = write!(
            s,
            "[inject-error]\nevent = \"none\"\niotype = \"read\"\nerrno = \"5\"\nsector = \"{}\"\n\n",
            BAD_SECTOR + 8 * i
        );
    }
    s
}

#[test]
fn passthrough_media_errors_surface_their_nvme_status() {
    crate::require_vm!();
    let target = r#"
[[target]]
name = "ns0"
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
engine = "io_uring_cmd"
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 70, bs = "4k", access = "random", iodepth = 8, workers = 1 }
duration = "10s"
"#;
    let cfg = config("1s", target);
    let mut spec = daemon_spec("passthru-media", &cfg, "", "");
    spec.drives[0].size = 64 << 20;
    spec.drives[0].blkdebug = Some(blkdebug_conf());
    let mut vm = Vm::boot(&spec);
    let st = [
        ("target", "ns0"),
        ("op", "read"),
        ("sct", "0x2"),
        ("sc", "0x81"),
    ];
    let enodata = [("target", "ns0"), ("op", "read"), ("errno", "ENODATA")];
    let (by_status, by_errno) = vm.wait_metrics(
        "NVMe status 0x2/0x81 read errors during the passthrough soak",
        Duration::from_secs(120),
        |m| {
            let s = m.sum("nvsoak_io_nvme_status_errors_total", &st)?;
            let e = m.sum("nvsoak_io_errors_total", &enodata)?;
            (s > 0.0).then_some((s, e))
        },
    );
    let log = stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(60));
    println!("passthrough media errors: {by_status} by status, {by_errno} as ENODATA");
    assert!(
        by_errno >= by_status,
        "each NVMe media error also counts as ENODATA: {by_errno} < {by_status}"
    );
    assert!(
        log.contains("NVMe status sct 0x2 sc 0x81 (unrecovered read error)"),
        "the log names the NVMe status: {log}"
    );
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn passthrough_refuses_generic_nodes_and_namespaces_not_allowed() {
    crate::require_vm!();
    let script = "wait_for /dev/ng0n1 10 || echo 'no /dev/ng0n1'\n\
        run ng timeout 60 nvsoak run --config /etc/ng.toml --exit-when-done\n\
        run ngcheck nvsoak check-config /etc/ng.toml\n\
        run serial timeout 60 nvsoak run --config /etc/serial.toml --exit-when-done\n";
    let mut spec = VmSpec::new("passthru-refused", script);
    spec.files.insert(
        "/etc/ng.toml".into(),
        soak_config("g", "/dev/ng0n1", "SOAK0001", "io_uring_cmd").into_bytes(),
    );
    spec.files.insert(
        "/etc/serial.toml".into(),
        soak_config("s", "/dev/nvme0n1", "OTHER0001", "io_uring_cmd").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(180);
    for key in ["ng", "ngcheck"] {
        let r = vm.wait_result(key, t);
        assert_ne!(r.status, 0, "{key}: the generic node must be refused");
        assert_ne!(r.status, 124, "{key}: timed out: {}", r.stderr);
        assert!(
            r.stderr.contains("block device") && r.stderr.contains("/dev/nvme0n1 instead"),
            "{key}: the refusal names the block device to configure: {}",
            r.stderr
        );
    }
    let r = vm.wait_result("serial", t);
    assert_ne!(r.status, 0, "a namespace not allowed must be refused");
    assert_ne!(r.status, 124, "timed out: {}", r.stderr);
    assert!(
        r.stderr.contains("SOAK0001") || r.stderr.contains("allow_destroy"),
        "the refusal names the allow_destroy check: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    vm.finish(Duration::from_secs(60));
}
