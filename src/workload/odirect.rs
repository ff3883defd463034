//! O_DIRECT on tmpfs: Linux before 6.6 refuses `open(O_DIRECT)` on tmpfs with EINVAL (Debian
//! bookworm runs 6.1), so a file target in `/dev/shm` with `direct = true` cannot open there.
//! This module recognises that refusal and says what to change, at start (`nvsoak run`) and in
//! `nvsoak check-config`, from the same function.

use std::io;
use std::path::Path;

use crate::util::host::{kernel_release as running_release, parse_release};

/// The first kernel release whose tmpfs accepts O_DIRECT.
const TMPFS_DIRECT_SINCE: (u32, u32) = (6, 6);

/// Whether the filesystem holding `path` (or, for a file not yet created, its nearest existing
/// ancestor) is tmpfs.
pub fn on_tmpfs(path: &Path) -> bool {
    let mut p = Some(path);
    while let Some(cur) = p {
        if let Ok(fs) = nix::sys::statfs::statfs(cur) {
            return fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC;
        }
        p = cur.parent();
    }
    false
}

fn advice(path: &Path, release: &str) -> String {
    format!(
        "{} is on tmpfs, which refuses O_DIRECT on this kernel (Linux {release}; tmpfs accepts it \
         from Linux 6.6): set direct = false for this target, or put the file on a filesystem \
         that supports O_DIRECT (ext4, xfs), or use a block device",
        path.display()
    )
}

/// Before opening: the advice when `path` is on tmpfs and the running kernel predates O_DIRECT
/// on tmpfs. `None` when the open can be expected to work (or the kernel is unknown).
pub fn predicted_refusal(path: &Path) -> Option<String> {
    let release = running_release()?;
    let version = parse_release(&release)?;
    (version < TMPFS_DIRECT_SINCE && on_tmpfs(path)).then(|| advice(path, &release))
}

/// After a failed `open(O_DIRECT)`: the advice when the error is tmpfs's EINVAL. Decided by
/// the error and the filesystem, not the version, so a backported kernel is judged by what it
/// does.
pub fn explain_open_error(path: &Path, err: &io::Error) -> Option<String> {
    if err.raw_os_error() != Some(libc::EINVAL) || !on_tmpfs(path) {
        return None;
    }
    let release = running_release().unwrap_or_else(|| "unknown".into());
    Some(advice(path, &release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmpfs_direct_io_starts_at_6_6() {
        assert!(parse_release("6.1.0").unwrap() < TMPFS_DIRECT_SINCE);
        assert!(parse_release("6.6.0").unwrap() >= TMPFS_DIRECT_SINCE);
        assert!(parse_release("7.0").unwrap() >= TMPFS_DIRECT_SINCE);
    }

    #[test]
    fn tmpfs_is_recognised_through_missing_components() {
        // /dev/shm is tmpfs on every machine this runs on; a file not yet created below a
        // directory not yet created is judged by the nearest existing ancestor.
        assert!(on_tmpfs(Path::new("/dev/shm/nvsoak-not-there/x/y.dat")));
        assert!(!on_tmpfs(Path::new("/proc/self/status")));
        let e = io::Error::from_raw_os_error(libc::EINVAL);
        let hint = explain_open_error(Path::new("/dev/shm/x.dat"), &e).expect("tmpfs EINVAL");
        assert!(hint.contains("set direct = false"), "{hint}");
        assert!(hint.starts_with("/dev/shm/x.dat is on tmpfs"), "{hint}");
        let other = io::Error::from_raw_os_error(libc::EACCES);
        assert!(explain_open_error(Path::new("/dev/shm/x.dat"), &other).is_none());
    }
}
