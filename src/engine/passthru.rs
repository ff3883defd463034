//! NVMe passthrough through io_uring (`engine = "io_uring_cmd"`, fio's `io_uring_cmd` engine
//! with `cmd_type=nvme`): `IORING_OP_URING_CMD` with NVMe Read (02h) and Write (01h) commands
//! on the namespace's generic character device `/dev/ngXnY` (Linux 5.19+), on a ring set up
//! with `IORING_SETUP_SQE128 | IORING_SETUP_CQE32`. The block layer is skipped, and each
//! command's NVMe status comes back as it is: a CQE `res` > 0 is the status field (SCT, SC),
//! which the engine hands up as `-(NVME_STATUS_ERRNO_BASE + status)` (see
//! [`super::nvme_status`]).
//!
//! Write safety: the engine is given the target's *block device* descriptor, which the
//! scheduler opened through `safety::claim_block` (every check made on it, held `O_EXCL`). From
//! that descriptor the generic device is found and checked ([`node`]: fstat →
//! `/sys/dev/block/M:m` → the namespace's `ngXnY` sibling → its `dev` number; `/dev/ngXnY`
//! opened and its descriptor checked to be a character device with exactly that number, whose
//! sysfs entry sits beside the block device's), once per target descriptor when the setup
//! carries the target's [`SharedNode`] (`EngineSetup::passthru`), else by each engine. The
//! engine keeps the block descriptor, and so the `O_EXCL` hold, for its own life.
//!
//! The ring, its buffers, registrations, slots and teardown are [`super::ring::Ring`]'s
//! (with 128-byte SQEs and 32-byte CQEs); this engine builds the `URING_CMD` SQEs and reads
//! each CQE's `res` as above.
//!
//! Architecture Invariant: `queue`, `commit` and `reap` never allocate.

mod node;

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types};

pub use self::node::{
    Namespace, PassthruNode, PassthruRefusal, SharedNode, check_generic, generic_name,
    generic_node_hint, namespace_at, namespace_of, namespace_of_generic, open_generic,
};
use super::ring::{DROP_DRAIN, Ring};
use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq};
use crate::model::op::Op;

/// `NVME_URING_CMD_IO`: `_IOWR('N', 0x80, struct nvme_uring_cmd)` (72 bytes).
pub const NVME_URING_CMD_IO: u32 = (3 << 30) | (72 << 16) | ((b'N' as u32) << 8) | 0x80;
/// NVM command set opcodes.
pub const NVME_CMD_WRITE: u8 = 0x01;
pub const NVME_CMD_READ: u8 = 0x02;

/// The 80 command bytes of `struct nvme_uring_cmd` for an NVM Read or Write of `len` bytes at
/// byte `offset` into `addr`; `None` when they are not whole logical blocks (or too many).
pub fn nvme_rw_cmd(
    op: Op,
    nsid: u32,
    lba_shift: u32,
    offset: u64,
    len: u32,
    addr: u64,
) -> Option<[u8; 80]> {
    let mask = (1u64 << lba_shift) - 1;
    if len == 0 || offset & mask != 0 || u64::from(len) & mask != 0 {
        return None;
    }
    let slba = offset >> lba_shift;
    let nlb = (u64::from(len) >> lba_shift) - 1;
    let nlb = u16::try_from(nlb).ok()?;
    let mut c = [0u8; 80];
    c[0] = match op {
        Op::Read => NVME_CMD_READ,
        Op::Write => NVME_CMD_WRITE,
    };
    c[4..8].copy_from_slice(&nsid.to_le_bytes());
    // cdw2, cdw3, metadata stay 0.
    c[24..32].copy_from_slice(&addr.to_le_bytes());
    // metadata_len 0.
    c[36..40].copy_from_slice(&len.to_le_bytes());
    c[40..44].copy_from_slice(&(slba as u32).to_le_bytes()); // cdw10: SLBA low
    c[44..48].copy_from_slice(&((slba >> 32) as u32).to_le_bytes()); // cdw11: SLBA high
    c[48..52].copy_from_slice(&u32::from(nlb).to_le_bytes()); // cdw12: NLB, 0's based
    Some(c)
}

/// What the engine hands up for a CQE's `res` of a command of `len` bytes: the byte count on
/// success, `-errno`, or an NVMe status folded above the errno range.
pub fn completion_result(res: i32, len: u32) -> i32 {
    match res {
        0 => len as i32,
        r if r < 0 => r,
        status => -(super::NVME_STATUS_ERRNO_BASE + (status & 0x7ff)),
    }
}

pub struct PassthruEngine {
    // Declared first: it drains (or leaks its buffers) before the descriptors close.
    ring: Ring<squeue::Entry128, cqueue::Entry32>,
    /// The claimed block device (held `O_EXCL` by the claim) for the engine's life.
    _block: Arc<OwnedFd>,
    /// The generic device the commands go to, and its namespace.
    node: Arc<PassthruNode>,
    lba_shift: u32,
}

