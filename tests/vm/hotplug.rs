//! Hot-plug through QMP while the daemon runs: the soaked controller is pulled and put back
//! (same serial, same backing image), and a new controller is added that the config does not
//! name. The poller's rescans must bring the first back to `nvme_up 1` with its soak resumed,
//! and list the second without nvsoak ever writing to it. A precondition interrupted the same
//! way must continue from its workers' positions: every block written `passes` times, little
//! more, and the drive's own write accounting must agree.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::daemon::{config, poll_after, poll_ts, stable, stop_daemon};
use crate::faults::unplugged;
use crate::harness::{GuestKernel, Vm};
use crate::prom::Metrics;
use crate::qmp::Qmp;

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
    replug(GuestKernel::V6_1);
}

/// The same on 6.12, whose NVMe driver and PCI hotplug changed a lot since 6.1.
#[test]
fn replugged_drive_returns_and_a_hot_added_one_is_listed_but_not_written_on_6_12() {
    crate::require_vm!();
    replug(GuestKernel::V6_12);
}

fn replug(kernel: GuestKernel) {
    let mut vm = unplugged(&format!("hotplug-{}", kernel.line()), kernel);
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
    // The soak clock stops while the device is gone: it holds still too.
    let (paused_secs, _) = stable(
        &vm,
        "the paused target's soak clock",
        Duration::from_secs(30),
        |m| m.sum("nvsoak_soak_elapsed_seconds", &t),
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
    // ... and runs again once the device is back.
    vm.wait_metrics(
        "the soak clock running again",
        Duration::from_secs(30),
        |m| (m.sum("nvsoak_soak_elapsed_seconds", &t)? > paused_secs).then_some(()),
    );
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

/// The precondition scenario's drive. Under TCG the emulated controller writes 128k blocks at
/// over 1 GB/s (a 1 GiB precondition took under a second), too fast to pull the drive
/// partway through, so its writes are throttled in QEMU to PRECOND_WRITE_BPS: 2 passes take
/// about 12 s (the whole test about 25 s, two drive pulls included), and each pull leaves
/// seconds of it to go.
const PRECOND_DRIVE: u64 = 96 << 20;
const PRECOND_WRITE_BPS: u64 = 16 << 20;
/// Where the drive is pulled: percent of the precondition's bytes.
const UNPLUG_AT_PCT: [u64; 2] = [30, 52];
const PRECOND_BS: u64 = 128 << 10;
const PRECOND_PASSES: u64 = 2;
const PRECOND_WORKERS: u64 = 2;
const PRECOND_IODEPTH: u64 = 8;
/// One NVMe data unit: 1000 × 512 bytes.
const DATA_UNIT: u64 = 512_000;

/// Bytes QEMU's block layer accounted as written through controller `id`'s BlockBackend
/// (`query-blockstats`), or `None` once the controller is gone. QEMU derives the SMART data
/// units written from exactly this figure (sectors / 1000, rounded up), so it is the drive's own
/// count at byte precision; unlike SMART, it can be read up to the instant the device goes.
fn qemu_written(q: &mut Qmp, id: &str) -> Result<Option<u64>, String> {
    let v = q.execute("query-blockstats", None)?;
    let qdev = format!("/machine/peripheral/{id}");
    Ok(v.as_array()
        .and_then(|a| {
            a.iter().find(|s| {
                s["qdev"]
                    .as_str()
                    .is_some_and(|d| d == id || d.starts_with(&qdev))
            })
        })
        .and_then(|s| s["stats"]["wr_bytes"].as_u64()))
}

/// `device_del id`, polling `query-blockstats` until the `DEVICE_DELETED` event: returns the
/// controller's final written bytes (the last figure seen before it went) and how many polls in
/// a row saw that figure (≥ 2: it had stopped moving, so no write landed after the last poll).
fn unplug_counting(vm: &Vm, q: &mut Qmp, id: &str, timeout: Duration) -> (u64, u32) {
    let deleted =
        |e: &Value| e["event"] == "DEVICE_DELETED" && e["data"]["device"].as_str() == Some(id);
    // An earlier unplug's event is not this one's.
    q.events.retain(|e| !deleted(e));
    if let Err(e) = q.execute("device_del", Some(json!({ "id": id }))) {
        vm.fail(&format!("QMP device_del {id}: {e}"));
    }
    let deadline = Instant::now() + timeout;
    let (mut last, mut same) = (None::<u64>, 0u32);
    loop {
        match qemu_written(q, id) {
            Ok(Some(v)) => {
                same = if last == Some(v) { same + 1 } else { 1 };
                last = Some(v);
            }
            Ok(None) => {}
            Err(e) => vm.fail(&format!("QMP query-blockstats: {e}")),
        }
        if q.events.iter().any(deleted) {
            break;
        }
        // The poll cadence: well under the guest's teardown of a controller (tens of ms).
        std::thread::sleep(Duration::from_millis(5));
        if Instant::now() >= deadline {
            vm.fail(&format!(
                "no DEVICE_DELETED event for {id} within {timeout:?}"
            ));
        }
    }
    let last = last.unwrap_or_else(|| vm.fail(&format!("query-blockstats never listed {id}")));
    (last, same)
}

/// Limits the writes of controller `id` to `bps` bytes per second in QEMU's block layer
/// (`block_set_io_throttle` on its BlockBackend); reads are not limited.
fn throttle_writes(q: &mut Qmp, id: &str, bps: u64) -> Result<(), String> {
    q.execute(
        "block_set_io_throttle",
        Some(json!({
            "id": id, "bps": 0, "bps_rd": 0, "bps_wr": bps,
            "iops": 0, "iops_rd": 0, "iops_wr": 0,
        })),
    )
    .map(|_| ())
}

fn data_units(bytes: u64) -> u64 {
    (bytes / 512).div_ceil(1000)
}

#[test]
fn a_precondition_interrupted_by_an_unplug_resumes_and_writes_every_block_passes_times() {
    crate::require_vm!();
    let targets = format!(
        r#"
[[target]]
name = "ns0"
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
[[target.phase]]
kind = "precondition"
passes = {PRECOND_PASSES}
block_size = "128k"
iodepth = {PRECOND_IODEPTH}
workers = {PRECOND_WORKERS}
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 8, workers = 1 }}
duration = "3s"
"#
    );
    let cfg = config("1s", &targets);
    let mut spec = crate::daemon::daemon_spec("precond-replug", &cfg, "", "");
    spec.drives[0].size = PRECOND_DRIVE;
    let mut vm = Vm::boot(&spec);
    // Set while the guest's kernel boots, before the daemon starts: nothing written yet.
    let mut qmp = vm.qmp();
    if let Err(e) = throttle_writes(&mut qmp, "nvme0", PRECOND_WRITE_BPS) {
        vm.fail(&format!("QMP block_set_io_throttle nvme0: {e}"));
    }
    match qemu_written(&mut qmp, "nvme0") {
        Ok(Some(0)) => {}
        other => vm.fail(&format!(
            "nvme0 was written before its throttle was set (query-blockstats: {other:?})"
        )),
    }
    let t = [("target", "ns0")];
    let pre = [("target", "ns0"), ("workload", "precondition")];
    let mix = [("target", "ns0"), ("workload", "mix")];
    let total = PRECOND_PASSES * PRECOND_DRIVE;
    let in_precondition = |m: &Metrics| {
        m.get(
            "nvsoak_phase_info",
            &[("target", "ns0"), ("phase", "precondition")],
        ) == Some(1.0)
    };

    // Pulled twice: in the first pass (past 30% of the bytes), and in the second (past 52%),
    // so that one resume crosses the wrap to the second pass and the other starts inside it.
    let t0 = Instant::now();
    let mut pulled = Vec::new();
    for pct in UNPLUG_AT_PCT {
        let partway = vm.wait_metrics(
            &format!("the precondition past {pct}% of its bytes"),
            Duration::from_secs(120),
            |m| {
                let w = m.sum("nvsoak_write_bytes_total", &pre)? as u64;
                (in_precondition(m)
                    && m.get("nvsoak_target_up", &t) == Some(1.0)
                    && w * 100 > total * pct)
                    .then_some(w)
            },
        );
        let at = t0.elapsed().as_secs_f64();
        assert!(
            partway < total,
            "the precondition must still be running at the unplug: {partway} of {total} bytes"
        );
        let (gone, polls) = unplug_counting(&vm, &mut qmp, "nvme0", Duration::from_secs(30));
        assert!(
            polls >= 2,
            "the pulled controller's written bytes were still moving when it went ({gone} bytes, seen once): its final count is not known"
        );
        let paused = vm.wait_metrics(
            "the target down after the unplug",
            Duration::from_secs(30),
            |m| {
                (m.get("nvsoak_target_up", &t) == Some(0.0))
                    .then(|| m.sum("nvsoak_write_bytes_total", &pre))
                    .flatten()
            },
        ) as u64;
        assert!(
            paused < total,
            "the precondition was interrupted: {paused} of {total} bytes at the pause"
        );
        eprintln!(
            "precond-replug: unplug at {partway} of {total} precondition bytes ({at:.1} s after the first scrape), paused at {paused}; the controller wrote {gone} bytes (its last figure seen in {polls} polls in a row before it went)"
        );
        pulled.push(gone);

        // The same controller back on the same block node (it survived device_del: -blockdev).
        if let Err(e) = qmp.nvme_add("nvme0", "SOAK0001", "f-nvme0") {
            vm.fail(&format!("QMP device_add nvme0: {e}"));
        }
        // The new controller's BlockBackend is a new one, unthrottled: throttle it before the
        // guest has probed it, so the resumed precondition runs long enough to be pulled again.
        if let Err(e) = throttle_writes(&mut qmp, "nvme0", PRECOND_WRITE_BPS) {
            vm.fail(&format!(
                "QMP block_set_io_throttle on the replugged nvme0: {e}"
            ));
        }
        vm.wait_metrics(
            "the target up again and the precondition writing",
            Duration::from_secs(90),
            |m| {
                let w = m.sum("nvsoak_write_bytes_total", &pre)? as u64;
                (m.get("nvsoak_target_up", &t) == Some(1.0) && w > paused).then_some(())
            },
        );
    }
    vm.wait_metrics(
        "the plan to reach its soak phase",
        Duration::from_secs(120),
        |m| {
            (m.get("nvsoak_phase_info", &[("target", "ns0"), ("phase", "soak")]) == Some(1.0))
                .then_some(())
        },
    );
    let soak_at = t0.elapsed().as_secs_f64();
    vm.wait_metrics("the plan to finish", Duration::from_secs(60), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)).then_some(())
    });
    let ((pre_bytes, mix_bytes, errors), settled) =
        stable(&vm, "the final counters", Duration::from_secs(30), |m| {
            Some((
                m.sum("nvsoak_write_bytes_total", &pre)? as u64,
                m.sum("nvsoak_write_bytes_total", &mix)? as u64,
                m.sum("nvsoak_io_errors_total", &t).unwrap_or(0.0) as u64,
            ))
        });
    let by_errno: Vec<String> = settled
        .find("nvsoak_io_errors_total", &t)
        .map(|s| {
            let l = |k: &str| s.labels.get(k).map_or("?", String::as_str);
            format!("{} {} {}", l("workload"), l("op"), l("errno")) + &format!(" {}", s.value)
        })
        .collect();
    assert_eq!(
        settled.get("nvsoak_target_up", &t),
        Some(1.0),
        "the target is up again after the replug"
    );
    // The drive's SMART log after the plan: a health poll that started after it finished.
    let ts =
        poll_ts(&settled).unwrap_or_else(|| vm.fail("no nvsoak_health_poll_timestamp_seconds"));
    let last = poll_after(&vm, ts, Duration::from_secs(30));
    let d = [("device", "nvme0")];
    let smart2 = last
        .get("nvme_data_written_bytes_total", &d)
        .unwrap_or_else(|| vm.fail("no nvme_data_written_bytes_total{device=\"nvme0\"}"))
        as u64;
    let drive2 = qemu_written(&mut qmp, "nvme0")
        .ok()
        .flatten()
        .unwrap_or_else(|| vm.fail("query-blockstats lists no nvme0 after the replug"));
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));
    let img = vm
        .images
        .get("nvme0")
        .cloned()
        .unwrap_or_else(|| vm.fail("no backing image for nvme0"));
    let image =
        std::fs::read(&img).unwrap_or_else(|e| vm.fail(&format!("read {}: {e}", img.display())));

    eprintln!(
        "precond-replug: precondition wrote {pre_bytes} bytes ({:.4} × {total}), the soak {mix_bytes}; {errors} I/O errors ({}); the soak began {soak_at:.1} s after the first scrape; the last controller: SMART {smart2} bytes, QEMU {drive2} bytes",
        pre_bytes as f64 / total as f64,
        by_errno.join(", ")
    );
    // The last controller's SMART figure is QEMU's block accounting in data units: the same
    // counter the pulled controllers' final figures were read from.
    assert_eq!(
        smart2,
        data_units(drive2) * DATA_UNIT,
        "nvme_data_written_bytes_total vs QEMU's written bytes for the replugged controller"
    );

    // Every byte of the region written `passes` times, and little more. A worker's position
    // is the completed prefix of its walk, held at its first write that failed; what it wrote
    // again after the replug are the writes beyond that one that completed: those in flight
    // with it, at most `iodepth` per worker (once the device is gone, the writes submitted
    // after the failed one fail too). Failed writes are not in nvsoak's written bytes, so they
    // add nothing here. A precondition started over would be off by the ≥ 30% written before
    // the unplug.
    let failed = errors * PRECOND_BS;
    let redo = UNPLUG_AT_PCT.len() as u64 * PRECOND_WORKERS * PRECOND_IODEPTH * PRECOND_BS;
    assert!(
        pre_bytes >= total,
        "the precondition wrote {pre_bytes} bytes, less than {PRECOND_PASSES} passes × {PRECOND_DRIVE}"
    );
    assert!(
        pre_bytes <= total + redo,
        "the precondition wrote {pre_bytes} bytes: more than {PRECOND_PASSES} passes × {PRECOND_DRIVE} + {redo} (workers × iodepth × 128k in flight at each unplug)"
    );
    // The drive's own count over the controllers it was (each a fresh BlockBackend, so its
    // counters start at 0), in SMART data units, against everything nvsoak wrote. Each count
    // is rounded up to a unit: up to one unit per controller. A write that failed for nvsoak may
    // still have landed on the drive.
    let ours = pre_bytes + mix_bytes;
    let units: u64 = pulled.iter().map(|b| data_units(*b)).sum::<u64>() + smart2 / DATA_UNIT;
    let drive = units * DATA_UNIT;
    let rounding = (pulled.len() as u64 + 1) * DATA_UNIT;
    assert!(
        drive.abs_diff(ours) <= rounding + failed,
        "the drive's data units written ({drive} bytes over its {} controllers) vs nvsoak's {ours} bytes written: off by more than {rounding} bytes of rounding + {failed} bytes of failed writes",
        pulled.len() + 1
    );
    // And at byte precision: every write nvsoak counts reached the drive, and the drive got
    // nothing else but, at most, writes nvsoak saw fail.
    let qemu = pulled.iter().sum::<u64>() + drive2;
    assert!(
        ours <= qemu && qemu <= ours + failed,
        "QEMU accounted {qemu} bytes written over the controllers vs nvsoak's {ours} (+ at most {failed} failed)"
    );

    // Every 128k block of the region holds nvsoak's (random, non-zero) pattern: the image
    // started as a sparse zero file.
    assert_eq!(image.len() as u64, PRECOND_DRIVE, "image size");
    let zero: Vec<u64> = image
        .chunks(PRECOND_BS as usize)
        .enumerate()
        .filter(|(_, b)| b.iter().all(|x| *x == 0))
        .map(|(i, _)| i as u64 * PRECOND_BS)
        .collect();
    assert!(
        zero.is_empty(),
        "{} blocks of 128k never written, the first at offsets {:?}",
        zero.len(),
        &zero[..zero.len().min(8)]
    );
}
