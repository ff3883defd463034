//! Is a block device or a file in use? Mounts, swap, holders (device-mapper, md), loop devices
//! stacked on it at any offset, exclusive claims, and the processes that hold it open, on the
//! device and on everything beneath it ([`stack`]). Every check here is read-only and works
//! from device numbers and inode numbers, never from names, so an alias (`mknod`, a symlink, a
//! hard link) is seen as what it is. Every sysfs and procfs file is read through one
//! [`SysRoot`], and every check fails closed: what could not be read is an
//! [`Unseen`] refusal that names it, never "nothing found".

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::{DeviceIdentity, SafetyError};
use crate::util::sysroot::SysRoot;

pub(super) mod batch;
mod loops;
mod procs;
mod stack;

pub(super) use loops::loop_status;
use loops::{LoopDev, absent, loop_devices};
pub(in crate::safety) use procs::Reach;
pub(super) use procs::file_openers;
use procs::{mappers, openers};
pub(super) use stack::LoopLower;

/// What a check could not look at, so it cannot say "not in use".
#[derive(Debug, Error)]
pub enum Unseen {
    #[error("{} could not be read ({source})", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "/proc is mounted with {hidepid} and nvsoak lacks CAP_SYS_PTRACE, so other users' processes are invisible to it (systemd: keep CAP_SYS_PTRACE in CapabilityBoundingSet, or set ProtectProc=default)"
    )]
    ProcHidden { hidepid: String },
    #[error(
        "the open files and memory maps of {who} could not be looked at ({source}), so whether it uses the target is unknown"
    )]
    Process {
        who: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "what backs /dev/{name} ({backing}) could not be found ({source}), so whether it sits on the target is unknown"
    )]
    LoopBacking {
        name: String,
        backing: String,
        #[source]
        source: io::Error,
    },
    #[error("the devices beneath it go deeper than {0} levels")]
    TooDeep(usize),
}

/// One sysfs or procfs attribute, trimmed; `None` when the file is not there. Any other error
/// is [`Unseen::Unreadable`].
pub(super) fn read_attr(p: &Path) -> Result<Option<String>, Unseen> {
    match fs::read(p) {
        Ok(raw) => {
            let s = String::from_utf8_lossy(&raw);
            let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
            Ok((!s.is_empty()).then(|| s.to_string()))
        }
        Err(e) if absent(&e) => Ok(None),
        Err(source) => Err(Unseen::Unreadable {
            path: p.to_path_buf(),
            source,
        }),
    }
}

/// One block device to check for use: a device itself or one of its partitions.
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

/// A block device by kernel name and number, and the node it is written through.
pub(super) struct Dev {
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) major: u32,
    pub(super) minor: u32,
}

impl Dev {
    fn of(id: &DeviceIdentity) -> Dev {
        Dev {
            name: id.kernel_name.clone(),
            path: id.path.clone(),
            major: id.major,
            minor: id.minor,
        }
    }
}

