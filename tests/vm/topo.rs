//! Issue 16 in the VM: a `q35` guest with a PCIe switch (`x3130-upstream` with two
//! `xio3130-downstream` ports) holding two controllers (a card), a lone controller on its own
//! root port (capped at 8 GT/s x4), and a dual-port drive (two controllers of one
//! `nvme-subsys` sharing a namespace) on two more root ports. nvsoak must report one card and
//! the lone drive apart, with the addresses and slots sysfs shows, the dual-port drive as one
//! drive whose bytes are counted once (its accounting check against what nvsoak wrote to it),
//! and link figures equal to what sysfs shows in the guest.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::daemon::{config, counter, nvme_target, poll_after, poll_ts, smart, stop_daemon};
use crate::harness::{Drive, Vm, VmSpec};
use crate::prom::Metrics;

const CARD_A: &str = "CARD0001";
const CARD_B: &str = "CARD0002";
const LONE: &str = "LONE0001";
const DUAL: &str = "DUAL0001";
const DUAL_NQN: &str = "nqn.2026-12.io.nvsoak:dual";

/// The QEMU topology (everything but the card's and the lone drive's controllers, which the
/// harness adds with `bus=` properties).
fn topology(dual_img: &std::path::Path) -> Vec<String> {
    let devices = [
        "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2".to_string(),
        "x3130-upstream,id=up1,bus=rp2".into(),
        "xio3130-downstream,id=dn1,bus=up1,chassis=3,slot=1".into(),
        "xio3130-downstream,id=dn2,bus=up1,chassis=4,slot=2".into(),
        "pcie-root-port,id=rp5,bus=pcie.0,chassis=5,slot=5,x-speed=8,x-width=4".into(),
        "pcie-root-port,id=rp6,bus=pcie.0,chassis=6,slot=6".into(),
        "pcie-root-port,id=rp7,bus=pcie.0,chassis=7,slot=7".into(),
        format!("nvme-subsys,id=ss0,nqn={DUAL_NQN}"),
        format!("nvme,id=c1,serial={DUAL},subsys=ss0,bus=rp6"),
        format!("nvme,id=c2,serial={DUAL},subsys=ss0,bus=rp7"),
    ];
    let mut a = Vec::new();
    for d in devices {
        a.push("-device".to_string());
        a.push(d);
    }
    a.push("-drive".into());
    a.push(format!(
        "file={},if=none,id=dd,format=raw",
        dual_img.display()
    ));
    a.push("-device".into());
    a.push("nvme-ns,drive=dd,nsid=1,shared=on,bus=c1".into());
    a
}

