//! Who a block device is: its kernel name, serial, WWN and model, read from sysfs through the
//! descriptor that is then written ([`identify_fd`]), and the sysfs reads the other checks
//! share.

use super::*;

/// Who a block device is: its kernel name and the identifiers that survive re-enumeration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceIdentity {
    /// The device node, canonicalised (`/dev/disk/by-id/...` resolved to `/dev/nvme0n1`).
    pub path: PathBuf,
    /// Kernel name, e.g. `loop3`, `nvme0n1`, `sda1`.
    pub kernel_name: String,
    /// Kernel name of the whole disk when this is a partition.
    pub parent: Option<String>,
    pub major: u32,
    pub minor: u32,
    pub serial: Option<String>,
    pub wwn: Option<String>,
    pub model: Option<String>,
    /// What tells this device apart from another under the same name when it has neither
    /// serial nor WWN: for a loop device its backing file's device and inode numbers, offset
    /// and size limit (LOOP_GET_STATUS64 on the descriptor), with the device's size; for any
    /// other device its size. `None` when it has a serial or WWN.
    pub instance: Option<String>,
    /// Whether a drive of its own stands behind the device (sysfs `device` link: an NVMe
    /// namespace, a SCSI or SATA disk), not a loop, device-mapper, md or ram device.
    pub has_drive: bool,
    /// Signatures libblkid found. Filled by [`check_writable`] only, and non-empty only when
    /// `force_overwrite_signatures` let them pass: the caller logs them before writing.
    pub signatures: Vec<Signature>,
}

impl DeviceIdentity {
    /// The stable identifier to record and to compare on reopen: the WWN, else the serial.
    pub fn stable_id(&self) -> Option<&str> {
        self.wwn.as_deref().or(self.serial.as_deref())
    }

    /// True if `other` is the same physical device: same WWN or serial when either has one,
    /// else the same kernel name and device numbers (loop, null_blk).
    pub fn same_device(&self, other: &DeviceIdentity) -> bool {
        match (self.stable_id(), other.stable_id()) {
            (Some(a), Some(b)) => {
                self.wwn == other.wwn && self.serial == other.serial && !a.is_empty() && a == b
            }
            (None, None) => {
                self.kernel_name == other.kernel_name
                    && (self.major, self.minor) == (other.major, other.minor)
                    && self.instance == other.instance
            }
            _ => false,
        }
    }
}

impl fmt::Display for DeviceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.path.display(), self.kernel_name)?;
        if let Some(m) = &self.model {
            write!(f, ", model {m}")?;
        }
        if let Some(s) = &self.serial {
            write!(f, ", serial {s}")?;
        }
        if let Some(w) = &self.wwn {
            write!(f, ", WWN {w}")?;
        }
        write!(f, ")")
    }
}

pub(super) fn sysfs_string(p: &Path) -> Option<String> {
    let raw = fs::read(p).ok()?;
    let s = String::from_utf8_lossy(&raw);
    let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    if s.is_empty() {
        None
    } else {
        Some(s.to_string())
    }
}

/// The serial from a SCSI VPD page 80h (Unit Serial Number): 4-byte header, then ASCII.
pub(super) fn vpd_pg80_serial(p: &Path) -> Option<String> {
    let raw = fs::read(p).ok()?;
    if raw.len() < 4 || raw[1] != 0x80 {
        return None;
    }
    let len = u16::from_be_bytes([raw[2], raw[3]]) as usize;
    let body = raw.get(4..4 + len.min(raw.len() - 4))?;
    let s = String::from_utf8_lossy(body);
    let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    (!s.is_empty()).then(|| s.to_string())
}

pub(super) fn first_of(dirs: &[PathBuf], names: &[&str]) -> Option<String> {
    for d in dirs {
        for n in names {
            if let Some(v) = sysfs_string(&d.join(n)) {
                return Some(v);
            }
        }
    }
    None
}

/// Identify a block device from sysfs: open `path` with `O_PATH`, then [`identify_fd`].
pub fn identify(path: &Path) -> Result<DeviceIdentity, SafetyError> {
    let fd = open_path(path)?;
    identify_fd(fd.as_fd(), path)
}

