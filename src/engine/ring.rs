//! The ring the block-path engine (`uring`) and the passthrough engine (`passthru`) share,
//! whatever their entry sizes ([`Ring`]`<S, C>`): the `IoUring`, the aligned buffers and their
//! registration as fixed buffers, the registration of the engine's file as fixed file 0, the
//! slots (each I/O in flight has one: the caller's `user_data` and the I/O's length, its index
//! is the SQE's `user_data`), entering the kernel (a bounded wait, transient errors that are
//! not failures), when a reap has to enter, the paced wait of `reap_timeout` (polled rings
//! ignore wait timeouts), and the drain at teardown. An engine keeps only what differs: how it
//! builds an SQE for an [`IoReq`] and how it reads a CQE's result.
//!
//! Architecture Invariant: nothing here allocates after setup: `queue`, `commit` and the
//! reaps push only into the caller's preallocated vector and the slot list sized at setup.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue, squeue, types};

use super::{Completion, EngineError, EngineSetup, IoReq, buf::AlignedBufs};

/// Longest a waiting enter blocks before returning (possibly empty-handed) to its caller, so a
/// worker stuck behind a hung device still sees `stop`.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(20);

/// How long `Drop` waits for in-flight I/O before it gives up (and leaks the buffers rather
/// than free memory the kernel may still write into).
pub(super) const DROP_DRAIN: Duration = Duration::from_secs(30);

/// The facts about a ring the enter decisions need.
#[derive(Debug, Clone, Copy)]
struct RingMode {
    /// `IORING_FEAT_EXT_ARG`: waits can carry a timeout.
    ext_arg: bool,
    /// `IORING_SETUP_IOPOLL`: completions appear only while an enter polls for them.
    iopoll: bool,
}

/// An SQE type a [`Ring`] can stamp with its slot number (io-uring's entry types share no
/// trait for it).
pub(super) trait Sqe: squeue::EntryMarker {
    fn with_user_data(self, user_data: u64) -> Self;
}

impl Sqe for squeue::Entry {
    fn with_user_data(self, user_data: u64) -> Self {
        self.user_data(user_data)
    }
}

impl Sqe for squeue::Entry128 {
    fn with_user_data(self, user_data: u64) -> Self {
        self.user_data(user_data)
    }
}

/// `EINTR`, `EAGAIN`, `EBUSY`, `ETIME`: come back later, not a failure.
pub(super) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ETIME)
    )
}

/// One engine's ring with its buffers and slots.
pub(super) struct Ring<S: Sqe, C: cqueue::EntryMarker> {
    // Declared before `bufs`: after `Drop` drained it, the ring closes before the buffers it
    // may have registered are released.
    ring: IoUring<S, C>,
    /// `None` once leaked by `Drop` (I/O still in flight after `DROP_DRAIN`).
    bufs: Option<AlignedBufs>,
    buf_count: usize,
    buf_size: usize,
    /// Base pointer of buffer 0; buffers are contiguous, `buf_size` apart.
    base: *mut u8,
    fixed_file: bool,
    fixed_bufs: bool,
    mode: RingMode,
    /// Setup flags that the kernel accepted, for logs and tests.
    flags: &'static str,
    /// Per slot: the caller's user_data and the I/O's length; `free` the free slots.
    slot_ud: Vec<u64>,
    slot_len: Vec<u32>,
    free: Vec<u32>,
    /// SQEs handed to the kernel (or queued) whose CQE has not been reaped yet.
    inflight: usize,
    /// What `Drop` logs when it has to leak the buffers.
    leak_msg: &'static str,
}

// SAFETY: `base` points into `bufs`, which the ring owns; the ring is used from one thread at a
// time (its engine moves with its worker and is never shared).
unsafe impl<S: Sqe, C: cqueue::EntryMarker> Send for Ring<S, C> {}

