//! Starting a target: opening and claiming it (its members, for a spanning target), the
//! region it exercises, the state it starts with (the checkpoint's position and figures, the
//! results file's record and maxima, the verification state) and the runner's thread.

use super::*;
use crate::workload::drive::DriveTracking;

/// Start a target: opens it on the calling thread (so refusals surface at start), then runs its
/// plan on a new thread, once `gate` (when given) opens; a cancelled gate runs nothing.
pub fn start(
    mut spec: TargetSpec,
    opts: RunOptions,
    global_stop: Arc<AtomicBool>,
    resume: Option<crate::model::checkpoint::TargetState>,
    resume_genmap: Option<GenMap>,
    gate: Option<crate::util::gate::Gate>,
) -> Result<TargetHandle, TargetError> {
    let (
        OpenedTarget {
            fd,
            size,
            is_block,
            identity,
        },
        member_fds,
        members,
    ) = open_for_plan(&mut spec)?;
    let region_len = region_of(&spec, size)?;
    let (view, drive, resume_at) =
        starting_view(&spec, resume.as_ref(), members, identity.as_ref());
    let mut fixed = fixed_of(&spec, is_block, identity.as_ref(), &view);
    if spec.verify != VerifyMode::Off {
        check_verify_block_sizes(&spec)?;
        fixed.verify = Some(verify_ctx(
            &spec,
            resume.as_ref(),
            resume_genmap,
            region_len,
        ));
    }
    let live = fixed.live.clone();
    let snapshot: SharedSnapshot = Arc::new(TargetShared::new(fixed, view, drive));
    let stop = Arc::new(AtomicBool::new(false));
    let (results, max_iops, soak_history) = starting_results(
        &spec,
        &opts,
        resume.is_some(),
        &snapshot,
        is_block,
        identity.as_ref(),
    );
    let mut runner = Runner {
        spec: spec.clone(),
        fd: Arc::new(fd),
        passthru: crate::engine::passthru::SharedNode::for_target(
            spec.engine,
            member_fds.len().max(1),
        ),
        member_fds,
        region_len,
        opts,
        snapshot: snapshot.clone(),
        stop: stop.clone(),
        global_stop,
        results,
        max_iops,
        segment_counter: 0,
        resume_at,
        resume_precondition: resume.as_ref().and_then(|r| r.precondition.clone()),
        resume_sweep: resume.as_ref().and_then(|r| r.sweep.clone()),
        identity,
        in_verify_pass: false,
        last_results_save: Instant::now(),
        plan_state: crate::model::verdict::PlanState::Running,
        last_live_judged: Instant::now(),
        warned_gates: Default::default(),
        live,
        soak_history,
        soak_entry: None,
    };
    let thread = std::thread::Builder::new()
        .name(format!("sched-{}", spec.name))
        .spawn(move || {
            // A cancelled start (another target was refused) runs nothing at all.
            if gate.is_none_or(|g| g.wait()) {
                runner.run();
            }
        })
        .map_err(|error| TargetError::Open {
            target: spec.name.clone(),
            path: spec.path.clone(),
            error,
        })?;
    Ok(TargetHandle {
        name: spec.name,
        snapshot,
        stop,
        thread: Some(thread),
    })
}

/// The target opened and claimed: a spanning target's members (see [`open_spanning`]), else
/// its one path (no member descriptors, no member figures).
fn open_for_plan(spec: &mut TargetSpec) -> Result<Spanning, TargetError> {
    if spec.is_spanning() {
        open_spanning(spec)
    } else {
        Ok((
            open_target(spec, plan_writes(spec))?,
            Vec::new(),
            Vec::new(),
        ))
    }
}

