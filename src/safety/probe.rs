//! The libblkid signature probe (superblocks and partition tables), read-only.
//!
//! libblkid is bound at run time: `libblkid.so.1` (util-linux, Debian package `libblkid1`) is
//! loaded with `dlopen` (through `libloading`) on first use and the handful of functions the
//! probe needs are resolved by name, so building nvsoak needs no pkg-config, headers, bindgen or
//! clang. When the library cannot be loaded, probing fails with an error naming it and the
//! package to install, so block-device writes are refused (check (b) cannot run) while
//! everything else works.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;
use std::sync::OnceLock;

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
use thiserror::Error;

use super::{Signature, SignatureKind};

/// The run-time name of the library, as util-linux ships it.
pub(super) const LIBBLKID: &str = "libblkid.so.1";

/// Why a probe could not run (never "nothing found": the caller refuses the write).
#[derive(Debug, Clone, Error)]
pub(super) enum ProbeError {
    #[error(
        "cannot load {lib} ({reason}); install util-linux's libblkid (Debian/Ubuntu package libblkid1, Fedora libblkid)"
    )]
    Load { lib: String, reason: String },
    #[error("{lib} has no symbol {symbol}: {reason}")]
    Symbol {
        lib: String,
        symbol: &'static str,
        reason: String,
    },
    #[error("{0} failed")]
    Call(&'static str),
    #[error("probe failed (blkid_do_safeprobe returned {0})")]
    Failed(c_int),
    #[error("opening: {0}")]
    Open(String),
}

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
    /// Held (in a static, never dropped) so the function pointers above stay valid.
    _lib: Library,
}

/// An error and its causes, one after the other (libloading puts dlerror's text in the cause).
fn reason(e: &libloading::Error) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// The function `symbol` of the library `lib_name`, as a `T`.
///
/// # Safety
/// `T` must be the fn-pointer type of that function's C prototype, and the pointer must not be
/// called after `lib` is dropped.
unsafe fn sym<T: Copy>(
    lib: &Library,
    lib_name: &str,
    symbol: &'static str,
) -> Result<T, ProbeError> {
    // SAFETY: the caller's contract.
    let s = unsafe { lib.get::<T>(symbol) }.map_err(|e| ProbeError::Symbol {
        lib: lib_name.to_string(),
        symbol,
        reason: reason(&e),
    })?;
    Ok(*s)
}

/// Load the library `name` and resolve the probe's functions.
fn load(name: &str) -> Result<Lib, ProbeError> {
    // SAFETY: loading runs libblkid's (and libc's) initialisers, which only set up their own
    // state; RTLD_LOCAL keeps its symbols out of the global namespace.
    let lib = unsafe { Library::open(Some(name), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
        ProbeError::Load {
            lib: name.to_string(),
            reason: reason(&e),
        }
    })?;
    // SAFETY: each symbol is a libblkid function whose C prototype (blkid.h, the stable ABI of
    // libblkid.so.1) matches the fn-pointer type of the field it is stored in; the pointers are
    // used only while `_lib` keeps the library loaded.
    unsafe {
        Ok(Lib {
            new_probe: sym(&lib, name, "blkid_new_probe")?,
            free_probe: sym(&lib, name, "blkid_free_probe")?,
            set_device: sym(&lib, name, "blkid_probe_set_device")?,
            enable_superblocks: sym(&lib, name, "blkid_probe_enable_superblocks")?,
            set_superblocks_flags: sym(&lib, name, "blkid_probe_set_superblocks_flags")?,
            enable_partitions: sym(&lib, name, "blkid_probe_enable_partitions")?,
            do_safeprobe: sym(&lib, name, "blkid_do_safeprobe")?,
            do_fullprobe: sym(&lib, name, "blkid_do_fullprobe")?,
            has_value: sym(&lib, name, "blkid_probe_has_value")?,
            lookup_value: sym(&lib, name, "blkid_probe_lookup_value")?,
            _lib: lib,
        })
    }
}

