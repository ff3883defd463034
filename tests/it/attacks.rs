//! Write safety tried as an attacker and a careless operator would, on loop devices and files
//! this test makes: a symlink swapped between an allowed blank device and an ext4 device while
//! nvsoak opens it (hundreds of times), two daemons on one device, a mount during a soak, an
//! existing file, the backing file of a loop device with a mounted filesystem, a loop device
//! stacked on the target at an offset with a mounted ext4, a `mknod` alias, a hard link. Each
//! checks the bytes of everything not allowed (first 4 MiB and last 1 MiB, and the filesystem)
//! before and after, and that `check-config` refuses what `run` refuses with the same message.
//!
//! Device-mapper and md are not built into this host's kernel; their holders are covered by
//! `safety::holders_are_listed_with_dm_names` (the sysfs layout) and the `holders` check, and
//! stacking is exercised with loop devices, which the kernel here has.

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::common::{Daemon, bin, free_port, sum};
use crate::safety::{Scratch, p, sh, snapshot};

/// A soak that writes, on `path`, with `extra` lines in the target table.
fn write_plan(state: &Path, name: &str, path: &Path, extra: &str) -> String {
    format!(
        r#"
[state]
dir = "{state}"
[health]
enabled = false
[[target]]
name = "{name}"
path = "{path}"
engine = "psync"
direct = false
{extra}
[[target.phase]]
kind = "soak"
job = {{ name = "w", read = 0, bs = "4k", access = "random", iodepth = 1, rate = "2000iops" }}
duration = "10m"
# A write-only plan verifies nothing: without this the verdict is INCOMPLETE (exit 3).
[gates]
verify_errors = false
"#,
        state = state.display(),
        path = path.display(),
    )
}

fn nvsoak(args: &[&str]) -> (Option<i32>, String) {
    crate::common::run_nvsoak(args, "warn")
}

/// The error line `main` prints (`nvsoak: ...`).
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("nvsoak: "))
        .unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
        .to_string()
}

/// `run` and `check-config` both refuse `cfg` with the same message, which contains `want`;
/// returns it.
fn both_refuse(dir: &Path, cfg: &str, want: &str) -> String {
    let path = dir.join(format!("plan-{}.toml", free_port()));
    fs::write(&path, cfg).expect("writing the plan");
    let c = p(&path);
    let (code, err) = nvsoak(&["check-config", c]);
    assert_ne!(code, Some(0), "check-config approved it:\n{err}");
    let checked = error_line(&err);
    let addr = format!("127.0.0.1:{}", free_port());
    let (code, err) = nvsoak(&[
        "run",
        "--config",
        c,
        "--web.listen-address",
        &addr,
        "--exit-when-done",
    ]);
    assert_ne!(code, Some(0), "run did not refuse:\n{err}");
    let ran = error_line(&err);
    assert_eq!(checked, ran, "check-config and run disagree");
    assert!(ran.contains(want), "{ran}");
    ran
}

fn mkfs_ext4(dev: &Path) {
    sh("mkfs.ext4", &["-q", "-F", p(dev)]);
}

/// ext4 on `dev` is intact: fsck finds nothing to fix.
fn assert_fs_intact(dev: &Path) {
    let out = Command::new("e2fsck")
        .args(["-f", "-n", p(dev)])
        .stdin(Stdio::null())
        .output()
        .expect("running e2fsck");
    assert!(
        out.status.success(),
        "the ext4 on {} is damaged: {}",
        dev.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

fn rdev(path: &Path) -> u64 {
    fs::metadata(path).expect("stat").rdev()
}

/// A thread that re-points `link` between `a` and `b` as fast as it can, atomically (a new
/// link renamed over it), until [`LinkFlipper::stop`], which says how often it moved.
struct LinkFlipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl LinkFlipper {
    fn start(link: &Path, a: &Path, b: &Path, tmp: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, flips) = (stop.clone(), flips.clone());
            let (a, b, link) = (a.to_path_buf(), b.to_path_buf(), link.to_path_buf());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let to = if n.is_multiple_of(2) { &b } else { &a };
                    let _ = fs::remove_file(&tmp);
                    if std::os::unix::fs::symlink(to, &tmp).is_ok()
                        && fs::rename(&tmp, &link).is_ok()
                    {
                        n += 1;
                        flips.store(n, Ordering::Relaxed);
                    }
                }
            })
        };
        LinkFlipper {
            stop,
            flips,
            thread,
        }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("link flipper");
        self.flips.load(Ordering::Relaxed)
    }
}

