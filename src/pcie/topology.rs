//! PCIe topology of the NVMe controllers: each controller's PCI address, its chain of bridges
//! up to the root port, its physical slot and its NVMe subsystem; cards (controllers behind
//! one switch upstream port, or in one physical slot) and drives (one NVMe subsystem); link
//! figures and AER counters of every function on those paths. Pure over a sysfs root given as
//! a parameter, so tests use a fixture tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::sysfs::{AerCounts, LinkFigures, degraded, is_pci_address, slot_form};

/// Where a PCI function sits on a controller's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    RootPort,
    SwitchUpstream,
    SwitchDownstream,
    Endpoint,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::RootPort => "root_port",
            Role::SwitchUpstream => "switch_upstream",
            Role::SwitchDownstream => "switch_downstream",
            Role::Endpoint => "endpoint",
        }
    }
}

/// One NVMe controller's place in the topology.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CtrlTopology {
    /// `nvme0`
    pub name: String,
    /// The endpoint's PCI address (`0000:04:00.0`); empty when sysfs shows none (fabrics).
    pub address: String,
    /// PCI addresses from the root port down to the endpoint (the endpoint last).
    pub path: Vec<String>,
    /// The outermost physical slot on the path (`bus/pci/slots/<name>`), if sysfs has one.
    pub slot: Option<String>,
    /// `nvme-subsys0`, from `class/nvme-subsystem`.
    pub subsystem: Option<String>,
    pub subsystem_nqn: Option<String>,
    /// The card this controller belongs to ([`Card::id`]), if any.
    pub card: Option<String>,
    /// The drive this controller belongs to ([`Drive::id`]).
    pub drive: String,
}

/// One PCI function on some controller's path, with its link and AER figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PciFunction {
    pub address: String,
    pub role: Role,
    pub link: LinkFigures,
    /// For a function at the lower end of a physical link (an endpoint, a switch upstream
    /// port): whether that link runs below what both ends support. `None` for the upper ends
    /// (root and downstream ports: their link is reported by the function below) and when
    /// sysfs does not tell.
    pub degraded: Option<bool>,
    /// Unix time of the latest poll that saw this link degraded (kept across polls).
    pub degraded_seen_at: Option<f64>,
    pub aer: Option<AerCounts>,
}

/// Controllers behind one switch upstream port, or in one physical slot, of at least two
/// drives (two controllers of one dual-port drive in one slot are a drive, not a card).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Card {
    /// The switch upstream port's address, else `slot:<name>`.
    pub id: String,
    pub upstream_port: Option<String>,
    pub slot: Option<String>,
    /// Controller names, sorted.
    pub controllers: Vec<String>,
    /// Drive ids, sorted.
    pub drives: Vec<String>,
    /// The card's rating (`[[health.card]]` naming a series of the ratings table).
    pub rating: Option<crate::nvme::ratings::Rating>,
}

/// One NVMe subsystem: the controllers of a dual-port drive are one drive.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Drive {
    /// The subsystem name (`nvme-subsys0`), else the controller name.
    pub id: String,
    pub nqn: Option<String>,
    pub controllers: Vec<String>,
}

/// The topology and link state of every controller polled.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PcieSnapshot {
    pub controllers: Vec<CtrlTopology>,
    /// Every function on some controller's path, once each, by address.
    pub functions: Vec<PciFunction>,
    pub cards: Vec<Card>,
    pub drives: Vec<Drive>,
}

impl PcieSnapshot {
    pub fn controller(&self, name: &str) -> Option<&CtrlTopology> {
        self.controllers.iter().find(|c| c.name == name)
    }
    pub fn function(&self, address: &str) -> Option<&PciFunction> {
        self.functions.iter().find(|f| f.address == address)
    }
    pub fn card(&self, id: &str) -> Option<&Card> {
        self.cards.iter().find(|c| c.id == id)
    }
    pub fn drive(&self, id: &str) -> Option<&Drive> {
        self.drives.iter().find(|d| d.id == id)
    }

    /// Whether any link on these controllers' paths was seen degraded at or after `since`
    /// (Unix time): `Some(true)` if so, `Some(false)` if every path was read and none was,
    /// `None` when no controller's path is known or no link on them could be judged.
    pub fn degraded_since(&self, controllers: &[String], since: f64) -> Option<bool> {
        let mut judged = false;
        for c in controllers {
            let Some(t) = self.controller(c) else {
                continue;
            };
            for a in &t.path {
                let Some(f) = self.function(a) else { continue };
                if f.degraded_seen_at.is_some_and(|s| s >= since) {
                    return Some(true);
                }
                judged |= f.degraded.is_some();
            }
        }
        judged.then_some(false)
    }
}