/// Lines `KEY VALUE...` of a guest dump, by key.
fn table(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn label(m: &Metrics, name: &str, with: &[(&str, &str)], key: &str) -> Option<String> {
    m.find(name, with).next()?.labels.get(key).cloned()
}

#[test]
fn a_card_a_lone_drive_and_a_dual_port_drive() {
    crate::require_vm!();
    let host_dir = tempfile::tempdir().expect("tempdir");
    let dual_img = host_dir.path().join("dual.img");
    std::fs::File::create(&dual_img)
        .and_then(|f| f.set_len(256 << 20))
        .expect("dual image");
    let cfg = config("1s", &nvme_target("dual", "@DUAL@", DUAL, 0, "5s"));
    // In the guest: map serials to controllers, find the dual-port drive's namespace head, and
    // dump what sysfs says about every controller's path.
    let script = format!(
        r#"
i=0; while [ $(ls /sys/class/nvme | wc -l) -lt 5 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
: > /tmp/sys
for c in /sys/class/nvme/nvme*; do
  n=$(basename $c)
  echo "ctrl.$n $(tr -d ' ' < $c/serial)" >> /tmp/sys
  echo "addr.$n $(cat $c/address)" >> /tmp/sys
  echo "path.$n $(readlink -f $c/device)" >> /tmp/sys
done
for s in /sys/bus/pci/slots/*; do [ -e $s/address ] && echo "slot.$(basename $s) $(cat $s/address)" >> /tmp/sys; done
for s in /sys/class/nvme-subsystem/*; do
  echo "nqn.$(basename $s) $(cat $s/subsysnqn)" >> /tmp/sys
  echo "members.$(basename $s) $(ls $s | tr '\n' ' ')" >> /tmp/sys
done
for f in $(find /sys/devices/pci0000:00 -name current_link_speed); do
  d=$(dirname $f); a=$(basename $d)
  for x in current_link_speed max_link_speed current_link_width max_link_width; do
    echo "$x.$a $(cat $d/$x)" >> /tmp/sys
  done
  [ -e $d/aer_dev_correctable ] && echo "aer.$a $(grep TOTAL $d/aer_dev_correctable)" >> /tmp/sys
done
emit sys /tmp/sys
SS=$(grep -l '{DUAL_NQN}$' /sys/class/nvme-subsystem/*/subsysnqn | head -1)
HEAD=$(ls $(dirname $SS) | grep '^nvme[0-9]*n1$' | head -1)
echo "$HEAD" > /tmp/head; emit head /tmp/head
wait_for /dev/$HEAD 10 || echo "no /dev/$HEAD"
sed "s|@DUAL@|/dev/$HEAD|" /etc/nvsoak.tmpl > /etc/nvsoak.toml
start_daemon /etc/nvsoak.toml
wait_host stop
stop_daemon daemon
"#
    );
    let mut spec = VmSpec::new("topology", &script);
    spec.net = true;
    spec.machine = Some("q35".into());
    spec.extra_args = topology(&dual_img);
    let mut a = Drive::new("card0", CARD_A);
    a.props = ",bus=dn1".into();
    let mut b = Drive::new("card1", CARD_B);
    b.props = ",bus=dn2".into();
    let mut lone = Drive::new("lone", LONE);
    lone.props = ",bus=rp5".into();
    spec.drives = vec![a, b, lone];
    spec.files
        .insert("/etc/nvsoak.tmpl".into(), cfg.into_bytes());
    let mut vm = Vm::boot(&spec);

    let sys = table(&vm.wait_ok("sys", Duration::from_secs(120)).stdout_str());
    eprintln!("topology: guest sysfs:\n{sys:#?}");
    let ctrl = |serial: &str| -> Vec<String> {
        sys.iter()
            .filter(|(k, v)| k.starts_with("ctrl.") && v.as_str() == serial)
            .map(|(k, _)| k["ctrl.".len()..].to_string())
            .collect()
    };
    let (ca, cb, cl, cd) = (ctrl(CARD_A), ctrl(CARD_B), ctrl(LONE), ctrl(DUAL));
    assert_eq!(
        (ca.len(), cb.len(), cl.len(), cd.len()),
        (1, 1, 1, 2),
        "{sys:#?}"
    );
    let (ca, cb, cl) = (&ca[0], &cb[0], &cl[0]);
    let head = vm.wait_ok("head", Duration::from_secs(30)).stdout_str();
    let head = head.trim().to_string();
    assert!(
        head.starts_with("nvme"),
        "the dual-port namespace head: {head:?}"
    );

    // Wait until the soak on the dual-port drive is done and a poll has followed it.
    let t = [("target", "dual")];
    let done = vm.wait_metrics("the soak to finish", Duration::from_secs(120), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)
            && m.sum("nvsoak_write_ops_total", &t).is_some_and(|v| v > 0.0))
        .then(|| m.clone())
    });
    let ts = poll_ts(&done).unwrap_or_else(|| vm.fail("no poll timestamp"));
    let m = poll_after(&vm, ts, Duration::from_secs(30));
    stop_daemon(&mut vm);
    vm.finish(Duration::from_secs(30));

    // --- Topology: addresses, paths, slots, subsystems, the card. ---
    let info = |c: &str, key: &str| label(&m, "nvme_info", &[("device", c)], key);
    for c in [ca, cb, cl, &cd[0], &cd[1]] {
        let addr = sys.get(&format!("addr.{c}")).cloned();
        assert_eq!(info(c, "pci_address"), addr, "{c}: nvme_info pci_address");
        // The path metric lists sysfs's chain, root port first, endpoint last.
        let path = sys.get(&format!("path.{c}")).cloned().unwrap_or_default();
        let chain: Vec<&str> = path
            .split('/')
            .filter(|p| p.len() == 12 && p.as_bytes()[4] == b':')
            .collect();
        for (hop, a) in chain.iter().enumerate() {
            let h = hop.to_string();
            assert_eq!(
                m.get(
                    "nvme_pcie_path_info",
                    &[("device", c), ("address", a), ("hop", &h)]
                ),
                Some(1.0),
                "{c}: hop {hop} {a} of {path}"
            );
        }
    }
    let card = info(ca, "card").unwrap_or_default();
    assert!(!card.is_empty(), "the card's controllers are on a card");
    assert_eq!(
        info(cb, "card"),
        Some(card.clone()),
        "both behind one switch"
    );
    assert_eq!(
        info(cl, "card").as_deref(),
        Some(""),
        "the lone drive is on no card"
    );
    assert_eq!(
        info(&cd[0], "card").as_deref(),
        Some(""),
        "the dual-port drive is no card"
    );
    let cards: Vec<_> = m.find("nvsoak_card_info", &[]).collect();
    assert_eq!(cards.len(), 1, "exactly one card: {cards:?}");
    assert_eq!(
        m.get(
            "nvme_pcie_path_info",
            &[
                ("device", ca.as_str()),
                ("address", &card),
                ("role", "switch_upstream")
            ]
        ),
        Some(1.0),
        "the card is the switch upstream port {card}"
    );
    assert_eq!(
        label(&m, "nvsoak_card_info", &[("card", &card)], "drives").as_deref(),
        Some("2")
    );
    // Slots, where the guest has them: the card's slot holds its upstream port, the lone
    // drive's slot holds its endpoint.
    let slot_of = |addr: &str| -> Option<String> {
        let short = addr.rsplit_once('.').map(|(h, _)| h)?;
        sys.iter()
            .find(|(k, v)| k.starts_with("slot.") && v.as_str() == short)
            .map(|(k, _)| k["slot.".len()..].to_string())
    };
    let lone_addr = sys.get(&format!("addr.{cl}")).cloned().unwrap_or_default();
    let want_slot = slot_of(&lone_addr);
    eprintln!(
        "topology: lone drive slot {want_slot:?}, card slot {:?}",
        slot_of(&card)
    );
    assert_eq!(info(cl, "slot"), Some(want_slot.unwrap_or_default()));
    assert_eq!(
        label(&m, "nvsoak_card_info", &[("card", &card)], "slot"),
        Some(slot_of(&card).unwrap_or_default())
    );
    // The dual-port drive: both controllers in one subsystem, one drive.
    let ss = info(&cd[0], "subsystem").unwrap_or_default();
    assert!(ss.starts_with("nvme-subsys"), "{ss:?}");
    assert_eq!(info(&cd[1], "subsystem"), Some(ss.clone()));
    assert_ne!(info(ca, "subsystem"), Some(ss.clone()));
    // QEMU 7.2 prefixes the NQN given with its own.
    let nqn = sys.get(&format!("nqn.{ss}")).cloned().unwrap_or_default();
    assert!(nqn.ends_with(DUAL_NQN), "{nqn}");
    assert_eq!(
        label(&m, "nvsoak_drive_info", &[("drive", &ss)], "nqn"),
        Some(nqn)
    );
    let mut both = cd.clone();
    both.sort();
    assert_eq!(
        label(&m, "nvsoak_drive_info", &[("drive", &ss)], "controllers"),
        Some(both.join(","))
    );
    assert_eq!(m.find("nvsoak_drive_info", &[]).count(), 4, "four drives");

    // --- The dual-port drive's bytes, counted once, against what nvsoak wrote. ---
    let written = m.sum("nvsoak_write_bytes_total", &t).unwrap_or(0.0);
    assert!(written > 1e6, "nvsoak wrote {written} bytes");
    let per_ctrl: Vec<f64> = cd
        .iter()
        .map(|c| {
            m.get("nvme_data_written_bytes_total", &[("device", c)])
                .unwrap_or_else(|| vm.fail(&format!("no data written for {c}")))
        })
        .collect();
    let drive = m
        .get("nvsoak_drive_written_bytes_total", &[("drive", &ss)])
        .unwrap_or_else(|| vm.fail("no nvsoak_drive_written_bytes_total"));
    eprintln!(
        "topology: nvsoak wrote {written} B; controllers say {per_ctrl:?}; the drive {drive} B"
    );
    assert_eq!(
        per_ctrl[0], per_ctrl[1],
        "both controllers report the shared namespace"
    );
    assert_eq!(
        drive,
        per_ctrl[0],
        "the drive's bytes counted once, not {}",
        per_ctrl[0] + per_ctrl[1]
    );
    let soak = m
        .get("nvsoak_drive_soak_written_bytes", &[("drive", &ss)])
        .unwrap_or_else(|| vm.fail("no nvsoak_drive_soak_written_bytes"));
    assert!(
        soak >= written && soak - written < 512_000.0,
        "drive-side soak bytes {soak} vs nvsoak's {written}: within one data unit"
    );
    let ratio = m
        .get("nvsoak_drive_accounting_ratio", &[("drive", &ss)])
        .unwrap_or_else(|| vm.fail("no nvsoak_drive_accounting_ratio"));
    assert!(
        (ratio - soak / written).abs() < 1e-6,
        "accounting ratio {ratio} = {soak} / {written}"
    );

    // --- Link figures as sysfs shows them in the guest. ---
    let mut checked = 0;
    for (k, v) in sys
        .iter()
        .filter(|(k, _)| k.starts_with("current_link_speed."))
    {
        let a = &k["current_link_speed.".len()..];
        if m.find("nvme_pcie_path_info", &[("address", a)])
            .next()
            .is_none()
        {
            continue; // not on a controller's path
        }
        let num = |s: &str| -> Option<f64> {
            s.split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0)
        };
        let l = [("address", a)];
        assert_eq!(
            m.get("nvme_pcie_link_speed_transfers_per_second", &l),
            num(v).map(|g| g * 1e9),
            "{a} current speed {v:?}"
        );
        let max = sys
            .get(&format!("max_link_speed.{a}"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            m.get("nvme_pcie_link_max_speed_transfers_per_second", &l),
            num(&max).map(|g| g * 1e9),
            "{a} max speed {max:?}"
        );
        for (file, metric) in [
            ("current_link_width", "nvme_pcie_link_width_lanes"),
            ("max_link_width", "nvme_pcie_link_max_width_lanes"),
        ] {
            let w = sys.get(&format!("{file}.{a}")).cloned().unwrap_or_default();
            assert_eq!(m.get(metric, &l), num(&w), "{a} {file} {w:?}");
        }
        checked += 1;
    }
    assert!(
        checked >= 9,
        "link figures of every function on the paths: {checked}"
    );
    // The lone drive's root port was capped at 8 GT/s x4; its endpoint runs 2.5 GT/s x1,
    // all QEMU's endpoint supports, so the link is not degraded.
    let rp = sys
        .get(&format!("path.{cl}"))
        .and_then(|p| p.split('/').rev().nth(1).map(str::to_string))
        .unwrap_or_default();
    assert_eq!(
        m.get(
            "nvme_pcie_link_max_speed_transfers_per_second",
            &[("address", &rp)]
        ),
        Some(8e9)
    );
    assert_eq!(
        m.get("nvme_pcie_link_max_width_lanes", &[("address", &rp)]),
        Some(4.0)
    );
    assert_eq!(
        m.get("nvme_pcie_link_degraded", &[("address", &lone_addr)]),
        Some(0.0)
    );
    // AER counters are exported where sysfs has them (all zero here: QEMU raises none).
    let aer: f64 = m.sum("nvme_pcie_aer_errors_total", &[]).unwrap_or(-1.0);
    let has_aer = sys.keys().any(|k| k.starts_with("aer."));
    if has_aer {
        assert_eq!(aer, 0.0, "no AER errors in the guest");
    }
}