impl PassthruEngine {
    pub fn new(s: EngineSetup) -> Result<Self, EngineError> {
        Self::open_at(s, Path::new("/sys"), Path::new("/dev"), false)
    }

    /// `engine = "io_uring_cmd_poll"`: the caller has checked that the namespace polls
    /// (`engine::pollcap`). One polled read of the first logical block proves the kernel polls
    /// passthrough commands (Linux 6.1+; older ones fail it with `EOPNOTSUPP`).
    pub fn polled(s: EngineSetup) -> Result<Self, EngineError> {
        let mut e = Self::open_at(s, Path::new("/sys"), Path::new("/dev"), true)?;
        e.probe()?;
        Ok(e)
    }

    /// The engine on the generic device of the block device `s.fd`, resolved under `sys` and
    /// `dev` (through `s.passthru` when the setup carries the target's [`SharedNode`], else
    /// here), polled with `iopoll`.
    pub fn open_at(
        s: EngineSetup,
        sys: &Path,
        dev: &Path,
        iopoll: bool,
    ) -> Result<Self, EngineError> {
        super::setup::refuse_if_disabled()?;
        let node = match &s.passthru {
            Some(shared) => shared.get_or_open(sys, dev, &*s.fd),
            None => PassthruNode::open(sys, dev, &*s.fd).map(Arc::new),
        }
        .map_err(EngineError::PassthruUnsupported)?;
        let ns = &node.ns;
        if !s.max_bs.is_multiple_of(ns.lba_size) {
            return Err(EngineError::PassthruUnsupported(
                PassthruRefusal::Unaligned {
                    max_bs: s.max_bs,
                    lba: ns.lba_size,
                },
            ));
        }
        if u64::from(s.max_bs) > ns.max_transfer {
            return Err(EngineError::PassthruUnsupported(
                PassthruRefusal::TooLarge {
                    max_bs: s.max_bs,
                    max: ns.max_transfer,
                },
            ));
        }
        let mut ring = Ring::new(
            &s,
            iopoll,
            "io_uring_cmd: commands still in flight at teardown; leaking their buffers",
        )?;
        if let Err(e) = ring.register_file(node.ng.as_fd()) {
            tracing::info!(error = %e, "io_uring_cmd: registering the generic device failed; using it unregistered");
        }
        if let Err(e) = ring.register_buffers() {
            tracing::info!(error = %e, "io_uring_cmd: registering I/O buffers failed; passing plain addresses");
        }
        tracing::debug!(block = %ns.block, generic = %ns.generic, nsid = ns.nsid, lba = ns.lba_size,
            flags = ring.setup_flags(), "io_uring_cmd: NVMe passthrough on the generic device");
        Ok(PassthruEngine {
            ring,
            _block: s.fd,
            lba_shift: ns.lba_size.trailing_zeros(),
            node,
        })
    }

    /// One polled read of the first logical block into buffer 0, before the workload uses
    /// the buffers: `Ok` when it completes, refused when the kernel cannot poll the command.
    fn probe(&mut self) -> Result<(), EngineError> {
        let len = self.node.ns.lba_size.min(self.ring.buf_size() as u32);
        self.queue(IoReq {
            op: Op::Read,
            offset: 0,
            len,
            buf: 0,
            user_data: u64::MAX,
        })?;
        let mut out = Vec::with_capacity(self.ring.slots());
        let deadline = Instant::now() + DROP_DRAIN;
        while out.is_empty() && Instant::now() < deadline {
            self.reap(1, &mut out)?;
        }
        match out.first().map(|c| c.result) {
            Some(r) if r == len as i32 => Ok(()),
            Some(r) => Err(EngineError::PassthruUnsupported(
                PassthruRefusal::NoPolledCommands(super::describe_error(-r)),
            )),
            None => Err(EngineError::PassthruUnsupported(
                PassthruRefusal::NoPolledCommands(format!(
                    "nothing within {} s",
                    DROP_DRAIN.as_secs()
                )),
            )),
        }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.node.ns
    }
    pub fn setup_flags(&self) -> &'static str {
        self.ring.setup_flags()
    }
    pub fn fixed_buffers(&self) -> bool {
        self.ring.fixed_buffers()
    }
}

