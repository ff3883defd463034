//! Where a passthrough engine's commands go: the namespace behind the claimed block device
//! (fstat → `/sys/dev/block/M:m` → the namespace's `ngXnY` sibling → its `dev` number), the
//! generic character device opened for it and checked (`fstat`: a character device with
//! exactly that number, whose sysfs entry sits beside the block device's), the way back from
//! a generic device named as a target to its namespace, and [`SharedNode`], which resolves a
//! target's generic device once for every engine opened on it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Why passthrough cannot be used on a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassthruRefusal {
    #[error("fstat failed: {0}")]
    Stat(String),
    #[error(
        "the target is not a block device; configure the NVMe namespace's block device (/dev/nvmeXnY)"
    )]
    NotBlock,
    #[error(
        "{0} is a partition; passthrough addresses the whole namespace, so configure the namespace itself"
    )]
    Partition(String),
    #[error("{0} is not an NVMe namespace (passthrough needs /dev/nvmeXnY)")]
    NotNvme(String),
    #[error(
        "{block} has no generic character device {ng} in sysfs (Linux 5.19 or later with CONFIG_NVME builds it; this kernel or driver does not)"
    )]
    NoGeneric { block: String, ng: String },
    #[error("cannot read {0}: {1}")]
    Unreadable(String, String),
    #[error(
        "character device {}:{} ({generic}) is no NVMe namespace's generic device: sysfs shows no block device beside it whose generic device it is",
        dev.0, dev.1
    )]
    NoNamespace { generic: String, dev: (u64, u64) },
    #[error("{path}: {why}")]
    NodeMismatch { path: String, why: String },
    #[error("opening {0} failed: {1}")]
    Open(String, String),
    #[error(
        "the largest block size, {max_bs} bytes, is not a multiple of the namespace's {lba} byte logical block"
    )]
    Unaligned { max_bs: u32, lba: u32 },
    #[error(
        "this kernel does not poll NVMe passthrough commands: a polled read of the first logical block completed with {0} (Linux 6.1 or later polls uring_cmd); use engine = \"io_uring_cmd\""
    )]
    NoPolledCommands(String),
    #[error(
        "the largest block size, {max_bs} bytes, exceeds the controller's largest transfer ({max} bytes, queue/max_hw_sectors_kb); passthrough commands are not split"
    )]
    TooLarge { max_bs: u32, max: u64 },
}

/// The namespace behind a block device, as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// `nvme0n1`.
    pub block: String,
    /// `ng0n1`.
    pub generic: String,
    /// The generic device's number.
    pub generic_dev: (u64, u64),
    /// Its sysfs directory (canonical).
    pub generic_sys: PathBuf,
    pub nsid: u32,
    /// Logical block size in bytes (a power of two).
    pub lba_size: u32,
    /// Largest transfer in bytes.
    pub max_transfer: u64,
}

fn read_trim(p: &Path) -> Result<String, PassthruRefusal> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(|e| PassthruRefusal::Unreadable(p.display().to_string(), e.to_string()))
}

fn parse_num<T: std::str::FromStr>(p: &Path) -> Result<T, PassthruRefusal> {
    let s = read_trim(p)?;
    s.parse().map_err(|_| {
        PassthruRefusal::Unreadable(p.display().to_string(), format!("{s:?} is not a number"))
    })
}

/// `M:m` from a sysfs `dev` file.
fn parse_dev(p: &Path) -> Result<(u64, u64), PassthruRefusal> {
    let s = read_trim(p)?;
    let bad = || PassthruRefusal::Unreadable(p.display().to_string(), format!("{s:?} is not M:m"));
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    Ok((a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?))
}

/// `nvme0n1` → `ng0n1`; `None` for anything that is not `nvme<digits>n<digits>`.
pub fn generic_name(block: &str) -> Option<String> {
    let rest = block.strip_prefix("nvme")?;
    let (c, n) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(c) && digits(n)).then(|| format!("ng{c}n{n}"))
}

/// The namespace behind the block device `fd` under `sys` (normally `/sys`).
pub fn namespace_of(sys: &Path, fd: &impl AsFd) -> Result<Namespace, PassthruRefusal> {
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFBLK {
        return Err(PassthruRefusal::NotBlock);
    }
    namespace_at(
        sys,
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    )
}

