//! Whether polled completions (`IORING_SETUP_IOPOLL`, fio's `hipri`) work on a descriptor: the
//! block device it is (or the one its file lives on) must have poll queues, which sysfs shows
//! as `queue/io_poll` = 1. Without them Linux quietly completes "polled" I/O by interrupt, so
//! the engine checks first and refuses with the reason rather than measure the wrong path.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Why polled I/O cannot be used on a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PollRefusal {
    #[error("fstat failed: {0}")]
    Stat(String),
    #[error(
        "it is not on a block device (device {0}:{1} has no /sys/dev/block entry: tmpfs, overlayfs or a network file system)"
    )]
    NoBlockDevice(u64, u64),
    #[error(
        "{queue} is {value}: the device has no poll queues (for NVMe, load the driver with poll_queues=N: \
         the kernel command line nvme.poll_queues=2, or `options nvme poll_queues=2` in modprobe.d, then reset the controller)"
    )]
    NoPollQueues { queue: String, value: String },
    #[error("cannot read {0}: {1}")]
    Unreadable(String, String),
}

/// The `queue/io_poll` file of the block device behind `fd` under `sys` (normally `/sys`).
pub fn io_poll_path(sys: &Path, fd: &impl AsFd) -> Result<PathBuf, PollRefusal> {
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| PollRefusal::Stat(e.to_string()))?;
    let is_blk = st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFBLK;
    let dev = if is_blk { st.st_rdev } else { st.st_dev };
    let (maj, min) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let dir = sys.join(format!("dev/block/{maj}:{min}"));
    let dir = std::fs::canonicalize(&dir).map_err(|_| PollRefusal::NoBlockDevice(maj, min))?;
    // A partition's queue is its disk's.
    let disk = if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    };
    Ok(disk.join("queue/io_poll"))
}

/// `Ok` when the block device behind `fd` polls.
pub fn check(sys: &Path, fd: &impl AsFd) -> Result<(), PollRefusal> {
    let path = io_poll_path(sys, fd)?;
    let value = std::fs::read_to_string(&path)
        .map_err(|e| PollRefusal::Unreadable(path.display().to_string(), e.to_string()))?;
    let value = value.trim().to_string();
    if value == "1" {
        Ok(())
    } else {
        Err(PollRefusal::NoPollQueues {
            queue: path.display().to_string(),
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs where device `maj:min` of a file in a tempdir polls or not.
    fn fake_sys(file: &std::fs::File, io_poll: &str, partition: bool) -> tempfile::TempDir {
        let st = nix::sys::stat::fstat(file.as_fd()).expect("fstat");
        let (maj, min) = (
            nix::sys::stat::major(st.st_dev),
            nix::sys::stat::minor(st.st_dev),
        );
        let sys = tempfile::tempdir().expect("tempdir");
        let disk = sys.path().join("devices/virtual/block/vdx");
        let node = if partition {
            disk.join("vdx1")
        } else {
            disk.clone()
        };
        std::fs::create_dir_all(&node).expect("mkdir");
        std::fs::create_dir_all(disk.join("queue")).expect("mkdir");
        std::fs::write(disk.join("queue/io_poll"), format!("{io_poll}\n")).expect("write");
        if partition {
            std::fs::write(node.join("partition"), "1\n").expect("write");
        }
        std::fs::create_dir_all(sys.path().join("dev/block")).expect("mkdir");
        std::os::unix::fs::symlink(&node, sys.path().join(format!("dev/block/{maj}:{min}")))
            .expect("symlink");
        sys
    }

    #[test]
    fn a_polling_queue_passes_and_its_partition_too() {
        let f = tempfile::tempfile().expect("file");
        for partition in [false, true] {
            let sys = fake_sys(&f, "1", partition);
            assert_eq!(check(sys.path(), &f), Ok(()), "partition {partition}");
        }
    }

    #[test]
    fn no_poll_queues_is_refused_with_the_remedy() {
        let f = tempfile::tempfile().expect("file");
        let sys = fake_sys(&f, "0", false);
        let e = check(sys.path(), &f).expect_err("refused");
        let msg = e.to_string();
        assert!(msg.contains("queue/io_poll is 0"), "{msg}");
        assert!(msg.contains("nvme.poll_queues"), "{msg}");
    }

    #[test]
    fn a_file_on_no_block_device_is_refused() {
        let f = tempfile::tempfile().expect("file");
        let sys = tempfile::tempdir().expect("empty sysfs");
        let e = check(sys.path(), &f).expect_err("refused");
        assert!(matches!(e, PollRefusal::NoBlockDevice(..)), "{e}");
    }
}
