//! The state directory's lock, and the check that a directory is nvsoak's before anything in it
//! is read, moved or written.
//!
//! A state directory is nvsoak's when its `lock` says so (`nvsoak pid=N`, the form this version
//! writes), or, for a directory without one or with an older bare-PID lock, when every entry in
//! it is a name nvsoak writes ([`is_nvsoak_name`]) and a `checkpoint.json` in it has the shape of
//! nvsoak's. Anything else (another application's directory, named directly or through a
//! symlink) is refused before its lock is truncated or its checkpoint moved aside.
//!
//! The directory itself must be owned by root or by this process's user, and not group- or
//! world-writable unless it is sticky and ours. The lock is opened beneath the directory's
//! descriptor with `O_NOFOLLOW` and `O_NONBLOCK`, created with `O_EXCL`, and must be a regular
//! file with one link owned by this user; only once it is locked is it truncated and written.
//!
//! Architecture Invariant: the lock's content is written only after the `flock` is held and the
//! directory and file were checked; a symlink, hard link, FIFO or foreign file in its place is
//! refused and left as it was (`tests/it/attacks.rs`, `state_lock_*`).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use super::sidecar::is_sidecar;
use super::{CHECKPOINT_FILE, StateError, io_err, parse_aside_name};

/// The lock's file name in the state directory.
pub const LOCK_FILE: &str = "lock";
/// What this version writes into the lock, before the PID.
const LOCK_PREFIX: &str = "nvsoak pid=";
/// More than any lock nvsoak writes; a larger one is not nvsoak's.
const LOCK_LIMIT: u64 = 64;
/// The largest checkpoint peeked at to tell whether a lockless directory is nvsoak's.
const CHECKPOINT_PEEK_LIMIT: u64 = 256 << 20;

/// An exclusive lock on a state directory, held while a daemon runs so that two nvsoak
/// processes never share one checkpoint. Released on drop (and by the kernel on exit).
#[derive(Debug)]
pub struct StateLock {
    _lock: nix::fcntl::Flock<File>,
    pub path: PathBuf,
    /// The state directory as `lock` named it: while the lock is held, [`StateDir::open`] of
    /// it hands out the descriptor checked here.
    ///
    /// [`StateDir::open`]: crate::util::beneath::StateDir::open
    dir: PathBuf,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        crate::util::beneath::release(&self.dir);
    }
}

/// Whether nvsoak writes an entry of this name at the top of a state directory: its lock,
/// checkpoint, generation maps, known-drives list, results and marks folders, their moved-aside
/// copies (`.corrupt-<ts>`, ...) and the temporary files of an atomic write (`.NAME.tmp-…`).
pub fn is_nvsoak_name(name: &str) -> bool {
    let base = |n: &str| {
        matches!(
            n,
            LOCK_FILE | CHECKPOINT_FILE | "drives.json" | "results" | "marks"
        ) || is_sidecar(n)
    };
    if base(name) {
        return true;
    }
    if let Some((orig, _, _)) = parse_aside_name(name) {
        return base(orig);
    }
    name.strip_prefix('.')
        .and_then(|n| n.split_once(".tmp-"))
        .is_some_and(|(orig, _)| base(orig))
}

/// What a lock file holds.
#[derive(Debug, PartialEq, Eq)]
enum LockText {
    /// `nvsoak pid=N`: this version's.
    Ours(String),
    /// Empty, or a bare PID (earlier versions): nvsoak's only if the directory is.
    Plain(String),
    /// Anything else.
    Foreign,
}

fn classify(text: &str) -> LockText {
    let t = text.trim();
    if let Some(pid) = t.strip_prefix(LOCK_PREFIX) {
        if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
            return LockText::Ours(pid.to_string());
        }
        return LockText::Foreign;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        LockText::Plain(t.to_string())
    } else {
        LockText::Foreign
    }
}

fn not_ours(dir: &Path, why: impl Into<String>) -> StateError {
    StateError::NotOurs {
        path: dir.to_path_buf(),
        why: why.into(),
    }
}

fn open_dir(dir: &Path) -> Result<OwnedFd, StateError> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map(OwnedFd::from)
        .map_err(io_err(dir))
}

/// The directory's owner and mode: root's or ours, and writable by no one else unless sticky
/// and ours.
fn check_dir_meta(dir: &Path, st: &fs::Metadata) -> Result<(), StateError> {
    let me = nix::unistd::geteuid().as_raw();
    if st.uid() != 0 && st.uid() != me {
        return Err(not_ours(
            dir,
            format!(
                "it is owned by uid {}, not by root or by this user",
                st.uid()
            ),
        ));
    }
    let others_write = st.mode() & 0o022 != 0;
    let sticky_ours = st.mode() & 0o1000 != 0 && st.uid() == me;
    if others_write && !sticky_ours {
        return Err(StateError::Unsafe {
            path: dir.to_path_buf(),
            why: format!(
                "it is writable by its group or by everyone (mode {:o}); run `chmod go-w` on it",
                st.mode() & 0o7777
            ),
        });
    }
    Ok(())
}