/// The chain of PCI functions from the root port down to the controller's endpoint, each with
/// its sysfs directory: `class/nvme/<ctrl>/device` resolved, then its parents while they are
/// PCI addresses.
fn chain_of(sysfs_root: &Path, ctrl: &str) -> Vec<(String, PathBuf)> {
    let Ok(dev) = std::fs::canonicalize(sysfs_root.join("class/nvme").join(ctrl).join("device"))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut cur = Some(dev.as_path());
    while let Some(p) = cur {
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            break;
        };
        if !is_pci_address(name) {
            break;
        }
        out.push((name.to_string(), p.to_path_buf()));
        cur = p.parent();
    }
    out.reverse();
    out
}

/// Role by position: the endpoint last; above it, from the top, a root port, then switch
/// upstream and downstream ports in turn.
fn role_at(i: usize, len: usize) -> Role {
    if i + 1 == len {
        Role::Endpoint
    } else if i == 0 {
        Role::RootPort
    } else if i % 2 == 1 {
        Role::SwitchUpstream
    } else {
        Role::SwitchDownstream
    }
}

/// `bus/pci/slots/<name>/address` → name, by slot address (`DDDD:BB:DD`).
fn slots(sysfs_root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(sysfs_root.join("bus/pci/slots")) else {
        return out;
    };
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().to_string();
        if let Ok(a) = std::fs::read_to_string(ent.path().join("address")) {
            let a = a.trim();
            if !a.is_empty() {
                out.entry(a.to_string()).or_insert(name);
            }
        }
    }
    out
}

/// Controller name → (subsystem name, NQN), from `class/nvme-subsystem/<ss>/nvmeN`.
fn subsystems(sysfs_root: &Path) -> BTreeMap<String, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(sysfs_root.join("class/nvme-subsystem")) else {
        return out;
    };
    for ent in rd.flatten() {
        let ss = ent.file_name().to_string_lossy().to_string();
        let dir = ent.path();
        let nqn = std::fs::read_to_string(dir.join("subsysnqn"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let Ok(inner) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in inner.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.strip_prefix("nvme")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
            {
                out.insert(n, (ss.clone(), nqn.clone()));
            }
        }
    }
    out
}

/// Read the topology, link figures and AER counters of `controllers` under `sysfs_root`.
/// `previous` carries each function's `degraded_seen_at` over; `now` stamps a degraded link.
pub fn scan(
    sysfs_root: &Path,
    controllers: &[String],
    previous: Option<&PcieSnapshot>,
    now: f64,
) -> PcieSnapshot {
    let slot_map = slots(sysfs_root);
    let mut snap = PcieSnapshot::default();
    let walked = walk_controllers(sysfs_root, controllers, &slot_map);
    snap.controllers = walked.controllers;
    snap.functions = functions(&walked.figures, &walked.upper_of, previous, now);
    snap.drives = drives(&snap.controllers);
    snap.cards = cards(&mut snap.controllers, &slot_map);
    snap
}

/// What walking each controller's chain up to its root port finds.
struct Walked {
    controllers: Vec<CtrlTopology>,
    /// Every function on a chain: its role and its sysfs directory.
    figures: BTreeMap<String, (Role, PathBuf)>,
    /// Links: lower function → upper function.
    upper_of: BTreeMap<String, String>,
}

