//! Opening a target for I/O: once, checked through the opened descriptor, and held.
//!
//! A target path is opened with `O_PATH` (which opens no device), every check is made on that
//! descriptor (its device or inode number, the sysfs directory of that number, libblkid on a
//! reopen of it), and the descriptor used for I/O is reopened from it through
//! `/proc/self/fd/N`, so a symlink or `/dev/disk/by-id` link re-pointed meanwhile changes
//! nothing. A block device opened for writing is opened `O_EXCL` and stays so while the
//! descriptor lives: a second nvsoak, a mount or an md/dm assembly on it fails. A file target
//! is held with an exclusive `flock`.
//!
//! A file target is created by nvsoak (under a temporary name, marked, then linked into place,
//! so the path never names an unmarked file nvsoak made) or refused: an existing file nvsoak
//! did not mark is refused unless `allow_destroy` names that exact path, and a file that backs
//! a loop device, is an active swap file or is mapped by another process is refused always.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use super::inuse::Reach;
use crate::util::bounded;
use crate::util::sysroot::SysRoot;

use super::{
    DeviceIdentity, SafetyError, check_allowed, check_signatures, fstat, identify_fd, inuse,
    open_path, reopen,
};

/// What makes two targets the same: a block device's number, or a file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetKey {
    Block(u64),
    File { dev: u64, ino: u64 },
}

