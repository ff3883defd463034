//! Scenario 0: boot a VM, run nvme-cli against the emulated controller, and check the raw
//! Identify and SMART pages against the layouts in `../shared/notes/nvme-layouts.md` and
//! against nvme-cli's own JSON. The `#[ignore]`d test writes the pages to
//! `tests/fixtures/nvme/qemu-7.2/` for the parsers' golden tests:
//! `cargo test --release --test vm fixtures::regenerate -- --ignored`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Vm, VmSpec};

pub const SERIAL: &str = "SOAK0001";

/// Guest commands, in order: (key, fixture file name, command).
const PAGES: &[(&str, &str, &str)] = &[
    ("idctrl", "id-ctrl.bin", "nvme id-ctrl /dev/nvme0 -b"),
    ("idns", "id-ns.bin", "nvme id-ns /dev/nvme0n1 -b"),
    (
        "smart",
        "smart.bin",
        "nvme get-log /dev/nvme0 --log-id=2 --log-len=512 -b",
    ),
    (
        "error",
        "error.bin",
        "nvme get-log /dev/nvme0 --log-id=1 --log-len=4096 -b",
    ),
    (
        "fwslot",
        "fw-slot.bin",
        "nvme get-log /dev/nvme0 --log-id=3 --log-len=512 -b",
    ),
    (
        "smartjson",
        "smart.json",
        "nvme smart-log /dev/nvme0 -o json",
    ),
    (
        "idctrljson",
        "id-ctrl.json",
        "nvme id-ctrl /dev/nvme0 -o json",
    ),
    ("idnsjson", "id-ns.json", "nvme id-ns /dev/nvme0n1 -o json"),
];

/// Critical warning bits set through QMP for `smart-warn.bin`: reliability degraded (bit 2) and
/// volatile memory backup failed (bit 4).
const WARN_BITS: u8 = 0x14;

/// Bytes written before the pages are read, so the SMART counters are not all zero.
const WRITE_MIB: u64 = 5;
const READ_MIB: u64 = 3;

struct Capture {
    vm: Vm,
    files: BTreeMap<&'static str, Vec<u8>>,
}

fn capture() -> Option<Capture> {
    crate::require_vm!(None);
    let mut script = format!(
        "wait_for /dev/nvme0n1 10 || echo 'no /dev/nvme0n1'\n\
         run ddw dd if=/dev/urandom of=/dev/nvme0n1 bs=1M count={WRITE_MIB} oflag=direct\n\
         run ddr dd if=/dev/nvme0n1 of=/dev/null bs=1M count={READ_MIB} iflag=direct\n"
    );
    for (key, _, cmd) in PAGES {
        script.push_str(&format!("run {key} {cmd}\n"));
    }
    // Then the warning state: the host sets bits 2 and 4 through QMP, the guest lowers the
    // over-temperature threshold to 316 K (below the fixed 323 K), which sets bit 1.
    script.push_str(
        "echo '@@NVSOAK-WAIT-QMP'\n\
         wait_host qmp-done\n\
         run setfeat nvme set-feature /dev/nvme0 -f 4 -v 0x13C\n\
         run smartwarn nvme get-log /dev/nvme0 --log-id=2 --log-len=512 -b\n\
         run smartwarnjson nvme smart-log /dev/nvme0 -o json\n",
    );
    let mut spec = VmSpec::new("fixtures", &script);
    spec.drives[0].serial = SERIAL.into();
    let mut vm = Vm::boot(&spec);
    vm.wait_text("@@NVSOAK-BOOTED", Duration::from_secs(60));
    vm.wait_ok("ddw", Duration::from_secs(60));
    vm.wait_ok("ddr", Duration::from_secs(60));
    let mut files = BTreeMap::new();
    for (key, file, _) in PAGES {
        files.insert(*file, vm.wait_ok(key, Duration::from_secs(30)).stdout);
    }
    vm.wait_text("@@NVSOAK-WAIT-QMP", Duration::from_secs(30));
    if let Err(e) = vm.qmp().set_critical_warning("nvme0", WARN_BITS) {
        vm.fail(&format!("setting the critical warning through QMP: {e}"));
    }
    vm.send_line("qmp-done");
    vm.wait_ok("setfeat", Duration::from_secs(30));
    files.insert(
        "smart-warn.bin",
        vm.wait_ok("smartwarn", Duration::from_secs(30)).stdout,
    );
    files.insert(
        "smart-warn.json",
        vm.wait_ok("smartwarnjson", Duration::from_secs(30)).stdout,
    );
    vm.finish(Duration::from_secs(30));
    Some(Capture { vm, files })
}

fn le(b: &[u8], off: usize, len: usize) -> u128 {
    b[off..off + len]
        .iter()
        .rev()
        .fold(0u128, |acc, &x| (acc << 8) | u128::from(x))
}

/// nvme-cli 2.x prints 128-bit counters as numbers or as strings, depending on its version.
pub fn json_u128(v: &Value) -> Option<u128> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .map(u128::from)
            .or_else(|| n.as_f64().map(|f| f as u128)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn json(vm: &Vm, bytes: &[u8], what: &str) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        vm.fail(&format!(
            "{what} is not JSON ({e}): {}",
            String::from_utf8_lossy(bytes)
        ))
    })
}

