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
//! that descriptor it finds the generic device (fstat → `/sys/dev/block/M:m` → the namespace's
//! `ngXnY` sibling → its `dev` number), opens `/dev/ngXnY` and checks the opened descriptor
//! (`fstat`: a character device with exactly that number, whose sysfs entry sits beside the
//! block device's). It keeps the block descriptor, and so the `O_EXCL` hold, for its own life.
//!
//! Architecture Invariant: `queue`, `commit` and `reap` never allocate.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq, buf::AlignedBufs};
use crate::model::op::Op;

/// `NVME_URING_CMD_IO`: `_IOWR('N', 0x80, struct nvme_uring_cmd)` (72 bytes).
pub const NVME_URING_CMD_IO: u32 = (3 << 30) | (72 << 16) | ((b'N' as u32) << 8) | 0x80;
/// NVM command set opcodes.
pub const NVME_CMD_WRITE: u8 = 0x01;
pub const NVME_CMD_READ: u8 = 0x02;

const DROP_DRAIN: Duration = Duration::from_secs(30);

/// Why passthrough cannot be used on a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassthruRefusal {
    #[error("fstat failed: {0}")]
    Stat(String),
    #[error(
        "the target is not a block device; configure the NVMe namespace's block device (/dev/nvmeXnY)"
    )]
    NotBlock,
    #[error(
        "{0} is a partition; passthrough addresses the whole namespace, so configure the namespace itself"
    )]
    Partition(String),
    #[error("{0} is not an NVMe namespace (passthrough needs /dev/nvmeXnY)")]
    NotNvme(String),
    #[error(
        "{block} has no generic character device {ng} in sysfs (Linux 5.19 or later with CONFIG_NVME builds it; this kernel or driver does not)"
    )]
    NoGeneric { block: String, ng: String },
    #[error("cannot read {0}: {1}")]
    Unreadable(String, String),
    #[error(
        "character device {}:{} ({generic}) is no NVMe namespace's generic device: sysfs shows no block device beside it whose generic device it is",
        dev.0, dev.1
    )]
    NoNamespace { generic: String, dev: (u64, u64) },
    #[error("{path}: {why}")]
    NodeMismatch { path: String, why: String },
    #[error("opening {0} failed: {1}")]
    Open(String, String),
    #[error(
        "the largest block size, {max_bs} bytes, is not a multiple of the namespace's {lba} byte logical block"
    )]
    Unaligned { max_bs: u32, lba: u32 },
    #[error(
        "this kernel does not poll NVMe passthrough commands: a polled read of the first logical block completed with {0} (Linux 6.1 or later polls uring_cmd); use engine = \"io_uring_cmd\""
    )]
    NoPolledCommands(String),
    #[error(
        "the largest block size, {max_bs} bytes, exceeds the controller's largest transfer ({max} bytes, queue/max_hw_sectors_kb); passthrough commands are not split"
    )]
    TooLarge { max_bs: u32, max: u64 },
}

/// The namespace behind a block device, as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// `nvme0n1`.
    pub block: String,
    /// `ng0n1`.
    pub generic: String,
    /// The generic device's number.
    pub generic_dev: (u64, u64),
    /// Its sysfs directory (canonical).
    pub generic_sys: PathBuf,
    pub nsid: u32,
    /// Logical block size in bytes (a power of two).
    pub lba_size: u32,
    /// Largest transfer in bytes.
    pub max_transfer: u64,
}

fn read_trim(p: &Path) -> Result<String, PassthruRefusal> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| PassthruRefusal::Unreadable(p.display().to_string(), e.to_string()))
}

fn parse_num<T: std::str::FromStr>(p: &Path) -> Result<T, PassthruRefusal> {
    let s = read_trim(p)?;
    s.parse().map_err(|_| {
        PassthruRefusal::Unreadable(p.display().to_string(), format!("{s:?} is not a number"))
    })
}

/// `M:m` from a sysfs `dev` file.
fn parse_dev(p: &Path) -> Result<(u64, u64), PassthruRefusal> {
    let s = read_trim(p)?;
    let bad = || PassthruRefusal::Unreadable(p.display().to_string(), format!("{s:?} is not M:m"));
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
}