/// Every entry of a directory without an nvsoak lock must be a name nvsoak writes, and its
/// checkpoint (if any) must look like nvsoak's.
fn check_entries(dir: &Path, dirfd: &OwnedFd) -> Result<(), StateError> {
    // Listed through the open descriptor: the directory checked is the directory listed.
    let listed = PathBuf::from(format!("/proc/self/fd/{}", dirfd.as_raw_fd()));
    for entry in fs::read_dir(&listed).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !is_nvsoak_name(&name) {
            return Err(not_ours(
                dir,
                format!("it holds \"{name}\", which nvsoak never writes, and no nvsoak lock"),
            ));
        }
    }
    match openat(
        dirfd.as_fd(),
        CHECKPOINT_FILE,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Err(Errno::ENOENT) => Ok(()),
        Err(Errno::ELOOP) => Err(not_ours(dir, "its checkpoint.json is a symbolic link")),
        Err(e) => Err(io_err(&dir.join(CHECKPOINT_FILE))(e.into())),
        Ok(fd) => {
            let f = File::from(fd);
            let st = f.metadata().map_err(io_err(dir))?;
            if !st.file_type().is_file() || st.len() > CHECKPOINT_PEEK_LIMIT {
                return Err(not_ours(
                    dir,
                    "its checkpoint.json is not a regular file of nvsoak's size",
                ));
            }
            let mut text = Vec::new();
            f.take(CHECKPOINT_PEEK_LIMIT)
                .read_to_end(&mut text)
                .map_err(io_err(dir))?;
            let shaped = serde_json::from_slice::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .is_some_and(|o| {
                    o.get("plan_hash").is_some_and(|h| h.is_string())
                        && o.get("targets").is_some_and(|t| t.is_array())
                });
            if shaped {
                Ok(())
            } else {
                Err(not_ours(
                    dir,
                    "its checkpoint.json is not one nvsoak wrote, and it has no nvsoak lock",
                ))
            }
        }
    }
}

/// Open the existing lock (never following a symlink, never blocking on a FIFO), checked to be
/// a regular file with one link owned by this user. `None`: there is none.
fn open_lock(dir: &Path, dirfd: &OwnedFd) -> Result<Option<(File, LockText)>, StateError> {
    let path = dir.join(LOCK_FILE);
    let fd = match openat(
        dirfd.as_fd(),
        LOCK_FILE,
        OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => {
            return Err(StateError::Unsafe {
                path: dir.to_path_buf(),
                why: "its lock is a symbolic link; nvsoak never follows one there".into(),
            });
        }
        Err(Errno::EISDIR) => return Err(not_ours(dir, "its lock is a directory")),
        Err(e) => return Err(io_err(&path)(e.into())),
    };
    let mut f = File::from(fd);
    let st = f.metadata().map_err(io_err(&path))?;
    if !st.file_type().is_file() {
        return Err(not_ours(dir, "its lock is not a regular file"));
    }
    if st.nlink() != 1 {
        return Err(StateError::Unsafe {
            path: dir.to_path_buf(),
            why: format!("its lock has {} hard links; nvsoak's has one", st.nlink()),
        });
    }
    if st.uid() != nix::unistd::geteuid().as_raw() {
        return Err(not_ours(
            dir,
            format!("its lock is owned by uid {}, not by this user", st.uid()),
        ));
    }
    if st.len() > LOCK_LIMIT {
        return Err(not_ours(dir, "its lock is larger than any nvsoak writes"));
    }
    let mut text = String::new();
    (&mut f)
        .take(LOCK_LIMIT)
        .read_to_string(&mut text)
        .map_err(|_| not_ours(dir, "its lock is not text nvsoak writes"))?;
    Ok(Some((f, classify(&text))))
}

/// nvsoak's folders in a state directory: neither may be a symbolic link, which would send
/// every record written into it elsewhere. (Every file inside is reached beneath the
/// directory's descriptor with `RESOLVE_NO_SYMLINKS` anyway, so a link made later is refused
/// when it is reached; this says so at start, in `check-config` too, rather than as a failed
/// save.) A symlink in the place of a record file (`checkpoint.json`, `drives.json`) is read as
/// no record of nvsoak's and moved aside: renaming a link never touches what it points to.
const NEVER_LINKS: [&str; 2] = ["results", "marks"];

