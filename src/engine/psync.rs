//! pread/pwrite engine: completes each I/O inside `queue` (fio `engines/sync.c`). The fallback
//! where io_uring is refused.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq, buf::AlignedBufs};
use crate::model::op::Op;

pub struct PsyncEngine {
    fd: Arc<OwnedFd>,
    bufs: AlignedBufs,
    done: Vec<Completion>,
    depth: u32,
}

impl PsyncEngine {
    pub fn new(s: EngineSetup) -> Result<Self, EngineError> {
        Ok(PsyncEngine {
            fd: s.fd,
            bufs: AlignedBufs::new(s.buffers.max(s.iodepth) as usize, s.max_bs as usize)?,
            done: Vec::with_capacity(s.iodepth as usize),
            depth: s.iodepth,
        })
    }
}

impl IoEngine for PsyncEngine {
    fn name(&self) -> &'static str {
        "psync"
    }
    fn caps(&self) -> Caps {
        Caps {
            sync: true,
            fixed: false,
        }
    }
    fn buffer(&mut self, idx: u16) -> &mut [u8] {
        self.bufs.slice_mut(idx as usize)
    }
    fn queue(&mut self, req: IoReq) -> Result<(), EngineError> {
        if self.done.len() >= self.depth as usize {
            return Err(EngineError::QueueFull(self.depth));
        }
        let idx = req.buf as usize;
        if idx >= self.bufs.count() || req.len as usize > self.bufs.size() {
            return Err(EngineError::Submit(std::io::Error::from_raw_os_error(
                libc::EINVAL,
            )));
        }
        let p = self.bufs.ptr(idx);
        // SAFETY: p points to a live buffer of at least req.len bytes (checked above) that this
        // engine owns exclusively; the fd is kept open by the caller for the engine's lifetime.
        let n = unsafe {
            match req.op {
                Op::Read => libc::pread(
                    self.fd.as_raw_fd(),
                    p.cast(),
                    req.len as usize,
                    req.offset as libc::off_t,
                ),
                Op::Write => libc::pwrite(
                    self.fd.as_raw_fd(),
                    p.cast(),
                    req.len as usize,
                    req.offset as libc::off_t,
                ),
            }
        };
        let result = if n < 0 {
            -std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            n as i32
        };
        self.done.push(Completion {
            user_data: req.user_data,
            result,
        });
        Ok(())
    }
    fn commit(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    fn reap(&mut self, _min: usize, out: &mut Vec<Completion>) -> Result<usize, EngineError> {
        let n = self.done.len();
        out.append(&mut self.done);
        Ok(n)
    }
}
