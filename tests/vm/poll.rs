//! Polled completions (`engine = "io_uring_poll"`, fio's `hipri`) on the emulated NVMe
//! namespace, with the guest's driver given a poll queue (`nvme.poll_queues=1`): the soak runs,
//! counts its operations, verifies clean, agrees with the drive's data units written, and its completions raise (almost) no interrupts on
//! the controller's I/O queues, where the same soak on the interrupt path raises them by the
//! thousand. Without poll queues (a guest booted without the parameter) the engine refuses with
//! the reason, and so does check-config.

use std::time::Duration;

use crate::harness::{GuestKernel, Vm, VmSpec};

fn config(name: &str, engine: &str) -> String {
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
path = "/dev/nvme0n1"
allow_destroy = "SOAK0001"
engine = "{engine}"
verify = "inline"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 16, workers = 1 }}
duration = "4s"
"#
    )
}

/// Interrupts so far on nvme0's I/O queues (`nvme0q1`.., not the admin queue `nvme0q0`).
const IRQ: &str = r#"irq() { awk '/nvme0q[1-9]/ { for (i = 2; i <= NF; i++) { if ($i ~ /^[0-9]+$/) t += $i; else break } } END { print t + 0 }' /proc/interrupts; }"#;

fn soak_ops(results: &str) -> (u64, u64, u64, u64) {
    let v: serde_json::Value = serde_json::from_str(results).expect("results JSON");
    let s = &v["soak"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    (
        n("read_ops"),
        n("write_ops"),
        n("errors"),
        n("verify_errors"),
    )
}

#[test]
fn polled_completions_run_verified_without_interrupts() {
    crate::require_vm!();
    polled_completions(GuestKernel::V6_1);
}

#[test]
fn polled_completions_run_verified_without_interrupts_on_6_12() {
    crate::require_vm!();
    polled_completions(GuestKernel::V6_12);
}

fn polled_completions(kernel: GuestKernel) {
    let script = format!(
        r#"{IRQ}
cat /sys/block/nvme0n1/queue/io_poll > /tmp/io_poll
emit io_poll /tmp/io_poll
i0=$(irq)
run polled nvsoak run --config /etc/poll.toml --exit-when-done
i1=$(irq)
run intr nvsoak run --config /etc/intr.toml --exit-when-done
i2=$(irq)
echo "$i0 $i1 $i2" > /tmp/irqs
emit irqs /tmp/irqs
emit rpoll /tmp/state-p/results/p.json
emit rintr /tmp/state-i/results/i.json
"#
    );
    let mut spec = VmSpec::new(&format!("poll-{}", kernel.line()), &script);
    spec.kernel = kernel;
    spec.append = "nvme.poll_queues=1".into();
    spec.files.insert(
        "/etc/poll.toml".into(),
        config("p", "io_uring_poll").into_bytes(),
    );
    spec.files.insert(
        "/etc/intr.toml".into(),
        config("i", "io_uring").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(180);
    let io_poll = vm.wait_ok("io_poll", t).stdout_str();
    assert_eq!(
        io_poll.trim(),
        "1",
        "the namespace polls with nvme.poll_queues=1"
    );
    let polled = vm.wait_result("polled", t);
    assert_eq!(polled.status, 0, "polled soak: {}", polled.stderr);
    let intr = vm.wait_result("intr", t);
    assert_eq!(intr.status, 0, "interrupt-path soak: {}", intr.stderr);
    let irqs: Vec<u64> = vm
        .wait_ok("irqs", t)
        .stdout_str()
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    assert_eq!(irqs.len(), 3, "{irqs:?}");
    let (p_r, p_w, p_e, p_v) = soak_ops(&vm.wait_ok("rpoll", t).stdout_str());
    let (i_r, i_w, i_e, i_v) = soak_ops(&vm.wait_ok("rintr", t).stdout_str());
    let (p_irq, i_irq) = (irqs[1] - irqs[0], irqs[2] - irqs[1]);
    let (p_ops, i_ops) = (p_r + p_w, i_r + i_w);
    println!(
        "polled: {p_ops} ops, {p_irq} I/O-queue interrupts; interrupt path: {i_ops} ops, {i_irq} interrupts"
    );
    assert!(
        p_r > 100 && p_w > 100,
        "polled soak did I/O: {p_r} reads, {p_w} writes"
    );
    assert!(i_ops > 100, "interrupt-path soak did I/O: {i_ops}");
    assert_eq!((p_e, p_v), (0, 0), "polled: no I/O or verify errors");
    assert_eq!(
        (i_e, i_v),
        (0, 0),
        "interrupt path: no I/O or verify errors"
    );
    // Polled: completions are reaped from the poll queue, not signalled (a few stray
    // interrupts at most); the interrupt path signals them (QEMU: one per completion batch).
    let (p_rate, i_rate) = (p_irq as f64 / p_ops as f64, i_irq as f64 / i_ops as f64);
    assert!(
        p_rate < 0.01,
        "polled I/O raised {p_irq} interrupts for {p_ops} ops"
    );
    assert!(
        p_rate * 10.0 < i_rate,
        "polled {p_rate:.4} interrupts per op against {i_rate:.4} on the interrupt path"
    );
    vm.finish(Duration::from_secs(60));
}

#[test]
fn without_poll_queues_the_polled_engine_is_refused_with_the_reason() {
    crate::require_vm!();
    no_poll_queues_refused(GuestKernel::V6_1);
}

#[test]
fn without_poll_queues_the_polled_engine_is_refused_with_the_reason_on_6_12() {
    crate::require_vm!();
    no_poll_queues_refused(GuestKernel::V6_12);
}

fn no_poll_queues_refused(kernel: GuestKernel) {
    let script = "cat /sys/block/nvme0n1/queue/io_poll > /tmp/io_poll\n\
         emit io_poll /tmp/io_poll\n\
         run check nvsoak check-config /etc/poll.toml\n\
         run run nvsoak run --config /etc/poll.toml --exit-when-done\n";
    let mut spec = VmSpec::new(&format!("poll-refused-{}", kernel.line()), script);
    spec.kernel = kernel;
    spec.files.insert(
        "/etc/poll.toml".into(),
        config("p", "io_uring_poll").into_bytes(),
    );
    let mut vm = Vm::boot(&spec);
    let t = Duration::from_secs(180);
    assert_eq!(vm.wait_ok("io_poll", t).stdout_str().trim(), "0");
    let want = "queue/io_poll is 0: the device has no poll queues";
    for key in ["check", "run"] {
        let r = vm.wait_result(key, t);
        assert_ne!(r.status, 0, "{key} must refuse");
        assert!(
            r.stderr.contains(want) && r.stderr.contains("nvme.poll_queues"),
            "{key}: {}",
            r.stderr
        );
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
    vm.finish(Duration::from_secs(60));
}
