//! Issue 17's qualification steps on the emulated controller (QEMU 7.2: Format NVM, no Device
//! Self-test). Three controllers in one guest: SOAK0001 carries a byte pattern and is purged by
//! Format NVM (user data erase), after which the pattern reads back as zeroes in the guest and
//! in the image on the host, and the self-test after it is recorded as "not supported";
//! SOAKB002 carries the same pattern but its serial is not allowed, and SOAKC003 is allowed
//! but holds an ext4 file system: both purges are refused before any command is sent, exactly
//! as writes are, and their images stay byte for byte as they were.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Drive, Vm, VmSpec, which_tool};

const OURS: &str = "SOAK0001";
const NOT_ALLOWED: &str = "SOAKB002";
const EXT4: &str = "SOAKC003";
const PATTERN: u8 = 0x5a;

fn purge_config(path: &str, allow: &str) -> String {
    format!(
        r#"[state]
dir = "/tmp/nvsoak-state"
[health]
enabled = false
[[target]]
name = "ns"
path = "{path}"
allow_destroy = "{allow}"
[[target.phase]]
kind = "purge"
method = "format-user-data"
timeout = "5m"
[[target.phase]]
kind = "self-test"
test = "short"
"#
    )
}

/// A 64 MiB image with the pattern in its first 4 MiB and in 1 MiB at 32 MiB.
fn patterned(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let mut b = vec![0u8; 64 << 20];
    b[..4 << 20].fill(PATTERN);
    b[32 << 20..33 << 20].fill(PATTERN);
    std::fs::write(&p, &b).expect("writing the image");
    p
}

fn nonzero(b: &[u8]) -> usize {
    b.iter().filter(|x| **x != 0).count()
}

