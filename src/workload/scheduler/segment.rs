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
    /// The device went away (ENODEV/ENXIO, or its node vanished) during the segment.
    pub(crate) device_gone: bool,
    /// A target spanning several devices: what the segment did on each member.
    pub(crate) members: Vec<crate::model::results::MemberFigures>,
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
    /// The verification pass under the computed state: worker `i` reads back, in order, the
    /// positions slice `i` of this leg wrote (the job is a read-only job of the leg's block
    /// size, access and worker count), then stops.
    pub(crate) read_back: Option<Arc<Leg>>,
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

type WorkerHandle = std::thread::JoinHandle<Result<worker::WorkerExit, worker::WorkerError>>;
type HistPair = (Histogram<u64>, Histogram<u64>);

/// A segment's workers while they run: their threads, the bounded channel of their reports,
/// and the way back for each worker's used histograms (no allocation per interval, and a
/// worker coalesces while its reports are still queued).
struct Crew {
    handles: Vec<WorkerHandle>,
    rx: mpsc::Receiver<WorkerReport>,
    recycle: Vec<mpsc::SyncSender<HistPair>>,
    stop: Arc<AtomicBool>,
}

impl Crew {
    /// Wait for the workers; the last fatal reason any of them gave.
    fn join(self) -> Option<RunError> {
        let mut worker_fatal = None;
        for h in self.handles {
            match h.join() {
                Ok(Ok(exit)) => {
                    if let ExitReason::Fatal(m) = exit.reason {
                        worker_fatal = Some(RunError::WorkerFatal(m));
                    }
                }
                Ok(Err(e)) => worker_fatal = Some(RunError::Worker(e)),
                Err(_) => worker_fatal = Some(RunError::WorkerPanicked),
            }
        }
        worker_fatal
    }
}

/// What a segment has gathered from its workers' reports.
struct Tally {
    /// The job's cumulative counters before this segment.
    base: (OpCounters, OpCounters),
    /// Each worker's latest cumulative counters.
    last: Vec<Option<(OpCounters, OpCounters)>>,
    /// The job's worker CPU before this segment, each worker's latest, and their sum when the
    /// last interval closed.
    cpu_base: crate::stats::CpuTime,
    cpu_last: Vec<crate::stats::CpuTime>,
    cpu_rolled: crate::stats::CpuTime,
    engine: Option<&'static str>,
    seg_read_hist: Histogram<u64>,
    seg_write_hist: Histogram<u64>,
    iv_read_hist: Histogram<u64>,
    iv_write_hist: Histogram<u64>,
    /// Per worker: its rates over the intervals its reports cover, by its own clock.
    rates: Vec<RateWindow>,
    done: Vec<bool>,
    /// Per worker: a report arrived since the last interval closed.
    reported: Vec<bool>,
    last_ops: u64,
    last_tick: Instant,
    /// A target spanning several devices: how many members (worker `i` is on member `i mod
    /// n`), and their cumulative figures before this segment. `0` and empty otherwise.
    spread: usize,
    member_base: Vec<crate::model::results::MemberFigures>,
}

impl Tally {
    fn new(base: (OpCounters, OpCounters), workers: usize, now: Instant) -> Tally {
        Tally {
            base,
            last: vec![None; workers],
            cpu_base: crate::stats::CpuTime::default(),
            cpu_last: vec![crate::stats::CpuTime::default(); workers],
            cpu_rolled: crate::stats::CpuTime::default(),
            engine: None,
            seg_read_hist: new_hdr(),
            seg_write_hist: new_hdr(),
            iv_read_hist: new_hdr(),
            iv_write_hist: new_hdr(),
            rates: vec![RateWindow::default(); workers],
            done: vec![false; workers],
            reported: vec![false; workers],
            last_ops: 0,
            last_tick: now,
            spread: 0,
            member_base: Vec::new(),
        }
    }

