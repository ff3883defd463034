//! The devices beneath a block target, checked like the target itself. A loop device writes
//! through to its backing device or file, and a device-mapper or md device to its slaves, so a
//! mount, a holder, a swap area, another loop device or an opener anywhere beneath the target
//! is the target's business too: writing a loop device stacked at an offset on a mounted
//! filesystem's device destroys that filesystem. The walk goes down recursively (a partition
//! walks from its disk), and every refusal names the chain it followed.

use std::fs;
use std::path::{Path, PathBuf};

use super::{
    Above, Dev, Reach, SafetyError, Scan, Unseen, check_block_users, check_file_users, nodes_of,
    openers, parse_devno, probe_exclusive, read_attr, unverifiable,
};
use crate::util::sysroot::SysRoot;

/// Deeper than any stack these checks expect; a longer chain is refused as unknowable.
const MAX_DEPTH: usize = 8;

/// What one device sits on.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lower {
    /// A block device (a loop device's backing device, a dm or md slave).
    Block {
        name: String,
        major: u32,
        minor: u32,
    },
    /// A loop device's backing file, by device and inode numbers.
    File { path: String, key: (u64, u64) },
}

/// One step down: `upper` sits on `lower`, through a loop device at `offset` or as a holder.
struct Step {
    lower: Lower,
    /// `(offset N)` for a loop device, empty otherwise.
    note: String,
    /// Whether `upper` claims `lower` (a dm or md holder does, a loop device does not).
    claims: bool,
    /// The device that sits directly on `lower`: the upper device, or its disk when the
    /// upper device is a partition. Its holder entry and loop device are the target's own.
    via: (String, u64),
}

