//! Opening a target: the write-safety checks on the opened descriptor (`safety::claim`), file
//! creation and preallocation, `check-config`'s read-only preflight, aliases.

use super::*;

/// Open (and for files create and preallocate) the target. Returns the fd, the usable size, and
/// whether it is a block device.
pub fn open_target(spec: &TargetSpec, writes: bool) -> Result<OpenedTarget, TargetError> {
    open_target_expecting(spec, writes, None)
}

/// [`open_target`], refusing a block device that is not `expect` (the device the target ran
/// on before it vanished). Every check is made on the descriptor that is then used for I/O
/// (see `safety::claim`): a block device written is held `O_EXCL`, a file target is one
/// nvsoak created (or `allow_destroy` names) and is held with an exclusive lock.
pub fn open_target_expecting(
    spec: &TargetSpec,
    writes: bool,
    expect: Option<&crate::safety::DeviceIdentity>,
) -> Result<OpenedTarget, TargetError> {
    let open_err = |error| TargetError::Open {
        target: spec.name.clone(),
        path: spec.path.clone(),
        error,
    };
    let refused = |e: crate::safety::SafetyError| match e {
        // An open that failed for a plain reason (no such file, permission, O_DIRECT on tmpfs)
        // keeps its io::Error, and tmpfs's EINVAL gets its advice.
        crate::safety::SafetyError::Io { source, .. } => match spec
            .direct
            .then(|| crate::workload::odirect::explain_open_error(&spec.path, &source))
            .flatten()
        {
            Some(reason) => TargetError::Refused {
                target: spec.name.clone(),
                reason,
            },
            None => open_err(source),
        },
        other => TargetError::Refused {
            target: spec.name.clone(),
            reason: other.to_string(),
        },
    };
    let node = target_node(spec)?;
    let is_block = std::fs::metadata(&node.path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    passthru_target(spec, is_block)?;
    if is_block {
        let claimed = if writes {
            crate::safety::claim_block(
                &node.path,
                spec.allow_destroy.as_deref(),
                spec.force_overwrite_signatures,
                spec.direct,
                expect,
            )
        } else {
            crate::safety::claim_read_only(&node.path, spec.direct, expect)
        }
        .map_err(refused)?;
        node.check_claimed(spec, &claimed.file)?;
        for sig in &claimed.identity.signatures {
            tracing::warn!(target_name = %spec.name, path = %spec.path.display(), signature = %sig,
                "force_overwrite_signatures: about to destroy this signature");
        }
        let mut f = claimed.file;
        let size = f.seek(SeekFrom::End(0)).map_err(open_err)?;
        if writes {
            destroy_accepted(&spec.name, &spec.path, size, &claimed.identity);
        }
        return Ok(OpenedTarget {
            fd: OwnedFd::from(f),
            size,
            is_block,
            identity: Some(claimed.identity),
        });
    }
    // Before the file is created: a run refused for want of room leaves no empty file.
    super::dryrun::file_room(spec)?;
    let claimed = crate::safety::claim_file(
        &spec.name,
        &spec.path,
        spec.allow_destroy.as_deref(),
        spec.direct,
    )
    .map_err(refused)?;
    if claimed.created {
        tracing::info!(target_name = %spec.name, path = %claimed.path.display(),
            "created the target file (marked as nvsoak's)");
    }
    let f = claimed.file;
    let size = spec.size.unwrap_or(0);
    let cur = f.metadata().map_err(open_err)?.len();
    if cur < size || !fully_allocated(&f, size) {
        preallocate(&f, size).map_err(|error| TargetError::Prealloc {
            target: spec.name.clone(),
            path: spec.path.clone(),
            size,
            error,
        })?;
    }
    Ok(OpenedTarget {
        fd: OwnedFd::from(f),
        size,
        is_block,
        identity: None,
    })
}

/// Open every member of a target spanning several block devices (`paths`), each claimed as
/// [`open_target`] claims one device (checks on the opened descriptor, held `O_EXCL`), each named
/// by a name of `allow_destroy`. If any member is refused, or a name names no member, the
/// target is refused: the members already claimed are released, and nothing was written.
pub fn open_members(spec: &TargetSpec, writes: bool) -> Result<Vec<OpenedTarget>, TargetError> {
    let mut opened = Vec::with_capacity(spec.members.len());
    let mut used = vec![false; spec.allow_destroy_list.len()];
    for (m, path) in spec.members.iter().enumerate() {
        let refused = |e: crate::safety::SafetyError| TargetError::Refused {
            target: spec.name.clone(),
            reason: format!("paths[{m}]: {e}; no member of the target is written"),
        };
        let claimed = if writes {
            let (c, which) = crate::safety::claim_block_among(
                path,
                &spec.allow_destroy_list,
                spec.force_overwrite_signatures,
                spec.direct,
                None,
            )
            .map_err(refused)?;
            if let Some(u) = used.get_mut(which) {
                *u = true;
            }
            c
        } else {
            crate::safety::claim_read_only(path, spec.direct, None).map_err(refused)?
        };
        for sig in &claimed.identity.signatures {
            tracing::warn!(target_name = %spec.name, path = %path.display(), signature = %sig,
                "force_overwrite_signatures: about to destroy this signature");
        }
        let mut f = claimed.file;
        let size = f
            .seek(SeekFrom::End(0))
            .map_err(|error| TargetError::Open {
                target: spec.name.clone(),
                path: path.clone(),
                error,
            })?;
        opened.push(OpenedTarget {
            fd: OwnedFd::from(f),
            size,
            is_block: true,
            identity: Some(claimed.identity),
        });
    }
    if writes {
        unused_names(spec, &used)?;
        // Every member claimed and named: from here each one is written.
        for (o, path) in opened.iter().zip(&spec.members) {
            if let Some(id) = &o.identity {
                destroy_accepted(&spec.name, path, o.size, id);
            }
        }
    }
    Ok(opened)
}

/// The journal's record of the moment a block device's data is given up: `allow_destroy`
/// named it, every safety check passed, and the target's plan writes it from now on. Names
/// the device every way an operator might look it up afterwards.
fn destroy_accepted(
    target: &str,
    path: &std::path::Path,
    size: u64,
    id: &crate::safety::DeviceIdentity,
) {
    let none = || "-".to_string();
    tracing::warn!(target_name = %target, path = %path.display(), device = %id.path.display(),
        size_bytes = size, model = %id.model.clone().unwrap_or_else(none),
        serial = %id.serial.clone().unwrap_or_else(none), wwn = %id.wwn.clone().unwrap_or_else(none),
        "allow_destroy accepted: {} ({}, {}) will be overwritten; its data is destroyed",
        path.display(), crate::model::fmt::fmt_bytes(size as f64),
        id.model.as_deref().unwrap_or("unknown model"));
}

/// A name in a spanning target's `allow_destroy` that named no member: refused, so a typo (or a
/// member left out of `paths`) cannot hide.
fn unused_names(spec: &TargetSpec, used: &[bool]) -> Result<(), TargetError> {
    match used.iter().position(|u| !u) {
        Some(i) => Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: format!(
                "allow_destroy[{i}] (\"{}\") names none of the target's paths; every name must name a member (remove it, or add its device to paths); no member of the target is written",
                spec.allow_destroy_list[i]
            ),
        }),
        None => Ok(()),
    }
}

