//! The processes that hold a file or device open (`/proc/<pid>/fd`) or map it
//! (`/proc/<pid>/maps`). Fails closed: "nobody" is only said when every process could be looked
//! at. A process gone since the listing holds nothing; a process that could not be looked at is
//! an error naming it, with one exception: when nvsoak holds `CAP_SYS_PTRACE` (so it may look
//! at every process of its own standing) and the process holds capabilities nvsoak lacks (the
//! supervisor of the machine or container nvsoak runs in, which the kernel hides even from
//! root), the process is above nvsoak's authority and is skipped. A look on nvsoak's own file
//! ([`Reach::OwnFile`]) also passes over the processes of other users that it may not look at.

use std::fs;
use std::os::unix::fs::MetadataExt;

use super::{Unseen, read_attr};
use crate::util::sysroot::{SysRoot, process_gone};

/// `CAP_SYS_PTRACE`'s bit in the capability masks.
pub(super) const CAP_SYS_PTRACE: u32 = 19;

/// Which processes a look may pass over when it cannot look at them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every process must be looked at, or be above nvsoak's authority ([`above_us`]): the
    /// file or device may hold someone else's data.
    Every,
    /// The file is nvsoak's own: it made it, or the file carries nvsoak's mark. What another
    /// user's process may hold of it is nvsoak's pattern data, and the kernel's permissions,
    /// not nvsoak, stand between that process and the file. So a process of another user that
    /// nvsoak may not look at (an unprivileged nvsoak and root's processes, or `hidepid`) is
    /// passed over, and nvsoak runs without root. A process of its own user that it cannot
    /// look at still refuses.
    OwnFile,
}

/// Every process this one can see, or why not every process can be seen: an unreadable
/// `/proc`, or a `/proc` mounted with `hidepid` (systemd's `ProtectProc=invisible`) while this
/// process lacks `CAP_SYS_PTRACE`, which hides other users' processes (passed over for
/// [`Reach::OwnFile`]).
fn proc_pids(root: &SysRoot, reach: Reach) -> Result<Vec<u32>, Unseen> {
    let me = own_status(root)?;
    let mountinfo = root.proc_self().join("mountinfo");
    let mi = fs::read_to_string(&mountinfo).map_err(|source| Unseen::Unreadable {
        path: mountinfo,
        source,
    })?;
    if let Some(hidepid) = hidepid_of(&mi)
        .filter(|_| !has_cap(&me, CAP_SYS_PTRACE))
        .filter(|_| reach == Reach::Every)
    {
        return Err(Unseen::ProcHidden { hidepid });
    }
    let dir = root.proc_("");
    let rd = fs::read_dir(&dir).map_err(|source| Unseen::Unreadable {
        path: dir.clone(),
        source,
    })?;
    let mut pids = Vec::new();
    for e in rd {
        let e = e.map_err(|source| Unseen::Unreadable {
            path: dir.clone(),
            source,
        })?;
        if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

fn own_status(root: &SysRoot) -> Result<String, Unseen> {
    let p = root.proc_self().join("status");
    fs::read_to_string(&p).map_err(|source| Unseen::Unreadable { path: p, source })
}

/// The `hidepid=` option of the `/proc` mount in `mountinfo`, when it hides anything
/// (`hidepid=invisible`, `noaccess`, `ptraceable`, or the numbers 1 and 2).
pub(in crate::safety) fn hidepid_of(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let mount_point = f.nth(4)?;
        if mount_point != "/proc" {
            return None;
        }
        let (_, rest) = l.split_once(" - ")?;
        let opts = rest.split_whitespace().nth(2)?;
        opts.split(',')
            .find_map(|o| o.strip_prefix("hidepid="))
            .filter(|v| *v != "0" && *v != "off")
            .map(|v| format!("hidepid={v}"))
    })
}

