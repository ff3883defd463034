//! Setting up an io_uring ring, for both ring engines: the set-up flags, the fallback ladder
//! for kernels that refuse a flag, the benchmark knob that forces one flag set, and the
//! `kernel.io_uring_disabled` check. Nothing here knows the ring's buffers or slots
//! ([`super::ring`]) or an engine's SQEs ([`super::uring`], [`super::passthru`]).
//!
//! Setup mirrors fio's `engines/io_uring.c` ([`build_ring_with`], which `Ring::new` calls for
//! both engines): optional flags first (single issuer, deferred or cooperative task running, a
//! roomy CQ); on `EINVAL` they are dropped one step at a time until a plain ring is tried.
//! The flags that stuck and why are logged once per process for each distinct outcome
//! (`io_uring set-up: ..` at info level), not once per worker.
//!
//! The ladder's order, measured on the host's kernel, not under emulation (`scripts/bench-vs-fio
//! --ring-flags ..`: `nvsoak run` on an O_DIRECT file in /dev/shm, 4K random read QD 128, one
//! worker, pinned to one CPU, against fio io_uring with fixedbufs and registerfiles; Linux 6.18,
//! 10 s rounds alternating, medians; IOPS and IOPS per CPU-second of the whole process from
//! `/usr/bin/time`, ratios per round against fio; a 2-core host shared with other builds):
//!   run 1, 5 rounds: single_issuer+defer_taskrun 529978 IOPS, 530572/CPU-s (1.15x / 1.18x);
//!     single_issuer+coop_taskrun 479646 / 479699 (1.05x / 1.06x); none 483376 / 483446
//!     (1.00x / 1.01x); fio 458924 / 451298
//!   run 2, 3 rounds, the order reversed: single_issuer+defer_taskrun 481029 / 481083
//!     (1.03x / 1.04x); single_issuer+coop_taskrun 428692 / 429171 (0.97x / 0.99x); none
//!     460713 / 460765 (1.04x / 1.05x); fio 468505 / 461174
//! So SINGLE_ISSUER with DEFER_TASKRUN leads the ladder (completions are posted when the worker
//! enters to reap, with no task-work interrupts on its thread); SINGLE_ISSUER with COOP_TASKRUN
//! follows for kernels before 6.1, which refuse DEFER_TASKRUN (on this kernel it measured no
//! better than no flags; kernels that old could not be measured here). Only the file path could be
//! measured here (no block device, passthrough or polled queue on the host); an earlier
//! emulated measurement (`scripts/bench-vm --ring-flags`, QEMU TCG) had put COOP_TASKRUN first,
//! but two samples of the same flags differed by 18 % there, and on the host that order cost
//! about 10 % of IOPS per CPU-second. Re-measure on a block device or passthrough path before
//! giving those paths another order.
//! `EPERM`/`ENOSYS` (seccomp, `kernel.io_uring_disabled`) mean io_uring is refused here, which
//! lets `engine::open(Auto)` fall back to psync.

use std::io;

use io_uring::{IoUring, squeue};

use super::EngineError;

/// `kernel.io_uring_disabled = 2` disables io_uring for everyone; setup would fail with EPERM
/// anyway, but this names the reason.
pub(super) fn refuse_if_disabled() -> Result<(), EngineError> {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
    if disabled.is_ok_and(|v| v.trim() == "2") {
        return Err(EngineError::UringRefused(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "kernel.io_uring_disabled = 2",
        )));
    }
    Ok(())
}

fn is_refusal(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS))
}