/// `nvme0n1` → `ng0n1`; `None` for anything that is not `nvme<digits>n<digits>`.
pub fn generic_name(block: &str) -> Option<String> {
    let rest = block.strip_prefix("nvme")?;
    let (c, n) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(c) && digits(n)).then(|| format!("ng{c}n{n}"))
}

/// The namespace behind the block device `fd` under `sys` (normally `/sys`).
pub fn namespace_of(sys: &Path, fd: &impl AsFd) -> Result<Namespace, PassthruRefusal> {
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFBLK {
        return Err(PassthruRefusal::NotBlock);
    }
    namespace_at(
        sys,
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    )
}

/// The namespace of block device `maj:min` under `sys`.
pub fn namespace_at(sys: &Path, maj: u64, min: u64) -> Result<Namespace, PassthruRefusal> {
    let link = sys.join(format!("dev/block/{maj}:{min}"));
    let dir = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    let block = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if dir.join("partition").exists() {
        return Err(PassthruRefusal::Partition(block));
    }
    let generic = generic_name(&block).ok_or_else(|| PassthruRefusal::NotNvme(block.clone()))?;
    // The generic device is the block device's sibling under the controller (or, with native
    // multipath, under the subsystem).
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let gdir = parent.join(&generic);
    if !gdir.join("dev").exists() {
        return Err(PassthruRefusal::NoGeneric { block, ng: generic });
    }
    let generic_sys = std::fs::canonicalize(&gdir)
        .map_err(|e| PassthruRefusal::Unreadable(gdir.display().to_string(), e.to_string()))?;
    let generic_dev = parse_dev(&gdir.join("dev"))?;
    let nsid = parse_num(&dir.join("nsid"))?;
    let lba_size: u32 = parse_num(&dir.join("queue/logical_block_size"))?;
    if !lba_size.is_power_of_two() || lba_size < 512 {
        return Err(PassthruRefusal::Unreadable(
            dir.join("queue/logical_block_size").display().to_string(),
            format!("{lba_size} is not a logical block size"),
        ));
    }
    let max_kb: u64 = parse_num(&dir.join("queue/max_hw_sectors_kb"))?;
    Ok(Namespace {
        block,
        generic,
        generic_dev,
        generic_sys,
        nsid,
        lba_size,
        max_transfer: max_kb * 1024,
    })
}

/// The namespace whose generic character device is `maj:min` (`/dev/ngXnY`), and its block
/// device's number, found through sysfs by device number: `/sys/dev/char/M:m` is the generic
/// device's entry; among its siblings, the block device whose namespace (by [`namespace_at`])
/// has exactly that generic device and entry is the one. Names are never taken on trust.
pub fn namespace_of_generic(
    sys: &Path,
    maj: u64,
    min: u64,
) -> Result<(Namespace, (u64, u64)), PassthruRefusal> {
    let link = sys.join(format!("dev/char/{maj}:{min}"));
    let gdir = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    let gname = gdir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = gdir.parent().map(Path::to_path_buf).unwrap_or_default();
    let entries = std::fs::read_dir(&parent)
        .map_err(|e| PassthruRefusal::Unreadable(parent.display().to_string(), e.to_string()))?;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(bdev) = parse_dev(&dir.join("dev")) else {
            continue;
        };
        // Only a block device whose /sys/dev/block entry is this very directory.
        let blink = sys.join(format!("dev/block/{}:{}", bdev.0, bdev.1));
        if std::fs::canonicalize(&blink).ok().as_deref()
            != std::fs::canonicalize(&dir).ok().as_deref()
        {
            continue;
        }
        if let Ok(ns) = namespace_at(sys, bdev.0, bdev.1)
            && ns.generic_dev == (maj, min)
            && ns.generic_sys == gdir
        {
            return Ok((ns, bdev));
        }
    }
    Err(PassthruRefusal::NoNamespace {
        generic: gname,
        dev: (maj, min),
    })
}