/// The scrape view a target starts with (the checkpoint's figures and position when it
/// resumes), its drive tracking, and the (phase index, seconds done) the plan resumes at.
fn starting_view(
    spec: &TargetSpec,
    resume: Option<&crate::model::checkpoint::TargetState>,
    members: Vec<crate::model::results::MemberFigures>,
    identity: Option<&crate::safety::DeviceIdentity>,
) -> (TargetView, DriveTracking, Option<(usize, f64)>) {
    let now = now_unix();
    let mut view = TargetView {
        up: true,
        running: true,
        started_at: now,
        run_since: Some(now),
        phase_started_unix: now,
        ..Default::default()
    };
    let mut drive = DriveTracking {
        controller: identity
            .and_then(|i| crate::nvme::controller_of_node(&i.path.to_string_lossy())),
        ..Default::default()
    };
    let mut resume_at = None;
    if let Some(r) = resume {
        view.carried = r.totals.clone();
        // A checkpoint from before soak-only totals has the plan's as the soak's: carried as
        // they are, so no soak figure goes backwards.
        view.soak.carried = r.soak.clone().unwrap_or_else(|| r.totals.clone());
        view.loop_count = r.loop_count;
        view.soak_started = r.soak_started;
        view.steady_history = r.steady_history.clone();
        view.phase_index = r.phase_index;
        view.phase_elapsed_base = r.phase_elapsed_secs;
        // A spanning target keeps its members' figures when the checkpoint's are of the same
        // devices, in the same order.
        if r.members.len() == members.len()
            && r.members
                .iter()
                .zip(&members)
                .all(|(a, b)| a.path == b.path && a.device_key == b.device_key)
        {
            view.members = r.members.clone();
        }
        drive.restore(&spec.name, r);
        resume_at = Some((r.phase_index, r.phase_elapsed_secs));
        log_resume(spec, r);
    }
    if view.members.len() != members.len() {
        view.members = members;
    }
    view.member_rates = vec![[0.0; 4]; view.members.len()];
    // Named from the start, so a scrape between the thread's start and its first phase set-up
    // already sees which phase runs.
    view.phase = spec
        .phases
        .get(view.phase_index)
        .map(|p| p.kind().to_string())
        .unwrap_or_default();
    (view, drive, resume_at)
}

/// The journal's line for a target resuming from its checkpoint: which phase, of what kind,
/// how long it has run and what is left of it (a soak's time, a precondition's position, a
/// sweep's next point).
fn log_resume(spec: &TargetSpec, r: &crate::model::checkpoint::TargetState) {
    let n = r.phase_index + 1;
    let total = spec.phases.len();
    let Some(phase) = spec.phases.get(r.phase_index) else {
        tracing::info!(target_name = %spec.name, phase = n, phase_index = r.phase_index,
            written = r.totals.write_bytes,
            "resuming from the checkpoint: past the last of the plan's {total} phases");
        return;
    };
    let left_secs = match phase {
        PhaseSpec::Soak {
            duration: Some(d), ..
        } => (d.as_secs_f64() - r.phase_elapsed_secs).max(0.0),
        _ => f64::NAN,
    };
    let at = super::phaselog::resume_point(
        phase,
        r.phase_elapsed_secs,
        r.precondition.as_ref(),
        r.sweep.as_ref(),
    );
    tracing::info!(target_name = %spec.name, phase = n, phase_index = r.phase_index,
        kind = phase.kind(), elapsed_secs = r.phase_elapsed_secs, left_secs,
        written = r.totals.write_bytes, loop_count = r.loop_count,
        "resuming from the checkpoint: phase {n} of {total} ({}): {at}", phase.kind());
}

/// The handles fixed at start (verification state still to add).
fn fixed_of(
    spec: &TargetSpec,
    is_block: bool,
    identity: Option<&crate::safety::DeviceIdentity>,
    view: &TargetView,
) -> TargetFixed {
    TargetFixed {
        name: spec.name.clone(),
        path: spec.path.display().to_string(),
        is_block,
        // A spanning target's is its members', in order (what the daemon compares on resume).
        device_key: if view.members.is_empty() {
            identity.map(crate::state::device_key)
        } else {
            view.members
                .iter()
                .map(|m| m.device_key.clone())
                .collect::<Option<Vec<String>>>()
                .map(|k| k.join(" + "))
        },
        gates: Arc::new(std::sync::RwLock::new(spec.gates.clone())),
        members: spec
            .members
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        ..Default::default()
    }
}

/// The results record the runner starts with (see [`resumed_results`]; a resumed run's
/// recorded totals carried into the snapshot), the maxima earlier runs found, and the soak
/// history its results file kept (published in the snapshot when there is one).
fn starting_results(
    spec: &TargetSpec,
    opts: &RunOptions,
    resumed: bool,
    snapshot: &TargetShared,
    is_block: bool,
    identity: Option<&crate::safety::DeviceIdentity>,
) -> (
    TargetResults,
    BTreeMap<String, f64>,
    crate::model::soakhist::SoakHistory,
) {
    let (mut results, max_iops) = resumed_results(spec, opts, resumed);
    if resumed {
        carry_recorded_totals(&spec.name, snapshot, &results);
    }
    results.subject = Some(subject_of(spec, is_block, identity));
    results.verify_state = snapshot.fixed.verify.as_ref().map(|v| v.cost.clone());
    results.device_key = snapshot.fixed.device_key.clone();
    // A resumed soak continues the history its results file kept.
    let soak_history = results
        .soak
        .as_ref()
        .and_then(|s| s.history.clone())
        .unwrap_or_default();
    if !soak_history.is_empty() {
        let h = Arc::new(soak_history.clone());
        snapshot.update(|v| v.soak_history = Some(h));
    }
    (results, max_iops, soak_history)
}