impl TargetKey {
    pub fn of(meta: &fs::Metadata) -> Option<TargetKey> {
        let t = meta.file_type();
        if t.is_block_device() {
            Some(TargetKey::Block(meta.rdev()))
        } else if t.is_file() {
            Some(TargetKey::File {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        } else {
            None
        }
    }

    fn describe(&self) -> String {
        match self {
            TargetKey::Block(r) => format!("block device {}:{}", libc::major(*r), libc::minor(*r)),
            TargetKey::File { dev, ino } => format!(
                "file (inode {ino} on device {}:{})",
                libc::major(*dev),
                libc::minor(*dev)
            ),
        }
    }
}

/// Refuse two targets that are one device or one file under different names (a symlink, a
/// `mknod` alias, a hard link, `..`): compared by what the paths resolve to now. Paths that do
/// not exist yet are skipped (they are created, so they are distinct files).
pub fn same_targets<'a>(
    targets: impl IntoIterator<Item = (&'a str, &'a Path)>,
) -> Result<(), SafetyError> {
    let mut seen: HashMap<TargetKey, (&str, &Path)> = HashMap::new();
    for (name, path) in targets {
        let Some(key) = fs::metadata(path).ok().and_then(|m| TargetKey::of(&m)) else {
            continue;
        };
        if let Some((first, first_path)) = seen.get(&key) {
            return Err(SafetyError::SameTarget {
                first: first.to_string(),
                second: name.to_string(),
                first_path: first_path.to_path_buf(),
                second_path: path.to_path_buf(),
                what: key.describe(),
            });
        }
        seen.insert(key, (name, path));
    }
    Ok(())
}

/// A target opened for I/O after its checks passed.
#[derive(Debug)]
pub struct Claimed {
    /// The descriptor checked, and the one to do I/O on. For a block device opened for
    /// writing it carries the `O_EXCL` claim: keep it open for as long as the device is used.
    pub file: File,
    pub identity: DeviceIdentity,
}

/// How long a claim no process can be found holding may take to go away: the io_uring of a
/// process that just exited (a killed nvsoak) releases its files only when the kernel has torn
/// the ring down, shortly after the process is gone.
#[cfg(not(test))]
const TRANSIENT_CLAIM: Duration = Duration::from_secs(10);
#[cfg(test)]
const TRANSIENT_CLAIM: Duration = Duration::from_millis(300);

/// True (after a short pause) when `why` is a claim nobody visible holds and it is still
/// young enough to be a ring being torn down: the caller tries again.
fn transient(why: &SafetyError, since: Instant) -> bool {
    match why {
        SafetyError::Busy { holders, .. }
            if holders.is_empty() && since.elapsed() < TRANSIENT_CLAIM =>
        {
            std::thread::sleep(Duration::from_millis(50));
            true
        }
        _ => false,
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SafetyError + '_ {
    move |source| SafetyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Open a block device for writing: `O_PATH` first, then identity, `allow_destroy` and the
/// in-use checks on that descriptor, then an `O_EXCL` read-write reopen of the same inode,
/// then the remaining in-use checks and the signature probe on it. `expect`: the device this
/// target ran on before (after it vanished), refused if the path now names another.
pub fn claim_block(
    path: &Path,
    allow_destroy: Option<&str>,
    force_overwrite_signatures: bool,
    direct: bool,
    expect: Option<&DeviceIdentity>,
) -> Result<Claimed, SafetyError> {
    claim_block_with(
        path,
        |id| check_allowed(id, allow_destroy),
        force_overwrite_signatures,
        direct,
        expect,
    )
}

/// [`claim_block`] for a member of a target spanning several devices: the device must be named
/// by one of `names` (its `allow_destroy` list). Returns the claim and which name named it.
pub fn claim_block_among(
    path: &Path,
    names: &[String],
    force_overwrite_signatures: bool,
    direct: bool,
    expect: Option<&DeviceIdentity>,
) -> Result<(Claimed, usize), SafetyError> {
    let mut which = 0;
    let claimed = claim_block_with(
        path,
        |id| {
            which = super::check_allowed_among(id, names)?;
            Ok(())
        },
        force_overwrite_signatures,
        direct,
        expect,
    )?;
    Ok((claimed, which))
}

fn claim_block_with(
    path: &Path,
    allowed: impl FnOnce(&DeviceIdentity) -> Result<(), SafetyError>,
    force_overwrite_signatures: bool,
    direct: bool,
    expect: Option<&DeviceIdentity>,
) -> Result<Claimed, SafetyError> {
    let pfd = open_path(path)?;
    let id = identify_fd(pfd.as_fd(), path)?;
    check_expected(&id, expect, path)?;
    allowed(&id)?;
    let flags = libc::O_EXCL | if direct { libc::O_DIRECT } else { 0 };
    let since = Instant::now();
    let file = loop {
        match reopen(pfd.as_fd(), flags, true) {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let why = inuse::explain_busy(&id);
                if !transient(&why, since) {
                    return Err(why);
                }
            }
            Err(source) => {
                return Err(SafetyError::Io {
                    path: id.path,
                    source,
                });
            }
        }
    };
    let held = file.metadata().map_err(io_err(path))?;
    if !held.file_type().is_block_device() || held.rdev() != libc::makedev(id.major, id.minor) {
        return Err(SafetyError::Changed {
            path: path.to_path_buf(),
            reason: "the device opened is not the device checked".into(),
        });
    }
    inuse::check_block(&id, true)?;
    let identity = check_signatures(id, file.as_fd(), force_overwrite_signatures)?;
    Ok(Claimed { file, identity })
}

/// Open a block device for a plan that only reads: no claim and no write-safety checks, but
/// the identity is that of the opened descriptor.
pub fn claim_read_only(
    path: &Path,
    direct: bool,
    expect: Option<&DeviceIdentity>,
) -> Result<Claimed, SafetyError> {
    let pfd = open_path(path)?;
    let id = identify_fd(pfd.as_fd(), path)?;
    check_expected(&id, expect, path)?;
    let flags = libc::O_RDONLY | if direct { libc::O_DIRECT } else { 0 };
    let file = reopen(pfd.as_fd(), flags, false).map_err(io_err(path))?;
    Ok(Claimed { file, identity: id })
}

fn check_expected(
    id: &DeviceIdentity,
    expect: Option<&DeviceIdentity>,
    path: &Path,
) -> Result<(), SafetyError> {
    match expect {
        Some(e) if !id.same_device(e) => Err(SafetyError::Changed {
            path: path.to_path_buf(),
            reason: format!("it is now {id}, not {e}, the device this target ran on"),
        }),
        _ => Ok(()),
    }
}

/// A file target opened for I/O: created by nvsoak, or an existing file nvsoak marked or
/// `allow_destroy` names. Held with an exclusive `flock` while `file` is open.
#[derive(Debug)]
pub struct FileClaim {
    pub file: File,
    /// The path with symlinks and `..` resolved, where the file is.
    pub path: PathBuf,
    /// nvsoak created it just now.
    pub created: bool,
}

/// Where a file target is: symlinks and `..` resolved, and never under `/dev` (but
/// `/dev/shm`).
fn resolve_file(path: &Path) -> Result<PathBuf, SafetyError> {
    let resolved = crate::safety::resolve_for_create(path);
    if resolved.starts_with("/dev") && !resolved.starts_with("/dev/shm") {
        return Err(SafetyError::UnderDev {
            path: path.to_path_buf(),
            resolved,
        });
    }
    Ok(resolved)
}

fn split(resolved: &Path) -> Result<(&Path, &std::ffi::OsStr), SafetyError> {
    match (resolved.parent(), resolved.file_name()) {
        (Some(d), Some(n)) => Ok((d, n)),
        _ => Err(SafetyError::NotRegular {
            path: resolved.to_path_buf(),
            what: "not a file name",
        }),
    }
}

/// The directory, opened without following a symlink anywhere in its (canonical) path, so a
/// directory swapped for a symlink after resolution is refused, not followed.
fn open_dir(dir: &Path) -> Result<OwnedFd, SafetyError> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match openat2(nix::fcntl::AT_FDCWD, dir, how) {
        Ok(fd) => Ok(fd),
        // Kernels before 5.6: the last component at least.
        Err(Errno::ENOSYS) => openat(
            nix::fcntl::AT_FDCWD,
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| io_err(dir)(e.into())),
        Err(e) => Err(io_err(dir)(e.into())),
    }
}

/// What a file target that is not a regular file is: [`bounded::kind_of`], with what a
/// symlink or block device found here means (the path changed after it was resolved).
fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link (it changed after its path was resolved)"
    } else if t.is_block_device() {
        "a block device (it changed after the configuration was read)"
    } else {
        bounded::kind_of(t)
    }
}

