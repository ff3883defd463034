//! The state directory, reached through one descriptor: every file nvsoak keeps in it (the
//! checkpoint and its generation maps, the results files and OCPTV records, the known-drives
//! list, the marks of file targets) is opened, created, listed, renamed and removed beneath
//! that descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, never by a path
//! joined onto `state.dir`. A symlink anywhere inside (`results -> /etc`, `marks -> /root`,
//! `checkpoint.json -> victim`) is refused with `ELOOP`, never followed, and `..` cannot climb
//! out.
//!
//! While a daemon holds the directory's lock ([`crate::state::lock`]), [`StateDir::open`] hands out the
//! descriptor the lock checked, so a directory renamed away and replaced by a symlink after the
//! check is not the one written: the records keep going to the directory that was checked.
//! Without a lock (`nvsoak state show`, `nvsoak report`) the directory named is opened afresh.
//!
//! New files are made with `O_EXCL` under a temporary name and renamed into place after an
//! fsync; records go aside with `RENAME_NOREPLACE`, so no rename ever lands on another file.
//! On a kernel without `openat2` (before 5.6, or a seccomp filter that answers `ENOSYS`) each
//! component is opened in turn with `O_NOFOLLOW`, which refuses the same symlinks.
//!
//! Architecture Invariant: nothing in `state` (nor the marks, nor the known-drives list, nor the
//! report's reading of results) reaches a file in the state directory except through here
//! (`tests/it/state_attacks.rs`, `symlinks_inside_the_state_directory_*`).

use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::Mode;

/// The state directories this process holds the lock of, with the descriptor the lock checked.
static HELD: Mutex<Vec<(PathBuf, Arc<OwnedFd>)>> = Mutex::new(Vec::new());

/// Remember `fd` as the checked descriptor of `path` while its lock is held.
pub(crate) fn hold(path: &Path, fd: OwnedFd) {
    crate::util::lock(&HELD).push((path.to_path_buf(), Arc::new(fd)));
}

/// Forget `path`'s descriptor: its lock was released.
pub(crate) fn release(path: &Path) {
    let mut held = crate::util::lock(&HELD);
    if let Some(i) = held.iter().rposition(|(p, _)| p == path) {
        held.remove(i);
    }
}

/// A state directory's descriptor, and its path for messages.
#[derive(Debug, Clone)]
pub struct StateDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

/// What [`StateDir::list`] found at one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// A regular file (not a symlink, FIFO or directory).
    pub is_file: bool,
}

fn errno(e: Errno) -> io::Error {
    io::Error::from(e)
}

/// `rel` split into its components, refused when it is absolute, empty, or climbs (`..`).
fn components(rel: &str) -> io::Result<Vec<&str>> {
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if rel.starts_with('/') || parts.is_empty() || parts.contains(&"..") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("\"{rel}\" is not a name inside the state directory"),
        ));
    }
    Ok(parts)
}

/// `rel`'s parent (`""` for a name at the top) and its last component.
fn split_last(rel: &str) -> io::Result<(String, String)> {
    let parts = components(rel)?;
    let (last, dirs) = parts.split_last().expect("components are never empty");
    Ok((dirs.join("/"), (*last).to_string()))
}

impl StateDir {
    /// The state directory at `path`: the descriptor its lock checked when this process holds
    /// that lock, else `path` opened now (a symlink at `path` itself is followed: the config may
    /// name one; what is inside is never followed).
    pub fn open(path: &Path) -> io::Result<StateDir> {
        if let Some((_, fd)) = crate::util::lock(&HELD)
            .iter()
            .rev()
            .find(|(p, _)| p == path)
        {
            return Ok(StateDir {
                fd: fd.clone(),
                path: path.to_path_buf(),
            });
        }
        let fd = openat(
            AT_FDCWD,
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno)?;
        Ok(StateDir {
            fd: Arc::new(fd),
            path: path.to_path_buf(),
        })
    }

