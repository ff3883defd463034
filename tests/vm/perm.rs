//! Without root: nvsoak run as `nobody` in the guest. Opening `/dev/nvme0` (mode 0600) is
//! refused, and once the node is made readable the admin ioctl itself fails with EACCES for
//! lack of CAP_SYS_ADMIN. Both must be said plainly, and the daemon keeps running its workload
//! (a file target) and serving `/metrics`.

use std::time::Duration;

use crate::daemon::stop_daemon;
use crate::harness::{Vm, VmSpec};

/// Runs the rest of the line as `nobody` (busybox `su`; root needs no password).
const AS_NOBODY: &str = "su -s /bin/sh nobody -c";

fn config() -> String {
    r#"[exporter]
listen = ":9757"
[state]
dir = "/tmp/nobody/state"
[stats]
interval = "1s"
[health]
enabled = true
poll_interval = "1s"
rescan_interval = "2s"

[[target]]
name = "file0"
path = "/tmp/nobody/soak.dat"
size = "64MiB"
direct = false
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 50, bs = "4k", access = "random", iodepth = 4, workers = 1 }
duration = "600s"
"#
    .to_string()
}

#[test]
fn without_root_health_says_why_and_the_workload_runs() {
    crate::require_vm!();
    let script = format!(
        "wait_for /dev/nvme0 10 || echo 'no /dev/nvme0'\n\
         chmod 0600 /dev/nvme0\n\
         mkdir -p /tmp/nobody && chown 65534:65534 /tmp/nobody\n\
         run health_closed {AS_NOBODY} 'nvsoak health /dev/nvme0'\n\
         chmod 0644 /dev/nvme0\n\
         run health_open {AS_NOBODY} 'nvsoak health /dev/nvme0'\n\
         {AS_NOBODY} 'exec nvsoak run --config /etc/nvsoak.toml' >/tmp/daemon.log 2>&1 &\n\
         echo $! > /tmp/daemon.pid\n\
         wait_host stop\nstop_daemon daemon\n"
    );
    let mut spec = VmSpec::new("nobody", &script);
    spec.net = true;
    spec.files
        .insert("/etc/nvsoak.toml".into(), config().into_bytes());
    spec.files.insert(
        "/etc/passwd".into(),
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"
            .to_vec(),
    );
    spec.files.insert(
        "/etc/group".into(),
        b"root:x:0:\nnogroup:x:65534:\n".to_vec(),
    );
    let mut vm = Vm::boot(&spec);

    let closed = vm.wait_result("health_closed", Duration::from_secs(60));
    let closed_err = vm
        .wait_ok("health_closed.err", Duration::from_secs(10))
        .stdout_str();
    assert_ne!(closed.status, 0, "health without access must fail");
    assert!(
        closed_err.contains("/dev/nvme0: opening the controller was refused (permission denied)")
            && closed_err.contains("run as root"),
        "plain message for a refused open, got: {closed_err}"
    );
    assert!(!closed_err.contains("panicked"), "{closed_err}");

    let open = vm.wait_result("health_open", Duration::from_secs(60));
    let open_err = vm
        .wait_ok("health_open.err", Duration::from_secs(10))
        .stdout_str();
    assert_ne!(open.status, 0, "health without CAP_SYS_ADMIN must fail");
    assert!(
        open_err.contains("needs CAP_SYS_ADMIN (run as root or grant the capability)"),
        "plain message for the refused ioctl, got: {open_err}"
    );

    // The daemon as nobody: the workload runs, the health poller counts its failures.
    let t = [("target", "file0")];
    let d = [("device", "nvme0")];
    let first = vm.wait_metrics(
        "the file soak running and a failed health poll",
        Duration::from_secs(90),
        |m| {
            let ops = m.sum("nvsoak_write_ops_total", &t)?;
            let errs = m.sum("nvsoak_health_poll_errors_total", &d)?;
            (ops > 0.0 && errs > 0.0).then_some((ops, errs))
        },
    );
    vm.wait_metrics(
        "the workload still moving and polls still failing",
        Duration::from_secs(30),
        |m| {
            let ops = m.sum("nvsoak_write_ops_total", &t)?;
            let errs = m.sum("nvsoak_health_poll_errors_total", &d)?;
            (ops > first.0 && errs > first.1).then_some(())
        },
    );
    let log = stop_daemon(&mut vm);
    let warnings = log.matches("needs CAP_SYS_ADMIN").count();
    assert_eq!(
        warnings, 1,
        "the permission problem is logged once, not once per poll; log:\n{log}"
    );
    vm.finish(Duration::from_secs(30));
}