/// The `IORING_OP_URING_CMD` SQE for `req`, whose buffer is at `p`: an NVM Read or Write on the
/// generic device (fixed file 0 or the raw descriptor `ng`), naming the registered buffer when
/// `fixed_bufs`.
fn cmd_sqe(
    req: &IoReq,
    p: *mut u8,
    ns: &Namespace,
    lba_shift: u32,
    (fixed_bufs, fixed_file, ng): (bool, bool, i32),
) -> Result<squeue::Entry128, EngineError> {
    let Some(cmd) = nvme_rw_cmd(req.op, ns.nsid, lba_shift, req.offset, req.len, p as u64) else {
        return Err(EngineError::Submit(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} bytes at offset {} are not whole {}-byte logical blocks",
                req.len, req.offset, ns.lba_size
            ),
        )));
    };
    let mut b = if fixed_file {
        opcode::UringCmd80::new(types::Fixed(0), NVME_URING_CMD_IO)
    } else {
        opcode::UringCmd80::new(types::Fd(ng), NVME_URING_CMD_IO)
    }
    .cmd(cmd);
    if fixed_bufs {
        b = b.buf_index(Some(req.buf));
    }
    Ok(b.build())
}

impl IoEngine for PassthruEngine {
    fn name(&self) -> &'static str {
        if self.ring.iopoll() {
            "io_uring_cmd_poll"
        } else {
            "io_uring_cmd"
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
        let how = (
            self.ring.fixed_buffers(),
            self.ring.fixed_file(),
            self.node.ng.as_raw_fd(),
        );
        let (ns, shift) = (&self.node.ns, self.lba_shift);
        self.ring.queue(&req, |p| cmd_sqe(&req, p, ns, shift, how))
    }
    fn commit(&mut self) -> Result<(), EngineError> {
        self.ring.commit()
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, EngineError> {
        self.ring.reap(min, out, completion_result)
    }
    fn reap_timeout(
        &mut self,
        timeout: Duration,
        out: &mut Vec<Completion>,
    ) -> Result<usize, EngineError> {
        self.ring.reap_timeout(timeout, out, completion_result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_number_is_the_kernels() {
        // _IOWR('N', 0x80, struct nvme_uring_cmd) from linux/nvme_ioctl.h, as nix computes it.
        assert_eq!(
            NVME_URING_CMD_IO,
            nix::request_code_readwrite!(b'N', 0x80, 72) as u32
        );
        assert_eq!(NVME_URING_CMD_IO, 0xc048_4e80);
    }

    #[test]
    fn read_and_write_commands_carry_every_field_in_place() {
        let addr = 0x1122_3344_5566_7788u64;
        // 4 KiB LBAs, byte offset of LBA 0x1_0000_0005, 3 blocks.
        let off = 0x1_0000_0005u64 << 12;
        let c = nvme_rw_cmd(Op::Write, 0xa1b2_c3d4, 12, off, 3 << 12, addr).expect("aligned");
        assert_eq!(c[0], 0x01);
        assert_eq!(c[1..4], [0, 0, 0]);
        assert_eq!(c[4..8], 0xa1b2_c3d4u32.to_le_bytes());
        assert_eq!(c[8..24], [0; 16], "cdw2, cdw3, metadata");
        assert_eq!(c[24..32], addr.to_le_bytes());
        assert_eq!(c[32..36], [0; 4], "metadata_len");
        assert_eq!(c[36..40], (3u32 << 12).to_le_bytes(), "data_len");
        assert_eq!(c[40..44], 5u32.to_le_bytes(), "cdw10: SLBA low");
        assert_eq!(c[44..48], 1u32.to_le_bytes(), "cdw11: SLBA high");
        assert_eq!(c[48..52], 2u32.to_le_bytes(), "cdw12: NLB - 1");
        assert_eq!(c[52..80], [0; 28]);
        let r = nvme_rw_cmd(Op::Read, 1, 9, 512 * 7, 512, 0).expect("aligned");
        assert_eq!(r[0], 0x02);
        assert_eq!(r[40..44], 7u32.to_le_bytes());
        assert_eq!(r[48..52], 0u32.to_le_bytes());
    }

    #[test]
    fn unaligned_or_oversized_commands_are_not_built() {
        assert!(nvme_rw_cmd(Op::Read, 1, 12, 512, 4096, 0).is_none());
        assert!(nvme_rw_cmd(Op::Read, 1, 12, 0, 512, 0).is_none());
        assert!(nvme_rw_cmd(Op::Read, 1, 12, 0, 0, 0).is_none());
        // 65537 blocks do not fit the 16-bit NLB.
        assert!(nvme_rw_cmd(Op::Read, 1, 9, 0, 65537 * 512, 0).is_none());
        assert!(nvme_rw_cmd(Op::Read, 1, 9, 0, 65536 * 512, 0).is_some());
    }

    #[test]
    fn cqe_results_become_bytes_errno_or_nvme_status() {
        assert_eq!(completion_result(0, 4096), 4096);
        assert_eq!(completion_result(-libc::EIO, 4096), -libc::EIO);
        let r = completion_result(0x281, 4096);
        assert_eq!(super::super::nvme_status(-r), Some(0x281));
        // DNR and More bits are not part of the status code.
        let r = completion_result(0x4281, 4096);
        assert_eq!(super::super::nvme_status(-r), Some(0x281));
        assert_eq!(super::super::nvme_status(libc::EIO), None);
    }
}