/// The namespace of block device `maj:min` under `sys`.
pub fn namespace_at(sys: &Path, maj: u64, min: u64) -> Result<Namespace, PassthruRefusal> {
    let link = sys.join(format!("dev/block/{maj}:{min}"));
    let dir = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    let block = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if dir.join("partition").exists() {
        return Err(PassthruRefusal::Partition(block));
    }
    let generic = generic_name(&block).ok_or_else(|| PassthruRefusal::NotNvme(block.clone()))?;
    // The generic device is the block device's sibling under the controller (or, with native
    // multipath, under the subsystem).
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let gdir = parent.join(&generic);
    if !gdir.join("dev").exists() {
        return Err(PassthruRefusal::NoGeneric { block, ng: generic });
    }
    let generic_sys = std::fs::canonicalize(&gdir)
        .map_err(|e| PassthruRefusal::Unreadable(gdir.display().to_string(), e.to_string()))?;
    let generic_dev = parse_dev(&gdir.join("dev"))?;
    let nsid = parse_num(&dir.join("nsid"))?;
    let lba_size: u32 = parse_num(&dir.join("queue/logical_block_size"))?;
    if !lba_size.is_power_of_two() || lba_size < 512 {
        return Err(PassthruRefusal::Unreadable(
            dir.join("queue/logical_block_size").display().to_string(),
            format!("{lba_size} is not a logical block size"),
        ));
    }
    let max_kb: u64 = parse_num(&dir.join("queue/max_hw_sectors_kb"))?;
    Ok(Namespace {
        block,
        generic,
        generic_dev,
        generic_sys,
        nsid,
        lba_size,
        max_transfer: max_kb * 1024,
    })
}

/// The namespace whose generic character device is `maj:min` (`/dev/ngXnY`), and its block
/// device's number, found through sysfs by device number: `/sys/dev/char/M:m` is the generic
/// device's entry; among its siblings, the block device whose namespace (by [`namespace_at`])
/// has exactly that generic device and entry is the one. Names are never taken on trust.
pub fn namespace_of_generic(
    sys: &Path,
    maj: u64,
    min: u64,
) -> Result<(Namespace, (u64, u64)), PassthruRefusal> {
    let link = sys.join(format!("dev/char/{maj}:{min}"));
    let gdir = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    let gname = gdir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = gdir.parent().map(Path::to_path_buf).unwrap_or_default();
    let entries = std::fs::read_dir(&parent)
        .map_err(|e| PassthruRefusal::Unreadable(parent.display().to_string(), e.to_string()))?;
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(bdev) = parse_dev(&dir.join("dev")) else {
            continue;
        };
        // Only a block device whose /sys/dev/block entry is this very directory.
        let blink = sys.join(format!("dev/block/{}:{}", bdev.0, bdev.1));
        if std::fs::canonicalize(&blink).ok().as_deref()
            != std::fs::canonicalize(&dir).ok().as_deref()
        {
            continue;
        }
        if let Ok(ns) = namespace_at(sys, bdev.0, bdev.1)
            && ns.generic_dev == (maj, min)
            && ns.generic_sys == gdir
        {
            return Ok((ns, bdev));
        }
    }
    Err(PassthruRefusal::NoNamespace {
        generic: gname,
        dev: (maj, min),
    })
}

/// Check an opened generic device against the namespace found from the block device: a
/// character device, numbered as sysfs says, whose sysfs entry is the one found.
pub fn check_generic(
    sys: &Path,
    ns: &Namespace,
    path: &Path,
    fd: &impl AsFd,
) -> Result<(), PassthruRefusal> {
    let mismatch = |why: String| PassthruRefusal::NodeMismatch {
        path: path.display().to_string(),
        why,
    };
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFCHR {
        return Err(mismatch("is not a character device".into()));
    }
    let dev = (
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    );
    if dev != ns.generic_dev {
        return Err(mismatch(format!(
            "is device {}:{}, but {}'s generic device is {}:{}",
            dev.0, dev.1, ns.block, ns.generic_dev.0, ns.generic_dev.1
        )));
    }
    let link = sys.join(format!("dev/char/{}:{}", dev.0, dev.1));
    let real = std::fs::canonicalize(&link)
        .map_err(|e| PassthruRefusal::Unreadable(link.display().to_string(), e.to_string()))?;
    if real != ns.generic_sys {
        return Err(mismatch(format!(
            "sysfs places device {}:{} at {}, not beside {}",
            dev.0,
            dev.1,
            real.display(),
            ns.block
        )));
    }
    Ok(())
}

