//! Workload and daemon metric families, built from target snapshots at scrape time.

use prometheus::proto::MetricFamily;

use super::{Family, push};
use crate::stats::{LAT_BUCKETS, OpCounters, QUANTILES};
use crate::workload::scheduler::TargetSnapshot;

/// Facts about the daemon itself.
#[derive(Debug, Clone)]
pub struct DaemonInfo {
    pub version: &'static str,
    pub revision: &'static str,
    pub uptime_secs: f64,
    /// The HTTP server's basic-auth counters (`None`: not reported).
    pub auth: Option<crate::http::auth::GuardStats>,
    /// Targets whose start the last reload refused: down, with the reason.
    pub refused: Vec<crate::model::spec::RefusedTarget>,
}

/// The soak phases' own totals, carried across restarts (from the checkpoint, or the results
/// file when it is ahead, plus this run's soak phases).
#[derive(Debug, Clone, Default)]
pub struct SoakTotals {
    pub target: String,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub errors: u64,
    pub elapsed_secs: f64,
}

/// Failed passthrough commands by NVMe status (engine = "io_uring_cmd").
fn nvme_status_family(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut f = Family::counter(
        "nvsoak_io_nvme_status_errors_total",
        "Failed NVMe passthrough commands (engine io_uring_cmd) by op and the NVMe status the drive completed them with (sct: status code type, sc: status code, from the completion queue entry); each also counts as errno EIO in nvsoak_io_errors_total.",
    );
    for t in targets {
        for (job, j) in &t.jobs {
            for (op, c) in [("read", &j.read), ("write", &j.write)] {
                for (st, n) in c.errors.nvme().iter() {
                    let sct = format!("{:#x}", crate::nvme::status_sct(st));
                    let sc = format!("{:#x}", crate::nvme::status_sc(st));
                    f.add(
                        &[
                            ("target", &t.name),
                            ("workload", job),
                            ("op", op),
                            ("sct", &sct),
                            ("sc", &sc),
                        ],
                        n as f64,
                    );
                }
                if c.errors.nvme().other > 0 {
                    f.add(
                        &[
                            ("target", &t.name),
                            ("workload", job),
                            ("op", op),
                            ("sct", "other"),
                            ("sc", "other"),
                        ],
                        c.errors.nvme().other as f64,
                    );
                }
            }
        }
    }
    push(out, f);
}

pub fn errno_name(e: i32) -> String {
    let n = nix::errno::Errno::from_raw(e);
    if n == nix::errno::Errno::UnknownErrno {
        format!("E{e}")
    } else {
        format!("{n:?}")
    }
}

pub fn families(
    targets: &[TargetSnapshot],
    soak: &[SoakTotals],
    d: &DaemonInfo,
) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    daemon_families(d, &mut out);
    target_families(targets, &d.refused, &mut out);
    for (op, name) in [(0usize, "read"), (1, "write")] {
        op_families(targets, op, name, &mut out);
    }
    error_families(targets, &mut out);
    cpu_families(targets, &mut out);
    steady_families(targets, &mut out);
    sweep_families(targets, &mut out);
    soak_families(soak, &mut out);
    member_families(targets, &mut out);
    out
}