/// Check an opened generic device against the namespace found from the block device: a
/// character device, numbered as sysfs says, whose sysfs entry is the one found.
pub fn check_generic(
    sys: &Path,
    ns: &Namespace,
    path: &Path,
    fd: &impl AsFd,
) -> Result<(), PassthruRefusal> {
    let mismatch = |why: String| PassthruRefusal::NodeMismatch {
        path: path.display().to_string(),
        why,
    };
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return Err(mismatch("is not a character device".into()));
    }
    let dev = (
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    );
    if dev != ns.generic_dev {
        return Err(mismatch(format!(
            "is device {}:{}, but {}'s generic device is {}:{}",
            dev.0, dev.1, ns.block, ns.generic_dev.0, ns.generic_dev.1
        )));
    }
    let link = sys.join(format!("dev/char/{}:{}", dev.0, dev.1));
    let real = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    if real != ns.generic_sys {
        return Err(mismatch(format!(
            "sysfs places device {}:{} at {}, not beside {}",
            dev.0,
            dev.1,
            real.display(),
            ns.block
        )));
    }
    Ok(())
}

/// Open the generic device of the block device `block` (read-write when the block descriptor
/// was opened for writing) and check the opened descriptor.
pub fn open_generic(
    sys: &Path,
    dev_dir: &Path,
    block: &impl AsFd,
) -> Result<(Namespace, OwnedFd), PassthruRefusal> {
    let ns = namespace_of(sys, block)?;
    let fl = nix::fcntl::fcntl(block.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    let writable = fl & libc::O_ACCMODE != libc::O_RDONLY;
    let path = dev_dir.join(&ns.generic);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(writable)
        .open(&path)
        .map_err(|e| PassthruRefusal::Open(path.display().to_string(), e.to_string()))?;
    check_generic(sys, &ns, &path, &f)?;
    Ok((ns, f.into()))
}

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
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    bufs: Option<AlignedBufs>,
    buf_count: usize,
    buf_size: usize,
    base: *mut u8,
    /// The claimed block device (held `O_EXCL` by the claim) for the engine's life.
    _block: Arc<OwnedFd>,
    ng: OwnedFd,
    ns: Namespace,
    lba_shift: u32,
    fixed_file: bool,
    fixed_bufs: bool,
    ext_arg: bool,
    flags: &'static str,
    /// Polled completions (`IORING_SETUP_IOPOLL`, `engine = "io_uring_cmd_poll"`): they
    /// appear only while an enter polls for them.
    iopoll: bool,
    /// Per engine slot: the caller's user_data and the command's length; `free` the free slots.
    slot_ud: Vec<u64>,
    slot_len: Vec<u32>,
    free: Vec<u32>,
    inflight: usize,
}

