//! Write-safety checks for block devices.
//!
//! Before any block device is opened for writing, the daemon calls [`check_writable`]. It
//! refuses unless all of these hold, and each refusal names the check that failed:
//!
//! - (a) **named**: the target's `allow_destroy` names the device's serial or WWN, or, only for
//!   devices that have neither (loop, null_blk), its exact device path (both canonicalised);
//! - (c) **not in use**: neither the device nor any of its partitions is mounted
//!   (`/proc/self/mountinfo`, matched by major:minor and by source path) or an active swap area
//!   (`/proc/swaps`), none has holders (`/sys/class/block/<dev>/holders/*`: device-mapper, LVM,
//!   md), and none is claimed exclusively by the kernel or another program (an `O_EXCL`
//!   read-only open fails with EBUSY);
//! - (b) **blank**: libblkid finds no partition table, filesystem, RAID, LVM, swap, crypto or
//!   other signature on it.
//!
//! `force_overwrite_signatures = true` (only together with a matching `allow_destroy`) overrides
//! (b), and never (a) or (c). The signatures found are then returned in
//! [`DeviceIdentity::signatures`] so the caller can log what it is about to destroy.
//!
//! Architecture Invariant: this module never writes. Every device it opens is opened
//! `O_RDONLY` (libblkid opens it read-only as well).

use std::fmt;
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

mod claim;
mod identity;
mod inuse;
pub mod mark;
mod probe;

pub use claim::{
    Claimed, FileClaim, TargetKey, check_file_target, claim_block, claim_block_among, claim_file,
    claim_read_only, resolve_for_create, same_targets,
};
pub use identity::{DeviceIdentity, identify, identify_fd};
use identity::{identity_names, normalise_wwn};
pub use inuse::batch::{BatchRefusal, UseBatch};
pub use inuse::{MountEntry, Unseen, parse_mountinfo};

/// What kind of on-disk structure a signature belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureKind {
    Filesystem,
    PartitionTable,
    /// mdraid and other software/firmware RAID members.
    Raid,
    /// LVM physical volume.
    Lvm,
    Swap,
    /// LUKS and other encrypted volumes.
    Crypto,
    Other,
}

/// One signature found by libblkid: `TYPE`/`UUID`/`LABEL` for superblocks, `PTTYPE`/`PTUUID`
/// for partition tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    pub kind: SignatureKind,
    /// libblkid's `TYPE` (`ext4`, `xfs`, `LVM2_member`, `linux_raid_member`, `swap`) or
    /// `PTTYPE` (`gpt`, `dos`).
    pub type_name: String,
    pub uuid: Option<String>,
    pub label: Option<String>,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.type_name;
        // The noun, and whether the type name still needs saying in the details.
        let (noun, say_type) = match self.kind {
            SignatureKind::Filesystem => (format!("{} {t} filesystem", article(t)), false),
            SignatureKind::PartitionTable => {
                let name = match t.as_str() {
                    "dos" => "dos (MBR)",
                    "gpt" => "GPT",
                    other => other,
                };
                (format!("a {name} partition table"), false)
            }
            SignatureKind::Raid if t == "linux_raid_member" => {
                ("an mdraid member".to_string(), true)
            }
            SignatureKind::Raid => ("a RAID member".to_string(), true),
            SignatureKind::Lvm => ("an LVM physical volume".to_string(), true),
            SignatureKind::Swap => ("a swap area".to_string(), t != "swap"),
            SignatureKind::Crypto => ("an encrypted volume".to_string(), true),
            SignatureKind::Other => (format!("{} {t} signature", article(t)), false),
        };
        let mut details = Vec::new();
        if say_type {
            details.push(t.clone());
        }
        if let Some(u) = &self.uuid {
            if self.kind == SignatureKind::PartitionTable {
                details.push(format!("PTUUID {u}"));
            } else {
                details.push(format!("UUID {u}"));
            }
        }
        if let Some(l) = &self.label {
            details.push(format!("LABEL {l}"));
        }
        if details.is_empty() {
            write!(f, "{noun}")
        } else {
            write!(f, "{noun} ({})", details.join(", "))
        }
    }
}

