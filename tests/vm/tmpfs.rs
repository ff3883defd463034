//! O_DIRECT on tmpfs under the guest's Linux 6.1 (Debian bookworm's kernel), which refuses it:
//! a file target on tmpfs with `direct = true` is refused at start by `nvsoak run` and by
//! `nvsoak check-config`, with the same message saying what to change, and the same target with
//! `direct = false` (what the shipped examples use) runs its plan.

use std::time::Duration;

use crate::harness::{GuestKernel, Vm, VmSpec};

fn config(direct: bool) -> String {
    format!(
        r#"[exporter]
listen = "127.0.0.1:9757"
[state]
dir = "/tmp/state-{direct}"
[health]
enabled = false
[[target]]
name = "shm"
path = "/mnt/shm/nvsoak/t.dat"
size = "16MiB"
direct = {direct}
verify = "inline"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 4, workers = 1 }}
duration = "2s"
"#
    )
}

#[test]
fn direct_io_on_tmpfs_is_refused_with_advice_and_buffered_runs() {
    crate::require_vm!();
    let script = "mkdir -p /mnt/shm && mount -t tmpfs tmpfs /mnt/shm\n\
         run release cat /proc/sys/kernel/osrelease\n\
         run check_direct nvsoak check-config /etc/direct.toml\n\
         run run_direct nvsoak run --config /etc/direct.toml --exit-when-done\n\
         run check_buffered nvsoak check-config /etc/buffered.toml\n\
         run run_buffered nvsoak run --config /etc/buffered.toml --exit-when-done\n";
    let mut spec = VmSpec::new("tmpfs-direct", script);
    spec.files
        .insert("/etc/direct.toml".into(), config(true).into_bytes());
    spec.files
        .insert("/etc/buffered.toml".into(), config(false).into_bytes());
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(120);
    let release = vm.wait_ok("release", t).stdout_str();
    assert!(
        release.trim().starts_with("6.1."),
        "the guest runs bookworm's 6.1: {release}"
    );

    let want = "target shm: /mnt/shm/nvsoak/t.dat is on tmpfs, which refuses O_DIRECT";
    let check = vm.wait_result("check_direct", t);
    let check_err = check.stderr.clone();
    assert_ne!(check.status, 0, "check-config must refuse: {check_err}");
    assert!(
        check_err.contains(want) && check_err.contains("set direct = false"),
        "{check_err}"
    );
    let run = vm.wait_result("run_direct", t);
    let run_err = run.stderr.clone();
    assert_ne!(run.status, 0, "run must refuse: {run_err}");
    assert!(
        run_err.contains(want) && run_err.contains("set direct = false"),
        "{run_err}"
    );
    assert!(!run_err.contains("panicked"), "{run_err}");

    let check = vm.wait_result("check_buffered", t);
    assert_eq!(check.status, 0, "{}", check.stderr);
    let run = vm.wait_result("run_buffered", t);
    assert_eq!(
        run.status, 0,
        "buffered run on tmpfs finishes: {}",
        run.stderr
    );
    vm.finish(Duration::from_secs(60));
}

/// On 6.12 tmpfs accepts O_DIRECT (from 6.6): the same `direct = true` target is not refused
/// by check-config or run, and its verified soak finishes.
#[test]
fn direct_io_on_tmpfs_runs_on_6_12() {
    crate::require_vm!();
    let script = "mkdir -p /mnt/shm && mount -t tmpfs tmpfs /mnt/shm\n\
         run release cat /proc/sys/kernel/osrelease\n\
         run check_direct nvsoak check-config /etc/direct.toml\n\
         run run_direct nvsoak run --config /etc/direct.toml --exit-when-done\n";
    let mut spec = VmSpec::new("tmpfs-direct-6.12", script);
    spec.kernel = GuestKernel::V6_12;
    spec.files
        .insert("/etc/direct.toml".into(), config(true).into_bytes());
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(120);
    let release = vm.wait_ok("release", t).stdout_str();
    assert!(release.trim().starts_with("6.12."), "{release}");
    let check = vm.wait_result("check_direct", t);
    assert_eq!(check.status, 0, "check-config on 6.12: {}", check.stderr);
    let run = vm.wait_result("run_direct", t);
    assert_eq!(
        run.status, 0,
        "O_DIRECT on tmpfs runs on 6.12: {}",
        run.stderr
    );
    assert!(!run.stderr.contains("refuses O_DIRECT"), "{}", run.stderr);
    vm.finish(Duration::from_secs(60));
}
