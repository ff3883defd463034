//! The VM harness: prerequisites, the initramfs, booting QEMU with emulated NVMe controllers,
//! and reading results back from the guest's serial console.
//!
//! Guest → host: the generated `/init` prints marker lines on the console,
//! `@@NVSOAK:<key>:<base64 chunk>` (repeated) then `@@NVSOAKEND:<key>:<exit status>`, and
//! [`Vm::wait_result`] reassembles them. Host → guest: [`Vm::send_line`] types a line on the
//! serial console, which the guest script reads with `read -r`.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// Install command printed when a Debian package is missing.
pub const APT_INSTALL: &str =
    "apt-get install -y qemu-system-x86 busybox-static cpio nvme-cli smartmontools";

/// Kernel modules the guest loads (with their dependencies, resolved from each module's
/// `.modinfo`), in addition to what the cloud kernel has built in (NVMe, ext4, devtmpfs).
pub const GUEST_MODULES: &[&str] = &["virtio_net", "virtio_pci", "null_blk"];

/// The SATA stack (`load_ata` in the guest, for [`VmSpec::ata`]): libata and ata_piix serve the
/// `pc` machine's IDE controller (the cloud kernel has no AHCI driver), sd_mod the disk.
pub const ATA_MODULES: &[&str] = &["ata_piix", "sd_mod"];

/// The guest kernels the harness boots: Debian bookworm's 6.1 and the 6.12 line from
/// bookworm-backports, both cloud flavour, fetched by `scripts/fetch-vm-kernel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GuestKernel {
    /// `.vm-cache/kernel` (or `NVSOAK_VM_KERNEL_DIR`): linux-image-6.1.*-cloud-amd64.
    #[default]
    V6_1,
    /// `.vm-cache/kernel-6.12` (or `NVSOAK_VM_KERNEL_612_DIR`): linux-image-6.12.*-cloud-amd64.
    V6_12,
}

impl GuestKernel {
    pub const ALL: [GuestKernel; 2] = [GuestKernel::V6_1, GuestKernel::V6_12];

    fn index(self) -> usize {
        match self {
            GuestKernel::V6_1 => 0,
            GuestKernel::V6_12 => 1,
        }
    }

    /// `6.1` or `6.12`, as in test names and messages.
    pub fn line(self) -> &'static str {
        match self {
            GuestKernel::V6_1 => "6.1",
            GuestKernel::V6_12 => "6.12",
        }
    }

    fn dir(self) -> PathBuf {
        let (var, sub) = match self {
            GuestKernel::V6_1 => ("NVSOAK_VM_KERNEL_DIR", ".vm-cache/kernel"),
            GuestKernel::V6_12 => ("NVSOAK_VM_KERNEL_612_DIR", ".vm-cache/kernel-6.12"),
        };
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join(sub))
    }
}

/// One unpacked guest kernel.
#[derive(Debug)]
pub struct KernelFiles {
    pub kernel: PathBuf,
    /// `.vm-cache/kernel*/lib/modules/<version>`
    pub modules: PathBuf,
    /// `6.1.0-57-cloud-amd64`, from the file name.
    pub version: String,
}

/// Everything the harness needs from the host, located once per test process.
#[derive(Debug)]
pub struct Prereqs {
    pub qemu: PathBuf,
    pub busybox: PathBuf,
    pub nvme: PathBuf,
    pub cpio: PathBuf,
    /// Indexed by [`GuestKernel`]; each is an error (with the fix) when that kernel is missing.
    kernels: [Result<KernelFiles, String>; 2],
    pub nvsoak: PathBuf,
}