#[test]
fn boot_identify_and_raw_pages() {
    let Some(c) = capture() else { return };
    let vm = &c.vm;
    let page = |f: &str| c.files[f].as_slice();

    // Identify Controller
    let id = page("id-ctrl.bin");
    assert_eq!(id.len(), 4096, "id-ctrl page size");
    let idj = json(vm, page("id-ctrl.json"), "id-ctrl -o json");
    let sn = String::from_utf8_lossy(&id[4..24]);
    let mn = String::from_utf8_lossy(&id[24..64]);
    let fr = String::from_utf8_lossy(&id[64..72]);
    assert_eq!(sn.trim_end(), SERIAL, "SN @4 is the serial property");
    assert_eq!(mn.trim_end(), "QEMU NVMe Ctrl", "MN @24");
    assert_eq!(idj["sn"].as_str().map(str::trim_end), Some(SERIAL));
    assert_eq!(idj["mn"].as_str().map(str::trim_end), Some(mn.trim_end()));
    assert_eq!(idj["fr"].as_str().map(str::trim_end), Some(fr.trim_end()));
    assert_eq!(json_u128(&idj["vid"]), Some(le(id, 0, 2)), "VID @0");
    assert_eq!(
        json_u128(&idj["wctemp"]),
        Some(le(id, 266, 2)),
        "WCTEMP @266"
    );
    assert_eq!(
        json_u128(&idj["cctemp"]),
        Some(le(id, 268, 2)),
        "CCTEMP @268"
    );
    assert_eq!(le(id, 266, 2), 343, "QEMU's WCTEMP");
    assert_eq!(le(id, 268, 2), 373, "QEMU's CCTEMP");
    assert_eq!(
        json_u128(&idj["mdts"]),
        Some(u128::from(id[77])),
        "MDTS @77"
    );
    assert_eq!(
        json_u128(&idj["lpa"]),
        Some(u128::from(id[261])),
        "LPA @261"
    );

    // Identify Namespace: 256 MiB image
    let ns = page("id-ns.bin");
    assert_eq!(ns.len(), 4096, "id-ns page size");
    let nsze = le(ns, 0, 8);
    let flbas = ns[26];
    let fmt = usize::from((flbas & 0xF) | (((flbas >> 5) & 3) << 4));
    let lbads = ns[128 + 4 * fmt + 2];
    assert_eq!(
        nsze << lbads,
        256 << 20,
        "NSZE x block size is the image size"
    );
    let nsj = json(vm, page("id-ns.json"), "id-ns -o json");
    assert_eq!(json_u128(&nsj["nsze"]), Some(nsze));

    // SMART / Health
    let s = page("smart.bin");
    assert_eq!(s.len(), 512, "SMART page size");
    let sj = json(vm, page("smart.json"), "smart-log -o json");
    let fields: &[(&str, usize, usize)] = &[
        ("critical_warning", 0, 1),
        ("temperature", 1, 2),
        ("avail_spare", 3, 1),
        ("spare_thresh", 4, 1),
        ("percent_used", 5, 1),
        ("data_units_read", 32, 16),
        ("data_units_written", 48, 16),
        ("host_read_commands", 64, 16),
        ("host_write_commands", 80, 16),
        ("controller_busy_time", 96, 16),
        ("power_cycles", 112, 16),
        ("power_on_hours", 128, 16),
        ("unsafe_shutdowns", 144, 16),
        ("media_errors", 160, 16),
        ("num_err_log_entries", 176, 16),
    ];
    for (key, off, len) in fields {
        let want = json_u128(&sj[*key])
            .unwrap_or_else(|| vm.fail(&format!("smart-log JSON lacks {key}: {sj}")));
        assert_eq!(le(s, *off, *len), want, "SMART {key} @{off} vs nvme-cli");
    }
    assert_eq!(le(s, 1, 2), 323, "QEMU's fixed composite temperature");
    let written = le(s, 48, 16);
    let want_written = (u128::from(WRITE_MIB << 20)).div_ceil(512_000);
    assert!(
        (want_written..=want_written + 2).contains(&written),
        "data units written {written}, expected about {want_written} for {WRITE_MIB} MiB"
    );
    let read = le(s, 32, 16);
    let want_read = (u128::from(READ_MIB << 20)).div_ceil(512_000);
    assert!(
        read >= want_read,
        "data units read {read}, expected at least {want_read}"
    );
    assert!(le(s, 80, 16) >= 5, "host write commands");

    // The warning state: QMP bits plus bit 1 from the lowered temperature threshold.
    let w = page("smart-warn.bin");
    let wj = json(
        vm,
        page("smart-warn.json"),
        "smart-log -o json (warning state)",
    );
    assert_eq!(
        w[0],
        WARN_BITS | 0x02,
        "critical_warning after QMP and Set Features"
    );
    assert_eq!(json_u128(&wj["critical_warning"]), Some(u128::from(w[0])));
    assert_eq!(
        le(w, 48, 16),
        written,
        "no writes between the two SMART reads"
    );
}

/// Writes the captured pages to `tests/fixtures/nvme/qemu-7.2/`.
#[test]
#[ignore = "regenerates tests/fixtures/nvme/qemu-7.2/; run with --ignored"]
fn regenerate() {
    let Some(c) = capture() else { return };
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvme/qemu-7.2");
    std::fs::create_dir_all(&dir).expect("creating the fixture dir");
    for (name, bytes) in &c.files {
        std::fs::write(dir.join(name), bytes).expect("writing a fixture");
    }
    eprintln!("wrote {} files to {}", c.files.len(), dir.display());
}