/// The device and its partitions (subdirectories of its sysfs directory with a `partition`
/// file).
fn nodes_of(root: &SysRoot, dev: &Dev) -> Result<Vec<Node>, Unseen> {
    let link = root.sys(format!("dev/block/{}:{}", dev.major, dev.minor));
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Unseen::Unreadable { path, source }
    };
    let sys = fs::canonicalize(&link).map_err(unreadable(&link))?;
    let mut nodes = vec![Node {
        name: dev.name.clone(),
        dev_path: dev.path.clone(),
        sys: sys.clone(),
        major: dev.major,
        minor: dev.minor,
    }];
    for e in fs::read_dir(&sys).map_err(unreadable(&sys))? {
        let p = e.map_err(unreadable(&sys))?.path();
        if !p.join("partition").exists() {
            continue;
        }
        let Some((major, minor)) = read_attr(&p.join("dev"))?.and_then(|d| parse_devno(&d)) else {
            continue;
        };
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        nodes.push(Node {
            dev_path: PathBuf::from("/dev").join(&name),
            name,
            sys: p,
            major,
            minor,
        });
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
/// Every block device has the directory, so a missing or unreadable one is [`Unseen`].
pub(super) fn holders_of(sys: &Path) -> Result<Vec<String>, Unseen> {
    let dir = sys.join("holders");
    let unreadable = |source| Unseen::Unreadable {
        path: dir.clone(),
        source,
    };
    let mut holders = Vec::new();
    for e in fs::read_dir(&dir).map_err(unreadable)? {
        holders.push(
            e.map_err(unreadable)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    holders.sort();
    holders
        .into_iter()
        .map(|h| {
            Ok(match read_attr(&dir.join(&h).join("dm/name"))? {
                Some(dm) => format!("{h} ({dm})"),
                None => h,
            })
        })
        .collect()
}

/// What the in-use checks read once per check: mounts, active swap areas and loop devices.
pub(super) struct Scan<'r> {
    pub(super) root: &'r SysRoot,
    pub(super) mounts: Vec<MountEntry>,
    pub(super) swaps: Vec<String>,
    pub(super) loops: Vec<LoopDev>,
}

impl<'r> Scan<'r> {
    pub(super) fn new(root: &'r SysRoot) -> Result<Scan<'r>, Unseen> {
        let mi = root.proc_self().join("mountinfo");
        let text = fs::read_to_string(&mi).map_err(|source| Unseen::Unreadable {
            path: mi.clone(),
            source,
        })?;
        Ok(Scan {
            root,
            mounts: parse_mountinfo(&text),
            swaps: active_swaps(root)?,
            loops: loop_devices(root)?,
        })
    }
}

/// The paths of the active swap areas. A kernel built without swap has no `/proc/swaps` (and
/// no swap); any other error reading it is [`Unseen`].
fn active_swaps(root: &SysRoot) -> Result<Vec<String>, Unseen> {
    let p = root.proc_("swaps");
    match fs::read_to_string(&p) {
        Ok(s) => Ok(s
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(unescape_octal))
            .collect()),
        Err(e) if absent(&e) => Ok(Vec::new()),
        Err(source) => Err(Unseen::Unreadable { path: p, source }),
    }
}

fn unverifiable(path: &Path) -> impl FnOnce(Unseen) -> SafetyError + '_ {
    move |why| SafetyError::Unverifiable {
        path: path.to_path_buf(),
        why,
    }
}

/// Check (c) for a block device, in a fixed order so `run` and `check-config` name the same
/// finding: mounts, swap, holders, stacked loop devices, then exclusive claims, on the device
/// and its partitions, then the same on every device beneath it. `claimed` says the caller
/// already holds the device itself open with `O_EXCL` (which proves nothing else claims it),
/// so only its partitions are probed.
pub(super) fn check_block(id: &DeviceIdentity, claimed: bool) -> Result<(), SafetyError> {
    let root = SysRoot::host();
    let scan = Scan::new(&root).map_err(unverifiable(&id.path))?;
    let dev = Dev::of(id);
    let nodes = nodes_of(&root, &dev).map_err(unverifiable(&id.path))?;
    check_block_users(&scan, &id.path, &nodes, None)?;
    for n in &nodes {
        let whole = n.name == id.kernel_name;
        if whole && claimed {
            continue;
        }
        let node = if whole { &id.path } else { &n.dev_path };
        probe_exclusive(&id.path, node, !whole, || busy(&root, id, &nodes, node))?;
    }
    stack::check_beneath(&scan, &id.path, &dev)
}

/// An `O_EXCL` open of a block device fails with EBUSY while anything holds an exclusive claim
/// on it (a mount, swap, dm, md, another nvsoak). Read-only: nothing is written. A partition
/// without a node in /dev cannot be opened by anyone else through it either (`may_be_absent`).
fn probe_exclusive(
    target: &Path,
    node: &Path,
    may_be_absent: bool,
    busy: impl FnOnce() -> SafetyError,
) -> Result<(), SafetyError> {
    match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(node)
    {
        Ok(f) => {
            drop(f);
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(busy()),
        Err(e) if e.kind() == io::ErrorKind::NotFound && may_be_absent => Ok(()),
        Err(source) => Err(SafetyError::Io {
            path: if node == target {
                target.to_path_buf()
            } else {
                node.to_path_buf()
            },
            source,
        }),
    }
}

/// Why an `O_EXCL` open of `id` failed with EBUSY: the first finding of the ordered checks,
/// else the processes that hold the device (or a partition) open.
pub(super) fn explain_busy(id: &DeviceIdentity) -> SafetyError {
    let root = SysRoot::host();
    let scan = match Scan::new(&root) {
        Ok(s) => s,
        Err(why) => return unverifiable(&id.path)(why),
    };
    match nodes_of(&root, &Dev::of(id)) {
        Ok(nodes) => match check_block_users(&scan, &id.path, &nodes, None) {
            Err(e) => e,
            Ok(()) => busy(&root, id, &nodes, &id.path),
        },
        Err(why) => unverifiable(&id.path)(why),
    }
}

fn busy(root: &SysRoot, id: &DeviceIdentity, nodes: &[Node], what: &Path) -> SafetyError {
    let devnos: Vec<u64> = nodes
        .iter()
        .map(|n| libc::makedev(n.major, n.minor))
        .collect();
    SafetyError::Busy {
        path: id.path.clone(),
        what: what.display().to_string(),
        holders: openers(root, Reach::Every, |m| {
            m.file_type().is_block_device() && devnos.contains(&m.rdev())
        })
        .unwrap_or_else(|why| vec![why.to_string()]),
    }
}

/// The device nvsoak came from when checking a device beneath a target: its holder entry and
/// its loop device are the target's own, not someone else's use.
#[derive(Clone, Copy)]
pub(super) struct Above<'a> {
    pub(super) name: &'a str,
    pub(super) devno: u64,
}

/// The sysfs and procfs part of check (c) on `nodes`: everything but the exclusive-open probe.
/// `above`: the device stacked on these by the target's own stack, left out of the holders and
/// stacked-loop findings.
pub(super) fn check_block_users(
    scan: &Scan<'_>,
    target: &Path,
    nodes: &[Node],
    above: Option<Above<'_>>,
) -> Result<(), SafetyError> {
    let path = target.to_path_buf();
    for n in nodes {
        // By device numbers, and by source path (btrfs reports an anonymous device number).
        if let Some(m) = scan.mounts.iter().find(|m| {
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
    for f in &scan.swaps {
        let meta = fs::metadata(f).ok();
        for n in nodes {
            let matches = meta
                .as_ref()
                .map(|m| (libc::major(m.rdev()), libc::minor(m.rdev())) == (n.major, n.minor))
                .unwrap_or(false)
                || same_file(Path::new(f), &n.dev_path);
            if matches {
                return Err(SafetyError::ActiveSwap {
                    path,
                    what: n.dev_path.display().to_string(),
                });
            }
        }
    }
    for n in nodes {
        let holders: Vec<String> = holders_of(&n.sys)
            .map_err(unverifiable(target))?
            .into_iter()
            .filter(|h| above.is_none_or(|a| h.split(' ').next() != Some(a.name)))
            .collect();
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
    for n in nodes {
        let devno = libc::makedev(n.major, n.minor);
        let stacked: Vec<String> = scan
            .loops
            .iter()
            .filter(|l| l.rdev == Some(devno))
            .filter(|l| above.is_none_or(|a| l.rdev_of_self() != Some(a.devno)))
            .map(|l| l.describe(&scan.mounts))
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

/// The checks a regular-file target must pass whatever `allow_destroy` says: it backs no loop
/// device, is no active swap file, and is mapped into no process's memory. `reach`: whether
/// the file is nvsoak's own ([`Reach`]).
/// Within a [`batch::UseBatch`], the mapped check of nvsoak's own file is left to the batch
/// (the claim defers it with its open check).
pub(super) fn check_file(path: &Path, st: &fs::Metadata, reach: Reach) -> Result<(), SafetyError> {
    let root = SysRoot::host();
    let scan = Scan::new(&root).map_err(unverifiable(path))?;
    let procs = !batch::defers(reach);
    check_file_users_with(&scan, path, (st.dev(), st.ino()), None, reach, procs)
}

/// [`check_file`] on the file with device and inode numbers `key`; `above`: the target's own
/// loop device on it (when the file is beneath a target), left out.
pub(super) fn check_file_users(
    scan: &Scan<'_>,
    path: &Path,
    key: (u64, u64),
    above: Option<Above<'_>>,
    reach: Reach,
) -> Result<(), SafetyError> {
    check_file_users_with(scan, path, key, above, reach, true)
}

/// [`check_file_users`]; `procs`: whether to look at the processes' maps now.
fn check_file_users_with(
    scan: &Scan<'_>,
    path: &Path,
    key: (u64, u64),
    above: Option<Above<'_>>,
    reach: Reach,
    procs: bool,
) -> Result<(), SafetyError> {
    let loops: Vec<String> = scan
        .loops
        .iter()
        .filter(|l| l.inode == key && l.rdev.is_none())
        .filter(|l| above.is_none_or(|a| l.rdev_of_self() != Some(a.devno)))
        .map(|l| l.describe(&scan.mounts))
        .collect();
    if !loops.is_empty() {
        return Err(SafetyError::LoopBacking {
            path: path.to_path_buf(),
            loops,
        });
    }
    for f in &scan.swaps {
        if fs::metadata(f).is_ok_and(|m| (m.dev(), m.ino()) == key) {
            return Err(SafetyError::ActiveSwap {
                path: path.to_path_buf(),
                what: f.clone(),
            });
        }
    }
    if !procs {
        return Ok(());
    }
    let mapped = mappers(scan.root, key.0, key.1, reach).map_err(unverifiable(path))?;
    if !mapped.is_empty() {
        return Err(SafetyError::Mapped {
            path: path.to_path_buf(),
            holders: mapped,
        });
    }
    Ok(())
}

/// What the loop devices of `id`'s stack write through to (see [`stack::loop_lowers`]).
pub(super) fn loop_lowers(id: &DeviceIdentity) -> Result<Vec<stack::LoopLower>, SafetyError> {
    let root = SysRoot::host();
    let scan = Scan::new(&root).map_err(unverifiable(&id.path))?;
    stack::loop_lowers(&scan, &Dev::of(id)).map_err(unverifiable(&id.path))
}

#[cfg(test)]
mod tests;