impl Prereqs {
    /// The files of `k`, or the reason they are missing with the command that fetches them.
    pub fn kernel(&self, k: GuestKernel) -> Result<&KernelFiles, String> {
        self.kernels[k.index()].as_ref().map_err(Clone::clone)
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn find_kernel(k: GuestKernel) -> Result<KernelFiles, String> {
    let base = k.dir();
    let hint = "run: scripts/fetch-vm-kernel (after apt-get update on a fresh machine)";
    let mut kernels: Vec<PathBuf> = std::fs::read_dir(base.join("boot"))
        .map_err(|e| {
            format!(
                "no {} VM kernel under {}: {e}; {hint}",
                k.line(),
                base.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .collect();
    kernels.sort();
    let kernel = kernels
        .pop()
        .ok_or_else(|| format!("no vmlinuz-* under {}/boot; {hint}", base.display()))?;
    let version = kernel
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .unwrap_or_default()
        .to_string();
    if !version.starts_with(&format!("{}.", k.line())) {
        return Err(format!(
            "{} holds kernel {version}, not a {} one; {hint}",
            base.display(),
            k.line()
        ));
    }
    let modules = base.join("lib/modules").join(&version);
    if !modules.is_dir() {
        return Err(format!(
            "no {} for the VM kernel; {hint}",
            modules.display()
        ));
    }
    Ok(KernelFiles {
        kernel,
        modules,
        version,
    })
}

fn locate() -> Result<Prereqs, String> {
    let mut missing = Vec::new();
    let mut tool = |name: &str| {
        which(name).unwrap_or_else(|| {
            missing.push(name.to_string());
            PathBuf::new()
        })
    };
    let qemu = tool("qemu-system-x86_64");
    let busybox = tool("busybox");
    let nvme = tool("nvme");
    let cpio = tool("cpio");
    if !missing.is_empty() {
        return Err(format!(
            "missing {} on the host; install with: {APT_INSTALL}",
            missing.join(", ")
        ));
    }
    // 6.1 is the suite's kernel: without it no scenario runs. A missing 6.12 fails only the
    // scenarios that boot it (see `Prereqs::kernel`).
    let k61 = find_kernel(GuestKernel::V6_1)?;
    Ok(Prereqs {
        qemu,
        busybox,
        nvme,
        cpio,
        kernels: [Ok(k61), find_kernel(GuestKernel::V6_12)],
        nvsoak: PathBuf::from(env!("CARGO_BIN_EXE_nvsoak")),
    })
}

/// The prerequisites, or `None` (with the reason printed) when they are missing and
/// `NVSOAK_VM_REQUIRED` is not set. With `NVSOAK_VM_REQUIRED=1` (as `scripts/test` sets it),
/// a missing prerequisite fails the test with the install command.
pub fn prereqs() -> Option<&'static Prereqs> {
    static P: OnceLock<Result<Prereqs, String>> = OnceLock::new();
    match P.get_or_init(locate) {
        Ok(p) => Some(p),
        Err(why) => {
            let required =
                std::env::var("NVSOAK_VM_REQUIRED").is_ok_and(|v| v != "0" && !v.is_empty());
            if required {
                panic!("VM tests are required (NVSOAK_VM_REQUIRED is set) but {why}");
            }
            // Written to the stderr handle, not with eprintln!, so libtest's capture does not
            // hide it behind the passing test; once per process.
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "skipping the VM tests: {why} (set NVSOAK_VM_REQUIRED=1 to make this a failure)"
                );
            });
            None
        }
    }
}

/// Gets the prerequisites or returns from the test (after printing why).
#[macro_export]
macro_rules! require_vm {
    () => {
        $crate::require_vm!(())
    };
    ($ret:expr) => {
        match $crate::harness::prereqs() {
            Some(p) => p,
            None => return $ret,
        }
    };
}

/// An extra host tool a scenario needs (`None` = skip, printed), failing with `install` as the
/// fix when `NVSOAK_VM_REQUIRED` is set.
pub fn which_tool(name: &str, install: &str) -> Option<PathBuf> {
    if let Some(p) = which(name) {
        return Some(p);
    }
    let required = std::env::var("NVSOAK_VM_REQUIRED").is_ok_and(|v| v != "0" && !v.is_empty());
    if required {
        panic!(
            "VM tests are required (NVSOAK_VM_REQUIRED is set) but {name} is missing; install with: {install}"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "skipping a VM test: {name} is missing; install with: {install}"
    );
    None
}

// ---------------------------------------------------------------------------------------------
// Initramfs

fn run_ok(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out.stdout)
}

/// Shared libraries (and the dynamic loader) `ldd` lists for `bin`; empty for static binaries.
pub fn ldd(bin: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new("ldd")
        .arg(bin)
        .output()
        .map_err(|e| format!("running ldd {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("not a dynamic executable") {
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("=> not found") {
            return Err(format!("ldd {}: {line}", bin.display()));
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

/// Copies `src` (following symlinks) to `root/dest`, creating parents, keeping the mode.
fn install(root: &Path, src: &Path, dest: &Path) -> Result<(), String> {
    let to = root.join(dest.strip_prefix("/").unwrap_or(dest));
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    }
    std::fs::copy(src, &to)
        .map_err(|e| format!("copy {} -> {}: {e}", src.display(), to.display()))?;
    Ok(())
}

/// Installs an executable at `dest` plus every library `ldd` lists, at the same paths.
pub fn install_binary(root: &Path, src: &Path, dest: &Path) -> Result<(), String> {
    install(root, src, dest)?;
    for lib in ldd(src)? {
        install(root, &lib, &lib)?;
    }
    Ok(())
}

/// Libraries nvsoak loads at run time with dlopen, which `ldd` does not list: libblkid (the
/// write-safety signature probe). Installed at the host's path, with what they link.
fn install_runtime_libs(root: &Path) -> Result<(), String> {
    const LIBBLKID: [&str; 4] = [
        "/lib/x86_64-linux-gnu/libblkid.so.1",
        "/usr/lib/x86_64-linux-gnu/libblkid.so.1",
        "/usr/lib64/libblkid.so.1",
        "/lib64/libblkid.so.1",
    ];
    let lib = LIBBLKID
        .iter()
        .map(Path::new)
        .find(|p| p.exists())
        .ok_or("libblkid.so.1 not found on the host (install libblkid1)")?;
    install(root, lib, lib)?;
    for dep in ldd(lib)? {
        install(root, &dep, &dep)?;
    }
    Ok(())
}

/// The `depends=` list from a kernel module's `.modinfo` section (NUL-separated `key=value`).
pub fn module_depends(ko: &[u8]) -> Vec<String> {
    ko.split(|&b| b == 0)
        .filter_map(|s| s.strip_prefix(b"depends="))
        .flat_map(|s| {
            String::from_utf8_lossy(s)
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Finds `<name>.ko` (or `<name>.ko.xz`, as 6.12's package ships them) under the kernel's
/// module tree (`-` and `_` are the same in names).
fn find_module(modules: &Path, name: &str) -> Option<PathBuf> {
    let want = format!("{}.ko", name.replace('-', "_"));
    let want_xz = format!("{want}.xz");
    let mut stack = vec![modules.join("kernel")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .map(|n| n.replace('-', "_"))
                .is_some_and(|n| n == want || n == want_xz)
            {
                return Some(p);
            }
        }
    }
    None
}

/// Whether `name` is built into the kernel (listed in `modules.builtin`): nothing to load.
fn builtin_module(modules: &Path, name: &str) -> bool {
    let want = format!("/{}.ko", name.replace('-', "_"));
    std::fs::read_to_string(modules.join("modules.builtin"))
        .is_ok_and(|list| list.lines().any(|l| l.replace('-', "_").ends_with(&want)))
}

/// A module's ELF bytes, decompressed when the package ships it as `.ko.xz` (busybox's insmod
/// loads plain ELF only).
fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    if path.extension().is_some_and(|e| e == "xz") {
        run_ok(Command::new("xz").arg("-dc").arg(path))
            .map_err(|e| format!("decompressing {}: {e} (install xz-utils)", path.display()))
    } else {
        std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))
    }
}

/// Resolves `wanted` and their dependencies into load order (dependencies first), with each
/// module's ELF bytes. Modules built into the kernel are left out.
pub fn module_load_order(
    modules: &Path,
    wanted: &[&str],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    fn visit(
        modules: &Path,
        name: &str,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<(), String> {
        let name = name.replace('-', "_");
        if !seen.insert(name.clone()) {
            return Ok(());
        }
        let Some(path) = find_module(modules, &name) else {
            if builtin_module(modules, &name) {
                return Ok(());
            }
            return Err(format!(
                "kernel module {name} not found under {}",
                modules.display()
            ));
        };
        let bytes = read_module(&path)?;
        for dep in module_depends(&bytes) {
            visit(modules, &dep, seen, order)?;
        }
        order.push((name, bytes));
        Ok(())
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for w in wanted {
        visit(modules, w, &mut seen, &mut order)?;
    }
    Ok(order)
}

/// Writes `data` to `root/dest`, creating parents.
fn install_bytes(root: &Path, data: &[u8], dest: &Path) -> Result<(), String> {
    let to = root.join(dest.strip_prefix("/").unwrap_or(dest));
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    }
    std::fs::write(&to, data).map_err(|e| format!("write {}: {e}", to.display()))
}

fn mtime_key(p: &Path) -> String {
    let meta = std::fs::metadata(p).ok();
    let secs = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{secs:x}-{:x}", meta.map_or(0, |m| m.len()))
}

/// Packs `dir` as an uncompressed newc cpio archive (`find . | cpio -o -H newc`). The
/// kernel unpacks concatenated archives in order, so the base and a scenario's overlay are
/// simply appended. Uncompressed, because decompressing under TCG costs more than copying.
pub fn pack_cpio(cpio: &Path, dir: &Path, out: &Path) -> Result<(), String> {
    let script = format!(
        "cd '{}' && find . | '{}' -o -H newc --quiet -R 0:0 > '{}'",
        dir.display(),
        cpio.display(),
        out.display()
    );
    run_ok(Command::new("sh").arg("-c").arg(script)).map(|_| ())
}

/// The base archive shared by every scenario: busybox with all applets linked, nvsoak, nvme-cli,
/// their libraries, and [`GUEST_MODULES`] of kernel `k`. Cached under the target dir per
/// binary mtime, one per kernel.
pub fn base_initramfs(k: GuestKernel) -> Result<PathBuf, String> {
    static BASE: [OnceLock<Result<PathBuf, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    BASE[k.index()]
        .get_or_init(|| {
            let p = prereqs().ok_or("VM prerequisites missing")?;
            let kf = p.kernel(k)?;
            let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vm");
            std::fs::create_dir_all(&cache)
                .map_err(|e| format!("mkdir {}: {e}", cache.display()))?;
            let key = format!(
                // v2: the archive holds nvsoak's dlopen'd libraries (libblkid) too.
                // v3: the SATA modules and smartctl (when the host has it).
                // v4: one per guest kernel (the kernel line in the name).
                "base-v4-{}-{}-{}-{}.cpio",
                k.line(),
                mtime_key(&p.nvsoak),
                mtime_key(&p.nvme),
                mtime_key(&kf.kernel)
            );
            let out = cache.join(key);
            if out.is_file() {
                return Ok(out);
            }
            // Archives for older binaries are stale: remove them.
            for e in std::fs::read_dir(&cache).into_iter().flatten().flatten() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                let mine = format!("base-v4-{}-", k.line());
                let other_kernel = n.starts_with("base-v4-") && !n.starts_with(&mine);
                if n.starts_with("base-") && n.ends_with(".cpio") && !other_kernel {
                    let _ = std::fs::remove_file(e.path());
                }
            }
            let stage = tempfile::tempdir_in(&cache).map_err(|e| format!("tempdir: {e}"))?;
            let root = stage.path();
            for d in [
                "proc", "sys", "dev", "tmp", "run", "etc", "var", "mnt", "root", "bin", "sbin",
            ] {
                std::fs::create_dir_all(root.join(d)).map_err(|e| format!("mkdir {d}: {e}"))?;
            }
            install_binary(root, &p.busybox, Path::new("/bin/busybox"))?;
            let list = run_ok(Command::new(&p.busybox).arg("--list"))?;
            for applet in String::from_utf8_lossy(&list).lines() {
                let applet = applet.trim();
                if applet.is_empty() || applet == "busybox" || applet.contains('/') {
                    continue;
                }
                std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))
                    .map_err(|e| format!("symlink {applet}: {e}"))?;
            }
            install_binary(root, &p.nvsoak, Path::new("/bin/nvsoak"))?;
            install_runtime_libs(root)?;
            install_binary(root, &p.nvme, Path::new("/usr/sbin/nvme"))?;
            let mut load = String::new();
            for (name, ko) in module_load_order(&kf.modules, GUEST_MODULES)? {
                install_bytes(
                    root,
                    &ko,
                    &Path::new("/lib/modules").join(format!("{name}.ko")),
                )?;
                load.push_str(&name);
                load.push('\n');
            }
            std::fs::write(root.join("lib/modules/order"), load)
                .map_err(|e| format!("write order: {e}"))?;
            let mut load = String::new();
            for (name, ko) in module_load_order(&kf.modules, ATA_MODULES)? {
                let dest = Path::new("/lib/modules").join(format!("{name}.ko"));
                if !root.join(dest.strip_prefix("/").unwrap_or(&dest)).exists() {
                    install_bytes(root, &ko, &dest)?;
                }
                load.push_str(&name);
                load.push('\n');
            }
            std::fs::write(root.join("lib/modules/order.ata"), load)
                .map_err(|e| format!("write order.ata: {e}"))?;
            // smartctl, the SATA scenario's peer (it checks that it is there).
            if let Some(smartctl) = which("smartctl") {
                install_binary(root, &smartctl, Path::new("/usr/sbin/smartctl"))?;
            }
            let tmp = cache.join(format!("base-{}.{}.tmp", k.line(), std::process::id()));
            pack_cpio(&p.cpio, root, &tmp)?;
            std::fs::rename(&tmp, &out).map_err(|e| format!("rename {}: {e}", out.display()))?;
            Ok(out)
        })
        .clone()
}

// ---------------------------------------------------------------------------------------------
// The guest script

/// Shell prelude of every generated `/init`: mounts, console log level, helpers.
const INIT_PRELUDE: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmp /tmp
mount -t tmpfs shm /dev/shm
dmesg -n 1
echo "@@NVSOAK-BOOTED"
echo "@@NVSOAK-KERNEL $(cat /proc/sys/kernel/osrelease)"
# emit KEY FILE [STATUS]: the file's bytes as marker lines, then the end marker with STATUS
emit() {
  base64 "$2" | while read -r l; do echo "@@NVSOAK:$1:$l"; done
  echo "@@NVSOAKEND:$1:${3:-0}"
}
# start_daemon CONFIG: nvsoak run in the background, output in /tmp/daemon.log. The log is
# emptied before the fork: the background job's own redirection may run after the caller's
# next command, and a wait on the log would then read an earlier daemon's lines.
start_daemon() {
  : >/tmp/daemon.log
  nvsoak run --config "$1" >>/tmp/daemon.log 2>&1 &
  echo $! > /tmp/daemon.pid
  echo "@@NVSOAK-DAEMON-STARTED"
}
# stop_daemon KEY: SIGTERM, wait up to 20 s (then SIGKILL), emit the log as KEY with the
# exit status, and the seconds it took to exit as KEY.secs
stop_daemon() {
  pid=$(cat /tmp/daemon.pid)
  t0=$(date +%s)
  kill -TERM $pid
  i=0
  while kill -0 $pid 2>/dev/null && [ -d /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; do
    i=$((i+1))
    if [ $i -gt 200 ]; then echo "@@NVSOAK-DAEMON-HUNG"; kill -KILL $pid; fi
    sleep 0.1
  done
  wait $pid
  rc=$?
  echo $(( $(date +%s) - t0 )) > /tmp/daemon.secs
  emit $1.secs /tmp/daemon.secs
  emit $1 /tmp/daemon.log $rc
}
# run KEY CMD...: runs CMD, emits its stdout as KEY and its stderr as KEY.err, and the status
run() {
  k=$1; shift
  "$@" >/tmp/out.$k 2>/tmp/err.$k
  rc=$?
  base64 /tmp/out.$k | while read -r l; do echo "@@NVSOAK:$k:$l"; done
  base64 /tmp/err.$k | while read -r l; do echo "@@NVSOAK:$k.err:$l"; done
  echo "@@NVSOAKEND:$k.err:0"
  echo "@@NVSOAKEND:$k:$rc"
}
# wait_host WORD: blocks until the host sends WORD on the console (Vm::send_line)
wait_host() {
  while read -r line; do [ "$line" = "$1" ] && return 0; done
  return 1
}
# wait_for PATH SECONDS: polls until PATH exists
wait_for() {
  i=0
  while [ ! -e "$1" ]; do
    i=$((i+1)); [ $i -gt $(($2*10)) ] && return 1
    sleep 0.1
  done
}
load_modules() {
  while read -r m; do insmod /lib/modules/$m.ko || echo "insmod $m failed"; done < /lib/modules/order
}
load_ata() {
  while read -r m; do insmod /lib/modules/$m.ko || echo "insmod $m failed"; done < /lib/modules/order.ata
}
net_up() {
  ip link set lo up
  wait_for /sys/class/net/eth0 10 || echo "@@NVSOAK-NO-ETH0"
  ip link set eth0 up
  ip addr add 10.0.2.15/24 dev eth0
  ip route add default via 10.0.2.2
}
"#;

/// One emulated NVMe controller with its backing image.
#[derive(Clone, Debug)]
pub struct Drive {
    /// QEMU device id, also the QOM path `/machine/peripheral/<id>`.
    pub id: String,
    pub serial: String,
    /// Size of a fresh sparse image; ignored when `image` is set.
    pub size: u64,
    /// An existing image to use (the harness does not delete it).
    pub image: Option<PathBuf>,
    /// Contents of a blkdebug config; the drive is then `blkdebug` over the image.
    pub blkdebug: Option<String>,
    /// Extra properties appended to this controller's `-device nvme,...` (for example
    /// `bus=dn1` or `subsys=ss0`), each starting with a comma.
    pub props: String,
}

impl Drive {
    pub fn new(id: &str, serial: &str) -> Drive {
        Drive {
            id: id.to_string(),
            serial: serial.to_string(),
            size: 256 << 20,
            image: None,
            blkdebug: None,
            props: String::new(),
        }
    }
}

/// One emulated ATA disk on the `pc` machine's first IDE bus (served by libata's ata_piix in
/// the guest, so it is `/dev/sda`), with the identity QEMU reports in IDENTIFY DEVICE.
#[derive(Clone, Debug)]
pub struct AtaDrive {
    pub serial: String,
    pub model: String,
    /// `0x5000c500a1b2c3d4`
    pub wwn: String,
    pub size: u64,
}

/// What to boot.
#[derive(Clone, Debug)]
pub struct VmSpec {
    /// Used in temp-dir names and messages.
    pub name: String,
    pub drives: Vec<Drive>,
    /// Load virtio_net and forward a host port on 127.0.0.1 to guest port 9757.
    pub net: bool,
    /// The scenario's part of `/init`, after the prelude (and `load_modules`/`net_up`).
    pub script: String,
    /// Extra files for the guest, path → contents (e.g. `/etc/nvsoak.toml`).
    pub files: BTreeMap<String, Vec<u8>>,
    pub memory_mb: u32,
    /// An ATA disk as well (the guest script loads its drivers with `load_ata`).
    pub ata: Option<AtaDrive>,
    /// Extra kernel command-line parameters (e.g. `nvme.poll_queues=1`).
    pub append: String,
    /// The QEMU machine type (`-M`), for example `q35` for PCIe root ports and switches;
    /// QEMU's default when `None` (an ATA disk forces `pc`).
    pub machine: Option<String>,
    /// Extra QEMU arguments, placed before the drives (for example the `-device` lines of
    /// root ports, a PCIe switch or an `nvme-subsys`).
    pub extra_args: Vec<String>,
    /// The guest kernel to boot (6.1 unless a scenario asks for 6.12).
    pub kernel: GuestKernel,
}

impl VmSpec {
    pub fn new(name: &str, script: &str) -> VmSpec {
        VmSpec {
            name: name.to_string(),
            drives: vec![Drive::new("nvme0", "SOAK0001")],
            net: false,
            script: script.to_string(),
            files: BTreeMap::new(),
            memory_mb: 1024,
            ata: None,
            append: String::new(),
            machine: None,
            extra_args: Vec::new(),
            kernel: GuestKernel::V6_1,
        }
    }
}

/// The guest port nvsoak serves /metrics on inside the VM.
pub const GUEST_METRICS_PORT: u16 = 9757;

// ---------------------------------------------------------------------------------------------
// Console

#[derive(Default)]
struct Console {
    buf: Mutex<(Vec<u8>, bool)>,
    cond: Condvar,
}

impl Console {
    fn push(&self, data: &[u8]) {
        let mut g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        g.0.extend_from_slice(data);
        self.cond.notify_all();
    }
    fn close(&self) {
        let mut g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = true;
        self.cond.notify_all();
    }
    fn text(&self) -> String {
        let g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&g.0).replace('\r', "")
    }
    /// Waits until `pred(text)` returns Some, the stream closes, or the deadline passes.
    fn wait<T>(
        &self,
        deadline: Instant,
        mut pred: impl FnMut(&str) -> Option<T>,
    ) -> Result<T, String> {
        let mut g = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            // Only complete lines: a marker's tail may still be in flight.
            let complete = g.0.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let text = String::from_utf8_lossy(&g.0[..complete]).replace('\r', "");
            if let Some(v) = pred(&text) {
                return Ok(v);
            }
            if g.1 {
                return Err("the VM exited".into());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err("timed out".into());
            }
            g = self
                .cond
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Decodes standard base64 (with or without padding); `None` on a bad character.
pub fn b64decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b' ' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The decoded payload of `key` and its end status, once the end marker is on the console.
pub fn parse_marker(console: &str, key: &str) -> Option<Result<(Vec<u8>, i32), String>> {
    let data = format!("@@NVSOAK:{key}:");
    let end = format!("@@NVSOAKEND:{key}:");
    let mut b64 = String::new();
    for line in console.lines() {
        // A marker may follow stray output on the same line (a kernel message without newline).
        if let Some(i) = line.find(&data) {
            b64.push_str(line[i + data.len()..].trim());
        } else if let Some(i) = line.find(&end) {
            let rc = line[i + end.len()..].trim().parse::<i32>().unwrap_or(-1);
            return Some(
                b64decode(&b64)
                    .map(|d| (d, rc))
                    .ok_or_else(|| format!("marker {key}: bad base64 on the console")),
            );
        }
    }
    None
}

/// A command's result as the guest's `run KEY CMD...` reported it.
#[derive(Debug, Clone)]
pub struct CmdResult {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub status: i32,
}

impl CmdResult {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// The VM

/// At most this many VMs run at once (TCG keeps a core busy per VM); `NVSOAK_VM_JOBS` overrides.
fn slots() -> &'static (Mutex<usize>, Condvar) {
    static S: OnceLock<(Mutex<usize>, Condvar)> = OnceLock::new();
    S.get_or_init(|| {
        let n = std::env::var("NVSOAK_VM_JOBS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2usize)
            .max(1);
        (Mutex::new(n), Condvar::new())
    })
}

struct Slot;
impl Slot {
    fn take() -> Slot {
        let (m, c) = slots();
        let mut free = m.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = c.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Slot
    }
}
impl Drop for Slot {
    fn drop(&mut self) {
        let (m, c) = slots();
        *m.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        c.notify_one();
    }
}

/// A running VM. Dropping it kills QEMU and removes its scratch directory.
pub struct Vm {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    console: Arc<Console>,
    pub dir: tempfile::TempDir,
    pub qmp_path: PathBuf,
    /// Host port forwarded to the guest's metrics port, when `net` was set.
    pub port: Option<u16>,
    /// Backing images, by drive id.
    pub images: BTreeMap<String, PathBuf>,
    pub started: Instant,
    /// The release the guest must report (`Vm::finish` checks it).
    pub kernel_version: String,
    _slot: Slot,
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn scratch_dir(name: &str) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(&format!("nvsoak-vm-{name}-"))
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .map_err(|e| format!("scratch dir: {e}"))
}

impl Vm {
    /// Builds the scenario's initramfs and starts QEMU. Panics (with the reason) on failure.
    pub fn boot(spec: &VmSpec) -> Vm {
        // The forwarded port is picked free but another process may take it before QEMU binds
        // it; QEMU then exits at start-up, and a fresh port is tried.
        for attempt in 1..=3 {
            match Vm::try_boot(spec) {
                Ok(mut vm) => {
                    if !spec.net || vm.started_ok(Duration::from_secs(30)) {
                        return vm;
                    }
                    let log = vm.console();
                    if !log.contains("hostfwd") && !log.contains("host forwarding") || attempt == 3
                    {
                        vm.fail("QEMU exited at start-up");
                    }
                }
                Err(e) => panic!("booting VM {}: {e}", spec.name),
            }
        }
        unreachable!("the last attempt returns or fails")
    }

    /// Waits until the firmware prints (every backend, the forwarded port included, is set
    /// up by then); false if QEMU exited first.
    fn started_ok(&mut self, timeout: Duration) -> bool {
        let r = self.console.wait(Instant::now() + timeout, |c| {
            (c.contains("SeaBIOS") || c.contains("@@NVSOAK")).then_some(())
        });
        r.is_ok() || !matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn try_boot(spec: &VmSpec) -> Result<Vm, String> {
        let p = prereqs().ok_or("VM prerequisites missing")?;
        let kf = p.kernel(spec.kernel)?;
        let base = base_initramfs(spec.kernel)?;
        let slot = Slot::take();
        let dir = scratch_dir(&spec.name)?;

        // The scenario overlay: /init and extra files.
        let overlay = dir.path().join("overlay");
        std::fs::create_dir_all(&overlay).map_err(|e| format!("mkdir overlay: {e}"))?;
        let mut init = String::from(INIT_PRELUDE);
        if spec.net {
            init.push_str("load_modules\nnet_up\n");
        }
        init.push_str(&spec.script);
        init.push_str("\necho \"@@NVSOAK-DONE\"\nsync\npoweroff -f\n");
        let init_path = overlay.join("init");
        std::fs::write(&init_path, init).map_err(|e| format!("write init: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&init_path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod init: {e}"))?;
        for (path, data) in &spec.files {
            let to = overlay.join(path.trim_start_matches('/'));
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
            }
            std::fs::write(&to, data).map_err(|e| format!("write {}: {e}", to.display()))?;
        }
        let overlay_cpio = dir.path().join("overlay.cpio");
        pack_cpio(&p.cpio, &overlay, &overlay_cpio)?;
        let initrd = dir.path().join("initrd.cpio");
        {
            let mut out =
                std::fs::File::create(&initrd).map_err(|e| format!("create initrd: {e}"))?;
            for part in [&base, &overlay_cpio] {
                let mut f = std::fs::File::open(part)
                    .map_err(|e| format!("open {}: {e}", part.display()))?;
                std::io::copy(&mut f, &mut out).map_err(|e| format!("write initrd: {e}"))?;
            }
        }

        let qmp_path = dir.path().join("qmp.sock");
        let mut args: Vec<String> = vec![
            "-m".into(),
            spec.memory_mb.to_string(),
            "-nographic".into(),
            "-no-reboot".into(),
            "-kernel".into(),
            kf.kernel.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            format!("console=ttyS0 quiet panic=-1 {}", spec.append)
                .trim_end()
                .to_string(),
            "-qmp".into(),
            format!("unix:{},server,nowait", qmp_path.display()),
        ];
        if let Some(m) = &spec.machine
            && spec.ata.is_none()
        {
            args.push("-M".into());
            args.push(m.clone());
        }
        // QEMU 7.2's TCG intermittently corrupts 6.12 guests that use CMPXCHG16B (SLUB's
        // per-CPU fast path, `cmpxchg16b %gs:(%rsi)`): double faults and garbage EFLAGS in
        // exception frames at boot, 6 boots in 16 with two VMs running, 0 in 46 without the
        // instruction. Without `cx16` SLUB takes its locked path. 6.1 does not hit it.
        if spec.kernel == GuestKernel::V6_12 && !spec.extra_args.iter().any(|a| a == "-cpu") {
            args.push("-cpu".into());
            args.push("qemu64,-cx16".into());
        }
        args.extend(spec.extra_args.iter().cloned());
        let mut images = BTreeMap::new();
        for d in &spec.drives {
            let img = match &d.image {
                Some(i) => i.clone(),
                None => {
                    let i = dir.path().join(format!("{}.img", d.id));
                    let f = std::fs::File::create(&i)
                        .map_err(|e| format!("create {}: {e}", i.display()))?;
                    f.set_len(d.size)
                        .map_err(|e| format!("truncate {}: {e}", i.display()))?;
                    i
                }
            };
            let node = match &d.blkdebug {
                None => {
                    args.push("-blockdev".into());
                    args.push(format!(
                        "driver=file,filename={},node-name=f-{}",
                        img.display(),
                        d.id
                    ));
                    format!("f-{}", d.id)
                }
                Some(conf) => {
                    let conf_path = dir.path().join(format!("{}.blkdebug.conf", d.id));
                    std::fs::write(&conf_path, conf)
                        .map_err(|e| format!("write blkdebug conf: {e}"))?;
                    args.push("-blockdev".into());
                    args.push(format!(
                        "driver=file,filename={},node-name=f-{}",
                        img.display(),
                        d.id
                    ));
                    args.push("-blockdev".into());
                    args.push(format!(
                        "driver=blkdebug,config={},image=f-{},node-name=dbg-{}",
                        conf_path.display(),
                        d.id,
                        d.id
                    ));
                    format!("dbg-{}", d.id)
                }
            };
            args.push("-device".into());
            args.push(format!(
                "nvme,id={},serial={},drive={node}{}",
                d.id, d.serial, d.props
            ));
            images.insert(d.id.clone(), img);
        }
        if let Some(a) = &spec.ata {
            // The i440FX `pc` machine has the IDE controller ata_piix drives.
            args.push("-M".into());
            args.push("pc".into());
            let img = dir.path().join("ata.img");
            std::fs::File::create(&img)
                .and_then(|f| f.set_len(a.size))
                .map_err(|e| format!("create {}: {e}", img.display()))?;
            args.push("-drive".into());
            args.push(format!("file={},if=none,id=ds,format=raw", img.display()));
            args.push("-device".into());
            args.push(format!(
                "ide-hd,bus=ide.0,drive=ds,serial={},model={},wwn={}",
                a.serial, a.model, a.wwn
            ));
            images.insert("ata".to_string(), img);
        }
        let port = if spec.net {
            let port = free_port()?;
            args.push("-netdev".into());
            args.push(format!(
                "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{port}-:{GUEST_METRICS_PORT}"
            ));
            args.push("-device".into());
            args.push("virtio-net-pci,netdev=n0".into());
            Some(port)
        } else {
            None
        };

        let mut child = Command::new(&p.qemu)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", p.qemu.display()))?;
        let console = Arc::new(Console::default());
        let mut readers = Vec::new();
        if let Some(mut out) = child.stdout.take() {
            let c = console.clone();
            readers.push(std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = out.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    c.push(&buf[..n]);
                }
                c.close();
            }));
        }
        if let Some(mut err) = child.stderr.take() {
            let c = console.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                if !s.is_empty() {
                    c.push(format!("\n[qemu stderr] {s}\n").as_bytes());
                }
            });
        }
        let stdin = child.stdin.take();
        Ok(Vm {
            name: spec.name.clone(),
            child,
            stdin,
            console,
            dir,
            qmp_path,
            port,
            images,
            started: Instant::now(),
            kernel_version: kf.version.clone(),
            _slot: slot,
        })
    }

    /// The console log so far (with `\r` removed).
    pub fn console(&self) -> String {
        self.console.text()
    }

    /// Panics with `msg` and the guest's console log.
    #[track_caller]
    pub fn fail(&self, msg: &str) -> ! {
        panic!(
            "VM {}: {msg}\n----- guest console ({:.1} s) -----\n{}\n----- end of console -----",
            self.name,
            self.started.elapsed().as_secs_f64(),
            self.console()
        )
    }

    /// Waits for the literal `text` on the console.
    #[track_caller]
    pub fn wait_text(&self, text: &str, timeout: Duration) {
        let r = self
            .console
            .wait(Instant::now() + timeout, |c| c.contains(text).then_some(()));
        if let Err(e) = r {
            self.fail(&format!(
                "waiting {timeout:?} for {text:?} on the console: {e}"
            ));
        }
    }

    /// Waits for the guest's `run KEY ...` (or `emit KEY ...`) result.
    #[track_caller]
    pub fn wait_result(&self, key: &str, timeout: Duration) -> CmdResult {
        let r = self.console.wait(Instant::now() + timeout, |c| {
            let main = parse_marker(c, key)?;
            let err = parse_marker(c, &format!("{key}.err")).unwrap_or(Ok((Vec::new(), 0)));
            Some((main, err))
        });
        match r {
            Ok((Ok((stdout, status)), Ok((stderr, _)))) => CmdResult {
                stdout,
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
                status,
            },
            Ok((Err(e), _)) | Ok((_, Err(e))) => self.fail(&e),
            Err(e) => self.fail(&format!("waiting {timeout:?} for result {key:?}: {e}")),
        }
    }

    /// Like [`Vm::wait_result`], and fails unless the command exited 0.
    #[track_caller]
    pub fn wait_ok(&self, key: &str, timeout: Duration) -> CmdResult {
        let r = self.wait_result(key, timeout);
        if r.status != 0 {
            self.fail(&format!(
                "guest command {key:?} exited {}; stderr: {}",
                r.status, r.stderr
            ));
        }
        r
    }

    /// Types `line` on the guest's serial console (read by the script's `wait_host`).
    #[track_caller]
    pub fn send_line(&mut self, line: &str) {
        let ok = self.stdin.as_mut().map(|s| {
            s.write_all(format!("{line}\n").as_bytes())
                .and_then(|_| s.flush())
        });
        if !matches!(ok, Some(Ok(()))) {
            self.fail(&format!("sending {line:?} to the guest console: {ok:?}"));
        }
    }

    /// Waits for QEMU to exit (the script ends with `poweroff -f`); kills it on timeout.
    #[track_caller]
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    // Let the reader drain the last console bytes.
                    let _ = self
                        .console
                        .wait(Instant::now() + Duration::from_secs(2), |_| None::<()>);
                    return st;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.fail(&format!(
                        "the VM did not power off within {timeout:?}; killed it"
                    ));
                }
                Err(e) => self.fail(&format!("waiting for qemu: {e}")),
            }
        }
    }

    /// Waits for the script to finish (`@@NVSOAK-DONE`) and QEMU to exit.
    #[track_caller]
    pub fn finish(&mut self, timeout: Duration) {
        self.wait_text("@@NVSOAK-DONE", timeout);
        // Every scenario ran on the kernel it asked for.
        let want = format!("@@NVSOAK-KERNEL {}\n", self.kernel_version);
        if !self.console().contains(&want) {
            self.fail(&format!(
                "the guest did not report kernel {}",
                self.kernel_version
            ));
        }
        self.wait_exit(Duration::from_secs(30));
    }

    /// A QMP connection (capabilities negotiated).
    #[track_caller]
    pub fn qmp(&self) -> crate::qmp::Qmp {
        match crate::qmp::Qmp::connect(&self.qmp_path, Duration::from_secs(10)) {
            Ok(q) => q,
            Err(e) => self.fail(&format!("QMP: {e}")),
        }
    }

    /// GET `path` from the guest through the forwarded port: `Ok((status, body))`.
    pub fn http_get(&self, path: &str) -> Result<(u16, String), String> {
        let port = self.port.ok_or("the VM was booted without networking")?;
        crate::prom::http_get(port, path, Duration::from_secs(10))
    }

    /// Polls `/metrics` until `pred` accepts the parsed samples or the timeout passes.
    #[track_caller]
    pub fn wait_metrics<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut pred: impl FnMut(&crate::prom::Metrics) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        let mut last: String;
        loop {
            match self.http_get("/metrics") {
                Ok((200, body)) => {
                    let m = crate::prom::Metrics::parse(&body);
                    if let Some(v) = pred(&m) {
                        return v;
                    }
                    last = body;
                }
                Ok((code, body)) => last = format!("HTTP {code}: {body}"),
                Err(e) => last = e,
            }
            if Instant::now() >= deadline {
                self.fail(&format!(
                    "waiting {timeout:?} for {what} in /metrics; last scrape:\n{last}"
                ));
            }
            if self.console.buf.lock().map(|g| g.1).unwrap_or(true) {
                self.fail(&format!(
                    "the VM exited while waiting for {what}; last scrape:\n{last}"
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Writes `bytes` as a shell here-document that recreates them with `base64 -d`.
pub fn shell_file(path: &str, bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    let mut out = format!("base64 -d > {path} <<'EOF'\n");
    for line in s.as_bytes().chunks(76) {
        let _ = writeln!(out, "{}", String::from_utf8_lossy(line));
    }
    out.push_str("EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip_and_markers() {
        let data: Vec<u8> = (0..=255u8).chain(0..7).collect();
        let script = shell_file("/x", &data);
        let b64: String = script.lines().skip(1).take_while(|l| *l != "EOF").collect();
        assert_eq!(b64decode(&b64).as_deref(), Some(&data[..]));
        let console = format!(
            "noise\n@@NVSOAK:k:{}\n[  1.0] kernel says hi @@NVSOAK:k:{}\n@@NVSOAKEND:k:3\n",
            &b64[..8],
            &b64[8..]
        );
        let (got, rc) = parse_marker(&console, "k")
            .expect("complete")
            .expect("valid");
        assert_eq!(got, data);
        assert_eq!(rc, 3);
        assert!(parse_marker("@@NVSOAK:k:AAAA\n", "k").is_none());
        assert!(parse_marker("@@NVSOAK:kk:AAAA\n@@NVSOAKEND:kk:0\n", "k").is_none());
    }

    #[test]
    fn modinfo_depends() {
        let ko = b"\x7fELF....\0license=GPL\0depends=virtio,virtio_ring\0vermagic=6.1\0";
        assert_eq!(module_depends(ko), ["virtio", "virtio_ring"]);
        assert!(module_depends(b"\0depends=\0").is_empty());
    }
}