fn article(word: &str) -> &'static str {
    match word.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u' | 'x') => "an",
        _ => "a",
    }
}

/// Joins signatures for a message: `an ext4 filesystem (UUID ...) and a GPT partition table`.
fn describe_signatures(sigs: &[Signature]) -> String {
    let parts: Vec<String> = sigs.iter().map(|s| s.to_string()).collect();
    match parts.len() {
        0 => "no signature".into(),
        1 => parts[0].clone(),
        _ => {
            let (last, rest) = parts.split_last().expect("len > 1");
            format!("{} and {last}", rest.join(", "))
        }
    }
}

fn describe_holders(holders: &[String]) -> String {
    if holders.is_empty() {
        "claimed exclusively by the kernel or another program".to_string()
    } else {
        format!("held open by {}", holders.join(", "))
    }
}

/// Why a block device may not be written. Every variant names the device and the check.
#[derive(Debug, Error)]
pub enum SafetyError {
    #[error("cannot check {}: {source}; check the target path", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a block device; only block devices go through the write-safety checks", path.display())]
    NotBlockDevice { path: PathBuf },
    #[error("cannot identify {}: {reason}", path.display())]
    Identify { path: PathBuf, reason: String },
    /// Check (a): `allow_destroy` is missing or names something else.
    #[error("refusing to write {}: {reason}; see allow_destroy in README", path.display())]
    NotAllowed { path: PathBuf, reason: String },
    /// Check (c): the device or one of its partitions is mounted.
    #[error("refusing to write {}: {what} is mounted on {mountpoint}; unmount it first", path.display())]
    Mounted {
        path: PathBuf,
        /// The device or partition that is mounted, e.g. `/dev/loop3` or `/dev/sda1`.
        what: String,
        mountpoint: String,
    },
    /// Check (c): the device or one of its partitions is an active swap area.
    #[error("refusing to write {}: {what} is an active swap area; swapoff it first", path.display())]
    ActiveSwap { path: PathBuf, what: String },
    /// Check (c): the device or one of its partitions has holders.
    #[error("refusing to write {}: {what} is held by {} (device-mapper, LVM or md); stop or remove the holders first", path.display(), holders.join(", "))]
    Held {
        path: PathBuf,
        what: String,
        holders: Vec<String>,
    },
    /// Check (c): an exclusive open or lock failed: claimed by the kernel or another program.
    #[error("refusing to write {}: {what} is in use ({}); stop whatever uses it first", path.display(), describe_holders(holders))]
    Busy {
        path: PathBuf,
        what: String,
        /// The processes found holding it open (`pid 1234 (nvsoak)`), when any could be seen.
        holders: Vec<String>,
    },
    /// Check (c): loop devices are stacked on the device (or one of its partitions).
    #[error("refusing to write {}: {what} is the backing store of {} (a loop device stacked on it, at any offset, is in use); detach it first (losetup -d)", path.display(), uppers.join(", "))]
    Stacked {
        path: PathBuf,
        what: String,
        uppers: Vec<String>,
    },
    /// A file target that backs a loop device: refused whatever allow_destroy says.
    #[error("refusing to write {}: it is the backing file of {}; a file that backs a loop device is never a target, allow_destroy or not", path.display(), loops.join(", "))]
    LoopBacking { path: PathBuf, loops: Vec<String> },
    /// A file target mapped into another process's memory: refused whatever allow_destroy says.
    #[error("refusing to write {}: cannot tell whether it is in use: {why}", path.display())]
    Unverifiable {
        path: PathBuf,
        #[source]
        why: inuse::Unseen,
    },
    /// A refusal of a device beneath a block target (a loop device's backing device or file, a
    /// dm or md slave), with the chain that leads down to it.
    #[error("{inner}; beneath it: {chain}")]
    Beneath {
        path: PathBuf,
        /// `/dev/loop7 sits on /dev/loop1 (offset 1048576)`.
        chain: String,
        inner: Box<SafetyError>,
    },
    #[error("refusing to write {}: it is mapped into the memory of {}; a file in use elsewhere is never a target", path.display(), holders.join(", "))]
    Mapped { path: PathBuf, holders: Vec<String> },
    /// A file target that exists and was not created by nvsoak.
    #[error("refusing to write {}: the file exists and nvsoak did not create it; nvsoak writes only files it created and marked as its own (a trusted.nvsoak.target attribute as root), so remove it or choose another path, or set allow_destroy = \"{}\" to let nvsoak destroy its contents", path.display(), path.display())]
    NotOurs { path: PathBuf },
    /// A target path that is neither a regular file nor a block device.
    #[error("refusing to use {}: it is {what}; a target is a block device or a regular file", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    /// A file target that would be created under /dev.
    #[error("refusing to create {}: it resolves to {}, under /dev; nvsoak does not create files under /dev (use /dev/shm or another directory)", path.display(), resolved.display())]
    UnderDev { path: PathBuf, resolved: PathBuf },
    /// The path now names something else than what was checked or recorded.
    #[error("refusing to write {}: {reason}", path.display())]
    Changed { path: PathBuf, reason: String },
    /// Two targets name the same device or file.
    #[error("targets {first} and {second} are the same {what} ({} and {}); a device or file can be one target only", first_path.display(), second_path.display())]
    SameTarget {
        first: String,
        second: String,
        first_path: PathBuf,
        second_path: PathBuf,
        what: String,
    },
    /// Check (b): libblkid found a signature.
    #[error("refusing to write {}: it holds {}{}; see allow_destroy in README (wipe it with wipefs, or set force_overwrite_signatures = true to destroy it anyway)", path.display(), describe_signatures(signatures), if *ambiguous { " (libblkid reports conflicting signatures)" } else { "" })]
    Signature {
        path: PathBuf,
        signatures: Vec<Signature>,
        ambiguous: bool,
    },
    /// Check (b) could not run.
    #[error("refusing to write {}: libblkid could not probe it for signatures: {reason}", path.display())]
    Probe { path: PathBuf, reason: String },
}