fn walk_controllers(
    sysfs_root: &Path,
    controllers: &[String],
    slot_map: &BTreeMap<String, String>,
) -> Walked {
    let ss_map = subsystems(sysfs_root);
    let mut w = Walked {
        controllers: Vec::new(),
        figures: BTreeMap::new(),
        upper_of: BTreeMap::new(),
    };
    for name in controllers {
        let chain = chain_of(sysfs_root, name);
        let len = chain.len();
        for (i, (a, dir)) in chain.iter().enumerate() {
            let role = role_at(i, len);
            w.figures.entry(a.clone()).or_insert((role, dir.clone()));
            // A physical link ends below a root port or a downstream port.
            if i > 0 && matches!(role_at(i - 1, len), Role::RootPort | Role::SwitchDownstream) {
                w.upper_of.insert(a.clone(), chain[i - 1].0.clone());
            }
        }
        let path: Vec<String> = chain.into_iter().map(|(a, _)| a).collect();
        let slot = path
            .iter()
            .find_map(|a| slot_map.get(slot_form(a)).cloned());
        let (subsystem, subsystem_nqn) = match ss_map.get(name) {
            Some((s, n)) => (Some(s.clone()), n.clone()),
            None => (None, None),
        };
        w.controllers.push(CtrlTopology {
            name: name.clone(),
            address: path.last().cloned().unwrap_or_default(),
            drive: subsystem.clone().unwrap_or_else(|| name.clone()),
            path,
            slot,
            subsystem,
            subsystem_nqn,
            card: None,
        });
    }
    w
}

/// Each function's link figures and AER counters; a link is degraded when it runs below what
/// both its ends can do.
fn functions(
    figures: &BTreeMap<String, (Role, PathBuf)>,
    upper_of: &BTreeMap<String, String>,
    previous: Option<&PcieSnapshot>,
    now: f64,
) -> Vec<PciFunction> {
    let links: BTreeMap<String, LinkFigures> = figures
        .iter()
        .map(|(a, (_, dir))| (a.clone(), LinkFigures::read(dir)))
        .collect();
    let mut out = Vec::new();
    for (a, (role, dir)) in figures {
        let link = links.get(a).cloned().unwrap_or_default();
        let deg = upper_of
            .get(a)
            .and_then(|u| links.get(u))
            .and_then(|up| degraded(up, &link));
        let before = previous
            .and_then(|p| p.function(a))
            .and_then(|f| f.degraded_seen_at);
        out.push(PciFunction {
            address: a.clone(),
            role: *role,
            degraded: deg,
            degraded_seen_at: if deg == Some(true) { Some(now) } else { before },
            aer: AerCounts::read(dir),
            link,
        });
    }
    out
}

/// Drives: one per subsystem (else per controller).
fn drives(controllers: &[CtrlTopology]) -> Vec<Drive> {
    let mut drives: BTreeMap<String, Drive> = BTreeMap::new();
    for c in controllers {
        let d = drives.entry(c.drive.clone()).or_insert_with(|| Drive {
            id: c.drive.clone(),
            nqn: c.subsystem_nqn.clone(),
            controllers: Vec::new(),
        });
        d.controllers.push(c.name.clone());
    }
    drives.into_values().collect()
}

/// Cards: controllers grouped by the nearest switch upstream port, else by slot; only groups
/// of at least two drives are cards, and their controllers are labelled with the card.
fn cards(controllers: &mut [CtrlTopology], slot_map: &BTreeMap<String, String>) -> Vec<Card> {
    let mut groups: BTreeMap<String, Card> = BTreeMap::new();
    for c in controllers.iter() {
        let len = c.path.len();
        let up = (0..len)
            .rev()
            .find(|&i| role_at(i, len) == Role::SwitchUpstream)
            .map(|i| c.path[i].clone());
        let (id, slot) = match (&up, &c.slot) {
            // A switch card sits in the slot of its upstream port (or one above it), not in
            // the switch's own downstream slots.
            (Some(u), _) => {
                let upto = c.path.iter().position(|a| a == u).unwrap_or(0);
                let slot = c.path[..=upto]
                    .iter()
                    .find_map(|a| slot_map.get(slot_form(a)).cloned());
                (u.clone(), slot)
            }
            (None, Some(s)) => (format!("slot:{s}"), Some(s.clone())),
            (None, None) => continue,
        };
        let card = groups.entry(id.clone()).or_insert_with(|| Card {
            id,
            upstream_port: up.clone(),
            slot,
            controllers: Vec::new(),
            drives: Vec::new(),
            rating: None,
        });
        card.controllers.push(c.name.clone());
        if !card.drives.contains(&c.drive) {
            card.drives.push(c.drive.clone());
        }
    }
    let mut out = Vec::new();
    for mut card in groups.into_values() {
        if card.drives.len() < 2 {
            continue;
        }
        for c in controllers.iter_mut() {
            if card.controllers.contains(&c.name) {
                c.card = Some(card.id.clone());
            }
        }
        card.controllers.sort();
        card.drives.sort();
        out.push(card);
    }
    out
}

