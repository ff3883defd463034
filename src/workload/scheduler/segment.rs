//! Running a segment: one job's workers spawned, their interval reports aggregated into the
//! snapshot, and the stop conditions (duration, byte limits, errors, a vanished device).

use super::*;

/// What one run segment measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentOutcome {
    pub(crate) ops: u64,
    pub(crate) bytes: u64,
    pub(crate) errors: u64,
    pub(crate) secs: f64,
    pub(crate) lat_avg_us: f64,
    pub(crate) q_us: [f64; 4],
    /// Why it ended early, if it did.
    pub(crate) fatal: Option<String>,
    /// The device went away (ENODEV/ENXIO, or its node vanished) during the segment.
    pub(crate) device_gone: bool,
}

pub(crate) struct Segment<'a> {
    pub(crate) job: &'a JobSpec,
    pub(crate) rate_iops: Option<f64>,
    pub(crate) duration: Option<Duration>,
    /// Stop each worker after this many passes over its stripe (preconditioning, verify
    /// sweeps); `None`: run for `duration`.
    pub(crate) limit_passes: Option<u32>,
    /// Preconditioning: each worker starts where this says its stripe's walk got to, writes
    /// only the rest of its `limit_passes` passes, and records its progress here.
    pub(crate) progress: Option<Arc<PrecondLive>>,
}

/// One worker's rates (read IOPS, write IOPS, read and write bytes per second) over the
/// intervals its reports cover, measured by the worker's own clock: the operations a report
/// adds over the real length of the interval it covers. A report covering less than the
/// minimum span (a short final tail, or one right after another) is folded into the next, so
/// no rate divides a few operations by a tiny time.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateWindow {
    /// Start of the span not yet turned into a rate, and the worker's counters then.
    pub(crate) base: Option<(Instant, [u64; 4])>,
    pub(crate) rates: [f64; 4],
}

impl RateWindow {
    pub(crate) fn update(&mut self, r: &WorkerReport, min_span: Duration) {
        let cum = [r.read.ops, r.write.ops, r.read.bytes, r.write.bytes];
        // A worker's counters start at zero with its first interval.
        let start = r.ended.checked_sub(r.interval).unwrap_or(r.ended);
        let (t0, c0) = *self.base.get_or_insert((start, [0; 4]));
        let span = r.ended.saturating_duration_since(t0);
        if span.is_zero() || span < min_span {
            return;
        }
        let secs = span.as_secs_f64();
        for (rate, (c, b)) in self.rates.iter_mut().zip(cum.iter().zip(c0)) {
            *rate = c.saturating_sub(b) as f64 / secs;
        }
        self.base = Some((r.ended, cum));
    }
}

