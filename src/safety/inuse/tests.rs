//! The in-use checks over fixture sysfs and procfs trees: what they conclude from each layout a
//! host can show, and that whatever could not be read refuses, naming it.

use std::fs;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};

use super::stack::check_beneath;
use super::*;

/// A fixture tree: `sys/` and `proc/` under a temporary directory.
struct Fx {
    dir: tempfile::TempDir,
    root: SysRoot,
}

const ROOT_STATUS: &str = "Name:\tnvsoak\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n";

impl Fx {
    fn new() -> Fx {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = SysRoot::under(dir.path());
        let fx = Fx { dir, root };
        fx.write("proc/self/mountinfo", "");
        fx.write("proc/self/status", ROOT_STATUS);
        fx.write("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
        fs::create_dir_all(fx.path("sys/block")).expect("mkdir");
        fs::create_dir_all(fx.path("sys/dev/block")).expect("mkdir");
        fx
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    /// A block device `name` with number `major:minor` and an empty `holders/`.
    fn block(&self, name: &str, major: u32, minor: u32) -> Dev {
        self.write(
            &format!("sys/block/{name}/dev"),
            &format!("{major}:{minor}\n"),
        );
        fs::create_dir_all(self.path(&format!("sys/block/{name}/holders"))).expect("mkdir");
        symlink(
            format!("../../block/{name}"),
            self.path(&format!("sys/dev/block/{major}:{minor}")),
        )
        .expect("symlink");
        Dev {
            name: name.into(),
            path: PathBuf::from("/dev").join(name),
            major,
            minor,
        }
    }

    /// Bind loop device `name` to `backing` at `offset`.
    fn bind_loop(&self, name: &str, backing: &Path, offset: u64) {
        self.write(
            &format!("sys/block/{name}/loop/backing_file"),
            &format!("{}\n", backing.display()),
        );
        self.write(
            &format!("sys/block/{name}/loop/offset"),
            &format!("{offset}\n"),
        );
    }

    fn mount(&self, major: u32, minor: u32, at: &str) {
        let line = format!("40 1 {major}:{minor} / {at} rw - ext4 /dev/fixture rw\n");
        let p = self.path("proc/self/mountinfo");
        let mut t = fs::read_to_string(&p).expect("read");
        t.push_str(&line);
        fs::write(p, t).expect("write");
    }

    /// Everything check (c) reads from sysfs and procfs, on `dev` and beneath it.
    fn check(&self, dev: &Dev) -> Result<(), SafetyError> {
        let target = dev.path.clone();
        let scan = Scan::new(&self.root).map_err(unverifiable(&target))?;
        let nodes = nodes_of(&self.root, dev).map_err(unverifiable(&target))?;
        check_block_users(&scan, &target, &nodes, None)?;
        check_beneath(&scan, &target, dev)
    }
}

fn refusal(r: Result<(), SafetyError>) -> SafetyError {
    match r {
        Err(e) => e,
        Ok(()) => panic!("the check found nothing"),
    }
}

#[test]
fn a_plain_device_with_everything_readable_is_not_in_use() {
    let fx = Fx::new();
    let sda = fx.block("sda", 8, 0);
    fx.check(&sda).expect("nothing uses it");
}

#[test]
fn an_unreadable_holders_directory_refuses_and_names_it() {
    let fx = Fx::new();
    let sda = fx.block("sda", 8, 0);
    fs::remove_dir(fx.path("sys/block/sda/holders")).expect("rmdir");
    fx.write("sys/block/sda/holders", "not a directory");
    let e = refusal(fx.check(&sda));
    assert!(matches!(e, SafetyError::Unverifiable { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("sys/block/sda/holders could not be read"),
        "{e}"
    );
}

#[test]
fn an_unreadable_swap_list_refuses_but_a_kernel_without_swap_does_not() {
    let fx = Fx::new();
    let sda = fx.block("sda", 8, 0);
    fs::remove_file(fx.path("proc/swaps")).expect("rm");
    fx.check(&sda)
        .expect("no /proc/swaps: a kernel built without swap");
    fs::create_dir(fx.path("proc/swaps")).expect("mkdir");
    let e = refusal(fx.check(&sda));
    assert!(
        e.to_string().contains("proc/swaps could not be read"),
        "{e}"
    );
}

#[test]
fn a_loop_device_whose_backing_store_cannot_be_found_refuses() {
    let fx = Fx::new();
    let sda = fx.block("sda", 8, 0);
    fx.block("loop3", 7, 3);
    fx.bind_loop("loop3", Path::new("/nonexistent/nvsoak-fixture.img"), 0);
    let e = refusal(fx.check(&sda));
    assert!(
        e.to_string()
            .contains("what backs /dev/loop3 (/nonexistent/nvsoak-fixture.img) could not be found"),
        "{e}"
    );
    // An unreadable backing_file attribute is no better than a missing backing file.
    fs::remove_file(fx.path("sys/block/loop3/loop/backing_file")).expect("rm");
    fs::create_dir(fx.path("sys/block/loop3/loop/backing_file")).expect("mkdir");
    let e = refusal(fx.check(&sda));
    assert!(
        e.to_string()
            .contains("loop3/loop/backing_file could not be read"),
        "{e}"
    );
    // An unbound loop device has no backing_file: it backs nothing.
    fs::remove_dir(fx.path("sys/block/loop3/loop/backing_file")).expect("rmdir");
    fx.check(&sda).expect("an unbound loop device");
}

#[test]
fn a_loop_target_on_a_file_that_a_mounted_loop_device_also_uses_is_refused() {
    let fx = Fx::new();
    let img = fx.path("shared.img");
    fs::write(&img, b"image").expect("image");
    let loop7 = fx.block("loop7", 7, 7);
    fx.bind_loop("loop7", &img, 1 << 20);
    fx.check(&loop7).expect("alone on its file");
    fx.block("loop3", 7, 3);
    fx.bind_loop("loop3", &img, 0);
    fx.mount(7, 3, "/srv/data");
    let e = refusal(fx.check(&loop7));
    let text = e.to_string();
    assert_eq!(e.check(), "stacked", "{text}");
    assert!(text.contains("/dev/loop3 (mounted on /srv/data)"), "{text}");
    assert!(
        text.contains(&format!(
            "beneath it: /dev/loop7 sits on the file {} (offset 1048576)",
            img.display()
        )),
        "{text}"
    );
}

#[test]
fn a_dm_target_whose_slave_is_mounted_is_refused_and_its_own_holder_entry_is_not() {
    let fx = Fx::new();
    let dm = fx.block("dm-0", 253, 0);
    let sdb = fx.block("sdb", 8, 16);
    fs::create_dir_all(fx.path("sys/block/dm-0/slaves/sdb")).expect("mkdir");
    fx.write("sys/block/dm-0/slaves/sdb/dev", "8:16\n");
    fs::create_dir_all(fx.path("sys/block/sdb/holders/dm-0")).expect("mkdir");
    // The dm device itself is the only holder of its slave: that is the target, not a user.
    fx.check(&dm).expect("the slave is held only by the target");
    // Another holder of the slave is someone else's.
    fs::create_dir_all(fx.path("sys/block/sdb/holders/md127")).expect("mkdir");
    let e = refusal(fx.check(&dm));
    assert_eq!(e.check(), "holders", "{e}");
    assert!(e.to_string().contains("held by md127"), "{e}");
    fs::remove_dir(fx.path("sys/block/sdb/holders/md127")).expect("rmdir");
    // A mounted partition of the slave.
    fx.write("sys/block/sdb/sdb1/partition", "1\n");
    fx.write("sys/block/sdb/sdb1/dev", "8:17\n");
    fs::create_dir_all(fx.path("sys/block/sdb/sdb1/holders")).expect("mkdir");
    fx.mount(8, 17, "/home");
    let e = refusal(fx.check(&dm));
    assert_eq!(e.check(), "mounted", "{e}");
    assert!(
        e.to_string()
            .contains("/dev/sdb1 is mounted on /home; unmount it first; beneath it: /dev/dm-0 sits on /dev/sdb"),
        "{e}"
    );
    drop(sdb);
}

#[test]
fn a_chain_of_slaves_is_walked_to_the_bottom_and_a_loop_is_not_walked_forever() {
    let fx = Fx::new();
    let top = fx.block("dm-1", 253, 1);
    fx.block("dm-0", 253, 0);
    fx.block("sdc", 8, 32);
    fs::create_dir_all(fx.path("sys/block/dm-1/slaves/dm-0")).expect("mkdir");
    fx.write("sys/block/dm-1/slaves/dm-0/dev", "253:0\n");
    fs::create_dir_all(fx.path("sys/block/dm-0/slaves/sdc")).expect("mkdir");
    fx.write("sys/block/dm-0/slaves/sdc/dev", "8:32\n");
    fx.mount(8, 32, "/var");
    let e = refusal(fx.check(&top));
    assert!(
        e.to_string()
            .contains("beneath it: /dev/dm-1 sits on /dev/dm-0 sits on /dev/sdc"),
        "{e}"
    );
    // A cycle (which sysfs never shows, but a fixture or a bug could) ends in a refusal.
    let fx = Fx::new();
    let a = fx.block("dm-2", 253, 2);
    fx.block("dm-3", 253, 3);
    fs::create_dir_all(fx.path("sys/block/dm-2/slaves/dm-3")).expect("mkdir");
    fx.write("sys/block/dm-2/slaves/dm-3/dev", "253:3\n");
    fs::create_dir_all(fx.path("sys/block/dm-3/slaves/dm-2")).expect("mkdir");
    fx.write("sys/block/dm-3/slaves/dm-2/dev", "253:2\n");
    let e = refusal(fx.check(&a));
    assert!(e.to_string().contains("deeper than"), "{e}");
}

/// A fixture process `pid` whose `fd` directory cannot be read, with capabilities `caps`.
fn hidden_process(fx: &Fx, pid: u32, caps: &str) {
    fx.write(&format!("proc/{pid}/fd"), "not a directory");
    fx.write(&format!("proc/{pid}/maps"), "");
    fx.write(&format!("proc/{pid}/comm"), "hidden\n");
    fx.write(&format!("proc/{pid}/status"), &format!("CapPrm:\t{caps}\n"));
}

#[test]
fn a_process_whose_open_files_cannot_be_read_refuses_unless_it_is_above_us() {
    let fx = Fx::new();
    let f = fx.path("target.dat");
    fs::write(&f, b"data").expect("file");
    let st = fs::metadata(&f).expect("stat");
    assert_eq!(
        file_openers(&fx.root, &st, Reach::Every).expect("nobody"),
        Vec::<String>::new()
    );
    let pid = std::process::id().wrapping_add(100_000);
    hidden_process(&fx, pid, "0000000000000000");
    let e = file_openers(&fx.root, &st, Reach::Every)
        .expect_err("an ordinary process it could not look at");
    assert!(
        e.to_string()
            .contains(&format!("of pid {pid} (hidden) could not be looked at")),
        "{e}"
    );
    // A supervisor holding capabilities nvsoak lacks, while nvsoak may ptrace: skipped.
    hidden_process(&fx, pid, "000001ffffffffff");
    assert_eq!(
        file_openers(&fx.root, &st, Reach::Every).expect("above us"),
        Vec::<String>::new()
    );
    // The same supervisor when nvsoak lacks CAP_SYS_PTRACE: it could be anyone's.
    fx.write(
        "proc/self/status",
        "CapPrm:\t0000000000200000\nCapEff:\t0000000000200000\n",
    );
    assert!(file_openers(&fx.root, &st, Reach::Every).is_err());
}

/// nvsoak without root, on a file it made: root's processes cannot be looked at, and are
/// passed over; a process of nvsoak's own user that cannot be looked at still refuses, and a
/// file that may be someone else's still refuses for either.
#[test]
fn on_its_own_file_an_unprivileged_nvsoak_passes_over_other_users_processes_only() {
    let fx = Fx::new();
    let nobody =
        "Uid:\t65534\t65534\t65534\t65534\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";
    fx.write("proc/self/status", nobody);
    let f = fx.path("soak.dat");
    fs::write(&f, b"data").expect("file");
    let st = fs::metadata(&f).expect("stat");
    let pid = std::process::id().wrapping_add(100_002);
    hidden_process(&fx, pid, "000001ffffffffff");
    fx.write(
        &format!("proc/{pid}/status"),
        "Uid:\t0\t0\t0\t0\nCapPrm:\t000001ffffffffff\n",
    );
    // Its memory maps cannot be read either.
    fs::remove_file(fx.path(&format!("proc/{pid}/maps"))).expect("rm");
    fs::create_dir_all(fx.path(&format!("proc/{pid}/maps"))).expect("mkdir");
    assert_eq!(
        file_openers(&fx.root, &st, Reach::OwnFile).expect("root's process passed over"),
        Vec::<String>::new()
    );
    let key = (st.dev(), st.ino());
    let scan = Scan::new(&fx.root).expect("scan");
    assert!(check_file_users(&scan, &f, key, None, Reach::OwnFile).is_ok());
    let e = file_openers(&fx.root, &st, Reach::Every).expect_err("may be someone else's file");
    assert!(matches!(e, Unseen::Process { .. }), "{e:?}");
    assert!(check_file_users(&scan, &f, key, None, Reach::Every).is_err());
    // Its own user's process, hidden (not dumpable): refuses even on its own file.
    fx.write(&format!("proc/{pid}/status"), nobody);
    assert!(file_openers(&fx.root, &st, Reach::OwnFile).is_err());
    // A status without ids says nothing about whose it is: refuses.
    fx.write(&format!("proc/{pid}/status"), "CapPrm:\t0\n");
    assert!(file_openers(&fx.root, &st, Reach::OwnFile).is_err());
    // hidepid hides other users' processes: passed over on its own file only.
    fx.write(
        "proc/self/mountinfo",
        "22 1 0:21 / /proc rw - proc proc rw,hidepid=invisible\n",
    );
    fs::remove_dir_all(fx.path(&format!("proc/{pid}"))).expect("rm");
    assert!(file_openers(&fx.root, &st, Reach::OwnFile).is_ok());
    assert!(matches!(
        file_openers(&fx.root, &st, Reach::Every),
        Err(Unseen::ProcHidden { .. })
    ));
}

#[test]
fn an_opener_is_found_through_its_fd_links_and_a_closed_descriptor_is_nothing() {
    let fx = Fx::new();
    let f = fx.path("target.dat");
    fs::write(&f, b"data").expect("file");
    let st = fs::metadata(&f).expect("stat");
    let pid = std::process::id().wrapping_add(100_001);
    fs::create_dir_all(fx.path(&format!("proc/{pid}/fd"))).expect("mkdir");
    fx.write(&format!("proc/{pid}/comm"), "db\n");
    fx.write(&format!("proc/{pid}/status"), "CapPrm:\t0\n");
    symlink("/nonexistent/closed", fx.path(&format!("proc/{pid}/fd/3"))).expect("link");
    assert!(
        file_openers(&fx.root, &st, Reach::Every)
            .expect("looked")
            .is_empty()
    );
    symlink(&f, fx.path(&format!("proc/{pid}/fd/4"))).expect("link");
    assert_eq!(
        file_openers(&fx.root, &st, Reach::Every).expect("looked"),
        vec![format!("pid {pid} (db)")]
    );
    // And a mapping, by hex device numbers and inode.
    let maps = format!(
        "7f00-7f01 r--s 00000000 {:02x}:{:02x} {} {}\n",
        libc::major(st.dev()),
        libc::minor(st.dev()),
        st.ino(),
        f.display()
    );
    fx.write(&format!("proc/{pid}/maps"), &maps);
    let e = check_file_users(
        &Scan::new(&fx.root).expect("scan"),
        &f,
        (st.dev(), st.ino()),
        None,
        Reach::Every,
    )
    .expect_err("mapped");
    assert_eq!(e.check(), "busy", "{e}");
}

#[test]
fn hidden_proc_without_ptrace_refuses() {
    let fx = Fx::new();
    fx.write(
        "proc/self/mountinfo",
        "22 1 0:21 / /proc rw - proc proc rw,hidepid=invisible\n",
    );
    fx.write(
        "proc/self/status",
        "CapPrm:\t0000000000200000\nCapEff:\t0000000000200000\n",
    );
    let f = fx.path("t.dat");
    fs::write(&f, b"x").expect("file");
    let e =
        file_openers(&fx.root, &fs::metadata(&f).expect("stat"), Reach::Every).expect_err("hidden");
    assert!(matches!(e, Unseen::ProcHidden { .. }), "{e:?}");
}

#[test]
fn a_partition_of_a_loop_device_walks_from_its_disk_and_the_disk_is_its_own() {
    let fx = Fx::new();
    let img = fx.path("disk.img");
    fs::write(&img, b"disk").expect("image");
    fx.block("loop0", 7, 0);
    fx.bind_loop("loop0", &img, 0);
    fx.write("sys/block/loop0/loop0p1/partition", "1\n");
    fx.write("sys/block/loop0/loop0p1/dev", "259:0\n");
    fs::create_dir_all(fx.path("sys/block/loop0/loop0p1/holders")).expect("mkdir");
    symlink("../../block/loop0/loop0p1", fx.path("sys/dev/block/259:0")).expect("symlink");
    let part = Dev {
        name: "loop0p1".into(),
        path: "/dev/loop0p1".into(),
        major: 259,
        minor: 0,
    };
    // The disk's loop device on the image is the partition's own stack, not another user.
    fx.check(&part).expect("its own disk's loop device");
    fx.block("loop5", 7, 5);
    fx.bind_loop("loop5", &img, 4096);
    let e = refusal(fx.check(&part));
    assert!(e.to_string().contains("/dev/loop5 (offset 4096)"), "{e}");
    assert!(
        e.to_string()
            .contains("beneath it: /dev/loop0p1 sits on the file"),
        "{e}"
    );
}