#[cfg(test)]
pub(crate) mod fake {
    //! A fixture sysfs tree: PCI functions under `devices/pci0000:00/...`, controllers in
    //! `class/nvme/<name>/device` pointing at their endpoint, slots and subsystems.
    use std::path::{Path, PathBuf};

    /// Create the function at `path` (root port first) and return its directory.
    pub fn function(root: &Path, path: &[&str]) -> PathBuf {
        let mut dir = root.join("devices/pci0000:00");
        for a in path {
            dir = dir.join(a);
        }
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    pub fn link(dir: &Path, speed: &str, max_speed: &str, width: u32, max_width: u32) {
        for (n, v) in [
            ("current_link_speed", speed.to_string()),
            ("max_link_speed", max_speed.to_string()),
            ("current_link_width", width.to_string()),
            ("max_link_width", max_width.to_string()),
        ] {
            std::fs::write(dir.join(n), format!("{v}\n")).expect("write");
        }
    }

    pub fn aer(
        dir: &Path,
        correctable: &[(&str, u64)],
        nonfatal: &[(&str, u64)],
        fatal: &[(&str, u64)],
    ) {
        for (file, rows, total) in [
            ("aer_dev_correctable", correctable, "TOTAL_ERR_COR"),
            ("aer_dev_nonfatal", nonfatal, "TOTAL_ERR_NONFATAL"),
            ("aer_dev_fatal", fatal, "TOTAL_ERR_FATAL"),
        ] {
            let mut s = String::new();
            for (n, c) in rows {
                s.push_str(&format!("{n} {c}\n"));
            }
            let sum: u64 = rows.iter().map(|(_, c)| c).sum();
            s.push_str(&format!("{total} {sum}\n"));
            std::fs::write(dir.join(file), s).expect("write");
        }
    }

    /// `class/nvme/<ctrl>/device` → the endpoint at `path`.
    pub fn controller(root: &Path, ctrl: &str, path: &[&str]) -> PathBuf {
        let ep = function(root, path);
        let c = root.join("class/nvme").join(ctrl);
        std::fs::create_dir_all(&c).expect("mkdir");
        let _ = std::fs::remove_file(c.join("device"));
        std::os::unix::fs::symlink(&ep, c.join("device")).expect("symlink");
        ep
    }

    pub fn slot(root: &Path, name: &str, address: &str) {
        let d = root.join("bus/pci/slots").join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("address"), format!("{address}\n")).expect("write");
    }

    pub fn subsystem(root: &Path, ss: &str, nqn: &str, ctrls: &[&str]) {
        let d = root.join("class/nvme-subsystem").join(ss);
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("subsysnqn"), format!("{nqn}\n")).expect("write");
        for c in ctrls {
            std::os::unix::fs::symlink(root.join("class/nvme").join(c), d.join(c))
                .expect("symlink");
        }
        // A namespace head, which is not a controller.
        std::fs::create_dir_all(d.join(format!("{}n1", ctrls[0]))).expect("mkdir");
    }
}

#[cfg(test)]
mod tests {
    use super::fake::*;
    use super::*;

    const RP2: &str = "0000:00:04.0";
    const UP: &str = "0000:02:00.0";
    const DN1: &str = "0000:03:00.0";
    const DN2: &str = "0000:03:01.0";
    const EP1: &str = "0000:04:00.0";
    const EP2: &str = "0000:05:00.0";
    const RP5: &str = "0000:00:05.0";
    const EP3: &str = "0000:06:00.0";
    const RP6: &str = "0000:00:06.0";
    const EP4: &str = "0000:07:00.0";
    const RP7: &str = "0000:00:07.0";
    const EP5: &str = "0000:08:00.0";