/// A capability mask line (`CapEff:`, `CapPrm:`) of `/proc/<pid>/status` text.
fn cap_mask(status: &str, line: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Whether `/proc/self/status` text gives the effective capability `cap`.
pub(in crate::safety) fn has_cap(status: &str, cap: u32) -> bool {
    cap_mask(status, "CapEff:").is_some_and(|mask| mask & (1u64 << cap) != 0)
}

/// The effective user id in `/proc/<pid>/status` text.
fn euid(status: &str) -> Option<u32> {
    let ids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    ids.split_whitespace().nth(1)?.parse().ok()
}

/// Whether a process that could not be looked at is another user's: both effective user ids
/// are known and differ.
pub(in crate::safety) fn another_users(ours: &str, theirs: &str) -> bool {
    matches!((euid(ours), euid(theirs)), (Some(a), Some(b)) if a != b)
}

/// Whether a process that could not be looked at is above this one's authority: this one
/// holds `CAP_SYS_PTRACE`, and the other's permitted capabilities include some this one's lack.
pub(in crate::safety) fn above_us(ours: &str, theirs: &str) -> bool {
    let (Some(mine), Some(other)) = (cap_mask(ours, "CapPrm:"), cap_mask(theirs, "CapPrm:")) else {
        return false;
    };
    has_cap(ours, CAP_SYS_PTRACE) && other & !mine != 0
}

fn describe_pid(root: &SysRoot, pid: u32) -> String {
    match read_attr(&root.proc_(format!("{pid}/comm"))).ok().flatten() {
        Some(c) => format!("pid {pid} ({c})"),
        None => format!("pid {pid}"),
    }
}

/// What a look at one process found.
enum Look {
    Hit,
    Miss,
}

/// Run `look` on every process but this one; collect the ones it hits. A process gone since
/// the listing is skipped; one that could not be looked at fails the whole check, unless
/// [`above_us`], or another user's on a [`Reach::OwnFile`] look.
fn each_process(
    root: &SysRoot,
    reach: Reach,
    look: impl Fn(u32) -> std::io::Result<Look>,
) -> Result<Vec<String>, Unseen> {
    let ours = own_status(root)?;
    let me = std::process::id();
    let mut out = Vec::new();
    for pid in proc_pids(root, reach)? {
        if pid == me {
            continue;
        }
        match look(pid) {
            Ok(Look::Hit) => out.push(describe_pid(root, pid)),
            Ok(Look::Miss) => {}
            Err(e) if process_gone(&e) => {}
            Err(source) => {
                let theirs = fs::read_to_string(root.proc_(format!("{pid}/status")));
                match theirs {
                    Err(e) if process_gone(&e) => {}
                    Ok(t) if above_us(&ours, &t) => {
                        tracing::debug!(
                            pid,
                            "a process above nvsoak's authority could not be looked at; skipped"
                        );
                    }
                    Ok(t) if reach == Reach::OwnFile && another_users(&ours, &t) => {
                        tracing::debug!(
                            pid,
                            "another user's process could not be looked at; nvsoak's own file, skipped"
                        );
                    }
                    _ => {
                        return Err(Unseen::Process {
                            who: describe_pid(root, pid),
                            source,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Processes other than this one with an open file for which `matches` holds (from
/// `/proc/<pid>/fd`). This process is left out: it holds the descriptors being checked.
pub(in crate::safety) fn openers(
    root: &SysRoot,
    reach: Reach,
    matches: impl Fn(&fs::Metadata) -> bool,
) -> Result<Vec<String>, Unseen> {
    each_process(root, reach, |pid| {
        for e in fs::read_dir(root.proc_(format!("{pid}/fd")))? {
            // A descriptor closed since the listing holds nothing.
            match fs::metadata(e?.path()) {
                Ok(m) if matches(&m) => return Ok(Look::Hit),
                Ok(_) => {}
                Err(e) if process_gone(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Look::Miss)
    })
}

/// Processes other than this one that map the file (`/proc/<pid>/maps`: device as hex
/// `major:minor`, then the inode).
pub(in crate::safety) fn mappers(
    root: &SysRoot,
    dev: u64,
    ino: u64,
    reach: Reach,
) -> Result<Vec<String>, Unseen> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    each_process(root, reach, |pid| {
        let maps = fs::read_to_string(root.proc_(format!("{pid}/maps")))?;
        let hit = maps.lines().any(|l| {
            let mut f = l.split_whitespace().skip(3);
            let (Some(d), Some(i)) = (f.next(), f.next()) else {
                return false;
            };
            let Some((a, b)) = d.split_once(':') else {
                return false;
            };
            u32::from_str_radix(a, 16) == Ok(major)
                && u32::from_str_radix(b, 16) == Ok(minor)
                && i.parse::<u64>() == Ok(ino)
        });
        Ok(if hit { Look::Hit } else { Look::Miss })
    })
}

/// Processes other than this one that hold the regular file `st` open.
pub(in crate::safety) fn file_openers(
    root: &SysRoot,
    st: &fs::Metadata,
    reach: Reach,
) -> Result<Vec<String>, Unseen> {
    let key = (st.dev(), st.ino());
    openers(root, reach, |m| {
        m.file_type().is_file() && (m.dev(), m.ino()) == key
    })
}

/// Every other process's regular files, held open (`/proc/<pid>/fd`) and mapped
/// (`/proc/<pid>/maps`), from one walk over the processes: the file checks of many targets
/// answered at once (see [`super::batch`]). Keys are (device, inode) numbers.
pub(in crate::safety) struct ProcTable {
    open: std::collections::HashMap<(u64, u64), Vec<u32>>,
    mapped: std::collections::HashMap<(u64, u64), Vec<u32>>,
}

impl ProcTable {
    /// Walk every process but this one, under the same rules as a single check (a process
    /// that could not be looked at fails the walk unless `reach` lets it be passed over).
    pub(in crate::safety) fn walk(root: &SysRoot, reach: Reach) -> Result<ProcTable, Unseen> {
        let table = std::cell::RefCell::new(ProcTable {
            open: Default::default(),
            mapped: Default::default(),
        });
        each_process(root, reach, |pid| {
            let mut open = Vec::new();
            for e in fs::read_dir(root.proc_(format!("{pid}/fd")))? {
                match fs::metadata(e?.path()) {
                    Ok(m) if m.file_type().is_file() => open.push((m.dev(), m.ino())),
                    Ok(_) => {}
                    Err(e) if process_gone(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            let maps = fs::read_to_string(root.proc_(format!("{pid}/maps")))?;
            let mut t = table.borrow_mut();
            for key in open {
                t.open.entry(key).or_default().push(pid);
            }
            for key in maps.lines().filter_map(mapped_file) {
                t.mapped.entry(key).or_default().push(pid);
            }
            Ok(Look::Miss)
        })?;
        Ok(table.into_inner())
    }

    /// The processes (`pid 1234 (comm)`) holding the file `key` open.
    pub(in crate::safety) fn openers(&self, root: &SysRoot, key: (u64, u64)) -> Vec<String> {
        Self::described(root, self.open.get(&key))
    }

    /// The processes mapping the file `key`.
    pub(in crate::safety) fn mappers(&self, root: &SysRoot, key: (u64, u64)) -> Vec<String> {
        Self::described(root, self.mapped.get(&key))
    }

    fn described(root: &SysRoot, pids: Option<&Vec<u32>>) -> Vec<String> {
        let mut pids = pids.cloned().unwrap_or_default();
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter().map(|p| describe_pid(root, p)).collect()
    }
}

/// The (device, inode) numbers of the file a `/proc/<pid>/maps` line maps (device as hex
/// `major:minor`), `None` for an anonymous mapping (inode 0) or a line that does not parse.
fn mapped_file(line: &str) -> Option<(u64, u64)> {
    let mut f = line.split_whitespace().skip(3);
    let (d, i) = (f.next()?, f.next()?);
    let (a, b) = d.split_once(':')?;
    let (major, minor) = (
        u32::from_str_radix(a, 16).ok()?,
        u32::from_str_radix(b, 16).ok()?,
    );
    let ino = i.parse::<u64>().ok().filter(|i| *i != 0)?;
    Some((libc::makedev(major, minor), ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ProtectProc=invisible` mounts /proc with hidepid: found, and only on /proc itself.
    #[test]
    fn hidepid_is_read_from_the_proc_mount_only() {
        let m = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw,hidepid=invisible\n\
                 23 1 0:22 / /sys rw shared:2 - sysfs sysfs rw,hidepid=2\n";
        assert_eq!(hidepid_of(m).as_deref(), Some("hidepid=invisible"));
        let plain = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n";
        assert_eq!(hidepid_of(plain), None);
        let off = "22 1 0:21 / /proc rw - proc proc rw,hidepid=0\n";
        assert_eq!(hidepid_of(off), None);
        let two = "22 1 0:21 / /proc rw - proc proc rw,hidepid=2,gid=4\n";
        assert_eq!(hidepid_of(two).as_deref(), Some("hidepid=2"));
    }

    #[test]
    fn a_maps_line_names_its_file_by_device_and_inode_and_anonymous_maps_nothing() {
        let l = "7f1c2a000000-7f1c2a021000 rw-s 00000000 00:1a 4242          /dev/shm/t1.dat";
        assert_eq!(mapped_file(l), Some((libc::makedev(0, 0x1a), 4242)));
        let l = "7f1c2a000000-7f1c2a021000 r--p 00000000 fd:01 131 /usr/lib/libc.so.6";
        assert_eq!(mapped_file(l), Some((libc::makedev(0xfd, 1), 131)));
        let anon = "7ffd5e3f1000-7ffd5e412000 rw-p 00000000 00:00 0                  [stack]";
        assert_eq!(mapped_file(anon), None);
        assert_eq!(mapped_file("garbage"), None);
    }

    #[test]
    fn the_effective_capability_mask_is_read_bit_by_bit() {
        let root = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n";
        assert!(has_cap(root, CAP_SYS_PTRACE));
        // CAP_SYS_ADMIN (21) and CAP_SYS_RAWIO (17) only: the shipped unit's bounding set.
        let unit = format!("CapEff:\t{:016x}\n", (1u64 << 21) | (1u64 << 17));
        assert!(!has_cap(&unit, CAP_SYS_PTRACE));
        assert!(has_cap(&unit, 21));
        assert!(!has_cap("no caps line", CAP_SYS_PTRACE));
    }

    #[test]
    fn only_a_process_with_capabilities_we_lack_is_above_us_and_only_if_we_may_ptrace() {
        let us = "CapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";
        let supervisor = "CapPrm:\t000001ffffffffff\n";
        let peer = "CapPrm:\t000001fffeffffff\n";
        let user = "CapPrm:\t0000000000000000\n";
        assert!(above_us(us, supervisor));
        assert!(!above_us(us, peer));
        assert!(!above_us(us, user));
        // Without CAP_SYS_PTRACE nothing is "above": every hidden process may be a user's.
        let no_ptrace = format!(
            "CapPrm:\t{:016x}\nCapEff:\t{:016x}\n",
            1u64 << 21,
            1u64 << 21
        );
        assert!(!above_us(&no_ptrace, supervisor));
        assert!(!above_us(us, "no caps line"));
    }
}