impl<S: Sqe, C: cqueue::EntryMarker> Ring<S, C> {
    /// A ring for `s` (the setup ladder of [`super::setup::build_ring_with`], polled with
    /// `iopoll`) with `max(buffers, iodepth)` buffers of `max_bs` bytes, nothing registered
    /// yet. `leak_msg` is what `Drop` logs if it has to leak the buffers.
    pub(super) fn new(
        s: &EngineSetup,
        iopoll: bool,
        leak_msg: &'static str,
    ) -> Result<Self, EngineError> {
        let depth = s.iodepth.max(1);
        let entries = depth.next_power_of_two().min(32768);
        let (ring, flags) = super::setup::build_ring_with(entries, |b, n| {
            let mut b = b.clone();
            if iopoll {
                b.setup_iopoll();
            }
            b.build(n)
        })?;
        let count = s.buffers.max(depth) as usize;
        if count > u16::MAX as usize {
            return Err(EngineError::UringSetup(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{count} buffers exceed io_uring's buffer index range; lower iodepth"),
            )));
        }
        let mut bufs = AlignedBufs::new(count, s.max_bs as usize)?;
        let base = bufs.slice_mut(0).as_mut_ptr();
        let buf_size = bufs.size();
        let ext_arg = ring.params().is_feature_ext_arg();
        let slots = entries.max(count as u32) as usize * 2;
        Ok(Ring {
            ring,
            bufs: Some(bufs),
            buf_count: count,
            buf_size,
            base,
            fixed_file: false,
            fixed_bufs: false,
            mode: RingMode { ext_arg, iopoll },
            flags,
            slot_ud: vec![0; slots],
            slot_len: vec![0; slots],
            free: (0..slots as u32).rev().collect(),
            inflight: 0,
            leak_msg,
        })
    }

    /// Register `fd` as fixed file 0 (SQEs then name it `types::Fixed(0)`).
    pub(super) fn register_file(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ring.submitter().register_files(&[fd.as_raw_fd()])?;
        self.fixed_file = true;
        Ok(())
    }

    /// Register the buffers as fixed buffers (SQEs then name them by index).
    pub(super) fn register_buffers(&mut self) -> io::Result<()> {
        let Some(bufs) = self.bufs.as_ref() else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        let iovecs: Vec<libc::iovec> = (0..self.buf_count)
            .map(|i| libc::iovec {
                iov_base: bufs.ptr(i).cast(),
                iov_len: self.buf_size,
            })
            .collect();
        // SAFETY: every iovec points into `bufs`, which lives as long as the ring: `Drop`
        // drains the ring (or leaks the buffers) before the memory is released.
        unsafe { self.ring.submitter().register_buffers(&iovecs) }?;
        self.fixed_bufs = true;
        Ok(())
    }

    /// Setup flags the kernel accepted (e.g. `single_issuer,coop_taskrun,cqsize`).
    pub(super) fn setup_flags(&self) -> &'static str {
        self.flags
    }
    /// Whether the buffers are registered.
    pub(super) fn fixed_buffers(&self) -> bool {
        self.fixed_bufs
    }
    /// Whether the engine's file is registered (`types::Fixed(0)`).
    pub(super) fn fixed_file(&self) -> bool {
        self.fixed_file
    }
    /// Polled completions (`IORING_SETUP_IOPOLL`).
    pub(super) fn iopoll(&self) -> bool {
        self.mode.iopoll
    }
    /// Bytes per buffer (`max_bs` rounded up to the alignment).
    pub(super) fn buf_size(&self) -> usize {
        self.buf_size
    }
    /// Most I/Os the ring keeps in flight (a vector this big holds every completion).
    pub(super) fn slots(&self) -> usize {
        self.slot_ud.len()
    }

    /// The buffer for slot `idx` (empty once `Drop` leaked them).
    pub(super) fn buffer(&mut self, idx: u16) -> &mut [u8] {
        match self.bufs.as_mut() {
            Some(b) => b.slice_mut(idx as usize),
            None => &mut [],
        }
    }

    /// Queue `req` with the SQE `build` makes from the address of the request's buffer; the
    /// ring stamps it with a slot. `EINVAL` for a buffer index or length out of range (then
    /// `build` is not called), `build`'s error, or the queue is full.
    pub(super) fn queue(
        &mut self,
        req: &IoReq,
        build: impl FnOnce(*mut u8) -> Result<S, EngineError>,
    ) -> Result<(), EngineError> {
        if req.buf as usize >= self.buf_count || req.len as usize > self.buf_size {
            return Err(EngineError::Submit(io::Error::from_raw_os_error(
                libc::EINVAL,
            )));
        }
        // Checked above, so this stays inside the allocation.
        let p = self.base.wrapping_add(req.buf as usize * self.buf_size);
        let entry = build(p)?;
        let Some(slot) = self.free.pop() else {
            return Err(EngineError::QueueFull(self.slot_ud.len() as u32));
        };
        self.slot_ud[slot as usize] = req.user_data;
        self.slot_len[slot as usize] = req.len;
        let entry = entry.with_user_data(u64::from(slot));
        if self.ring.submission().is_full() {
            self.enter(0)?;
        }
        // SAFETY: the SQE names a buffer inside `bufs` (checked above) that stays allocated
        // until its CQE is reaped (Drop drains or leaks), and a file its engine keeps open for
        // the ring's lifetime.
        if unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.free.push(slot);
            return Err(EngineError::QueueFull(self.ring.params().sq_entries()));
        }
        self.inflight += 1;
        Ok(())
    }

    /// Submit what is queued.
    pub(super) fn commit(&mut self) -> Result<(), EngineError> {
        if self.ring.submission().is_empty() {
            return Ok(());
        }
        self.enter(0)
    }

    /// Wait for `min` completions (submitting what is queued) or, with `min == 0`, take what is
    /// there; each goes to `out` with `result(res, len)` from its CQE's `res` and its length.
    pub(super) fn reap(
        &mut self,
        min: usize,
        out: &mut Vec<Completion>,
        result: impl Fn(i32, u32) -> i32,
    ) -> Result<usize, EngineError> {
        self.before_reap(min)?;
        Ok(self.drain(out, result))
    }

    /// Submit what is queued, wait up to `timeout` for one completion, and take what is there
    /// (as [`Self::reap`]).
    pub(super) fn reap_timeout(
        &mut self,
        timeout: Duration,
        out: &mut Vec<Completion>,
        result: impl Fn(i32, u32) -> i32,
    ) -> Result<usize, EngineError> {
        self.before_reap_timeout(timeout)?;
        Ok(self.drain(out, result))
    }

    /// Enter the kernel: submit what is queued and wait for `want` completions (bounded by
    /// [`WAIT_SLICE`] where the kernel takes a timeout).
    fn enter(&self, want: usize) -> Result<(), EngineError> {
        let r = if want > 0 && self.mode.ext_arg {
            let ts = types::Timespec::from(WAIT_SLICE);
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(want, &args)
        } else {
            self.ring.submit_and_wait(want)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if is_transient(&e) => Ok(()),
            Err(e) if want > 0 => Err(EngineError::Reap(e)),
            Err(e) => Err(EngineError::Submit(e)),
        }
    }

    /// What `reap(min)` does before draining: wait for `min` completions (submitting what is
    /// queued), or, with `min == 0`, enter only when deferred task work is pending or polled
    /// I/O is in flight (polled completions only turn up while an enter polls).
    fn before_reap(&mut self, min: usize) -> Result<(), EngineError> {
        if min > 0 {
            let have = self.ring.completion().len();
            if have < min || !self.ring.submission().is_empty() {
                self.enter(min.saturating_sub(have))?;
            }
        } else if self.ring.submission().taskrun() || (self.mode.iopoll && self.inflight > 0) {
            self.enter(0)?;
        }
        Ok(())
    }

    /// What `reap_timeout` does before draining: submit what is queued and wait up to
    /// `timeout` for one completion. A polled ring ignores the wait's timeout: it polls for
    /// what is in flight (the device answers within its latency), and paces with a plain sleep
    /// when nothing is.
    fn before_reap_timeout(&mut self, timeout: Duration) -> Result<(), EngineError> {
        if self.mode.iopoll {
            if self.inflight == 0 {
                std::thread::sleep(timeout);
            } else if self.ring.completion().is_empty() {
                self.enter(1)?;
            }
            return Ok(());
        }
        if !self.ring.completion().is_empty() {
            // Completions are waiting; still hand the kernel what was queued (or run deferred
            // task work) so nothing sits unsubmitted while the caller paces.
            if !self.ring.submission().is_empty() || self.ring.submission().taskrun() {
                self.enter(0)?;
            }
        } else if self.mode.ext_arg {
            let ts = types::Timespec::from(timeout);
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(EngineError::Reap(e)),
            }
        } else {
            self.enter(0)?;
            if self.ring.completion().is_empty() {
                std::thread::sleep(timeout);
                self.enter(0)?;
            }
        }
        Ok(())
    }

    /// Move ready CQEs into `out`, as many as its spare capacity holds, freeing their slots.
    fn drain(&mut self, out: &mut Vec<Completion>, result: impl Fn(i32, u32) -> i32) -> usize {
        let room = out.capacity() - out.len();
        let mut n = 0;
        let mut cq = self.ring.completion();
        while n < room {
            let Some(c) = cq.next() else { break };
            let c: cqueue::Entry = c.into();
            let slot = c.user_data() as usize;
            let (ud, len) = match (self.slot_ud.get(slot), self.slot_len.get(slot)) {
                (Some(u), Some(l)) => (*u, *l),
                _ => continue,
            };
            self.free.push(slot as u32);
            out.push(Completion {
                user_data: ud,
                result: result(c.result(), len),
            });
            n += 1;
        }
        drop(cq);
        self.inflight = self.inflight.saturating_sub(n);
        n
    }
}

impl<S: Sqe, C: cqueue::EntryMarker> Drop for Ring<S, C> {
    fn drop(&mut self) {
        if self.inflight == 0 {
            return;
        }
        let deadline = Instant::now() + DROP_DRAIN;
        let mut scratch = Vec::with_capacity(self.slot_ud.len());
        while self.inflight > 0 && Instant::now() < deadline {
            scratch.clear();
            if self
                .reap_timeout(Duration::from_millis(100), &mut scratch, |r, _| r)
                .is_err()
            {
                break;
            }
        }
        if self.inflight > 0 {
            tracing::error!(inflight = self.inflight, "{}", self.leak_msg);
            // The kernel may still write into the buffers: never free them.
            std::mem::forget(self.bufs.take());
        }
    }
}
