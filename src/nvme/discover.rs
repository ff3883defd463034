//! Controllers and namespaces from sysfs (`/sys/class/nvme`). The sysfs root is a parameter
//! so tests point it at a fake tree.

use std::path::{Path, PathBuf};

use regex::Regex;

/// One NVMe controller as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Controller {
    /// `nvme0`
    pub name: String,
    /// `/dev/nvme0`
    pub dev_path: PathBuf,
    pub serial: String,
    pub model: String,
    pub firmware: String,
    pub namespaces: Vec<Namespace>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Namespace {
    /// The block device name, `nvme0n1`.
    pub name: String,
    pub nsid: u32,
    /// `/dev/nvme0n1`
    pub dev_path: PathBuf,
}

/// Errors from discovery and device matching.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("{path}: cannot list NVMe controllers: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("health.{key}: `{pattern}` is not a valid regular expression: {source}")]
    BadRegex {
        key: &'static str,
        pattern: String,
        #[source]
        source: regex::Error,
    },
}

fn read_attr(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Parse `nvme<C>` into C.
fn ctrl_number(name: &str) -> Option<u32> {
    name.strip_prefix("nvme")?.parse().ok()
}

/// Parse a namespace entry name: `nvme0n1` or the multipath form `nvme0c0n1` (whose block
/// device is `nvme0n1`). Returns (block device name, trailing namespace number).
fn ns_entry(name: &str) -> Option<(String, u32)> {
    let rest = name.strip_prefix("nvme")?;
    let (head, n) = rest.split_once('n')?;
    let num: u32 = n.parse().ok()?;
    let subsys = match head.split_once('c') {
        Some((s, c)) => {
            c.parse::<u32>().ok()?;
            s
        }
        None => head,
    };
    subsys.parse::<u32>().ok()?;
    Some((format!("nvme{subsys}n{num}"), num))
}

/// All controllers under `<sysfs_root>/class/nvme`, sorted by controller number. A missing
/// `class/nvme` directory (no NVMe driver) gives an empty list.
pub fn discover(sysfs_root: &Path) -> Result<Vec<Controller>, DiscoverError> {
    let class = sysfs_root.join("class/nvme");
    let rd = match std::fs::read_dir(&class) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(DiscoverError::Read {
                path: class,
                source,
            });
        }
    };
    let mut out = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        if ctrl_number(&name).is_none() {
            continue;
        }
        let dir = class.join(&name);
        let mut namespaces = namespaces_of(sysfs_root, &dir, &name);
        namespaces.sort_by_key(|n| n.nsid);
        namespaces.dedup_by(|a, b| a.name == b.name);
        out.push(Controller {
            dev_path: PathBuf::from("/dev").join(&name),
            serial: read_attr(&dir, "serial"),
            model: read_attr(&dir, "model"),
            firmware: read_attr(&dir, "firmware_rev"),
            namespaces,
            name,
        });
    }
    out.sort_by_key(|c| ctrl_number(&c.name));
    Ok(out)
}

fn namespaces_of(sysfs_root: &Path, dir: &Path, ctrl: &str) -> Vec<Namespace> {
    let mut out = Vec::new();
    let mut push = |entry_dir: &Path, block: String, num: u32| {
        let nsid = read_attr(entry_dir, "nsid").parse().unwrap_or(num);
        if !out.iter().any(|n: &Namespace| n.name == block) {
            out.push(Namespace {
                dev_path: PathBuf::from("/dev").join(&block),
                name: block,
                nsid,
            });
        }
    };
    if let Ok(rd) = std::fs::read_dir(dir) {
        for ent in rd.flatten() {
            let n = ent.file_name().to_string_lossy().to_string();
            if let Some((block, num)) = ns_entry(&n) {
                push(&dir.join(&n), block, num);
            }
        }
    }
    // Also /sys/block/nvmeXnY/device -> .../nvmeX (non-multipath kernels).
    if let Ok(rd) = std::fs::read_dir(sysfs_root.join("block")) {
        for ent in rd.flatten() {
            let n = ent.file_name().to_string_lossy().to_string();
            let Some((block, num)) = ns_entry(&n) else {
                continue;
            };
            let dev = sysfs_root.join("block").join(&n).join("device");
            let owner = std::fs::read_link(&dev)
                .ok()
                .and_then(|l| l.file_name().map(|f| f.to_string_lossy().to_string()));
            if owner.as_deref() == Some(ctrl) {
                push(&sysfs_root.join("block").join(&n), block, num);
            }
        }
    }
    out
}

/// Include/exclude rules: controller name, serial, or `re:REGEX` (against name, serial and
/// model).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    include: Vec<Matcher>,
    exclude: Vec<Matcher>,
}

#[derive(Debug, Clone)]
enum Matcher {
    Exact(String),
    Re(Regex),
}

impl Matcher {
    fn parse(key: &'static str, s: &str) -> Result<Self, DiscoverError> {
        match s.strip_prefix("re:") {
            Some(p) => Regex::new(p)
                .map(Matcher::Re)
                .map_err(|source| DiscoverError::BadRegex {
                    key,
                    pattern: p.to_string(),
                    source,
                }),
            None => Ok(Matcher::Exact(
                s.strip_prefix("/dev/").unwrap_or(s).to_string(),
            )),
        }
    }

