//! The VM tests: the real Linux `nvme` driver against QEMU's emulated NVMe controller, with
//! `nvme` from nvme-cli as the cross-check peer. Each scenario boots a fresh VM (TCG, Debian's 6.1 or 6.12
//! cloud kernel from `scripts/fetch-vm-kernel`, an initramfs the harness builds). Without the
//! prerequisites the tests skip with a printed reason, unless `NVSOAK_VM_REQUIRED=1` (set by
//! `scripts/test`), which turns a missing prerequisite into a failure with the install command.
//!
//! Run exactly these with `cargo test --release --test vm`.

/// Scenarios 2–8: the daemon on the emulated controller.
mod daemon;
/// Scenarios 5 and 6: blkdebug media errors, hot-unplug.
mod faults;
/// Scenario 0: boot, nvme-cli in the guest, raw log pages as fixtures.
mod fixtures;
/// Prerequisites, initramfs, QEMU, console markers.
mod harness;
/// Scenario 1: `nvsoak health --json` field by field against nvme-cli.
mod health;
/// Hot-plug: a replugged drive returns and resumes (a precondition too), a hot-added one is
/// polled, never written.
mod hotplug;
/// Scenarios 7 and 8: two controllers, refusal of an ext4 namespace.
mod multi;
/// QEMU has no OCP C1h/C3h or telemetry pages: reported unsupported once, polling goes on.
mod ocp;
/// NVMe passthrough (`io_uring_cmd`) on the generic device: verified, accounted, off the
/// block layer; media errors with their NVMe status; refusals.
mod passthru;
/// Without root: plain permission messages, the workload keeps running.
mod perm;
/// Polled completions (`io_uring_poll`) with the driver's poll queues: verified, no interrupts;
/// refused with the reason without poll queues.
mod poll;
/// `/metrics` scraping and Prometheus text parsing.
mod prom;
/// QMP client (critical warning bits, hot-unplug).
mod qmp;
/// SATA: an emulated ATA disk behind libata's ata_piix, nvsoak against smartctl, the daemon
/// polling it while it soaks the disk.
mod sata;
/// Issue 17: purge by Format NVM (erased, refused like writes), self-test not supported.
mod steps;
/// O_DIRECT on tmpfs under Linux 6.1: refused with advice at start and by check-config.
mod tmpfs;
/// PCIe topology (issue 16): a card behind a switch, a lone drive, a dual-port drive, link
/// figures.
mod topo;
/// The verdict: a clean soak PASSes (exit 0), a critical warning through QMP FAILs it (exit 2).
mod verdict;
/// Scenarios 3 and 4: critical warning bits through QMP and Set Features.
mod warn;