impl SafetyError {
    /// The check that refused, for logs and tests: `allow_destroy`, `mounted`, `swap`,
    /// `holders`, `stacked`, `busy`, `signature`, `probe`, `path`, `alias` or `identify`.
    pub fn check(&self) -> &'static str {
        match self {
            SafetyError::Io { .. }
            | SafetyError::NotBlockDevice { .. }
            | SafetyError::Identify { .. } => "identify",
            SafetyError::NotAllowed { .. } => "allow_destroy",
            SafetyError::Mounted { .. } => "mounted",
            SafetyError::ActiveSwap { .. } => "swap",
            SafetyError::Held { .. } => "holders",
            SafetyError::Busy { .. }
            | SafetyError::Mapped { .. }
            | SafetyError::Unverifiable { .. } => "busy",
            SafetyError::Stacked { .. } | SafetyError::LoopBacking { .. } => "stacked",
            SafetyError::NotOurs { .. } => "allow_destroy",
            SafetyError::NotRegular { .. } | SafetyError::Changed { .. } => "identify",
            SafetyError::UnderDev { .. } => "path",
            SafetyError::SameTarget { .. } => "alias",
            SafetyError::Signature { .. } => "signature",
            SafetyError::Probe { .. } => "probe",
            SafetyError::Beneath { inner, .. } => inner.check(),
        }
    }
}

