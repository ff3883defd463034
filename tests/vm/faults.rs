//! Scenarios 5 and 6: faults under a running soak. blkdebug makes reads of a band of LBAs
//! fail with EIO in QEMU; the guest sees NVMe status sct 2 / sc 81h (unrecovered read error),
//! which Linux hands to user space as ENODATA (BLK_STS_MEDIUM), the errno nvsoak counts. QMP
//! `device_del` pulls the controller out of the running guest.

use std::fmt::Write as _;
use std::time::Duration;

use crate::daemon::{config, daemon_spec, nvme_target, stable, stop_daemon};
use crate::harness::Vm;

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
fn media_errors_are_counted_and_the_soak_goes_on() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 70, "10s"),
    );
    let mut spec = daemon_spec(
        "media-errors",
        &cfg,
        // Before the soak: the injected error is really there, at the NVMe level.
        &format!(
            "run ddbad dd if=/dev/nvme0n1 of=/dev/null bs=4k skip={} count=1 iflag=direct",
            BAD_SECTOR / 8
        ),
        "",
    );
    spec.drives[0].size = 64 << 20;
    spec.drives[0].blkdebug = Some(blkdebug_conf());
    let mut vm = Vm::boot(&spec);
    let dd = vm.wait_result("ddbad", Duration::from_secs(90));
    assert_ne!(
        dd.status, 0,
        "reading an injected bad block must fail: {}",
        dd.stderr
    );

    let t = [("target", "ns0")];
    let eio = [("target", "ns0"), ("op", "read"), ("errno", "ENODATA")];
    // Errors show up while the workload runs…
    let first = vm.wait_metrics(
        "ENODATA read errors during the soak",
        Duration::from_secs(60),
        |m| {
            (m.sum("nvsoak_io_errors_total", &eio)
                .is_some_and(|v| v > 0.0)
                && m.get("nvsoak_phase_running", &t) == Some(1.0))
            .then(|| m.clone())
        },
    );
    let ops = |m: &crate::prom::Metrics| {
        (
            m.sum("nvsoak_read_ops_total", &t).unwrap_or(0.0),
            m.sum("nvsoak_write_ops_total", &t).unwrap_or(0.0),
        )
    };
    let (r0, w0) = ops(&first);
    // …and the workload keeps going on the rest of the namespace.
    vm.wait_metrics(
        "reads and writes to continue after the errors",
        Duration::from_secs(30),
        |m| {
            let (r, w) = ops(m);
            (r > r0 + 500.0 && w > w0 + 200.0).then_some(())
        },
    );
    vm.wait_metrics("the phase to finish", Duration::from_secs(60), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)).then_some(())
    });
    let ((errs, all_errs, reads), fin) =
        stable(&vm, "final error counters", Duration::from_secs(30), |m| {
            Some((
                m.sum("nvsoak_io_errors_total", &eio)? as u64,
                m.sum("nvsoak_io_errors_total", &t)? as u64,
                m.sum("nvsoak_read_ops_total", &t)? as u64,
            ))
        });
    eprintln!("media-errors: {errs} ENODATA reads out of {reads} completed reads");
    assert_eq!(
        errs, all_errs,
        "every error is a read ENODATA (writes to the band succeed)"
    );
    assert!(
        errs < reads / 10,
        "only the bad band fails: {errs} errors vs {reads} reads"
    );
    assert_eq!(
        fin.get("nvsoak_target_up", &t),
        Some(1.0),
        "the target was not stopped (no max_errors)"
    );
    assert_eq!(vm.http_get("/healthz").map(|(c, _)| c), Ok(200), "/healthz");
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
}

/// Boots a soak on nvme0n1, waits for it to run, and pulls the controller out with QMP.
pub fn unplugged(name: &str, kernel: crate::harness::GuestKernel) -> Vm {
    let cfg = config(
        "1s",
        &nvme_target("ns0", "/dev/nvme0n1", "SOAK0001", 50, "300s"),
    );
    let mut spec = daemon_spec(name, &cfg, "", "run ls ls /sys/class/nvme");
    spec.kernel = kernel;
    let vm = Vm::boot(&spec);
    let t = [("target", "ns0")];
    let d = [("device", "nvme0")];
    vm.wait_metrics("the soak and the drive up", Duration::from_secs(90), |m| {
        (m.sum("nvsoak_write_ops_total", &t).is_some_and(|v| v > 0.0)
            && m.get("nvme_up", &d) == Some(1.0))
        .then_some(())
    });
    if let Err(e) = vm.qmp().device_del("nvme0", Duration::from_secs(30)) {
        vm.fail(&format!("QMP device_del nvme0: {e}"));
    }
    vm
}

#[test]
fn hot_unplug_marks_the_drive_down_and_the_daemon_keeps_serving() {
    crate::require_vm!();
    let mut vm = unplugged("hot-unplug", crate::harness::GuestKernel::V6_1);
    let t = [("target", "ns0")];
    let d = [("device", "nvme0")];
    let m = vm.wait_metrics(
        "nvme_up 0 and the target down",
        Duration::from_secs(30),
        |m| {
            (m.get("nvme_up", &d) == Some(0.0) && m.get("nvsoak_target_up", &t) == Some(0.0))
                .then(|| m.clone())
        },
    );
    assert!(
        m.find("nvme_info", &d).next().is_some(),
        "the vanished drive keeps its identity series"
    );
    assert_eq!(
        vm.http_get("/healthz").map(|(c, _)| c),
        Ok(200),
        "/healthz after the unplug"
    );
    stop_daemon(&mut vm);
    let ls = vm.wait_ok("ls", Duration::from_secs(30)).stdout_str();
    assert!(
        !ls.contains("nvme0"),
        "the guest still lists nvme0 after device_del: {ls}"
    );
    vm.finish(Duration::from_secs(30));
}

#[test]
fn hot_unplug_stops_the_workload() {
    crate::require_vm!();
    let mut vm = unplugged("hot-unplug-stop", crate::harness::GuestKernel::V6_1);
    let t = [("target", "ns0")];
    vm.wait_metrics("the target's phase to stop", Duration::from_secs(30), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)).then_some(())
    });
    // The workload is really stopped: its counters, errors included, stand still.
    let ((_, _, errs), _) = stable(
        &vm,
        "the stopped target's counters",
        Duration::from_secs(20),
        |m| {
            Some((
                m.sum("nvsoak_write_ops_total", &t)? as u64,
                m.sum("nvsoak_read_ops_total", &t)? as u64,
                m.sum("nvsoak_io_errors_total", &t).unwrap_or(0.0) as u64,
            ))
        },
    );
    assert!(
        errs < 1000,
        "{errs} I/O errors: the worker kept hammering the vanished device"
    );
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
}