// SAFETY: `base` points into `bufs`, which the engine owns; the ring is used from one thread at
// a time (the engine moves with its worker and is never shared).
unsafe impl Send for PassthruEngine {}

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

    pub fn open_at(
        s: EngineSetup,
        sys: &Path,
        dev: &Path,
        iopoll: bool,
    ) -> Result<Self, EngineError> {
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled");
        if disabled.is_ok_and(|v| v.trim() == "2") {
            return Err(EngineError::UringRefused(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "kernel.io_uring_disabled = 2",
            )));
        }
        let (ns, ng) = open_generic(sys, dev, &*s.fd).map_err(EngineError::PassthruUnsupported)?;
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
        let depth = s.iodepth.max(1);
        let entries = depth.next_power_of_two().min(32768);
        let (ring, flags) = super::uring::build_ring_with(entries, |b, n| {
            let mut b = b.clone();
            if iopoll {
                b.setup_iopoll();
            }
            b.build(n)
        })?;
        let count = s.buffers.max(depth) as usize;
        if count > u16::MAX as usize {
            return Err(EngineError::UringSetup(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} buffers exceed io_uring's buffer index range; lower iodepth"),
            )));
        }
        let mut bufs = AlignedBufs::new(count, s.max_bs as usize)?;
        let base = bufs.slice_mut(0).as_mut_ptr();
        let buf_size = bufs.size();
        let fixed_file = match ring.submitter().register_files(&[ng.as_raw_fd()]) {
            Ok(()) => true,
            Err(e) => {
                tracing::info!(error = %e, "io_uring_cmd: registering the generic device failed; using it unregistered");
                false
            }
        };
        let iovecs: Vec<libc::iovec> = (0..count)
            .map(|i| libc::iovec {
                iov_base: bufs.ptr(i).cast(),
                iov_len: buf_size,
            })
            .collect();
        // SAFETY: every iovec points into `bufs`, which lives as long as the ring: `Drop`
        // drains the ring (or leaks the buffers) before the memory is released.
        let fixed_bufs = match unsafe { ring.submitter().register_buffers(&iovecs) } {
            Ok(()) => true,
            Err(e) => {
                tracing::info!(error = %e, "io_uring_cmd: registering I/O buffers failed; passing plain addresses");
                false
            }
        };
        let ext_arg = ring.params().is_feature_ext_arg();
        let slots = entries.max(count as u32) as usize * 2;
        tracing::debug!(block = %ns.block, generic = %ns.generic, nsid = ns.nsid, lba = ns.lba_size,
            flags, "io_uring_cmd: NVMe passthrough on the generic device");
        Ok(PassthruEngine {
            ring,
            bufs: Some(bufs),
            buf_count: count,
            buf_size,
            base,
            _block: s.fd,
            ng,
            lba_shift: ns.lba_size.trailing_zeros(),
            ns,
            fixed_file,
            fixed_bufs,
            ext_arg,
            flags,
            iopoll,
            slot_ud: vec![0; slots],
            slot_len: vec![0; slots],
            free: (0..slots as u32).rev().collect(),
            inflight: 0,
        })
    }

    /// One polled read of the first logical block into buffer 0, before the workload uses
    /// the buffers: `Ok` when it completes, refused when the kernel cannot poll the command.
    fn probe(&mut self) -> Result<(), EngineError> {
        let len = self.ns.lba_size.min(self.buf_size as u32);
        self.queue(IoReq {
            op: Op::Read,
            offset: 0,
            len,
            buf: 0,
            user_data: u64::MAX,
        })?;
        let mut out = Vec::with_capacity(self.slot_ud.len());
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
        &self.ns
    }
    pub fn setup_flags(&self) -> &'static str {
        self.flags
    }
    pub fn fixed_buffers(&self) -> bool {
        self.fixed_bufs
    }

    fn mode(&self) -> super::ring::RingMode {
        super::ring::RingMode {
            ext_arg: self.ext_arg,
            iopoll: self.iopoll,
        }
    }

    fn enter(&mut self, want: usize) -> Result<(), EngineError> {
        super::ring::enter(&self.ring, self.mode(), want)
    }

    fn drain(&mut self, out: &mut Vec<Completion>) -> usize {
        let room = out.capacity() - out.len();
        let mut n = 0;
        let mut cq = self.ring.completion();
        while n < room {
            let Some(c) = cq.next() else { break };
            let slot = c.user_data() as usize;
            let (ud, len) = match (self.slot_ud.get(slot), self.slot_len.get(slot)) {
                (Some(u), Some(l)) => (*u, *l),
                _ => continue,
            };
            self.free.push(slot as u32);
            out.push(Completion {
                user_data: ud,
                result: completion_result(c.result(), len),
            });
            n += 1;
        }
        drop(cq);
        self.inflight = self.inflight.saturating_sub(n);
        n
    }
}

