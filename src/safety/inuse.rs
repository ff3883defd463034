//! Is a block device or a file in use? Mounts, swap, holders (device-mapper, md), loop devices
//! stacked on it at any offset, exclusive claims, and the processes that hold it open. Every
//! check here is read-only and works from device numbers and inode numbers, never from names,
//! so an alias (`mknod`, a symlink, a hard link) is seen as what it is.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{DeviceIdentity, SafetyError, sysfs_string};

/// One block device to check for use: the device itself or one of its partitions.
pub(super) struct Node {
    pub(super) name: String,
    pub(super) dev_path: PathBuf,
    pub(super) sys: PathBuf,
    pub(super) major: u32,
    pub(super) minor: u32,
}

pub(super) fn parse_devno(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The device and its partitions (subdirectories of its sysfs directory with a `partition`
/// file).
pub(super) fn nodes_of(id: &DeviceIdentity) -> Result<Vec<Node>, SafetyError> {
    let sys = fs::canonicalize(format!("/sys/dev/block/{}:{}", id.major, id.minor)).map_err(
        |source| SafetyError::Io {
            path: id.path.clone(),
            source,
        },
    )?;
    let mut nodes = vec![Node {
        name: id.kernel_name.clone(),
        dev_path: id.path.clone(),
        sys: sys.clone(),
        major: id.major,
        minor: id.minor,
    }];
    if let Ok(rd) = fs::read_dir(&sys) {
        for e in rd.flatten() {
            let p = e.path();
            if !p.join("partition").exists() {
                continue;
            }
            let Some((major, minor)) = sysfs_string(&p.join("dev")).and_then(|d| parse_devno(&d))
            else {
                continue;
            };
            let name = e.file_name().to_string_lossy().into_owned();
            nodes.push(Node {
                dev_path: PathBuf::from("/dev").join(&name),
                name,
                sys: p,
                major,
                minor,
            });
        }
    }
    Ok(nodes)
}

/// Undo the octal escapes (`\040` for space) of /proc/self/mountinfo and /proc/swaps.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A mount from /proc/self/mountinfo: device numbers, mount point and source.
#[derive(Debug, Clone, PartialEq)]
pub struct MountEntry {
    pub major: u32,
    pub minor: u32,
    pub mountpoint: String,
    pub source: String,
}

/// Parse /proc/self/mountinfo text (`36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw`).
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields.len() < 5 {
            continue;
        }
        let Some((major, minor)) = parse_devno(fields[2]) else {
            continue;
        };
        let source = fields
            .iter()
            .position(|f| *f == "-")
            .and_then(|i| fields.get(i + 2))
            .map(|s| unescape_octal(s))
            .unwrap_or_default();
        out.push(MountEntry {
            major,
            minor,
            mountpoint: unescape_octal(fields[4]),
            source,
        });
    }
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Entries of `<sysfs dir>/holders/`, sorted, dm devices with their dm name (`dm-0 (vg-lv)`).
pub(super) fn holders_of(sys: &Path) -> Vec<String> {
    let dir = sys.join("holders");
    let mut holders: Vec<String> = fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    holders.sort();
    holders
        .into_iter()
        .map(|h| match sysfs_string(&dir.join(&h).join("dm/name")) {
            Some(dm) => format!("{h} ({dm})"),
            None => h,
        })
        .collect()
}

/// Check (c): mounts, swap, holders and exclusive claims of the device and its partitions.
/// Check (c) for a block device, in a fixed order so `run` and `check-config` name the same
/// finding: mounts, swap, holders, stacked loop devices, then exclusive claims. `claimed` says
/// the caller already holds the device itself open with `O_EXCL` (which proves nothing else
/// claims it), so only its partitions are probed.
pub(super) fn check_block(id: &DeviceIdentity, claimed: bool) -> Result<(), SafetyError> {
    let nodes = nodes_of(id)?;
    check_block_users(id, &nodes)?;
    for n in &nodes {
        let whole = n.name == id.kernel_name;
        if whole && claimed {
            continue;
        }
        // An O_EXCL open of a block device fails with EBUSY while anything holds an exclusive
        // claim on it (a mount, swap, dm, md, another nvsoak). Read-only: nothing is written.
        let dev = if whole {
            id.path.clone()
        } else {
            n.dev_path.clone()
        };
        match fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&dev)
        {
            Ok(f) => drop(f),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(busy(id, &nodes, &dev));
            }
            // A partition without a node in /dev cannot be opened by anyone else through
            // it either; the sysfs checks above cover it.
            Err(e) if e.kind() == io::ErrorKind::NotFound && !whole => {}
            Err(source) => return Err(SafetyError::Io { path: dev, source }),
        }
    }
    Ok(())
}

