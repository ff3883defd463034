//! Scenarios 7 and 8: which drives the daemon may write. Two controllers with different
//! serials are each discovered, polled and labelled, and only the one whose serial the config
//! allows is written. A namespace holding an ext4 file system (formatted on the host before
//! boot) is refused even though its serial is allowed, and its bytes stay as they were.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::daemon::{config, poll_after, poll_ts, stop_daemon};
use crate::harness::{Drive, Vm, VmSpec, which_tool};

const SERIAL_A: &str = "SOAKA001";
const SERIAL_B: &str = "SOAKB002";

fn target(name: &str, path: &str, allow: &str, duration: &str) -> String {
    format!(
        r#"
[[target]]
name = "{name}"
path = "{path}"
allow_destroy = "{allow}"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 8, workers = 1 }}
duration = "{duration}"
"#
    )
}

#[test]
fn two_controllers_are_labelled_apart_and_only_the_allowed_one_is_written() {
    crate::require_vm!();
    // Namespace paths are resolved in the guest from the serials in sysfs.
    let good = config("1s", &target("a", "@A@", SERIAL_A, "6s"));
    let bad = config("1s", &target("b", "@B@", SERIAL_A, "6s"));
    let script = format!(
        r#"
wait_for /dev/nvme1n1 10 || echo 'no /dev/nvme1n1'
for c in /sys/class/nvme/nvme*; do echo "$(tr -d ' ' < $c/serial) $(basename $c)"; done > /tmp/map
emit map /tmp/map
A=$(grep '^{SERIAL_A} ' /tmp/map | cut -d' ' -f2)
B=$(grep '^{SERIAL_B} ' /tmp/map | cut -d' ' -f2)
echo 2 > /sys/block/${{A}}n1/queue/nomerges
for f in nvsoak bad; do sed "s|@A@|/dev/${{A}}n1|; s|@B@|/dev/${{B}}n1|" /etc/$f.tmpl > /etc/$f.toml; done
run refused timeout 60 nvsoak run --config /etc/bad.toml
start_daemon /etc/nvsoak.toml
wait_host stop
stop_daemon daemon
"#
    );
    let mut spec = VmSpec::new("two-controllers", &script);
    spec.net = true;
    spec.drives = vec![Drive::new("nvme0", SERIAL_A), Drive::new("nvme1", SERIAL_B)];
    spec.files
        .insert("/etc/nvsoak.tmpl".into(), good.into_bytes());
    spec.files.insert("/etc/bad.tmpl".into(), bad.into_bytes());
    let mut vm = Vm::boot(&spec);

    let map = vm.wait_ok("map", Duration::from_secs(90)).stdout_str();
    let dev = |serial: &str| -> String {
        map.lines()
            .find_map(|l| l.strip_prefix(&format!("{serial} ")))
            .map(str::to_string)
            .unwrap_or_else(|| vm.fail(&format!("serial {serial} not in /sys/class/nvme: {map:?}")))
    };
    let (a, b) = (dev(SERIAL_A), dev(SERIAL_B));
    assert_ne!(a, b);

    // The target on B, allowed only by A's serial, is refused before anything runs.
    let refused = vm.wait_result("refused", Duration::from_secs(90));
    assert_ne!(
        refused.status, 0,
        "a target whose serial is not allowed must be refused"
    );
    assert_ne!(
        refused.status, 124,
        "nvsoak did not exit (timeout): {}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains(SERIAL_B) || refused.stderr.contains("allow_destroy"),
        "the refusal names the serial or the allow_destroy key: {}",
        refused.stderr
    );

    eprintln!("two-controllers: refusal: {}", refused.stderr.trim());
    let ta = [("target", "a")];
    let da = [("device", a.as_str())];
    let db = [("device", b.as_str())];
    let mid = vm.wait_metrics(
        "both drives polled during the soak",
        Duration::from_secs(60),
        |m| {
            (m.get("nvme_up", &da) == Some(1.0)
                && m.get("nvme_up", &db) == Some(1.0)
                && m.get("nvsoak_phase_running", &ta) == Some(1.0))
            .then(|| m.clone())
        },
    );
    for (d, serial) in [(&da, SERIAL_A), (&db, SERIAL_B)] {
        let info = mid
            .find("nvme_info", d)
            .next()
            .unwrap_or_else(|| vm.fail(&format!("no nvme_info{d:?}")));
        assert_eq!(
            info.labels.get("serial").map(String::as_str),
            Some(serial),
            "{d:?}"
        );
    }
    let done = vm.wait_metrics("the phase to finish", Duration::from_secs(60), |m| {
        (m.get("nvsoak_phase_running", &ta) == Some(0.0)).then(|| m.clone())
    });
    let ts = poll_ts(&done).unwrap_or_else(|| vm.fail("no poll timestamp"));
    let last = poll_after(&vm, ts, Duration::from_secs(30));
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));

    let wops = last.sum("nvsoak_write_ops_total", &ta).unwrap_or(0.0);
    assert!(wops > 1000.0, "target a ran: {wops} writes");
    assert_eq!(
        last.get("nvme_host_write_commands_total", &da),
        Some(wops),
        "the allowed drive got exactly nvsoak's writes"
    );
    assert_eq!(
        last.get("nvme_host_write_commands_total", &db),
        Some(0.0),
        "drive B never written"
    );
    assert_eq!(
        last.get("nvme_data_written_bytes_total", &db),
        Some(0.0),
        "drive B never written"
    );
    assert!(
        last.find("nvsoak_write_ops_total", &[("target", "b")])
            .next()
            .is_none(),
        "no target b in the running daemon"
    );
    for d in [&da, &db] {
        let errs = last
            .sum("nvsoak_health_poll_errors_total", d)
            .unwrap_or(-1.0);
        assert_eq!(errs, 0.0, "poll errors for {d:?}");
    }
}

