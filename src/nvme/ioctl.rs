//! The real admin transport: `NVME_IOCTL_ADMIN_CMD` on the controller's character device.
//!
//! Architecture Invariant: this is the only file under `nvme` with `unsafe` code.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::{AdminCmd, AdminTransport, NvmeError};

/// `struct nvme_passthru_cmd` from `linux/nvme_ioctl.h`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct NvmePassthruCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    pub result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmePassthruCmd>() == 72);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, addr) == 24);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, cdw10) == 40);
const _: () = assert!(std::mem::offset_of!(NvmePassthruCmd, result) == 68);

nix::ioctl_readwrite!(nvme_admin_cmd, b'N', 0x41, NvmePassthruCmd);

/// Admin commands through `/dev/nvmeX`.
pub struct IoctlTransport {
    file: File,
    path: PathBuf,
    /// Per-command timeout handed to the kernel; 0 = the driver's default.
    pub timeout_ms: u32,
}

impl IoctlTransport {
    /// Open the controller's character device (e.g. `/dev/nvme0`) read-only: admin
    /// passthrough needs no write access, only CAP_SYS_ADMIN for most commands.
    pub fn open(path: &Path) -> Result<Self, NvmeError> {
        let file = File::open(path).map_err(|source| {
            let device = path.display().to_string();
            if source.kind() == std::io::ErrorKind::PermissionDenied {
                NvmeError::OpenDenied { device }
            } else {
                NvmeError::Open { device, source }
            }
        })?;
        Ok(IoctlTransport {
            file,
            path: path.to_path_buf(),
            timeout_ms: 10_000,
        })
    }

    /// A controller device the caller opened (and checked) itself.
    pub fn from_file(file: File, path: &Path) -> Self {
        IoctlTransport {
            file,
            path: path.to_path_buf(),
            timeout_ms: 10_000,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AdminTransport for IoctlTransport {
    fn device(&self) -> String {
        self.path.display().to_string()
    }

    fn admin(&self, cmd: &AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
        let data_len = u32::try_from(data.len()).map_err(|_| NvmeError::Io {
            device: self.device(),
            what: cmd.what,
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        let mut raw = NvmePassthruCmd {
            opcode: cmd.opcode,
            nsid: cmd.nsid,
            addr: if data.is_empty() {
                0
            } else {
                data.as_mut_ptr() as u64
            },
            data_len,
            cdw10: cmd.cdw10,
            cdw11: cmd.cdw11,
            cdw12: cmd.cdw12,
            cdw13: cmd.cdw13,
            cdw14: cmd.cdw14,
            cdw15: cmd.cdw15,
            timeout_ms: self.timeout_ms,
            ..Default::default()
        };
        // SAFETY: `raw` is a valid, initialised `nvme_passthru_cmd` that lives across the call;
        // `addr`/`data_len` describe `data`, which is exclusively borrowed for the call, so the
        // kernel's DMA into it (controller-to-host commands only) stays in bounds; the fd is
        // open for the whole call.
        let ret = unsafe { nvme_admin_cmd(self.file.as_raw_fd(), &mut raw) };
        match ret {
            Ok(0) => Ok(raw.result),
            Ok(status) => Err(NvmeError::Status {
                device: self.device(),
                what: cmd.what,
                status: status as u16,
            }),
            Err(nix::errno::Errno::EACCES | nix::errno::Errno::EPERM) => {
                Err(NvmeError::PermissionDenied {
                    device: self.device(),
                    what: cmd.what,
                })
            }
            Err(e) => Err(NvmeError::Io {
                device: self.device(),
                what: cmd.what,
                source: std::io::Error::from(e),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::cmd;

    #[test]
    fn ioctl_number_matches_the_kernel_header() {
        // _IOWR('N', 0x41, struct nvme_passthru_cmd) from linux/nvme_ioctl.h.
        assert_eq!(
            nix::request_code_readwrite!(b'N', 0x41, std::mem::size_of::<NvmePassthruCmd>()),
            0xC048_4E41
        );
    }

    #[test]
    fn missing_controller_is_an_open_error() {
        let e = IoctlTransport::open(Path::new("/dev/nvme-nvsoak-missing"))
            .err()
            .expect("no such device");
        assert!(
            e.to_string()
                .starts_with("/dev/nvme-nvsoak-missing: cannot open the controller:"),
            "{e}"
        );
    }

    #[test]
    fn a_non_nvme_device_fails_cleanly() {
        // /dev/null has no NVMe ioctls: the kernel answers ENOTTY and nothing is written.
        let t = IoctlTransport::open(Path::new("/dev/null")).expect("open /dev/null");
        let mut buf = vec![0xa5u8; 512];
        let e = t.admin(&cmd::smart_cmd(), &mut buf).unwrap_err();
        match &e {
            NvmeError::Io { what, source, .. } => {
                assert_eq!(*what, "reading SMART log");
                assert_eq!(source.raw_os_error(), Some(libc::ENOTTY), "{e}");
            }
            other => panic!("unexpected {other}"),
        }
        assert!(buf.iter().all(|b| *b == 0xa5));
    }
}