    fn matches(&self, c: &Controller) -> bool {
        match self {
            Matcher::Exact(s) => {
                *s == c.name
                    || (!c.serial.is_empty() && *s == c.serial)
                    || c.namespaces.iter().any(|n| n.name == *s)
            }
            Matcher::Re(r) => r.is_match(&c.name) || r.is_match(&c.serial) || r.is_match(&c.model),
        }
    }
}

impl Filter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, DiscoverError> {
        Ok(Filter {
            include: include
                .iter()
                .map(|s| Matcher::parse("include", s))
                .collect::<Result<_, _>>()?,
            exclude: exclude
                .iter()
                .map(|s| Matcher::parse("exclude", s))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Included (no include rules = all) and not excluded.
    pub fn allows(&self, c: &Controller) -> bool {
        (self.include.is_empty() || self.include.iter().any(|m| m.matches(c)))
            && !self.exclude.iter().any(|m| m.matches(c))
    }
}

#[cfg(test)]
pub(crate) mod fake {
    use std::path::Path;

    /// Build a fake sysfs controller: `class/nvme/<name>/{serial,model,firmware_rev}` and one
    /// namespace directory per nsid.
    pub fn add_ctrl(root: &Path, name: &str, serial: &str, model: &str, nsids: &[u32]) {
        let dir = root.join("class/nvme").join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("serial"), format!("{serial}  \n")).expect("write");
        std::fs::write(dir.join("model"), format!("{model}\n")).expect("write");
        std::fs::write(dir.join("firmware_rev"), "7.2.0   \n").expect("write");
        for n in nsids {
            let ns = dir.join(format!("{name}n{n}"));
            std::fs::create_dir_all(&ns).expect("mkdir");
            std::fs::write(ns.join("nsid"), format!("{n}\n")).expect("write");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovers_controllers_and_namespaces() {
        let d = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(d.path(), "nvme10", "S10", "Model Ten", &[1]);
        fake::add_ctrl(d.path(), "nvme0", "SOAK0001", "QEMU NVMe Ctrl", &[2, 1]);
        std::fs::write(d.path().join("class/nvme/nvme-fabrics"), "").expect("noise");
        // A namespace visible only through /sys/block/<ns>/device.
        std::fs::create_dir_all(d.path().join("class/nvme/nvme10/device")).expect("mkdir");
        std::fs::create_dir_all(d.path().join("block/nvme10n2")).expect("mkdir");
        std::os::unix::fs::symlink(
            "../../class/nvme/nvme10",
            d.path().join("block/nvme10n2/device"),
        )
        .expect("symlink");
        let cs = discover(d.path()).expect("discover");
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[0].name, "nvme0");
        assert_eq!(cs[0].serial, "SOAK0001");
        assert_eq!(cs[0].model, "QEMU NVMe Ctrl");
        assert_eq!(cs[0].firmware, "7.2.0");
        assert_eq!(cs[0].dev_path, PathBuf::from("/dev/nvme0"));
        let ns: Vec<_> = cs[0]
            .namespaces
            .iter()
            .map(|n| (n.name.as_str(), n.nsid))
            .collect();
        assert_eq!(ns, vec![("nvme0n1", 1), ("nvme0n2", 2)]);
        let ns: Vec<_> = cs[1].namespaces.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(ns, vec!["nvme10n1", "nvme10n2"]);
    }

    #[test]
    fn multipath_entries_map_to_the_head_device() {
        assert_eq!(ns_entry("nvme0c1n3"), Some(("nvme0n3".into(), 3)));
        assert_eq!(ns_entry("nvme2n1"), Some(("nvme2n1".into(), 1)));
        assert_eq!(ns_entry("nvme2"), None);
        assert_eq!(ns_entry("nvme-subsys0"), None);
    }

    #[test]
    fn missing_class_dir_is_empty() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(discover(d.path()).expect("ok").is_empty());
    }

    #[test]
    fn filters_by_name_serial_and_regex() {
        let d = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(d.path(), "nvme0", "SOAK0001", "QEMU NVMe Ctrl", &[1]);
        fake::add_ctrl(d.path(), "nvme1", "HW123", "HWE52P433T2M005N", &[1]);
        fake::add_ctrl(d.path(), "nvme2", "DP9", "DapuStor H3200", &[1]);
        let cs = discover(d.path()).expect("discover");
        let pick = |inc: &[&str], exc: &[&str]| -> Vec<String> {
            let f = Filter::new(
                &inc.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &exc.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .expect("filter");
            cs.iter()
                .filter(|c| f.allows(c))
                .map(|c| c.name.clone())
                .collect()
        };
        assert_eq!(pick(&[], &[]), vec!["nvme0", "nvme1", "nvme2"]);
        assert_eq!(pick(&["HW123"], &[]), vec!["nvme1"]);
        assert_eq!(pick(&["/dev/nvme2"], &[]), vec!["nvme2"]);
        assert_eq!(pick(&["nvme0n1"], &[]), vec!["nvme0"]);
        assert_eq!(pick(&[], &["re:^QEMU"]), vec!["nvme1", "nvme2"]);
        assert_eq!(pick(&["re:H3200|HWE"], &["nvme1"]), vec!["nvme2"]);
        let e = Filter::new(&["re:(".into()], &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("health.include: `(` is not a valid regular expression"),
            "{e}"
        );
    }
}