/// Open the generic device of the block device `block` (read-write when the block descriptor
/// was opened for writing) and check the opened descriptor.
pub fn open_generic(
    sys: &Path,
    dev_dir: &Path,
    block: &impl AsFd,
) -> Result<(Namespace, OwnedFd), PassthruRefusal> {
    let ns = namespace_of(sys, block)?;
    let fl = nix::fcntl::fcntl(block.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| PassthruRefusal::Stat(e.to_string()))?;
    let writable = fl & libc::O_ACCMODE != libc::O_RDONLY;
    let path = dev_dir.join(&ns.generic);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(writable)
        .open(&path)
        .map_err(|e| PassthruRefusal::Open(path.display().to_string(), e.to_string()))?;
    check_generic(sys, &ns, &path, &f)?;
    Ok((ns, f.into()))
}

/// A namespace's generic device, opened and checked ([`open_generic`]).
#[derive(Debug)]
pub struct PassthruNode {
    pub ns: Namespace,
    pub ng: OwnedFd,
}

impl PassthruNode {
    /// [`open_generic`] for the block device `block`.
    pub fn open(sys: &Path, dev_dir: &Path, block: &impl AsFd) -> Result<Self, PassthruRefusal> {
        open_generic(sys, dev_dir, block).map(|(ns, ng)| PassthruNode { ns, ng })
    }
}

/// One target descriptor's [`PassthruNode`], resolved at most once: by the first passthrough
/// engine opened on that descriptor, and shared by every later one (every worker, every
/// segment; `EngineSetup::passthru`). A refusal is kept too, so every engine refuses with the
/// reason the first was given. Clones share the one resolution; the node (and its generic
/// device's descriptor) lives until the last clone and the last engine holding it are gone.
///
/// The holder pairs it with one claimed block descriptor and drops it with that descriptor
/// (a fresh one for a descriptor opened anew).
#[derive(Debug, Clone, Default)]
pub struct SharedNode(Arc<OnceLock<Result<Arc<PassthruNode>, PassthruRefusal>>>);

impl SharedNode {
    /// The node of the block device `block`: resolved under `sys` and `dev_dir` by the first
    /// call, the same answer (or refusal) for every later one.
    pub fn get_or_open(
        &self,
        sys: &Path,
        dev_dir: &Path,
        block: &impl AsFd,
    ) -> Result<Arc<PassthruNode>, PassthruRefusal> {
        self.0
            .get_or_init(|| PassthruNode::open(sys, dev_dir, block).map(Arc::new))
            .clone()
    }

    /// `n` fresh cells (one per descriptor a target's workers use) when `engine` is a
    /// passthrough engine; none otherwise.
    pub fn for_target(engine: crate::model::op::EngineChoice, n: usize) -> Vec<SharedNode> {
        if engine.is_passthru() {
            (0..n).map(|_| SharedNode::default()).collect()
        } else {
            Vec::new()
        }
    }
}

