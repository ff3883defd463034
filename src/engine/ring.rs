//! The ring mechanics the block-path engine (`uring`) and the passthrough engine (`passthru`)
//! share, whatever their entry sizes: entering the kernel (a bounded wait, transient errors
//! that are not failures), when a reap has to enter, and the paced wait of `reap_timeout`
//! (polled rings ignore wait timeouts). Each engine keeps its own CQE drain, since they map
//! completions differently.
//!
//! Architecture Invariant: nothing here allocates.

use std::time::Duration;

use io_uring::{IoUring, cqueue, squeue, types};

use super::EngineError;

/// Longest a waiting enter blocks before returning (possibly empty-handed) to its caller, so a
/// worker stuck behind a hung device still sees `stop`.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(20);

/// The facts about a ring the enter decisions need.
#[derive(Debug, Clone, Copy)]
pub(super) struct RingMode {
    /// `IORING_FEAT_EXT_ARG`: waits can carry a timeout.
    pub ext_arg: bool,
    /// `IORING_SETUP_IOPOLL`: completions appear only while an enter polls for them.
    pub iopoll: bool,
}

/// `EINTR`, `EAGAIN`, `EBUSY`, `ETIME`: come back later, not a failure.
pub(super) fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ETIME)
    )
}

/// Enter the kernel: submit what is queued and wait for `want` completions (bounded by
/// [`WAIT_SLICE`] where the kernel takes a timeout).
pub(super) fn enter<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    ring: &IoUring<S, C>,
    mode: RingMode,
    want: usize,
) -> Result<(), EngineError> {
    let r = if want > 0 && mode.ext_arg {
        let ts = types::Timespec::from(WAIT_SLICE);
        let args = types::SubmitArgs::new().timespec(&ts);
        ring.submitter().submit_with_args(want, &args)
    } else {
        ring.submit_and_wait(want)
    };
    match r {
        Ok(_) => Ok(()),
        Err(e) if is_transient(&e) => Ok(()),
        Err(e) if want > 0 => Err(EngineError::Reap(e)),
        Err(e) => Err(EngineError::Submit(e)),
    }
}

/// What `reap(min)` does before draining: wait for `min` completions (submitting what is
/// queued), or, with `min == 0`, enter only when deferred task work is pending or polled I/O
/// is in flight (polled completions only turn up while an enter polls).
pub(super) fn before_reap<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    ring: &mut IoUring<S, C>,
    mode: RingMode,
    inflight: usize,
    min: usize,
) -> Result<(), EngineError> {
    if min > 0 {
        let have = ring.completion().len();
        if have < min || !ring.submission().is_empty() {
            enter(ring, mode, min.saturating_sub(have))?;
        }
    } else if ring.submission().taskrun() || (mode.iopoll && inflight > 0) {
        enter(ring, mode, 0)?;
    }
    Ok(())
}

/// What `reap_timeout` does before draining: submit what is queued and wait up to `timeout`
/// for one completion. A polled ring ignores the wait's timeout: it polls for what is in
/// flight (the device answers within its latency), and paces with a plain sleep when nothing is.
pub(super) fn before_reap_timeout<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    ring: &mut IoUring<S, C>,
    mode: RingMode,
    inflight: usize,
    timeout: Duration,
) -> Result<(), EngineError> {
    if mode.iopoll {
        if inflight == 0 {
            std::thread::sleep(timeout);
        } else if ring.completion().is_empty() {
            enter(ring, mode, 1)?;
        }
        return Ok(());
    }
    if !ring.completion().is_empty() {
        // Completions are waiting; still hand the kernel what was queued (or run deferred task
        // work) so nothing sits unsubmitted while the caller paces.
        if !ring.submission().is_empty() || ring.submission().taskrun() {
            enter(ring, mode, 0)?;
        }
    } else if mode.ext_arg {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(EngineError::Reap(e)),
        }
    } else {
        enter(ring, mode, 0)?;
        if ring.completion().is_empty() {
            std::thread::sleep(timeout);
            enter(ring, mode, 0)?;
        }
    }
    Ok(())
}
