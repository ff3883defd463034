//! Moving ATA commands: the `AtaTransport` trait, the real `SG_IO` implementation and a replay
//! implementation for tests.
//!
//! Architecture Invariant: this is the only file under `ata` with `unsafe` code.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::cdb::{self, Outcome};
use super::{AtaCmd, AtaError, AtaRegs, ParseError};

/// Moves ATA commands to a drive and their data back.
pub trait AtaTransport: Send + Sync {
    /// The disk's name for messages (e.g. `/dev/sda`).
    fn device(&self) -> String;
    /// Run `cmd`; device-to-host data lands in `buf` (`cmd.data_len()` bytes). Returns the
    /// output registers; an aborted command is [`AtaError::NotSupported`].
    fn ata(&self, cmd: &AtaCmd, buf: &mut [u8]) -> Result<AtaRegs, AtaError>;
}

impl<T: AtaTransport + ?Sized> AtaTransport for std::sync::Arc<T> {
    fn device(&self) -> String {
        (**self).device()
    }
    fn ata(&self, cmd: &AtaCmd, buf: &mut [u8]) -> Result<AtaRegs, AtaError> {
        (**self).ata(cmd, buf)
    }
}

/// Turn a classified completion into the transport's answer.
pub(crate) fn finish(
    device: &str,
    what: &'static str,
    outcome: Result<Outcome, ParseError>,
) -> Result<AtaRegs, AtaError> {
    let device = device.to_string();
    match outcome {
        Ok(Outcome::Done(regs)) => Ok(regs),
        Ok(Outcome::Aborted(regs)) => Err(AtaError::NotSupported { device, what, regs }),
        Ok(Outcome::Failed(regs)) => Err(AtaError::Device { device, what, regs }),
        Ok(Outcome::Rejected { key, asc, ascq }) => Err(AtaError::Sense {
            device,
            what,
            key,
            asc,
            ascq,
        }),
        Err(source) => Err(AtaError::Parse {
            device,
            what,
            source,
        }),
    }
}

fn check_len(device: &str, cmd: &AtaCmd, buf: &[u8]) -> Result<(), AtaError> {
    if buf.len() == cmd.data_len() {
        return Ok(());
    }
    Err(AtaError::Io {
        device: device.to_string(),
        what: cmd.what,
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "buffer is {} bytes, the command moves {}",
                buf.len(),
                cmd.data_len()
            ),
        ),
    })
}

/// `struct sg_io_hdr` from `scsi/sg.h`.
#[repr(C)]
#[derive(Debug)]
pub struct SgIoHdr {
    pub interface_id: libc::c_int,
    pub dxfer_direction: libc::c_int,
    pub cmd_len: u8,
    pub mx_sb_len: u8,
    pub iovec_count: u16,
    pub dxfer_len: u32,
    pub dxferp: *mut libc::c_void,
    pub cmdp: *mut u8,
    pub sbp: *mut u8,
    pub timeout: u32,
    pub flags: u32,
    pub pack_id: libc::c_int,
    pub usr_ptr: *mut libc::c_void,
    pub status: u8,
    pub masked_status: u8,
    pub msg_status: u8,
    pub sb_len_wr: u8,
    pub host_status: u16,
    pub driver_status: u16,
    pub resid: libc::c_int,
    pub duration: u32,
    pub info: u32,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<SgIoHdr>() == 88);
    assert!(std::mem::offset_of!(SgIoHdr, dxferp) == 16);
    assert!(std::mem::offset_of!(SgIoHdr, usr_ptr) == 56);
    assert!(std::mem::offset_of!(SgIoHdr, status) == 64);
    assert!(std::mem::offset_of!(SgIoHdr, info) == 80);
};

pub const SG_IO: libc::c_ulong = 0x2285;
pub const SG_DXFER_NONE: libc::c_int = -1;
pub const SG_DXFER_FROM_DEV: libc::c_int = -3;
/// Driver status bits other than DRIVER_SENSE (08h) mean the command did not complete.
const DRIVER_STATUS_MASK: u16 = 0x07;
const SENSE_LEN: usize = 64;

nix::ioctl_readwrite_bad!(sg_io, SG_IO, SgIoHdr);

/// ATA commands through `SG_IO` on a SCSI disk node (`/dev/sdX`).
pub struct SgIo {
    file: File,
    path: PathBuf,
    /// Per-command timeout handed to the kernel, milliseconds.
    pub timeout_ms: u32,
}

