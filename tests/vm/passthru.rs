//! NVMe passthrough (`engine = "io_uring_cmd"`) on the emulated namespace: the target is the
//! block device `/dev/nvme0n1` (checked and held), the I/O goes to its generic device
//! `/dev/ng0n1` as NVMe Read/Write commands. The soak counts its operations, verifies clean,
//! agrees with the drive's data units written, and bypasses the block layer (the namespace's
//! block statistics do not move, where the same soak on the block path moves them by every
//! I/O). blkdebug media errors come back with their NVMe status (sct 0x2 sc 0x81), in the
//! metrics and the log. The polled engine (`io_uring_cmd_poll`) does the same by polling,
//! and is refused without poll queues. A generic node named as the target stands for its
//! namespace, checked and held as such; a namespace the config does not allow is refused.

use std::fmt::Write as _;
use std::time::Duration;

use crate::daemon::{config, daemon_spec, stop_daemon};
use crate::harness::{GuestKernel, Vm, VmSpec};

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
    passthrough_soak(GuestKernel::V6_1);
}

#[test]
fn passthrough_soak_verifies_agrees_and_bypasses_the_block_layer_on_6_12() {
    crate::require_vm!();
    passthrough_soak(GuestKernel::V6_12);
}

fn passthrough_soak(kernel: GuestKernel) {
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
    let mut spec = VmSpec::new(&format!("passthru-{}", kernel.line()), &script);
    spec.kernel = kernel;
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
    media_errors(GuestKernel::V6_1, "io_uring_cmd", "");
}

#[test]
fn passthrough_media_errors_surface_their_nvme_status_on_6_12() {
    crate::require_vm!();
    media_errors(GuestKernel::V6_12, "io_uring_cmd", "");
}

/// The same on the polled passthrough path (guest with a poll queue), on 6.12. Linux 6.1
/// oopses here (see `engine::kernelbugs`), so there the engine is refused instead (below).
#[test]
fn polled_passthrough_media_errors_surface_their_nvme_status_on_6_12() {
    crate::require_vm!();
    media_errors(
        GuestKernel::V6_12,
        "io_uring_cmd_poll",
        "nvme.poll_queues=1",
    );
}

/// Many polled passthrough soaks into the bad band in one 6.12 guest: each ends FAIL on its
/// I/O errors (exit 2), and the kernel log shows no oops. On 6.1 the first such soak crashed
/// the guest in `bio_poll`.
#[test]
fn polled_passthrough_into_media_errors_never_oopses_6_12() {
    crate::require_vm!();
    let rounds = 8;
    let (done, dmesg, rcs) = polled_media_error_rounds(GuestKernel::V6_12, rounds);
    for bad in [
        "general protection",
        "Oops",
        "BUG:",
        "Call Trace",
        "bio_poll",
    ] {
        assert!(!dmesg.contains(bad), "6.12 guest log has {bad:?}:\n{dmesg}");
    }
    assert_eq!(done, rounds, "every round finished: {rcs:?}");
    assert!(
        rcs.iter().all(|&rc| rc == 2),
        "each round FAILs on its media errors (exit 2): {rcs:?}"
    );
}

