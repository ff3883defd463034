//! The verification state a plan's verified targets will keep, foreseen before any target is
//! opened (each target's region from its configured size, or a block device's from sysfs):
//! what `check-config` prints and `state.max_verify_memory` bounds.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::model::spec::TargetSpec;
use crate::model::verify_cost::{OverBudget, VerifyBudget, VerifyScheme, check_budget};

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

/// Whether the verification state of `targets` together fits `budget` on a host with
/// `host_memory` bytes: the rule `run`, `check-config` and a SIGHUP reload all apply. A target
/// whose size cannot be known before it is opened is not counted.
pub fn check_plan_budget(
    targets: &[TargetSpec],
    budget: VerifyBudget,
    host_memory: Option<u64>,
) -> Result<(), OverBudget> {
    let each: Vec<(String, u64)> = targets
        .iter()
        .filter_map(|t| {
            let p = planned_verify(t)?;
            let region = p.region_len.ok()?;
            Some((t.name.clone(), p.scheme.state_bytes(region)))
        })
        .collect();
    let total = each.iter().map(|(_, b)| b).sum();
    check_budget(total, &each, budget, host_memory)
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // A plan the computed state follows; zipf-skewed writes need the stored map.
        assert_eq!(p.scheme, VerifyScheme::Computed);
        let mixed = toml.replace(
            "profile = \"4k-random-read\"",
            "job = { name = \"m\", read = 50, bs = \"4k:1,8k:1\", access = \"random\", skew = \"zipf:1.2\" }",
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
            planned_verify(&super::super::dryrun::tests::spec(
                &d.path().join("u.dat"),
                4096
            )),
            None
        );
        // What the region comes from is what the scheduler exercises.
        assert_eq!(spec.region.len_of(64 << 20), 32 << 20);
    }
}