/// The members of targets spanning several block devices (`paths`): what nvsoak did on each,
/// cumulative over the plan like the `nvsoak_soak_*` totals (which they sum to), and each
/// member's rates while the workload runs.
fn member_families(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut info = Family::gauge(
        "nvsoak_target_member_info",
        "A block device of a target spanning several devices (paths): its path, and for NVMe namespaces the controller it sits on, to join with nvme_* series; value is always 1.",
    );
    let mut ops = Family::counter(
        "nvsoak_target_member_ops_total",
        "Completed I/Os on one member of a target spanning several devices, by op; carried across restarts through the checkpoint (the members' sum is the target's soak total).",
    );
    let mut bytes = Family::counter(
        "nvsoak_target_member_bytes_total",
        "Bytes transferred by completed I/Os on one member of a target spanning several devices, by op; carried across restarts through the checkpoint.",
    );
    let mut errors = Family::counter(
        "nvsoak_target_member_io_errors_total",
        "I/O errors on one member of a target spanning several devices; carried across restarts through the checkpoint.",
    );
    let mut iops = Family::gauge(
        "nvsoak_target_member_iops",
        "I/Os per second on one member of a target spanning several devices over the last stats interval, by op (present while a segment runs).",
    );
    for t in targets {
        for (m, f) in t.members.iter().enumerate() {
            let ctrl = f.controller.clone().unwrap_or_default();
            let dev = f.device.as_str();
            info.add(
                &[
                    ("target", t.name.as_str()),
                    ("device", dev),
                    ("path", f.path.as_str()),
                    ("controller", ctrl.as_str()),
                ],
                1.0,
            );
            for (op, n, b) in [
                ("read", f.read_ops, f.read_bytes),
                ("write", f.write_ops, f.write_bytes),
            ] {
                let l = [("target", t.name.as_str()), ("device", dev), ("op", op)];
                ops.add(&l, n as f64);
                bytes.add(&l, b as f64);
            }
            errors.add(
                &[("target", t.name.as_str()), ("device", dev)],
                f.errors as f64,
            );
            if let Some(r) = t.member_rates.get(m).filter(|_| t.running) {
                for (op, v) in [("read", r[0]), ("write", r[1])] {
                    iops.add(
                        &[("target", t.name.as_str()), ("device", dev), ("op", op)],
                        v,
                    );
                }
            }
        }
    }
    push(out, info);
    push(out, ops);
    push(out, bytes);
    push(out, errors);
    push(out, iops);
}

/// Build information, uptime and the HTTP server's auth counters.
fn daemon_families(d: &DaemonInfo, out: &mut Vec<MetricFamily>) {
    let mut build = Family::gauge(
        "nvsoak_build_info",
        "nvsoak build information; value is always 1.",
    );
    build.add(&[("version", d.version), ("revision", d.revision)], 1.0);
    push(out, build);
    let mut up = Family::gauge("nvsoak_uptime_seconds", "Seconds since the daemon started.");
    up.add(&[], d.uptime_secs);
    push(out, up);
    if let Some(a) = &d.auth {
        auth_families(a, out);
    }
}

