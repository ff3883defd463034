//! I/O engines, modelled on fio's `ioengines.h` ops table: `queue`, `commit`, `reap`, with
//! capability flags. `psync` completes inside `queue` (like fio's `engines/sync.c`); `null`
//! completes everything immediately and exists to test the worker loop (`engines/null.c`);
//! `uring` is one io_uring per worker with registered buffers and files; `passthru` sends NVMe
//! commands through io_uring to the namespace's generic device. Both are built on `ring`, the
//! ring, buffers, registrations and slots they share (and differ only in how they build an SQE
//! and read a CQE), and `ring` on `setup`, the set-up flags and their fallback ladder;
//! `pollcap` says whether a device can poll.
//!
//! The engine is chosen once, at setup ([`open`]); the hot loop never re-decides.
//!
//! Architecture Invariant: engines own their I/O buffers (aligned, allocated once at setup);
//! the hot path does not allocate.

pub mod buf;
pub mod kernelbugs;
pub mod null;
pub mod passthru;
pub mod pollcap;
pub mod psync;
mod ring;
pub mod setup;
pub mod uring;

use std::os::fd::OwnedFd;
use std::sync::Arc;

use thiserror::Error;

use crate::model::op::{EngineChoice, Op};

/// One I/O to queue. `buf` indexes the engine's buffer table (`0..EngineSetup::buffers`).
#[derive(Debug, Clone, Copy)]
pub struct IoReq {
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    pub buf: u16,
    /// Returned unchanged in the completion.
    pub user_data: u64,
}

/// A finished I/O. `result` is the byte count (>= 0) or `-errno`; the passthrough engine hands
/// up a command's NVMe status as `-(NVME_STATUS_ERRNO_BASE + status)` ([`nvme_status`]).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub user_data: u64,
    pub result: i32,
}

/// NVMe statuses ride above every errno (Linux's errnos end at 4095).
pub const NVME_STATUS_ERRNO_BASE: i32 = 4096;

/// The NVMe status (SCT in bits 10:8, SC in 7:0) an "errno" carries, if it carries one.
#[inline]
pub fn nvme_status(errno: i32) -> Option<u16> {
    (NVME_STATUS_ERRNO_BASE..NVME_STATUS_ERRNO_BASE + 0x800)
        .contains(&errno)
        .then(|| (errno - NVME_STATUS_ERRNO_BASE) as u16)
}

/// The errno Linux's block layer gives an I/O that failed with NVMe `status`
/// (`nvme_error_status`): `ENODATA` (BLK_STS_MEDIUM) for the media errors (write fault,
/// unrecovered read error, access denied, unwritten block), `EIO` otherwise. A passthrough
/// failure counts under this errno too, so errors read the same on every engine.
pub fn block_errno(status: u16) -> i32 {
    match (
        crate::nvme::status_sct(status),
        crate::nvme::status_sc(status),
    ) {
        (2, 0x80 | 0x81 | 0x86 | 0x87) => libc::ENODATA,
        _ => libc::EIO,
    }
}

/// How a failed I/O's status reads in logs: the errno's name, or `NVMe status sct 0x2 sc
/// 0x81 (unrecovered read error)`.
pub fn describe_error(errno: i32) -> String {
    match nvme_status(errno) {
        Some(s) => format!(
            "NVMe status sct {:#x} sc {:#x} ({})",
            crate::nvme::status_sct(s),
            crate::nvme::status_sc(s),
            crate::nvme::status_name(s)
        ),
        None => std::io::Error::from_raw_os_error(errno).to_string(),
    }
}

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("io_uring setup failed: {0}")]
    UringSetup(std::io::Error),
    #[error(
        "io_uring is not available here ({0}); set engine = \"psync\" or leave engine unset to fall back"
    )]
    UringRefused(std::io::Error),
    #[error("registering buffers or files with io_uring failed: {0}")]
    Register(std::io::Error),
    #[error("allocating {bytes} bytes of aligned I/O buffers failed")]
    Alloc { bytes: usize },
    #[error("submitting I/O failed: {0}")]
    Submit(std::io::Error),
    #[error("waiting for completions failed: {0}")]
    Reap(std::io::Error),
    #[error("engine queue is full (depth {0})")]
    QueueFull(u32),
    #[error(
        "polled I/O (engine = \"{}\") cannot be used here: {refusal}; use engine = \"{}\" for interrupt-driven completions",
        engine.as_str(), interrupt_twin(*engine).as_str()
    )]
    PollUnsupported {
        engine: EngineChoice,
        #[source]
        refusal: pollcap::PollRefusal,
    },
    #[error(
        "NVMe passthrough (engine = \"io_uring_cmd\" or \"io_uring_cmd_poll\") cannot be used here: {0}; use engine = \"io_uring\" for the block device path"
    )]
    PassthruUnsupported(#[source] passthru::PassthruRefusal),
    #[error("engine = \"{}\" is refused on this kernel: {reason}", engine.as_str())]
    KernelBug {
        engine: EngineChoice,
        reason: String,
    },
}