impl Runner {
    /// Run one job with its workers until the duration passes, every worker hits its byte limit,
    /// the device goes away, or the target is stopped. `on_interval(ops_delta, now)` runs after
    /// each stats interval.
    pub(crate) fn run_segment_once(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, String> {
        let job = seg.job;
        let workers = job.workers.max(1) as usize;
        self.segment_counter += 1;
        with_snapshot(&self.snapshot, |s| {
            s.profile = job.name.clone();
            s.jobs.entry(job.name.clone()).or_default().active = true;
        });
        let verify = read_snapshot(&self.snapshot).verify;
        // Bounded: with recycling a worker queues at most MAX_OUTSTANDING reports plus its
        // final one, and sends into a preallocated channel never allocate.
        let (tx, rx) = mpsc::sync_channel::<WorkerReport>(worker::report_capacity(workers));
        let seg_stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(workers);
        // Per worker: its used histograms go back to it (no allocation per interval, and the
        // worker coalesces while its reports are still queued).
        let mut recycle: Vec<mpsc::Sender<(Histogram<u64>, Histogram<u64>)>> =
            Vec::with_capacity(workers);
        let base_seed = seed_for(&self.spec.name, self.segment_counter);
        for i in 0..workers {
            let mut plan = WorkerPlan {
                index: i,
                job: job.clone(),
                fd: self.fd.clone(),
                region_start: 0,
                region_len: self.region_len,
                engine: self.spec.engine,
                rate_iops: seg.rate_iops.map(|r| r / workers as f64),
                limit_bytes: None,
                seed: base_seed.wrapping_add(i as u64),
                report_interval: self.opts.stats_interval,
                stop: seg_stop.clone(),
            };
            let (back_tx, back_rx) = mpsc::channel();
            recycle.push(back_tx);
            let mut wopts = WorkerOptions {
                live: Some(self.live.register()),
                recycle: Some(back_rx),
                ..WorkerOptions::default()
            };
            if let (Some(v), Some(mode)) = (&verify, self.hook_mode()) {
                // Workers of a job don't coordinate, so with verification each owns a disjoint
                // stripe of the region (a single-worker view of it).
                (plan.region_start, plan.region_len, plan.job.workers) =
                    self.worker_region(job, i, true);
                let hook = VerifyHook::new(&self.spec.name, v.map.clone(), v.counters.clone(), 512);
                wopts.hook = Some(match mode {
                    HookMode::Full => Box::new(hook) as Box<dyn BlockHook>,
                    HookMode::StampOnly => Box::new(StampOnly(hook)),
                });
            }
            plan.limit_bytes = seg.limit_passes.map(|p| {
                worker::stripe_bounds(
                    plan.region_start,
                    plan.region_len,
                    plan.job.workers,
                    i,
                    worker::job_align(&plan.job),
                )
                .1 * p as u64
            });
            if let Some(pl) = &seg.progress
                && let (Some(&(start, len)), Some(cell), Some(passes)) =
                    (pl.stripes.get(i), pl.done.get(i), seg.limit_passes)
            {
                // Continue this worker's walk where it got to (an earlier run, or before the
                // device went away) and write only the rest of its passes.
                debug_assert_eq!(
                    (start, len),
                    self.worker_stripe(job, i, verify.is_some() && self.hook_mode().is_some())
                );
                let sp = StripeProgress {
                    start,
                    len,
                    done_bytes: cell.load(Ordering::Acquire),
                };
                let (pos, left) = sp.resume_point(passes, pl.block_size);
                wopts.seq_start = pos;
                plan.limit_bytes = Some(left);
                wopts.hook = Some(Box::new(ProgressHook::new(
                    wopts.hook.take(),
                    pl.clone(),
                    i,
                    sp.clamped_done(passes, pl.block_size),
                    job.iodepth,
                )));
            }
            match worker::spawn_with(plan, wopts, tx.clone()) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    seg_stop.store(true, Ordering::SeqCst);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(format!("spawning worker thread failed: {e}"));
                }
            }
        }
        drop(tx);

        let base = read_snapshot(&self.snapshot)
            .jobs
            .get(&job.name)
            .map(|j| (j.read.clone(), j.write.clone()))
            .unwrap_or_default();
        let mut last: Vec<Option<(OpCounters, OpCounters)>> = vec![None; workers];
        let mut engine: Option<&'static str> = None;
        let mut seg_read_hist: Histogram<u64> = new_hdr();
        let mut seg_write_hist: Histogram<u64> = new_hdr();
        let mut iv_read_hist: Histogram<u64> = new_hdr();
        let mut iv_write_hist: Histogram<u64> = new_hdr();
        let started = Instant::now();
        let mut last_tick = started;
        let mut last_ops = 0u64;
        // Per worker: its rates over the intervals its reports cover, by its own clock.
        let mut rates = vec![RateWindow::default(); workers];
        let mut done = vec![false; workers];
        let mut stop_sent = false;
        let interval = self.opts.stats_interval;
        let mut fatal: Option<String> = None;
        let mut device_gone = false;
        let mut last_gone_errs = 0u64;