    /// This segment's figures on each member of a spanning target (empty otherwise): the sums
    /// of the workers on it.
    fn member_sums(&self) -> Vec<crate::model::results::MemberFigures> {
        let mut out = vec![crate::model::results::MemberFigures::default(); self.spread];
        if self.spread == 0 {
            return out;
        }
        for (i, (r, w)) in self
            .last
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.as_ref().map(|l| (i, l)))
        {
            let m = &mut out[i % self.spread];
            m.read_ops += r.ops;
            m.write_ops += w.ops;
            m.read_bytes += r.bytes;
            m.write_bytes += w.bytes;
            m.errors += r.errors.total() + w.errors.total();
        }
        out
    }

    /// Each member's rates: the summed rates of its workers still running.
    fn member_rates(&self) -> Vec<[f64; 4]> {
        let mut out = vec![[0.0f64; 4]; self.spread];
        if self.spread == 0 {
            return out;
        }
        for (i, (w, _)) in self
            .rates
            .iter()
            .zip(&self.done)
            .enumerate()
            .filter(|(_, (_, d))| !**d)
        {
            for (a, b) in out[i % self.spread].iter_mut().zip(w.rates) {
                *a += b;
            }
        }
        out
    }

    fn take(
        &mut self,
        r: WorkerReport,
        recycle: &[mpsc::SyncSender<HistPair>],
        interval: Duration,
    ) {
        if self.engine.is_none() {
            self.engine = Some(r.engine);
        }
        let _ = self.iv_read_hist.add(&r.read_hist);
        let _ = self.iv_write_hist.add(&r.write_hist);
        if r.worker < self.last.len() {
            if r.done {
                self.done[r.worker] = true;
            }
            self.reported[r.worker] = true;
            self.rates[r.worker].update(&r, interval / 2);
            self.cpu_last[r.worker] = r.cpu;
            self.last[r.worker] = Some((r.read, r.write));
            // Never blocks: a worker has at most MAX_OUTSTANDING pairs out (a full channel
            // drops the pair here, and the worker coalesces until one comes back).
            let _ = recycle[r.worker].try_send((r.read_hist, r.write_hist));
        }
    }

    /// Take what the workers sent, waiting up to `wait` for the first report. Returns whether
    /// every worker is done.
    fn collect(&mut self, crew: &Crew, wait: Duration, interval: Duration) -> bool {
        if let Ok(r) = crew.rx.recv_timeout(wait.min(Duration::from_millis(100))) {
            self.take(r, &crew.recycle, interval);
        }
        // Whether every worker has exited is read before the channel is drained, so a
        // worker's last report (sent before it exited) is always taken and counted.
        let finished = crew.handles.iter().all(|h| h.is_finished());
        while let Ok(r) = crew.rx.try_recv() {
            self.take(r, &crew.recycle, interval);
        }
        self.done.iter().all(|d| *d) || finished
    }

    /// This segment's cumulative read and write counters over all workers.
    fn sums(&self) -> (OpCounters, OpCounters) {
        let mut sr = OpCounters::default();
        let mut sw = OpCounters::default();
        for (r, w) in self.last.iter().flatten() {
            sr.merge(r);
            sw.merge(w);
        }
        (sr, sw)
    }

    /// The summed rates of the workers still running: a finished one does no more I/O.
    fn running_rates(&self) -> [f64; 4] {
        let mut rate = [0.0f64; 4];
        for (w, _) in self.rates.iter().zip(&self.done).filter(|(_, d)| !**d) {
            for (a, b) in rate.iter_mut().zip(w.rates) {
                *a += b;
            }
        }
        rate
    }

    /// This segment's worker CPU so far, all workers.
    fn cpu_sum(&self) -> crate::stats::CpuTime {
        self.cpu_last
            .iter()
            .fold(crate::stats::CpuTime::default(), |a, c| a.plus(c))
    }

    /// Worker CPU per completed I/O since the last interval closed, in nanoseconds (user,
    /// kernel); `None` when no I/O completed.
    fn cpu_per_io_ns(&self, ops: u64) -> Option<(f64, f64)> {
        let d_ops = ops.saturating_sub(self.last_ops);
        let d = self.cpu_sum().since(&self.cpu_rolled);
        (d_ops > 0).then(|| {
            (
                d.user_ns as f64 / d_ops as f64,
                d.sys_ns as f64 / d_ops as f64,
            )
        })
    }

    /// Close the interval at `now`: its histograms join the segment's.
    /// Whether the interval that began at the last tick may close at `now`: every running
    /// worker has reported since (and half an interval has passed, so that a worker reporting
    /// twice in quick succession does not close two), or the interval is a quarter overdue (a
    /// worker stuck in a long I/O does not hold the figures back), or every worker is done.
    ///
    /// Why on the reports and not on a clock of its own (issue 35): the workers report by
    /// their own clocks, which start a few milliseconds after the segment's. A tick on the
    /// segment's clock then always came just before the reports it was waiting for, so every
    /// published figure was one interval old, and a target's first figures appeared only after
    /// two intervals. Closing when the reports are in publishes each interval as it ends, with
    /// one report per worker in it.
    fn interval_due(&self, now: Instant, interval: Duration, all_done: bool) -> bool {
        let since = now.duration_since(self.last_tick);
        let every_reported = self.reported.iter().zip(&self.done).all(|(r, d)| *r || *d);
        all_done || since >= interval + interval / 4 || (every_reported && since >= interval / 2)
    }

    /// When the current interval must close at the latest (see [`Tally::interval_due`]).
    fn interval_deadline(&self, interval: Duration) -> Instant {
        self.last_tick + interval + interval / 4
    }

    fn roll(&mut self, ops: u64, now: Instant) {
        self.reported.iter_mut().for_each(|r| *r = false);
        self.cpu_rolled = self.cpu_sum();
        let _ = self.seg_read_hist.add(&self.iv_read_hist);
        let _ = self.seg_write_hist.add(&self.iv_write_hist);
        self.iv_read_hist.reset();
        self.iv_write_hist.reset();
        self.last_ops = ops;
        self.last_tick = now;
    }

    fn outcome(self, secs: f64, device_gone: bool) -> SegmentOutcome {
        let (sr, sw) = self.sums();
        let members = self.member_sums();
        let ops = sr.ops + sw.ops;
        let mut all_hist = self.seg_read_hist;
        let _ = all_hist.add(&self.seg_write_hist);
        let q = quantiles(&all_hist).unwrap_or([0.0; 4]);
        SegmentOutcome {
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
            device_gone,
            members,
        }
    }
}