/// The interrupt-driven engine of a polled one (what to use where polling is refused).
pub fn interrupt_twin(e: EngineChoice) -> EngineChoice {
    match e {
        EngineChoice::IoUringPoll => EngineChoice::IoUring,
        EngineChoice::IoUringCmdPoll => EngineChoice::IoUringCmd,
        other => other,
    }
}

/// Capability flags.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caps {
    /// `queue` completes the I/O synchronously; `reap` only returns what `queue` finished.
    pub sync: bool,
    /// Uses registered (fixed) buffers and files.
    pub fixed: bool,
}

pub trait IoEngine: Send {
    /// `io_uring`, `psync` or `null`.
    fn name(&self) -> &'static str;
    fn caps(&self) -> Caps;
    /// The buffer for slot `idx`, `max_bs` bytes long and aligned for O_DIRECT (4096).
    fn buffer(&mut self, idx: u16) -> &mut [u8];
    /// Queue one I/O. Engines with `caps().sync` perform it here.
    fn queue(&mut self, req: IoReq) -> Result<(), EngineError>;
    /// Submit everything queued since the last commit (batched submission).
    fn commit(&mut self) -> Result<(), EngineError>;
    /// Wait until at least `min` completions are available (0: don't wait), append them to
    /// `out`, return how many were appended. With `min > 0` this also submits whatever is
    /// queued (one `io_uring_enter` for both), so a caller about to wait need not `commit` first.
    ///
    /// `out` must have spare capacity for every I/O in flight; engines never grow it.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, EngineError>;
    /// Submit what is queued and wait up to `timeout` for at least one completion. Used by the
    /// rate limiter when it is ahead of schedule. Sync engines have nothing in flight, so the
    /// default just sleeps.
    fn reap_timeout(
        &mut self,
        timeout: std::time::Duration,
        out: &mut Vec<Completion>,
    ) -> Result<usize, EngineError> {
        self.commit()?;
        let n = self.reap(0, out)?;
        if n > 0 {
            return Ok(n);
        }
        std::thread::sleep(timeout);
        self.reap(0, out)
    }
}

/// Everything an engine needs at setup.
#[derive(Debug, Clone)]
pub struct EngineSetup {
    /// The target's open file descriptor, shared: the engine holds it open for its own life
    /// (and its ring's registered file), whatever the caller does with its copy.
    pub fd: Arc<OwnedFd>,
    /// Most I/Os the caller keeps in flight.
    pub iodepth: u32,
    /// Number of I/O buffers (at least `iodepth`; the worker uses `2 * iodepth` for mixed jobs
    /// so that reads never overwrite the data pattern of write buffers).
    pub buffers: u32,
    /// Largest block size the job uses; each buffer is this big.
    pub max_bs: u32,
    /// The passthrough engines: the generic device of `fd`'s namespace, resolved once for
    /// every engine opened on `fd` ([`passthru::SharedNode`]). `None`: the engine resolves it
    /// itself. Other engines ignore it.
    pub passthru: Option<passthru::SharedNode>,
}

/// Open the engine for `choice`. `Auto` tries io_uring and falls back to psync when the kernel
/// refuses it (EPERM, ENOSYS, seccomp), logging why. Explicit `IoUring` makes that an error.
pub fn open(choice: EngineChoice, setup: EngineSetup) -> Result<Box<dyn IoEngine>, EngineError> {
    match choice {
        EngineChoice::Null => Ok(Box::new(null::NullEngine::new(setup)?)),
        EngineChoice::Psync => Ok(Box::new(psync::PsyncEngine::new(setup)?)),
        EngineChoice::IoUring => Ok(Box::new(uring::UringEngine::new(setup)?)),
        EngineChoice::IoUringPoll => {
            pollcap::check(std::path::Path::new("/sys"), &*setup.fd).map_err(|refusal| {
                EngineError::PollUnsupported {
                    engine: choice,
                    refusal,
                }
            })?;
            let opts = uring::UringOptions {
                iopoll: true,
                ..Default::default()
            };
            Ok(Box::new(uring::UringEngine::with_options(setup, opts)?))
        }
        EngineChoice::IoUringCmd => Ok(Box::new(passthru::PassthruEngine::new(setup)?)),
        EngineChoice::IoUringCmdPoll => {
            if let Some(reason) = kernelbugs::refusal_here(choice) {
                return Err(EngineError::KernelBug {
                    engine: choice,
                    reason,
                });
            }
            // The generic device shares the namespace's request queue, so the block device's
            // `queue/io_poll` says whether its passthrough commands can be polled.
            pollcap::check(std::path::Path::new("/sys"), &*setup.fd).map_err(|refusal| {
                EngineError::PollUnsupported {
                    engine: choice,
                    refusal,
                }
            })?;
            Ok(Box::new(passthru::PassthruEngine::polled(setup)?))
        }
        EngineChoice::Auto => match uring::UringEngine::new(setup.clone()) {
            Ok(e) => Ok(Box::new(e)),
            Err(EngineError::UringRefused(err)) => {
                tracing::warn!(error = %err, "io_uring refused by the kernel; falling back to psync");
                Ok(Box::new(psync::PsyncEngine::new(setup)?))
            }
            Err(e) => Err(e),
        },
    }
}
