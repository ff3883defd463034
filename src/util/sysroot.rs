//! Where sysfs and procfs are read from: `/sys` and `/proc` on a host, a fixture tree in tests.
//! The safety checks take one [`SysRoot`] and read every sysfs and procfs file through it, so a
//! test can build the tree a host would show (holders, loop devices, `/proc/<pid>/fd`, an
//! unreadable directory) and see what the checks conclude from it.

use std::io;
use std::path::{Path, PathBuf};

/// The two roots. [`SysRoot::host`] is the real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    sys: PathBuf,
    proc_: PathBuf,
}

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot::host()
    }
}

impl SysRoot {
    /// `/sys` and `/proc`.
    pub fn host() -> SysRoot {
        SysRoot {
            sys: PathBuf::from("/sys"),
            proc_: PathBuf::from("/proc"),
        }
    }

    /// A fixture: `<dir>/sys` and `<dir>/proc`.
    pub fn under(dir: &Path) -> SysRoot {
        SysRoot {
            sys: dir.join("sys"),
            proc_: dir.join("proc"),
        }
    }

    /// Whether this is the host's own sysfs and procfs (device nodes under `/dev` then match).
    pub fn is_host(&self) -> bool {
        *self == SysRoot::host()
    }

    /// `rel` under sysfs (`dev/block/7:0`, `block`).
    pub fn sys(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.sys.join(rel)
    }

    /// `rel` under procfs (`swaps`, `self/mountinfo`, `1234/fd`).
    pub fn proc_(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.proc_.join(rel)
    }

    /// This process's own procfs directory (`/proc/self`).
    pub fn proc_self(&self) -> PathBuf {
        self.proc_.join("self")
    }
}

/// Whether an error reading `/proc/<pid>/...` means the process is gone (exited since the
/// listing), rather than that it could not be looked at.
pub fn process_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_roots_stay_under_their_directory() {
        let r = SysRoot::under(Path::new("/tmp/fx"));
        assert_eq!(r.sys("block/loop0"), Path::new("/tmp/fx/sys/block/loop0"));
        assert_eq!(r.proc_("swaps"), Path::new("/tmp/fx/proc/swaps"));
        assert_eq!(r.proc_self(), Path::new("/tmp/fx/proc/self"));
        assert!(!r.is_host());
        assert!(SysRoot::host().is_host());
    }

    #[test]
    fn only_a_missing_process_counts_as_gone() {
        assert!(process_gone(&io::Error::from_raw_os_error(libc::ENOENT)));
        assert!(process_gone(&io::Error::from_raw_os_error(libc::ESRCH)));
        assert!(!process_gone(&io::Error::from_raw_os_error(libc::EACCES)));
        assert!(!process_gone(&io::Error::from_raw_os_error(libc::ENOTDIR)));
    }
}
