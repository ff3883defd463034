//! Write safety on loop devices this test creates (backing files in /dev/shm): every refusal of
//! `safety::check_writable` (not named, each signature kind, mounted, mounted partition,
//! exclusively claimed), what `force_overwrite_signatures` may and may not override, and that the
//! device is unchanged afterwards. Needs root and losetup; skips with a printed reason otherwise.
//! Every loop, mount and PV is torn down by a drop guard, also when an assertion fails.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nvsoak::safety::{self, SafetyError, SignatureKind};

/// LVM on loop devices without touching the host's LVM devices file or udev.
const LVM_CONFIG: &str = "devices{use_devicesfile=0 filter=[\"a|^/dev/loop|\",\"r|.*|\"]} activation{udev_sync=0 udev_rules=0}";

pub(crate) fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .env("LVM_SUPPRESS_FD_WARNINGS", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{cmd} {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub(crate) fn sh(cmd: &str, args: &[&str]) -> String {
    run(cmd, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Loop devices, mounts and PVs created by one test, undone in reverse order on drop.
pub(crate) struct Scratch {
    pub(crate) dir: tempfile::TempDir,
    undo: Vec<(String, Vec<String>)>,
}

impl Scratch {
    /// None (with a printed reason) when loop devices cannot be used here.
    pub(crate) fn new(test: &str) -> Option<Scratch> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping {test}: needs root for loop devices");
            return None;
        }
        if run("losetup", &["--version"]).is_err() {
            eprintln!("skipping {test}: losetup is missing (util-linux)");
            return None;
        }
        Some(Scratch {
            dir: crate::common::shm_dir(),
            undo: Vec::new(),
        })
    }

    pub(crate) fn on_drop(&mut self, cmd: &str, args: &[&str]) {
        self.undo.push((
            cmd.to_string(),
            args.iter().map(|a| a.to_string()).collect(),
        ));
    }

    /// A loop device over a sparse backing file of `mib` MiB.
    pub(crate) fn loop_dev(&mut self, mib: u64, partscan: bool) -> PathBuf {
        let backing = self.dir.path().join(format!("loop{}.img", self.undo.len()));
        let f = fs::File::create(&backing).expect("creating a backing file");
        f.set_len(mib << 20).expect("sizing the backing file");
        drop(f);
        let b = backing.to_str().expect("utf-8 path");
        let mut args = vec!["-f", "--show"];
        if partscan {
            args.push("-P");
        }
        args.push(b);
        let dev = sh("losetup", &args);
        self.on_drop("losetup", &["-d", &dev]);
        PathBuf::from(dev)
    }

    pub(crate) fn mount(&mut self, dev: &Path) -> PathBuf {
        let mp = self.dir.path().join(format!("mnt{}", self.undo.len()));
        fs::create_dir(&mp).expect("creating a mount point");
        let m = mp.to_str().expect("utf-8 path").to_string();
        sh("mount", &[dev.to_str().expect("utf-8 path"), &m]);
        self.on_drop("umount", &[&m]);
        mp
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for (cmd, args) in self.undo.drain(..).rev() {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(e) = run(&cmd, &args) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

pub(crate) fn p(dev: &Path) -> &str {
    dev.to_str().expect("utf-8 path")
}

/// The first 4 MiB and the last 1 MiB of a device (where partition tables and superblocks
/// live), read through a read-only descriptor.
pub(crate) fn snapshot(dev: &Path) -> Vec<u8> {
    let mut f = fs::File::open(dev).expect("opening the device read-only");
    let size = f.seek(SeekFrom::End(0)).expect("device size");
    let mut out = vec![0u8; 4 << 20];
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_exact(&mut out).expect("reading the head");
    let mut tail = vec![0u8; 1 << 20];
    f.seek(SeekFrom::Start(size - (1 << 20))).unwrap();
    f.read_exact(&mut tail).expect("reading the tail");
    out.extend_from_slice(&tail);
    out
}

pub(crate) fn blkid_value(dev: &Path, tag: &str) -> String {
    run("blkid", &["-p", "-s", tag, "-o", "value", p(dev)]).unwrap_or_default()
}

/// Asserts the device is refused by the signature check for `type_name` (naming it and its
/// UUID), that force_overwrite_signatures lets it through reporting the signature, and that
/// neither call changed the device.
fn assert_signature_refused(dev: &Path, type_name: &str, kind: SignatureKind, text: &str) {
    let before = snapshot(dev);
    let allow = Some(p(dev));
    let err = safety::check_writable(dev, allow, false).expect_err("a device with a signature");
    let msg = err.to_string();
    assert_eq!(err.check(), "signature", "{msg}");
    match &err {
        SafetyError::Signature { signatures, .. } => {
            assert!(
                signatures
                    .iter()
                    .any(|s| s.type_name == type_name && s.kind == kind),
                "{signatures:?}"
            );
        }
        other => panic!("expected a signature refusal, got {other:?}"),
    }
    assert!(
        msg.starts_with(&format!("refusing to write {}: it holds {text}", p(dev))),
        "{msg}"
    );
    assert!(msg.contains("see allow_destroy in README"), "{msg}");
    let uuid_tag = if kind == SignatureKind::PartitionTable {
        "PTUUID"
    } else {
        "UUID"
    };
    let uuid = blkid_value(dev, uuid_tag);
    if !uuid.is_empty() {
        assert!(msg.contains(&uuid), "{msg} should name {uuid_tag} {uuid}");
    }
    let ok = safety::check_writable(dev, allow, true).expect("force_overwrite_signatures");
    assert!(
        ok.signatures.iter().any(|s| s.type_name == type_name),
        "the caller must learn what it destroys: {:?}",
        ok.signatures
    );
    assert!(snapshot(dev) == before, "the checks changed {}", p(dev));
}

#[test]
fn blank_device_named_by_path_passes() {
    let Some(mut s) = Scratch::new("blank_device_named_by_path_passes") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let before = snapshot(&dev);
    let id = safety::check_writable(&dev, Some(p(&dev)), false).expect("a blank, named loop");
    assert_eq!(id.path, dev);
    assert_eq!(
        Some(id.kernel_name.as_str()),
        dev.file_name().and_then(|n| n.to_str())
    );
    assert_eq!((id.serial.as_deref(), id.wwn.as_deref()), (None, None));
    assert!(id.signatures.is_empty());
    // A symlink to the device is resolved as the target; in allow_destroy it allows nothing.
    let link = s.dir.path().join("by-id-link");
    std::os::unix::fs::symlink(&dev, &link).unwrap();
    let err = safety::check_writable(&link, Some(p(&link)), false)
        .expect_err("allow_destroy naming a symlink");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let id = safety::check_writable(&link, Some(p(&dev)), false).expect("target via a symlink");
    assert_eq!(id.path, dev);
    let id2 = safety::identify(&dev).unwrap();
    assert!(id.same_device(&id2));
    assert!(snapshot(&dev) == before);
}

#[test]
fn device_not_named_in_allow_destroy_is_refused() {
    let Some(mut s) = Scratch::new("device_not_named_in_allow_destroy_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let other = s.loop_dev(16, false);
    for allow in [None, Some(p(&other)), Some("S4EWNX0N123456"), Some("")] {
        let err = safety::check_writable(&dev, allow, true).expect_err("not named");
        assert_eq!(err.check(), "allow_destroy", "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("refusing to write {}:", p(&dev))),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("exact path \"{}\"", p(&dev))),
            "the message says how to allow it: {msg}"
        );
    }
    // A regular file is not a block device.
    let f = s.dir.path().join("plain.dat");
    fs::write(&f, b"x").unwrap();
    let err = safety::check_writable(&f, Some(f.to_str().unwrap()), false).unwrap_err();
    assert!(matches!(err, SafetyError::NotBlockDevice { .. }), "{err}");
}

#[test]
fn ext4_is_refused_and_force_overrides() {
    let Some(mut s) = Scratch::new("ext4_is_refused_and_force_overrides") else {
        return;
    };
    let dev = s.loop_dev(32, false);
    let uuid = "3f1c8a5e-6b7d-4e2a-9c10-2b5e8d7f4a61";
    sh(
        "mkfs.ext4",
        &["-q", "-F", "-U", uuid, "-L", "nvsoaktest", p(&dev)],
    );
    assert_signature_refused(
        &dev,
        "ext4",
        SignatureKind::Filesystem,
        &format!("an ext4 filesystem (UUID {uuid}, LABEL nvsoaktest)"),
    );
    // force does not stand in for allow_destroy.
    let err = safety::check_writable(&dev, None, true).unwrap_err();
    assert_eq!(err.check(), "allow_destroy");
}

#[test]
fn xfs_is_refused() {
    let Some(mut s) = Scratch::new("xfs_is_refused") else {
        return;
    };
    // mkfs.xfs refuses filesystems under 300 MiB; the backing file is sparse.
    let dev = s.loop_dev(320, false);
    sh("mkfs.xfs", &["-q", "-f", p(&dev)]);
    assert_signature_refused(
        &dev,
        "xfs",
        SignatureKind::Filesystem,
        "an xfs filesystem (UUID ",
    );
}

#[test]
fn gpt_is_refused() {
    let Some(mut s) = Scratch::new("gpt_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    sh("sgdisk", &["-o", p(&dev)]);
    assert_signature_refused(
        &dev,
        "gpt",
        SignatureKind::PartitionTable,
        "a GPT partition table (PTUUID ",
    );
}

#[test]
fn mbr_is_refused() {
    let Some(mut s) = Scratch::new("mbr_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let out = Command::new("sfdisk")
        .args(["--no-reread", "-q", p(&dev)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"label: dos\nlabel-id: 0x1a2b3c4d\n")?;
            c.wait_with_output()
        })
        .expect("running sfdisk");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_signature_refused(
        &dev,
        "dos",
        SignatureKind::PartitionTable,
        "a dos (MBR) partition table (PTUUID 1a2b3c4d)",
    );
}

#[test]
fn lvm_pv_is_refused() {
    let Some(mut s) = Scratch::new("lvm_pv_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    if let Err(e) = run("pvcreate", &["--config", LVM_CONFIG, "-q", p(&dev)]) {
        panic!("pvcreate on a loop device failed: {e}");
    }
    s.on_drop(
        "pvremove",
        &["--config", LVM_CONFIG, "-q", "-ff", "-y", p(&dev)],
    );
    assert_signature_refused(
        &dev,
        "LVM2_member",
        SignatureKind::Lvm,
        "an LVM physical volume (LVM2_member, UUID ",
    );
}

/// An md v1.2 superblock (4 KiB into the device, as `mdadm --create --metadata=1.2` writes it)
/// for a 2-disk RAID1, with the checksum the kernel and libblkid verify.
fn md_superblock_1_2(data_sectors: u64) -> Vec<u8> {
    let mut sb = vec![0u8; 256 + 2 * 2];
    let put32 = |sb: &mut [u8], at: usize, v: u32| sb[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let put64 = |sb: &mut [u8], at: usize, v: u64| sb[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put32(&mut sb, 0, 0xa92b_4efc); // magic
    put32(&mut sb, 4, 1); // major_version
    sb[16..32].copy_from_slice(&[0x5a; 16]); // set_uuid
    sb[32..44].copy_from_slice(b"nvsoaktest:0"); // set_name
    put32(&mut sb, 72, 1); // level: raid1
    put64(&mut sb, 80, data_sectors); // size
    put32(&mut sb, 92, 2); // raid_disks
    put64(&mut sb, 128, 2048); // data_offset
    put64(&mut sb, 136, data_sectors); // data_size
    put64(&mut sb, 144, 8); // super_offset: 4096 / 512
    sb[168..184].copy_from_slice(&[0xa5; 16]); // device_uuid
    put64(&mut sb, 200, 1); // events
    put64(&mut sb, 208, u64::MAX); // resync_offset: clean
    put32(&mut sb, 220, 2); // max_dev
    sb[256..260].copy_from_slice(&[0, 0, 1, 0]); // dev_roles
    let sum: u64 = sb
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()) as u64)
        .sum();
    put32(&mut sb, 216, ((sum & 0xffff_ffff) + (sum >> 32)) as u32);
    sb
}

#[test]
fn mdraid_member_is_refused() {
    let Some(mut s) = Scratch::new("mdraid_member_is_refused") else {
        return;
    };
    let a = s.loop_dev(32, false);
    let b = s.loop_dev(32, false);
    let md = format!("/dev/md/nvsoak-it-{}", std::process::id());
    let created = run(
        "mdadm",
        &[
            "--create",
            &md,
            "--level=1",
            "--raid-devices=2",
            "--metadata=1.2",
            "--run",
            "--force",
            "--assume-clean",
            p(&a),
            p(&b),
        ],
    );
    match created {
        Ok(_) => {
            s.on_drop("mdadm", &["--stop", &md]);
            // While the array runs, the member is held by it: force does not help.
            let err = safety::check_writable(&a, Some(p(&a)), true).unwrap_err();
            assert!(matches!(err.check(), "holders" | "busy"), "{err}");
            assert!(err.to_string().contains("md"), "{err}");
            sh("mdadm", &["--stop", &md]);
        }
        Err(e) => {
            // No md driver in this kernel: write the superblock mdadm would have written.
            eprintln!("mdadm --create is unavailable ({e}); writing a v1.2 superblock instead");
            let mut f = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_SYNC)
                .open(&a)
                .expect("opening our own loop device");
            f.seek(SeekFrom::Start(4096)).unwrap();
            f.write_all(&md_superblock_1_2((32 << 11) - 2048)).unwrap();
            f.sync_all().unwrap();
        }
    }
    assert_signature_refused(
        &a,
        "linux_raid_member",
        SignatureKind::Raid,
        "an mdraid member (linux_raid_member, UUID ",
    );
}

#[test]
fn swap_is_refused() {
    let Some(mut s) = Scratch::new("swap_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    sh(
        "mkswap",
        &["-U", "0b7f5b3c-1111-4a2b-8c3d-123456789abc", p(&dev)],
    );
    assert_signature_refused(
        &dev,
        "swap",
        SignatureKind::Swap,
        "a swap area (UUID 0b7f5b3c-1111-4a2b-8c3d-123456789abc)",
    );
}

#[test]
fn mounted_device_is_refused_even_with_force() {
    let Some(mut s) = Scratch::new("mounted_device_is_refused_even_with_force") else {
        return;
    };
    let dev = s.loop_dev(32, false);
    // No lazy inode-table or journal initialisation: ext4's background thread would otherwise
    // write to the device after the mount, and the before/after comparison would blame nvsoak.
    sh(
        "mkfs.ext4",
        &[
            "-q",
            "-F",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            p(&dev),
        ],
    );
    let mp = s.mount(&dev);
    let before = snapshot(&dev);
    for force in [false, true] {
        let err = safety::check_writable(&dev, Some(p(&dev)), force).unwrap_err();
        assert_eq!(err.check(), "mounted", "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{} is mounted on {}", p(&dev), mp.display())),
            "{msg}"
        );
    }
    assert!(snapshot(&dev) == before);
}

/// Polls for a path to appear (partition nodes are created asynchronously by devtmpfs).
fn wait_for(path: &Path, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

#[test]
fn mounted_partition_is_refused() {
    let Some(mut s) = Scratch::new("mounted_partition_is_refused") else {
        return;
    };
    let dev = s.loop_dev(64, true);
    sh("sgdisk", &["-o", "-n", "1:2048:+24M", p(&dev)]);
    let _ = run("partx", &["-u", p(&dev)]);
    let part = PathBuf::from(format!("{}p1", p(&dev)));
    if !wait_for(&part, Duration::from_secs(5)) {
        eprintln!(
            "skipping mounted_partition_is_refused: {} did not appear (no partition scanning)",
            part.display()
        );
        return;
    }
    sh("mkfs.ext4", &["-q", "-F", p(&part)]);
    let mp = s.mount(&part);
    for force in [false, true] {
        let err = safety::check_writable(&dev, Some(p(&dev)), force).unwrap_err();
        assert_eq!(err.check(), "mounted", "{err}");
        assert!(
            err.to_string().contains(&format!(
                "{} is mounted on {}",
                part.display(),
                mp.display()
            )),
            "{err}"
        );
    }
    sh("umount", &[mp.to_str().unwrap()]);
    // Unmounted, the partition table is what stops it.
    let err = safety::check_writable(&dev, Some(p(&dev)), false).unwrap_err();
    assert_eq!(err.check(), "signature", "{err}");
    // The partition inherits no serial; its own ext4 is found as well.
    let err = safety::check_writable(&part, Some(p(&part)), false).unwrap_err();
    assert!(err.to_string().contains("ext4"), "{err}");
}

#[test]
fn exclusively_claimed_device_is_refused() {
    let Some(mut s) = Scratch::new("exclusively_claimed_device_is_refused") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let holder = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&dev)
        .expect("claiming our loop device");
    let err = safety::check_writable(&dev, Some(p(&dev)), true).unwrap_err();
    assert_eq!(err.check(), "busy", "{err}");
    assert!(err.to_string().contains("is in use"), "{err}");
    drop(holder);
    // Free again once our claim is gone. A probe of the node by someone else (udev's blkid
    // after the close, a parallel test scanning loop devices) can hold it for a moment: wait for
    // that condition to clear, bounded, rather than fail on it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match safety::check_writable(&dev, Some(p(&dev)), false) {
            Ok(_) => break,
            Err(e) if e.check() == "busy" && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("free again: {e}"),
        }
    }
}