/// [`preflight`] for a target spanning several devices: every member checked as
/// [`open_members`] checks it, and every `allow_destroy` name used.
fn preflight_members(spec: &TargetSpec) -> Result<Option<String>, TargetError> {
    use crate::safety::SafetyError;
    if !plan_writes(spec) {
        for (m, path) in spec.members.iter().enumerate() {
            if !crate::safety::is_block_device(path) {
                return Err(TargetError::Refused {
                    target: spec.name.clone(),
                    reason: format!("paths[{m}]: {} is not a block device", path.display()),
                });
            }
        }
        return members_poll_preflight(spec).map(|()| None);
    }
    let mut used = vec![false; spec.allow_destroy_list.len()];
    for (m, path) in spec.members.iter().enumerate() {
        match crate::safety::check_writable_among(
            path,
            &spec.allow_destroy_list,
            spec.force_overwrite_signatures,
        ) {
            Ok((_, which)) => {
                if let Some(u) = used.get_mut(which) {
                    *u = true;
                }
            }
            Err(SafetyError::Io { path, source })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                return Ok(Some(format!(
                    "target {}: not checked: opening {} was refused ({source}), so the exclusive-claim and signature checks did not run; run check-config as root to run them",
                    spec.name,
                    path.display()
                )));
            }
            Err(SafetyError::Io { source, .. }) => {
                return Err(TargetError::Open {
                    target: spec.name.clone(),
                    path: path.clone(),
                    error: source,
                });
            }
            Err(e) => {
                return Err(TargetError::Refused {
                    target: spec.name.clone(),
                    reason: format!("paths[{m}]: {e}; no member of the target is written"),
                });
            }
        }
    }
    unused_names(spec, &used)?;
    members_poll_preflight(spec).map(|()| None)
}

