//! A transport for tests: canned responses keyed by the command's dwords, and a record of every
//! command sent, so tests assert what would reach the controller (libnvme `test/ioctl/logs.c`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{AdminCmd, AdminTransport, NvmeError};

/// What the fake controller answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Success: these bytes (copied into the buffer, the rest zeroed) and completion dword 0.
    Data(Vec<u8>, u32),
    /// The controller rejects the command with this NVMe status.
    Status(u16),
    /// The ioctl fails with this errno (e.g. `libc::EACCES`).
    Errno(i32),
}

/// The key a reply is matched on: opcode, nsid, cdw10, cdw11, cdw14.
pub type ReplayKey = (u8, u32, u32, u32, u32);

pub fn key_of(cmd: &AdminCmd) -> ReplayKey {
    (cmd.opcode, cmd.nsid, cmd.cdw10, cmd.cdw11, cmd.cdw14)
}

#[derive(Default)]
struct Inner {
    replies: HashMap<ReplayKey, Reply>,
    /// Replies matched on the opcode and the low byte of cdw10 (CNS, LID or FID) alone.
    loose: HashMap<(u8, u8), Reply>,
    /// Replies given in turn to the exact command; the last one repeats.
    seq: HashMap<ReplayKey, VecDeque<Reply>>,
    sent: Vec<AdminCmd>,
    /// The data buffer of each command as it was sent (what a host-to-controller command
    /// such as Set Features carries), in the order of `sent`.
    sent_data: Vec<Vec<u8>>,
}

/// The replay transport. Cheap to share behind `Arc`; interior state is locked.
pub struct ReplayTransport {
    device: String,
    inner: Mutex<Inner>,
}

impl ReplayTransport {
    pub fn new(device: &str) -> Self {
        ReplayTransport {
            device: device.to_string(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::util::lock(&self.inner)
    }

    /// Answer the exact command (by [`key_of`]) with `reply`.
    pub fn on(&self, cmd: &AdminCmd, reply: Reply) -> &Self {
        self.lock().replies.insert(key_of(cmd), reply);
        self
    }

    /// Answer any command with this opcode and cdw10 low byte (CNS, LID, FID) with `reply`.
    pub fn on_loose(&self, opcode: u8, cdw10_low: u8, reply: Reply) -> &Self {
        self.lock().loose.insert((opcode, cdw10_low), reply);
        self
    }

    /// Answer the exact command with `replies` in turn (a controller whose state changes,
    /// e.g. a self-test's progress); the last reply repeats. Checked before [`Self::on`].
    pub fn on_seq(&self, cmd: &AdminCmd, replies: Vec<Reply>) -> &Self {
        self.lock().seq.insert(key_of(cmd), replies.into());
        self
    }

    /// Every command sent so far, oldest first.
    pub fn sent(&self) -> Vec<AdminCmd> {
        self.lock().sent.clone()
    }

    /// The data buffer of every command sent so far, as it was handed to the transport.
    pub fn sent_data(&self) -> Vec<Vec<u8>> {
        self.lock().sent_data.clone()
    }

    pub fn clear_sent(&self) {
        let mut inner = self.lock();
        inner.sent.clear();
        inner.sent_data.clear();
    }
}

impl AdminTransport for ReplayTransport {
    fn device(&self) -> String {
        self.device.clone()
    }

    fn admin(&self, cmd: &AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
        let mut inner = self.lock();
        inner.sent.push(cmd.clone());
        let from_seq = inner.seq.get_mut(&key_of(cmd)).and_then(|q| {
            if q.len() > 1 {
                q.pop_front()
            } else {
                q.front().cloned()
            }
        });
        let reply = from_seq.or_else(|| {
            inner
                .replies
                .get(&key_of(cmd))
                .or_else(|| inner.loose.get(&(cmd.opcode, (cmd.cdw10 & 0xff) as u8)))
                .cloned()
        });
        inner.sent_data.push(data.to_vec());
        drop(inner);
        match reply {
            Some(Reply::Data(bytes, dw0)) => {
                data.fill(0);
                let n = bytes.len().min(data.len());
                data[..n].copy_from_slice(&bytes[..n]);
                Ok(dw0)
            }
            Some(Reply::Status(status)) => Err(NvmeError::Status {
                device: self.device.clone(),
                what: cmd.what,
                status,
            }),
            Some(Reply::Errno(e)) if e == libc::EACCES || e == libc::EPERM => {
                Err(NvmeError::PermissionDenied {
                    device: self.device.clone(),
                    what: cmd.what,
                })
            }
            Some(Reply::Errno(e)) => Err(NvmeError::Io {
                device: self.device.clone(),
                what: cmd.what,
                source: std::io::Error::from_raw_os_error(e),
            }),
            None => Err(NvmeError::NoReplay {
                device: self.device.clone(),
                what: cmd.what,
                cmd: format!(
                    "opcode {:#04x} nsid {:#x} cdw10 {:#010x} cdw11 {:#010x} cdw14 {:#x}",
                    cmd.opcode, cmd.nsid, cmd.cdw10, cmd.cdw11, cmd.cdw14
                ),
            }),
        }
    }
}
