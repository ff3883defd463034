//! SATA disks from sysfs: `/sys/block/sd*` whose SCSI vendor (`device/vendor`) is `ATA`, the
//! name libata's SAT layer gives every ATA disk. The sysfs root is a parameter so tests point
//! it at a fake tree. A disk behind a USB bridge or SAS HBA shows its own vendor there and is
//! not listed; `nvsoak health /dev/sdX` still tries it directly, and says plainly when the
//! bridge does not pass ATA commands through.

use std::path::{Path, PathBuf};

/// One ATA disk as sysfs shows it (IDENTIFY replaces the strings once it answers).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AtaDisk {
    /// `sda`
    pub name: String,
    /// `/dev/sda`
    pub dev_path: PathBuf,
    /// `device/model` (libata truncates it to 16 characters).
    pub model: String,
    /// `device/rev` (libata: the last 4 characters of the firmware revision).
    pub firmware: String,
    /// `device/wwid`: `naa.5000c500a1b2c3d4`, or `t10.ATA  MODEL  SERIAL` without a WWN.
    pub wwid: String,
}

/// The SCSI vendor libata reports for every ATA disk.
pub const ATA_VENDOR: &str = "ATA";

fn read_attr(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `sd` followed by letters only (`sda`, `sdab`), not a partition (`sda1`).
fn is_sd_disk(name: &str) -> bool {
    name.strip_prefix("sd")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_lowercase()))
}

/// The disk's order as the kernel names them: `sdz` before `sdaa`.
fn order(name: &str) -> (usize, String) {
    (name.len(), name.to_string())
}

/// Every ATA disk under `<sysfs_root>/block`, in name order. A missing directory gives an
/// empty list.
pub fn discover(sysfs_root: &Path) -> std::io::Result<Vec<AtaDisk>> {
    let block = sysfs_root.join("block");
    let rd = match std::fs::read_dir(&block) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        if !is_sd_disk(&name) {
            continue;
        }
        let dev = block.join(&name).join("device");
        if read_attr(&dev, "vendor") != ATA_VENDOR {
            continue;
        }
        out.push(AtaDisk {
            dev_path: PathBuf::from("/dev").join(&name),
            model: read_attr(&dev, "model"),
            firmware: read_attr(&dev, "rev"),
            wwid: read_attr(&dev, "wwid"),
            name,
        });
    }
    out.sort_by_key(|d| order(&d.name));
    Ok(out)
}

/// `/dev/sdX` named directly (not listed by sysfs as an ATA disk, e.g. behind a USB bridge).
pub fn direct(path: &str) -> Option<AtaDisk> {
    let p = PathBuf::from(path);
    let name = p.file_name()?.to_str()?.to_string();
    if !is_sd_disk(&name) || !p.exists() {
        return None;
    }
    Some(AtaDisk {
        name,
        dev_path: p,
        model: String::new(),
        firmware: String::new(),
        wwid: String::new(),
    })
}

/// Fake sysfs trees for the unit tests.
#[cfg(test)]
pub(crate) mod fake {
    use std::path::Path;

    /// `<root>/block/<name>/device/{vendor,model,rev,wwid}`.
    pub fn add_disk(root: &Path, name: &str, vendor: &str, model: &str, wwid: &str) {
        let dev = root.join("block").join(name).join("device");
        std::fs::create_dir_all(&dev).expect("mkdir fake sysfs");
        // sysfs pads the SCSI strings with spaces.
        std::fs::write(dev.join("vendor"), format!("{vendor:<8}\n")).expect("write vendor");
        std::fs::write(dev.join("model"), format!("{model:<16}\n")).expect("write model");
        std::fs::write(dev.join("rev"), "011J\n").expect("write rev");
        std::fs::write(dev.join("wwid"), format!("{wwid}\n")).expect("write wwid");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_ata_disks_only_in_kernel_order() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_disk(
            root.path(),
            "sdb",
            "ATA",
            "ZA3840NM10001",
            "naa.5000c500a1b2c3d4",
        );
        fake::add_disk(root.path(), "sdaa", "ATA", "ZA480NM10011", "");
        fake::add_disk(root.path(), "sda", "Samsung", "Portable SSD T5", "");
        std::fs::create_dir_all(root.path().join("block/sdb1/device")).expect("partition");
        std::fs::create_dir_all(root.path().join("block/nvme0n1")).expect("nvme");
        let found = discover(root.path()).expect("discover");
        let names: Vec<&str> = found.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["sdb", "sdaa"]);
        assert_eq!(found[0].model, "ZA3840NM10001", "padding trimmed");
        assert_eq!(found[0].wwid, "naa.5000c500a1b2c3d4");
        assert_eq!(found[0].dev_path, PathBuf::from("/dev/sdb"));
        let empty = tempfile::tempdir().expect("tempdir");
        assert!(discover(empty.path()).expect("no block dir").is_empty());
    }

    #[test]
    fn direct_names_need_an_existing_sd_node() {
        assert!(direct("/dev/sdzz9").is_none(), "a partition name");
        assert!(direct("/nonexistent/sdq").is_none(), "no such node");
    }
}
