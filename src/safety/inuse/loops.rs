//! Loop devices and what backs them: LOOP_GET_STATUS64 where the node can be opened, sysfs
//! otherwise. A loop device whose backing store cannot be found is an error, never "backs
//! nothing": the loop driver claims nothing, so nothing else would show it.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};

use super::{MountEntry, Unseen, parse_devno, read_attr};
use crate::util::sysroot::SysRoot;

/// A loop device and what backs it.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::safety) struct LoopDev {
    pub(super) name: String,
    pub(super) devno: Option<(u32, u32)>,
    pub(super) offset: u64,
    /// `st_rdev` of the backing file when it is a block device.
    pub(super) rdev: Option<u64>,
    /// `st_dev`, `st_ino` of the backing file.
    pub(super) inode: (u64, u64),
    /// The backing file's path as the kernel last knew it.
    pub(super) backing: String,
}

impl LoopDev {
    pub(super) fn describe(&self, mounts: &[MountEntry]) -> String {
        let mut notes = Vec::new();
        if self.offset > 0 {
            notes.push(format!("offset {}", self.offset));
        }
        if let Some(m) = self
            .devno
            .and_then(|d| mounts.iter().find(|m| (m.major, m.minor) == d))
        {
            notes.push(format!("mounted on {}", m.mountpoint));
        }
        if notes.is_empty() {
            format!("/dev/{}", self.name)
        } else {
            format!("/dev/{} ({})", self.name, notes.join(", "))
        }
    }

    /// This loop device's number as `st_rdev` gives it.
    pub(super) fn rdev_of_self(&self) -> Option<u64> {
        self.devno.map(|(a, b)| libc::makedev(a, b))
    }
}

/// `struct loop_info64` from `<linux/loop.h>`.
#[repr(C)]
pub(in crate::safety) struct LoopInfo64 {
    pub(in crate::safety) lo_device: u64,
    pub(in crate::safety) lo_inode: u64,
    lo_rdevice: u64,
    pub(in crate::safety) lo_offset: u64,
    pub(in crate::safety) lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

// LOOP_GET_STATUS64 is a bare number, not an _IOR encoding.
nix::ioctl_read_bad!(loop_get_status64, 0x4C05, LoopInfo64);

/// The loop device's status, `None` when `fd` is not a bound loop device.
pub(in crate::safety) fn loop_status(fd: BorrowedFd<'_>) -> Option<LoopInfo64> {
    // SAFETY: LoopInfo64 is plain old data (integers and byte arrays), so all-zero is a valid
    // value; the kernel fills it in place and the pointer outlives the call.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open loop device and `info` has the layout of struct loop_info64.
    unsafe { loop_get_status64(fd.as_raw_fd(), &mut info) }.ok()?;
    Some(info)
}

/// Every bound loop device under `root`: from LOOP_GET_STATUS64 where the node can be opened
/// (root, on the host), which gives the backing file's device and inode numbers even after it
/// was renamed or deleted, else from sysfs (`loop/backing_file`, `loop/offset`) and a `stat` of
/// the backing path. Fails closed: an unreadable `block` directory or `backing_file`, or a
/// backing store found neither way, is an error naming it.
pub(in crate::safety) fn loop_devices(root: &SysRoot) -> Result<Vec<LoopDev>, Unseen> {
    let block = root.sys("block");
    let rd = fs::read_dir(&block).map_err(|source| Unseen::Unreadable {
        path: block.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|source| Unseen::Unreadable {
            path: block.clone(),
            source,
        })?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let sys = e.path();
        // Absent on an unbound loop device.
        let Some(backing) = read_attr(&sys.join("loop/backing_file"))? else {
            continue;
        };
        let devno = read_attr(&sys.join("dev"))?.and_then(|d| parse_devno(&d));
        let offset = read_attr(&sys.join("loop/offset"))?
            .and_then(|o| o.parse().ok())
            .unwrap_or(0);
        let from_node = root
            .is_host()
            .then(|| status_of_node(&name, devno))
            .flatten();
        let l = match from_node {
            Some(i) => LoopDev {
                offset: i.lo_offset,
                rdev: (i.lo_rdevice != 0).then_some(i.lo_rdevice),
                inode: (i.lo_device, i.lo_inode),
                name,
                devno,
                backing,
            },
            None => {
                let p = backing.strip_suffix(" (deleted)").unwrap_or(&backing);
                let m = fs::metadata(p).map_err(|source| Unseen::LoopBacking {
                    name: name.clone(),
                    backing: backing.clone(),
                    source,
                })?;
                LoopDev {
                    offset,
                    rdev: m.file_type().is_block_device().then(|| m.rdev()),
                    inode: (m.dev(), m.ino()),
                    name,
                    devno,
                    backing,
                }
            }
        };
        out.push(l);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// LOOP_GET_STATUS64 through `/dev/<name>`, trusted only when the node is this loop device
/// (the name could be stale).
fn status_of_node(name: &str, devno: Option<(u32, u32)>) -> Option<LoopInfo64> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(format!("/dev/{name}"))
        .ok()?;
    let m = f.metadata().ok()?;
    let d = devno?;
    (libc::major(m.rdev()) == d.0 && libc::minor(m.rdev()) == d.1)
        .then(|| loop_status(f.as_fd()))
        .flatten()
}

/// Whether `e` reading a sysfs attribute means "the attribute is not there".
pub(super) fn absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}
