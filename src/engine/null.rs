//! The null engine: every I/O succeeds at once with its full length and touches nothing.
//! It tests the worker loop itself (fio `engines/null.c`).

use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq, buf::AlignedBufs};

pub struct NullEngine {
    bufs: AlignedBufs,
    done: Vec<Completion>,
    depth: u32,
}

impl NullEngine {
    pub fn new(s: EngineSetup) -> Result<Self, EngineError> {
        Ok(NullEngine {
            bufs: AlignedBufs::new(s.buffers.max(s.iodepth) as usize, s.max_bs as usize)?,
            done: Vec::with_capacity(s.iodepth as usize),
            depth: s.iodepth,
        })
    }
}

impl IoEngine for NullEngine {
    fn name(&self) -> &'static str {
        "null"
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
        self.done.push(Completion {
            user_data: req.user_data,
            result: req.len as i32,
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