impl IoEngine for PassthruEngine {
    fn name(&self) -> &'static str {
        if self.iopoll {
            "io_uring_cmd_poll"
        } else {
            "io_uring_cmd"
        }
    }
    fn caps(&self) -> Caps {
        Caps {
            sync: false,
            fixed: self.fixed_bufs && self.fixed_file,
        }
    }
    fn buffer(&mut self, idx: u16) -> &mut [u8] {
        match self.bufs.as_mut() {
            Some(b) => b.slice_mut(idx as usize),
            None => &mut [],
        }
    }
    fn queue(&mut self, req: IoReq) -> Result<(), EngineError> {
        if req.buf as usize >= self.buf_count || req.len as usize > self.buf_size {
            return Err(EngineError::Submit(io::Error::from_raw_os_error(
                libc::EINVAL,
            )));
        }
        let p = self.base.wrapping_add(req.buf as usize * self.buf_size) as u64;
        let Some(cmd) = nvme_rw_cmd(req.op, self.ns.nsid, self.lba_shift, req.offset, req.len, p)
        else {
            return Err(EngineError::Submit(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} bytes at offset {} are not whole {}-byte logical blocks",
                    req.len, req.offset, self.ns.lba_size
                ),
            )));
        };
        let Some(slot) = self.free.pop() else {
            return Err(EngineError::QueueFull(self.slot_ud.len() as u32));
        };
        self.slot_ud[slot as usize] = req.user_data;
        self.slot_len[slot as usize] = req.len;
        let mut b = if self.fixed_file {
            opcode::UringCmd80::new(types::Fixed(0), NVME_URING_CMD_IO)
        } else {
            opcode::UringCmd80::new(types::Fd(self.ng.as_raw_fd()), NVME_URING_CMD_IO)
        }
        .cmd(cmd);
        if self.fixed_bufs {
            b = b.buf_index(Some(req.buf));
        }
        let entry = b.build().user_data(u64::from(slot));
        if self.ring.submission().is_full() {
            self.enter(0)?;
        }
        // SAFETY: the command's address is a buffer inside `bufs` (checked above) that stays
        // allocated until its CQE is reaped (Drop drains or leaks), and the generic device's
        // descriptor is owned by the engine.
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.free.push(slot);
            return Err(EngineError::QueueFull(self.ring.params().sq_entries()));
        }
        self.inflight += 1;
        Ok(())
    }
    fn commit(&mut self) -> Result<(), EngineError> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        self.enter(0)
    }
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize, EngineError> {
        let mode = self.mode();
        super::ring::before_reap(&mut self.ring, mode, self.inflight, min)?;
        Ok(self.drain(out))
    }
    fn reap_timeout(
        &mut self,
        timeout: Duration,
        out: &mut Vec<Completion>,
    ) -> Result<usize, EngineError> {
        let mode = self.mode();
        super::ring::before_reap_timeout(&mut self.ring, mode, self.inflight, timeout)?;
        Ok(self.drain(out))
    }
}

impl Drop for PassthruEngine {
    fn drop(&mut self) {
        let deadline = Instant::now() + DROP_DRAIN;
        let mut scratch = Vec::with_capacity(self.slot_ud.len());
        while self.inflight > 0 && Instant::now() < deadline {
            scratch.clear();
            if self
                .reap_timeout(Duration::from_millis(100), &mut scratch)
                .is_err()
            {
                break;
            }
        }
        if self.inflight > 0 {
            tracing::error!(
                inflight = self.inflight,
                "io_uring_cmd: commands still in flight at teardown; leaking their buffers"
            );
            std::mem::forget(self.bufs.take());
        }
    }
}