/// The part of the target the plan exercises: `region` of its size, in whole MiB (whole
/// 4 KiB units when smaller).
fn region_of(spec: &TargetSpec, size: u64) -> Result<u64, TargetError> {
    let region_len = spec.region.len_of(size);
    if region_len == 0 {
        return Err(TargetError::EmptyRegion {
            target: spec.name.clone(),
            path: spec.path.clone(),
            size,
        });
    }
    Ok(region_len)
}

/// The verification state a target starts with. The computed walk (`model::walk`, bytes of
/// state) when every job of the plan that writes fits it ([`walk_fits`]) and the checkpoint
/// holds no generation map to resume; else the stored map: the checkpoint's when it fits this
/// target (same writer seed, covering the region), else a new one (saying why the
/// checkpoint's does not fit). `NVSOAK_VERIFY_STATE=stored` keeps the stored map (for
/// benchmarks and tests that compare the two). And the checkpoint's mismatch counts.
///
/// [`walk_fits`]: crate::model::walk::walk_fits
fn verify_ctx(
    spec: &TargetSpec,
    resume: Option<&crate::model::checkpoint::TargetState>,
    resume_genmap: Option<GenMap>,
    region_len: u64,
) -> VerifyCtx {
    use crate::model::walk::WalkMap;
    use crate::workload::pattern::VerifyState;
    let counters = Arc::new(VerifyCounters::default());
    let seed = resume.and_then(|r| r.verify_seed);
    let walkable = crate::model::walk::plan_fits(spec)
        && std::env::var("NVSOAK_VERIFY_STATE").map_or(true, |v| v != "stored");
    let walk_rec = resume.and_then(|r| r.verify_walk.as_ref());
    let state = match (walk_rec, resume_genmap) {
        (Some(rec), None) if walkable => match WalkMap::restore(rec) {
            Ok(w) if Some(w.seed()) == seed && w.units() == region_len / VERIFY_UNIT as u64 => {
                tracing::info!(target_name = %spec.name, legs = w.legs().len(),
                    exceptions = w.exceptions(),
                    "verification resumes with the checkpoint's computed state: units written since the last checkpoint are accepted as they are found");
                VerifyState::Walk(Arc::new(w))
            }
            Ok(_) => {
                tracing::warn!(target_name = %spec.name,
                    "the checkpoint's verification state does not match this target (writer seed or region size); not using it: verification starts over and blocks written before are not checked");
                VerifyState::Walk(Arc::new(WalkMap::new(
                    region_len,
                    crate::workload::pattern::new_seed(),
                )))
            }
            Err(e) => {
                tracing::warn!(target_name = %spec.name, error = %e,
                    "not using the checkpoint's verification state: verification starts over and blocks written before are not checked");
                VerifyState::Walk(Arc::new(WalkMap::new(
                    region_len,
                    crate::workload::pattern::new_seed(),
                )))
            }
        },
        (None, None) if walkable => VerifyState::Walk(Arc::new(WalkMap::new(
            region_len,
            crate::workload::pattern::new_seed(),
        ))),
        (_, genmap) => {
            VerifyState::Stored(Arc::new(stored_map(spec, resume, genmap, seed, region_len)))
        }
    };
    if let Some(r) = resume {
        counters.restore(&r.totals.verify_errors_by_kind);
        counters.restore_checked(r.totals.verified_bytes);
    }
    tracing::info!(target_name = %spec.name, mode = ?spec.verify, scheme = state.scheme(),
        state_bytes = state.memory_bytes(), "data verification on");
    // What the state holds, which model::verify_cost foresaw for check-config and the budget.
    let cost = crate::model::verify_cost::VerifyState {
        scheme: match &state {
            VerifyState::Stored(_) => crate::model::verify_cost::VerifyScheme::StoredMap,
            VerifyState::Walk(_) => crate::model::verify_cost::VerifyScheme::Computed,
        },
        state_bytes: state.memory_bytes() as u64,
    };
    VerifyCtx {
        state,
        counters,
        cost,
    }
}