/// Why an `O_EXCL` open of `id` failed with EBUSY: the first finding of the ordered checks,
/// else the processes that hold the device (or a partition) open.
pub(super) fn explain_busy(id: &DeviceIdentity) -> SafetyError {
    match nodes_of(id) {
        Ok(nodes) => match check_block_users(id, &nodes) {
            Err(e) => e,
            Ok(()) => busy(id, &nodes, &id.path),
        },
        Err(e) => e,
    }
}

fn busy(id: &DeviceIdentity, nodes: &[Node], what: &Path) -> SafetyError {
    let devnos: Vec<u64> = nodes
        .iter()
        .map(|n| libc::makedev(n.major, n.minor))
        .collect();
    SafetyError::Busy {
        path: id.path.clone(),
        what: what.display().to_string(),
        holders: openers(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_block_device() && devnos.contains(&m.rdev())
        })
        .unwrap_or_else(|why| vec![why]),
    }
}

/// The sysfs and procfs part of check (c): everything but the exclusive-open probe.
fn check_block_users(id: &DeviceIdentity, nodes: &[Node]) -> Result<(), SafetyError> {
    let path = id.path.clone();
    let mountinfo =
        fs::read_to_string("/proc/self/mountinfo").map_err(|source| SafetyError::Io {
            path: PathBuf::from("/proc/self/mountinfo"),
            source,
        })?;
    let mounts = parse_mountinfo(&mountinfo);
    for n in nodes {
        // By device numbers, and by source path (btrfs reports an anonymous device number).
        if let Some(m) = mounts.iter().find(|m| {
            (m.major, m.minor) == (n.major, n.minor)
                || (m.source.starts_with('/') && same_file(Path::new(&m.source), &n.dev_path))
        }) {
            return Err(SafetyError::Mounted {
                path,
                what: n.dev_path.display().to_string(),
                mountpoint: m.mountpoint.clone(),
            });
        }
    }
    for f in active_swaps() {
        let meta = fs::metadata(&f).ok();
        for n in nodes {
            let matches = meta
                .as_ref()
                .map(|m| (libc::major(m.rdev()), libc::minor(m.rdev())) == (n.major, n.minor))
                .unwrap_or(false)
                || same_file(Path::new(&f), &n.dev_path);
            if matches {
                return Err(SafetyError::ActiveSwap {
                    path,
                    what: n.dev_path.display().to_string(),
                });
            }
        }
    }
    for n in nodes {
        let holders = holders_of(&n.sys);
        if !holders.is_empty() {
            return Err(SafetyError::Held {
                path,
                what: n.name.clone(),
                holders,
            });
        }
    }
    // Loop devices whose backing store is the device or one of its partitions, at any
    // offset. The loop driver claims nothing, so no holder, O_EXCL probe or signature at
    // offset 0 shows them.
    let loops = loop_devices();
    for n in nodes {
        let devno = libc::makedev(n.major, n.minor);
        let stacked: Vec<String> = loops
            .iter()
            .filter(|l| l.rdev == Some(devno))
            .map(|l| l.describe(&mounts))
            .collect();
        if !stacked.is_empty() {
            return Err(SafetyError::Stacked {
                path,
                what: n.dev_path.display().to_string(),
                uppers: stacked,
            });
        }
    }
    Ok(())
}

fn active_swaps() -> Vec<String> {
    fs::read_to_string("/proc/swaps")
        .map(|s| {
            s.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next().map(unescape_octal))
                .collect()
        })
        .unwrap_or_default()
}

/// The checks a regular-file target must pass whatever `allow_destroy` says: it backs no loop
/// device, is no active swap file, and is mapped into no process's memory.
pub(super) fn check_file(path: &Path, st: &fs::Metadata) -> Result<(), SafetyError> {
    let key = (st.dev(), st.ino());
    let mounts = fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default();
    let loops: Vec<String> = loop_devices()
        .iter()
        .filter(|l| l.inode == Some(key))
        .map(|l| l.describe(&mounts))
        .collect();
    if !loops.is_empty() {
        return Err(SafetyError::LoopBacking {
            path: path.to_path_buf(),
            loops,
        });
    }
    for f in active_swaps() {
        if fs::metadata(&f).is_ok_and(|m| (m.dev(), m.ino()) == key) {
            return Err(SafetyError::ActiveSwap {
                path: path.to_path_buf(),
                what: f,
            });
        }
    }
    let mapped = mappers(st.dev(), st.ino()).map_err(|why| SafetyError::Unverifiable {
        path: path.to_path_buf(),
        why,
    })?;
    if !mapped.is_empty() {
        return Err(SafetyError::Mapped {
            path: path.to_path_buf(),
            holders: mapped,
        });
    }
    Ok(())
}

