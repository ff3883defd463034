//! The libblkid signature probe (superblocks and partition tables), read-only.
//!
//! libblkid is bound at run time: `libblkid.so.1` (util-linux, Debian package `libblkid1`) is
//! loaded with `dlopen` on first use and the handful of functions the probe needs are resolved
//! with `dlsym`, so building nvsoak needs no pkg-config, headers, bindgen or clang. When the
//! library cannot be loaded, probing fails with a reason naming it, so block-device writes are
//! refused (check (b) cannot run) while everything else works.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::OnceLock;

use super::{Signature, SignatureKind};

/// The run-time name of the library, as util-linux ships it.
pub(super) const LIBBLKID: &str = "libblkid.so.1";

type Probe = *mut c_void;

// blkid.h: BLKID_SUBLKS_LABEL (1 << 1), UUID (1 << 3), TYPE (1 << 5), USAGE (1 << 7).
const SUBLKS_FLAGS: c_int = (1 << 1) | (1 << 3) | (1 << 5) | (1 << 7);

/// The resolved entry points (signatures from blkid.h; `blkid_loff_t` is `int64_t`).
type FnNew = unsafe extern "C" fn() -> Probe;
type FnFree = unsafe extern "C" fn(Probe);
type FnSetDevice = unsafe extern "C" fn(Probe, c_int, i64, i64) -> c_int;
type FnProbeInt = unsafe extern "C" fn(Probe, c_int) -> c_int;
type FnProbe = unsafe extern "C" fn(Probe) -> c_int;
type FnHasValue = unsafe extern "C" fn(Probe, *const c_char) -> c_int;
type FnLookup = unsafe extern "C" fn(Probe, *const c_char, *mut *const c_char, *mut usize) -> c_int;

struct Lib {
    new_probe: FnNew,
    free_probe: FnFree,
    set_device: FnSetDevice,
    enable_superblocks: FnProbeInt,
    set_superblocks_flags: FnProbeInt,
    enable_partitions: FnProbeInt,
    do_safeprobe: FnProbe,
    do_fullprobe: FnProbe,
    has_value: FnHasValue,
    lookup_value: FnLookup,
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on
    // this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_string()
    } else {
        // SAFETY: non-NULL, NUL-terminated (see above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load() -> Result<Lib, String> {
    let name = CString::new(LIBBLKID).map_err(|e| e.to_string())?;
    // SAFETY: dlopen with a valid NUL-terminated name; the handle is never closed, so the
    // resolved function pointers stay valid for the life of the process.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!(
            "cannot load {LIBBLKID} ({}); install util-linux's libblkid (Debian/Ubuntu package libblkid1, Fedora libblkid)",
            dl_error()
        ));
    }
    let sym = |n: &str| -> Result<*mut c_void, String> {
        let c = CString::new(n).map_err(|e| e.to_string())?;
        // SAFETY: valid handle from dlopen above and a NUL-terminated symbol name.
        let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
        if p.is_null() {
            Err(format!("{LIBBLKID} has no symbol {n}: {}", dl_error()))
        } else {
            Ok(p)
        }
    };
    macro_rules! f {
        ($name:literal, $t:ty) => {
            std::mem::transmute::<*mut c_void, $t>(sym($name)?)
        };
    }
    // SAFETY: each symbol is a libblkid function whose C prototype (blkid.h, stable ABI of
    // libblkid.so.1) matches the fn-pointer type it is transmuted to; pointers to functions
    // and data have the same size on Linux.
    unsafe {
        Ok(Lib {
            new_probe: f!("blkid_new_probe", FnNew),
            free_probe: f!("blkid_free_probe", FnFree),
            set_device: f!("blkid_probe_set_device", FnSetDevice),
            enable_superblocks: f!("blkid_probe_enable_superblocks", FnProbeInt),
            set_superblocks_flags: f!("blkid_probe_set_superblocks_flags", FnProbeInt),
            enable_partitions: f!("blkid_probe_enable_partitions", FnProbeInt),
            do_safeprobe: f!("blkid_do_safeprobe", FnProbe),
            do_fullprobe: f!("blkid_do_fullprobe", FnProbe),
            has_value: f!("blkid_probe_has_value", FnHasValue),
            lookup_value: f!("blkid_probe_lookup_value", FnLookup),
        })
    }
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// An owned libblkid probe on a borrowed descriptor (libblkid does not close it).
struct ProbeHandle<'fd> {
    lib: &'static Lib,
    p: Probe,
    _fd: BorrowedFd<'fd>,
}

impl Drop for ProbeHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: p came from blkid_new_probe and is freed once, here.
        unsafe { (self.lib.free_probe)(self.p) }
    }
}