fn refuse_links(dir: &Path, dirfd: &OwnedFd) -> Result<(), StateError> {
    for name in NEVER_LINKS {
        let st = nix::sys::stat::fstatat(
            dirfd.as_fd(),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        );
        if st.is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK) {
            return Err(StateError::Unsafe {
                path: dir.to_path_buf(),
                why: format!(
                    "its {name} is a symbolic link; nvsoak never follows one inside its state directory (remove the link, or give state.dir a directory of its own)"
                ),
            });
        }
    }
    Ok(())
}

/// The checks [`lock`] makes before it takes or writes anything, on the open directory:
/// returns the lock file when there is one, whether nvsoak's directory check passed.
fn checked(dir: &Path, dirfd: &OwnedFd) -> Result<Option<(File, LockText)>, StateError> {
    let st = File::from(dirfd.try_clone().map_err(io_err(dir))?)
        .metadata()
        .map_err(io_err(dir))?;
    check_dir_meta(dir, &st)?;
    refuse_links(dir, dirfd)?;
    let lock = open_lock(dir, dirfd)?;
    match &lock {
        Some((_, LockText::Ours(_))) => {}
        Some((_, LockText::Foreign)) => {
            return Err(not_ours(
                dir,
                "its lock holds something nvsoak never writes",
            ));
        }
        Some((_, LockText::Plain(_))) | None => check_entries(dir, dirfd)?,
    }
    Ok(lock)
}

/// `check-config`'s view of `state.dir`: the checks [`lock`] makes, with the same messages,
/// creating, locking and writing nothing. A directory that does not exist yet passes (it
/// would be created).
pub fn check(dir: &Path) -> Result<(), StateError> {
    let dirfd = match open_dir(dir) {
        Err(StateError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(());
        }
        r => r?,
    };
    checked(dir, &dirfd).map(|_| ())
}

/// Take the state directory's lock (`<dir>/lock`, holding `nvsoak pid=N`), creating `dir` (mode
/// 0750) if needed, after the checks in the module docs. Fails at once if another process
/// holds it.
pub fn lock(dir: &Path) -> Result<StateLock, StateError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(io_err(dir))?;
    let dirfd = open_dir(dir)?;
    let path = dir.join(LOCK_FILE);
    // Bounded: EEXIST on create means another nvsoak made the lock meanwhile; the next round
    // opens what it made.
    for _ in 0..3 {
        let file = match checked(dir, &dirfd)? {
            Some((f, _)) => f,
            None => match openat(
                dirfd.as_fd(),
                LOCK_FILE,
                OFlag::O_RDWR
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o644),
            ) {
                Ok(fd) => File::from(fd),
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(io_err(&path)(e.into())),
            },
        };
        let held = take(dir, &path, file)?;
        // From here on the state directory is reached through the descriptor just checked.
        crate::util::beneath::hold(dir, dirfd);
        return Ok(held);
    }
    Err(io_err(&path)(io::Error::other(
        "the lock keeps appearing and disappearing",
    )))
}