/// The polled engines' check on every member.
fn members_poll_preflight(spec: &TargetSpec) -> Result<(), TargetError> {
    spec.members
        .iter()
        .try_for_each(|path| poll_preflight(spec, path))
}

/// The read-only part of [`open_target_expecting`]'s checks, for `check-config`: the same
/// checks in the same order, refused with the same message, and nothing created, claimed or
/// written. `Ok(Some(note))` names the checks that could not run without permission to open
/// the device (not root).
pub fn preflight(spec: &TargetSpec) -> Result<Option<String>, TargetError> {
    use crate::safety::SafetyError;
    if spec.is_spanning() {
        return preflight_members(spec);
    }
    let node = target_node(spec)?;
    let is_block = std::fs::metadata(&node.path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    passthru_target(spec, is_block)?;
    let r = if is_block {
        if !plan_writes(spec) {
            super::dryrun::steps_device(spec, &node.path)?;
            return poll_preflight(spec, &node.path).map(|()| None);
        }
        crate::safety::check_writable(
            &node.path,
            spec.allow_destroy.as_deref(),
            spec.force_overwrite_signatures,
        )
        .map(|_| ())
    } else {
        super::dryrun::file_room(spec)?;
        crate::safety::check_file_target(&spec.path, spec.allow_destroy.as_deref())
    };
    match r {
        Ok(()) => {
            super::dryrun::steps_device(spec, &node.path)?;
            poll_preflight(spec, &node.path).map(|()| None)
        }
        Err(SafetyError::Io { path, source })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Ok(Some(format!(
                "target {}: not checked: opening {} was refused ({source}), so the exclusive-claim and signature checks did not run; run check-config as root to run them",
                spec.name,
                path.display()
            )))
        }
        Err(SafetyError::Io { source, .. }) => Err(TargetError::Open {
            target: spec.name.clone(),
            path: spec.path.clone(),
            error: source,
        }),
        Err(e) => Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: e.to_string(),
        }),
    }
}

/// The node a target's checks and claim apply to: its path, except that a passthrough
/// engine's target given as a namespace's generic device (`/dev/ngXnY`) is that namespace's
/// block device, found through sysfs from the char device's number
/// (`passthru::namespace_of_generic`), whose number the claimed descriptor must then have.
pub(crate) struct TargetNode {
    pub path: PathBuf,
    /// The block device's number when `path` was resolved from a generic device.
    resolved: Option<(u64, u64)>,
}

impl TargetNode {
    /// The claimed descriptor is the block device the generic device was resolved to (the
    /// `/dev` node could have been replaced between the look-up and the open).
    fn check_claimed(&self, spec: &TargetSpec, f: &File) -> Result<(), TargetError> {
        let Some(want) = self.resolved else {
            return Ok(());
        };
        use std::os::unix::fs::MetadataExt;
        let rdev = f.metadata().map(|m| m.rdev()).unwrap_or(0);
        let got = (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev));
        if got == want {
            return Ok(());
        }
        Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: format!(
                "{} is device {}:{}, not {}:{}, the namespace of {}",
                self.path.display(),
                got.0,
                got.1,
                want.0,
                want.1,
                spec.path.display()
            ),
        })
    }
}

pub(crate) fn target_node(spec: &TargetSpec) -> Result<TargetNode, TargetError> {
    use std::os::unix::fs::MetadataExt;
    let plain = || TargetNode {
        path: spec.path.clone(),
        resolved: None,
    };
    if !spec.engine.is_passthru() {
        return Ok(plain());
    }
    let Ok(m) = std::fs::metadata(&spec.path) else {
        return Ok(plain());
    };
    if !m.file_type().is_char_device() {
        return Ok(plain());
    }
    let (maj, min) = (
        nix::sys::stat::major(m.rdev()),
        nix::sys::stat::minor(m.rdev()),
    );
    let (ns, bdev) = crate::engine::passthru::namespace_of_generic(Path::new("/sys"), maj, min)
        .map_err(|e| TargetError::Refused {
            target: spec.name.clone(),
            reason: format!(
                "engine = \"{}\" with {} as the target: {e}",
                spec.engine.as_str(),
                spec.path.display()
            ),
        })?;
    let path = Path::new("/dev").join(&ns.block);
    tracing::debug!(target_name = %spec.name, generic = %spec.path.display(), block = %path.display(),
        "the target is the generic device of namespace {}; its block device is checked and held", ns.block);
    Ok(TargetNode {
        path,
        resolved: Some(bdev),
    })
}