fn lib() -> Result<&'static Lib, ProbeError> {
    static LIB: OnceLock<Result<Lib, ProbeError>> = OnceLock::new();
    LIB.get_or_init(|| load(LIBBLKID))
        .as_ref()
        .map_err(Clone::clone)
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
    fn new(fd: BorrowedFd<'fd>) -> Result<Self, ProbeError> {
        let lib = lib()?;
        // SAFETY: plain constructor; NULL is checked.
        let p = unsafe { (lib.new_probe)() };
        if p.is_null() {
            return Err(ProbeError::Call("blkid_new_probe"));
        }
        let h = ProbeHandle { lib, p, _fd: fd };
        // SAFETY: h.p is a live probe (freed by h's Drop on every return below); fd stays open
        // for h's lifetime ('fd); offset 0 and size 0 mean the whole device; the rest take
        // integers only.
        unsafe {
            if (lib.set_device)(h.p, fd.as_raw_fd(), 0, 0) != 0 {
                return Err(ProbeError::Call("blkid_probe_set_device"));
            }
            if (lib.enable_superblocks)(h.p, 1) != 0 {
                return Err(ProbeError::Call("blkid_probe_enable_superblocks"));
            }
            if (lib.set_superblocks_flags)(h.p, SUBLKS_FLAGS) != 0 {
                return Err(ProbeError::Call("blkid_probe_set_superblocks_flags"));
            }
            if (lib.enable_partitions)(h.p, 1) != 0 {
                return Err(ProbeError::Call("blkid_probe_enable_partitions"));
            }
        }
        Ok(h)
    }

    /// Run `blkid_do_safeprobe` or `blkid_do_fullprobe` on this probe.
    fn run(&self, f: FnProbe) -> c_int {
        // SAFETY: live probe; f is one of this library's probe functions.
        unsafe { f(self.p) }
    }

    fn value(&self, name: &str) -> Option<String> {
        let c = CString::new(name).ok()?;
        let mut data: *const c_char = std::ptr::null();
        let mut len: usize = 0;
        // SAFETY: live probe and a NUL-terminated name; data/len are valid out-pointers. On
        // success data points at a NUL-terminated string owned by the probe, copied here
        // before the probe is used again.
        let v = unsafe {
            if (self.lib.has_value)(self.p, c.as_ptr()) == 0 {
                return None;
            }
            if (self.lib.lookup_value)(self.p, c.as_ptr(), &mut data, &mut len) != 0
                || data.is_null()
            {
                return None;
            }
            CStr::from_ptr(data).to_string_lossy().into_owned()
        };
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
pub(super) fn signatures_fd(fd: BorrowedFd<'_>) -> Result<Found, ProbeError> {
    let p = ProbeHandle::new(fd)?;
    match p.run(p.lib.do_safeprobe) {
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
            let signatures = if p.run(p.lib.do_fullprobe) == 0 {
                collect(&p)
            } else {
                Vec::new()
            };
            Ok(Found {
                signatures,
                ambiguous: true,
            })
        }
        rc => Err(ProbeError::Failed(rc)),
    }
}

/// Probe a path: opened read-only for the probe, then [`signatures_fd`].
pub(super) fn signatures(path: &Path) -> Result<Found, ProbeError> {
    // Fail on a missing library before touching the path, so the reason names it.
    lib()?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .open(path)
        .map_err(|e| ProbeError::Open(e.to_string()))?;
    signatures_fd(f.as_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing library is an error that names it and the package to install, never an
    /// empty probe.
    #[test]
    fn a_missing_library_is_a_clear_error() {
        let Err(e) = load("libblkid-not-installed.so.1") else {
            panic!("a library that does not exist loaded");
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with("cannot load libblkid-not-installed.so.1 ("),
            "{msg}"
        );
        assert!(msg.contains("No such file"), "dlerror's reason: {msg}");
        assert!(msg.contains("package libblkid1"), "{msg}");
    }

    /// A library without the probe's functions (libc has none of them) names the first
    /// missing symbol.
    #[test]
    fn a_library_without_blkid_names_the_missing_symbol() {
        let Err(e) = load("libc.so.6") else {
            panic!("libc resolved as libblkid");
        };
        let msg = e.to_string();
        assert!(
            msg.starts_with("libc.so.6 has no symbol blkid_new_probe: "),
            "{msg}"
        );
    }
}