/// The stored generation map a target starts with (see [`verify_ctx`]).
fn stored_map(
    spec: &TargetSpec,
    resume: Option<&crate::model::checkpoint::TargetState>,
    resume_genmap: Option<GenMap>,
    seed: Option<u64>,
    region_len: u64,
) -> GenMap {
    match (resume_genmap, seed) {
        (Some(m), Some(seed)) if m.seed() == seed && m.covers(0, region_len as usize) => {
            tracing::info!(target_name = %spec.name, written_units = m.written_units(),
                "verification resumes with the checkpoint's generation map");
            m
        }
        (Some(m), seed) => {
            let why = match seed {
                Some(s) if s != m.seed() => format!(
                    "its writer seed {:#x} is not the checkpoint's {s:#x}",
                    m.seed()
                ),
                None => "the checkpoint records no writer seed".to_string(),
                Some(_) => format!(
                    "it covers {} units, not this target's region of {region_len} bytes",
                    m.units()
                ),
            };
            let file = resume
                .and_then(|r| r.genmap.as_ref())
                .map(|g| g.file.clone());
            tracing::warn!(target_name = %spec.name, sidecar = ?file,
                "the checkpoint's generation map does not match this target ({why}); not using it: verification starts over and blocks written before are not checked");
            GenMap::new(0, region_len, crate::workload::pattern::new_seed())
        }
        _ => GenMap::new(0, region_len, crate::workload::pattern::new_seed()),
    }
}

/// What the target is and what its plan checks, for which gates apply to it.
fn subject_of(
    spec: &TargetSpec,
    is_block: bool,
    identity: Option<&crate::safety::DeviceIdentity>,
) -> crate::model::verdict::Subject {
    use crate::model::verdict::SubjectKind;
    let kind = if spec.is_spanning() {
        SubjectKind::Span
    } else if !is_block {
        SubjectKind::File
    } else if identity.is_some_and(|i| i.has_drive) {
        SubjectKind::Drive
    } else {
        SubjectKind::BlockDevice
    };
    let verify = spec.verify != VerifyMode::Off;
    let verify_note = (!verify).then(|| {
        if spec.is_spanning() {
            "a spanning target cannot verify data; turn the gate off with verify_errors = false".to_string()
        } else {
            "verify is off: set verify = \"inline\" or \"pass\" on the target, or turn the gate off with verify_errors = false".to_string()
        }
    });
    crate::model::verdict::Subject {
        kind,
        verify,
        verify_note,
        self_test_planned: spec
            .phases
            .iter()
            .any(|p| matches!(p, PhaseSpec::SelfTest { .. })),
    }
}

/// The results file a target starts with, and the maxima its earlier runs found.
fn resumed_results(
    spec: &TargetSpec,
    opts: &RunOptions,
    resumed: bool,
) -> (TargetResults, BTreeMap<String, f64>) {
    let mut results = TargetResults {
        version: crate::model::results::RESULTS_VERSION,
        host: crate::util::host::hostname(),
        target: spec.name.clone(),
        path: spec.path.display().to_string(),
        ..Default::default()
    };
    let mut max_iops = BTreeMap::new();
    if !resumed {
        // A run that starts over never overwrites an earlier record. The daemon has normally
        // moved it aside already, naming why; this catches any other way here.
        crate::state::results::archive(&opts.state_dir, &spec.name, "orphan");
    } else if let Some(prev) = crate::state::results::load(&opts.state_dir, &spec.name) {
        // A resumed plan keeps what its earlier runs measured (sweeps, steady state), and the
        // maxima they found, as a run without the restart would have.
        for sw in prev.sweeps.iter().filter(|sw| !sw.points.is_empty()) {
            max_iops.insert(sw.profile.clone(), sw.max_iops);
        }
        results = TargetResults {
            version: results.version,
            host: results.host,
            path: results.path,
            ..prev
        };
    }
    (results, max_iops)
}