impl SgIo {
    /// Open the disk read-only and non-blocking (a disk with no medium still opens): SG_IO
    /// needs no write access, only CAP_SYS_RAWIO for ATA PASS-THROUGH.
    pub fn open(path: &Path) -> Result<Self, AtaError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| {
                let device = path.display().to_string();
                if source.kind() == std::io::ErrorKind::PermissionDenied {
                    AtaError::OpenDenied { device }
                } else {
                    AtaError::Open { device, source }
                }
            })?;
        Ok(SgIo {
            file,
            path: path.to_path_buf(),
            timeout_ms: 10_000,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AtaTransport for SgIo {
    fn device(&self) -> String {
        self.path.display().to_string()
    }

    fn ata(&self, cmd: &AtaCmd, buf: &mut [u8]) -> Result<AtaRegs, AtaError> {
        let device = self.device();
        check_len(&device, cmd, buf)?;
        let mut cdb = cdb::build(cmd);
        let mut sense = [0u8; SENSE_LEN];
        let mut hdr = SgIoHdr {
            interface_id: libc::c_int::from(b'S'),
            dxfer_direction: if buf.is_empty() {
                SG_DXFER_NONE
            } else {
                SG_DXFER_FROM_DEV
            },
            cmd_len: cdb::CDB_LEN as u8,
            mx_sb_len: SENSE_LEN as u8,
            iovec_count: 0,
            // check_len bounds it to 65535 sectors of 512 bytes.
            dxfer_len: buf.len() as u32,
            dxferp: if buf.is_empty() {
                std::ptr::null_mut()
            } else {
                buf.as_mut_ptr().cast()
            },
            cmdp: cdb.as_mut_ptr(),
            sbp: sense.as_mut_ptr(),
            timeout: self.timeout_ms,
            flags: 0,
            pack_id: 0,
            usr_ptr: std::ptr::null_mut(),
            status: 0,
            masked_status: 0,
            msg_status: 0,
            sb_len_wr: 0,
            host_status: 0,
            driver_status: 0,
            resid: 0,
            duration: 0,
            info: 0,
        };
        // SAFETY: `hdr` is a valid, initialised `sg_io_hdr` that lives across the call; its
        // pointers describe `cdb` (16 bytes), `sense` (`mx_sb_len` bytes) and `buf`
        // (`dxfer_len` bytes, exclusively borrowed, device-to-host only), all of which outlive
        // the synchronous ioctl; the fd is open for the whole call.
        let ret = unsafe { sg_io(self.file.as_raw_fd(), &mut hdr) };
        match ret {
            Ok(_) => {}
            Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => {
                return Err(AtaError::PermissionDenied {
                    device,
                    what: cmd.what,
                });
            }
            Err(e) => {
                return Err(AtaError::Io {
                    device,
                    what: cmd.what,
                    source: std::io::Error::from(e),
                });
            }
        }
        let scsi_ok = hdr.status == 0 || hdr.status == cdb::CHECK_CONDITION;
        if hdr.host_status != 0 || hdr.driver_status & DRIVER_STATUS_MASK != 0 || !scsi_ok {
            return Err(AtaError::Transport {
                device,
                what: cmd.what,
                status: hdr.status,
                host: hdr.host_status,
                driver: hdr.driver_status,
            });
        }
        let n = usize::from(hdr.sb_len_wr).min(SENSE_LEN);
        finish(&device, cmd.what, cdb::interpret(hdr.status, &sense[..n]))
    }
}

/// What the fake drive answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Success: this data (copied into the buffer, the rest zeroed) and these registers, which
    /// are classified like a real completion (ERR/ABRT in them fail the command).
    Regs(Vec<u8>, AtaRegs),
    /// This data and these raw sense bytes, returned with CHECK CONDITION and parsed by
    /// [`cdb::interpret`] exactly as the SG_IO path parses them.
    Sense(Vec<u8>, Vec<u8>),
    /// The drive aborts the command (ERR, ABRT).
    Abort,
    /// The ioctl fails with this errno (e.g. `libc::EPERM`).
    Errno(i32),
}

/// The key a reply is matched on: command, features, count, LBA.
pub type ReplayKey = (u8, u16, u16, u64);

pub fn key_of(cmd: &AtaCmd) -> ReplayKey {
    (cmd.command, cmd.features, cmd.count, cmd.lba)
}

#[derive(Default)]
struct Inner {
    replies: HashMap<ReplayKey, Reply>,
    sent: Vec<AtaCmd>,
}

/// The replay transport; cheap to share behind `Arc`.
pub struct Replay {
    device: String,
    inner: Mutex<Inner>,
}

impl Replay {
    pub fn new(device: &str) -> Self {
        Replay {
            device: device.to_string(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::util::lock(&self.inner)
    }

    /// Answer the exact command (by [`key_of`]) with `reply`.
    pub fn on(&self, cmd: &AtaCmd, reply: Reply) -> &Self {
        self.lock().replies.insert(key_of(cmd), reply);
        self
    }

    /// Every command sent so far, oldest first.
    pub fn sent(&self) -> Vec<AtaCmd> {
        self.lock().sent.clone()
    }
}

fn copy_in(buf: &mut [u8], data: &[u8]) {
    buf.fill(0);
    let n = data.len().min(buf.len());
    buf[..n].copy_from_slice(&data[..n]);
}

impl AtaTransport for Replay {
    fn device(&self) -> String {
        self.device.clone()
    }

    fn ata(&self, cmd: &AtaCmd, buf: &mut [u8]) -> Result<AtaRegs, AtaError> {
        check_len(&self.device, cmd, buf)?;
        let reply = {
            let mut inner = self.lock();
            inner.sent.push(cmd.clone());
            inner.replies.get(&key_of(cmd)).cloned()
        };
        let outcome = match reply {
            Some(Reply::Regs(data, regs)) => {
                copy_in(buf, &data);
                let sense = cdb::sense_for(&regs);
                cdb::interpret(cdb::CHECK_CONDITION, &sense)
            }
            Some(Reply::Sense(data, sense)) => {
                copy_in(buf, &data);
                cdb::interpret(cdb::CHECK_CONDITION, &sense)
            }
            Some(Reply::Abort) => Ok(Outcome::Aborted(AtaRegs {
                error: super::ERROR_ABRT,
                status: super::STATUS_DRDY | super::STATUS_ERR,
                source: super::RegSource::Descriptor,
                ..AtaRegs::default()
            })),
            Some(Reply::Errno(e)) if e == libc::EACCES || e == libc::EPERM => {
                return Err(AtaError::PermissionDenied {
                    device: self.device.clone(),
                    what: cmd.what,
                });
            }
            Some(Reply::Errno(e)) => {
                return Err(AtaError::Io {
                    device: self.device.clone(),
                    what: cmd.what,
                    source: std::io::Error::from_raw_os_error(e),
                });
            }
            None => {
                return Err(AtaError::NoReplay {
                    device: self.device.clone(),
                    what: cmd.what,
                    cmd: format!(
                        "command {:#04x} features {:#06x} count {} lba {:#x}",
                        cmd.command, cmd.features, cmd.count, cmd.lba
                    ),
                });
            }
        };
        finish(&self.device, cmd.what, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::cmd;

    #[test]
    fn missing_disk_is_an_open_error() {
        let e = SgIo::open(Path::new("/dev/sd-nvsoak-missing"))
            .err()
            .expect("no such device");
        assert!(matches!(e, AtaError::Open { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("/dev/sd-nvsoak-missing: cannot open the disk:"),
            "{e}"
        );
    }

    #[test]
    fn a_non_scsi_device_fails_cleanly() {
        // /dev/null has no SG_IO: the kernel answers ENOTTY and nothing is written.
        let t = SgIo::open(Path::new("/dev/null")).expect("open /dev/null");
        let mut buf = vec![0xa5u8; 512];
        let e = t.ata(&cmd::smart_read_data(), &mut buf).unwrap_err();
        match &e {
            AtaError::Io { what, source, .. } => {
                assert_eq!(*what, "reading SMART data");
                assert_eq!(source.raw_os_error(), Some(libc::ENOTTY), "{e}");
            }
            other => panic!("unexpected {other}"),
        }
        assert!(buf.iter().all(|b| *b == 0xa5));
    }

    #[test]
    fn permission_errors_name_the_capability() {
        let e = AtaError::PermissionDenied {
            device: "/dev/sda".into(),
            what: "reading SMART data",
        };
        assert!(e.is_permission());
        assert_eq!(
            e.to_string(),
            "/dev/sda: reading SMART data needs CAP_SYS_RAWIO (ATA PASS-THROUGH; run as root or grant the capability)"
        );
    }
}
