//! io_uring engine: one ring per worker, registered buffers and files, batched submission.
//! (Being written; until then it reports io_uring as refused so `auto` falls back to psync.)

use super::{Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq};

pub struct UringEngine {
    _private: (),
}

impl UringEngine {
    pub fn new(_s: EngineSetup) -> Result<Self, EngineError> {
        Err(EngineError::UringRefused(
            std::io::Error::from_raw_os_error(libc::ENOSYS),
        ))
    }
}

impl IoEngine for UringEngine {
    fn name(&self) -> &'static str {
        "io_uring"
    }
    fn caps(&self) -> Caps {
        Caps {
            sync: false,
            fixed: true,
        }
    }
    fn buffer(&mut self, _idx: u16) -> &mut [u8] {
        &mut []
    }
    fn queue(&mut self, _req: IoReq) -> Result<(), EngineError> {
        Ok(())
    }
    fn commit(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    fn reap(&mut self, _min: usize, _out: &mut Vec<Completion>) -> Result<usize, EngineError> {
        Ok(0)
    }
}