/// For an NVMe generic node (`/dev/ng0n1`) named as a target: which block device to name
/// instead (empty for any other path).
pub fn generic_node_hint(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name
        .strip_prefix("ng")
        .filter(|r| generic_name(&format!("nvme{r}")).is_some())
    {
        Some(rest) => format!(
            "; {} is an NVMe generic device: only the passthrough engines (engine = \"io_uring_cmd\" or \"io_uring_cmd_poll\") take it as the target, else configure the namespace's block device /dev/nvme{rest} instead",
            path.display()
        ),
        None => String::new(),
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

    #[test]
    fn generic_names() {
        assert_eq!(generic_name("nvme0n1").as_deref(), Some("ng0n1"));
        assert_eq!(generic_name("nvme12n34").as_deref(), Some("ng12n34"));
        for bad in ["nvme0", "nvme0n1p1", "nvmen1", "sda", "nvme0c0n1", "loop0"] {
            assert_eq!(generic_name(bad), None, "{bad}");
        }
    }

    /// A loop device is a block device but no NVMe namespace: refused with its name. (Loop
    /// devices need root; without one the test checks a regular file's refusal instead.)
    #[test]
    fn non_nvme_targets_are_refused() {
        let f = tempfile::tempfile().expect("file");
        assert_eq!(
            namespace_of(Path::new("/sys"), &f),
            Err(PassthruRefusal::NotBlock)
        );
    }

    /// A fake sysfs with a controller `nvme0` holding `nvme0n1` (block 259:0) and `ng0n1`
    /// (char 242:0), for the mapping and the descriptor checks.
    fn fake_sys(block_dev: (u64, u64), char_dev: (u64, u64), with_ng: bool) -> tempfile::TempDir {
        let sys = tempfile::tempdir().expect("tempdir");
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let b = ctrl.join("nvme0n1");
        std::fs::create_dir_all(b.join("queue")).unwrap();
        std::fs::write(b.join("nsid"), "7\n").unwrap();
        std::fs::write(b.join("queue/logical_block_size"), "4096\n").unwrap();
        std::fs::write(b.join("queue/max_hw_sectors_kb"), "128\n").unwrap();
        std::fs::write(b.join("dev"), format!("{}:{}\n", block_dev.0, block_dev.1)).unwrap();
        std::fs::create_dir_all(sys.path().join("dev/block")).unwrap();
        std::fs::create_dir_all(sys.path().join("dev/char")).unwrap();
        std::os::unix::fs::symlink(
            &b,
            sys.path()
                .join(format!("dev/block/{}:{}", block_dev.0, block_dev.1)),
        )
        .unwrap();
        if with_ng {
            let g = ctrl.join("ng0n1");
            std::fs::create_dir_all(&g).unwrap();
            std::fs::write(g.join("dev"), format!("{}:{}\n", char_dev.0, char_dev.1)).unwrap();
            std::os::unix::fs::symlink(
                &g,
                sys.path()
                    .join(format!("dev/char/{}:{}", char_dev.0, char_dev.1)),
            )
            .unwrap();
        }
        sys
    }

    #[test]
    fn sysfs_maps_the_namespace_to_its_generic_device() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let ns = namespace_at(sys.path(), 259, 4).expect("namespace");
        assert_eq!(ns.block, "nvme0n1");
        assert_eq!(ns.generic, "ng0n1");
        assert_eq!(ns.generic_dev, (242, 9));
        assert_eq!(ns.nsid, 7);
        assert_eq!(ns.lba_size, 4096);
        assert_eq!(ns.max_transfer, 128 * 1024);
        assert!(ns.generic_sys.ends_with("nvme/nvme0/ng0n1"));
        // A kernel without generic devices.
        let sys = fake_sys((259, 4), (242, 9), false);
        let e = namespace_at(sys.path(), 259, 4).expect_err("refused");
        assert!(matches!(e, PassthruRefusal::NoGeneric { .. }), "{e}");
        assert!(e.to_string().contains("Linux 5.19"), "{e}");
        // Unknown device number.
        assert!(namespace_at(sys.path(), 8, 0).is_err());
    }

    #[test]
    fn a_generic_device_leads_back_to_its_namespace_by_number() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let (ns, bdev) = namespace_of_generic(sys.path(), 242, 9).expect("namespace");
        assert_eq!(bdev, (259, 4));
        assert_eq!(ns.block, "nvme0n1");
        assert_eq!(ns.generic_dev, (242, 9));
        // A char device sysfs does not know, and one no namespace claims (a sibling whose
        // block device's generic device is another number).
        assert!(namespace_of_generic(sys.path(), 242, 10).is_err());
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let g = ctrl.join("ng0n2");
        std::fs::create_dir_all(&g).unwrap();
        std::fs::write(g.join("dev"), "242:11\n").unwrap();
        std::os::unix::fs::symlink(&g, sys.path().join("dev/char/242:11")).unwrap();
        let e = namespace_of_generic(sys.path(), 242, 11).expect_err("no namespace");
        assert!(
            matches!(&e, PassthruRefusal::NoNamespace { generic, .. } if generic == "ng0n2"),
            "{e}"
        );
        // A block directory whose dev file lies (its /sys/dev/block entry is elsewhere) is
        // not taken.
        let sys = fake_sys((259, 4), (242, 9), true);
        std::fs::remove_file(sys.path().join("dev/block/259:4")).unwrap();
        let elsewhere = sys.path().join("devices/virtual/block/loop0");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, sys.path().join("dev/block/259:4")).unwrap();
        assert!(namespace_of_generic(sys.path(), 242, 9).is_err());
    }

    #[test]
    fn partitions_and_other_block_devices_are_refused() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let p = ctrl.join("nvme0n1/nvme0n1p1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("partition"), "1\n").unwrap();
        std::os::unix::fs::symlink(&p, sys.path().join("dev/block/259:5")).unwrap();
        let e = namespace_at(sys.path(), 259, 5).expect_err("refused");
        assert_eq!(e, PassthruRefusal::Partition("nvme0n1p1".into()));
        let l = sys.path().join("devices/virtual/block/loop3");
        std::fs::create_dir_all(&l).unwrap();
        std::os::unix::fs::symlink(&l, sys.path().join("dev/block/7:3")).unwrap();
        let e = namespace_at(sys.path(), 7, 3).expect_err("refused");
        assert_eq!(e, PassthruRefusal::NotNvme("loop3".into()));
        assert!(
            e.to_string().contains("loop3 is not an NVMe namespace"),
            "{e}"
        );
    }

    /// The host's own `/dev/null` (char 1:3) stands in for an opened generic device: a fake
    /// sysfs that names 1:3 as `ng0n1` accepts it; one that names another number refuses it.
    #[test]
    fn the_opened_generic_device_must_be_the_one_sysfs_names() {
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        let sys = fake_sys((259, 0), (1, 3), true);
        let ns_dir = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let ns = Namespace {
            block: "nvme0n1".into(),
            generic: "ng0n1".into(),
            generic_dev: (1, 3),
            generic_sys: std::fs::canonicalize(ns_dir.join("ng0n1")).unwrap(),
            nsid: 7,
            lba_size: 4096,
            max_transfer: 128 * 1024,
        };
        check_generic(sys.path(), &ns, Path::new("/dev/ng0n1"), &null).expect("matches");
        let other = Namespace {
            generic_dev: (242, 0),
            ..ns.clone()
        };
        let e =
            check_generic(sys.path(), &other, Path::new("/dev/ng0n1"), &null).expect_err("refused");
        assert!(
            e.to_string()
                .contains("is device 1:3, but nvme0n1's generic device is 242:0"),
            "{e}"
        );
        // A regular file is no character device.
        let f = tempfile::tempfile().unwrap();
        let e = check_generic(sys.path(), &ns, Path::new("/dev/ng0n1"), &f).expect_err("refused");
        assert!(e.to_string().contains("not a character device"), "{e}");
        // Sysfs placing the number elsewhere (another controller's ng) is refused.
        let moved = Namespace {
            generic_sys: ns_dir.clone(),
            ..ns
        };
        let e =
            check_generic(sys.path(), &moved, Path::new("/dev/ng0n1"), &null).expect_err("refused");
        assert!(e.to_string().contains("not beside nvme0n1"), "{e}");
    }

    #[test]
    fn generic_nodes_get_the_block_device_to_name_instead() {
        let h = generic_node_hint(Path::new("/dev/ng3n12"));
        assert!(h.contains("/dev/nvme3n12 instead"), "{h}");
        assert!(h.contains("io_uring_cmd_poll"), "{h}");
        for other in [
            "/dev/null",
            "/dev/ng",
            "/dev/ngx",
            "/dev/nvme0n1",
            "/tmp/ng0n1x",
        ] {
            assert_eq!(generic_node_hint(Path::new(other)), "", "{other}");
        }
    }
}