/// A target spanning the card: one target over the namespaces of the card's two controllers
/// behind the switch (`paths`, `allow_destroy` naming both serials). Its aggregate figures
/// are the sum of its members', and each member's SMART data-units-written delta (nvme-cli
/// before the daemon starts and after it stops) agrees with what nvsoak wrote to that member,
/// within one data unit of 512,000 B.
#[test]
fn a_target_spanning_the_card() {
    crate::require_vm!();
    let cfg = config(
        "1s",
        &format!(
            r#"
[[health.card]]
match = "{CARD_A}"
rating = "Liqid Element AIC"
[[target]]
name = "card"
paths = ["@A@", "@B@"]
allow_destroy = ["{CARD_A}", "{CARD_B}"]
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 30, bs = "4k", access = "random", iodepth = 8, workers = 2 }}
duration = "6s"
"#
        ),
    );
    // In the guest: each card controller's namespace (through its subsystem), merging off
    // (one nvsoak op, one NVMe command), SMART before and after the daemon.
    let script = format!(
        r#"
i=0; while [ $(ls /sys/class/nvme | wc -l) -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
for c in /sys/class/nvme/nvme*; do
  n=$(basename $c); s=$(tr -d ' ' < $c/serial)
  [ "$s" = "{CARD_A}" ] && A=$n
  [ "$s" = "{CARD_B}" ] && B=$n
done
ns_of() {{
  {{ for s in /sys/class/nvme-subsystem/*; do ls $s 2>/dev/null | grep -qx $1 && ls $s | grep '^nvme[0-9]*n1$'; done
    ls /sys/class/nvme/$1 | grep '^nvme[0-9]*n1$'; }} | head -1
}}
i=0; while {{ [ -z "$(ns_of $A)" ] || [ -z "$(ns_of $B)" ]; }} && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
NA=$(ns_of $A); NB=$(ns_of $B)
ls -R /sys/class/nvme/ /sys/class/nvme-subsystem/ > /tmp/sysls 2>&1; emit sysls /tmp/sysls
echo "$A $B $NA $NB" > /tmp/names; emit names /tmp/names
wait_for /dev/$NA 10 || echo "no /dev/$NA"
wait_for /dev/$NB 10 || echo "no /dev/$NB"
echo 2 > /sys/block/$NA/queue/nomerges
echo 2 > /sys/block/$NB/queue/nomerges
run before_a nvme smart-log /dev/$A -o json
run before_b nvme smart-log /dev/$B -o json
sed "s|@A@|/dev/$NA|; s|@B@|/dev/$NB|" /etc/nvsoak.tmpl > /etc/nvsoak.toml
start_daemon /etc/nvsoak.toml
wait_host stop
stop_daemon daemon
run after_a nvme smart-log /dev/$A -o json
run after_b nvme smart-log /dev/$B -o json
run results cat /tmp/nvsoak-state/results/card.json
"#
    );
    let mut spec = VmSpec::new("span", &script);
    spec.net = true;
    spec.machine = Some("q35".into());
    spec.extra_args = [
        "pcie-root-port,id=rp2,bus=pcie.0,chassis=2,slot=2",
        "x3130-upstream,id=up1,bus=rp2",
        "xio3130-downstream,id=dn1,bus=up1,chassis=3,slot=1",
        "xio3130-downstream,id=dn2,bus=up1,chassis=4,slot=2",
    ]
    .iter()
    .flat_map(|d| ["-device".to_string(), d.to_string()])
    .collect();
    let mut a = Drive::new("card0", CARD_A);
    a.props = ",bus=dn1".into();
    let mut b = Drive::new("card1", CARD_B);
    b.props = ",bus=dn2".into();
    spec.drives = vec![a, b];
    spec.files
        .insert("/etc/nvsoak.tmpl".into(), cfg.into_bytes());
    let mut vm = Vm::boot(&spec);
    let names = vm.wait_ok("names", Duration::from_secs(60)).stdout_str();
    let names: Vec<String> = names.split_whitespace().map(str::to_string).collect();
    if names.len() != 4 {
        let ls = vm.wait_ok("sysls", Duration::from_secs(30)).stdout_str();
        vm.fail(&format!("controllers and namespaces: {names:?}\n{ls}"));
    }
    let (ctrl, ns) = ([&names[0], &names[1]], [&names[2], &names[3]]);
    let before = [smart(&vm, "before_a"), smart(&vm, "before_b")];

    let t = [("target", "card")];
    let m = vm.wait_metrics("the soak to finish", Duration::from_secs(120), |m| {
        (m.get("nvsoak_phase_running", &t) == Some(0.0)
            && m.sum("nvsoak_write_ops_total", &t).is_some_and(|v| v > 0.0))
        .then(|| m.clone())
    });
    stop_daemon(&mut vm);
    let after = [smart(&vm, "after_a"), smart(&vm, "after_b")];
    let results = vm.wait_ok("results", Duration::from_secs(30));
    let results: serde_json::Value = serde_json::from_slice(&results.stdout)
        .unwrap_or_else(|e| vm.fail(&format!("results file: {e}")));
    vm.finish(Duration::from_secs(30));

    // The aggregate is the sum of the members, op by op.
    for op in ["read", "write"] {
        let whole = m.sum(&format!("nvsoak_{op}_ops_total"), &t).unwrap_or(0.0);
        let parts = m
            .sum(
                "nvsoak_target_member_ops_total",
                &[("target", "card"), ("op", op)],
            )
            .unwrap_or(-1.0);
        assert!(whole > 100.0, "{op}s: {whole}");
        assert_eq!(parts, whole, "member {op} ops vs the target's");
    }
    // All members on one card rated by [[health.card]]: the results file carries its rating,
    // which the report compares the target's sweeps with ("of rated").
    assert_eq!(
        results["card"]["rating"].as_str(),
        Some("Liqid Element AIC"),
        "{results}"
    );
    assert_eq!(
        results["card"]["random_write_iops"].as_f64(),
        Some(900_000.0)
    );
    let card = m
        .find("nvsoak_card_info", &[])
        .next()
        .and_then(|s| s.labels.get("card").cloned())
        .unwrap_or_else(|| vm.fail("no nvsoak_card_info"));
    assert_eq!(results["card"]["card"].as_str(), Some(card.as_str()));
    // Each member: what nvsoak wrote to it is what its drive says it was written.
    let members = results["members"]
        .as_array()
        .unwrap_or_else(|| vm.fail(&format!("results file lacks members: {results}")));
    assert_eq!(members.len(), 2, "{results}");
    for i in 0..2 {
        let l = [
            ("target", "card"),
            ("device", ns[i].as_str()),
            ("op", "write"),
        ];
        let wbytes = m
            .get("nvsoak_target_member_bytes_total", &l)
            .unwrap_or_else(|| vm.fail(&format!("no member bytes for {}", ns[i])))
            as u128;
        assert_eq!(
            members[i]["write_bytes"].as_u64().map(u128::from),
            Some(wbytes),
            "results file vs /metrics for {}",
            ns[i]
        );
        assert_eq!(members[i]["controller"].as_str(), Some(ctrl[i].as_str()));
        let du = counter(&vm, &after[i], "data_units_written").saturating_sub(counter(
            &vm,
            &before[i],
            "data_units_written",
        ));
        let du_bytes = du * 512_000;
        eprintln!(
            "span: {} ({}): nvsoak wrote {wbytes} B, the drive's data units written delta {du} ({du_bytes} B)",
            ns[i], ctrl[i]
        );
        assert!(wbytes > 1_000_000, "{}: a real workload: {wbytes} B", ns[i]);
        assert!(
            du_bytes.abs_diff(wbytes) < 512_000,
            "{}: data units written delta {du} ({du_bytes} B) vs nvsoak's {wbytes} B: off by more than one data unit",
            ns[i]
        );
        let hwc = counter(&vm, &after[i], "host_write_commands").saturating_sub(counter(
            &vm,
            &before[i],
            "host_write_commands",
        ));
        assert_eq!(
            Some(hwc),
            members[i]["write_ops"].as_u64().map(u128::from),
            "{}: host write commands delta vs nvsoak's write ops on it",
            ns[i]
        );
    }
}