/// Records only go forward: a resumed run carries, per counter, the larger of the checkpoint's
/// totals and the results file's. Both are records of the same plan on the same device (the
/// daemon moves both aside together when the plan or the device changed), and the results file
/// is written more often than the checkpoint (every sweep point, phase end, steady-state round
/// and minute of soak), so after `kill -9` it is often ahead: the I/O it recorded happened and
/// wore the drive. Positions (phase, elapsed time in it, precondition stripes, sweep points) and
/// the verification state still come from the checkpoint alone, with the generation map they
/// belong to.
fn carry_recorded_totals(name: &str, snapshot: &TargetShared, results: &TargetResults) {
    snapshot.update(|v| {
        let (plan_before, soak_before) = (v.carried.clone(), v.soak.carried.clone());
        if let Some(p) = results.soak.as_ref().and_then(|s| s.plan.as_ref()) {
            v.carried.max_each(&p.to_totals());
        }
        if let Some(s) = &results.soak {
            v.soak.carried.max_each(&s.to_totals());
            if v.soak_started.is_none() && s.started > 0.0 {
                v.soak_started = Some(s.started);
            }
        }
        if v.carried != plan_before || v.soak.carried != soak_before {
            tracing::info!(target_name = %name,
                soak_written = v.soak.carried.write_bytes,
                checkpoint_soak_written = soak_before.write_bytes,
                plan_written = v.carried.write_bytes,
                checkpoint_plan_written = plan_before.write_bytes,
                "the results file recorded more I/O than the checkpoint (saved later); carrying its totals");
        }
    });
}

/// A spanning target's members, every one claimed before any is written (see
/// [`open_members`]): the descriptor of the first (the target's `fd`, unused by workers), the
/// smallest member's size (each member's region is `region` of it), every member's descriptor
/// and its figures so far (zero). Raises each job's worker count to the number of members, so
/// every member has a worker, saying so.
type Spanning = (
    OpenedTarget,
    Vec<Arc<OwnedFd>>,
    Vec<crate::model::results::MemberFigures>,
);

fn open_spanning(spec: &mut TargetSpec) -> Result<Spanning, TargetError> {
    let opened = open_members(spec, plan_writes(spec))?;
    let n = opened.len();
    spread_workers(spec, n);
    let size = opened.iter().map(|o| o.size).min().unwrap_or(0);
    let members = opened
        .iter()
        .zip(&spec.members)
        .map(|(o, p)| crate::model::results::MemberFigures {
            path: p.display().to_string(),
            device: o
                .identity
                .as_ref()
                .and_then(|i| i.path.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            controller: o
                .identity
                .as_ref()
                .and_then(|i| crate::nvme::controller_of_node(&i.path.to_string_lossy())),
            device_key: o.identity.as_ref().map(crate::state::device_key),
            ..Default::default()
        })
        .collect();
    let fds: Vec<Arc<OwnedFd>> = opened.into_iter().map(|o| Arc::new(o.fd)).collect();
    let first = fds[0].try_clone().map_err(|error| TargetError::Open {
        target: spec.name.clone(),
        path: spec.path.clone(),
        error,
    })?;
    Ok((
        OpenedTarget {
            fd: first,
            size,
            is_block: true,
            identity: None,
        },
        fds,
        members,
    ))
}

/// A spanning target's jobs get at least one worker per member.
fn spread_workers(spec: &mut TargetSpec, n: usize) {
    let n = n as u32;
    let name = spec.name.clone();
    let raise = |job: &str, w: &mut u32| {
        if *w < n {
            tracing::info!(target_name = %name, job, workers = *w, members = n,
                "raising the job's workers to the number of members, one worker per device at least");
            *w = n;
        }
    };
    for p in &mut spec.phases {
        match p {
            PhaseSpec::Precondition { workers, .. } => raise("precondition", workers),
            PhaseSpec::Sweep { job, .. } => raise(&job.name, &mut job.workers),
            PhaseSpec::Soak { jobs, .. } => {
                for j in jobs {
                    raise(&j.name, &mut j.workers);
                }
            }
            PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => {}
        }
    }
}

/// With verification on, every block size must be whole 4 KiB verify units.
fn check_verify_block_sizes(spec: &TargetSpec) -> Result<(), TargetError> {
    let mut sizes: Vec<u32> = Vec::new();
    for p in &spec.phases {
        match p {
            PhaseSpec::Precondition { block_size, .. } => sizes.push(*block_size),
            PhaseSpec::Sweep { job, .. } => sizes.extend(job.bs.entries.iter().map(|e| e.0)),
            PhaseSpec::Soak { jobs, .. } => {
                for j in jobs {
                    sizes.extend(j.bs.entries.iter().map(|e| e.0));
                }
            }
            PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => {}
        }
    }
    if let Some(bad) = sizes
        .iter()
        .find(|b| !(**b as usize).is_multiple_of(VERIFY_UNIT))
    {
        return Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: format!(
                "verify needs block sizes that are multiples of 4k, and a job uses {bad} bytes; change the job's bs or set verify = \"off\""
            ),
        });
    }
    Ok(())
}
