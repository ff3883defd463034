//! The worker's reports: the periodic one every `report_interval` (coalescing while the
//! consumer lags) and the final one with `done = true`.

use std::time::Duration;

use super::Worker;
use crate::workload::worker::{ExitReason, MAX_OUTSTANDING, WorkerExit};

impl Worker {
    /// The periodic report.
    pub(super) fn report(&mut self, now: u64) {
        let st = &mut self.st;
        if st.spare.is_none()
            && let Some(r) = self.recycle.as_ref()
            && let Ok(pair) = r.try_recv()
        {
            st.spare = Some(pair);
            st.outstanding = st.outstanding.saturating_sub(1);
        }
        // With recycling, a worker whose earlier reports the consumer has not taken yet
        // coalesces: it keeps this interval in its histograms and counters and reports
        // the longer interval later, so at most MAX_OUTSTANDING reports are queued per
        // worker (memory stays bounded however short the interval) and the steady state
        // allocates no histograms.
        if self.recycle.is_none() || st.spare.is_some() || st.outstanding < MAX_OUTSTANDING {
            self.stats.cpu = crate::util::sched::thread_cpu();
            let rep = self.stats.take_report(
                self.index,
                Duration::from_nanos(now - st.last_report),
                self.clock.at(now),
                st.spare.take(),
                false,
            );
            if self.tx.send(rep).is_err() {
                st.receiver_gone = true;
                st.stopping = true;
            }
            st.outstanding += 1;
            st.last_report = now;
        }
        st.next_report = now + self.interval_ns;
    }

    /// Tear-down: the exit reason and the final report.
    pub(super) fn finish(mut self) -> WorkerExit {
        if self.st.abandoned {
            // The kernel may still write into the buffers of the abandoned I/Os: leak the engine
            // (ring and buffers) instead of freeing memory under it.
            std::mem::forget(self.engine);
        }
        let st = &mut self.st;
        if let Some(f) = st.fatal.take() {
            st.reason = ExitReason::Fatal(f);
        }
        if !st.receiver_gone {
            let now = self.clock.ns();
            if st.spare.is_none() {
                st.spare = self.recycle.as_ref().and_then(|r| r.try_recv().ok());
            }
            self.stats.cpu = crate::util::sched::thread_cpu();
            let rep = self.stats.take_report(
                self.index,
                Duration::from_nanos(now - st.last_report),
                self.clock.at(now),
                st.spare.take(),
                true,
            );
            let _ = self.tx.send(rep);
        }
        WorkerExit {
            engine: self.engine_name,
            reason: std::mem::replace(&mut st.reason, ExitReason::Stopped),
        }
    }
}