/// Open a file target for I/O (see the module docs). `name` is the target's name, recorded in
/// the mark.
pub fn claim_file(
    name: &str,
    path: &Path,
    allow_destroy: Option<&str>,
    direct: bool,
) -> Result<FileClaim, SafetyError> {
    let resolved = resolve_file(path)?;
    let (dir, fname) = split(&resolved)?;
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let dirfd = open_dir(dir)?;
    let flags = if direct { libc::O_DIRECT } else { 0 };
    // Bounded: each round either finds the file or creates it; EEXIST means another creator
    // won the race, and the next round checks what it made.
    for _ in 0..3 {
        match openat(
            dirfd.as_fd(),
            fname,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(pfd) => {
                let st = fstat(pfd.as_fd(), path)?;
                let marked = check_existing(path, pfd.as_fd(), &st, allow_destroy)?;
                let file = reopen(pfd.as_fd(), flags, true).map_err(io_err(path))?;
                hold(path, &file, &st, reach_of(marked))?;
                if inuse::batch::defers(reach_of(marked)) {
                    inuse::batch::defer(name, &resolved, (st.dev(), st.ino()));
                }
                if !marked {
                    super::mark::mark(&file, &st, name).map_err(io_err(path))?;
                    tracing::warn!(target_name = name, path = %resolved.display(),
                        "allow_destroy names this existing file: its contents will be destroyed");
                }
                return Ok(FileClaim {
                    file,
                    path: resolved,
                    created: false,
                });
            }
            Err(Errno::ENOENT) => match create(dirfd.as_fd(), fname, name) {
                Ok(made) => {
                    let st = made.metadata().map_err(io_err(path))?;
                    let file = reopen(made.as_fd(), flags, true).map_err(io_err(path))?;
                    hold(path, &file, &st, Reach::OwnFile)?;
                    if inuse::batch::defers(Reach::OwnFile) {
                        inuse::batch::defer(name, &resolved, (st.dev(), st.ino()));
                    }
                    return Ok(FileClaim {
                        file,
                        path: resolved,
                        created: true,
                    });
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
                Err(source) => {
                    return Err(SafetyError::Io {
                        path: path.to_path_buf(),
                        source,
                    });
                }
            },
            Err(e) => return Err(io_err(path)(e.into())),
        }
    }
    Err(SafetyError::Changed {
        path: path.to_path_buf(),
        reason: "it keeps appearing and disappearing while nvsoak opens it".into(),
    })
}

/// `check-config`'s view of a file target: the checks [`claim_file`] makes on an existing
/// file, in the same order and with the same messages, without creating, marking or keeping
/// anything. A path that does not exist yet passes (it would be created).
pub fn check_file_target(path: &Path, allow_destroy: Option<&str>) -> Result<(), SafetyError> {
    let resolved = resolve_file(path)?;
    let pfd = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&resolved)
    {
        Ok(f) => OwnedFd::from(f),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SafetyError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let st = fstat(pfd.as_fd(), path)?;
    let marked = check_existing(path, pfd.as_fd(), &st, allow_destroy)?;
    let ro = reopen(pfd.as_fd(), libc::O_RDONLY, false).map_err(io_err(path))?;
    hold(path, &ro, &st, reach_of(marked))
}

/// A file nvsoak made or marked is its own; any other may hold someone else's data.
fn reach_of(marked: bool) -> Reach {
    if marked { Reach::OwnFile } else { Reach::Every }
}

/// The checks on a file that exists, in order: a regular file; not backing a loop device, an
/// active swap file or mapped elsewhere (refused always); marked by nvsoak, or named by
/// `allow_destroy`. Returns whether it carries nvsoak's mark.
fn check_existing(
    path: &Path,
    pfd: BorrowedFd<'_>,
    st: &fs::Metadata,
    allow_destroy: Option<&str>,
) -> Result<bool, SafetyError> {
    if !st.file_type().is_file() {
        return Err(SafetyError::NotRegular {
            path: path.to_path_buf(),
            what: kind_of(st.file_type()),
        });
    }
    let ro = reopen(pfd, libc::O_RDONLY | libc::O_NONBLOCK, false).map_err(io_err(path))?;
    let marked = super::mark::is_marked(&ro, st);
    inuse::check_file(path, st, reach_of(marked))?;
    if marked {
        return Ok(true);
    }
    let named = allow_destroy
        .map(str::trim)
        .filter(|a| a.starts_with('/'))
        .is_some_and(|a| {
            fs::metadata(a).is_ok_and(|m| {
                m.file_type().is_file() && (m.dev(), m.ino()) == (st.dev(), st.ino())
            })
        });
    if named {
        Ok(false)
    } else {
        Err(SafetyError::NotOurs {
            path: path.to_path_buf(),
        })
    }
}

/// Take the exclusive lock that marks a file target as in use, or say who holds the file.
/// Other processes holding it open (a database, an editor) count as in use too.
/// `reach`: whether the file is nvsoak's own ([`Reach`]).
fn hold(path: &Path, file: &File, st: &fs::Metadata, reach: Reach) -> Result<(), SafetyError> {
    let since = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {
                let why = SafetyError::Busy {
                    path: path.to_path_buf(),
                    what: path.display().to_string(),
                    holders: inuse::file_openers(&SysRoot::host(), st, reach)
                        .unwrap_or_else(|why| vec![why.to_string()]),
                };
                if !transient(&why, since) {
                    return Err(why);
                }
            }
            Err(fs::TryLockError::Error(source)) => {
                return Err(SafetyError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    if inuse::batch::defers(reach) {
        // The batch's walk checks the openers (and the maps) once every claim is made.
        return Ok(());
    }
    let others = inuse::file_openers(&SysRoot::host(), st, reach).map_err(|why| {
        SafetyError::Unverifiable {
            path: path.to_path_buf(),
            why,
        }
    })?;
    if !others.is_empty() {
        return Err(SafetyError::Busy {
            path: path.to_path_buf(),
            what: path.display().to_string(),
            holders: others,
        });
    }
    Ok(())
}

/// Create the file under a temporary name, mark it, and link it into place: `linkat` fails
/// with EEXIST rather than replace anything that appeared at the path meanwhile.
fn create(dirfd: BorrowedFd<'_>, fname: &std::ffi::OsStr, name: &str) -> io::Result<File> {
    let tmp = format!(
        ".{}.nvsoak-new-{}",
        fname.to_string_lossy(),
        std::process::id()
    );
    let fd = openat(
        dirfd,
        tmp.as_str(),
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::from_bits_truncate(0o644),
    )?;
    let file = File::from(fd);
    let linked = (|| -> io::Result<()> {
        let st = file.metadata()?;
        super::mark::mark(&file, &st, name)?;
        linkat(
            dirfd,
            tmp.as_str(),
            dirfd,
            fname,
            nix::fcntl::AtFlags::empty(),
        )?;
        Ok(())
    })();
    let _ = unlinkat(dirfd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    linked.map(|()| file)
}

/// Where a file that does not exist yet would be created: symlinks followed (a dangling one to
/// its target), the nearest existing ancestor canonicalised, and `..` in the rest applied, so
/// `/dev/shm/../x.dat` is `/dev/x.dat`.
pub fn resolve_for_create(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // Follow a chain of (possibly dangling) symlinks at the last component, bounded like the
    // kernel's own limit.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(t) if t.is_absolute() => p = t,
                Ok(t) => p = p.parent().map(|d| d.join(&t)).unwrap_or(t),
                Err(_) => break,
            },
            _ => break,
        }
    }
    // The nearest existing ancestor, canonicalised, then the missing components lexically.
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut base = p.clone();
    let mut resolved = loop {
        if let Ok(c) = std::fs::canonicalize(&base) {
            break c;
        }
        match (base.file_name(), base.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                base = parent.to_path_buf();
            }
            _ => break base.clone(),
        }
    };
    for c in rest.iter().rev() {
        resolved.push(c);
    }
    // `..` and `.` that follow a missing directory, applied lexically.
    let mut out = PathBuf::new();
    for c in resolved.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_files_are_marked_and_existing_ones_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.dat");
        let c = claim_file("t", &p, None, false).unwrap();
        assert!(c.created);
        drop(c);
        // Ours now: reopened without allow_destroy.
        let c = claim_file("t", &p, None, false).unwrap();
        assert!(!c.created);
        drop(c);
        let other = d.path().join("theirs.dat");
        fs::write(&other, b"precious").unwrap();
        let e = claim_file("t", &other, None, false).unwrap_err();
        assert_eq!(e.check(), "allow_destroy", "{e}");
        assert_eq!(
            check_file_target(&other, None).unwrap_err().to_string(),
            e.to_string()
        );
        let e = claim_file("t", &other, Some("/elsewhere"), false).unwrap_err();
        assert_eq!(e.check(), "allow_destroy");
        assert_eq!(fs::read(&other).unwrap(), b"precious");
        let a = other.to_string_lossy().into_owned();
        assert!(check_file_target(&other, Some(&a)).is_ok());
        claim_file("t", &other, Some(&a), false).unwrap();
        // No temporary file left behind.
        let names: Vec<String> = fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("nvsoak-new"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_held_file_is_busy_and_names_no_one_for_this_process() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.dat");
        let held = claim_file("t", &p, None, false).unwrap();
        let e = claim_file("t2", &p, None, false).unwrap_err();
        assert_eq!(e.check(), "busy", "{e}");
        assert_eq!(check_file_target(&p, None).unwrap_err().check(), "busy");
        drop(held);
        assert!(check_file_target(&p, None).is_ok());
    }

    #[test]
    fn odd_file_types_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).unwrap();
        let e = claim_file("t", &fifo, Some(fifo.to_str().unwrap()), false).unwrap_err();
        assert!(e.to_string().contains("a FIFO"), "{e}");
        let dir = d.path().join("sub");
        fs::create_dir(&dir).unwrap();
        assert!(claim_file("t", &dir, None, false).is_err());
    }

    #[test]
    fn hard_links_and_symlinks_are_the_same_target() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.dat");
        fs::write(&a, b"x").unwrap();
        let b = d.path().join("b.dat");
        fs::hard_link(&a, &b).unwrap();
        let c = d.path().join("c.dat");
        std::os::unix::fs::symlink(&a, &c).unwrap();
        let e = same_targets([("a", a.as_path()), ("b", b.as_path())]).unwrap_err();
        assert_eq!(e.check(), "alias");
        assert!(
            e.to_string().contains("targets a and b are the same file"),
            "{e}"
        );
        assert!(same_targets([("a", a.as_path()), ("c", c.as_path())]).is_err());
        let n = d.path().join("new.dat");
        assert!(same_targets([("a", a.as_path()), ("n", n.as_path())]).is_ok());
    }
}