    /// The directory's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` as a path, for messages only (never opened).
    pub fn display(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Open `rel` beneath the directory, following no symlink on the way and not climbing out.
    fn open_at(&self, rel: &str, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        let parts = components(rel)?;
        // openat2 refuses O_PATH with any flag but O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC.
        let flags = if flags.contains(OFlag::O_PATH) {
            flags | OFlag::O_CLOEXEC
        } else {
            flags | OFlag::O_CLOEXEC | OFlag::O_NOCTTY
        };
        let how = OpenHow::new().flags(flags).mode(mode).resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        match openat2(self.fd.as_fd(), rel, how) {
            Err(Errno::ENOSYS) => {}
            r => return r.map_err(errno),
        }
        // No openat2: one component at a time, none of them followed if it is a symlink.
        let (last, dirs) = parts.split_last().expect("components are never empty");
        let mut cur: Option<OwnedFd> = None;
        for d in dirs {
            let at = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
            let next = openat(
                at,
                *d,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| errno(if e == Errno::ENOTDIR { Errno::ELOOP } else { e }))?;
            cur = Some(next);
        }
        let at = cur.as_ref().map_or(self.fd.as_fd(), |f| f.as_fd());
        openat(at, *last, flags | OFlag::O_NOFOLLOW, mode).map_err(errno)
    }

    /// The directory `rel` (`""`: the state directory itself), opened for listing and fsync.
    fn dir_at(&self, rel: &str) -> io::Result<OwnedFd> {
        if rel.is_empty() {
            return self.fd.try_clone();
        }
        self.open_at(rel, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty())
    }

    /// The whole of the regular file `rel`, at most `limit` bytes ([`crate::util::bounded`]):
    /// a symlink anywhere on the way is `ELOOP`, a FIFO does not block, a directory or device
    /// is refused.
    pub fn read(&self, rel: &str, limit: u64) -> io::Result<Vec<u8>> {
        let fd = self.open_at(rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK, Mode::empty())?;
        crate::util::bounded::read_opened(File::from(fd), limit)
    }

    /// The regular file `rel` opened for reading (with its metadata), for a caller that judges
    /// its owner or mode before reading it.
    pub fn open_file(&self, rel: &str) -> io::Result<(File, std::fs::Metadata)> {
        let fd = self.open_at(rel, OFlag::O_RDONLY | OFlag::O_NONBLOCK, Mode::empty())?;
        let f = File::from(fd);
        let meta = f.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}, not a regular file",
                    crate::util::bounded::kind_of(meta.file_type())
                ),
            ));
        }
        Ok((f, meta))
    }

    /// Whether anything (a symlink included, not followed) is at `rel`.
    pub fn exists(&self, rel: &str) -> bool {
        self.open_at(rel, OFlag::O_PATH | OFlag::O_NOFOLLOW, Mode::empty())
            .is_ok()
    }

    /// Create the directories of `rel` beneath this one (mode 0750), each checked to be a
    /// directory and not a symlink once it is there.
    pub fn create_dirs(&self, rel: &str) -> io::Result<()> {
        let parts = components(rel)?;
        for i in 1..=parts.len() {
            let sub = parts[..i].join("/");
            let (parent, name) = split_last(&sub)?;
            let pd = self.dir_at(&parent)?;
            match nix::sys::stat::mkdirat(
                pd.as_fd(),
                name.as_str(),
                Mode::from_bits_truncate(0o750),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(errno(e)),
            }
            self.dir_at(&sub)?;
        }
        Ok(())
    }

    /// fsync the directory `rel` (`""`: the state directory), so renames into it survive a
    /// crash.
    pub fn sync(&self, rel: &str) -> io::Result<()> {
        File::from(self.dir_at(rel)?).sync_all()
    }

    /// Write `rel` atomically: `fill` writes a new temporary file beside it (`O_EXCL`, never an
    /// existing file), which is fsynced and renamed over `rel`; on any failure the temporary
    /// file is removed. Its directory is not synced ([`StateDir::sync`]).
    pub fn write_atomic<T>(
        &self,
        rel: &str,
        fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
    ) -> io::Result<T> {
        let (parent, name) = split_last(rel)?;
        let pd = self.dir_at(&parent)?;
        let tmp = crate::util::tmp_name(&name);
        let f = openat(
            pd.as_fd(),
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )
        .map_err(errno)?;
        let res = (|| {
            let mut w = BufWriter::with_capacity(1 << 20, File::from(f));
            let out = fill(&mut w)?;
            let f = w.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()?;
            nix::fcntl::renameat(pd.as_fd(), tmp.as_str(), pd.as_fd(), name.as_str())
                .map_err(errno)?;
            Ok(out)
        })();
        if res.is_err() {
            let _ = nix::unistd::unlinkat(
                pd.as_fd(),
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        res
    }

    /// [`StateDir::write_atomic`] of `data`, then its directory synced.
    pub fn write_all(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        self.write_atomic(rel, |w| io::Write::write_all(w, data))?;
        self.sync(&split_last(rel)?.0)
    }

    /// Rename `from` to `to` (both beneath this directory), never over an existing file
    /// (`RENAME_NOREPLACE`; `EEXIST` when `to` is taken). Where the filesystem does not take
    /// that flag, `to` is looked for first.
    pub fn rename_noreplace(&self, from: &str, to: &str) -> io::Result<()> {
        let (fp, fname) = split_last(from)?;
        let (tp, tname) = split_last(to)?;
        let fd = self.dir_at(&fp)?;
        let td = self.dir_at(&tp)?;
        match nix::fcntl::renameat2(
            fd.as_fd(),
            fname.as_str(),
            td.as_fd(),
            tname.as_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Err(Errno::EINVAL) | Err(Errno::ENOSYS) => {
                if self.exists(to) {
                    return Err(errno(Errno::EEXIST));
                }
                nix::fcntl::renameat(fd.as_fd(), fname.as_str(), td.as_fd(), tname.as_str())
                    .map_err(errno)
            }
            r => r.map_err(errno),
        }
    }

    /// Remove the file `rel` (never a directory).
    pub fn remove(&self, rel: &str) -> io::Result<()> {
        let (parent, name) = split_last(rel)?;
        let pd = self.dir_at(&parent)?;
        nix::unistd::unlinkat(
            pd.as_fd(),
            name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(errno)
    }

    /// The entries of the directory `rel` (`""`: the state directory), sorted by name; `.` and
    /// `..` left out. A symlink in `rel`'s place is `ELOOP`.
    pub fn list(&self, rel: &str) -> io::Result<Vec<Entry>> {
        let d = nix::dir::Dir::from_fd(self.dir_at(rel)?).map_err(errno)?;
        let mut out = Vec::new();
        for e in d {
            let e = e.map_err(errno)?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let is_file = match e.file_type() {
                Some(t) => t == nix::dir::Type::File,
                None => {
                    let at = if rel.is_empty() {
                        name.clone()
                    } else {
                        format!("{rel}/{name}")
                    };
                    self.open_at(&at, OFlag::O_PATH | OFlag::O_NOFOLLOW, Mode::empty())
                        .and_then(|fd| Ok(File::from(fd).metadata()?.file_type().is_file()))
                        .unwrap_or(false)
                }
            };
            out.push(Entry { name, is_file });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn names_that_climb_out_or_are_absolute_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "results/../../x", "."] {
            assert!(components(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            components("results/t0.json").expect("ok"),
            ["results", "t0.json"]
        );
    }

    #[test]
    fn a_symlink_inside_is_never_followed_for_reading_writing_listing_or_renaming() {
        let d = tempfile::tempdir().expect("tempdir");
        let victim = d.path().join("victim");
        fs::create_dir(&victim).expect("mkdir");
        fs::write(victim.join("t0.json"), b"precious").expect("write");
        let st = d.path().join("st");
        fs::create_dir(&st).expect("mkdir");
        std::os::unix::fs::symlink(&victim, st.join("results")).expect("symlink");
        std::os::unix::fs::symlink(victim.join("t0.json"), st.join("checkpoint.json"))
            .expect("symlink");
        let sd = StateDir::open(&st).expect("open");
        let loops = |e: io::Error| assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        loops(
            sd.read("results/t0.json", 1 << 20)
                .expect_err("through a symlinked dir"),
        );
        loops(
            sd.read("checkpoint.json", 1 << 20)
                .expect_err("a symlinked file"),
        );
        loops(
            sd.write_all("results/t1.json", b"x")
                .expect_err("write through it"),
        );
        loops(sd.list("results").expect_err("list through it"));
        loops(
            sd.create_dirs("results")
                .expect_err("a symlink is no directory"),
        );
        loops(
            sd.rename_noreplace("results/t0.json", "results/t0.json.reset-1")
                .expect_err("rename through it"),
        );
        assert!(sd.exists("results"), "the symlink itself is there");
        let names: Vec<_> = fs::read_dir(&victim).expect("ls").flatten().collect();
        assert_eq!(names.len(), 1, "nothing written into the victim: {names:?}");
        assert_eq!(fs::read(victim.join("t0.json")).expect("read"), b"precious");
    }

    #[test]
    fn writes_are_atomic_renames_never_replace_and_listing_tells_files() {
        let d = tempfile::tempdir().expect("tempdir");
        let sd = StateDir::open(d.path()).expect("open");
        sd.create_dirs("results").expect("mkdir");
        sd.write_all("results/a.json", b"one").expect("write");
        sd.write_all("results/a.json", b"two").expect("rewrite");
        sd.write_all("results/b.json", b"three").expect("write");
        assert_eq!(sd.read("results/a.json", 3).expect("read"), b"two");
        assert!(sd.read("results/a.json", 2).is_err(), "over the limit");
        let e = sd
            .rename_noreplace("results/a.json", "results/b.json")
            .expect_err("b is taken");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(sd.read("results/b.json", 16).expect("read"), b"three");
        sd.rename_noreplace("results/a.json", "results/a.json.reset-1")
            .expect("rename");
        let mkfifo = |p: &Path| nix::unistd::mkfifo(p, Mode::from_bits_truncate(0o600));
        mkfifo(&d.path().join("results/fifo")).expect("mkfifo");
        assert!(
            sd.read("results/fifo", 16).is_err(),
            "a FIFO does not block"
        );
        let listed = sd.list("results").expect("ls");
        let names: Vec<_> = listed
            .iter()
            .map(|e| (e.name.as_str(), e.is_file))
            .collect();
        assert_eq!(
            names,
            [("a.json.reset-1", true), ("b.json", true), ("fifo", false)]
        );
        sd.remove("results/fifo").expect("rm");
        assert!(!sd.exists("results/fifo"));
    }

    #[test]
    fn a_held_directory_is_the_one_written_even_after_its_path_is_swapped() {
        let d = tempfile::tempdir().expect("tempdir");
        let st = d.path().join("st");
        fs::create_dir(&st).expect("mkdir");
        let fd = openat(
            AT_FDCWD,
            &st,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .expect("open");
        hold(&st, fd);
        let victim = d.path().join("victim");
        fs::create_dir(&victim).expect("mkdir");
        fs::rename(&st, d.path().join("moved")).expect("mv");
        std::os::unix::fs::symlink(&victim, &st).expect("symlink");
        StateDir::open(&st)
            .expect("held")
            .write_all("drives.json", b"{}")
            .expect("write");
        release(&st);
        assert!(
            d.path().join("moved/drives.json").exists(),
            "written where checked"
        );
        assert_eq!(
            fs::read_dir(&victim).expect("ls").count(),
            0,
            "victim untouched"
        );
    }
}
