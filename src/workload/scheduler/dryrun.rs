//! Refusals `run` makes that `check-config` must make too, from the same code: a file target
//! its filesystem has no room for (checked before the file is created, so a refused run leaves
//! no empty file behind), a purge or self-test on a device that is not an NVMe namespace, and
//! the verification state a plan's verified targets will keep (each target's region found
//! without opening it: [`planned_verify`]), which `state.max_verify_memory` bounds.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::TargetError;
use crate::model::spec::{PhaseSpec, TargetSpec};
use crate::model::units::format_bytes;
use crate::model::verify_cost::VerifyScheme;

/// A verified target's verification state, foreseen before the target is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedVerify {
    pub scheme: VerifyScheme,
    /// The region verified, in bytes, or why its size cannot be known without opening the
    /// target.
    pub region_len: Result<u64, SizeUnknown>,
}

/// Why a block device target's size is not known before it is opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeUnknown {
    /// The node its checks apply to was not found (a passthrough engine's generic device).
    #[error("{0}")]
    Node(String),
    #[error("{path} cannot be looked at ({error}), so its size is not known before it is opened")]
    Stat { path: PathBuf, error: String },
    #[error("{path} is not a block device, so its size is not known before it is opened")]
    NotBlock { path: PathBuf },
    #[error("the size of {path} is not known without opening it ({file} could not be read: {why})")]
    Sysfs {
        path: PathBuf,
        file: PathBuf,
        why: String,
    },
}

/// The verification state a target will keep, `None` when it does not verify: its region is
/// the one [`super::start`] will exercise (`region` of the target's size), the size a file
/// target's `size`, a block device's what sysfs says (`/sys/dev/block/MAJ:MIN/size`, read
/// without opening the device).
pub fn planned_verify(spec: &TargetSpec) -> Option<PlannedVerify> {
    let scheme = VerifyScheme::for_target(spec)?;
    let size = match spec.size {
        Some(s) => Ok(s),
        None => block_size_unopened(spec),
    };
    Some(PlannedVerify {
        scheme,
        region_len: size.map(|s| spec.region.len_of(s)),
    })
}

/// A block device target's size from sysfs, without opening the device.
fn block_size_unopened(spec: &TargetSpec) -> Result<u64, SizeUnknown> {
    use std::os::unix::fs::FileTypeExt;
    let node = super::open::target_node(spec).map_err(|e| SizeUnknown::Node(e.to_string()))?;
    let path = node.path;
    let meta = std::fs::metadata(&path).map_err(|e| SizeUnknown::Stat {
        path: path.clone(),
        error: e.to_string(),
    })?;
    if !meta.file_type().is_block_device() {
        return Err(SizeUnknown::NotBlock { path });
    }
    let (maj, min) = (
        nix::sys::stat::major(meta.rdev()),
        nix::sys::stat::minor(meta.rdev()),
    );
    let file = PathBuf::from(format!("/sys/dev/block/{maj}:{min}/size"));
    let text = crate::util::bounded::read_to_string(&file, 4096);
    match text.as_deref().map(str::trim) {
        Ok(t) => match t.parse::<u64>() {
            Ok(sectors) => Ok(sectors.saturating_mul(512)),
            Err(_) => Err(SizeUnknown::Sysfs {
                why: format!("\"{t}\" is not a number of sectors"),
                path,
                file,
            }),
        },
        Err(e) => Err(SizeUnknown::Sysfs {
            why: e.to_string(),
            path,
            file,
        }),
    }
}

/// The nearest existing directory at or above `p`.
fn existing_dir(p: &Path) -> Option<PathBuf> {
    p.ancestors()
        .skip(1)
        .find(|a| a.is_dir())
        .map(Path::to_path_buf)
}