/// Per-target info and state: engine, phase, path/device, running, up.
fn target_families(
    targets: &[TargetSnapshot],
    refused: &[crate::model::spec::RefusedTarget],
    out: &mut Vec<MetricFamily>,
) {
    let mut engine = Family::gauge(
        "nvsoak_engine_info",
        "I/O engine the target's workers use (io_uring, psync or null); value is always 1.",
    );
    let mut phase = Family::gauge(
        "nvsoak_phase_info",
        "Current phase (precondition, sweep, soak, purge, self-test) and profile (for a purge its method, for a self-test short or extended) of each target; value is always 1.",
    );
    let mut running = Family::gauge(
        "nvsoak_phase_running",
        "1 while a phase of the target's plan runs, 0 once the plan finished or stopped.",
    );
    let mut tinfo = Family::gauge(
        "nvsoak_target_info",
        "The target's path, and for NVMe namespaces the controller (device) it sits on, to join workload series with nvme_* series; members lists every device path the target writes, comma-separated (a target spanning several devices: all of them in order; else its path); value is always 1.",
    );
    let mut tup = Family::gauge(
        "nvsoak_target_up",
        "1 unless the target was stopped by errors, a refusal or a vanished device.",
    );
    for t in targets {
        if let Some(e) = &t.engine {
            engine.add(&[("target", &t.name), ("engine", e)], 1.0);
        }
        if !t.phase.is_empty() {
            phase.add(
                &[
                    ("target", &t.name),
                    ("phase", &t.phase),
                    ("profile", &t.profile),
                ],
                1.0,
            );
        }
        // The poller's mapping when there is one, else the device node's name.
        let device = t
            .controller
            .clone()
            .or_else(|| crate::nvme::controller_of_node(&t.path))
            .unwrap_or_default();
        // Every device the target writes: a spanning target's members in order, else its path.
        let members = if t.members.is_empty() {
            t.path.clone()
        } else {
            t.members
                .iter()
                .map(|m| m.path.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        tinfo.add(
            &[
                ("target", &t.name),
                ("path", &t.path),
                ("device", &device),
                ("members", &members),
            ],
            1.0,
        );
        running.add(&[("target", &t.name)], if t.running { 1.0 } else { 0.0 });
        tup.add(&[("target", &t.name)], if t.up { 1.0 } else { 0.0 });
    }
    let mut rinfo = Family::gauge(
        "nvsoak_target_refused_info",
        "A target of the config that is not running because a reload's start of it was refused, with the reason; value is always 1 (its nvsoak_target_up is 0).",
    );
    for r in refused {
        tup.add(&[("target", &r.name)], 0.0);
        rinfo.add(
            &[
                ("target", &r.name),
                ("path", &r.path),
                ("reason", &r.reason),
            ],
            1.0,
        );
    }
    push(out, engine);
    push(out, phase);
    push(out, tinfo);
    push(out, running);
    push(out, tup);
    push(out, rinfo);
}

/// The counters, latency histogram and summary, IOPS and bandwidth of one op (0 read, 1 write).
fn op_families(targets: &[TargetSnapshot], op: usize, name: &str, out: &mut Vec<MetricFamily>) {
    let sel = |j: &crate::workload::scheduler::JobStats| -> OpCounters {
        if op == 0 {
            j.read.clone()
        } else {
            j.write.clone()
        }
    };
    let mut ops = Family::counter(
        &format!("nvsoak_{name}_ops_total"),
        &format!("Completed {name} I/Os."),
    );
    let mut bytes = Family::counter(
        &format!("nvsoak_{name}_bytes_total"),
        &format!("Bytes transferred by completed {name} I/Os."),
    );
    let mut lat = Family::histogram(
        &format!("nvsoak_{name}_latency_seconds"),
        &format!("Completion latency of {name} I/Os, submit to reap."),
    );
    let mut q = Family::summary(
        &format!("nvsoak_{name}_latency_quantile_seconds"),
        &format!(
            "{name} latency quantiles over the last stats interval, from HDR histograms; _sum and _count are cumulative (quantiles absent when the interval had no {name}s)."
        ),
    );
    let mut iops = Family::gauge(
        &format!("nvsoak_{name}_iops"),
        &format!(
            "{name} I/Os per second over the last stats interval, by the workers' clocks (present while the workload runs)."
        ),
    );
    let mut bw = Family::gauge(
        &format!("nvsoak_{name}_bandwidth_bytes_per_second"),
        &format!(
            "{name} bytes per second over the last stats interval, by the workers' clocks (present while the workload runs)."
        ),
    );
    for t in targets {
        for (job, j) in &t.jobs {
            let c = sel(j);
            let l = [("target", t.name.as_str()), ("workload", job.as_str())];
            ops.add(&l, c.ops as f64);
            bytes.add(&l, c.bytes as f64);
            lat.add_histogram(&l, &LAT_BUCKETS, &c.lat_buckets, c.lat_sum_ns as f64 / 1e9);
            // A finished job's interval figures go away with it.
            let qv = if !j.active {
                None
            } else if op == 0 {
                j.read_q
            } else {
                j.write_q
            };
            let pairs: Vec<(f64, f64)> = match qv {
                Some(qv) => QUANTILES.iter().map(|(p, _)| *p).zip(qv).collect(),
                None => Vec::new(),
            };
            q.add_summary(&l, &pairs, c.ops, c.lat_sum_ns as f64 / 1e9);
            let (i, b) = if op == 0 {
                (j.read_iops, j.read_bw)
            } else {
                (j.write_iops, j.write_bw)
            };
            if j.active {
                iops.add(&l, i);
                bw.add(&l, b);
            }
        }
    }
    push(out, ops);
    push(out, bytes);
    push(out, lat);
    push(out, q);
    push(out, iops);
    push(out, bw);
}

/// The CPU the workers spend, so an operator can tell a host-limited figure from a drive's.
fn cpu_families(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut cpu = Family::counter(
        "nvsoak_workload_cpu_seconds_total",
        "CPU time of the workload's I/O worker threads (getrusage per thread, sampled every stats interval): mode=\"user\" is nvsoak's own code, mode=\"system\" the kernel's work on its behalf (system calls, and io_uring completions reaped in the thread). Kernel work on other threads (io-wq) is not included.",
    );
    let mut per_io = Family::gauge(
        "nvsoak_workload_cpu_per_io_seconds",
        "Worker CPU time per completed I/O over the last stats interval, by mode as nvsoak_workload_cpu_seconds_total (present while the workload runs and completes I/O).",
    );
    let mut workers = Family::gauge(
        "nvsoak_workload_workers",
        "I/O worker threads of the running workload (present while it runs); a worker whose CPU rate nears 1 is saturated, and the figures then measure the host as much as the drive.",
    );
    for t in targets {
        for (job, j) in &t.jobs {
            let l = |mode| {
                [
                    ("target", t.name.as_str()),
                    ("workload", job.as_str()),
                    ("mode", mode),
                ]
            };
            cpu.add(&l("user"), j.cpu.user_ns as f64 / 1e9);
            cpu.add(&l("system"), j.cpu.sys_ns as f64 / 1e9);
            if j.active {
                if let Some((u, k)) = j.cpu_per_io_ns {
                    per_io.add(&l("user"), u / 1e9);
                    per_io.add(&l("system"), k / 1e9);
                }
                workers.add(
                    &[("target", t.name.as_str()), ("workload", job.as_str())],
                    j.workers as f64,
                );
            }
        }
    }
    push(out, cpu);
    push(out, per_io);
    push(out, workers);
}

/// I/O errors by errno, and verification failures by kind.
fn error_families(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut errs = Family::counter(
        "nvsoak_io_errors_total",
        "Failed I/Os by op and errno; the workload continues unless max_errors is reached.",
    );
    for t in targets {
        for (job, j) in &t.jobs {
            for (op, c) in [("read", &j.read), ("write", &j.write)] {
                for (e, n) in c.errors.iter() {
                    let en = errno_name(e);
                    errs.add(
                        &[
                            ("target", &t.name),
                            ("workload", job),
                            ("op", op),
                            ("errno", &en),
                        ],
                        n as f64,
                    );
                }
            }
        }
    }
    push(out, errs);
    nvme_status_family(targets, out);

    let mut verr = Family::counter(
        "nvsoak_verify_errors_total",
        "Data verification failures by kind: wrong_offset (misdirected write), stale_generation (lost write), bad_checksum (corruption), unreadable (read failed); carried across restarts.",
    );
    for t in targets {
        if let Some(v) = &t.verify {
            for (kind, n) in v.counters.by_label() {
                verr.add(&[("target", &t.name), ("kind", kind)], n as f64);
            }
        }
    }
    push(out, verr);

    let mut vstate = Family::gauge(
        "nvsoak_verify_state_bytes",
        "Memory the target's data verification state keeps, by scheme (stored_map: the generation map, 2.125 bytes per 4 KiB of region); set when verification starts, present while verify is on. state.max_verify_memory bounds the sum over all targets.",
    );
    for t in targets {
        if let Some(v) = &t.verify {
            vstate.add(
                &[("target", &t.name), ("scheme", v.cost.scheme.as_str())],
                v.cost.state_bytes as f64,
            );
        }
    }
    push(out, vstate);
}

/// The soak phases' totals, carried across restarts.
fn soak_families(soak: &[SoakTotals], out: &mut Vec<MetricFamily>) {
    let mut sr = Family::gauge(
        "nvsoak_soak_read_bytes",
        "Bytes read by the soak phases only (not the precondition or sweeps), summed over restarts (the checkpoint's, or the results file's when that is ahead).",
    );
    let mut sw = Family::gauge(
        "nvsoak_soak_written_bytes",
        "Bytes written by the soak phases only (not the precondition or sweeps), summed over restarts (the checkpoint's, or the results file's when that is ahead).",
    );
    let mut se = Family::gauge(
        "nvsoak_soak_errors",
        "I/O errors of the soak phases only (not the precondition or sweeps), summed over restarts.",
    );
    let mut st = Family::gauge(
        "nvsoak_soak_elapsed_seconds",
        "Time the soak phases have run (not the precondition or sweeps; 0 before the first soak phase), summed over restarts, downtime excluded.",
    );
    for s in soak {
        let l = [("target", s.target.as_str())];
        sr.add(&l, s.read_bytes as f64);
        sw.add(&l, s.written_bytes as f64);
        se.add(&l, s.errors as f64);
        st.add(&l, s.elapsed_secs);
    }
    push(out, sr);
    push(out, sw);
    push(out, se);
    push(out, st);
}

fn auth_families(a: &crate::http::auth::GuardStats, out: &mut Vec<MetricFamily>) {
    for (name, help, v) in [
        (
            "nvsoak_http_auth_failures_total",
            "HTTP requests denied by basic auth (missing, malformed or wrong credentials).",
            a.failures,
        ),
        (
            "nvsoak_http_auth_bcrypt_checks_total",
            "bcrypt verifications run for basic auth (at most one at a time).",
            a.bcrypt_checks,
        ),
        (
            "nvsoak_http_auth_cache_hits_total",
            "Basic auth credentials answered from the caches of recent successes and failures, without bcrypt.",
            a.cache_hits,
        ),
        (
            "nvsoak_http_auth_delayed_total",
            "Failed basic auth attempts answered after a delay because their client address failed repeatedly.",
            a.delayed,
        ),
        (
            "nvsoak_http_auth_shed_total",
            "Basic auth attempts denied without bcrypt: their client address already had the most attempts waiting, or addresses that have not authenticated recently had spent their shared bcrypt budget.",
            a.shed,
        ),
        (
            "nvsoak_http_auth_waiting_shed_total",
            "Connections closed at the connection cap while their request waited for a password check (shed before idle ones).",
            a.waiting_shed,
        ),
        (
            "nvsoak_http_tls_handshakes_limited_total",
            "TLS connections closed before the handshake: their address, or untrusted addresses together, exceeded the handshake rate.",
            a.handshakes_limited,
        ),
    ] {
        let mut f = Family::counter(name, help);
        f.add(&[], v as f64);
        push(out, f);
    }
}

fn steady_families(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut reached = Family::gauge(
        "nvsoak_steady_state_reached",
        "1 when the job's IOPS meets the steady-state criterion over the window (SNIA PTS by default).",
    );
    let mut since = Family::gauge(
        "nvsoak_steady_state_since_timestamp_seconds",
        "Unix time at which steady state was reached (present only while reached).",
    );
    let mut rounds = Family::gauge(
        "nvsoak_steady_state_rounds",
        "Steady-state rounds completed by the job.",
    );
    let mut avg = Family::gauge(
        "nvsoak_steady_state_window_average_iops",
        "Average IOPS of the rounds in the steady-state window.",
    );
    let mut range = Family::gauge(
        "nvsoak_steady_state_range_ratio",
        "Range (max - min) of the window's rounds divided by their average (SNIA limit 0.2).",
    );
    let mut slope = Family::gauge(
        "nvsoak_steady_state_slope_excursion_ratio",
        "Excursion of the least-squares line across the window divided by the average (SNIA limit 0.1).",
    );
    for t in targets {
        for (job, j) in &t.jobs {
            if let Some(s) = &j.steady {
                let l = [("target", t.name.as_str()), ("workload", job.as_str())];
                reached.add(&l, if s.reached { 1.0 } else { 0.0 });
                if s.reached
                    && let Some(ts) = s.since_time
                {
                    since.add(&l, ts);
                }
                rounds.add(&l, s.rounds as f64);
                avg.add(&l, s.average);
                range.add(&l, s.range_ratio);
                slope.add(&l, s.slope_excursion_ratio);
            }
        }
    }
    for f in [reached, since, rounds, avg, range, slope] {
        push(out, f);
    }
}

fn sweep_families(targets: &[TargetSnapshot], out: &mut Vec<MetricFamily>) {
    let mut max = Family::gauge(
        "nvsoak_sweep_max_iops",
        "IOPS of the sweep's uncontrolled run (the 100% reference).",
    );
    let mut iops = Family::gauge(
        "nvsoak_sweep_point_iops",
        "Achieved IOPS at each sweep point (point = percent of the measured maximum).",
    );
    let mut tgt = Family::gauge(
        "nvsoak_sweep_point_target_iops",
        "Requested IOPS at each sweep point.",
    );
    let mut lavg = Family::gauge(
        "nvsoak_sweep_point_latency_average_seconds",
        "Average latency at each sweep point.",
    );
    let mut lp99 = Family::gauge(
        "nvsoak_sweep_point_latency_p99_seconds",
        "99th percentile latency at each sweep point.",
    );
    for t in targets {
        for (job, j) in &t.jobs {
            if let Some(s) = &j.sweep {
                max.add(&[("target", &t.name), ("workload", job)], s.max_iops);
                for p in s.points.iter().filter(|p| p.pct > 0) {
                    let pt = p.pct.to_string();
                    let l = [
                        ("target", t.name.as_str()),
                        ("workload", job.as_str()),
                        ("point", pt.as_str()),
                    ];
                    iops.add(&l, p.iops);
                    tgt.add(&l, p.target_iops);
                    lavg.add(&l, p.lat_avg_us / 1e6);
                    lp99.add(&l, p.lat_p99_us / 1e6);
                }
            }
        }
    }
    for f in [max, iops, tgt, lavg, lp99] {
        push(out, f);
    }
}