fn first_mib(p: &Path) -> Vec<u8> {
    let mut b = std::fs::read(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    b.truncate(1 << 20);
    b
}

#[test]
fn ext4_namespace_is_refused_and_left_untouched() {
    let _ = crate::require_vm!();
    let Some(mkfs) = which_tool("mkfs.ext4", "apt-get install -y e2fsprogs") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("nvsoak-vm-ext4-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("scratch dir");
    let img = dir.path().join("ext4.img");
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(64 << 20))
        .expect("creating the image");
    let out = Command::new(mkfs)
        .args(["-q", "-F"])
        .arg(&img)
        .output()
        .expect("running mkfs.ext4");
    assert!(
        out.status.success(),
        "mkfs.ext4: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let before = std::fs::read(&img).expect("reading the image");

    let cfg = config("1s", &target("ns0", "/dev/nvme0n1", "SOAK0001", "5s"));
    let script = "wait_for /dev/nvme0n1 10 || echo 'no /dev/nvme0n1'\n\
                  run refused timeout 60 nvsoak run --config /etc/nvsoak.toml\n";
    let mut spec = VmSpec::new("ext4-refusal", script);
    spec.drives[0].image = Some(img.clone());
    spec.files
        .insert("/etc/nvsoak.toml".into(), cfg.into_bytes());
    let mut vm = Vm::boot(&spec);
    let r = vm.wait_result("refused", Duration::from_secs(90));
    vm.finish(Duration::from_secs(30));
    assert_ne!(
        r.status, 0,
        "nvsoak must refuse an ext4 namespace even with its serial allowed"
    );
    assert_ne!(r.status, 124, "nvsoak did not exit (timeout): {}", r.stderr);
    assert!(
        r.stderr.contains("ext4"),
        "the refusal names the ext4 signature it found: {}",
        r.stderr
    );
    eprintln!("ext4-refusal: {}", r.stderr.trim());
    assert!(
        first_mib(&img) == before[..1 << 20],
        "the first MiB of the ext4 image changed"
    );
    assert!(
        std::fs::read(&img).ok() == Some(before),
        "the ext4 image changed"
    );
}