/// A file target of `size` bytes fits where it goes: the bytes it still lacks (its size less
/// what the file already has allocated) are free on its filesystem for an unprivileged writer.
pub fn file_room(spec: &TargetSpec) -> Result<(), TargetError> {
    let Some(size) = spec.size.filter(|s| *s > 0) else {
        return Ok(());
    };
    let path = crate::safety::resolve_for_create(&spec.path);
    let allocated = std::fs::metadata(&path)
        .ok()
        .filter(|m| m.file_type().is_file())
        .map_or(0, |m| m.blocks() * 512);
    let need = size.saturating_sub(allocated);
    let Some(dir) = existing_dir(&path) else {
        return Ok(());
    };
    let Ok(vfs) = nix::sys::statvfs::statvfs(&dir) else {
        return Ok(()); // the claim that follows reports why the directory cannot be used
    };
    if vfs.blocks() == 0 {
        return Ok(()); // ramfs and its kind report no size: nothing to compare with
    }
    let free = vfs.blocks_available().saturating_mul(vfs.fragment_size());
    if need <= free {
        return Ok(());
    }
    Err(TargetError::Refused {
        target: spec.name.clone(),
        reason: format!(
            "no room for the target file {}: size = \"{}\" needs {} more, and the filesystem holding {} has {} free; lower size or free space",
            path.display(),
            format_bytes(size),
            format_bytes(need),
            dir.display(),
            format_bytes(free)
        ),
    })
}

/// A plan with a purge or self-test runs it on an NVMe namespace: the namespace behind `node`
/// is looked up exactly as the step does (`nvme::claimed::namespace_of_fd` on a read-only
/// descriptor), and the step's refusal is `check-config`'s.
pub fn steps_device(spec: &TargetSpec, node: &Path) -> Result<(), TargetError> {
    let step = spec.phases.iter().find_map(|p| match p {
        PhaseSpec::Purge { .. } => Some("purge"),
        PhaseSpec::SelfTest { .. } => Some("self-test"),
        _ => None,
    });
    let Some(step) = step else {
        return Ok(());
    };
    let refused = |why: String| TargetError::Refused {
        target: spec.name.clone(),
        reason: format!("{step} refused: {why}"),
    };
    // Read-only and non-blocking: looking writes nothing and claims nothing.
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(node)
    {
        Ok(f) => f,
        // A file target, or one that does not exist yet: not a namespace.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refused(format!(
                "{} does not exist, so it is no NVMe namespace",
                node.display()
            )));
        }
        Err(_) => return Ok(()), // not root: the claim at run time checks
    };
    crate::nvme::claimed::namespace_of_fd(Path::new("/sys"), &f)
        .map(|_| ())
        .map_err(|e| refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &Path, size: u64) -> TargetSpec {
        let toml = format!(
            "[[target]]\nname = \"t\"\npath = \"{}\"\nsize = \"{size}\"\n[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\nduration = \"1s\"\n",
            path.display()
        );
        crate::config::load_str(&toml, "t.toml", Default::default())
            .expect("config")
            .targets
            .remove(0)
    }

    #[test]
    fn a_verified_file_targets_state_is_foreseen_from_its_size_and_region() {
        let d = tempfile::tempdir().expect("tempdir");
        let toml = format!(
            "[[target]]\nname = \"t\"\npath = \"{}\"\nsize = \"64MiB\"\nregion = \"50%\"\nverify = \"inline\"\n[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\nduration = \"1s\"\n",
            d.path().join("t.dat").display()
        );
        let spec = crate::config::load_str(&toml, "t.toml", Default::default())
            .expect("config")
            .targets
            .remove(0);
        let p = planned_verify(&spec).expect("verified");
        assert_eq!(p.region_len, Ok(32 << 20));
        // A plan the computed state follows; mixed block sizes need the stored map.
        assert_eq!(p.scheme, VerifyScheme::Computed);
        let mixed = toml.replace(
            "profile = \"4k-random-read\"",
            "job = { name = \"m\", read = 50, bs = \"4k:1,8k:1\", access = \"random\" }",
        );
        let spec2 = crate::config::load_str(&mixed, "t.toml", Default::default())
            .expect("config")
            .targets
            .remove(0);
        assert_eq!(
            planned_verify(&spec2).expect("verified").scheme,
            VerifyScheme::StoredMap
        );
        // Not verified: nothing to foresee.
        assert_eq!(
            planned_verify(&spec_unverified(&d.path().join("u.dat"))),
            None
        );
        // What the region comes from is what the scheduler exercises.
        assert_eq!(spec.region.len_of(64 << 20), 32 << 20);
    }

    fn spec_unverified(p: &Path) -> TargetSpec {
        spec(p, 4096)
    }

    #[test]
    fn a_file_larger_than_its_filesystem_is_refused_before_it_exists() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("t.dat");
        assert!(file_room(&spec(&p, 4096)).is_ok());
        let e = file_room(&spec(&p, 1 << 60)).expect_err("no room");
        assert!(e.to_string().contains("no room for the target file"), "{e}");
        assert!(!p.exists());
    }
}
