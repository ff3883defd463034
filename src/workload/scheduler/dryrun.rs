//! Refusals `run` makes that `check-config` must make too, from the same code: a file target
//! its filesystem has no room for (checked before the file is created, so a refused run leaves
//! no empty file behind), and a purge or self-test on a device that is not an NVMe namespace.
//! The verification state a plan will keep is foreseen in `verify_plan.rs`.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::TargetError;
use crate::model::fmt::fmt_bytes;
use crate::model::spec::{PhaseSpec, TargetSpec};

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
            fmt_bytes(size as f64),
            fmt_bytes(need as f64),
            dir.display(),
            fmt_bytes(free as f64)
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
pub(super) mod tests {
    use super::*;

    /// An unverified file target of `size` bytes with a short read soak.
    pub(in crate::workload::scheduler) fn spec(path: &Path, size: u64) -> TargetSpec {
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
    fn a_file_larger_than_its_filesystem_is_refused_before_it_exists() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("t.dat");
        assert!(file_room(&spec(&p, 4096)).is_ok());
        let e = file_room(&spec(&p, 1 << 60)).expect_err("no room");
        assert!(e.to_string().contains("no room for the target file"), "{e}");
        assert!(!p.exists());
    }
}