/// `nvsoak state show` prints a checkpoint saved by the library, `state reset` moves it aside.
#[test]
fn state_show_and_reset_cli() {
    use nvsoak::model::checkpoint::{Checkpoint, TargetState};
    use nvsoak::model::totals::Totals;
    use nvsoak::state;
    use nvsoak::workload::pattern::GenMap;
    let dir = crate::common::shm_dir();
    let mut t = TargetState::new("t0", "/dev/shm/t0.dat");
    t.phase_index = 1;
    t.phase_elapsed_secs = 3725.0;
    t.soak_started = Some(1_764_573_300.0);
    t.totals = Totals {
        read_bytes: 3 << 30,
        read_ops: 786_432,
        write_bytes: 1 << 30,
        write_ops: 262_144,
        errors: 2,
        verify_errors: 1,
        verify_errors_by_kind: [("stale_generation".to_string(), 1)].into(),
        verified_bytes: 0,
        soak_elapsed_secs: 90_000.0,
        ..Default::default()
    };
    t.steady_history = vec![1000.0, 1010.0];
    let map = GenMap::new(0, 64 << 20, 42);
    map.set(0, 1);
    state::save(
        dir.path(),
        &Checkpoint::new("h".into(), vec![t]),
        &[("t0", &map)],
    )
    .unwrap();

    let nvsoak = |args: &[&str]| {
        let out = Command::new(crate::common::bin())
            .args(args)
            .output()
            .expect("running nvsoak");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let d = dir.path().to_str().unwrap();
    let out = nvsoak(&["state", "show", "--state", d]);
    for want in [
        "target t0 (/dev/shm/t0.dat)",
        // phase_index 1 is the second phase: phases are numbered from 1 wherever a person reads them.
        "phase 2, 1h 2m into it",
        // No daemon holds the directory: the soak is stopped, not "running" (issue 14).
        "started 2025-12-01 07:15:00 UTC, ran for 1d 1h, stopped (no nvsoak has this state directory)",
        "read         3.00 GiB in 786432 ops",
        "written      1.00 GiB in 262144 ops",
        "errors       2 I/O, 1 verify (stale_generation 1)",
        "steady state 2 rounds, last 1010 IOPS",
        "1 of 16384 4K units written",
        "intact",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let out = nvsoak(&["state", "reset", "--state", d]);
    assert!(out.contains("checkpoint.json.reset-"), "{out}");
    assert!(!dir.path().join("checkpoint.json").exists());
    let out = nvsoak(&["state", "show", "--state", d]);
    assert!(out.contains("no checkpoint"), "{out}");
}

/// Data verification on a real /dev/shm file through the generation map, across a simulated
/// crash and restart from a checkpoint: no false mismatches for blocks written after the
/// checkpoint, and an injected corruption, a misdirected write and a lost write are each caught
/// with the right offset and kind.
#[test]
fn verify_on_a_file_across_a_restart() {
    use std::os::unix::fs::FileExt;

    use nvsoak::model::checkpoint::{Checkpoint, TargetState};
    use nvsoak::state;
    use nvsoak::workload::pattern::{self, GenMap, Mismatch, VERIFY_UNIT, VerifyKind};

    const BS: usize = 4 * VERIFY_UNIT; // 16 KiB blocks, 4 units each
    const BLOCKS: u64 = 256; // a 4 MiB region
    let dir = crate::common::shm_dir();
    let path = dir.path().join("target.dat");
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(BLOCKS * BS as u64).unwrap();
    let seed = pattern::new_seed();
    let map = GenMap::new(0, BLOCKS * BS as u64, seed);
    let mut buf = vec![0u8; BS];
    let write = |map: &GenMap, buf: &mut Vec<u8>, block: u64| {
        let off = block * BS as u64;
        map.stamp_write(buf, off);
        f.write_all_at(buf, off).unwrap();
        map.complete_write(off, BS);
    };
    let verify_all = |map: &GenMap| -> Vec<Mismatch> {
        let mut bad = Vec::new();
        let mut rb = vec![0u8; BS];
        for b in 0..BLOCKS {
            let off = b * BS as u64;
            f.read_exact_at(&mut rb, off).unwrap();
            map.verify_read(&rb, off, |m| bad.push(*m));
        }
        bad
    };
    // Write the first half twice, checkpoint, then write some blocks again and some new ones.
    for _ in 0..2 {
        for b in 0..BLOCKS / 2 {
            write(&map, &mut buf, b);
        }
    }
    assert!(
        verify_all(&map).is_empty(),
        "never-written half is recognised"
    );
    let sdir = dir.path().join("state");
    let mut t = TargetState::new("t0", path.to_str().unwrap());
    t.verify_seed = Some(seed);
    let cp = Checkpoint::new("plan".into(), vec![t]);
    state::save(&sdir, &cp, &[("t0", &map)]).unwrap();
    let old_block_3 = {
        let mut b = vec![0u8; BS];
        f.read_exact_at(&mut b, 3 * BS as u64).unwrap();
        b
    };
    for b in (0..BLOCKS).step_by(3) {
        write(&map, &mut buf, b); // after the checkpoint: lost by the "crash"
    }
    drop(map);

    // Restart: the map comes back from the checkpoint.
    let loaded = state::load(&sdir, "plan").unwrap().expect("the checkpoint");
    assert_eq!(loaded.checkpoint.targets[0].verify_seed, Some(seed));
    let map = &loaded.genmaps["t0"];
    assert_eq!(map.seed(), seed);
    let bad = verify_all(map);
    assert!(
        bad.is_empty(),
        "false mismatches after restart: {:?}",
        bad.first()
    );
    assert_eq!(map.recovered_units(), 0, "every unit was seen and learnt");

    // Corruption: one byte in the middle of block 10's third unit.
    let at = 10 * BS as u64 + 2 * VERIFY_UNIT as u64 + 1000;
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], at).unwrap();
    // Misdirected write: block 20 copied over block 40.
    let mut b20 = vec![0u8; BS];
    f.read_exact_at(&mut b20, 20 * BS as u64).unwrap();
    f.write_all_at(&b20, 40 * BS as u64).unwrap();
    // Lost write: block 3 (rewritten after the checkpoint and learnt) restored to its old self.
    f.write_all_at(&old_block_3, 3 * BS as u64).unwrap();

    let bad = verify_all(map);
    let summary: Vec<(VerifyKind, u64)> = bad.iter().map(|m| (m.kind, m.offset)).collect();
    let mut want = vec![(
        VerifyKind::BadChecksum,
        10 * BS as u64 + 2 * VERIFY_UNIT as u64,
    )];
    want.extend((0..4).map(|u| (VerifyKind::StaleGeneration, 3 * BS as u64 + u * 4096)));
    want.extend((0..4).map(|u| (VerifyKind::WrongOffset, 40 * BS as u64 + u * 4096)));
    want.sort_by_key(|w| w.1);
    assert_eq!(summary, want);
    let corrupt = bad
        .iter()
        .find(|m| m.kind == VerifyKind::BadChecksum)
        .unwrap();
    assert_eq!(corrupt.first_bad_byte, Some(1000));
    let wrong = bad
        .iter()
        .find(|m| m.kind == VerifyKind::WrongOffset)
        .unwrap();
    assert_eq!(wrong.found.map(|h| h.offset), Some(20 * BS as u64));
}