/// Log a segment's failed passthrough commands by NVMe status: `new` since the last line, and
/// each status's count so far, named as `sct 0x2 sc 0x81 (unrecovered read error)`.
fn log_nvme_statuses(target: &str, sr: &OpCounters, sw: &OpCounters, new: u64) {
    for (op, c) in [("read", sr), ("write", sw)] {
        for (st, n) in c.errors.nvme().iter() {
            tracing::warn!(target_name = %target, op, count = n, new,
                "{op} commands failed with NVMe status sct {:#x} sc {:#x} ({})",
                crate::nvme::status_sct(st), crate::nvme::status_sc(st), crate::nvme::status_name(st));
        }
        if c.errors.nvme().other > 0 {
            tracing::warn!(target_name = %target, op, count = c.errors.nvme().other,
                "{op} commands failed with other NVMe statuses");
        }
    }
}

/// Why a segment stops early.
#[derive(Default)]
struct Stops {
    fatal: Option<RunError>,
    device_gone: bool,
    last_gone_errs: u64,
    /// NVMe statuses already logged (passthrough), so each interval logs only new failures.
    last_nvme_errs: u64,
}

impl Runner {
    /// Run one job with its workers until the duration passes, every worker hits its byte limit,
    /// the device goes away, or the target is stopped. `on_interval(ops_delta, now)` runs after
    /// each stats interval. A stop condition (`max_errors`, `verify_fatal`) or a worker's fatal
    /// error is the `Err`, unless the device went away (then the outcome says so).
    pub(crate) fn run_segment_once(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, RunError> {
        let job = seg.job;
        let workers = job.workers.max(1) as usize;
        self.segment_counter += 1;
        self.snapshot.update(|s| {
            s.profile = job.name.clone();
            s.jobs.entry(job.name.clone()).or_default().active = true;
        });
        let verify = self.snapshot.fixed.verify.clone();
        let crew = self.spawn_workers(&seg, verify.as_ref())?;
        // The workers run from now on: say so at once, not at the first interval's figures.
        self.snapshot.update(|s| {
            s.jobs.entry(job.name.clone()).or_default().workers = workers;
        });
        let (base, cpu_base) = self.snapshot.view(|s| {
            s.jobs
                .get(&job.name)
                .map(|j| ((j.read.clone(), j.write.clone()), j.cpu))
                .unwrap_or_default()
        });
        let started = Instant::now();
        let mut tally = Tally::new(base, workers, started);
        tally.cpu_base = cpu_base;
        tally.spread = self.member_fds.len();
        tally.member_base = self.snapshot.view(|s| s.members.clone());
        let mut stops = Stops::default();
        let mut stop_sent = false;
        let interval = self.opts.stats_interval;
        loop {
            let now = Instant::now();
            let deadline_hit = seg
                .duration
                .is_some_and(|d| now.duration_since(started) >= d);
            if !stop_sent
                && (deadline_hit || self.stopping() || stops.fatal.is_some() || stops.device_gone)
            {
                crew.stop.store(true, Ordering::SeqCst);
                stop_sent = true;
            }
            let wait = tally
                .interval_deadline(interval)
                .saturating_duration_since(now);
            let wait = match seg.duration {
                Some(d) if !stop_sent => wait.min(d.saturating_sub(now.duration_since(started))),
                _ => wait,
            }
            .max(Duration::from_millis(1));
            let all_done = tally.collect(&crew, wait, interval);
            let now = Instant::now();
            if tally.interval_due(now, interval, all_done) {
                let (sr, sw) = tally.sums();
                let ops = sr.ops + sw.ops;
                let d_ops = ops - tally.last_ops.min(ops);
                self.publish_interval(job, &tally, (&sr, &sw), all_done, now);
                self.check_stops(&mut stops, (&sr, &sw), verify.as_ref());
                if self.last_results_save.elapsed() >= super::results_save_interval() {
                    self.save_results();
                } else {
                    self.judge_live();
                }
                on_interval(d_ops, now);
                tally.roll(ops, now);
            }
            if all_done {
                break;
            }
        }
        let worker_fatal = crew.join();
        self.snapshot.update(|s| {
            s.deactivate_job(&job.name);
            s.member_rates.iter_mut().for_each(|r| *r = [0.0; 4]);
        });
        let outcome = tally.outcome(started.elapsed().as_secs_f64(), stops.device_gone);
        match stops.fatal.or(worker_fatal) {
            Some(e) if !stops.device_gone => Err(e),
            _ => Ok(outcome),
        }
    }

    /// Spawn the segment's workers, each with its plan and options.
    fn spawn_workers(
        &mut self,
        seg: &Segment<'_>,
        verify: Option<&VerifyCtx>,
    ) -> Result<Crew, RunError> {
        let workers = seg.job.workers.max(1) as usize;
        // Bounded: with recycling a worker queues at most MAX_OUTSTANDING reports plus its
        // final one, and sends into a preallocated channel never allocate.
        let (tx, rx) = mpsc::sync_channel::<WorkerReport>(worker::report_capacity(workers));
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(workers);
        let mut recycle: Vec<mpsc::SyncSender<HistPair>> = Vec::with_capacity(workers);
        let base_seed = seed_for(&self.spec.name, self.segment_counter);
        let leg = self.walk_leg(seg, verify)?;
        for i in 0..workers {
            // Bounded too, so that the worker's receive never frees: an unbounded channel's
            // receiver frees each block of a few dozen messages, and a free takes the lock of
            // the allocator arena the block came from. A worker at nice 19 preempted while
            // holding it (hundreds of runnable workers on two cores: seconds before it runs
            // again) stalled every daemon thread that allocated from that arena: a render of
            // /metrics or the status page blocked for 3-4 s (issue 35, bench-targets).
            let (back_tx, back_rx) = mpsc::sync_channel(worker::MAX_OUTSTANDING + 1);
            recycle.push(back_tx);
            let (plan, wopts) =
                self.worker_plan(seg, (verify, leg.as_ref()), i, base_seed, &stop, back_rx);
            match worker::spawn_with(plan, wopts, tx.clone()) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    stop.store(true, Ordering::SeqCst);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(RunError::Spawn(e));
                }
            }
        }
        Ok(Crew {
            handles,
            rx,
            recycle,
            stop,
        })
    }

    /// Under the computed verification state, a segment that writes is a new leg of the walk
    /// (`model::walk`): sequential jobs walk each worker's stripe from where a resumed
    /// precondition got to, random ones a slice of the leg's permutation each. `None` for the
    /// stored map, no verification, or a segment that only reads.
    fn walk_leg(
        &self,
        seg: &Segment<'_>,
        verify: Option<&VerifyCtx>,
    ) -> Result<Option<Arc<Leg>>, RunError> {
        let (Some(v), Some(_)) = (verify, self.hook_mode()) else {
            return Ok(None);
        };
        let VerifyState::Walk(w) = &v.state else {
            return Ok(None);
        };
        let job = seg.job;
        let bs = match walk_fits(job) {
            Some(Some(bs)) => bs as u64,
            Some(None) => return Ok(None),
            None => {
                return Err(RunError::WorkerFatal(format!(
                    "job {}: its writes cannot be followed by the computed verification state",
                    job.name
                )));
            }
        };
        let workers = job.workers.max(1) as u64;
        let slices: Vec<(u64, u64, u64)> = match &job.access {
            Access::Sequential => (0..workers as usize)
                .map(|i| {
                    let (start, len) = self.worker_stripe(job, i, true);
                    let from = match (&seg.progress, seg.limit_passes) {
                        (Some(pl), Some(passes)) => match (pl.stripes.get(i), pl.done.get(i)) {
                            (Some(&(start, len)), Some(cell)) => {
                                StripeProgress {
                                    start,
                                    len,
                                    done_bytes: cell.load(Ordering::Acquire),
                                }
                                .resume_point(passes, pl.block_size)
                                .0
                            }
                            _ => 0,
                        },
                        _ => 0,
                    };
                    (start / bs, len / bs, from / bs)
                })
                .collect(),
            Access::Random { skew } => {
                let blocks = w.units() * VERIFY_UNIT as u64 / bs;
                let split = |from: u64, n: u64| {
                    (0..workers).map(move |i| {
                        let (a, b) = (n * i / workers, n * (i + 1) / workers);
                        (from + a, b - a, 0)
                    })
                };
                match hot_band_blocks(skew, blocks, workers) {
                    // The hot band's slices first (worker i owns slices i and workers + i).
                    Some(h) => split(0, h).chain(split(h, blocks - h)).collect(),
                    None => split(0, blocks).collect(),
                }
            }
        };
        w.begin_leg(&crate::model::walk::LegPlan {
            block_units: (bs / VERIFY_UNIT as u64) as u32,
            permuted: matches!(job.access, Access::Random { .. }),
            slices,
        })
        .map(Some)
        .map_err(|e| RunError::WorkerFatal(format!("job {}: {e}", job.name)))
    }

    /// Worker `i`'s plan and options: its region (a stripe of its own under verification), its
    /// share of the rate, its byte limit, and its hooks (verification, precondition progress).
    fn worker_plan(
        &self,
        seg: &Segment<'_>,
        (verify, leg): (Option<&VerifyCtx>, Option<&Arc<Leg>>),
        i: usize,
        base_seed: u64,
        stop: &Arc<AtomicBool>,
        back_rx: mpsc::Receiver<HistPair>,
    ) -> (WorkerPlan, WorkerOptions) {
        let job = seg.job;
        let workers = job.workers.max(1) as usize;
        let mut plan = WorkerPlan {
            index: i,
            job: job.clone(),
            fd: match self.member_fds.len() {
                0 => self.fd.clone(),
                n => self.member_fds[i % n].clone(),
            },
            region_start: 0,
            region_len: self.region_len,
            engine: self.spec.engine,
            rate_iops: seg.rate_iops.map(|r| r / workers as f64),
            limit_bytes: None,
            seed: base_seed.wrapping_add(i as u64),
            report_interval: self.opts.stats_interval,
            stop: stop.clone(),
        };
        let mut wopts = WorkerOptions {
            live: Some(self.live.register()),
            recycle: Some(back_rx),
            // One per descriptor, in the order of `member_fds` (or just `fd`'s): as `fd` above.
            passthru: self.passthru.get(i % self.passthru.len().max(1)).cloned(),
            ..WorkerOptions::default()
        };
        if !self.member_fds.is_empty() {
            // A spanning target: worker `i` is on member `i mod n` and walks its own stripe of
            // that member's region (the stripes of the workers on one member are disjoint).
            (plan.region_start, plan.region_len, plan.job.workers) =
                self.worker_region(job, i, false);
        }
        if let (Some(v), Some(mode)) = (verify, self.hook_mode()) {
            // Workers of a job don't coordinate, so with verification each owns a disjoint
            // stripe of the region (a single-worker view of it).
            (plan.region_start, plan.region_len, plan.job.workers) =
                self.worker_region(job, i, true);
            wopts.hook = Some(match &v.state {
                VerifyState::Stored(map) => {
                    let hook =
                        VerifyHook::new(&self.spec.name, map.clone(), v.counters.clone(), 512);
                    match mode {
                        HookMode::Full => Box::new(hook) as Box<dyn BlockHook>,
                        HookMode::StampOnly => Box::new(StampOnly(hook)),
                    }
                }
                VerifyState::Walk(w) => {
                    if let Some(place) = leg.and_then(|leg| walk_place(leg, i, Some(job))) {
                        // A permuted leg: the worker's slice of positions is scattered over
                        // the whole region.
                        (plan.region_start, plan.region_len) = (0, self.region_len);
                        wopts.walk = Some(place);
                    }
                    Box::new(crate::workload::walk_hook::WalkHook::new(
                        &self.spec.name,
                        w.clone(),
                        leg.map(|l| {
                            let workers = job.workers.max(1) as usize;
                            (i, (l.slices.len() == 2 * workers).then_some(workers + i))
                        }),
                        mode == HookMode::Full,
                        v.counters.clone(),
                        512,
                    ))
                }
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
        if let Some(leg) = &seg.read_back {
            let s = leg.slice(i);
            let block = leg.block_units as u64 * VERIFY_UNIT as u64;
            match walk_place(leg, i, None) {
                Some(place) => {
                    (plan.region_start, plan.region_len) = (0, self.region_len);
                    wopts.walk = Some(place);
                }
                // A sequential leg's slice is the worker's stripe, in blocks.
                None => wopts.seq_start = s.from * block,
            }
            plan.limit_bytes = Some(s.written() * block);
        }
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
        (plan, wopts)
    }

    /// Publish an interval's figures in the snapshot: the job's cumulative counters, the rates
    /// of its running workers, and the interval's quantiles.
    fn publish_interval(
        &self,
        job: &JobSpec,
        tally: &Tally,
        (sr, sw): (&OpCounters, &OpCounters),
        all_done: bool,
        now: Instant,
    ) {
        let interval = self.opts.stats_interval;
        let el = now.duration_since(tally.last_tick).as_secs_f64().max(1e-9);
        let rq = quantiles(&tally.iv_read_hist);
        let wq = quantiles(&tally.iv_write_hist);
        let rate = tally.running_rates();
        let member_now = tally.member_sums();
        let member_rates = tally.member_rates();
        let mut members = tally.member_base.clone();
        for (m, now) in members.iter_mut().zip(&member_now) {
            m.add(now);
        }
        let mut tr = tally.base.0.clone();
        tr.merge(sr);
        let mut tw = tally.base.1.clone();
        tw.merge(sw);
        let name = job.name.clone();
        let eng = tally.engine;
        let cpu = tally.cpu_base.plus(&tally.cpu_sum());
        let cpu_per_io = tally.cpu_per_io_ns(sr.ops + sw.ops);
        let workers = tally.cpu_last.len();
        self.snapshot.update(|s| {
            if let Some(e) = eng {
                s.engine = Some(e.to_string());
            }
            let j = s.jobs.entry(name).or_default();
            j.read = tr;
            j.write = tw;
            j.cpu = cpu;
            j.workers = workers;
            // A short tail keeps the last full interval's figure, as the quantiles do.
            if !(all_done && el < interval.as_secs_f64() / 2.0) {
                j.cpu_per_io_ns = cpu_per_io;
            }
            [j.read_iops, j.write_iops, j.read_bw, j.write_bw] = rate;
            // A tail shorter than half an interval (the segment ended just after a
            // tick) has too few operations for quantiles: keep the last full interval's.
            if !(all_done && el < interval.as_secs_f64() / 2.0) {
                j.read_q = rq;
                j.write_q = wq;
            }
            s.iops = j.read_iops + j.write_iops;
            if !members.is_empty() {
                s.members = members;
                s.member_rates = member_rates;
            }
        });
    }

    /// The stop conditions checked each interval: max_errors, the device going away,
    /// verify_fatal.
    fn check_stops(
        &self,
        stops: &mut Stops,
        (sr, sw): (&OpCounters, &OpCounters),
        verify: Option<&VerifyCtx>,
    ) {
        if let Some(max) = self.spec.max_errors {
            let all: u64 = self.snapshot.view(TargetView::errors);
            if all >= max && stops.fatal.is_none() {
                stops.fatal = Some(RunError::TooManyErrors { errors: all, max });
            }
        }
        // ENODEV/ENXIO, or errors while the device node is gone: the device went away.
        let gone_errs: u64 = [sr, sw]
            .iter()
            .map(|c| c.errors.0[libc::ENODEV as usize] + c.errors.0[libc::ENXIO as usize])
            .sum();
        let all_errs = sr.errors.total() + sw.errors.total();
        if self.identity.is_some()
            && !stops.device_gone
            && (gone_errs > stops.last_gone_errs
                || (all_errs > 0 && !target_node_present(&self.spec)))
        {
            stops.device_gone = true;
        }
        stops.last_gone_errs = gone_errs;
        let nvme_errs = sr.errors.nvme().total() + sw.errors.nvme().total();
        if nvme_errs > stops.last_nvme_errs {
            log_nvme_statuses(&self.spec.name, sr, sw, nvme_errs - stops.last_nvme_errs);
        }
        stops.last_nvme_errs = nvme_errs;
        if let Some(v) = verify
            && self.spec.verify_fatal
            && stops.fatal.is_none()
            && v.counters.tripped.load(Ordering::Relaxed)
        {
            stops.fatal = Some(RunError::VerifyFatal {
                mismatches: v.counters.total(),
            });
        }
    }

    /// [`Self::run_segment_once`], pausing while the device is gone and resuming on the same
    /// device (checked by serial/WWN) when it returns.
    pub(crate) fn run_segment(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, RunError> {
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
                    read_back: seg.read_back.clone(),
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
            if total.members.len() < o.members.len() {
                total.members.resize(o.members.len(), Default::default());
            }
            for (t, m) in total.members.iter_mut().zip(&o.members) {
                t.add(m);
            }
            total.bytes += o.bytes;
            total.errors += o.errors;
            total.secs += o.secs;
            if !o.device_gone || self.stopping() {
                return Ok(total);
            }
            self.wait_for_device();
            if seg.duration.is_some_and(|d| started.elapsed() >= d) {
                return Ok(total);
            }
        }
    }
}

/// Whether the target's device node is still there: a block device, or for the passthrough
/// engines the namespace's generic device the target may be named by.
/// Worker `i`'s place in a permuted leg (`None` for a sequential one): its slice, and the
/// slice of the cold band when the leg has one, walked from where each starts. `job`: the
/// writing job the leg was begun for; `None` for a read-back (reads take the slice's positions
/// in order).
fn walk_place(leg: &Leg, i: usize, job: Option<&JobSpec>) -> Option<worker::WalkPlace> {
    let band = |s: &crate::model::walk::Slice| worker::Band {
        start: s.start,
        len: s.len,
        from: s.from,
    };
    let workers = job.map_or(0, |j| j.workers.max(1) as usize);
    let hot_share = match job.map(|j| &j.access) {
        Some(Access::Random {
            skew: Skew::HotBand { access, .. },
        }) => *access,
        _ => 1.0,
    };
    // Two slices per worker: the leg has a hot band (see `hot_band_blocks`).
    let cold =
        (workers > 0 && leg.slices.len() == 2 * workers).then(|| band(leg.slice(workers + i)));
    leg.perm.map(|perm| worker::WalkPlace {
        perm,
        band: band(leg.slice(i)),
        cold,
        hot_share,
        block: leg.block_units as u64 * VERIFY_UNIT as u64,
        in_order: job.is_none(),
    })
}

/// Blocks of a verified random leg's hot band (its first positions), when the job has one and
/// each band leaves every worker a slice; `None`: one band.
fn hot_band_blocks(skew: &Skew, blocks: u64, workers: u64) -> Option<u64> {
    let Skew::HotBand { fraction, .. } = skew else {
        return None;
    };
    let h = (blocks as f64 * fraction.clamp(0.0, 1.0)).ceil() as u64;
    (h >= workers && blocks.saturating_sub(h) >= workers).then_some(h)
}

pub(crate) fn target_node_present(spec: &TargetSpec) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(&spec.path).is_ok_and(|m| {
        m.file_type().is_block_device()
            || (spec.engine.is_passthru() && m.file_type().is_char_device())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(workers: usize, at: Instant) -> Tally {
        Tally::new(Default::default(), workers, at)
    }

    #[test]
    fn an_interval_closes_when_every_running_worker_has_reported() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(1);
        let mut t = tally(2, t0);
        let at = t0 + Duration::from_millis(1010);
        assert!(!t.interval_due(at, iv, false), "no report yet");
        t.reported[0] = true;
        assert!(!t.interval_due(at, iv, false), "worker 1 has not reported");
        t.reported[1] = true;
        assert!(
            t.interval_due(at, iv, false),
            "both reported, past half an interval"
        );
        // A finished worker does not hold the interval back.
        t.reported[1] = false;
        t.done[1] = true;
        assert!(t.interval_due(at, iv, false));
    }

    #[test]
    fn reports_close_no_interval_before_half_of_it_and_a_silent_worker_only_delays_it() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(1);
        let mut t = tally(1, t0);
        t.reported[0] = true;
        assert!(!t.interval_due(t0 + Duration::from_millis(400), iv, false));
        assert!(t.interval_due(t0 + Duration::from_millis(500), iv, false));
        t.reported[0] = false;
        assert!(!t.interval_due(t0 + Duration::from_millis(1249), iv, false));
        assert!(
            t.interval_due(t0 + Duration::from_millis(1250), iv, false),
            "overdue"
        );
        assert_eq!(t.interval_deadline(iv), t0 + Duration::from_millis(1250));
        assert!(t.interval_due(t0, iv, true), "every worker done");
    }

    #[test]
    fn closing_an_interval_forgets_its_reports() {
        let t0 = Instant::now();
        let iv = Duration::from_secs(1);
        let mut t = tally(1, t0);
        t.reported[0] = true;
        let at = t0 + Duration::from_millis(1001);
        assert!(t.interval_due(at, iv, false));
        t.roll(0, at);
        assert!(!t.interval_due(at + Duration::from_millis(600), iv, false));
    }
}