/// Processes other than this one that hold the file open (`Err`: what could not be looked at).
pub(super) fn file_openers(st: &fs::Metadata) -> Result<Vec<String>, String> {
    let key = (st.dev(), st.ino());
    openers(|m| m.file_type().is_file() && (m.dev(), m.ino()) == key)
}

/// A loop device and what backs it.
#[derive(Debug, Clone)]
pub(super) struct LoopDev {
    name: String,
    devno: Option<(u32, u32)>,
    offset: u64,
    /// `st_rdev` of the backing file when it is a block device.
    rdev: Option<u64>,
    /// `st_dev`, `st_ino` of the backing file.
    inode: Option<(u64, u64)>,
}

impl LoopDev {
    fn describe(&self, mounts: &[MountEntry]) -> String {
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
}

/// `struct loop_info64` from `<linux/loop.h>`.
#[repr(C)]
pub(super) struct LoopInfo64 {
    pub(super) lo_device: u64,
    pub(super) lo_inode: u64,
    lo_rdevice: u64,
    pub(super) lo_offset: u64,
    pub(super) lo_sizelimit: u64,
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
pub(super) fn loop_status(fd: BorrowedFd<'_>) -> Option<LoopInfo64> {
    // SAFETY: LoopInfo64 is plain old data (integers and byte arrays), so all-zero is a valid
    // value; the kernel fills it in place and the pointer outlives the call.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open loop device and `info` has the layout of struct loop_info64.
    unsafe { loop_get_status64(fd.as_raw_fd(), &mut info) }.ok()?;
    Some(info)
}

/// Every bound loop device: from LOOP_GET_STATUS64 where the node can be opened (root), which
/// gives the backing file's device and inode numbers even after it was renamed or deleted,
/// else from sysfs (`loop/backing_file`, `loop/offset`) and a `stat` of the backing path.
pub(super) fn loop_devices() -> Vec<LoopDev> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir("/sys/block") else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let sys = e.path();
        let Some(backing) = sysfs_string(&sys.join("loop/backing_file")) else {
            continue; // unbound
        };
        let devno = sysfs_string(&sys.join("dev")).and_then(|d| parse_devno(&d));
        let mut l = LoopDev {
            offset: sysfs_string(&sys.join("loop/offset"))
                .and_then(|o| o.parse().ok())
                .unwrap_or(0),
            name,
            devno,
            rdev: None,
            inode: None,
        };
        let node = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(format!("/dev/{}", l.name));
        // Only trust the node when it is this loop device (the name could be stale).
        let info = node.ok().and_then(|f| {
            use std::os::fd::AsFd;
            let m = f.metadata().ok()?;
            let d = devno?;
            (libc::major(m.rdev()) == d.0 && libc::minor(m.rdev()) == d.1)
                .then(|| loop_status(f.as_fd()))
                .flatten()
        });
        match info {
            Some(i) => {
                l.offset = i.lo_offset;
                l.rdev = (i.lo_rdevice != 0).then_some(i.lo_rdevice);
                l.inode = Some((i.lo_device, i.lo_inode));
            }
            None => {
                let p = backing.strip_suffix(" (deleted)").unwrap_or(&backing);
                if let Ok(m) = fs::metadata(p) {
                    use std::os::unix::fs::FileTypeExt;
                    l.rdev = m.file_type().is_block_device().then(|| m.rdev());
                    l.inode = Some((m.dev(), m.ino()));
                }
            }
        }
        out.push(l);
    }
    out
}

/// Every process this one can see, or why not every process can be seen: an unreadable
/// `/proc`, or a `/proc` mounted with `hidepid` (systemd's `ProtectProc=invisible`) while this
/// process lacks `CAP_SYS_PTRACE`, which hides other users' processes. The in-use checks fail
/// closed on either: "nothing found" is only said when everything could be looked at.
fn proc_pids() -> Result<Vec<u32>, String> {
    if let Some(why) = fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| hidepid_of(&m))
        .filter(|_| {
            !fs::read_to_string("/proc/self/status")
                .ok()
                .is_some_and(|s| has_cap(&s, CAP_SYS_PTRACE))
        })
    {
        return Err(format!(
            "/proc is mounted with {why} and nvsoak lacks CAP_SYS_PTRACE, so other users' processes are invisible to it (systemd: keep CAP_SYS_PTRACE in CapabilityBoundingSet, or set ProtectProc=default)"
        ));
    }
    let rd = fs::read_dir("/proc").map_err(|e| format!("/proc could not be read: {e}"))?;
    Ok(rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect())
}