fn take(dir: &Path, path: &Path, file: File) -> Result<StateLock, StateError> {
    let mut lock = match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
    {
        Ok(l) => l,
        Err((mut f, Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            let _ = io::Seek::seek(&mut f, io::SeekFrom::Start(0));
            let _ = (&mut f).take(LOCK_LIMIT).read_to_string(&mut text);
            let owner = match classify(&text) {
                LockText::Ours(p) | LockText::Plain(p) => p,
                LockText::Foreign => String::new(),
            };
            return Err(StateError::Locked {
                path: dir.to_path_buf(),
                owner,
            });
        }
        Err((_, e)) => return Err(io_err(path)(io::Error::from(e))),
    };
    let f: &mut File = &mut lock;
    let text = format!("{LOCK_PREFIX}{}\n", std::process::id());
    f.set_len(0)
        .and_then(|_| io::Seek::seek(f, io::SeekFrom::Start(0)))
        .and_then(|_| f.write_all(text.as_bytes()))
        .map_err(io_err(path))?;
    Ok(StateLock {
        _lock: lock,
        path: path.to_path_buf(),
        dir: dir.to_path_buf(),
    })
}

/// The PID of the daemon holding the state directory now, `None` when none does (no lock, or
/// nobody holds it). Probed with a shared, non-blocking lock on the lock file opened without
/// following a symlink, released at once.
pub fn holder(dir: &Path) -> Option<String> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(LOCK_FILE))
        .ok()?;
    if !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock) {
        Err((mut f, Errno::EWOULDBLOCK)) => {
            let mut text = String::new();
            let _ = (&mut f).take(LOCK_LIMIT).read_to_string(&mut text);
            Some(match classify(&text) {
                LockText::Ours(p) | LockText::Plain(p) => p,
                LockText::Foreign => "unknown".into(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lock_text_is_classified() {
        assert_eq!(classify("nvsoak pid=42\n"), LockText::Ours("42".into()));
        assert_eq!(classify("42"), LockText::Plain("42".into()));
        assert_eq!(classify(""), LockText::Plain(String::new()));
        assert_eq!(classify("nvsoak pid=x"), LockText::Foreign);
        assert_eq!(classify("postgres 42"), LockText::Foreign);
    }

    #[test]
    fn names_nvsoak_writes() {
        for n in [
            "lock",
            "checkpoint.json",
            "checkpoint.json.corrupt-1764573000",
            "checkpoint.json.reset-1764573000-2",
            "genmap-0-t0-123.bin",
            "genmap-0-t0-123.bin.stale-1764573000",
            ".checkpoint.json.tmp-12-3",
            ".drives.json.tmp-1-0",
            "drives.json",
            "results",
            "marks",
        ] {
            assert!(is_nvsoak_name(n), "{n}");
        }
        for n in [
            "data.db",
            "checkpoint.json.bak",
            ".x.tmp-1-2",
            "lock2",
            "genmap.bin",
        ] {
            assert!(!is_nvsoak_name(n), "{n}");
        }
    }

    #[test]
    fn the_lock_is_written_only_once_held_and_says_whose() {
        let d = tempfile::tempdir().expect("tempdir");
        let held = lock(d.path()).expect("lock");
        let text = fs::read_to_string(d.path().join(LOCK_FILE)).expect("read");
        assert_eq!(text, format!("nvsoak pid={}\n", std::process::id()));
        assert_eq!(holder(d.path()), Some(std::process::id().to_string()));
        match lock(d.path()) {
            Err(StateError::Locked { owner, .. }) => {
                assert_eq!(owner, std::process::id().to_string())
            }
            other => panic!("{other:?}"),
        }
        drop(held);
        assert_eq!(holder(d.path()), None);
        // An earlier version's bare PID in an nvsoak-only directory is taken over.
        fs::write(d.path().join(LOCK_FILE), "1234").expect("write");
        fs::write(d.path().join("drives.json"), "{}").expect("write");
        lock(d.path()).expect("legacy lock");
    }

    #[test]
    fn a_foreign_or_unsafe_directory_is_refused_untouched() {
        let d = tempfile::tempdir().expect("tempdir");
        fs::write(d.path().join(LOCK_FILE), "other app").expect("write");
        fs::write(d.path().join("data.db"), "precious").expect("write");
        let e = lock(d.path()).expect_err("foreign lock");
        assert!(matches!(e, StateError::NotOurs { .. }), "{e}");
        assert_eq!(
            check(d.path()).expect_err("check").to_string(),
            e.to_string()
        );
        assert_eq!(
            fs::read_to_string(d.path().join(LOCK_FILE)).expect("read"),
            "other app"
        );
        // A bare PID lock does not make a directory with other files nvsoak's.
        fs::write(d.path().join(LOCK_FILE), "77").expect("write");
        let e = lock(d.path()).expect_err("foreign entries");
        assert!(e.to_string().contains("\"data.db\""), "{e}");
        assert_eq!(
            fs::read_to_string(d.path().join(LOCK_FILE)).expect("read"),
            "77"
        );
        // A world-writable, not sticky directory.
        let w = tempfile::tempdir().expect("tempdir");
        fs::set_permissions(w.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = lock(w.path()).expect_err("world-writable");
        assert!(matches!(e, StateError::Unsafe { .. }), "{e}");
        fs::set_permissions(w.path(), fs::Permissions::from_mode(0o1777)).expect("chmod");
        lock(w.path()).expect("sticky and ours");
    }

    #[test]
    fn a_symlink_hard_link_or_fifo_lock_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().expect("tempdir");
        let victim = d.path().join("victim");
        fs::write(&victim, "x".repeat(4096)).expect("write");
        let st = d.path().join("st");
        fs::create_dir(&st).expect("mkdir");
        std::os::unix::fs::symlink(&victim, st.join(LOCK_FILE)).expect("symlink");
        let e = lock(&st).expect_err("symlink lock");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(check(&st).is_err());
        fs::remove_file(st.join(LOCK_FILE)).expect("rm");
        fs::hard_link(&victim, st.join(LOCK_FILE)).expect("link");
        let e = lock(&st).expect_err("hard-linked lock");
        assert!(e.to_string().contains("hard links"), "{e}");
        assert_eq!(fs::metadata(&victim).expect("stat").len(), 4096);
        fs::remove_file(st.join(LOCK_FILE)).expect("rm");
        nix::unistd::mkfifo(&st.join(LOCK_FILE), Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let e = lock(&st).expect_err("fifo lock");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