#[test]
fn symlink_swapped_while_opening_never_reaches_the_other_device() {
    let Some(mut s) = Scratch::new("symlink swap") else {
        return;
    };
    let allowed = s.loop_dev(16, false);
    let other = s.loop_dev(16, false);
    mkfs_ext4(&other);
    let before = snapshot(&other);
    let link = s.dir.path().join("target");
    std::os::unix::fs::symlink(&allowed, &link).expect("symlink");
    let cfg_path = s.dir.path().join("plan.toml");
    fs::write(
        &cfg_path,
        write_plan(
            &s.dir.path().join("state"),
            "swap",
            &link,
            &format!("allow_destroy = \"{}\"", allowed.display()),
        ),
    )
    .expect("plan");
    let settings = nvsoak::config::load(Some(&cfg_path)).expect("the plan loads");
    let spec = settings.targets[0].clone();

    // Re-point the link as fast as possible, atomically (rename over it).
    let swapper = LinkFlipper::start(&link, &allowed, &other, s.dir.path().join("target.new"));
    let (want, mut opened, mut refused) = (rdev(&allowed), 0, 0);
    for _ in 0..400 {
        match nvsoak::workload::scheduler::open_target(&spec, true) {
            Ok(t) => {
                opened += 1;
                let f = fs::File::from(t.fd);
                assert_eq!(
                    f.metadata().expect("fstat").rdev(),
                    want,
                    "opened the other device"
                );
                // Write through what nvsoak returned, where a filesystem keeps its superblock
                // and where a GPT keeps its backup: on the other device, this would break it.
                let block = [0xA5u8; 4096];
                f.write_all_at(&block, 0).expect("write head");
                f.write_all_at(&block, 1024).expect("write superblock area");
                f.write_all_at(&block, t.size - 4096).expect("write tail");
            }
            Err(e) => {
                refused += 1;
                let m = e.to_string();
                // "in use": another test thread's child, between its fork and exec, holds
                // copies of this process's descriptors (this one's device among them).
                assert!(
                    m.contains("allow_destroy")
                        || m.contains("not the device checked")
                        || m.contains("is in use"),
                    "unexpected refusal: {m}"
                );
            }
        }
    }
    assert!(swapper.stop() > 100, "the link hardly moved");
    assert!(
        opened > 0 && refused > 0,
        "opened {opened}, refused {refused}: no race happened"
    );
    assert_eq!(snapshot(&other), before, "the other device's bytes changed");
    assert_fs_intact(&other);
    eprintln!(
        "symlink swap: {opened} opens of the allowed device, {refused} refusals, the other device untouched"
    );
}