/// `CAP_SYS_PTRACE`'s bit in the capability masks.
const CAP_SYS_PTRACE: u32 = 19;

/// The `hidepid=` option of the `/proc` mount in `mountinfo`, when it hides anything
/// (`hidepid=invisible`, `noaccess`, `ptraceable`, or the numbers 1 and 2).
pub(super) fn hidepid_of(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let mount_point = f.nth(4)?;
        if mount_point != "/proc" {
            return None;
        }
        let (_, rest) = l.split_once(" - ")?;
        let opts = rest.split_whitespace().nth(2)?;
        opts.split(',')
            .find_map(|o| o.strip_prefix("hidepid="))
            .filter(|v| *v != "0" && *v != "off")
            .map(|v| format!("hidepid={v}"))
    })
}

/// Whether `/proc/self/status` text gives the effective capability `cap`.
pub(super) fn has_cap(status: &str, cap: u32) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << cap) != 0)
}

fn describe_pid(pid: u32) -> String {
    match sysfs_string(Path::new(&format!("/proc/{pid}/comm"))) {
        Some(c) => format!("pid {pid} ({c})"),
        None => format!("pid {pid}"),
    }
}

/// Processes other than this one with an open file for which `matches` holds (from
/// `/proc/<pid>/fd`). This process is left out: it holds the descriptors being checked. Fails
/// closed where the whole process list is hidden or unreadable: `Err` names why (see
/// [`proc_pids`]), never "nobody" for processes it could not see.
pub(super) fn openers(matches: impl Fn(&fs::Metadata) -> bool) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for pid in proc_pids()? {
        if pid == std::process::id() {
            continue;
        }
        // Gone since the listing: nothing to hold. A process this one may not inspect even
        // with CAP_SYS_PTRACE (non-dumpable, in an ancestor user namespace: a container's
        // supervisor) is skipped as before: refusing on it would refuse every target there.
        let Ok(rd) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        if rd
            .flatten()
            .any(|e| fs::metadata(e.path()).is_ok_and(|m| matches(&m)))
        {
            out.push(describe_pid(pid));
        }
    }
    Ok(out)
}

/// Processes other than this one that map the file (`/proc/<pid>/maps`: device as hex
/// `major:minor`, then the inode).
fn mappers(dev: u64, ino: u64) -> Result<Vec<String>, String> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mut out = Vec::new();
    for pid in proc_pids()? {
        if pid == std::process::id() {
            continue;
        }
        // As in `openers`: a process gone, or one this one may not inspect, is skipped.
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        let hit = maps.lines().any(|l| {
            let mut f = l.split_whitespace().skip(3);
            let (Some(d), Some(i)) = (f.next(), f.next()) else {
                return false;
            };
            let Some((a, b)) = d.split_once(':') else {
                return false;
            };
            u32::from_str_radix(a, 16) == Ok(major)
                && u32::from_str_radix(b, 16) == Ok(minor)
                && i.parse::<u64>() == Ok(ino)
        });
        if hit {
            out.push(describe_pid(pid));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod proc_tests {
    use super::*;

    /// `ProtectProc=invisible` mounts /proc with hidepid: found, and only on /proc itself.
    #[test]
    fn hidepid_is_read_from_the_proc_mount_only() {
        let m = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw,hidepid=invisible\n\
                 23 1 0:22 / /sys rw shared:2 - sysfs sysfs rw,hidepid=2\n";
        assert_eq!(hidepid_of(m).as_deref(), Some("hidepid=invisible"));
        let plain = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n";
        assert_eq!(hidepid_of(plain), None);
        let off = "22 1 0:21 / /proc rw - proc proc rw,hidepid=0\n";
        assert_eq!(hidepid_of(off), None);
        let two = "22 1 0:21 / /proc rw - proc proc rw,hidepid=2,gid=4\n";
        assert_eq!(hidepid_of(two).as_deref(), Some("hidepid=2"));
    }

    #[test]
    fn the_effective_capability_mask_is_read_bit_by_bit() {
        let root = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n";
        assert!(has_cap(root, CAP_SYS_PTRACE));
        // CAP_SYS_ADMIN (21) and CAP_SYS_RAWIO (17) only: the shipped unit's bounding set.
        let unit = format!("CapEff:\t{:016x}\n", (1u64 << 21) | (1u64 << 17));
        assert!(!has_cap(&unit, CAP_SYS_PTRACE));
        assert!(has_cap(&unit, 21));
        assert!(!has_cap("no caps line", CAP_SYS_PTRACE));
    }
}