/// For an NVMe generic node (`/dev/ng0n1`) named as a target: which block device to name
/// instead (empty for any other path).
pub fn generic_node_hint(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name
        .strip_prefix("ng")
        .filter(|r| generic_name(&format!("nvme{r}")).is_some())
    {
        Some(rest) => format!(
            "; {} is an NVMe generic device: only the passthrough engines (engine = \"io_uring_cmd\" or \"io_uring_cmd_poll\") take it as the target, else configure the namespace's block device /dev/nvme{rest} instead",
            path.display()
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_names() {
        assert_eq!(generic_name("nvme0n1").as_deref(), Some("ng0n1"));
        assert_eq!(generic_name("nvme12n34").as_deref(), Some("ng12n34"));
        for bad in ["nvme0", "nvme0n1p1", "nvmen1", "sda", "nvme0c0n1", "loop0"] {
            assert_eq!(generic_name(bad), None, "{bad}");
        }
    }

    /// A loop device is a block device but no NVMe namespace: refused with its name. (Loop
    /// devices need root; without one the test checks a regular file's refusal instead.)
    #[test]
    fn non_nvme_targets_are_refused() {
        let f = tempfile::tempfile().expect("file");
        assert_eq!(
            namespace_of(Path::new("/sys"), &f),
            Err(PassthruRefusal::NotBlock)
        );
    }

    /// A fake sysfs with a controller `nvme0` holding `nvme0n1` (block 259:0) and `ng0n1`
    /// (char 242:0), for the mapping and the descriptor checks.
    fn fake_sys(block_dev: (u64, u64), char_dev: (u64, u64), with_ng: bool) -> tempfile::TempDir {
        let sys = tempfile::tempdir().expect("tempdir");
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let b = ctrl.join("nvme0n1");
        std::fs::create_dir_all(b.join("queue")).unwrap();
        std::fs::write(b.join("nsid"), "7\n").unwrap();
        std::fs::write(b.join("queue/logical_block_size"), "4096\n").unwrap();
        std::fs::write(b.join("queue/max_hw_sectors_kb"), "128\n").unwrap();
        std::fs::write(b.join("dev"), format!("{}:{}\n", block_dev.0, block_dev.1)).unwrap();
        std::fs::create_dir_all(sys.path().join("dev/block")).unwrap();
        std::fs::create_dir_all(sys.path().join("dev/char")).unwrap();
        std::os::unix::fs::symlink(
            &b,
            sys.path()
                .join(format!("dev/block/{}:{}", block_dev.0, block_dev.1)),
        )
        .unwrap();
        if with_ng {
            let g = ctrl.join("ng0n1");
            std::fs::create_dir_all(&g).unwrap();
            std::fs::write(g.join("dev"), format!("{}:{}\n", char_dev.0, char_dev.1)).unwrap();
            std::os::unix::fs::symlink(
                &g,
                sys.path()
                    .join(format!("dev/char/{}:{}", char_dev.0, char_dev.1)),
            )
            .unwrap();
        }
        sys
    }

    #[test]
    fn sysfs_maps_the_namespace_to_its_generic_device() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let ns = namespace_at(sys.path(), 259, 4).expect("namespace");
        assert_eq!(ns.block, "nvme0n1");
        assert_eq!(ns.generic, "ng0n1");
        assert_eq!(ns.generic_dev, (242, 9));
        assert_eq!(ns.nsid, 7);
        assert_eq!(ns.lba_size, 4096);
        assert_eq!(ns.max_transfer, 128 * 1024);
        assert!(ns.generic_sys.ends_with("nvme/nvme0/ng0n1"));
        // A kernel without generic devices.
        let sys = fake_sys((259, 4), (242, 9), false);
        let e = namespace_at(sys.path(), 259, 4).expect_err("refused");
        assert!(matches!(e, PassthruRefusal::NoGeneric { .. }), "{e}");
        assert!(e.to_string().contains("Linux 5.19"), "{e}");
        // Unknown device number.
        assert!(namespace_at(sys.path(), 8, 0).is_err());
    }

    #[test]
    fn a_generic_device_leads_back_to_its_namespace_by_number() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let (ns, bdev) = namespace_of_generic(sys.path(), 242, 9).expect("namespace");
        assert_eq!(bdev, (259, 4));
        assert_eq!(ns.block, "nvme0n1");
        assert_eq!(ns.generic_dev, (242, 9));
        // A char device sysfs does not know, and one no namespace claims (a sibling whose
        // block device's generic device is another number).
        assert!(namespace_of_generic(sys.path(), 242, 10).is_err());
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let g = ctrl.join("ng0n2");
        std::fs::create_dir_all(&g).unwrap();
        std::fs::write(g.join("dev"), "242:11\n").unwrap();
        std::os::unix::fs::symlink(&g, sys.path().join("dev/char/242:11")).unwrap();
        let e = namespace_of_generic(sys.path(), 242, 11).expect_err("no namespace");
        assert!(
            matches!(&e, PassthruRefusal::NoNamespace { generic, .. } if generic == "ng0n2"),
            "{e}"
        );
        // A block directory whose dev file lies (its /sys/dev/block entry is elsewhere) is
        // not taken.
        let sys = fake_sys((259, 4), (242, 9), true);
        std::fs::remove_file(sys.path().join("dev/block/259:4")).unwrap();
        let elsewhere = sys.path().join("devices/virtual/block/loop0");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, sys.path().join("dev/block/259:4")).unwrap();
        assert!(namespace_of_generic(sys.path(), 242, 9).is_err());
    }

    #[test]
    fn partitions_and_other_block_devices_are_refused() {
        let sys = fake_sys((259, 4), (242, 9), true);
        let ctrl = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let p = ctrl.join("nvme0n1/nvme0n1p1");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("partition"), "1\n").unwrap();
        std::os::unix::fs::symlink(&p, sys.path().join("dev/block/259:5")).unwrap();
        let e = namespace_at(sys.path(), 259, 5).expect_err("refused");
        assert_eq!(e, PassthruRefusal::Partition("nvme0n1p1".into()));
        let l = sys.path().join("devices/virtual/block/loop3");
        std::fs::create_dir_all(&l).unwrap();
        std::os::unix::fs::symlink(&l, sys.path().join("dev/block/7:3")).unwrap();
        let e = namespace_at(sys.path(), 7, 3).expect_err("refused");
        assert_eq!(e, PassthruRefusal::NotNvme("loop3".into()));
        assert!(
            e.to_string().contains("loop3 is not an NVMe namespace"),
            "{e}"
        );
    }

    /// The host's own `/dev/null` (char 1:3) stands in for an opened generic device: a fake
    /// sysfs that names 1:3 as `ng0n1` accepts it; one that names another number refuses it.
    #[test]
    fn the_opened_generic_device_must_be_the_one_sysfs_names() {
        let null = std::fs::File::open("/dev/null").expect("/dev/null");
        let sys = fake_sys((259, 0), (1, 3), true);
        let ns_dir = sys
            .path()
            .join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        let ns = Namespace {
            block: "nvme0n1".into(),
            generic: "ng0n1".into(),
            generic_dev: (1, 3),
            generic_sys: std::fs::canonicalize(ns_dir.join("ng0n1")).unwrap(),
            nsid: 7,
            lba_size: 4096,
            max_transfer: 128 * 1024,
        };
        check_generic(sys.path(), &ns, Path::new("/dev/ng0n1"), &null).expect("matches");
        let other = Namespace {
            generic_dev: (242, 0),
            ..ns.clone()
        };
        let e =
            check_generic(sys.path(), &other, Path::new("/dev/ng0n1"), &null).expect_err("refused");
        assert!(
            e.to_string()
                .contains("is device 1:3, but nvme0n1's generic device is 242:0"),
            "{e}"
        );
        // A regular file is no character device.
        let f = tempfile::tempfile().unwrap();
        let e = check_generic(sys.path(), &ns, Path::new("/dev/ng0n1"), &f).expect_err("refused");
        assert!(e.to_string().contains("not a character device"), "{e}");
        // Sysfs placing the number elsewhere (another controller's ng) is refused.
        let moved = Namespace {
            generic_sys: ns_dir.clone(),
            ..ns
        };
        let e =
            check_generic(sys.path(), &moved, Path::new("/dev/ng0n1"), &null).expect_err("refused");
        assert!(e.to_string().contains("not beside nvme0n1"), "{e}");
    }

    #[test]
    fn generic_nodes_get_the_block_device_to_name_instead() {
        let h = generic_node_hint(Path::new("/dev/ng3n12"));
        assert!(h.contains("/dev/nvme3n12 instead"), "{h}");
        assert!(h.contains("io_uring_cmd_poll"), "{h}");
        for other in [
            "/dev/null",
            "/dev/ng",
            "/dev/ngx",
            "/dev/nvme0n1",
            "/tmp/ng0n1x",
        ] {
            assert_eq!(generic_node_hint(Path::new(other)), "", "{other}");
        }
    }
}