/// Issue 28, break 8: `path = allow_destroy =` a symlink flipped between a blank device and an
/// ext4 one, with `force_overwrite_signatures`, wrote the ext4 device on 5 of 20 starts: the
/// name was resolved again at check time, so it allowed whatever it pointed to then. A name
/// that goes through a symlink now names nothing: every open is refused, with why, and so do
/// `check-config` and `run`.
#[test]
fn a_flipping_symlink_named_by_allow_destroy_allows_nothing() {
    let Some(mut s) = Scratch::new("allow_destroy symlink") else {
        return;
    };
    let blank = s.loop_dev(16, false);
    let other = s.loop_dev(16, false);
    mkfs_ext4(&other);
    let before = snapshot(&other);
    let link = s.dir.path().join("disk");
    std::os::unix::fs::symlink(&blank, &link).expect("symlink");
    let extra = format!(
        "allow_destroy = \"{}\"\nforce_overwrite_signatures = true",
        link.display()
    );
    let cfg = write_plan(&s.dir.path().join("state"), "flip", &link, &extra);
    // Still: both commands refuse, naming the node to use instead.
    let line = both_refuse(s.dir.path(), &cfg, "goes through a symbolic link");
    assert!(line.contains(&*blank.to_string_lossy()), "{line}");

    let cfg_path = s.dir.path().join("flip.toml");
    fs::write(&cfg_path, &cfg).expect("plan");
    let settings = nvsoak::config::load(Some(&cfg_path)).expect("the plan loads");
    let spec = settings.targets[0].clone();
    let swapper = LinkFlipper::start(&link, &blank, &other, s.dir.path().join("disk.new"));
    let mut refused = 0;
    for _ in 0..200 {
        match nvsoak::workload::scheduler::open_target(&spec, true) {
            Ok(t) => {
                let f = fs::File::from(t.fd);
                panic!(
                    "a symlink in allow_destroy allowed device {:#x}",
                    f.metadata().expect("fstat").rdev()
                );
            }
            Err(e) => {
                let m = e.to_string();
                // A flip can also land between the open and the identity check.
                assert!(
                    m.contains("symbolic link") || m.contains("not the device checked"),
                    "unexpected refusal: {m}"
                );
                refused += 1;
            }
        }
    }
    assert!(swapper.stop() > 50, "the link hardly moved");
    assert_eq!(refused, 200);
    assert_eq!(snapshot(&other), before, "the ext4 device's bytes changed");
    assert_fs_intact(&other);
}

#[test]
fn a_second_daemon_and_a_mount_fail_while_a_soak_holds_the_device() {
    let Some(mut s) = Scratch::new("two daemons") else {
        return;
    };
    let dev = s.loop_dev(32, false);
    let allow = format!("allow_destroy = \"{}\"\nverify = \"inline\"", dev.display());
    let first = Daemon::start(&write_plan(Path::new("{dir}/state"), "one", &dev, &allow));
    first.scrape_until(Duration::from_secs(20), |m| {
        sum(m, "nvsoak_write_ops_total", &[("target", "one")]) > 200.0
    });
    // A second nvsoak with its own state directory.
    let other = s.dir.path().join("second");
    fs::create_dir_all(&other).expect("dir");
    let cfg = write_plan(&other.join("state"), "two", &dev, &allow);
    let path = other.join("plan.toml");
    fs::write(&path, &cfg).expect("plan");
    let addr = format!("127.0.0.1:{}", free_port());
    let (code, err) = nvsoak(&["run", "--config", p(&path), "--web.listen-address", &addr]);
    assert_eq!(code, Some(1), "the second daemon ran:\n{err}");
    let line = error_line(&err);
    let pid = first.child.id();
    assert!(
        line.contains("in use") && line.contains(&format!("pid {pid} (nvsoak)")),
        "the refusal does not name the holder (pid {pid}): {line}"
    );
    // check-config says the same.
    let (_, cerr) = nvsoak(&["check-config", p(&path)]);
    assert_eq!(error_line(&cerr), line);
    // An exclusive open (what mount, mdadm and mkfs do) fails; a mount fails and leaves
    // nothing mounted.
    let excl = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&dev);
    assert_eq!(
        excl.map(|_| ()).map_err(|e| e.raw_os_error()),
        Err(Some(libc::EBUSY))
    );
    let mp = s.dir.path().join("mnt");
    fs::create_dir(&mp).expect("mount point");
    let m = Command::new("mount")
        .args(["-t", "ext4", p(&dev), p(&mp)])
        .stderr(Stdio::piped())
        .output()
        .expect("running mount");
    assert!(!m.status.success(), "mounted a device nvsoak holds");
    let mounts = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    assert!(!mounts.contains(p(&mp)), "{mounts}");
    // The first soak saw nothing of it: no verify error.
    let after = first.scrape_until(Duration::from_secs(20), |m| {
        sum(m, "nvsoak_write_ops_total", &[("target", "one")]) > 1000.0
    });
    assert_eq!(
        sum(&after, "nvsoak_verify_errors_total", &[("target", "one")]),
        0.0
    );
    let (status, _, err) = first.terminate();
    assert!(status.success(), "{err}");
}