/// What `dev` (sysfs directory `sys`) sits on: its loop device's backing store, or its
/// `slaves/`; a partition sits on what its disk sits on.
fn steps_of(scan: &Scan<'_>, dev: &Dev) -> Result<Vec<Step>, Unseen> {
    let root = scan.root;
    let link = root.sys(format!("dev/block/{}:{}", dev.major, dev.minor));
    let mut sys = fs::canonicalize(&link).map_err(|source| Unseen::Unreadable {
        path: link.clone(),
        source,
    })?;
    if sys.join("partition").exists()
        && let Some(disk) = sys.parent()
    {
        sys = disk.to_path_buf();
    }
    let disk_devno = read_attr(&sys.join("dev"))?.and_then(|d| parse_devno(&d));
    let via = (
        sys.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dev.name.clone()),
        disk_devno.map_or(libc::makedev(dev.major, dev.minor), |(a, b)| {
            libc::makedev(a, b)
        }),
    );
    let mut steps = Vec::new();
    if let Some(l) = disk_devno.and_then(|d| scan.loops.iter().find(|l| l.devno == Some(d))) {
        let note = if l.offset > 0 {
            format!(" (offset {})", l.offset)
        } else {
            String::new()
        };
        let lower = match l.rdev {
            Some(r) => Lower::Block {
                name: block_name(root, libc::major(r), libc::minor(r))?,
                major: libc::major(r),
                minor: libc::minor(r),
            },
            None => Lower::File {
                path: l.backing.clone(),
                key: l.inode,
            },
        };
        steps.push(Step {
            lower,
            note,
            claims: false,
            via: via.clone(),
        });
    }
    let slaves = sys.join("slaves");
    let entries = match fs::read_dir(&slaves) {
        Ok(rd) => rd.collect::<Result<Vec<_>, _>>(),
        // Only whole disks and dm/md devices have the directory.
        Err(e) if super::absent(&e) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
    .map_err(|source| Unseen::Unreadable {
        path: slaves.clone(),
        source,
    })?;
    let mut names: Vec<_> = entries.iter().map(|e| e.path()).collect();
    names.sort();
    for p in names {
        let Some((major, minor)) = read_attr(&p.join("dev"))?.and_then(|d| parse_devno(&d)) else {
            return Err(Unseen::Unreadable {
                path: p.join("dev"),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        };
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        steps.push(Step {
            lower: Lower::Block { name, major, minor },
            note: String::new(),
            claims: true,
            via: via.clone(),
        });
    }
    Ok(steps)
}

/// The kernel name of block device `major:minor` (the last part of its sysfs path).
fn block_name(root: &SysRoot, major: u32, minor: u32) -> Result<String, Unseen> {
    let link = root.sys(format!("dev/block/{major}:{minor}"));
    let p = fs::canonicalize(&link).map_err(|source| Unseen::Unreadable {
        path: link.clone(),
        source,
    })?;
    Ok(p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default())
}

/// Check everything beneath `dev`, the target at `target`, recursively.
pub(super) fn check_beneath(scan: &Scan<'_>, target: &Path, dev: &Dev) -> Result<(), SafetyError> {
    let chain = format!("{}", dev.path.display());
    walk(scan, target, dev, &chain, 0)
}

fn walk(
    scan: &Scan<'_>,
    target: &Path,
    upper: &Dev,
    chain: &str,
    depth: usize,
) -> Result<(), SafetyError> {
    if depth >= MAX_DEPTH {
        return Err(unverifiable(target)(Unseen::TooDeep(MAX_DEPTH)));
    }
    for step in steps_of(scan, upper).map_err(unverifiable(target))? {
        let above = Above {
            name: &step.via.0,
            devno: step.via.1,
        };
        match &step.lower {
            Lower::Block { name, major, minor } => {
                let lower = Dev {
                    name: name.clone(),
                    path: PathBuf::from("/dev").join(name),
                    major: *major,
                    minor: *minor,
                };
                let chain = format!("{chain} sits on {}{}", lower.path.display(), step.note);
                let beneath = |inner: SafetyError| SafetyError::Beneath {
                    path: target.to_path_buf(),
                    chain: chain.clone(),
                    inner: Box::new(inner),
                };
                let nodes = nodes_of(scan.root, &lower).map_err(unverifiable(target))?;
                check_block_users(scan, target, &nodes, Some(above)).map_err(beneath)?;
                if !step.claims && scan.root.is_host() {
                    // Nothing of the target's own stack claims it, so a claim is someone else's.
                    probe_exclusive(target, &lower.path, false, || SafetyError::Busy {
                        path: target.to_path_buf(),
                        what: lower.path.display().to_string(),
                        holders: openers(scan.root, Reach::Every, |m| {
                            use std::os::unix::fs::{FileTypeExt, MetadataExt};
                            m.file_type().is_block_device()
                                && m.rdev() == libc::makedev(lower.major, lower.minor)
                        })
                        .unwrap_or_else(|why| vec![why.to_string()]),
                    })
                    .map_err(beneath)?;
                }
                walk(scan, target, &lower, &chain, depth + 1)?;
            }
            Lower::File { path, key } => {
                let chain = format!("{chain} sits on the file {path}{}", step.note);
                let beneath = |inner: SafetyError| SafetyError::Beneath {
                    path: target.to_path_buf(),
                    chain: chain.clone(),
                    inner: Box::new(inner),
                };
                let file = Path::new(path);
                check_file_users(scan, file, *key, Some(above), Reach::Every).map_err(beneath)?;
                let others = openers(scan.root, Reach::Every, |m| {
                    use std::os::unix::fs::MetadataExt;
                    m.file_type().is_file() && (m.dev(), m.ino()) == *key
                })
                .map_err(unverifiable(target))?;
                if !others.is_empty() {
                    return Err(beneath(SafetyError::Busy {
                        path: file.to_path_buf(),
                        what: path.clone(),
                        holders: others,
                    }));
                }
            }
        }
    }
    Ok(())
}

/// What a loop device in the target's stack writes through to, for the signature check
/// beneath: the target sees only the part from the loop's offset on, so a filesystem or a
/// partition table before it is invisible to the target's own probe.
#[derive(Debug)]
pub(in crate::safety) struct LoopLower {
    /// `/dev/loop7 sits on /dev/loop1 (offset 1048576)`.
    pub(in crate::safety) chain: String,
    pub(in crate::safety) path: PathBuf,
    /// The block device's `st_rdev`, or the file's device and inode numbers, it must have.
    pub(in crate::safety) rdev: Option<u64>,
    pub(in crate::safety) inode: Option<(u64, u64)>,
}

/// Every block device or file a loop device of `dev`'s stack writes through to, top down. The
/// walk stops at a dm or md device: what is beneath it carries the stack's own signatures (an
/// LVM physical volume, an md member).
pub(super) fn loop_lowers(scan: &Scan<'_>, dev: &Dev) -> Result<Vec<LoopLower>, Unseen> {
    let mut out = Vec::new();
    let mut todo = vec![(
        Dev {
            name: dev.name.clone(),
            path: dev.path.clone(),
            major: dev.major,
            minor: dev.minor,
        },
        dev.path.display().to_string(),
        0,
    )];
    while let Some((upper, chain, depth)) = todo.pop() {
        if depth >= MAX_DEPTH {
            return Err(Unseen::TooDeep(MAX_DEPTH));
        }
        for step in steps_of(scan, &upper)? {
            match step.lower {
                Lower::Block { name, major, minor } => {
                    let path = PathBuf::from("/dev").join(&name);
                    let chain = format!("{chain} sits on {}{}", path.display(), step.note);
                    if step.claims {
                        // A dm or md holder manages what is beneath it: its signatures (an
                        // LVM physical volume, an md member) are the stack's own.
                        continue;
                    }
                    out.push(LoopLower {
                        chain: chain.clone(),
                        path: path.clone(),
                        rdev: Some(libc::makedev(major, minor)),
                        inode: None,
                    });
                    todo.push((
                        Dev {
                            name,
                            path,
                            major,
                            minor,
                        },
                        chain,
                        depth + 1,
                    ));
                }
                Lower::File { path, key } => out.push(LoopLower {
                    chain: format!("{chain} sits on the file {path}{}", step.note),
                    path: PathBuf::from(path.strip_suffix(" (deleted)").unwrap_or(&path)),
                    rdev: None,
                    inode: Some(key),
                }),
            }
        }
    }
    Ok(out)
}