/// One rung of the ladder: its label (as logged) and what it sets on the builder.
type Attempt<S, C> = (&'static str, fn(&mut io_uring::Builder<S, C>));

/// The ladder, from most to least optimised; each rung asks for less than the one above, so a
/// kernel that refuses a flag (`EINVAL`) gets the next. See the module's figures for the order.
fn ladder<S: squeue::EntryMarker, C: io_uring::cqueue::EntryMarker>() -> [Attempt<S, C>; 4] {
    [
        ("single_issuer,defer_taskrun,cqsize", |b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
        ("single_issuer,coop_taskrun,cqsize", |b| {
            b.setup_single_issuer().setup_coop_taskrun();
        }),
        ("coop_taskrun,cqsize", |b| {
            b.setup_coop_taskrun();
        }),
        ("plain", |_| {}),
    ]
}

/// The one rung the benchmark knob forces.
fn forced<S: squeue::EntryMarker, C: io_uring::cqueue::EntryMarker>(
    f: BenchFlags,
) -> Attempt<S, C> {
    match f {
        BenchFlags::None => ("cqsize", |_| {}),
        BenchFlags::SingleIssuer => ("single_issuer,cqsize", |b| {
            b.setup_single_issuer();
        }),
        BenchFlags::CoopTaskrun => ("coop_taskrun,cqsize", |b| {
            b.setup_coop_taskrun();
        }),
        BenchFlags::SingleIssuerCoop => ("single_issuer,coop_taskrun,cqsize", |b| {
            b.setup_single_issuer().setup_coop_taskrun();
        }),
        BenchFlags::SingleIssuerDefer => ("single_issuer,defer_taskrun,cqsize", |b| {
            b.setup_single_issuer().setup_defer_taskrun();
        }),
    }
}

/// The set-up ladder: build the ring, dropping optional setup flags on `EINVAL`, with the
/// final `build` injectable (the engines add `IORING_SETUP_IOPOLL` there; tests play a kernel
/// that rejects flags). Returns the ring and a label of the flags that stuck, and logs that
/// label and why it was taken (once per process for each distinct outcome).
pub(super) fn build_ring_with<S: squeue::EntryMarker, C: io_uring::cqueue::EntryMarker>(
    entries: u32,
    mut build: impl FnMut(&io_uring::Builder<S, C>, u32) -> io::Result<IoUring<S, C>>,
) -> Result<(IoUring<S, C>, &'static str), EngineError> {
    let ladder = ladder::<S, C>();
    // The benchmark knob: exactly one flag set, no ladder (an error if the kernel refuses it).
    let chosen: [Attempt<S, C>; 1];
    let (attempts, knob): (&[Attempt<S, C>], bool) = match bench_ring_flags() {
        Ok(None) => (&ladder, false),
        Ok(Some(f)) => {
            chosen = [forced(f)];
            (&chosen, true)
        }
        Err(e) => return Err(EngineError::UringSetup(e)),
    };
    let mut refused: Vec<&'static str> = Vec::new();
    let mut last = None;
    for (label, apply) in attempts {
        let mut b = IoUring::<S, C>::builder();
        apply(&mut b);
        if *label != "plain" {
            b.setup_cqsize(entries * 2);
        }
        match build(&b, entries) {
            Ok(r) => {
                log_choice(label, &choice_reason(knob, &refused));
                return Ok((r, label));
            }
            Err(e) if is_refusal(&e) => return Err(EngineError::UringRefused(e)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::debug!(
                    flags = label,
                    "io_uring setup rejected these flags; retrying with fewer"
                );
                refused.push(label);
                last = Some(e);
            }
            Err(e) => return Err(EngineError::UringSetup(e)),
        }
    }
    Err(EngineError::UringSetup(last.unwrap_or_else(|| {
        io::Error::from_raw_os_error(libc::EINVAL)
    })))
}

/// Why the flags that stuck were taken: the knob forced them, they lead the ladder, or the
/// kernel refused the rungs above (`refused`, in the order tried).
fn choice_reason(knob: bool, refused: &[&str]) -> String {
    if knob {
        "forced by NVSOAK_BENCH_RING_FLAGS, a benchmark knob".to_string()
    } else if refused.is_empty() {
        "the first choice of the set-up ladder, the fastest measured on this path".to_string()
    } else {
        format!(
            "this kernel refused {} (EINVAL); the next of the set-up ladder",
            refused.join(" and ")
        )
    }
}

/// Log the set-up's outcome at info level the first time the process sees it: every worker
/// builds its own ring, and on one kernel they all come to the same choice.
fn log_choice(label: &'static str, why: &str) {
    if first_time(label, why) {
        tracing::info!("io_uring set-up: {label} ({why})");
    }
}

/// Whether (`label`, `why`) has not been seen by this process before (and note it).
fn first_time(label: &'static str, why: &str) -> bool {
    static SEEN: std::sync::Mutex<Vec<(&'static str, String)>> = std::sync::Mutex::new(Vec::new());
    let mut seen = crate::util::lock(&SEEN);
    if seen.iter().any(|(l, w)| *l == label && w == why) {
        return false;
    }
    seen.push((label, why.to_string()));
    true
}

/// `NVSOAK_BENCH_RING_FLAGS`: a benchmark knob (`scripts/bench-vm --ring-flags`), read once
/// per process, that replaces the set-up ladder with one flag set so each can be measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFlags {
    None,
    SingleIssuer,
    CoopTaskrun,
    SingleIssuerCoop,
    SingleIssuerDefer,
}

/// The knob's values (`default` is the ladder, as when unset).
pub const BENCH_RING_FLAGS: &[(&str, Option<BenchFlags>)] = &[
    ("default", None),
    ("none", Some(BenchFlags::None)),
    ("single_issuer", Some(BenchFlags::SingleIssuer)),
    ("coop_taskrun", Some(BenchFlags::CoopTaskrun)),
    (
        "single_issuer+coop_taskrun",
        Some(BenchFlags::SingleIssuerCoop),
    ),
    (
        "single_issuer+defer_taskrun",
        Some(BenchFlags::SingleIssuerDefer),
    ),
];

/// Why the knob's value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BenchFlagsError {
    /// Not one of [`BENCH_RING_FLAGS`] (the value as it was given).
    #[error(
        "NVSOAK_BENCH_RING_FLAGS = {0:?} is not one of {names} (a benchmark knob; unset it)",
        names = knob_names()
    )]
    Unknown(String),
}