#[test]
fn an_existing_file_is_refused_unless_allow_destroy_names_it() {
    let dir = crate::common::shm_dir();
    let f = dir.path().join("precious.dat");
    let data: Vec<u8> = (0..(4u32 << 20)).map(|i| (i % 251) as u8).collect();
    fs::write(&f, &data).expect("writing the file");
    let state = dir.path().join("state");
    let cfg = write_plan(&state, "f", &f, "size = \"4MiB\"");
    let msg = both_refuse(dir.path(), &cfg, "nvsoak did not create it");
    assert!(
        msg.contains(&format!("allow_destroy = \"{}\"", f.display())),
        "{msg}"
    );
    // allow_destroy naming another path does not do.
    let cfg = write_plan(
        &state,
        "f",
        &f,
        "size = \"4MiB\"\nallow_destroy = \"/dev/shm/elsewhere.dat\"",
    );
    both_refuse(dir.path(), &cfg, "nvsoak did not create it");
    assert_eq!(fs::read(&f).expect("read"), data, "the file changed");
    // Named exactly: accepted by both.
    let cfg = write_plan(
        &state,
        "f",
        &f,
        &format!("size = \"4MiB\"\nallow_destroy = \"{}\"", f.display()),
    );
    let plan = dir.path().join("ok.toml");
    fs::write(&plan, &cfg).expect("plan");
    let (code, err) = nvsoak(&["check-config", p(&plan)]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn the_backing_file_of_a_mounted_loop_device_is_refused_always() {
    let Some(mut s) = Scratch::new("loop backing file") else {
        return;
    };
    let lower = s.loop_dev(32, false);
    mkfs_ext4(&lower);
    s.mount(&lower);
    // The backing file Scratch made for it.
    let backing = PathBuf::from(sh("losetup", &["-n", "-O", "BACK-FILE", p(&lower)]));
    let before = fs::read(&backing).expect("reading the backing file");
    let cfg = write_plan(
        &s.dir.path().join("state"),
        "img",
        &backing,
        &format!(
            "size = \"32MiB\"\nallow_destroy = \"{}\"",
            backing.display()
        ),
    );
    let msg = both_refuse(s.dir.path(), &cfg, "backing file of");
    assert!(
        msg.contains(p(&lower)) && msg.contains("mounted on"),
        "{msg}"
    );
    assert_eq!(
        fs::read(&backing).expect("read"),
        before,
        "the backing file changed"
    );
}

#[test]
fn a_loop_device_stacked_at_an_offset_makes_the_device_in_use() {
    let Some(mut s) = Scratch::new("stacked loop") else {
        return;
    };
    let dev = s.loop_dev(64, false);
    let upper = sh("losetup", &["-f", "--show", "-o", "1048576", p(&dev)]);
    s.on_drop("losetup", &["-d", &upper]);
    let upper = PathBuf::from(upper);
    mkfs_ext4(&upper);
    let mp = s.mount(&upper);
    let witness = mp.join("witness");
    fs::write(&witness, b"the upper filesystem's own data").expect("writing on the upper fs");
    sh("sync", &[]);
    let before = snapshot(&dev);
    let cfg = write_plan(
        &s.dir.path().join("state"),
        "lower",
        &dev,
        &format!("allow_destroy = \"{}\"", dev.display()),
    );
    let msg = both_refuse(s.dir.path(), &cfg, "backing store of");
    assert!(
        msg.contains(&format!("{} (offset 1048576, mounted on", upper.display())),
        "{msg}"
    );
    assert_eq!(snapshot(&dev), before, "the device changed");
    // The mounted filesystem is whole: its superblock, and a file on it read back after the
    // page cache was dropped (so from the device, not from memory).
    assert_eq!(crate::safety::blkid_value(&upper, "TYPE"), "ext4");
    fs::write("/proc/sys/vm/drop_caches", "3").expect("dropping the page cache");
    assert_eq!(
        fs::read(&witness).expect("reading the witness"),
        b"the upper filesystem's own data"
    );
}

#[test]
fn a_mknod_alias_is_the_same_target_and_allows_nothing_else() {
    let Some(mut s) = Scratch::new("mknod alias") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let ext4 = s.loop_dev(16, false);
    mkfs_ext4(&ext4);
    let before = snapshot(&ext4);
    let alias = s.dir.path().join("alias");
    let r = rdev(&dev);
    nix::sys::stat::mknod(
        &alias,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        r,
    )
    .expect("mknod");
    let state = s.dir.path().join("state");
    let two = format!(
        "{}\n[[target]]\nname = \"b\"\npath = \"{}\"\nallow_destroy = \"{}\"\nengine = \"psync\"\ndirect = false\n[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-write\"\nduration = \"10m\"\n",
        write_plan(
            &state,
            "a",
            &dev,
            &format!("allow_destroy = \"{}\"", dev.display())
        ),
        alias.display(),
        dev.display()
    );
    let msg = both_refuse(
        s.dir.path(),
        &two,
        "targets a and b are the same block device",
    );
    assert!(msg.contains(p(&alias)), "{msg}");
    // An alias of the ext4 device is refused by allow_destroy naming the allowed one, the
    // comparison being by device number, not by name.
    let alias2 = s.dir.path().join("alias2");
    nix::sys::stat::mknod(
        &alias2,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        rdev(&ext4),
    )
    .expect("mknod");
    let cfg = write_plan(
        &state,
        "c",
        &alias2,
        &format!("allow_destroy = \"{}\"", dev.display()),
    );
    both_refuse(s.dir.path(), &cfg, "does not name it");
    assert_eq!(snapshot(&ext4), before);
    assert_fs_intact(&ext4);
}

#[test]
fn hard_linked_file_targets_are_one_target() {
    let dir = crate::common::shm_dir();
    let a = dir.path().join("a.dat");
    fs::write(&a, vec![7u8; 1 << 20]).expect("write");
    let b = dir.path().join("b.dat");
    fs::hard_link(&a, &b).expect("link");
    let state = dir.path().join("state");
    let cfg = format!(
        "{}\n[[target]]\nname = \"b\"\npath = \"{}\"\nsize = \"1MiB\"\nallow_destroy = \"{}\"\nengine = \"psync\"\ndirect = false\n[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-write\"\nduration = \"10m\"\n",
        write_plan(
            &state,
            "a",
            &a,
            &format!("size = \"1MiB\"\nallow_destroy = \"{}\"", a.display())
        ),
        b.display(),
        b.display()
    );
    both_refuse(dir.path(), &cfg, "targets a and b are the same file");
    assert_eq!(fs::read(&a).expect("read"), vec![7u8; 1 << 20]);
}

#[test]
fn check_config_refuses_what_run_refuses_on_devices() {
    let Some(mut s) = Scratch::new("check-config agrees") else {
        return;
    };
    let blank = s.loop_dev(16, false);
    let ext4 = s.loop_dev(16, false);
    mkfs_ext4(&ext4);
    let before = snapshot(&ext4);
    let state = s.dir.path().join("state");
    // No allow_destroy.
    both_refuse(
        s.dir.path(),
        &write_plan(&state, "n", &blank, ""),
        "allow_destroy is not set",
    );
    // allow_destroy naming another device.
    both_refuse(
        s.dir.path(),
        &write_plan(
            &state,
            "o",
            &blank,
            &format!("allow_destroy = \"{}\"", ext4.display()),
        ),
        "does not name it",
    );
    // A device holding ext4.
    both_refuse(
        s.dir.path(),
        &write_plan(
            &state,
            "e",
            &ext4,
            &format!("allow_destroy = \"{}\"", ext4.display()),
        ),
        "it holds an ext4 filesystem",
    );
    assert_eq!(snapshot(&ext4), before);
    assert_fs_intact(&ext4);
}

#[test]
fn check_config_without_root_says_what_it_could_not_check() {
    let Some(mut s) = Scratch::new("check-config as nobody") else {
        return;
    };
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is missing");
        return;
    }
    let dev = s.loop_dev(16, false);
    let dir = s.dir.path();
    fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let plan = dir.join("plan.toml");
    let cfg = write_plan(
        &dir.join("state"),
        "n",
        &dev,
        &format!("allow_destroy = \"{}\"", dev.display()),
    );
    fs::write(&plan, cfg).expect("plan");
    fs::set_permissions(&plan, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin())
        .args(["check-config", p(&plan)])
        .stdin(Stdio::null())
        .output()
        .expect("running check-config as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("note: target n: not checked")
            && stdout.contains("run check-config as root"),
        "{stdout}"
    );
}

/// Another process running the Python `script` on `file` (as `sys.argv[1]`), returned once it
/// printed "ready" (it then holds or maps the file until killed).
fn python_holding(script: &str, file: &Path) -> std::process::Child {
    let mut child = Command::new("python3")
        .args(["-c", script, p(file)])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    {
        use std::io::BufRead;
        let out = child.stdout.as_mut().expect("stdout");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("read");
    }
    assert_eq!(line.trim(), "ready");
    child
}

#[test]
fn a_file_mapped_by_another_process_is_refused_always() {
    let dir = crate::common::shm_dir();
    let f = dir.path().join("mapped.dat");
    fs::write(&f, vec![3u8; 1 << 20]).expect("write");
    // Another process maps the file and closes its descriptor: only the mapping is left.
    let mut child = python_holding(
        "import mmap,sys,time\nf=open(sys.argv[1],'r+b')\nm=mmap.mmap(f.fileno(),0)\nf.close()\nprint('ready',flush=True)\ntime.sleep(60)",
        &f,
    );
    let cfg = write_plan(
        &dir.path().join("state"),
        "m",
        &f,
        &format!("size = \"1MiB\"\nallow_destroy = \"{}\"", f.display()),
    );
    let msg = both_refuse(dir.path(), &cfg, "mapped into the memory of");
    assert!(msg.contains(&format!("pid {}", child.id())), "{msg}");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(fs::read(&f).expect("read"), vec![3u8; 1 << 20]);
}

/// Six file targets, each `path = <dir>/tN.dat`, 1 MiB, writing (or, `write = false`,
/// reading) for `duration`.
fn six_targets(dir: &Path, state: &Path, write: bool, duration: &str) -> String {
    let mut cfg = format!(
        "[state]\ndir = \"{}\"\n[health]\nenabled = false\n[gates]\nverify_errors = false\n",
        state.display()
    );
    let read = if write { 0 } else { 100 };
    for i in 1..=6 {
        cfg.push_str(&format!(
            "[[target]]\nname = \"t{i}\"\npath = \"{}\"\nsize = \"1MiB\"\nengine = \"psync\"\n\
             direct = false\n[[target.phase]]\nkind = \"soak\"\n\
             job = {{ name = \"w\", read = {read}, bs = \"4k\", access = \"random\", iodepth = 1 }}\n\
             duration = \"{duration}\"\n",
            dir.join(format!("t{i}.dat")).display()
        ));
    }
    cfg
}

/// The daemon's start-up checks its own file targets' users with one walk over /proc once all
/// of them are claimed (issue 35). The attacker: another process holds open, or maps, one of
/// six files nvsoak made and marked earlier, while the daemon starts on all six with a write
/// plan. The start is refused naming that target, the file and the process, and no target was
/// written at all (every plan is held until the walk has passed them all).
#[test]
fn an_own_file_held_or_mapped_elsewhere_refuses_a_many_target_start_before_any_write() {
    let dir = crate::common::shm_dir();
    let d = dir.path();
    // nvsoak makes and marks the six files (a read-only soak of a moment).
    let cfg = d.join("make.toml");
    fs::write(&cfg, six_targets(d, &d.join("state-make"), false, "1s")).expect("plan");
    let addr = format!("127.0.0.1:{}", free_port());
    let (code, err) = nvsoak(&[
        "run",
        "--config",
        p(&cfg),
        "--web.listen-address",
        &addr,
        "--exit-when-done",
    ]);
    assert!(
        (1..=6).all(|i| d.join(format!("t{i}.dat")).exists()),
        "the files were not made (exit {code:?}):\n{err}"
    );
    let holds = [
        (
            "map",
            "import mmap,sys,time\nf=open(sys.argv[1],'r+b')\nm=mmap.mmap(f.fileno(),0)\nf.close()\nprint('ready',flush=True)\ntime.sleep(60)",
            "mapped into the memory of",
        ),
        (
            "hold",
            "import sys,time\nf=open(sys.argv[1],'rb')\nprint('ready',flush=True)\ntime.sleep(60)",
            "is in use",
        ),
    ];
    for (how, script, want) in holds {
        let victim = d.join("t4.dat");
        let mut child = python_holding(script, &victim);
        let before: Vec<Vec<u8>> = (1..=6)
            .map(|i| fs::read(d.join(format!("t{i}.dat"))).expect("read"))
            .collect();
        let cfg = d.join(format!("write-{how}.toml"));
        fs::write(
            &cfg,
            six_targets(d, &d.join(format!("state-{how}")), true, "3s"),
        )
        .expect("plan");
        let addr = format!("127.0.0.1:{}", free_port());
        let (code, err) = nvsoak(&[
            "run",
            "--config",
            p(&cfg),
            "--web.listen-address",
            &addr,
            "--exit-when-done",
        ]);
        let _ = child.kill();
        let _ = child.wait();
        assert_ne!(code, Some(0), "{how}: run did not refuse:\n{err}");
        let msg = error_line(&err);
        assert!(msg.contains("t4"), "{how}: {msg}");
        assert!(msg.contains(want), "{how}: {msg}");
        assert!(msg.contains(&format!("pid {}", child.id())), "{how}: {msg}");
        for (i, b) in before.iter().enumerate() {
            let now = fs::read(d.join(format!("t{}.dat", i + 1))).expect("read");
            assert!(
                now == *b,
                "{how}: t{} was written although the start was refused",
                i + 1
            );
        }
    }
}

#[test]
fn a_file_target_larger_than_its_filesystem_is_refused_by_both_and_leaves_no_file() {
    let d = crate::common::shm_dir();
    let f = d.path().join("big.dat");
    let cfg = write_plan(&d.path().join("state"), "big", &f, "size = \"100TiB\"");
    let msg = both_refuse(d.path(), &cfg, "no room for the target file");
    assert!(msg.contains("needs 100.00 TiB more"), "{msg}");
    assert!(!f.exists(), "run left a file behind");
}

/// Attach a loop device to `backing` at `offset`, detached when `s` drops.
fn loop_on(s: &mut Scratch, backing: &Path, offset: u64) -> PathBuf {
    let dev = sh(
        "losetup",
        &["-f", "--show", "-o", &offset.to_string(), p(backing)],
    );
    s.on_drop("losetup", &["-d", &dev]);
    PathBuf::from(dev)
}

/// ext4 on a fresh loop device, mounted, with a witness file written through to the device.
fn mounted_ext4(s: &mut Scratch, mib: u64) -> (PathBuf, PathBuf) {
    let lower = s.loop_dev(mib, false);
    mkfs_ext4(&lower);
    let mp = s.mount(&lower);
    let witness = mp.join("witness");
    fs::write(&witness, b"the lower filesystem's own data").expect("writing the witness");
    sh("sync", &[]);
    (lower, witness)
}

fn assert_witness(witness: &Path) {
    fs::write("/proc/sys/vm/drop_caches", "3").expect("dropping the page cache");
    assert_eq!(
        fs::read(witness).expect("reading the witness"),
        b"the lower filesystem's own data"
    );
}

/// Break 3 exactly: ext4 mounted on one loop device, a second loop device on it at an offset
/// of 1 MiB (and 8 MiB, where libblkid finds no backup superblock to save it), that one named
/// by `path` and `allow_destroy`. Both commands refuse it as mounted, naming the chain.
#[test]
fn a_loop_device_on_a_mounted_filesystem_s_device_is_refused_at_any_offset() {
    let Some(mut s) = Scratch::new("loop on a mounted device") else {
        return;
    };
    let (lower, witness) = mounted_ext4(&mut s, 64);
    for offset in [1u64 << 20, 8 << 20, 0] {
        let upper = loop_on(&mut s, &lower, offset);
        let cfg = write_plan(
            &s.dir.path().join(format!("state{offset}")),
            "upper",
            &upper,
            &format!("allow_destroy = \"{}\"", upper.display()),
        );
        let msg = both_refuse(s.dir.path(), &cfg, "is mounted on");
        let note = if offset > 0 {
            format!(" (offset {offset})")
        } else {
            String::new()
        };
        assert!(
            msg.contains(&format!(
                "beneath it: {} sits on {}{note}",
                upper.display(),
                lower.display()
            )),
            "{msg}"
        );
    }
    assert_witness(&witness);
}

/// The neighbours: three loop devices deep with the mount at the bottom; and an image file
/// that a mounted loop device uses, attached a second time at an offset.
#[test]
fn every_device_down_the_stack_is_checked() {
    let Some(mut s) = Scratch::new("deep stacks") else {
        return;
    };
    let (lower, witness) = mounted_ext4(&mut s, 64);
    let middle = loop_on(&mut s, &lower, 4 << 20);
    let top = loop_on(&mut s, &middle, 1 << 20);
    let cfg = write_plan(
        &s.dir.path().join("state-deep"),
        "top",
        &top,
        &format!("allow_destroy = \"{}\"", top.display()),
    );
    let msg = both_refuse(s.dir.path(), &cfg, "is mounted on");
    assert!(
        msg.contains(&format!(
            "{} sits on {} (offset 1048576) sits on {} (offset 4194304)",
            top.display(),
            middle.display(),
            lower.display()
        )),
        "{msg}"
    );
    let backing = PathBuf::from(sh("losetup", &["-n", "-O", "BACK-FILE", p(&lower)]));
    let again = loop_on(&mut s, &backing, 8 << 20);
    let cfg = write_plan(
        &s.dir.path().join("state-image"),
        "again",
        &again,
        &format!("allow_destroy = \"{}\"", again.display()),
    );
    let msg = both_refuse(s.dir.path(), &cfg, "backing file of");
    assert!(
        msg.contains(&format!("{} (mounted on", lower.display()))
            && msg.contains(&format!(
                "beneath it: {} sits on the file {}",
                again.display(),
                backing.display()
            )),
        "{msg}"
    );
    assert_witness(&witness);
}

/// Not mounted, so nothing is "in use": a loop device at an offset on a device holding ext4
/// still destroys that filesystem, and the target's own probe, which starts at the offset,
/// cannot see it. The signature check runs beneath too, and `force_overwrite_signatures` is
/// what lets it through, as for the target itself.
#[test]
fn a_signature_beneath_a_loop_device_at_an_offset_is_refused_like_the_target_s_own() {
    let Some(mut s) = Scratch::new("signature beneath") else {
        return;
    };
    let lower = s.loop_dev(64, false);
    mkfs_ext4(&lower);
    let before = snapshot(&lower);
    let upper = loop_on(&mut s, &lower, 16 << 20);
    let cfg = write_plan(
        &s.dir.path().join("state"),
        "upper",
        &upper,
        &format!("allow_destroy = \"{}\"", upper.display()),
    );
    let msg = both_refuse(s.dir.path(), &cfg, "holds an ext4 filesystem");
    assert!(
        msg.contains(&format!("refusing to write {}: it holds", lower.display()))
            && msg.contains(&format!(
                "beneath it: {} sits on {} (offset 16777216)",
                upper.display(),
                lower.display()
            )),
        "{msg}"
    );
    assert_eq!(snapshot(&lower), before, "the device beneath changed");
    assert_fs_intact(&lower);
    let forced = write_plan(
        &s.dir.path().join("state-forced"),
        "upper",
        &upper,
        &format!(
            "allow_destroy = \"{}\"\nforce_overwrite_signatures = true",
            upper.display()
        ),
    );
    let plan = s.dir.path().join("forced.toml");
    fs::write(&plan, forced).expect("plan");
    let (code, err) = nvsoak(&["check-config", p(&plan)]);
    assert_eq!(
        code,
        Some(0),
        "force_overwrite_signatures did not let it through:\n{err}"
    );
}
