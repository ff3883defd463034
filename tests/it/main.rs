//! The integration test crate. Each module tests one area against real parts: files under
//! /dev/shm, loop devices the tests create, the real HTTP endpoint.

/// Write safety attacked: symlink swaps, two daemons, mounts, existing and loop-backing files,
/// stacked loops, mknod aliases, hard links; check-config agreeing with run.
mod attacks;
/// `nvsoak report --from` over 300 results files from 100 hosts: the batch view.
mod batch;
/// The import boundaries: every `crate::` path in `src/` against the folder graph, which
/// ARCHITECTURE.md states too.
mod boundaries;
/// The build needs the Rust toolchain only: no bindgen, no pkg-config, no `-sys` crate
/// linking a system library; libblkid is loaded at run time.
mod build_deps;
/// Shared helpers: the binary's path, scratch directories, a running daemon.
mod common;
/// Config validation through `nvsoak check-config`: one bad config per rule.
mod config;
/// nvsoak's own CPU cost per I/O on `/metrics` and the status page.
mod cpucost;
/// The daemon end to end: `nvsoak run` on files, /metrics scraped and parsed.
mod daemon;
/// The docs against the code: the metrics table is `nvsoak metrics --list`, README's two
/// commands, links that resolve, every docs page in the package.
mod docs;
/// Drive-side soak figures: the daemon in-process on a loop device with replayed NVMe health
/// whose SMART counters move; checkpoint, results file and report.
mod drive_summary;
/// Engines on real files: bytes, alignment, region bounds, rate limits.
mod engine;
/// `nvsoak run --exit-when-done`: the verdict as the exit status (PASS 0, FAIL 2, INCOMPLETE 3),
/// the verdict in the results file and the OCPTV record; I/O errors from a device-mapper range.
mod exit_code;
/// Faults and signals: SIGHUP reloads, a full file system, I/O errors from btrfs checksums and
/// device-mapper, max_errors, and memory staying flat over a soak.
mod faults;
/// Figures that are right: every worker report counted at segment ends, rates plausible across
/// phase changes, finished jobs' rate series gone, the soak clock stopped when the plan ends.
mod figures;
/// Records only go forward across stops of every kind; soak figures cover soak phases only.
mod forward;
/// The health poller and `nvsoak health` on the replay transport.
mod health;
/// Every file nvsoak reads replaced by a FIFO, /dev/zero, a directory or a sparse giant.
mod hostile_files;
/// The journal: phase start and end lines with outcomes, finished against stopped.
mod journal;
/// A file target's mark against forged sidecars and user attributes; the state-directory record.
mod mark_attacks;
/// The drive's own view (OCP C1h, C3h, telemetry 08h) over HTTP, drive events, promtool.
mod ocp;
/// The OCPTV record end to end (one step per phase run, at its times) and one phase numbering
/// in the log, `state show` and the results file across a stop and resume.
mod ocptv;
/// Deployment: web config (TLS, basic auth), connection limits, systemd unit, promtool.
mod ops;
/// Records never overwritten: results files moved aside on each way a run starts over, report
/// --archived, a checkpoint for another device; checkpoint saves off the event loop (slow and
/// failing saves).
mod records;
/// A target a reload cannot start stays in /metrics as down, with the reason.
mod reload_refused;
/// `nvsoak report` on recorded and real sweeps; the report and status page in headless Chromium.
mod report;
/// Precondition and sweep phases resume where they stopped after kill -9.
mod resume;
/// Write safety on loop devices, data verification, checkpoints.
mod safety;
/// `/metrics` under load: the body served again within a stats interval, counters advancing
/// across intervals, the I/O workers' priority.
mod scrape;
/// The shipped config/nvsoak.toml as installed: health polling only, writing nothing.
mod shipped;
/// The soak over time: an endless soak's history in the results file, the status page and
/// the report (charts, events, steady window), its phase-end line at shutdown, and why the
/// status page has no drives.
mod soakover;
/// Targets spanning several block devices (`paths`) on loop devices: workers spread over the
/// members, per-member figures summing to the target's, every member checked on its own.
mod span;
/// Start-up order: busy port, bad certificate, FIFO web config exit before any file; check-config
/// checks the web config.
mod startup;
/// The state directory's lock and ownership against symlinks, foreign directories and resets.
mod state_attacks;
/// Purge and self-test on a loop device: claimed, refused as not NVMe, recorded.
mod steps;
/// nvsoak without root: its own file soaks; a file it cannot vouch for is refused.
mod unprivileged;
/// Data verification end to end: corruption, misdirected and lost writes injected into a
/// running soak's target file; no false mismatches across clean runs and kill -9 restarts.
mod verdict;
mod verify;
/// The computed verification state: detection on a random-write soak, kill -9 resume, 24 loop
/// devices of 16 TB in megabytes.
mod walk;
/// The endpoint under attack and odd web config files: a wrong-password flood on keep-alive
/// connections, a web config replaced by a FIFO, a world-writable TLS key.
mod webauth;