impl<'fd> ProbeHandle<'fd> {
    fn new(fd: BorrowedFd<'fd>) -> Result<Self, String> {
        let lib = lib()?;
        // SAFETY: plain constructor; NULL is checked.
        let p = unsafe { (lib.new_probe)() };
        if p.is_null() {
            return Err("blkid_new_probe failed".into());
        }
        let h = ProbeHandle { lib, p, _fd: fd };
        // SAFETY: h.p is a live probe; fd stays open for h's lifetime ('fd); offset 0 and
        // size 0 mean the whole device.
        let rc = unsafe { (lib.set_device)(h.p, fd.as_raw_fd(), 0, 0) };
        if rc != 0 {
            return Err("blkid_probe_set_device failed".into());
        }
        // SAFETY: live probe, integer arguments.
        unsafe {
            if (lib.enable_superblocks)(h.p, 1) != 0 {
                return Err("enabling superblocks failed".into());
            }
            if (lib.set_superblocks_flags)(h.p, SUBLKS_FLAGS) != 0 {
                return Err("setting superblock flags failed".into());
            }
            if (lib.enable_partitions)(h.p, 1) != 0 {
                return Err("enabling partitions failed".into());
            }
        }
        Ok(h)
    }

    fn value(&self, name: &str) -> Option<String> {
        let c = CString::new(name).ok()?;
        // SAFETY: live probe and NUL-terminated name.
        if unsafe { (self.lib.has_value)(self.p, c.as_ptr()) } == 0 {
            return None;
        }
        let mut data: *const c_char = std::ptr::null();
        let mut len: usize = 0;
        // SAFETY: live probe; data/len are valid out-pointers. On success data points at a
        // NUL-terminated string owned by the probe, copied before the probe is used again.
        let rc = unsafe { (self.lib.lookup_value)(self.p, c.as_ptr(), &mut data, &mut len) };
        if rc != 0 || data.is_null() {
            return None;
        }
        // SAFETY: see above.
        let v = unsafe { CStr::from_ptr(data) }
            .to_string_lossy()
            .into_owned();
        Some(v).filter(|v| !v.is_empty())
    }
}

pub(super) struct Found {
    pub signatures: Vec<Signature>,
    /// libblkid saw several conflicting superblocks (`blkid_do_safeprobe` returned -2).
    pub ambiguous: bool,
}

fn kind_of(type_name: &str, usage: Option<&str>) -> SignatureKind {
    match type_name {
        "swap" | "swsuspend" => SignatureKind::Swap,
        "LVM2_member" | "LVM1_member" => SignatureKind::Lvm,
        "crypto_LUKS" | "BitLocker" => SignatureKind::Crypto,
        _ => match usage {
            Some("filesystem") => SignatureKind::Filesystem,
            Some("raid") => SignatureKind::Raid,
            Some("crypto") => SignatureKind::Crypto,
            _ => SignatureKind::Other,
        },
    }
}

fn collect(p: &ProbeHandle<'_>) -> Vec<Signature> {
    let mut out = Vec::new();
    if let Some(t) = p.value("TYPE") {
        let usage = p.value("USAGE");
        out.push(Signature {
            kind: kind_of(&t, usage.as_deref()),
            type_name: t,
            uuid: p.value("UUID").or_else(|| p.value("UUID_SUB")),
            label: p.value("LABEL"),
        });
    }
    if let Some(t) = p.value("PTTYPE") {
        out.push(Signature {
            kind: SignatureKind::PartitionTable,
            type_name: t,
            uuid: p.value("PTUUID"),
            label: None,
        });
    }
    out
}

/// Probe superblocks and partition tables on an open descriptor. An ambiguous result is
/// reported as such, with what a full (non-collision-checking) probe finds.
pub(super) fn signatures_fd(fd: BorrowedFd<'_>) -> Result<Found, String> {
    let p = ProbeHandle::new(fd)?;
    // SAFETY: live probe.
    match unsafe { (p.lib.do_safeprobe)(p.p) } {
        0 => Ok(Found {
            signatures: collect(&p),
            ambiguous: false,
        }),
        1 => Ok(Found {
            signatures: Vec::new(),
            ambiguous: false,
        }),
        -2 => {
            drop(p);
            let p = ProbeHandle::new(fd)?;
            // SAFETY: live probe.
            let signatures = if unsafe { (p.lib.do_fullprobe)(p.p) } == 0 {
                collect(&p)
            } else {
                Vec::new()
            };
            Ok(Found {
                signatures,
                ambiguous: true,
            })
        }
        rc => Err(format!("probe failed (blkid_do_safeprobe returned {rc})")),
    }
}

/// Probe a path: opened read-only for the probe, then [`signatures_fd`].
pub(super) fn signatures(path: &Path) -> Result<Found, String> {
    // Fail on a missing library before touching the path, so the reason names it.
    lib()?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .open(path)
        .map_err(|e| format!("opening: {e}"))?;
    use std::os::fd::AsFd;
    signatures_fd(f.as_fd())
}