    /// A card (switch with two controllers) in slot 2, a lone drive in slot 5, and a
    /// dual-port drive (two controllers, one subsystem) on root ports 6 and 7.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        controller(r, "nvme0", &[RP2, UP, DN1, EP1]);
        controller(r, "nvme1", &[RP2, UP, DN2, EP2]);
        controller(r, "nvme2", &[RP5, EP3]);
        controller(r, "nvme3", &[RP6, EP4]);
        controller(r, "nvme4", &[RP7, EP5]);
        slot(r, "2", "0000:02:00");
        slot(r, "5", "0000:06:00");
        // The switch's own downstream slots: inner, so not the physical slot.
        slot(r, "3-1", "0000:04:00");
        subsystem(r, "nvme-subsys0", "nqn.a", &["nvme0"]);
        subsystem(r, "nvme-subsys1", "nqn.b", &["nvme1"]);
        subsystem(r, "nvme-subsys2", "nqn.c", &["nvme2"]);
        subsystem(
            r,
            "nvme-subsys3",
            "nqn.2026-12.io.nvsoak:dual",
            &["nvme3", "nvme4"],
        );
        // Links: root port 2 Gen3 x8, the switch upstream port trained to x4.
        link(&function(r, &[RP2]), "8.0 GT/s PCIe", "8.0 GT/s PCIe", 4, 8);
        link(
            &function(r, &[RP2, UP]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            8,
        );
        link(&function(r, &[RP2, UP, DN1]), "8.0 GT/s", "Unknown", 4, 0);
        link(
            &function(r, &[RP2, UP, DN1, EP1]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            4,
        );
        link(
            &function(r, &[RP2, UP, DN2, EP2]),
            "2.5 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            4,
        );
        link(
            &function(r, &[RP5, EP3]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            4,
        );
        aer(
            &function(r, &[RP2, UP]),
            &[("RxErr", 3), ("BadTLP", 5)],
            &[("Undefined", 0), ("DLP", 7)],
            &[("TLP", 11)],
        );
        aer(&function(r, &[RP5, EP3]), &[("RxErr", 0)], &[], &[]);
        d
    }

    fn names() -> Vec<String> {
        (0..5).map(|i| format!("nvme{i}")).collect()
    }

    #[test]
    fn addresses_paths_slots_subsystems() {
        let d = tree();
        let s = scan(d.path(), &names(), None, 100.0);
        let c0 = s.controller("nvme0").expect("nvme0");
        assert_eq!(c0.address, EP1);
        assert_eq!(c0.path, vec![RP2, UP, DN1, EP1]);
        assert_eq!(c0.slot.as_deref(), Some("2"));
        assert_eq!(c0.subsystem.as_deref(), Some("nvme-subsys0"));
        assert_eq!(c0.subsystem_nqn.as_deref(), Some("nqn.a"));
        assert_eq!(c0.card.as_deref(), Some(UP));
        let c2 = s.controller("nvme2").expect("nvme2");
        assert_eq!(c2.address, EP3);
        assert_eq!(c2.path, vec![RP5, EP3]);
        assert_eq!(c2.slot.as_deref(), Some("5"));
        assert_eq!(c2.card, None, "a lone drive in a slot is no card");
        assert_eq!(s.function(RP2).map(|f| f.role), Some(Role::RootPort));
        assert_eq!(s.function(UP).map(|f| f.role), Some(Role::SwitchUpstream));
        assert_eq!(
            s.function(DN2).map(|f| f.role),
            Some(Role::SwitchDownstream)
        );
        assert_eq!(s.function(EP2).map(|f| f.role), Some(Role::Endpoint));
        assert_eq!(s.functions.len(), 12, "each function once");
    }

    #[test]
    fn one_card_and_a_dual_port_drive_counted_once() {
        let d = tree();
        let s = scan(d.path(), &names(), None, 100.0);
        assert_eq!(s.cards.len(), 1);
        let card = &s.cards[0];
        assert_eq!(card.id, UP);
        assert_eq!(card.upstream_port.as_deref(), Some(UP));
        assert_eq!(card.slot.as_deref(), Some("2"));
        assert_eq!(card.controllers, vec!["nvme0", "nvme1"]);
        assert_eq!(card.drives, vec!["nvme-subsys0", "nvme-subsys1"]);
        assert_eq!(s.drives.len(), 4);
        let dual = s.drive("nvme-subsys3").expect("dual");
        assert_eq!(dual.controllers, vec!["nvme3", "nvme4"]);
        assert_eq!(dual.nqn.as_deref(), Some("nqn.2026-12.io.nvsoak:dual"));
        assert_eq!(
            s.controller("nvme4").map(|c| c.drive.as_str()),
            Some("nvme-subsys3")
        );
    }

    #[test]
    fn links_and_aer() {
        let d = tree();
        let s = scan(d.path(), &names(), None, 100.0);
        let up = s.function(UP).expect("up");
        assert_eq!(up.link.speed_gts, Some(8.0));
        assert_eq!(up.link.width, Some(4));
        assert_eq!(up.link.max_width, Some(8));
        assert_eq!(up.degraded, Some(true), "x4 where both ends do x8");
        assert_eq!(up.degraded_seen_at, Some(100.0));
        let aer = up.aer.as_ref().expect("aer");
        assert_eq!(
            aer.correctable,
            vec![("RxErr".into(), 3), ("BadTLP".into(), 5)]
        );
        assert_eq!(
            aer.nonfatal,
            vec![("Undefined".into(), 0), ("DLP".into(), 7)]
        );
        assert_eq!(aer.fatal, vec![("TLP".into(), 11)]);
        // Below a downstream port that reports no maximum: the endpoint decides.
        assert_eq!(s.function(EP1).and_then(|f| f.degraded), Some(false));
        assert_eq!(s.function(EP2).and_then(|f| f.degraded), Some(true));
        // Upper ends carry no verdict; a function without figures gives none.
        assert_eq!(s.function(RP2).and_then(|f| f.degraded), None);
        assert_eq!(s.function(DN1).and_then(|f| f.degraded), None);
        assert_eq!(s.function(EP4).and_then(|f| f.degraded), None);
        assert_eq!(s.function(EP3).and_then(|f| f.degraded), Some(false));
        assert!(s.function(EP4).expect("ep4").aer.is_none());
        assert_eq!(
            s.function(EP3)
                .and_then(|f| f.aer.clone())
                .map(|a| a.correctable),
            Some(vec![("RxErr".into(), 0)])
        );
    }

    #[test]
    fn degraded_during_a_plan_is_remembered() {
        let d = tree();
        let r = d.path();
        let s1 = scan(r, &names(), None, 100.0);
        // The card's links degraded at 100; a plan that started at 50 saw it, one at 150 not yet.
        assert_eq!(s1.degraded_since(&["nvme0".into()], 50.0), Some(true));
        assert_eq!(s1.degraded_since(&["nvme0".into()], 150.0), Some(false));
        assert_eq!(s1.degraded_since(&["nvme2".into()], 50.0), Some(false));
        assert_eq!(
            s1.degraded_since(&["nvme3".into()], 50.0),
            None,
            "no figures"
        );
        assert_eq!(s1.degraded_since(&["nvme9".into()], 50.0), None);
        // The upstream link retrains to x8: no longer degraded, but the plan saw it.
        link(
            &function(r, &[RP2, UP]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            8,
            8,
        );
        link(
            &function(r, &[RP2, UP, DN2, EP2]),
            "8.0 GT/s PCIe",
            "8.0 GT/s PCIe",
            4,
            4,
        );
        let s2 = scan(r, &names(), Some(&s1), 200.0);
        assert_eq!(s2.function(UP).and_then(|f| f.degraded), Some(false));
        assert_eq!(
            s2.function(UP).and_then(|f| f.degraded_seen_at),
            Some(100.0)
        );
        assert_eq!(s2.degraded_since(&["nvme1".into()], 50.0), Some(true));
        assert_eq!(s2.degraded_since(&["nvme1".into()], 101.0), Some(false));
    }

    #[test]
    fn a_card_takes_its_upstream_ports_slot_not_a_downstream_one() {
        // As QEMU shows it: no slot above the switch, slots on its downstream ports.
        let d = tree();
        std::fs::remove_dir_all(d.path().join("bus/pci/slots/2")).expect("rm slot 2");
        let s = scan(d.path(), &names(), None, 100.0);
        assert_eq!(
            s.controller("nvme0").and_then(|c| c.slot.as_deref()),
            Some("3-1")
        );
        assert_eq!(s.controller("nvme1").and_then(|c| c.slot.as_deref()), None);
        assert_eq!(s.cards.len(), 1);
        assert_eq!(s.cards[0].slot, None);
        assert_eq!(s.cards[0].id, UP);
    }

    #[test]
    fn no_pci_device_no_path() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(d.path().join("class/nvme/nvme0")).expect("mkdir");
        let s = scan(d.path(), &["nvme0".into()], None, 1.0);
        let c = s.controller("nvme0").expect("nvme0");
        assert!(c.path.is_empty());
        assert_eq!(c.address, "");
        assert_eq!(c.drive, "nvme0");
        assert!(s.cards.is_empty() && s.functions.is_empty());
    }
}
