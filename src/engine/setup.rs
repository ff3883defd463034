//! Setting up an io_uring ring, for both ring engines: the set-up flags, the fallback ladder
//! for kernels that refuse a flag, the benchmark knob that forces one flag set, and the
//! `kernel.io_uring_disabled` check. Nothing here knows the ring's buffers or slots
//! ([`super::ring`]) or an engine's SQEs ([`super::uring`], [`super::passthru`]).
//!
//! Setup mirrors fio's `engines/io_uring.c` ([`build_ring_with`], which `Ring::new` calls for
//! both engines): optional flags first (single issuer, cooperative task running, a roomy CQ);
//! on `EINVAL` they are dropped one step at a time until a plain ring is tried.
//!
//! Set-up flags, measured (`scripts/bench-vm --device nvme --path interrupt --ring-flags ..`,
//! QEMU 7.2 NVMe under TCG, 1 vCPU, 4K random read QD32, medians; nvsoak IOPS and IOPS per
//! CPU-second of the whole process; a shared, noisy 2-core host: two runs of the very same
//! flags differed by 18 %):
//!   run 1, 3 rounds (a build running beside it), ratios against single_issuer+defer_taskrun:
//!     none 0.99x / 0.94x, single_issuer 1.18x / 0.77x, single_issuer+coop_taskrun
//!     1.25x / 1.16x (same flags as the reference, another sample: 0.82x / 0.85x)
//!   run 2, 5 rounds, quiet host: single_issuer+defer_taskrun 25500 IOPS, 43220 IOPS/CPU-s;
//!     none 28788 / 51432 (1.13x / 1.19x); single_issuer+coop_taskrun 29338 / 53976
//!     (1.15x / 1.25x)
//! DEFER_TASKRUN did not help in either run and is dropped from the ladder (still measurable
//! with `--ring-flags single_issuer+defer_taskrun`); single_issuer+coop_taskrun came out best
//! in both and leads the ladder. The differences are within this host's noise, so a quieter
//! machine (or real hardware) should re-measure before reading more into them.
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

/// The set-up ladder: build the ring, dropping optional setup flags on `EINVAL`, with the
/// final `build` injectable (the engines add `IORING_SETUP_IOPOLL` there; tests play a kernel
/// that rejects flags). Returns the ring and a label of the flags that stuck.
pub(super) fn build_ring_with<S: squeue::EntryMarker, C: io_uring::cqueue::EntryMarker>(
    entries: u32,
    mut build: impl FnMut(&io_uring::Builder<S, C>, u32) -> io::Result<IoUring<S, C>>,
) -> Result<(IoUring<S, C>, &'static str), EngineError> {
    // Ordered from most to least optimised; each is a superset of what the kernel may not know.
    type Attempt<S, C> = (&'static str, fn(&mut io_uring::Builder<S, C>));
    // DEFER_TASKRUN is not in the ladder: measured slower (see the module's figures).
    let ladder: [Attempt<S, C>; 3] = [
        ("single_issuer,coop_taskrun,cqsize", |b| {
            b.setup_single_issuer().setup_coop_taskrun();
        }),
        ("coop_taskrun,cqsize", |b| {
            b.setup_coop_taskrun();
        }),
        ("plain", |_| {}),
    ];
    // The benchmark knob: exactly one flag set, no ladder (an error if the kernel refuses it).
    let chosen: [Attempt<S, C>; 1];
    let attempts: &[Attempt<S, C>] = match bench_ring_flags() {
        Ok(None) => &ladder,
        Ok(Some(BenchFlags::None)) => {
            chosen = [("cqsize", |_| {})];
            &chosen
        }
        Ok(Some(BenchFlags::SingleIssuer)) => {
            chosen = [("single_issuer,cqsize", |b| {
                b.setup_single_issuer();
            })];
            &chosen
        }
        Ok(Some(BenchFlags::CoopTaskrun)) => {
            chosen = [("coop_taskrun,cqsize", |b| {
                b.setup_coop_taskrun();
            })];
            &chosen
        }
        Ok(Some(BenchFlags::SingleIssuerCoop)) => {
            chosen = [ladder[0]];
            &chosen
        }
        Ok(Some(BenchFlags::SingleIssuerDefer)) => {
            chosen = [("single_issuer,defer_taskrun,cqsize", |b| {
                b.setup_single_issuer().setup_defer_taskrun();
            })];
            &chosen
        }
        Err(e) => return Err(EngineError::UringSetup(e)),
    };
    let mut last = None;
    for (label, apply) in attempts {
        let mut b = IoUring::<S, C>::builder();
        apply(&mut b);
        if *label != "plain" {
            b.setup_cqsize(entries * 2);
        }
        match build(&b, entries) {
            Ok(r) => return Ok((r, label)),
            Err(e) if is_refusal(&e) => return Err(EngineError::UringRefused(e)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                tracing::debug!(
                    flags = label,
                    "io_uring setup rejected these flags; retrying with fewer"
                );
                last = Some(e);
            }
            Err(e) => return Err(EngineError::UringSetup(e)),
        }
    }
    Err(EngineError::UringSetup(last.unwrap_or_else(|| {
        io::Error::from_raw_os_error(libc::EINVAL)
    })))
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
        // A kernel that does not know SINGLE_ISSUER.
        let mut tried = 0;
        let (ring, label) = build_ring_with::<squeue::Entry, io_uring::cqueue::Entry>(8, |b, n| {
            tried += 1;
            if tried <= 1 {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                b.build(n)
            }
        })
        .expect("second attempt succeeds");
        assert_eq!(tried, 2);
        assert_eq!(label, "coop_taskrun,cqsize");
        assert_eq!(ring.params().cq_entries(), 16);
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
}