        loop {
            let now = Instant::now();
            let deadline_hit = seg
                .duration
                .is_some_and(|d| now.duration_since(started) >= d);
            if !stop_sent && (deadline_hit || self.stopping() || fatal.is_some() || device_gone) {
                seg_stop.store(true, Ordering::SeqCst);
                stop_sent = true;
            }
            let wait = interval.saturating_sub(now.duration_since(last_tick));
            let wait = match seg.duration {
                Some(d) if !stop_sent => wait.min(d.saturating_sub(now.duration_since(started))),
                _ => wait,
            }
            .max(Duration::from_millis(1));
            let mut take = |r: WorkerReport| {
                if engine.is_none() {
                    engine = Some(r.engine);
                }
                let _ = iv_read_hist.add(&r.read_hist);
                let _ = iv_write_hist.add(&r.write_hist);
                if r.worker < workers {
                    if r.done {
                        done[r.worker] = true;
                    }
                    rates[r.worker].update(&r, interval / 2);
                    last[r.worker] = Some((r.read, r.write));
                    let _ = recycle[r.worker].send((r.read_hist, r.write_hist));
                }
            };
            if let Ok(r) = rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                take(r);
            }
            // Whether every worker has exited is read before the channel is drained, so a
            // worker's last report (sent before it exited) is always taken and counted.
            let finished = handles
                .iter()
                .all(|h: &std::thread::JoinHandle<_>| h.is_finished());
            while let Ok(r) = rx.try_recv() {
                take(r);
            }
            let all_done = done.iter().all(|d| *d) || finished;
            let now = Instant::now();
            if now.duration_since(last_tick) >= interval || all_done {
                // Aggregate cumulative counters of this segment.
                let mut sr = OpCounters::default();
                let mut sw = OpCounters::default();
                for (r, w) in last.iter().flatten() {
                    sr.merge(r);
                    sw.merge(w);
                }
                let el = now.duration_since(last_tick).as_secs_f64().max(1e-9);
                let ops = sr.ops + sw.ops;
                let d_ops = ops - last_ops.min(ops);
                let rq = quantiles(&iv_read_hist);
                let wq = quantiles(&iv_write_hist);
                // Workers still running: a finished one does no more I/O.
                let mut rate = [0.0f64; 4];
                for (w, _) in rates.iter().zip(&done).filter(|(_, d)| !**d) {
                    for (a, b) in rate.iter_mut().zip(w.rates) {
                        *a += b;
                    }
                }
                let mut tr = base.0.clone();
                tr.merge(&sr);
                let mut tw = base.1.clone();
                tw.merge(&sw);
                let name = job.name.clone();
                let eng = engine;
                with_snapshot(&self.snapshot, |s| {
                    if let Some(e) = eng {
                        s.engine = Some(e.to_string());
                    }
                    let j = s.jobs.entry(name).or_default();
                    j.read = tr;
                    j.write = tw;
                    [j.read_iops, j.write_iops, j.read_bw, j.write_bw] = rate;
                    // A tail shorter than half an interval (the segment ended just after a
                    // tick) has too few operations for quantiles: keep the last full interval's.
                    if !(all_done && el < interval.as_secs_f64() / 2.0) {
                        j.read_q = rq;
                        j.write_q = wq;
                    }
                    s.iops = j.read_iops + j.write_iops;
                });
                if let Some(max) = self.spec.max_errors {
                    let all: u64 = read_snapshot(&self.snapshot)
                        .jobs
                        .values()
                        .map(|j| j.read.errors.total() + j.write.errors.total())
                        .sum();
                    if all >= max && fatal.is_none() {
                        fatal = Some(format!(
                            "stopped after {all} I/O errors (max_errors = {max})"
                        ));
                    }
                }
                // ENODEV/ENXIO, or errors while the device node is gone: the device went away.
                let gone_errs: u64 = [&sr, &sw]
                    .iter()
                    .map(|c| c.errors.0[libc::ENODEV as usize] + c.errors.0[libc::ENXIO as usize])
                    .sum();
                let all_errs = sr.errors.total() + sw.errors.total();
                if self.identity.is_some()
                    && !device_gone
                    && (gone_errs > last_gone_errs
                        || (all_errs > 0 && !crate::safety::is_block_device(&self.spec.path)))
                {
                    device_gone = true;
                }
                last_gone_errs = gone_errs;
                if self.last_results_save.elapsed() >= RESULTS_SAVE_INTERVAL {
                    self.save_results();
                }
                if let Some(v) = &verify
                    && self.spec.verify_fatal
                    && fatal.is_none()
                    && v.counters.tripped.load(Ordering::Relaxed)
                {
                    fatal = Some(format!(
                        "data verification failed ({} mismatches; see the log); verify_fatal stops the target",
                        v.counters.total()
                    ));
                }
                on_interval(d_ops, now);
                let _ = seg_read_hist.add(&iv_read_hist);
                let _ = seg_write_hist.add(&iv_write_hist);
                iv_read_hist.reset();
                iv_write_hist.reset();
                last_ops = ops;
                last_tick = now;
            }
            if all_done {
                break;
            }
        }
        let mut worker_fatal = None;
        for h in handles {
            match h.join() {
                Ok(Ok(exit)) => {
                    if let ExitReason::Fatal(m) = exit.reason {
                        worker_fatal = Some(m);
                    }
                }
                Ok(Err(e)) => worker_fatal = Some(e.to_string()),
                Err(_) => worker_fatal = Some("worker thread panicked".into()),
            }
        }
        with_snapshot(&self.snapshot, |s| s.deactivate_job(&job.name));
        let secs = started.elapsed().as_secs_f64();
        let mut sr = OpCounters::default();
        let mut sw = OpCounters::default();
        for (r, w) in last.iter().flatten() {
            sr.merge(r);
            sw.merge(w);
        }
        let ops = sr.ops + sw.ops;
        let mut all_hist = seg_read_hist;
        let _ = all_hist.add(&seg_write_hist);
        let q = quantiles(&all_hist).unwrap_or([0.0; 4]);
        Ok(SegmentOutcome {
            ops,
            bytes: sr.bytes + sw.bytes,
            errors: sr.errors.total() + sw.errors.total(),
            secs,
            lat_avg_us: if ops > 0 {
                (sr.lat_sum_ns + sw.lat_sum_ns) as f64 / ops as f64 / 1000.0
            } else {
                0.0
            },
            q_us: q.map(|s| s * 1e6),
            fatal: if device_gone {
                None
            } else {
                fatal.or(worker_fatal)
            },
            device_gone,
        })
    }

    /// [`Self::run_segment_once`], pausing while the device is gone and resuming on the same
    /// device (checked by serial/WWN) when it returns.
    pub(crate) fn run_segment(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, String> {
        let started = Instant::now();
        let mut total = SegmentOutcome::default();
        // After the device returns, a precondition continues at its workers' recorded positions
        // (`seg.progress`), a verify sweep starts over, and a timed segment runs for what is
        // left of its duration.
        let limit = seg.limit_passes;
        loop {
            let duration = seg.duration.map(|d| d.saturating_sub(started.elapsed()));
            let o = self.run_segment_once(
                Segment {
                    job: seg.job,
                    rate_iops: seg.rate_iops,
                    duration,
                    limit_passes: limit,
                    progress: seg.progress.clone(),
                },
                on_interval,
            )?;
            let w = total.ops as f64;
            let n = o.ops as f64;
            if w + n > 0.0 {
                total.lat_avg_us = (total.lat_avg_us * w + o.lat_avg_us * n) / (w + n);
                for i in 0..4 {
                    total.q_us[i] = total.q_us[i].max(o.q_us[i]);
                }
            }
            total.ops += o.ops;
            total.bytes += o.bytes;
            total.errors += o.errors;
            total.secs += o.secs;
            total.fatal = o.fatal;
            if !o.device_gone || self.stopping() {
                return Ok(total);
            }
            self.wait_for_device()?;
            if seg.duration.is_some_and(|d| started.elapsed() >= d) {
                return Ok(total);
            }
        }
    }
}