/// The passthrough engines need an NVMe namespace as the target, named by its block device or
/// its generic device (resolved by [`target_node`]): the safety checks and the `O_EXCL` hold
/// apply to the block device, and the engine finds the generic device from the claimed
/// descriptor. A file named as the target is refused before anything opens it for writing.
fn passthru_target(spec: &TargetSpec, is_block: bool) -> Result<(), TargetError> {
    if !spec.engine.is_passthru() || is_block {
        return Ok(());
    }
    Err(TargetError::Refused {
        target: spec.name.clone(),
        reason: format!(
            "engine = \"{}\" needs an NVMe namespace as the target (its block device /dev/nvmeXnY or generic device /dev/ngXnY), and {} is neither",
            spec.engine.as_str(),
            spec.path.display()
        ),
    })
}

/// The polled engines: the device behind the target `path` (or the directory its file will be
/// created in) must have poll queues, checked as the engine checks it at start.
fn poll_preflight(spec: &TargetSpec, path: &Path) -> Result<(), TargetError> {
    if !spec.engine.is_polled() {
        return Ok(());
    }
    if let Some(reason) = crate::engine::kernelbugs::refusal_here(spec.engine) {
        return Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: crate::engine::EngineError::KernelBug {
                engine: spec.engine,
                reason,
            }
            .to_string(),
        });
    }
    let at = if path.exists() {
        path.to_path_buf()
    } else {
        path.parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    };
    let f = std::fs::File::open(&at).map_err(|error| TargetError::Open {
        target: spec.name.clone(),
        path: at.clone(),
        error,
    })?;
    crate::engine::pollcap::check(Path::new("/sys"), &f).map_err(|e| TargetError::Refused {
        target: spec.name.clone(),
        reason: crate::engine::EngineError::PollUnsupported {
            engine: spec.engine,
            refusal: e,
        }
        .to_string(),
    })
}

/// Two targets that are one device or one file, however named (symlink, `mknod` alias, hard
/// link): refused before any target opens. `run` and `check-config` both call it.
pub fn check_aliases(targets: &[TargetSpec]) -> Result<(), TargetError> {
    // A spanning target is each of its members; a passthrough target named by its generic
    // device is its namespace's block device.
    let nodes: Vec<(&str, PathBuf)> = targets
        .iter()
        .flat_map(|t| {
            if t.is_spanning() {
                t.member_paths()
                    .into_iter()
                    .map(|p| (t.name.as_str(), p.to_path_buf()))
                    .collect::<Vec<_>>()
            } else {
                let p = target_node(t).map_or_else(|_| t.path.clone(), |n| n.path);
                vec![(t.name.as_str(), p)]
            }
        })
        .collect();
    crate::safety::same_targets(nodes.iter().map(|(n, p)| (*n, p.as_path())))
        .map_err(TargetError::Alias)
}

/// An opened target.
pub struct OpenedTarget {
    pub fd: OwnedFd,
    pub size: u64,
    pub is_block: bool,
    /// Block devices: who they are, to recognise the same device when it comes back.
    pub identity: Option<crate::safety::DeviceIdentity>,
}

fn fully_allocated(f: &File, size: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    f.metadata()
        .map(|m| m.blocks() * 512 >= size)
        .unwrap_or(false)
}

fn preallocate(f: &File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    if size == 0 {
        return Ok(());
    }
    let len = i64::try_from(size).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    nix::fcntl::posix_fallocate(f.as_fd(), 0, len).map_err(std::io::Error::from)
}

/// Whether any phase of the plan writes.
pub fn plan_writes(spec: &TargetSpec) -> bool {
    spec.phases.iter().any(|p| match p {
        PhaseSpec::Precondition { .. } => true,
        PhaseSpec::Sweep { job, .. } => job.read_pct < 100,
        PhaseSpec::Soak { jobs, .. } => jobs.iter().any(|j| j.read_pct < 100),
        // A purge erases: it is claimed exactly as a write is.
        PhaseSpec::Purge { .. } => true,
        PhaseSpec::SelfTest { .. } => false,
    })
}
