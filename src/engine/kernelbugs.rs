//! Engines a kernel is known to crash on. A burn-in host runs for days, often many drives at
//! once; an engine that can oops the host kernel is refused there, with the kernel, the reason
//! and the engine to use instead, rather than discovered by a hung rack.
//!
//! Found, not assumed: the VM suite runs the same scenario on both guest kernels
//! (`tests/vm/passthru.rs`, `polled_media_error_rounds`).

use crate::engine::EngineChoice;

/// Polled NVMe passthrough (`IORING_SETUP_IOPOLL` with `IORING_OP_URING_CMD` on `/dev/ngXnY`)
/// before Linux 6.5: `nvme_ns_chr_uring_cmd_iopoll` polls the bio it remembered in the command
/// (`ioucmd->cookie`), and a command that completes with an error has that bio unmapped and
/// freed (`blk_rq_unmap_user`) before the next poll. The poll then dereferences freed memory:
/// a general protection fault in `bio_poll`, the submitting task stuck in
/// `io_uring_cancel_generic`, the host's I/O to that namespace wedged until reboot.
///
/// Reproduced on Debian's 6.1.0-57 (6.1.192) under QEMU's NVMe with blkdebug read errors: an
/// oops in the first 3 s soak; 15 soaks of 3 s on 6.12.95 ran clean. Upstream, Linux 6.5's
/// "nvme: improved uring polling" (Keith Busch) polls the request instead of a bio pointer;
/// the boundary is that release, not a bisected commit, so a distribution kernel older than
/// 6.5 with the rework backported is refused too (use the interrupt-driven engine there).
const CMD_POLL_SAFE_SINCE: (u32, u32) = (6, 5);

/// Why `engine` must not run on kernel `release`, or `None`. An unparsable release is not
/// refused (nothing known about it).
pub fn refusal(engine: EngineChoice, release: &str) -> Option<String> {
    let version = crate::util::host::parse_release(release)?;
    match engine {
        EngineChoice::IoUringCmdPoll if version < CMD_POLL_SAFE_SINCE => Some(format!(
            "Linux {release} can crash in bio_poll when a polled passthrough command fails (a \
             media error is enough: the kernel polls a bio it has already freed; fixed from Linux \
             {}.{}); use engine = \"io_uring_cmd\" for passthrough with interrupts, or \
             \"io_uring_poll\" for polled I/O on the block device",
            CMD_POLL_SAFE_SINCE.0, CMD_POLL_SAFE_SINCE.1
        )),
        _ => None,
    }
}

/// [`refusal`] on the running kernel.
pub fn refusal_here(engine: EngineChoice) -> Option<String> {
    refusal(engine, &crate::util::host::kernel_release()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polled_passthrough_is_refused_before_6_5_only() {
        let e = EngineChoice::IoUringCmdPoll;
        let msg = refusal(e, "6.1.0-57-cloud-amd64").expect("6.1 refused");
        assert!(
            msg.starts_with("Linux 6.1.0-57-cloud-amd64 can crash in bio_poll"),
            "{msg}"
        );
        assert!(msg.contains("engine = \"io_uring_cmd\""), "{msg}");
        assert!(msg.contains("from Linux 6.5"), "{msg}");
        assert!(refusal(e, "6.4.16").is_some());
        assert!(refusal(e, "5.19.0").is_some());
        assert_eq!(refusal(e, "6.5.0"), None);
        assert_eq!(refusal(e, "6.12.95+deb12-cloud-amd64"), None);
        assert_eq!(refusal(e, "7.0.1"), None);
        assert_eq!(refusal(e, "not-a-release"), None);
    }

    #[test]
    fn other_engines_are_not_refused_on_6_1() {
        for e in [
            EngineChoice::IoUring,
            EngineChoice::IoUringPoll,
            EngineChoice::IoUringCmd,
            EngineChoice::Psync,
            EngineChoice::Auto,
        ] {
            assert_eq!(refusal(e, "6.1.0-57-cloud-amd64"), None, "{e:?}");
        }
    }
}