/// On 6.1, `engine = "io_uring_cmd_poll"` is refused by check-config and by run, before any
/// I/O, with the kernel, the reason and the engines to use instead; the interrupt-driven
/// passthrough engine still runs (its media-error test above).
#[test]
fn polled_passthrough_is_refused_on_6_1_with_the_kernel_and_the_alternative() {
    crate::require_vm!();
    let script = "run release cat /proc/sys/kernel/osrelease\n\
         run check nvsoak check-config /etc/cp.toml\n\
         run run nvsoak run --config /etc/cp.toml --exit-when-done\n\
         ls /tmp/state-cp/results 2>/dev/null | wc -l > /tmp/nres\n\
         emit nres /tmp/nres\n";
    let mut spec = VmSpec::new("passthru-poll-refused-6.1", script);
    spec.kernel = GuestKernel::V6_1;
    spec.append = "nvme.poll_queues=1".into();
    spec.files.insert(
        "/etc/cp.toml".into(),
        soak_config("cp", "/dev/nvme0n1", "SOAK0001", "io_uring_cmd_poll").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(180);
    let release = vm.wait_ok("release", t).stdout_str();
    let release = release.trim();
    assert!(release.starts_with("6.1."), "{release}");
    for key in ["check", "run"] {
        let r = vm.wait_result(key, t);
        assert_ne!(r.status, 0, "{key} must refuse on {release}: {}", r.stderr);
        for want in [
            format!("Linux {release} can crash in bio_poll"),
            "engine = \"io_uring_cmd\"".to_string(),
            "fixed from Linux 6.5".to_string(),
        ] {
            assert!(
                r.stderr.contains(&want),
                "{key}: wants {want:?}: {}",
                r.stderr
            );
        }
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    vm.finish(Duration::from_secs(60));
}

fn media_errors(kernel: GuestKernel, engine: &str, append: &str) {
    let target = format!(
        r#"
[[target]]
name = "ns0"
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
engine = "{engine}"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 70, bs = "4k", access = "random", iodepth = 8, workers = 1 }}
duration = "10s"
"#
    );
    let cfg = config("1s", &target);
    let mut spec = daemon_spec(&format!("{engine}-media-{}", kernel.line()), &cfg, "", "");
    spec.kernel = kernel;
    spec.append = append.into();
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
    println!("{engine} media errors: {by_status} by status, {by_errno} as ENODATA");
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

/// Interrupts so far on nvme0's I/O queues (`nvme0q1`.., not the admin queue `nvme0q0`).
const IRQ: &str = r#"irq() { awk '/nvme0q[1-9]/ { for (i = 2; i <= NF; i++) { if ($i ~ /^[0-9]+$/) t += $i; else break } } END { print t + 0 }' /proc/interrupts; }"#;

/// `engine = "io_uring_cmd_poll"` with the driver given a poll queue: the soak counts its
/// operations, verifies clean, agrees with the drive's data units written, and its commands
/// complete by polling (almost no interrupts on the I/O queues).
/// On 6.12: 6.1 refuses the polled passthrough engine (see
/// `polled_passthrough_is_refused_on_6_1_with_the_kernel_and_the_alternative`).
#[test]
fn polled_passthrough_soak_verifies_agrees_and_raises_no_interrupts_on_6_12() {
    crate::require_vm!();
    let script = format!(
        r#"{IRQ}
{BLKSTAT}
cat /sys/block/nvme0n1/queue/io_poll > /tmp/io_poll
emit io_poll /tmp/io_poll
i0=$(irq); b0=$(blk)
run cmdpoll nvsoak run --config /etc/cmdpoll.toml --exit-when-done
i1=$(irq); b1=$(blk)
echo "$i0 $i1 $b0 $b1" > /tmp/counts
emit counts /tmp/counts
emit r /tmp/state-cp/results/cp.json
"#
    );
    let mut spec = VmSpec::new("passthru-poll-6.12", &script);
    spec.kernel = GuestKernel::V6_12;
    spec.append = "nvme.poll_queues=1".into();
    spec.files.insert(
        "/etc/cmdpoll.toml".into(),
        soak_config("cp", "/dev/nvme0n1", "SOAK0001", "io_uring_cmd_poll").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(240);
    assert_eq!(
        vm.wait_ok("io_poll", t).stdout_str().trim(),
        "1",
        "the namespace polls with nvme.poll_queues=1"
    );
    let r = vm.wait_result("cmdpoll", t);
    assert_eq!(r.status, 0, "polled passthrough soak: {}", r.stderr);
    let c: Vec<u64> = vm
        .wait_ok("counts", t)
        .stdout_str()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    assert_eq!(c.len(), 4, "{c:?}");
    let rc: serde_json::Value =
        serde_json::from_str(&vm.wait_ok("r", t).stdout_str()).expect("results JSON");
    vm.finish(Duration::from_secs(60));
    let n = |k: &str| rc["soak"][k].as_u64().unwrap_or(0);
    let ops = n("read_ops") + n("write_ops");
    let (irqs, blk) = (c[1] - c[0], c[3] - c[2]);
    println!("polled passthrough: {ops} ops, {irqs} I/O-queue interrupts, {blk} block-layer I/Os");
    assert!(
        n("read_ops") > 100 && n("write_ops") > 100,
        "polled passthrough soak did I/O: {}",
        rc["soak"]
    );
    assert_eq!(
        (n("errors"), n("verify_errors")),
        (0, 0),
        "polled passthrough: no I/O or verify errors: {}",
        rc["soak"]
    );
    let drive = &rc["soak"]["drive"];
    assert_eq!(
        drive["accounting_agrees"],
        serde_json::Value::Bool(true),
        "the drive's data units written agree with the polled soak's bytes: {drive}"
    );
    assert!(
        (irqs as f64) < 0.01 * ops as f64,
        "polled passthrough raised {irqs} interrupts for {ops} ops"
    );
    assert!(
        (blk as f64) < 0.01 * ops as f64,
        "passthrough moved the block statistics by {blk} for {ops} ops"
    );
}

/// The generic node as the target (`path = "/dev/ng0n1"`) with a passthrough engine: it
/// resolves to its namespace's block device, which is checked and held `O_EXCL` for the run (a
/// second nvsoak on `/dev/nvme0n1` meanwhile is refused as in use); a config whose
/// allow_destroy names another serial is refused; the block path's engine refuses the generic
/// node with the block device to name; and the polled passthrough engine is refused with the
/// reason on a guest without poll queues.
#[test]
fn generic_node_targets_are_checked_and_held_as_their_namespace() {
    crate::require_vm!();
    generic_node_targets(GuestKernel::V6_1);
}

#[test]
fn generic_node_targets_are_checked_and_held_as_their_namespace_on_6_12() {
    crate::require_vm!();
    generic_node_targets(GuestKernel::V6_12);
}

fn generic_node_targets(kernel: GuestKernel) {
    let script = r#"wait_for /dev/ng0n1 10 || echo 'no /dev/ng0n1'
ip link set lo up
run ngcheck nvsoak check-config /etc/ng.toml
nvsoak run --config /etc/ng.toml --exit-when-done > /tmp/ng.log 2>&1 &
p=$!
i=0
until wget -q -O - http://127.0.0.1:9757/metrics 2>/dev/null | grep -q '^nvsoak_read_ops_total'; do
  i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1
done
run held timeout 60 nvsoak run --config /etc/held.toml --exit-when-done
wait $p
emit ngrun /tmp/ng.log $?
emit rng /tmp/state-g/results/g.json
run serial timeout 60 nvsoak run --config /etc/serial.toml --exit-when-done
run blkengine nvsoak check-config /etc/blkengine.toml
run nopoll timeout 60 nvsoak run --config /etc/nopoll.toml --exit-when-done
run nopollcheck nvsoak check-config /etc/nopoll.toml
"#;
    let mut spec = VmSpec::new(&format!("passthru-ng-{}", kernel.line()), script);
    spec.kernel = kernel;
    let ng = soak_config("g", "/dev/ng0n1", "SOAK0001", "io_uring_cmd")
        .replace("duration = \"4s\"", "duration = \"15s\"");
    spec.files.insert("/etc/ng.toml".into(), ng.into_bytes());
    spec.files.insert(
        "/etc/held.toml".into(),
        soak_config("h", "/dev/nvme0n1", "SOAK0001", "io_uring")
            .replace("127.0.0.1:9757", "127.0.0.1:9758")
            .into_bytes(),
    );
    spec.files.insert(
        "/etc/serial.toml".into(),
        soak_config("s", "/dev/ng0n1", "OTHER0001", "io_uring_cmd").into_bytes(),
    );
    spec.files.insert(
        "/etc/blkengine.toml".into(),
        soak_config("b", "/dev/ng0n1", "SOAK0001", "io_uring").into_bytes(),
    );
    spec.files.insert(
        "/etc/nopoll.toml".into(),
        soak_config("n", "/dev/ng0n1", "SOAK0001", "io_uring_cmd_poll").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(240);
    let check = vm.wait_result("ngcheck", t);
    assert_eq!(
        check.status, 0,
        "check-config takes the generic node: {}",
        check.stderr
    );
    let held = vm.wait_result("held", t);
    let run = vm.wait_result("ngrun", t);
    let results: serde_json::Value =
        serde_json::from_str(&vm.wait_ok("rng", t).stdout_str()).expect("results JSON");
    let serial = vm.wait_result("serial", t);
    let blkengine = vm.wait_result("blkengine", t);
    let nopoll = vm.wait_result("nopoll", t);
    let nopollcheck = vm.wait_result("nopollcheck", t);
    vm.finish(Duration::from_secs(60));

    assert_eq!(
        run.status,
        0,
        "the soak on /dev/ng0n1: {}",
        run.stdout_str()
    );
    let n = |k: &str| results["soak"][k].as_u64().unwrap_or(0);
    assert!(
        n("read_ops") > 100 && n("write_ops") > 100,
        "the generic-node soak did I/O: {}",
        results["soak"]
    );
    assert_eq!(
        (n("errors"), n("verify_errors")),
        (0, 0),
        "{}",
        results["soak"]
    );
    assert_ne!(
        held.status, 0,
        "the namespace is held while the generic-node soak runs"
    );
    assert_ne!(held.status, 124, "timed out: {}", held.stderr);
    assert!(
        held.stderr.contains("/dev/nvme0n1") && held.stderr.contains("in use"),
        "the second run names the held namespace: {}",
        held.stderr
    );
    assert_ne!(serial.status, 0, "a namespace not allowed must be refused");
    assert_ne!(serial.status, 124, "timed out: {}", serial.stderr);
    assert!(
        serial.stderr.contains("allow_destroy") || serial.stderr.contains("SOAK0001"),
        "the refusal names the allow_destroy check: {}",
        serial.stderr
    );
    assert_ne!(
        blkengine.status, 0,
        "engine io_uring refuses a generic node"
    );
    assert!(
        blkengine.stderr.contains("/dev/nvme0n1 instead")
            && blkengine.stderr.contains("io_uring_cmd"),
        "the refusal names the block device and the passthrough engines: {}",
        blkengine.stderr
    );
    for (key, r) in [("run", &nopoll), ("check-config", &nopollcheck)] {
        assert_ne!(
            r.status, 0,
            "{key}: io_uring_cmd_poll without poll queues must be refused"
        );
        assert_ne!(r.status, 124, "{key}: timed out: {}", r.stderr);
        // 6.1 refuses the engine outright (its bio_poll bug), before looking for poll queues.
        let reason = match kernel {
            GuestKernel::V6_1 => "can crash in bio_poll",
            GuestKernel::V6_12 => "queue/io_poll is 0",
        };
        assert!(
            r.stderr.contains("engine = \"io_uring_cmd_poll\"")
                && r.stderr.contains(reason)
                && (kernel == GuestKernel::V6_1 || r.stderr.contains("nvme.poll_queues"))
                && r.stderr.contains("engine = \"io_uring_cmd\""),
            "{key}: the refusal gives the reason ({reason}) and the remedy: {}",
            r.stderr
        );
    }
    for r in [&held, &serial, &blkengine, &nopoll, &nopollcheck] {
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}

/// Polled passthrough against the blkdebug bad band, `rounds` soaks in one guest, each followed
/// by a look at the kernel log for an oops. Returns (rounds completed, the guest's dmesg, the
/// rounds' exit statuses).
pub fn polled_media_error_rounds(kernel: GuestKernel, rounds: u32) -> (u32, String, Vec<i32>) {
    let script = format!(
        r#"i=0
: > /tmp/rcs
while [ $i -lt {rounds} ]; do
  i=$((i+1))
  rm -rf /tmp/state-pm
  nvsoak run --config /etc/pm.toml --exit-when-done >/tmp/round.log 2>&1
  echo "$?" >> /tmp/rcs
  echo "@@NVSOAK-ROUND $i"
  if dmesg | grep -q -e 'general protection' -e 'Oops' -e 'BUG:' -e 'Call Trace'; then
    echo "@@NVSOAK-OOPS $i"; break
  fi
done
emit rcs /tmp/rcs
emit lastlog /tmp/round.log
dmesg > /tmp/dmesg
emit dmesg /tmp/dmesg
"#
    );
    let cfg = r#"[exporter]
listen = "127.0.0.1:9757"
[state]
dir = "/tmp/state-pm"
[health]
enabled = false
[[target]]
name = "pm"
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
engine = "io_uring_cmd_poll"
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 70, bs = "4k", access = "random", iodepth = 8, workers = 1 }
duration = "3s"
"#;
    let mut spec = VmSpec::new(&format!("pm-rounds-{}", kernel.line()), &script);
    spec.kernel = kernel;
    spec.append = "nvme.poll_queues=1".into();
    spec.drives[0].size = 64 << 20;
    spec.drives[0].blkdebug = Some(blkdebug_conf());
    spec.files
        .insert("/etc/pm.toml".into(), cfg.as_bytes().to_vec());
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(60 + 40 * u64::from(rounds));
    let rcs: Vec<i32> = vm
        .wait_ok("rcs", t)
        .stdout_str()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let last = vm.wait_ok("lastlog", t).stdout_str();
    let dmesg = vm.wait_ok("dmesg", t).stdout_str();
    vm.finish(Duration::from_secs(60));
    println!("last round's log:\n{last}");
    (rcs.len() as u32, dmesg, rcs)
}
