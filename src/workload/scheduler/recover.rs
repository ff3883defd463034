//! Recovering from a vanished device: pause, wait with backoff, reopen only the same device
//! (by WWN or serial, through the descriptor opened) and resume.

use super::*;

impl Runner {
    /// Pause until the target's device is back (retrying with backoff), then reopen it; or until
    /// the target is stopped.
    pub(crate) fn wait_for_device(&mut self) {
        let path = self.spec.path.clone();
        tracing::warn!(target_name = %self.spec.name, path = %path.display(),
            "the target's device went away; pausing the workload and retrying");
        self.snapshot.update(|s| {
            s.up = false;
            // Paused, not running: the stall alert stays quiet, the device-down alert fires.
            s.running = false;
            // The soak clock stops while the device is gone.
            s.pause_clock(now_unix());
            s.stop_reason = Some(format!(
                "{} went away; waiting for it to return",
                path.display()
            ));
            s.iops = 0.0;
            for j in s.jobs.values_mut() {
                j.read_iops = 0.0;
                j.write_iops = 0.0;
                j.read_bw = 0.0;
                j.write_bw = 0.0;
            }
        });
        // The generic devices resolved for the old descriptors go with them.
        self.passthru =
            crate::engine::passthru::SharedNode::for_target(self.spec.engine, self.passthru.len());
        // Let go of the vanished device: the kernel frees an NVMe controller's instance (its
        // `nvmeN` name) only when the last open file of it closes, so holding the old fd would
        // make a returning drive come back under a new name, away from the configured path.
        match std::fs::File::open("/dev/null") {
            Ok(f) => self.fd = Arc::new(OwnedFd::from(f)),
            Err(e) => tracing::warn!(target_name = %self.spec.name, error = %e,
                "cannot release the vanished device's file (opening /dev/null failed)"),
        }
        let mut backoff = Duration::from_millis(500);
        loop {
            let deadline = Instant::now() + backoff;
            while Instant::now() < deadline {
                if self.stopping() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            backoff = (backoff * 2).min(Duration::from_secs(30));
            if !super::segment::target_node_present(&self.spec) {
                continue;
            }
            // The device at the path is identified through the descriptor opened, and one
            // that is not the device this target ran on is refused, never touched.
            match open_target_expecting(&self.spec, plan_writes(&self.spec), self.identity.as_ref())
            {
                Ok(t) => {
                    self.fd = Arc::new(t.fd);
                    tracing::info!(target_name = %self.spec.name, path = %path.display(),
                        "the device is back; resuming the workload");
                    self.snapshot.update(|s| {
                        s.up = true;
                        s.running = true;
                        s.resume_clock(now_unix());
                        s.stop_reason = None;
                    });
                    return;
                }
                Err(e) => {
                    tracing::warn!(target_name = %self.spec.name, error = %e, "reopening failed; retrying");
                }
            }
        }
    }
}
