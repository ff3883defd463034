//! io_uring engine on the block path: one ring per worker (created in the worker thread), the
//! target fd registered as fixed file 0, the aligned buffers registered as fixed buffers,
//! batched submission (`queue` only fills SQEs, `commit` or a waiting `reap` enters the kernel
//! once). The ring itself, its buffers, registrations, slots and teardown are
//! [`super::ring::Ring`]'s, shared with the passthrough engine; this engine builds
//! `Read`/`Write` (or `ReadFixed`/`WriteFixed`) SQEs and hands CQE results up as they are.
//!
//! The ring's set-up flags and their fallback ladder are [`super::setup`]'s. When registering
//! the buffers fails (`ENOMEM` from `RLIMIT_MEMLOCK`) the engine keeps going with plain
//! `Read`/`Write` opcodes on unregistered buffers.
//!
//! Registered ring descriptor (`IORING_REGISTER_RING_FDS`, `IORING_ENTER_REGISTERED_RING`): not
//! used. In io-uring 0.7.16 (Cargo.lock) `Submitter::register_ring_fd` records the registered
//! index in that `Submitter` value only (`enter_ring_fd`, submit.rs), and `IoUring::submitter()`
//! builds a fresh `Submitter` with `enter_ring_fd = -1` on every call (lib.rs), which is what
//! `submit_and_wait` and `submit_with_args` go through; so the registration would not reach
//! any later enter. Keeping one registered `Submitter` means storing a value borrowing the ring
//! beside the ring (self-referential), and passing `EnterFlags::REGISTERED_RING` to
//! `Submitter::enter` by hand sends the raw descriptor with it (wrong). Left until the crate
//! keeps the registration on the ring.
//!
//! Architecture Invariant: `queue`, `commit` and `reap` never allocate; `reap` pushes into the
//! caller's preallocated vector only.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::ring::Ring;
use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq};
use crate::model::op::Op;

pub struct UringEngine {
    // Declared first: it drains (or leaks its buffers) before the target's descriptor closes.
    ring: Ring<squeue::Entry, io_uring::cqueue::Entry>,
    fd: Arc<OwnedFd>,
}

/// Registration choices; both on by default. Turning them off exercises the fallbacks taken
/// when the kernel refuses registration.
#[derive(Debug, Clone, Copy)]
pub struct UringOptions {
    pub register_file: bool,
    pub register_buffers: bool,
    /// Polled completions (`IORING_SETUP_IOPOLL`): the caller has checked that the device
    /// polls (`engine::pollcap`); reaping busy-polls the device instead of sleeping.
    pub iopoll: bool,
}

impl Default for UringOptions {
    fn default() -> Self {
        UringOptions {
            register_file: true,
            register_buffers: true,
            iopoll: false,
        }
    }
}

/// A block-path CQE's `res` is already the byte count or `-errno`.
fn block_result(res: i32, _len: u32) -> i32 {
    res
}

impl UringEngine {
    pub fn new(s: EngineSetup) -> Result<Self, EngineError> {
        Self::with_options(s, UringOptions::default())
    }

    pub fn with_options(s: EngineSetup, opts: UringOptions) -> Result<Self, EngineError> {
        super::setup::refuse_if_disabled()?;
        let mut ring = Ring::new(
            &s,
            opts.iopoll,
            "io_uring: I/O still in flight at teardown; leaking its buffers",
        )?;
        if opts.register_file
            && let Err(e) = ring.register_file(s.fd.as_fd())
        {
            tracing::info!(error = %e, "io_uring: registering the target fd failed; using it unregistered");
        }
        if opts.register_buffers
            && let Err(e) = ring.register_buffers()
        {
            let bytes = ring.buf_size() * s.buffers.max(s.iodepth.max(1)) as usize;
            tracing::info!(error = %e, bytes,
                "io_uring: registering I/O buffers failed (RLIMIT_MEMLOCK?); using plain read/write");
        }
        Ok(UringEngine { ring, fd: s.fd })
    }

    /// Setup flags the kernel accepted (e.g. `single_issuer,coop_taskrun,cqsize`).
    pub fn setup_flags(&self) -> &'static str {
        self.ring.setup_flags()
    }
    /// Whether buffers are registered (`ReadFixed`/`WriteFixed`).
    pub fn fixed_buffers(&self) -> bool {
        self.ring.fixed_buffers()
    }
    /// Whether the fd is registered (`types::Fixed(0)`).
    pub fn fixed_file(&self) -> bool {
        self.ring.fixed_file()
    }
}