#[test]
fn purge_by_format_erases_only_an_allowed_clean_namespace_and_self_test_is_not_supported() {
    let _ = crate::require_vm!();
    let Some(mkfs) = which_tool("mkfs.ext4", "apt-get install -y e2fsprogs") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("nvsoak-vm-steps-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("scratch dir");
    let ours = patterned(dir.path(), "ours.img");
    let other = patterned(dir.path(), "other.img");
    let ext4 = dir.path().join("ext4.img");
    std::fs::File::create(&ext4)
        .and_then(|f| f.set_len(64 << 20))
        .expect("creating the ext4 image");
    let out = Command::new(mkfs)
        .args(["-q", "-F"])
        .arg(&ext4)
        .output()
        .expect("running mkfs.ext4");
    assert!(
        out.status.success(),
        "mkfs.ext4: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let other_before = std::fs::read(&other).expect("read");
    let ext4_before = std::fs::read(&ext4).expect("read");

    // Namespaces are found in the guest by serial. NZ counts the non-zero bytes of the first
    // 4 MiB and of 1 MiB at 32 MiB, read through the page cache as any reader would.
    let script = format!(
        r#"
wait_for /dev/nvme2n1 10 || echo 'no /dev/nvme2n1'
for c in /sys/class/nvme/nvme*; do echo "$(tr -d ' ' < $c/serial) $(basename $c)"; done > /tmp/map
emit map /tmp/map
A=$(grep '^{OURS} ' /tmp/map | cut -d' ' -f2)
B=$(grep '^{NOT_ALLOWED} ' /tmp/map | cut -d' ' -f2)
C=$(grep '^{EXT4} ' /tmp/map | cut -d' ' -f2)
for f in ours other ext4; do sed "s|@A@|/dev/${{A}}n1|; s|@B@|/dev/${{B}}n1|; s|@C@|/dev/${{C}}n1|" /etc/$f.tmpl > /etc/$f.toml; done
nz() {{ ( dd if=$1 bs=1M count=4 2>/dev/null; dd if=$1 bs=1M skip=32 count=1 2>/dev/null ) | tr -d '\000' | wc -c; }}
nz /dev/${{A}}n1 > /tmp/before; emit before /tmp/before
run plan nvsoak check-config /etc/ours.toml
run other timeout 120 nvsoak run --config /etc/other.toml --exit-when-done
run ext4 timeout 120 nvsoak run --config /etc/ext4.toml --exit-when-done
run ours timeout 300 nvsoak run --config /etc/ours.toml --exit-when-done
nz /dev/${{A}}n1 > /tmp/after; emit after /tmp/after
emit results /tmp/nvsoak-state/results/ns.json
"#
    );
    let mut spec = VmSpec::new("steps-purge", &script);
    let mut drives = vec![
        Drive::new("nvme0", OURS),
        Drive::new("nvme1", NOT_ALLOWED),
        Drive::new("nvme2", EXT4),
    ];
    drives[0].image = Some(ours.clone());
    drives[1].image = Some(other.clone());
    drives[2].image = Some(ext4.clone());
    spec.drives = drives;
    spec.files.insert(
        "/etc/ours.tmpl".into(),
        purge_config("@A@", OURS).into_bytes(),
    );
    // B's namespace, allowed only by A's serial; C's ext4 namespace, allowed by its own.
    spec.files.insert(
        "/etc/other.tmpl".into(),
        purge_config("@B@", OURS).into_bytes(),
    );
    spec.files.insert(
        "/etc/ext4.tmpl".into(),
        purge_config("@C@", EXT4).into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let before = vm.wait_ok("before", Duration::from_secs(90)).stdout_str();
    let plan = vm.wait_ok("plan", Duration::from_secs(90)).stdout_str();
    let other_r = vm.wait_result("other", Duration::from_secs(150));
    let ext4_r = vm.wait_result("ext4", Duration::from_secs(150));
    let ours_r = vm.wait_result("ours", Duration::from_secs(330));
    let after = vm.wait_ok("after", Duration::from_secs(60)).stdout_str();
    let results = vm.wait_result("results", Duration::from_secs(30));
    vm.finish(Duration::from_secs(30));

    // check-config shows both steps with their time estimates.
    assert!(
        plan.contains("phase 1 purge: Format NVM with a user data erase")
            && plan.contains("waits at most 5m"),
        "{plan}"
    );
    assert!(
        plan.contains("phase 2 self-test: a short device self-test")
            && plan.contains("waits at most 7m"),
        "{plan}"
    );

    // Refused exactly as writes are: the serial, then the signature.
    eprintln!("steps: not allowed: {}", other_r.stderr.trim());
    eprintln!("steps: ext4: {}", ext4_r.stderr.trim());
    assert!(
        other_r.status != 0 && other_r.status != 124,
        "{}",
        other_r.stderr
    );
    assert!(
        other_r.stderr.contains(NOT_ALLOWED) && other_r.stderr.contains("allow_destroy"),
        "the refusal names the drive's serial and allow_destroy: {}",
        other_r.stderr
    );
    assert!(
        ext4_r.status != 0 && ext4_r.status != 124,
        "{}",
        ext4_r.stderr
    );
    assert!(
        ext4_r.stderr.contains("ext4"),
        "the refusal names the ext4 signature: {}",
        ext4_r.stderr
    );

    // The purge ran, and what was there reads back as zeroes. The plan wrote and verified
    // nothing and polled no health (health is off here): its verdict is INCOMPLETE (exit 3),
    // naming the drive gates it could not evaluate, never PASS.
    assert_eq!(
        ours_r.status,
        3,
        "nvsoak run: {}\n{}",
        ours_r.stderr,
        ours_r.stdout_str()
    );
    assert!(
        ours_r.stderr.contains("--exit-when-done: INCOMPLETE")
            && ours_r
                .stderr
                .contains("media_errors: not evaluated (no health data"),
        "{}",
        ours_r.stderr
    );
    assert_eq!(
        before.trim(),
        (5u64 << 20).to_string(),
        "the pattern was there"
    );
    assert_eq!(after.trim(), "0", "the pattern is gone after the purge");
    let log = format!("{}{}", ours_r.stdout_str(), ours_r.stderr);
    assert!(log.contains("purge started"), "{log}");
    assert!(log.contains("purge format-user-data: passed"), "{log}");
    assert!(log.contains("self-test short: not supported"), "{log}");

    let r: Value = serde_json::from_slice(&results.stdout)
        .unwrap_or_else(|e| panic!("results file: {e}: {}", results.stdout_str()));
    let steps = r["qualification_steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no qualification_steps: {r}"));
    assert_eq!(steps.len(), 2, "{r}");
    assert_eq!(steps[0]["kind"], "purge");
    assert_eq!(steps[0]["method"], "format-user-data");
    assert_eq!(steps[0]["status"], "passed", "{}", steps[0]);
    assert_eq!(steps[0]["nsid"], 1);
    assert!(
        steps[0]["controller"]
            .as_str()
            .is_some_and(|c| c.starts_with("nvme")),
        "{}",
        steps[0]
    );
    assert_eq!(steps[1]["kind"], "self-test");
    assert_eq!(steps[1]["method"], "short");
    assert_eq!(steps[1]["status"], "not_supported", "{}", steps[1]);
    assert!(
        steps[1]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("OACS") && d.contains("bit 4 clear")),
        "{}",
        steps[1]
    );

    // On the host: our image is zero where the pattern was; the others are untouched.
    let ours_after = std::fs::read(&ours).expect("read");
    assert_eq!(nonzero(&ours_after), 0, "the purged image still holds data");
    assert!(
        std::fs::read(&other).ok() == Some(other_before),
        "the not-allowed drive's image changed"
    );
    assert!(
        std::fs::read(&ext4).ok() == Some(ext4_before),
        "the ext4 image changed"
    );
}

/// A restart never purges twice: the daemon purges, moves on to a soak over the first half of
/// the namespace and is stopped; 1 MiB of pattern written past the soak's region then survives
/// the resumed run, whose results still hold the one purge.
#[test]
fn a_resumed_plan_does_not_purge_again() {
    let _ = crate::require_vm!();
    let cfg = r#"[state]
dir = "/tmp/nvsoak-state"
[health]
enabled = false
[[target]]
name = "ns"
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
region = "50%"
[[target.phase]]
kind = "purge"
method = "format-user-data"
[[target.phase]]
kind = "soak"
job = { name = "w", read = 0, bs = "4k", access = "random", iodepth = 4, workers = 1 }
duration = "10m"
"#;
    let script = r#"
wait_for /dev/nvme0n1 10 || echo 'no /dev/nvme0n1'
# waits up to 60 s for PATTERN in FILE
wait_grep() { i=0; while ! grep -q "$1" "$2" 2>/dev/null; do i=$((i+1)); [ $i -gt 600 ] && return 1; sleep 0.1; done; }
start_daemon /etc/nvsoak.toml
wait_grep '"status": *"passed"' /tmp/nvsoak-state/results/ns.json || echo 'no purge recorded'
wait_grep 'phase 2 (soak) started' /tmp/daemon.log || echo 'no soak'
stop_daemon first
dd if=/etc/pat of=/dev/nvme0n1 bs=1M seek=200 count=1 conv=fsync 2>/dev/null
start_daemon /etc/nvsoak.toml
wait_grep 'phase 2 (soak) ' /tmp/daemon.log || echo 'no resumed soak'
stop_daemon second
dd if=/dev/nvme0n1 bs=1M skip=200 count=1 2>/dev/null | tr -d '\000' | wc -c > /tmp/kept
emit kept /tmp/kept
emit results /tmp/nvsoak-state/results/ns.json
"#;
    let mut spec = VmSpec::new("steps-resume", script);
    spec.files
        .insert("/etc/nvsoak.toml".into(), cfg.as_bytes().to_vec());
    spec.files.insert("/etc/pat".into(), vec![PATTERN; 1 << 20]);
    let mut vm = Vm::boot(&spec);
    let first = vm.wait_result("first", Duration::from_secs(120));
    let second = vm.wait_result("second", Duration::from_secs(120));
    let kept = vm.wait_ok("kept", Duration::from_secs(60)).stdout_str();
    let results = vm.wait_ok("results", Duration::from_secs(30));
    vm.finish(Duration::from_secs(30));
    let second_status = second.status;
    let (first, second) = (first.stdout_str(), second.stdout_str());
    assert!(first.contains("purge format-user-data: passed"), "{first}");
    assert!(
        second.contains("phase 2 (soak) ")
            && !second.contains("purge started")
            && !second.contains("phase 1 (purge)"),
        "the resumed run goes straight to its soak (exit status {second_status}): {second}"
    );
    assert_eq!(
        kept.trim(),
        (1u64 << 20).to_string(),
        "the pattern survived"
    );
    let r: Value = serde_json::from_slice(&results.stdout)
        .unwrap_or_else(|e| panic!("results file: {e}: {}", results.stdout_str()));
    let purges: Vec<&Value> = r["qualification_steps"]
        .as_array()
        .map(|a| a.iter().filter(|s| s["kind"] == "purge").collect())
        .unwrap_or_default();
    assert_eq!(purges.len(), 1, "{r}");
    assert_eq!(purges[0]["status"], "passed");
}
