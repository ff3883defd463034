//! The I/O vocabulary shared by the engines, the workers, the statistics and the workload
//! specs: what an I/O is ([`Op`]) and which engine runs it ([`EngineChoice`]). It sits below
//! all of them so that `engine/` depends on nothing above it; `model::spec` re-exports both.

use serde::Serialize;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

/// Which I/O engine a target's workers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineChoice {
    /// io_uring, falling back to psync (with a log line) when the kernel refuses io_uring.
    Auto,
    /// io_uring, and an error if it cannot be set up.
    IoUring,
    /// io_uring with polled completions (`IORING_SETUP_IOPOLL`): O_DIRECT on a block device
    /// with poll queues; an error naming the reason otherwise.
    IoUringPoll,
    /// NVMe passthrough (`IORING_OP_URING_CMD`) on the namespace's generic character device,
    /// found from the target's block device; an error naming the reason elsewhere.
    IoUringCmd,
    /// NVMe passthrough with polled completions (`IORING_SETUP_IOPOLL` on the passthrough
    /// ring): the namespace must have poll queues; an error naming the reason otherwise.
    IoUringCmdPoll,
    Psync,
    /// Completes every I/O immediately without touching the target (tests the worker loop).
    Null,
}

impl EngineChoice {
    /// Every choice, in the order the config's docs list them (`config::ENGINES` is their
    /// names).
    pub const ALL: [EngineChoice; 7] = [
        EngineChoice::Auto,
        EngineChoice::IoUring,
        EngineChoice::IoUringPoll,
        EngineChoice::IoUringCmd,
        EngineChoice::IoUringCmdPoll,
        EngineChoice::Psync,
        EngineChoice::Null,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::IoUring => "io_uring",
            EngineChoice::IoUringPoll => "io_uring_poll",
            EngineChoice::IoUringCmd => "io_uring_cmd",
            EngineChoice::IoUringCmdPoll => "io_uring_cmd_poll",
            EngineChoice::Psync => "psync",
            EngineChoice::Null => "null",
        }
    }

    /// NVMe passthrough (`io_uring_cmd`, `io_uring_cmd_poll`): the target is a namespace.
    pub fn is_passthru(self) -> bool {
        matches!(
            self,
            EngineChoice::IoUringCmd | EngineChoice::IoUringCmdPoll
        )
    }

    /// Polled completions (`io_uring_poll`, `io_uring_cmd_poll`): the device needs poll queues.
    pub fn is_polled(self) -> bool {
        matches!(
            self,
            EngineChoice::IoUringPoll | EngineChoice::IoUringCmdPoll
        )
    }
}