/// True if `path` exists and is a block device (following symlinks).
pub fn is_block_device(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

/// Open `path` with `O_PATH` (following symlinks): a descriptor that names the inode without
/// opening the device, so nothing (a driver's open handler, a tape rewinding, a watchdog
/// arming) happens. Checks are made on it, and the descriptor used for I/O is reopened from it
/// (`/proc/self/fd/N`), so the file checked is the file written whatever the path points to by
/// then.
pub(crate) fn open_path(path: &Path) -> Result<OwnedFd, SafetyError> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|source| SafetyError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Reopen the inode an `O_PATH` (or any) descriptor names, with new flags, through
/// `/proc/self/fd/N`: no path is resolved again.
pub(crate) fn reopen(fd: BorrowedFd<'_>, flags: libc::c_int, write: bool) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

pub(crate) fn fstat(fd: BorrowedFd<'_>, path: &Path) -> Result<fs::Metadata, SafetyError> {
    let f = File::from(fd.try_clone_to_owned().map_err(|source| SafetyError::Io {
        path: path.to_path_buf(),
        source,
    })?);
    f.metadata().map_err(|source| SafetyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// What an `allow_destroy` path names, resolved once.
enum AllowedNode {
    /// A block device, by number.
    Device(libc::dev_t),
    /// A symbolic link somewhere on the path: names nothing.
    Symlink,
    /// Not a block device, or not there.
    Other,
}

/// Resolve an `allow_destroy` path once: opened `O_PATH` without following a symlink anywhere
/// on the way (`RESOLVE_NO_SYMLINKS`; the last component `O_NOFOLLOW` on kernels before 5.6),
/// then `fstat` on that descriptor.
fn allowed_node(allow: &str) -> AllowedNode {
    use nix::errno::Errno;
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = match openat2(nix::fcntl::AT_FDCWD, allow, how) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => return AllowedNode::Symlink,
        Err(Errno::ENOSYS) => match nix::fcntl::openat(
            nix::fcntl::AT_FDCWD,
            allow,
            flags | OFlag::O_NOFOLLOW,
            nix::sys::stat::Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(_) => return AllowedNode::Other,
        },
        Err(_) => return AllowedNode::Other,
    };
    match nix::sys::stat::fstat(&fd) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => AllowedNode::Symlink,
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFBLK => AllowedNode::Device(st.st_rdev),
        _ => AllowedNode::Other,
    }
}

/// Check (a).
pub(crate) fn check_allowed(id: &DeviceIdentity, allow: Option<&str>) -> Result<(), SafetyError> {
    let path = id.path.clone();
    let names = identity_names(id);
    let Some(allow) = allow.map(str::trim).filter(|a| !a.is_empty()) else {
        let reason = match &names {
            Some(n) => format!(
                "its contents would be destroyed and allow_destroy is not set; set allow_destroy to its {n}"
            ),
            None => format!(
                "its contents would be destroyed and allow_destroy is not set; it has no serial or WWN, so set allow_destroy to its exact path \"{}\"",
                id.path.display()
            ),
        };
        return Err(SafetyError::NotAllowed { path, reason });
    };
    if let Some(s) = &id.serial
        && s == allow
    {
        return Ok(());
    }
    if let Some(w) = &id.wwn
        && (w == allow || normalise_wwn(w) == normalise_wwn(allow))
    {
        return Ok(());
    }
    match names {
        Some(n) => {
            let reason = if allow.starts_with('/') {
                format!(
                    "allow_destroy names a path (\"{allow}\"), but a device with a serial or WWN must be named by it; set allow_destroy to its {n}"
                )
            } else {
                format!(
                    "allow_destroy (\"{allow}\") does not name it; set allow_destroy to its {n}"
                )
            };
            Err(SafetyError::NotAllowed { path, reason })
        }
        None => {
            // By device number: `allow_destroy = "/dev/loop3"` allows that device under any
            // name, and no other device. The name is resolved once, through a descriptor,
            // and never through a symlink: a symlink could name one device when it is checked
            // and another when it is next resolved, so it names nothing.
            let same = match allowed_node(allow) {
                AllowedNode::Device(rdev) => rdev == libc::makedev(id.major, id.minor),
                AllowedNode::Symlink => {
                    return Err(SafetyError::NotAllowed {
                        path,
                        reason: format!(
                            "allow_destroy (\"{allow}\") goes through a symbolic link, and what a link names can change between the check and the write; name the device node itself (\"{}\")",
                            id.path.display()
                        ),
                    });
                }
                AllowedNode::Other => Path::new(allow) == id.path,
            };
            if allow.starts_with('/') && same {
                Ok(())
            } else {
                Err(SafetyError::NotAllowed {
                    path,
                    reason: format!(
                        "allow_destroy (\"{allow}\") does not name it; it has no serial or WWN, so allow_destroy must be its exact path \"{}\"",
                        id.path.display()
                    ),
                })
            }
        }
    }
}

/// Check (a) for a member of a target spanning several devices: one of `names` (the target's
/// `allow_destroy` list) must name it. Returns the index of the name that does.
pub(crate) fn check_allowed_among(
    id: &DeviceIdentity,
    names: &[String],
) -> Result<usize, SafetyError> {
    if names.is_empty() {
        return check_allowed(id, None).map(|()| 0);
    }
    if let Some(i) = names
        .iter()
        .position(|n| check_allowed(id, Some(n.as_str())).is_ok())
    {
        return Ok(i);
    }
    let fix = match identity_names(id) {
        Some(n) => format!("add its {n} to the list"),
        None => format!(
            "it has no serial or WWN, so add its exact path \"{}\" to the list",
            id.path.display()
        ),
    };
    Err(SafetyError::NotAllowed {
        path: id.path.clone(),
        reason: format!(
            "no name in allow_destroy ({}) names it; {fix}",
            names
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// [`check_writable`] for a member of a target spanning several devices, named by one of
/// `names`; returns its identity and which name named it.
pub fn check_writable_among(
    path: &Path,
    names: &[String],
    force_overwrite_signatures: bool,
) -> Result<(DeviceIdentity, usize), SafetyError> {
    let fd = open_path(path)?;
    let id = identify_fd(fd.as_fd(), path)?;
    let which = check_allowed_among(&id, names)?;
    inuse::check_block(&id, false)?;
    check_signatures(id, fd.as_fd(), force_overwrite_signatures).map(|id| (id, which))
}

/// Run all write-safety checks on a block device (see the module docs) without holding it:
/// what `check-config` runs. On success, returns its identity; `signatures` lists what
/// `force_overwrite_signatures` let through, which the caller must log before writing.
/// [`claim_block`] runs the same checks in the same order, on the descriptor it then writes.
pub fn check_writable(
    path: &Path,
    allow_destroy: Option<&str>,
    force_overwrite_signatures: bool,
) -> Result<DeviceIdentity, SafetyError> {
    let fd = open_path(path)?;
    let id = identify_fd(fd.as_fd(), path)?;
    check_allowed(&id, allow_destroy)?;
    inuse::check_block(&id, false)?;
    check_signatures(id, fd.as_fd(), force_overwrite_signatures)
}

/// Check (b), through a read-only, buffered reopen of `fd` (libblkid reads at offsets and
/// lengths O_DIRECT would refuse).
pub(crate) fn check_signatures(
    mut id: DeviceIdentity,
    fd: BorrowedFd<'_>,
    force_overwrite_signatures: bool,
) -> Result<DeviceIdentity, SafetyError> {
    let ro =
        reopen(fd, libc::O_RDONLY | libc::O_NONBLOCK, false).map_err(|source| SafetyError::Io {
            path: id.path.clone(),
            source,
        })?;
    let found = probe::signatures_fd(ro.as_fd()).map_err(|e| SafetyError::Probe {
        path: id.path.clone(),
        reason: e.to_string(),
    })?;
    if !found.signatures.is_empty() || found.ambiguous {
        if !force_overwrite_signatures {
            return Err(SafetyError::Signature {
                path: id.path.clone(),
                signatures: found.signatures,
                ambiguous: found.ambiguous,
            });
        }
        id.signatures = found.signatures;
    }
    for lower in inuse::loop_lowers(&id)? {
        let found = signatures_beneath(&id.path, &lower)?;
        if found.signatures.is_empty() && !found.ambiguous {
            continue;
        }
        if !force_overwrite_signatures {
            return Err(SafetyError::Beneath {
                path: id.path.clone(),
                chain: lower.chain,
                inner: Box::new(SafetyError::Signature {
                    path: lower.path.clone(),
                    signatures: found.signatures,
                    ambiguous: found.ambiguous,
                }),
            });
        }
        id.signatures.extend(found.signatures);
    }
    Ok(id)
}

/// Probe what a loop device of the target's stack writes through to, read-only, through a
/// descriptor checked to be the device or file the loop device uses.
fn signatures_beneath(
    target: &Path,
    lower: &inuse::LoopLower,
) -> Result<probe::Found, SafetyError> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(&lower.path)
        .map_err(|source| SafetyError::Io {
            path: lower.path.clone(),
            source,
        })?;
    let m = f.metadata().map_err(|source| SafetyError::Io {
        path: lower.path.clone(),
        source,
    })?;
    let same = match (lower.rdev, lower.inode) {
        (Some(r), _) => m.file_type().is_block_device() && m.rdev() == r,
        (None, Some(key)) => m.file_type().is_file() && (m.dev(), m.ino()) == key,
        (None, None) => false,
    };
    if !same {
        return Err(SafetyError::Changed {
            path: target.to_path_buf(),
            reason: format!(
                "{} is no longer what its loop device writes to ({})",
                lower.path.display(),
                lower.chain
            ),
        });
    }
    probe::signatures_fd(f.as_fd()).map_err(|e| SafetyError::Probe {
        path: lower.path.clone(),
        reason: e.to_string(),
    })
}

/// Probe a device or image file for signatures with libblkid (read-only). Exposed for
/// `nvsoak` diagnostics and tests.
pub fn probe_signatures(path: &Path) -> Result<Vec<Signature>, SafetyError> {
    probe::signatures(path)
        .map(|f| f.signatures)
        .map_err(|e| SafetyError::Probe {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(path: &str, serial: Option<&str>, wwn: Option<&str>) -> DeviceIdentity {
        DeviceIdentity {
            path: path.into(),
            kernel_name: path.trim_start_matches("/dev/").into(),
            parent: None,
            major: 7,
            minor: 6,
            serial: serial.map(str::to_string),
            wwn: wwn.map(str::to_string),
            model: None,
            instance: None,
            has_drive: serial.is_some(),
            signatures: Vec::new(),
        }
    }

    /// Every refusal of allow_destroy reads as a sentence that ends in what to write (issue
    /// 34: "add its it has no serial or WWN, so the list must hold ...").
    #[test]
    fn allow_destroy_refusals_say_what_to_write() {
        let reason = |r: Result<(), SafetyError>| match r {
            Err(SafetyError::NotAllowed { reason, .. }) => reason,
            other => panic!("not a refusal: {other:?}"),
        };
        let among = |id: &DeviceIdentity, names: &[&str]| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            reason(check_allowed_among(id, &names).map(|_| ()))
        };
        let loop6 = identity("/dev/loop6", None, None);
        assert_eq!(
            among(&loop6, &["/dev/loop5"]),
            "no name in allow_destroy (\"/dev/loop5\") names it; it has no serial or WWN, so \
             add its exact path \"/dev/loop6\" to the list"
        );
        let nvme = identity("/dev/nvme1n1", Some("S1"), Some("eui.01"));
        assert_eq!(
            among(&nvme, &["S2", "S3"]),
            "no name in allow_destroy (\"S2\", \"S3\") names it; add its serial \"S1\" or WWN \
             \"eui.01\" to the list"
        );
        assert_eq!(
            reason(check_allowed(&nvme, Some("S2"))),
            "allow_destroy (\"S2\") does not name it; set allow_destroy to its serial \"S1\" or \
             WWN \"eui.01\""
        );
        assert_eq!(
            reason(check_allowed(&nvme, None)),
            "its contents would be destroyed and allow_destroy is not set; set allow_destroy to \
             its serial \"S1\" or WWN \"eui.01\""
        );
        assert!(reason(check_allowed(&loop6, None)).ends_with(
            "it has no serial or WWN, so set allow_destroy to its exact path \"/dev/loop6\""
        ));
        assert!(
            reason(check_allowed(&loop6, Some("/nonexistent/loop5")))
                .ends_with("so allow_destroy must be its exact path \"/dev/loop6\"")
        );
    }

    #[test]
    fn mountinfo_parsing_and_unescape() {
        let t = "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                 37 35 0:45 / /srv rw shared:2 - btrfs /dev/sdb1 rw\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].major, m[0].minor), (98, 0));
        assert_eq!(m[0].mountpoint, "/mnt two");
        assert_eq!(m[0].source, "/dev/root");
        assert_eq!(m[1].source, "/dev/sdb1");
    }

    #[test]
    fn holders_are_listed_with_dm_names() {
        // The kernel here has neither md nor dm, so real holders only appear in the VM
        // harness; this covers the sysfs layout they produce.
        let d = tempfile::tempdir().unwrap();
        use inuse::holders_of;
        // Every block device has the directory: without it, nothing can be said.
        assert!(holders_of(d.path()).is_err());
        fs::create_dir_all(d.path().join("holders")).unwrap();
        assert!(holders_of(d.path()).unwrap().is_empty());
        fs::create_dir_all(d.path().join("holders/dm-3/dm")).unwrap();
        fs::write(d.path().join("holders/dm-3/dm/name"), "vg0-lv0\n").unwrap();
        fs::create_dir_all(d.path().join("holders/md127")).unwrap();
        assert_eq!(
            holders_of(d.path()).unwrap(),
            vec!["dm-3 (vg0-lv0)", "md127"]
        );
        let e = SafetyError::Held {
            path: "/dev/sdb".into(),
            what: "sdb".into(),
            holders: holders_of(d.path()).unwrap(),
        };
        assert_eq!(e.check(), "holders");
        assert!(
            e.to_string().contains("held by dm-3 (vg0-lv0), md127"),
            "{e}"
        );
    }

    #[test]
    fn wwn_forms_compare_equal() {
        assert_eq!(
            normalise_wwn("naa.5000C500ABCDEF"),
            normalise_wwn("0x5000c500abcdef")
        );
        assert_ne!(normalise_wwn("eui.1234"), normalise_wwn("eui.12345"));
    }

    #[test]
    fn signature_messages() {
        let s = Signature {
            kind: SignatureKind::Filesystem,
            type_name: "ext4".into(),
            uuid: Some("1234".into()),
            label: None,
        };
        assert_eq!(s.to_string(), "an ext4 filesystem (UUID 1234)");
        let e = SafetyError::Signature {
            path: "/dev/loop3".into(),
            signatures: vec![s],
            ambiguous: false,
        };
        assert!(
            e.to_string()
                .starts_with("refusing to write /dev/loop3: it holds an ext4 filesystem (UUID 1234); see allow_destroy in README"),
            "{e}"
        );
        let pt = Signature {
            kind: SignatureKind::PartitionTable,
            type_name: "gpt".into(),
            uuid: Some("ab".into()),
            label: None,
        };
        assert_eq!(pt.to_string(), "a GPT partition table (PTUUID ab)");
    }

    fn ident(serial: Option<&str>, wwn: Option<&str>) -> DeviceIdentity {
        DeviceIdentity {
            path: "/dev/nvme9n1".into(),
            kernel_name: "nvme9n1".into(),
            parent: None,
            major: 259,
            minor: 9,
            serial: serial.map(String::from),
            wwn: wwn.map(String::from),
            model: None,
            instance: None,
            has_drive: true,
            signatures: vec![],
        }
    }

    #[test]
    fn allow_destroy_matching() {
        let d = ident(Some("S4EWNX0N123456"), Some("eui.0025385b91b0d1e2"));
        assert!(check_allowed(&d, Some("S4EWNX0N123456")).is_ok());
        assert!(check_allowed(&d, Some("eui.0025385b91b0d1e2")).is_ok());
        assert!(check_allowed(&d, Some("0x0025385B91B0D1E2")).is_ok());
        let e = check_allowed(&d, Some("S4EWNX0N999999")).unwrap_err();
        assert_eq!(e.check(), "allow_destroy");
        assert!(e.to_string().contains("S4EWNX0N123456"), "{e}");
        // A device with a serial is never allowed by its path.
        let e = check_allowed(&d, Some("/dev/nvme9n1")).unwrap_err();
        assert!(e.to_string().contains("names a path"), "{e}");
        assert!(check_allowed(&d, None).is_err());
        assert!(check_allowed(&d, Some("")).is_err());
        // No serial or WWN: only the exact path.
        let d = ident(None, None);
        assert!(check_allowed(&d, Some("/dev/nvme9n1")).is_ok());
        assert!(check_allowed(&d, Some("nvme9n1")).is_err());
        assert!(check_allowed(&d, Some("/dev/nvme9n2")).is_err());
    }

    #[test]
    fn same_device_rules() {
        let a = ident(Some("S1"), None);
        let mut b = ident(Some("S1"), None);
        b.kernel_name = "nvme1n1".into();
        assert!(a.same_device(&b));
        assert!(!a.same_device(&ident(Some("S2"), None)));
        assert!(!a.same_device(&ident(None, None)));
        assert!(ident(None, None).same_device(&ident(None, None)));
    }
}
