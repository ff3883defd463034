//! From a claimed block device's descriptor to the controller and namespace behind it, for the
//! admin commands a qualification step sends (Format NVM, Sanitize, Device Self-test).
//!
//! Nothing here trusts a path: the namespace is the one the descriptor is (`fstat` → its device
//! number → `/sys/dev/block/M:m`), the controller the one sysfs puts it under, and the
//! controller's character device is opened and checked to be that controller's device number
//! before any command goes to it.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::ioctl::IoctlTransport;

#[derive(Debug, thiserror::Error)]
pub enum ClaimedError {
    #[error("{0}")]
    NotANamespace(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// The NVMe namespace behind a claimed descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedNamespace {
    /// The block device's kernel name (`nvme0n1`).
    pub block: String,
    /// The controller (`nvme0`) the admin commands go to.
    pub controller: String,
    pub nsid: u32,
    /// The controller character device's number, from sysfs (`/sys/class/nvme/nvme0/dev`).
    pub controller_dev: (u64, u64),
    /// Other namespaces on the controller (kernel names), which an erase of the whole
    /// controller or subsystem would reach.
    pub others: Vec<String>,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClaimedError {
    let what = what.into();
    move |source| ClaimedError::Io { what, source }
}

fn read_trim(p: &Path) -> Result<String, ClaimedError> {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(io(format!("reading {}", p.display())))
}

fn dev_pair(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// `nvme0` → true; `nvme-subsys0`, `nvme0n1` → false.
fn is_controller_name(n: &str) -> bool {
    n.strip_prefix("nvme")
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

/// `nvme0n1`, `nvme0c1n2` → true.
fn is_namespace_name(n: &str) -> bool {
    let Some(rest) = n.strip_prefix("nvme") else {
        return false;
    };
    let Some((ctrl, ns)) = rest.split_once('n') else {
        return false;
    };
    let ctrl_ok = match ctrl.split_once('c') {
        Some((a, b)) => {
            !a.is_empty()
                && !b.is_empty()
                && a.chars().all(|c| c.is_ascii_digit())
                && b.chars().all(|c| c.is_ascii_digit())
        }
        None => !ctrl.is_empty() && ctrl.chars().all(|c| c.is_ascii_digit()),
    };
    ctrl_ok && !ns.is_empty() && ns.chars().all(|c| c.is_ascii_digit())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The namespace the block device `fd` is, under `sys` (normally `/sys`).
pub fn namespace_of_fd(sys: &Path, fd: &impl AsFd) -> Result<ClaimedNamespace, ClaimedError> {
    let st = nix::sys::stat::fstat(fd.as_fd()).map_err(|e| ClaimedError::Io {
        what: "fstat of the target".into(),
        source: e.into(),
    })?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFBLK {
        return Err(ClaimedError::NotANamespace(
            "the target is not a block device; purge and self-test run on an NVMe namespace (/dev/nvmeXnY)".into(),
        ));
    }
    let (maj, min) = (
        nix::sys::stat::major(st.st_rdev),
        nix::sys::stat::minor(st.st_rdev),
    );
    let link = sys.join(format!("dev/block/{maj}:{min}"));
    let dir = std::fs::canonicalize(&link).map_err(io(format!("resolving {}", link.display())))?;
    let block = file_name(&dir);
    if dir.join("partition").exists() {
        return Err(ClaimedError::NotANamespace(format!(
            "{block} is a partition; a purge or self-test acts on the whole namespace, so name the namespace itself"
        )));
    }
    let nsid_file = dir.join("nsid");
    if !nsid_file.exists() {
        return Err(ClaimedError::NotANamespace(format!(
            "{block} (device {maj}:{min}) is not an NVMe namespace (no nsid in sysfs)"
        )));
    }
    let nsid: u32 = read_trim(&nsid_file)?.parse().map_err(|_| {
        ClaimedError::NotANamespace(format!("{}: not a number", nsid_file.display()))
    })?;
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let controller = if is_controller_name(&file_name(&parent)) {
        file_name(&parent)
    } else {
        // A multipath head (under nvme-subsysN): its paths are nvmeXcYnZ under each controller.
        let mp = dir.join("multipath");
        let mut ctrls: Vec<String> = std::fs::read_dir(&mp)
            .map_err(io(format!("reading {}", mp.display())))?
            .filter_map(|e| e.ok())
            .filter_map(|e| std::fs::canonicalize(e.path()).ok())
            .filter_map(|p| p.parent().map(file_name))
            .filter(|n| is_controller_name(n))
            .collect();
        ctrls.sort();
        ctrls.into_iter().next().ok_or_else(|| {
            ClaimedError::NotANamespace(format!(
                "{block}: no controller found in sysfs ({} has no paths)",
                mp.display()
            ))
        })?
    };
    let ctrl_dir = sys.join("class/nvme").join(&controller);
    let dev = read_trim(&ctrl_dir.join("dev"))?;
    let controller_dev = dev_pair(&dev).ok_or_else(|| {
        ClaimedError::NotANamespace(format!("{controller}: unreadable device number {dev:?}"))
    })?;
    let mut others = Vec::new();
    for e in std::fs::read_dir(&ctrl_dir)
        .map_err(io(format!("reading {}", ctrl_dir.display())))?
        .filter_map(|e| e.ok())
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if !is_namespace_name(&name) {
            continue;
        }
        let their = read_trim(&e.path().join("nsid")).ok();
        if their.as_deref() != Some(nsid.to_string().as_str()) {
            others.push(name);
        }
    }
    others.sort();
    Ok(ClaimedNamespace {
        block,
        controller,
        nsid,
        controller_dev,
        others,
    })
}

/// Open the controller's character device under `dev` (normally `/dev`) and check it is the
/// controller sysfs named (its device number), then hand it to the admin transport.
pub fn open_controller(
    dev: &Path,
    ns: &ClaimedNamespace,
    timeout_ms: u32,
) -> Result<IoctlTransport, ClaimedError> {
    let path: PathBuf = dev.join(&ns.controller);
    let file = File::open(&path).map_err(io(format!(
        "opening the controller {} (needs root)",
        path.display()
    )))?;
    let md = file
        .metadata()
        .map_err(io(format!("fstat of {}", path.display())))?;
    let got = (
        nix::sys::stat::major(md.rdev()),
        nix::sys::stat::minor(md.rdev()),
    );
    if !md.file_type().is_char_device() || got != ns.controller_dev {
        return Err(ClaimedError::NotANamespace(format!(
            "{} is device {}:{}, not the controller {} ({}:{}) that {} sits on; not sending it commands",
            path.display(),
            got.0,
            got.1,
            ns.controller,
            ns.controller_dev.0,
            ns.controller_dev.1,
            ns.block
        )));
    }
    let mut t = IoctlTransport::from_file(file, &path);
    t.timeout_ms = timeout_ms;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_controller_name("nvme0") && is_controller_name("nvme12"));
        assert!(!is_controller_name("nvme-subsys0") && !is_controller_name("nvme0n1"));
        assert!(is_namespace_name("nvme0n1") && is_namespace_name("nvme3c1n12"));
        assert!(!is_namespace_name("nvme0") && !is_namespace_name("nvme0n1p1"));
        assert!(!is_namespace_name("ng0n1") && !is_namespace_name("nvmecn1"));
        assert_eq!(dev_pair("241:0\n"), Some((241, 0)));
        assert_eq!(dev_pair("x"), None);
    }

    /// A fake sysfs where the device of a real file (its st_dev stands in for a block
    /// device's rdev) is refused: a regular file is not a block device.
    #[test]
    fn a_regular_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = File::create(dir.path().join("t.dat")).expect("create");
        let e = namespace_of_fd(Path::new("/sys"), &f).unwrap_err();
        assert!(e.to_string().contains("not a block device"), "{e}");
    }

    /// A loop device is a block device but not an NVMe namespace.
    #[test]
    fn a_loop_device_is_not_a_namespace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let img = dir.path().join("img");
        std::fs::write(&img, vec![0u8; 1 << 20]).expect("write");
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output();
        let Some(out) = out.ok().filter(|o| o.status.success()) else {
            eprintln!("skipping: cannot create a loop device here");
            return;
        };
        let loopdev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let r = File::open(&loopdev).map(|f| namespace_of_fd(Path::new("/sys"), &f));
        let _ = std::process::Command::new("losetup")
            .args(["-d", &loopdev])
            .status();
        let e = r.expect("open loop").unwrap_err();
        assert!(e.to_string().contains("is not an NVMe namespace"), "{e}");
    }
}