/// The knob's value names, comma-separated.
fn knob_names() -> String {
    let names: Vec<&str> = BENCH_RING_FLAGS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

/// The knob's value from `raw` (the environment variable's content, if set).
pub fn parse_bench_flags(raw: Option<&str>) -> Result<Option<BenchFlags>, BenchFlagsError> {
    let Some(v) = raw else { return Ok(None) };
    BENCH_RING_FLAGS
        .iter()
        .find(|(n, _)| *n == v.trim())
        .map(|(_, f)| *f)
        .ok_or_else(|| BenchFlagsError::Unknown(v.to_string()))
}

fn bench_ring_flags() -> io::Result<Option<BenchFlags>> {
    static KNOB: std::sync::OnceLock<Result<Option<BenchFlags>, BenchFlagsError>> =
        std::sync::OnceLock::new();
    KNOB.get_or_init(|| parse_bench_flags(std::env::var("NVSOAK_BENCH_RING_FLAGS").ok().as_deref()))
        .clone()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_drops_optional_flags_on_einval() {
        // A kernel that knows neither SINGLE_ISSUER nor DEFER_TASKRUN.
        let mut tried = 0;
        let (ring, label) = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |b, n| {
            tried += 1;
            if tried <= 2 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                b.build(n)
            }
        })
        .expect("third attempt succeeds");
        assert_eq!(tried, 3);
        assert_eq!(label, "coop_taskrun,cqsize");
        assert_eq!(ring.params().cq_entries(), 16);
        // A kernel without DEFER_TASKRUN (before 6.1) gets single issuer with cooperative
        // task running.
        let mut tried = 0;
        let (_, label) = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |b, n| {
            tried += 1;
            if tried == 1 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                b.build(n)
            }
        })
        .expect("second attempt succeeds");
        assert_eq!(label, "single_issuer,coop_taskrun,cqsize");
        // Every attempt rejected: the error says io_uring setup failed, with EINVAL.
        let e = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |_, _| {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        })
        .err()
        .expect("all rejected");
        assert!(
            matches!(&e, EngineError::UringSetup(io) if io.raw_os_error() == Some(libc::EINVAL))
        );
    }

    #[test]
    fn the_bench_knob_names_every_flag_set_and_refuses_others() {
        assert_eq!(parse_bench_flags(None), Ok(None));
        assert_eq!(parse_bench_flags(Some("default")), Ok(None));
        assert_eq!(
            parse_bench_flags(Some("single_issuer+defer_taskrun")),
            Ok(Some(BenchFlags::SingleIssuerDefer))
        );
        assert_eq!(parse_bench_flags(Some("none")), Ok(Some(BenchFlags::None)));
        let e = parse_bench_flags(Some("defer"))
            .expect_err("unknown")
            .to_string();
        assert_eq!(
            e,
            "NVSOAK_BENCH_RING_FLAGS = \"defer\" is not one of default, none, single_issuer, coop_taskrun, single_issuer+coop_taskrun, single_issuer+defer_taskrun (a benchmark knob; unset it)"
        );
        assert!(
            e.contains("NVSOAK_BENCH_RING_FLAGS") && e.contains("single_issuer+coop_taskrun"),
            "{e}"
        );
    }

    #[test]
    fn eperm_and_enosys_mean_refused_so_auto_can_fall_back() {
        for errno in [libc::EPERM, libc::ENOSYS] {
            let mut tried = 0;
            let e = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |_, _| {
                tried += 1;
                Err(io::Error::from_raw_os_error(errno))
            })
            .err()
            .expect("refused");
            assert_eq!(tried, 1, "no retries once refused");
            assert!(matches!(e, EngineError::UringRefused(_)));
            assert!(e.to_string().contains("engine = \"psync\""), "{e}");
        }
        let e = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |_, _| {
            Err(io::Error::from_raw_os_error(libc::ENOMEM))
        })
        .err()
        .expect("fails");
        assert!(matches!(e, EngineError::UringSetup(_)));
    }

    #[test]
    fn the_reason_says_why_the_flags_were_taken() {
        assert_eq!(
            choice_reason(false, &[]),
            "the first choice of the set-up ladder, the fastest measured on this path"
        );
        assert_eq!(
            choice_reason(
                false,
                &[
                    "single_issuer,defer_taskrun,cqsize",
                    "single_issuer,coop_taskrun,cqsize"
                ]
            ),
            "this kernel refused single_issuer,defer_taskrun,cqsize and \
             single_issuer,coop_taskrun,cqsize (EINVAL); the next of the set-up ladder"
        );
        assert!(choice_reason(true, &[]).contains("NVSOAK_BENCH_RING_FLAGS"));
    }

    #[test]
    fn each_outcome_is_logged_once_per_process() {
        assert!(first_time("test-label", "test reason"));
        assert!(!first_time("test-label", "test reason"));
        assert!(first_time("test-label", "another reason"));
        assert!(first_time("other-label", "test reason"));
    }
}