/// Identify the block device a descriptor refers to: its device number from `fstat`, mapped
/// through `/sys/dev/block/MAJ:MIN`, and the serial, WWN and model of the disk (for a
/// partition, of its whole disk; for an NVMe namespace, of its controller). `shown` is the
/// name the operator used, for messages.
pub fn identify_fd(fd: BorrowedFd<'_>, shown: &Path) -> Result<DeviceIdentity, SafetyError> {
    let path = shown;
    let meta = fstat(fd, shown)?;
    if !meta.file_type().is_block_device() {
        return Err(SafetyError::NotBlockDevice {
            path: path.to_path_buf(),
        });
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let sys = fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).map_err(|e| {
        SafetyError::Identify {
            path: path.to_path_buf(),
            reason: format!("/sys/dev/block/{major}:{minor}: {e}; is sysfs mounted?"),
        }
    })?;
    let kernel_name = sys
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| SafetyError::Identify {
            path: path.to_path_buf(),
            reason: format!("{} has no name", sys.display()),
        })?;
    // For a partition, the identifiers live on the whole disk (the parent directory).
    let is_partition = sys.join("partition").exists();
    let disk = if is_partition {
        sys.parent().map(Path::to_path_buf).unwrap_or(sys.clone())
    } else {
        sys.clone()
    };
    let parent = is_partition
        .then(|| disk.file_name().map(|n| n.to_string_lossy().into_owned()))
        .flatten();
    // NVMe namespace: `device` is the controller (serial, model); with native multipath it may
    // be the subsystem, whose controllers sit one level further.
    let dev_dir = disk.join("device");
    let search = vec![
        disk.clone(),
        dev_dir.clone(),
        dev_dir.join("device"),
        disk.join("../device"),
        // nvme-subsys<N> (native multipath) carries serial and model itself.
        disk.join(".."),
    ];
    let serial =
        first_of(&search, &["serial"]).or_else(|| vpd_pg80_serial(&dev_dir.join("vpd_pg80")));
    let wwn = first_of(&[disk.clone(), dev_dir.clone()], &["wwid"])
        .or_else(|| first_of(std::slice::from_ref(&disk), &["wwn"]));
    let model = first_of(&search, &["model"]);
    let has_drive = dev_dir.exists();
    let instance = (serial.is_none() && wwn.is_none()).then(|| instance_of(fd, &sys, &kernel_name));
    Ok(DeviceIdentity {
        path: node_path(&kernel_name, rdev, shown),
        kernel_name,
        parent,
        major,
        minor,
        serial,
        wwn,
        model,
        instance,
        has_drive,
        signatures: Vec::new(),
    })
}

/// The identity of a device without serial or WWN (see [`DeviceIdentity::instance`]): a loop
/// device re-attached to another file, or a device of another size under the same name, is
/// another device.
pub(super) fn instance_of(fd: BorrowedFd<'_>, sys: &Path, kernel_name: &str) -> String {
    let size = fs::read_to_string(sys.join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or_else(
            || "size unknown".to_string(),
            |s| format!("{} bytes", s * 512),
        );
    if !kernel_name.starts_with("loop") {
        return size;
    }
    // LOOP_GET_STATUS64 on the descriptor itself; an O_PATH descriptor (the checks' own) takes
    // no ioctl, so the inode it names is opened again through /proc/self/fd, read-only and
    // without resolving the path again.
    let status = inuse::loop_status(fd).or_else(|| {
        let f = reopen(fd, libc::O_CLOEXEC | libc::O_NONBLOCK, false).ok()?;
        inuse::loop_status(f.as_fd())
    });
    match status {
        Some(i) => format!(
            "backing file {}:{} inode {}, offset {}, size limit {}, {size}",
            libc::major(i.lo_device),
            libc::minor(i.lo_device),
            i.lo_inode,
            i.lo_offset,
            i.lo_sizelimit
        ),
        // Not bound, or not readable: what sysfs says, named as such.
        None => match fs::read_to_string(sys.join("loop/backing_file")) {
            Ok(b) => format!("backing file {} (sysfs), {size}", b.trim()),
            Err(_) => format!("not bound, {size}"),
        },
    }
}

/// The device node for messages and records: `/dev/<kernel name>` when that node is this
/// device, else the operator's path canonicalised when it still is, else the path as given.
pub(super) fn node_path(kernel_name: &str, rdev: u64, shown: &Path) -> PathBuf {
    let is_it = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == rdev)
    };
    let dev = Path::new("/dev").join(kernel_name);
    if is_it(&dev) {
        return dev;
    }
    match fs::canonicalize(shown) {
        Ok(c) if is_it(&c) => c,
        _ => shown.to_path_buf(),
    }
}

/// WWN forms differ between tools (`naa.5000c500...`, `0x5000c500...`, `eui.0025...`): compare
/// case-insensitively with those prefixes removed.
pub(super) fn normalise_wwn(s: &str) -> String {
    let l = s.trim().to_ascii_lowercase();
    for p in ["naa.", "eui.", "t10.", "nvme.", "0x"] {
        if let Some(rest) = l.strip_prefix(p) {
            return rest.to_string();
        }
    }
    l
}

/// The names `allow_destroy` may give a device, as a refusal words them (`serial "S1" or WWN
/// "eui.…"`); `None` for a device with neither.
pub(super) fn identity_names(id: &DeviceIdentity) -> Option<String> {
    if id.serial.is_none() && id.wwn.is_none() {
        return None;
    }
    Some(
        [
            id.serial.as_ref().map(|s| format!("serial \"{s}\"")),
            id.wwn.as_ref().map(|w| format!("WWN \"{w}\"")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" or "),
    )
}