/// The SQE for `req` with its buffer at `p`: `ReadFixed`/`WriteFixed` on registered buffers,
/// `Read`/`Write` otherwise, on fixed file 0 or the raw descriptor `fd`.
fn block_sqe(
    req: &IoReq,
    p: *mut u8,
    fixed_bufs: bool,
    fixed_file: bool,
    fd: i32,
) -> squeue::Entry {
    let (len, off, idx) = (req.len, req.offset, req.buf);
    macro_rules! build {
        ($fd:expr) => {
            match (req.op, fixed_bufs) {
                (Op::Read, true) => opcode::ReadFixed::new($fd, p, len, idx).offset(off).build(),
                (Op::Write, true) => opcode::WriteFixed::new($fd, p, len, idx)
                    .offset(off)
                    .build(),
                (Op::Read, false) => opcode::Read::new($fd, p, len).offset(off).build(),
                (Op::Write, false) => opcode::Write::new($fd, p, len).offset(off).build(),
            }
        };
    }
    if fixed_file {
        build!(types::Fixed(0))
    } else {
        build!(types::Fd(fd))
    }
}

impl IoEngine for UringEngine {
    fn name(&self) -> &'static str {
        if self.ring.iopoll() {
            "io_uring_poll"
        } else {
            "io_uring"
        }
    }
    fn caps(&self) -> Caps {
        Caps {
            sync: false,
            fixed: self.ring.fixed_buffers() && self.ring.fixed_file(),
        }
    }
    fn buffer(&mut self, idx: u16) -> &mut [u8] {
        self.ring.buffer(idx)
    }
    fn queue(&mut self, req: IoReq) -> Result<(), EngineError> {
        let (fixed_bufs, fixed_file) = (self.ring.fixed_buffers(), self.ring.fixed_file());
        let fd = self.fd.as_raw_fd();
        self.ring
            .queue(&req, |p| Ok(block_sqe(&req, p, fixed_bufs, fixed_file, fd)))
    }
    fn commit(&mut self) -> Result<(), EngineError> {
        self.ring.commit()
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, EngineError> {
        self.ring.reap(min, out, block_result)
    }
    fn reap_timeout(
        &mut self,
        timeout: Duration,
        out: &mut Vec<Completion>,
    ) -> Result<usize, EngineError> {
        self.ring.reap_timeout(timeout, out, block_result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;

    /// A shared descriptor of `f` for an [`EngineSetup`].
    fn fd_of(f: &std::fs::File) -> Arc<OwnedFd> {
        Arc::new(f.try_clone().expect("dup").into())
    }

    fn scratch_file(len: usize) -> (tempfile::NamedTempFile, std::fs::File) {
        let mut f = tempfile::Builder::new()
            .prefix("nvsoak-uring-")
            .tempfile_in("/dev/shm")
            .or_else(|_| tempfile::NamedTempFile::new())
            .expect("temp file");
        let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).expect("fill");
        f.flush().expect("flush");
        let g = f.reopen().expect("reopen");
        (f, g)
    }

    /// `engine = "io_uring_poll"` opens only where the device polls, and says why not
    /// elsewhere (a file on /dev/shm: tmpfs is no block device; on most hosts' disks: no
    /// poll queues). The polled path itself runs in the VM (`tests/vm/poll.rs`).
    #[test]
    fn polled_engine_opens_only_where_the_device_polls() {
        let (_t, f) = scratch_file(1 << 16);
        let setup = EngineSetup {
            fd: fd_of(&f),
            iodepth: 2,
            buffers: 2,
            max_bs: 4096,
            passthru: None,
        };
        let can = crate::engine::pollcap::check(std::path::Path::new("/sys"), &f);
        match (
            crate::engine::open(crate::model::op::EngineChoice::IoUringPoll, setup),
            can,
        ) {
            (Err(EngineError::PollUnsupported { engine, refusal }), Err(want)) => {
                assert_eq!(refusal, want);
                let msg = EngineError::PollUnsupported { engine, refusal }.to_string();
                assert!(msg.contains("engine = \"io_uring_poll\""), "{msg}");
                assert!(msg.contains("engine = \"io_uring\""), "{msg}");
            }
            (Ok(e), Ok(())) => assert_eq!(e.name(), "io_uring_poll"),
            (Ok(_), Err(why)) => panic!("opened although the device does not poll: {why}"),
            (Err(e), _) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn reads_and_writes_round_trip() {
        let (_t, f) = scratch_file(1 << 16);
        let mut e = UringEngine::new(EngineSetup {
            fd: fd_of(&f),
            iodepth: 4,
            buffers: 4,
            max_bs: 4096,
            passthru: None,
        })
        .expect("io_uring engine");
        assert!(e.fixed_file());
        e.buffer(1).fill(0x5a);
        e.queue(IoReq {
            op: Op::Write,
            offset: 8192,
            len: 4096,
            buf: 1,
            user_data: 11,
        })
        .unwrap();
        e.queue(IoReq {
            op: Op::Read,
            offset: 0,
            len: 4096,
            buf: 0,
            user_data: 7,
        })
        .unwrap();
        let mut out = Vec::with_capacity(8);
        let mut got = 0;
        while got < 2 {
            got += e.reap(1, &mut out).unwrap();
        }
        out.sort_by_key(|c| c.user_data);
        assert_eq!(out[0].user_data, 7);
        assert_eq!(out[0].result, 4096);
        assert_eq!(out[1].user_data, 11);
        assert_eq!(out[1].result, 4096);
        assert_eq!(e.buffer(0)[..4], [0, 1, 2, 3]);
        // The write landed.
        e.queue(IoReq {
            op: Op::Read,
            offset: 8192,
            len: 4096,
            buf: 2,
            user_data: 3,
        })
        .unwrap();
        out.clear();
        while e.reap(1, &mut out).unwrap() == 0 {}
        assert!(e.buffer(2).iter().all(|b| *b == 0x5a));
    }

    #[test]
    fn unregistered_fallback_does_real_io() {
        let (_t, f) = scratch_file(1 << 16);
        let mut e = UringEngine::with_options(
            EngineSetup {
                fd: fd_of(&f),
                iodepth: 2,
                buffers: 2,
                max_bs: 4096,
                passthru: None,
            },
            UringOptions {
                register_file: false,
                register_buffers: false,
                iopoll: false,
            },
        )
        .unwrap();
        assert!(!e.fixed_buffers() && !e.fixed_file());
        assert!(!e.caps().fixed);
        e.buffer(0).fill(0xc3);
        e.queue(IoReq {
            op: Op::Write,
            offset: 4096,
            len: 4096,
            buf: 0,
            user_data: 1,
        })
        .unwrap();
        let mut out = Vec::with_capacity(4);
        while e.reap(1, &mut out).unwrap() == 0 {}
        assert_eq!(out[0].result, 4096);
        e.queue(IoReq {
            op: Op::Read,
            offset: 4096,
            len: 4096,
            buf: 1,
            user_data: 2,
        })
        .unwrap();
        out.clear();
        while e.reap(1, &mut out).unwrap() == 0 {}
        assert_eq!((out[0].user_data, out[0].result), (2, 4096));
        assert!(e.buffer(1).iter().all(|b| *b == 0xc3));
    }

    #[test]
    fn errors_come_back_as_negative_errno() {
        let (_t, f) = scratch_file(4096);
        let ro = std::fs::File::open(_t.path()).unwrap();
        drop(f);
        let mut e = UringEngine::new(EngineSetup {
            fd: fd_of(&ro),
            iodepth: 2,
            buffers: 2,
            max_bs: 4096,
            passthru: None,
        })
        .unwrap();
        e.queue(IoReq {
            op: Op::Write,
            offset: 0,
            len: 4096,
            buf: 0,
            user_data: 1,
        })
        .unwrap();
        let mut out = Vec::with_capacity(4);
        while e.reap(1, &mut out).unwrap() == 0 {}
        assert_eq!(out[0].result, -libc::EBADF);
    }

    #[test]
    fn reap_timeout_returns_when_idle() {
        let (_t, f) = scratch_file(4096);
        let mut e = UringEngine::new(EngineSetup {
            fd: fd_of(&f),
            iodepth: 2,
            buffers: 2,
            max_bs: 4096,
            passthru: None,
        })
        .unwrap();
        let mut out = Vec::with_capacity(4);
        let t = Instant::now();
        assert_eq!(
            e.reap_timeout(Duration::from_millis(20), &mut out).unwrap(),
            0
        );
        assert!(t.elapsed() >= Duration::from_millis(15));
    }

    #[test]
    fn this_kernel_takes_the_optimised_flags() {
        // io_uring_disabled is 0 on the test machines and the kernel is recent.
        let (_t, f) = scratch_file(4096);
        let e = UringEngine::new(EngineSetup {
            fd: fd_of(&f),
            iodepth: 32,
            buffers: 32,
            max_bs: 4096,
            passthru: None,
        })
        .unwrap();
        assert!(e.fixed_buffers() && e.fixed_file());
        assert!(
            e.setup_flags().contains("single_issuer"),
            "{}",
            e.setup_flags()
        );
    }

    #[test]
    fn rejects_out_of_range_buffer() {
        let (_t, f) = scratch_file(4096);
        let mut e = UringEngine::new(EngineSetup {
            fd: fd_of(&f),
            iodepth: 2,
            buffers: 2,
            max_bs: 4096,
            passthru: None,
        })
        .unwrap();
        let r = e.queue(IoReq {
            op: Op::Read,
            offset: 0,
            len: 4096,
            buf: 2,
            user_data: 0,
        });
        assert!(matches!(r, Err(EngineError::Submit(_))));
        let r = e.queue(IoReq {
            op: Op::Read,
            offset: 0,
            len: 8192,
            buf: 0,
            user_data: 0,
        });
        assert!(matches!(r, Err(EngineError::Submit(_))));
    }
}
