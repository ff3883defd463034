//! Hot-plug through QMP while the daemon runs: the soaked controller is pulled and put back
//! (same serial, same backing image), and a new controller is added that the config does not
//! name. The poller's rescans must bring the first back to `nvme_up 1` with its soak resumed,
//! and list the second without nvsoak ever writing to it.

use std::time::Duration;

use crate::daemon::{stable, stop_daemon};
use crate::faults::unplugged;
use crate::prom::Metrics;

/// The serial of the controller added while the daemon runs.
const NEW_SERIAL: &str = "HOTADD0001";

fn device_of(m: &Metrics, serial: &str) -> Option<String> {
    m.find("nvme_info", &[("serial", serial)])
        .next()
        .and_then(|s| s.labels.get("device").cloned())
}

#[test]
fn replugged_drive_returns_and_a_hot_added_one_is_listed_but_not_written() {
    crate::require_vm!();
    let mut vm = unplugged("hotplug");
    let t = [("target", "ns0")];
    let d = [("device", "nvme0")];
    let mut qmp = vm.qmp();
    vm.wait_metrics(
        "nvme_up 0 and the target down",
        Duration::from_secs(30),
        |m| {
            (m.get("nvme_up", &d) == Some(0.0) && m.get("nvsoak_target_up", &t) == Some(0.0))
                .then_some(())
        },
    );
    let (paused_writes, _) = stable(
        &vm,
        "the paused target's write count",
        Duration::from_secs(30),
        |m| m.sum("nvsoak_write_ops_total", &t).map(|v| v as u64),
    );

    // Put the same controller back: its block node survived device_del (-blockdev).
    if let Err(e) = qmp.nvme_add("nvme0", "SOAK0001", "f-nvme0") {
        vm.fail(&format!("QMP device_add nvme0: {e}"));
    }
    let back = vm.wait_metrics(
        "the replugged drive up and the soak writing again",
        Duration::from_secs(90),
        |m| {
            let dev = device_of(m, "SOAK0001")?;
            let up = m.get("nvme_up", &[("device", dev.as_str())]) == Some(1.0);
            let writes = m.sum("nvsoak_write_ops_total", &t)? as u64;
            (up && m.get("nvsoak_target_up", &t) == Some(1.0) && writes > paused_writes)
                .then(|| (dev, m.clone()))
        },
    );
    let (dev, m) = back;
    // The paused target let go of the vanished device, so the kernel freed its instance and the
    // drive came back under its old name (and the configured path).
    assert_eq!(dev, "nvme0", "the replugged controller's name");
    assert_eq!(
        m.find("nvme_info", &[("serial", "SOAK0001")]).count(),
        1,
        "one identity series for the returned drive"
    );
    let mapped = m
        .find("nvsoak_target_info", &[("target", "ns0")])
        .next()
        .and_then(|s| s.labels.get("device").cloned());
    assert_eq!(
        mapped,
        Some(dev.clone()),
        "the target maps to the returned controller"
    );

    // A new controller on a fresh zeroed image, not named by the config.
    let scratch = tempfile::tempdir().expect("tempdir");
    let img = scratch.path().join("hotadd.img");
    let size: u64 = 64 << 20;
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(size))
        .expect("create the hot-added image");
    if let Err(e) = qmp.file_node_add("f-hotadd", &img) {
        vm.fail(&format!("QMP blockdev-add: {e}"));
    }
    if let Err(e) = qmp.nvme_add("hotadd", NEW_SERIAL, "f-hotadd") {
        vm.fail(&format!("QMP device_add hotadd: {e}"));
    }
    let new_dev = vm.wait_metrics(
        "the hot-added controller listed and polled",
        Duration::from_secs(60),
        |m| {
            let dev = device_of(m, NEW_SERIAL)?;
            (m.get("nvme_up", &[("device", dev.as_str())]) == Some(1.0)).then_some(dev)
        },
    );
    assert_ne!(new_dev, dev, "the new controller has its own device label");
    // The soak keeps going on the first drive while the second is only polled.
    let before = vm.wait_metrics("a scrape", Duration::from_secs(10), |m| {
        m.sum("nvsoak_write_ops_total", &t)
    });
    vm.wait_metrics("the soak still writing", Duration::from_secs(30), |m| {
        (m.sum("nvsoak_write_ops_total", &t)? > before).then_some(())
    });
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));

    // nvsoak never wrote to the controller it was not given: its image is still all zeros.
    let bytes = std::fs::read(&img).expect("read the hot-added image");
    assert_eq!(bytes.len() as u64, size);
    assert!(
        bytes.iter().all(|b| *b == 0),
        "the hot-added drive's image changed (first non-zero byte at {:?})",
        bytes.iter().position(|b| *b != 0)
    );
}
