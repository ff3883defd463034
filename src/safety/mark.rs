//! A file target's mark: what makes an existing file nvsoak's to overwrite without
//! `allow_destroy`. Only nvsoak's own privilege can write it:
//!
//! - as root, the `trusted.nvsoak.target` extended attribute (setting a `trusted.` attribute
//!   needs `CAP_SYS_ADMIN`);
//! - otherwise the `user.nvsoak.target` attribute, believed only on a file owned by this user
//!   that no one else may write (mode without group or other write, no access-control list):
//!   setting a `user.` attribute needs write permission on the file;
//! - where the filesystem takes neither (ramfs, tmpfs before Linux 6.6 for a non-root user), a
//!   record in nvsoak's own state directory, `marks/<dev>-<ino>`, reached beneath the checked
//!   state directory ([`use_state_dir`]).
//!
//! Every mark names the file's inode and device, so a file put in its place is not nvsoak's.
//! A plain-text `.NAME.nvsoak` beside the file (what earlier versions wrote where extended
//! attributes were missing) is never believed: anyone who can write the directory can forge it.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::util::beneath::StateDir;

/// The attribute nvsoak sets as root.
pub const TRUSTED_XATTR: &str = "trusted.nvsoak.target";
/// The attribute nvsoak sets when not root (believed only on its own, unshared files).
pub const USER_XATTR: &str = "user.nvsoak.target";

static STATE_DIR: OnceLock<PathBuf> = OnceLock::new();

/// The folder of marks in the state directory.
const MARKS_DIR: &str = "marks";

/// Where marks go when a filesystem takes no extended attributes: `<state.dir>/marks`, reached
/// beneath the state directory's descriptor ([`StateDir`]). Set once by the daemon after it
/// took the state directory's lock (which checked the directory).
pub fn use_state_dir(state_dir: &std::path::Path) {
    let _ = STATE_DIR.set(state_dir.to_path_buf());
}

fn value(name: &str, st: &fs::Metadata) -> String {
    format!("nvsoak target={name} ino={} dev={}", st.ino(), st.dev())
}

/// Whether `v` is a mark for this inode. `need_dev`: the device must be named too (marks this
/// version writes); earlier versions' `user.` marks named only the inode.
fn matches(v: &str, st: &fs::Metadata, need_dev: bool) -> bool {
    let field = |k: &str| {
        v.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .map(str::to_string)
    };
    v.starts_with("nvsoak ")
        && field("ino=") == Some(st.ino().to_string())
        && match field("dev=") {
            Some(d) => d == st.dev().to_string(),
            None => !need_dev,
        }
}

fn get(file: &File, name: &std::ffi::CStr) -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the name is NUL-terminated, buf is writable for buf.len() bytes, and the fd is
    // open for the duration of the call.
    let n = unsafe {
        libc::fgetxattr(
            file.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    (n > 0).then(|| String::from_utf8_lossy(&buf[..n as usize]).into_owned())
}

fn set(file: &File, name: &std::ffi::CStr, value: &str) -> io::Result<()> {
    // SAFETY: the name is NUL-terminated, value is readable for its length, and the fd is open
    // for the duration of the call.
    let r = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Only this user can write the file and its `user.` attributes.
fn unshared(file: &File, st: &fs::Metadata) -> bool {
    st.uid() == me() && st.mode() & 0o022 == 0 && get(file, c"system.posix_acl_access").is_none()
}

/// The state directory and the record's name beneath it, `marks/<dev>-<ino>`.
fn record_path(st: &fs::Metadata) -> Option<(PathBuf, String)> {
    STATE_DIR
        .get()
        .map(|d| (d.clone(), format!("{MARKS_DIR}/{}-{}", st.dev(), st.ino())))
}

fn recorded(st: &fs::Metadata) -> bool {
    let Some((dir, rel)) = record_path(st) else {
        return false;
    };
    let Ok((f, m)) = StateDir::open(&dir).and_then(|sd| sd.open_file(&rel)) else {
        return false;
    };
    let ours = m.uid() == me() && m.mode() & 0o022 == 0;
    let mut text = String::new();
    ours && f.take(512).read_to_string(&mut text).is_ok() && matches(text.trim(), st, true)
}

/// Whether `file` (with metadata `st`) carries a mark only nvsoak could have written.
pub fn is_marked(file: &File, st: &fs::Metadata) -> bool {
    if get(file, c"trusted.nvsoak.target").is_some_and(|v| matches(&v, st, true)) {
        return true;
    }
    if get(file, c"user.nvsoak.target").is_some_and(|v| matches(&v, st, false))
        && unshared(file, st)
    {
        return true;
    }
    recorded(st)
}

/// Mark `file` as target `name`'s: the strongest mark the filesystem takes (module docs).
pub fn mark(file: &File, st: &fs::Metadata, name: &str) -> io::Result<()> {
    let v = value(name, st);
    let unsupported = |e: &io::Error| {
        matches!(
            e.raw_os_error(),
            Some(libc::ENOTSUP) | Some(libc::EPERM) | Some(libc::EACCES)
        )
    };
    if me() == 0 {
        match set(file, c"trusted.nvsoak.target", &v) {
            Ok(()) => return Ok(()),
            Err(e) if unsupported(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if unshared(file, st) {
        match set(file, c"user.nvsoak.target", &v) {
            Ok(()) => return Ok(()),
            Err(e) if unsupported(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let Some((dir, rel)) = record_path(st) else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "its filesystem takes no extended attributes for nvsoak's mark, and no state directory holds marks in this process",
        ));
    };
    let sd = StateDir::open(&dir)?;
    sd.create_dirs(MARKS_DIR)?;
    sd.write_all(&rel, format!("{v}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_mark_names_the_inode_and_the_device() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("f");
        fs::write(&p, b"x").expect("write");
        let st = fs::metadata(&p).expect("stat");
        let v = value("t0", &st);
        assert!(matches(&v, &st, true));
        let other_dev = format!("nvsoak target=t0 ino={} dev={}", st.ino(), st.dev() + 1);
        assert!(!matches(&other_dev, &st, false));
        let legacy = format!("nvsoak target=t0 ino={}", st.ino());
        assert!(matches(&legacy, &st, false) && !matches(&legacy, &st, true));
        assert!(!matches("nvsoak target=t0", &st, false));
        assert!(!matches(
            &format!("evil ino={} dev={}", st.ino(), st.dev()),
            &st,
            false
        ));
    }

    #[test]
    fn a_user_mark_on_a_file_others_may_write_is_not_believed() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("f");
        fs::write(&p, b"x").expect("write");
        let f = File::open(&p).expect("open");
        let st = f.metadata().expect("stat");
        let v = value("t0", &st);
        if set(&f, c"user.nvsoak.target", &v).is_err() {
            return; // this filesystem takes no user attributes
        }
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).expect("chmod");
        let st = f.metadata().expect("stat");
        assert!(!unshared(&f, &st) || is_marked(&f, &st));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o666)).expect("chmod");
        let st = f.metadata().expect("stat");
        assert!(!unshared(&f, &st));
        // Root's trusted mark aside, a world-writable file's user mark makes it nobody's.
        if get(&f, c"trusted.nvsoak.target").is_none() && record_path(&st).is_none() {
            assert!(!is_marked(&f, &st));
        }
    }
}
