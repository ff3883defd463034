//! Checkpoint load/save for multi-day runs.
//!
//! The state directory holds `checkpoint.json` plus one binary generation-map sidecar per
//! verified target (`genmap-<n>-<target>-<stamp>.bin`, see [`crate::model::genmap::GenMap`]).
//!
//! Saving is atomic and crash-safe: each sidecar is written under a new name (temporary file,
//! fsync, rename), then the checkpoint, which names each sidecar with its length and crc32c, is
//! written the same way, then the directory is fsynced. The checkpoint on disk therefore always
//! refers to sidecars that exist: the previous save's sidecars are kept, older ones removed.
//! After `kill -9` at any point, the checkpoint is the old one or the new one, never a mix.
//!
//! Loading at start ([`load`], [`load_for`]) never silently reuses a bad checkpoint: one that
//! does not parse, has another format version, whose sidecar is missing, damaged or named for
//! another target, that was saved for a different plan, or whose block target is another device
//! now ([`device_key`]) is moved aside (`checkpoint.json.corrupt-<unix time>`, `.stale-`,
//! `.device-`) with a warning, and the run starts over. [`read`] only looks, for
//! `nvsoak state show` while a daemon runs. [`move_file_aside`] is the one way records
//! (checkpoints, sidecars, results files) leave their place. [`SaveStats`] counts the daemon's
//! background saves for `/metrics`.
//!
//! Architecture Invariant: nothing here deletes a checkpoint; files are only moved aside.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use crate::model::checkpoint::{CHECKPOINT_VERSION, Checkpoint, GenMapRef};

use crate::model::genmap::GenMap;

mod lock;
pub mod results;

pub use lock::{LOCK_FILE, StateLock, check as check_dir, holder, is_nvsoak_name, lock};

/// The checkpoint's file name in the state directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";

#[derive(Debug, Error)]
pub enum StateError {
    #[error("state directory {}: {source}; check that it exists and is writable", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("checkpoint {}: {reason}; run `nvsoak state reset` to start over", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("checkpoint: target \"{0}\" has a generation map but no entry in the checkpoint")]
    UnknownTarget(String),
    #[error("state directory {} is in use by another nvsoak (pid {owner}); stop it, or give this run its own state.dir", path.display())]
    Locked { path: PathBuf, owner: String },
    #[error("state directory {} is not nvsoak's: {why}; give state.dir a directory of its own (a new one, or one only nvsoak has written)", path.display())]
    NotOurs { path: PathBuf, why: String },
    #[error("state directory {}: {why}", path.display())]
    Unsafe { path: PathBuf, why: String },
    #[error("serialising the checkpoint: {0}")]
    Serialise(#[from] serde_json::Error),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A checkpoint loaded at start, with its generation maps (every unit marked recovered).
#[derive(Debug)]
pub struct Loaded {
    pub checkpoint: Checkpoint,
    /// Target name → its generation map.
    pub genmaps: BTreeMap<String, GenMap>,
    pub path: PathBuf,
}

/// sha256 (hex) of the resolved plan: the serde_json of `Settings.targets`.
pub fn plan_hash(targets: &[crate::model::spec::TargetSpec]) -> String {
    use sha2::Digest;
    let json = serde_json::to_vec(targets).expect("target specs always serialise");
    sha2::Sha256::digest(&json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn fsync_dir(dir: &Path) -> Result<(), StateError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Write `name` in `dir` atomically ([`crate::util::write_file_atomic`]). The caller fsyncs
/// the directory.
fn write_atomic<T>(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<T>,
) -> Result<T, StateError> {
    let path = dir.join(name);
    crate::util::write_file_atomic(&path, fill).map_err(io_err(&path))
}

/// A writer that counts and checksums what passes through.
struct Tally<'a, W: Write> {
    inner: &'a mut W,
    len: u64,
    crc: u32,
}

impl<W: Write> Write for Tally<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.len += n as u64;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn sanitise(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

fn is_sidecar(name: &str) -> bool {
    name.starts_with("genmap-") && name.ends_with(".bin")
}

/// Save a checkpoint (see the module docs for the crash-safety argument). `genmaps` pairs
/// target names of `cp.targets` with their maps; their [`GenMapRef`]s are filled in the saved
/// copy. Creates `dir` if needed.
pub fn save(dir: &Path, cp: &Checkpoint, genmaps: &[(&str, &GenMap)]) -> Result<(), StateError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut cp = cp.clone();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for (name, map) in genmaps {
        let (idx, t) = cp
            .targets
            .iter_mut()
            .enumerate()
            .find(|(_, t)| t.name == *name)
            .ok_or_else(|| StateError::UnknownTarget(name.to_string()))?;
        let file = format!("genmap-{idx}-{}-{stamp}.bin", sanitise(name));
        let (len, crc) = write_atomic(dir, &file, |w| {
            let mut t = Tally {
                inner: w,
                len: 0,
                crc: 0,
            };
            map.write_to(&mut t)?;
            Ok((t.len, t.crc))
        })?;
        t.genmap = Some(GenMapRef {
            file,
            len,
            crc32c: crc,
            units: map.units() as u64,
            written_units: map.written_units(),
        });
    }
    let previous = read(dir).ok().flatten();
    let json = serde_json::to_vec_pretty(&cp)?;
    write_atomic(dir, CHECKPOINT_FILE, |w| w.write_all(&json))?;
    fsync_dir(dir)?;
    // Keep the sidecars of this save and the previous one (a reader may still be on it).
    let mut keep: Vec<String> = cp
        .targets
        .iter()
        .filter_map(|t| t.genmap.as_ref().map(|g| g.file.clone()))
        .collect();
    if let Some(prev) = previous {
        keep.extend(
            prev.targets
                .iter()
                .filter_map(|t| t.genmap.as_ref().map(|g| g.file.clone())),
        );
    }
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if is_sidecar(&n) && !keep.contains(&n) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Read and parse the checkpoint without changing anything (`Ok(None)` when there is none).
pub fn read(dir: &Path) -> Result<Option<Checkpoint>, StateError> {
    let path = dir.join(CHECKPOINT_FILE);
    let data = match crate::util::bounded::read_own(&path, crate::util::bounded::CHECKPOINT_LIMIT) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // A FIFO, a directory, a symlink or a giant in its place is no checkpoint nvsoak wrote.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData
            ) || e.raw_os_error() == Some(libc::ELOOP) =>
        {
            return Err(StateError::Corrupt {
                path: path.clone(),
                reason: format!("not a checkpoint nvsoak wrote ({e})"),
            });
        }
        Err(e) => return Err(io_err(&path)(e)),
    };
    let cp: Checkpoint = serde_json::from_slice(&data).map_err(|e| StateError::Corrupt {
        path: path.clone(),
        reason: format!("not a valid checkpoint ({e})"),
    })?;
    if cp.version != CHECKPOINT_VERSION {
        return Err(StateError::Corrupt {
            path,
            reason: format!(
                "format version {} (this nvsoak reads version {CHECKPOINT_VERSION})",
                cp.version
            ),
        });
    }
    Ok(Some(cp))
}

/// Read one generation-map sidecar and check it against its reference.
pub fn read_genmap(dir: &Path, r: &GenMapRef) -> Result<GenMap, StateError> {
    let path = dir.join(&r.file);
    let corrupt = |reason: String| StateError::Corrupt {
        path: path.clone(),
        reason,
    };
    if r.file.contains('/') || !is_sidecar(&r.file) {
        return Err(corrupt(format!("bad generation map name \"{}\"", r.file)));
    }
    let data = crate::util::bounded::read_own(&path, r.len)
        .map_err(|e| corrupt(format!("generation map missing or not nvsoak's ({e})")))?;
    if data.len() as u64 != r.len {
        return Err(corrupt(format!(
            "generation map is {} bytes, the checkpoint says {}",
            data.len(),
            r.len
        )));
    }
    if crc32c::crc32c(&data) != r.crc32c {
        return Err(corrupt("generation map checksum mismatch".into()));
    }
    GenMap::from_bytes(&data).map_err(|e| corrupt(e.to_string()))
}

fn unique_aside(path: &Path, why: &str) -> PathBuf {
    let ts = now_unix() as u64;
    let base = format!("{}.{why}-{ts}", path.display());
    let mut p = PathBuf::from(&base);
    let mut n = 1;
    while p.exists() {
        p = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    p
}

/// Move one record file aside, never over an existing file: `path` becomes
/// `<path>.{why}-<unix time>` (with `-<n>` appended when that name is taken), and its directory
/// is fsynced. Returns the new path. The checkpoint, its sidecars and the results files all go
/// aside through here.
pub fn move_file_aside(path: &Path, why: &str) -> Result<PathBuf, StateError> {
    let to = unique_aside(path, why);
    fs::rename(path, &to).map_err(io_err(path))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fsync_dir(dir)?;
    }
    Ok(to)
}

/// Where a moved-aside record came from: `<name>.<why>-<unix time>[-<n>]` split into
/// (`name`, `why`, unix time). `None` for any other file name.
pub fn parse_aside_name(file_name: &str) -> Option<(&str, &str, u64)> {
    const REASONS: &[&str] = &[
        "corrupt", "stale", "reset", "restart", "device", "orphan", "foreign",
    ];
    let dot = file_name.rfind('.')?;
    let (name, tail) = (&file_name[..dot], &file_name[dot + 1..]);
    let (why, rest) = tail.split_once('-')?;
    if name.is_empty() || !REASONS.contains(&why) {
        return None;
    }
    let ts = rest.split('-').next()?;
    let n = rest.strip_prefix(ts).unwrap_or("");
    if !(n.is_empty()
        || n.strip_prefix('-')
            .is_some_and(|d| d.parse::<u64>().is_ok()))
    {
        return None;
    }
    Some((name, why, ts.parse().ok()?))
}

/// Move the checkpoint (and the sidecars it names, when it parses) aside with suffix
/// `.{why}-<unix time>`. Returns the checkpoint's new path, `None` if there was none.
fn move_aside(dir: &Path, why: &str) -> Result<Option<PathBuf>, StateError> {
    let path = dir.join(CHECKPOINT_FILE);
    if !path.exists() {
        return Ok(None);
    }
    if let Ok(Some(cp)) = read(dir) {
        for g in cp.targets.iter().filter_map(|t| t.genmap.as_ref()) {
            if is_sidecar(&g.file) && !g.file.contains('/') {
                let sp = dir.join(&g.file);
                if sp.exists() {
                    let _ = fs::rename(&sp, unique_aside(&sp, why));
                }
            }
        }
    }
    move_file_aside(&path, why).map(Some)
}

/// The identity a checkpoint records for a block device, and compares on resume: its WWN or
/// serial ([`crate::safety::DeviceIdentity::stable_id`]), else (loop, null_blk) its kernel name
/// and device numbers, `loop3 (7:3)`.
pub fn device_key(id: &crate::safety::DeviceIdentity) -> String {
    match id.stable_id() {
        Some(s) if !s.is_empty() => s.to_string(),
        // Without serial or WWN, the name and numbers alone would take a loop device
        // re-attached to a fresh file for the device tested: its instance tells them apart.
        _ => match &id.instance {
            Some(inst) => format!("{} ({}:{}; {inst})", id.kernel_name, id.major, id.minor),
            None => format!("{} ({}:{})", id.kernel_name, id.major, id.minor),
        },
    }
}

/// Why [`load_for`] found nothing to resume (the run starts over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fresh {
    /// There was no checkpoint.
    NoCheckpoint,
    /// It was unusable and went aside as `.corrupt-<ts>`.
    Corrupt,
    /// It belonged to another plan and went aside as `.stale-<ts>`.
    Stale,
    /// A block target is now another device; it went aside as `.device-<ts>`.
    OtherDevice,
}

impl Fresh {
    /// The suffix a target's earlier results file goes aside with when its run starts over.
    pub fn results_reason(self) -> &'static str {
        match self {
            Fresh::NoCheckpoint => "orphan",
            Fresh::Corrupt => "corrupt",
            Fresh::Stale => "stale",
            Fresh::OtherDevice => "device",
        }
    }
}

/// Load the checkpoint at start. A corrupt checkpoint (unparseable, other version, missing or
/// damaged generation map) is moved aside as `.corrupt-<ts>`, one for another plan as
/// `.stale-<ts>`, each with a warning, and `Ok(None)` returned so the run starts over.
/// Leftover temporary files of an interrupted save are removed. [`load_for`] also checks the
/// block devices and says why nothing was loaded.
pub fn load(dir: &Path, expected_plan_hash: &str) -> Result<Option<Loaded>, StateError> {
    Ok(load_for(dir, expected_plan_hash, &BTreeMap::new())?.ok())
}

/// [`load`], and a checkpoint whose block target is now another device is moved aside as
/// `.device-<ts>` (a warning names both identities) rather than resumed against the wrong
/// generation map. `devices` maps target names to their device's [`device_key`] now; a target
/// without an entry (a file) or a recorded identity (an older checkpoint) is not compared.
/// `Err(Fresh)` says why the run starts over.
pub fn load_for(
    dir: &Path,
    expected_plan_hash: &str,
    devices: &BTreeMap<String, String>,
) -> Result<Result<Loaded, Fresh>, StateError> {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with('.') && n.contains(".tmp-") {
                let _ = fs::remove_file(e.path());
            }
        }
    }
    let path = dir.join(CHECKPOINT_FILE);
    let cp = match read(dir) {
        Ok(None) => return Ok(Err(Fresh::NoCheckpoint)),
        Ok(Some(cp)) => cp,
        Err(StateError::Corrupt { reason, .. }) => {
            let to = move_aside(dir, "corrupt")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                "checkpoint is unusable ({reason}); moved it aside and starting over"
            );
            return Ok(Err(Fresh::Corrupt));
        }
        Err(e) => return Err(e),
    };
    if cp.plan_hash != expected_plan_hash {
        let to = move_aside(dir, "stale")?;
        tracing::warn!(
            checkpoint = %path.display(),
            moved_to = ?to,
            saved_plan = %cp.plan_hash,
            current_plan = %expected_plan_hash,
            "checkpoint belongs to a different plan (the targets or phases changed); moved it aside and starting over"
        );
        return Ok(Err(Fresh::Stale));
    }
    for t in &cp.targets {
        if let (Some(saved), Some(now)) = (&t.identity, devices.get(&t.name))
            && saved != now
        {
            let to = move_aside(dir, "device")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                target = %t.name,
                path = %t.path,
                checkpoint_device = %saved,
                current_device = %now,
                "checkpoint was saved for device {saved}, but {} is now device {now}; moved it aside and starting over",
                t.path
            );
            return Ok(Err(Fresh::OtherDevice));
        }
    }
    let genmaps = match read_genmaps(dir, &cp) {
        Ok(m) => m,
        Err((t, sidecar, e)) => {
            let to = move_aside(dir, "corrupt")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                target = %t,
                sidecar = %sidecar,
                "checkpoint is unusable ({e}); moved it aside and starting over"
            );
            return Ok(Err(Fresh::Corrupt));
        }
    };
    Ok(Ok(Loaded {
        checkpoint: cp,
        genmaps,
        path,
    }))
}

/// Every sidecar `cp` names, each checked against its reference and its target's name. Fails
/// with (target, sidecar file, why) at the first that is missing, damaged or another target's.
fn read_genmaps(
    dir: &Path,
    cp: &Checkpoint,
) -> Result<BTreeMap<String, GenMap>, (String, String, StateError)> {
    let mut genmaps = BTreeMap::new();
    for (idx, t) in cp.targets.iter().enumerate() {
        let Some(r) = &t.genmap else { continue };
        let own = format!("genmap-{idx}-{}-", sanitise(&t.name));
        let res = if r.file.starts_with(&own) {
            read_genmap(dir, r)
        } else {
            Err(StateError::Corrupt {
                path: dir.join(&r.file),
                reason: format!(
                    "generation map {} does not belong to target \"{}\" (its name should start with {own})",
                    r.file, t.name
                ),
            })
        };
        match res {
            Ok(m) => {
                genmaps.insert(t.name.clone(), m);
            }
            Err(e) => return Err((t.name.clone(), r.file.clone(), e)),
        }
    }
    Ok(genmaps)
}

/// Move the checkpoint aside (`.reset-<ts>`) so the next run starts over. Returns where it
/// went, `None` if there was no checkpoint.
pub fn reset(dir: &Path) -> Result<Option<PathBuf>, StateError> {
    move_aside(dir, "reset")
}

/// Counters of the daemon's checkpoint saves (they run off the event loop, one at a time), for
/// `/metrics`. Shared between the saving thread and the scrapes; all relaxed atomics.
#[derive(Debug, Default)]
pub struct SaveStats {
    saves: AtomicU64,
    failures: AtomicU64,
    skipped_ticks: AtomicU64,
    /// f64 bits; 0: no save succeeded yet.
    last_success_unix: AtomicU64,
    last_duration_secs: AtomicU64,
    in_flight: std::sync::atomic::AtomicBool,
}

/// What [`SaveStats`] holds at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SaveStatsSnapshot {
    pub saves: u64,
    pub failures: u64,
    pub skipped_ticks: u64,
    /// Unix time of the last successful save (`None` until one succeeded).
    pub last_success_unix: Option<f64>,
    /// How long the last save (successful or not) took.
    pub last_duration_secs: Option<f64>,
    pub in_flight: bool,
}

impl SaveStats {
    pub fn started(&self) {
        self.in_flight.store(true, Ordering::Relaxed);
    }

    /// A save ended after `secs`; `ok` says whether it succeeded.
    pub fn finished(&self, ok: bool, secs: f64) {
        if ok {
            self.saves.fetch_add(1, Ordering::Relaxed);
            self.last_success_unix
                .store(now_unix().to_bits(), Ordering::Relaxed);
        } else {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        self.last_duration_secs
            .store(secs.to_bits(), Ordering::Relaxed);
        self.in_flight.store(false, Ordering::Relaxed);
    }

    /// A checkpoint tick came while a save was still in flight, and was skipped.
    pub fn skipped_tick(&self) {
        self.skipped_ticks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> SaveStatsSnapshot {
        let f = |a: &AtomicU64| {
            let v = f64::from_bits(a.load(Ordering::Relaxed));
            (v > 0.0).then_some(v)
        };
        let saves = self.saves.load(Ordering::Relaxed);
        let failures = self.failures.load(Ordering::Relaxed);
        SaveStatsSnapshot {
            saves,
            failures,
            skipped_ticks: self.skipped_ticks.load(Ordering::Relaxed),
            last_success_unix: f(&self.last_success_unix),
            last_duration_secs: (saves + failures > 0)
                .then(|| f64::from_bits(self.last_duration_secs.load(Ordering::Relaxed))),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::checkpoint::{PreconditionProgress, StripeProgress, TargetState};
    use crate::model::totals::Totals;

    fn sample() -> Checkpoint {
        let mut t = TargetState::new("t0", "/dev/shm/t0.dat");
        t.phase_index = 2;
        t.phase_elapsed_secs = 123.5;
        t.loop_count = 1;
        t.soak_started = Some(1_700_000_000.25);
        t.totals = Totals {
            read_bytes: 1 << 40,
            write_bytes: 5 << 30,
            read_ops: 268_435_456,
            write_ops: 1_310_720,
            errors: 3,
            verify_errors: 1,
            verify_errors_by_kind: [("bad_checksum".to_string(), 1)].into(),
            verified_bytes: 3 << 30,
            soak_elapsed_secs: 86_400.0,
        };
        t.steady_history = vec![100_000.0, 101_000.5, 99_000.0];
        t.smart_at_soak_start = Some(serde_json::json!({"data_units_written": 12345}));
        t.verify_seed = Some(0xdead_beef);
        t.precondition = Some(PreconditionProgress {
            passes: 2,
            block_size: 131_072,
            stripes: vec![
                StripeProgress {
                    start: 0,
                    len: 1 << 30,
                    done_bytes: (1 << 30) + (1 << 20),
                },
                StripeProgress {
                    start: 1 << 30,
                    len: 1 << 30,
                    done_bytes: 3 << 20,
                },
            ],
        });
        t.sweep = Some(crate::model::results::SweepResult {
            profile: "4k-random-read".into(),
            block_size: 4096.0,
            read_pct: 100,
            max_iops: 123_456.5,
            started: 1_700_000_100.5,
            finished: None,
            points: vec![crate::model::results::SweepPoint {
                pct: 0,
                iops: 123_456.5,
                ..Default::default()
            }],
        });
        Checkpoint::new("abc".into(), vec![t, TargetState::new("t1", "/dev/loop9")])
    }

    fn sample_map() -> GenMap {
        let m = GenMap::new(0, 4096 * 1000, 0xdead_beef);
        for i in (0..1000u64).step_by(3) {
            m.set(i * 4096, (i % 9 + 1) as u32);
        }
        m
    }

    fn aside(dir: &Path, why: &str) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(&format!(".{why}-")))
            .collect()
    }

    #[test]
    fn save_load_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let cp = sample();
        let map = sample_map();
        save(d.path(), &cp, &[("t0", &map)]).unwrap();
        let l = load(d.path(), "abc").unwrap().expect("a checkpoint");
        let mut want = cp.clone();
        want.targets[0].genmap = l.checkpoint.targets[0].genmap.clone();
        // Bit-exact, floats included (serde_json's `float_roundtrip`).
        assert_eq!(l.checkpoint, want);
        let r = l.checkpoint.targets[0].genmap.as_ref().unwrap();
        assert_eq!(r.units, 1000);
        assert_eq!(r.written_units, 334);
        assert!(l.genmaps["t0"].same_generations(&map));
        assert_eq!(l.genmaps["t0"].recovered_units(), 1000);
        assert!(!l.genmaps.contains_key("t1"));
        // Saving again replaces the sidecar; only this and the previous save's are kept.
        for _ in 0..3 {
            save(d.path(), &cp, &[("t0", &map)]).unwrap();
        }
        let sidecars = fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .filter(|e| is_sidecar(&e.file_name().to_string_lossy()))
            .count();
        assert_eq!(sidecars, 2);
        assert!(load(d.path(), "abc").unwrap().is_some());
        // An unknown target name is an error, not a silent skip.
        assert!(matches!(
            save(d.path(), &cp, &[("nope", &map)]),
            Err(StateError::UnknownTarget(_))
        ));
    }

    #[test]
    fn checkpoint_without_the_newer_fields_still_loads() {
        // A checkpoint saved before precondition and sweep progress existed.
        let d = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(sample()).unwrap();
        for t in v["targets"].as_array_mut().unwrap() {
            let t = t.as_object_mut().unwrap();
            assert!(t.remove("precondition").is_some() && t.remove("sweep").is_some());
            t.remove("verify_seed");
            t.remove("genmap");
        }
        fs::write(
            d.path().join(CHECKPOINT_FILE),
            serde_json::to_vec(&v).unwrap(),
        )
        .unwrap();
        let l = load(d.path(), "abc")
            .unwrap()
            .expect("an old checkpoint loads");
        let t = &l.checkpoint.targets[0];
        assert_eq!(t.phase_index, 2);
        assert_eq!(t.precondition, None);
        assert_eq!(t.sweep, None);
        assert_eq!(t.totals.write_bytes, 5 << 30);
    }

    #[test]
    fn checkpoint_with_the_removed_next_generation_still_loads() {
        // Checkpoints saved before `next_generation` (never set) was dropped carry the key.
        let d = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(sample()).unwrap();
        for t in v["targets"].as_array_mut().unwrap() {
            let t = t.as_object_mut().unwrap();
            assert!(t.insert("next_generation".into(), 77.into()).is_none());
        }
        fs::write(
            d.path().join(CHECKPOINT_FILE),
            serde_json::to_vec(&v).unwrap(),
        )
        .unwrap();
        let l = load(d.path(), "abc")
            .unwrap()
            .expect("a checkpoint with next_generation loads");
        assert_eq!(l.checkpoint.targets[0], sample().targets[0]);
    }

    #[test]
    fn precondition_position_arithmetic() {
        // A 10 KiB stripe with 4 KiB blocks: each pass is 4k, 4k, then a trimmed 2k block.
        let at = |done_bytes| StripeProgress {
            start: 1 << 20,
            len: 10 << 10,
            done_bytes,
        };
        let k = |n: u64| n << 10;
        assert_eq!(at(0).resume_point(3, 4096), (0, k(30)));
        assert_eq!(at(k(4)).resume_point(3, 4096), (k(4), k(26)));
        assert_eq!(at(k(8)).resume_point(3, 4096), (k(8), k(22)));
        // The stripe's end (after the short block) wraps to the next pass.
        assert_eq!(at(k(10)).resume_point(3, 4096), (0, k(20)));
        assert_eq!(at(k(14)).resume_point(3, 4096), (k(4), k(16)));
        // Not on a block boundary: rounded down to the block it is in (never ahead).
        assert_eq!(at(k(11)).resume_point(3, 4096), (0, k(20)));
        assert_eq!(at(k(17)).resume_point(3, 4096), (k(4), k(16)));
        assert_eq!(at(k(19)).clamped_done(3, 4096), k(18));
        // Done, and beyond (a checkpoint can never say more than the walk; clamp anyway).
        assert_eq!(at(k(30)).resume_point(3, 4096), (0, 0));
        assert_eq!(at(k(31)).resume_point(3, 4096), (0, 0));
        assert_eq!(at(k(99)).clamped_done(3, 4096), k(30));
        // Pass, fraction and offsets from the stripes together.
        let p = PreconditionProgress {
            passes: 2,
            block_size: 4096,
            stripes: vec![
                at(k(10) + k(4)),
                StripeProgress {
                    start: 0,
                    len: k(10),
                    done_bytes: k(8),
                },
            ],
        };
        assert_eq!(p.total_bytes(), k(40));
        assert_eq!(p.done_bytes(), k(22));
        assert_eq!(p.pass_and_fraction(), (2, 0.1));
        assert_eq!(p.worker_offsets(), vec![(1 << 20) + k(4), k(8)]);
        assert!(!p.is_complete());
        assert_eq!(
            p.describe(),
            "pass 2 of 2, 10% into it, 55% overall (22.00 KiB of 40.00 KiB written)"
        );
        let full = PreconditionProgress {
            stripes: vec![
                at(k(20)),
                StripeProgress {
                    start: 0,
                    len: k(10),
                    done_bytes: k(20),
                },
            ],
            ..p.clone()
        };
        assert!(full.is_complete());
        assert_eq!(full.pass_and_fraction(), (2, 1.0));
        let fresh = PreconditionProgress {
            stripes: vec![at(0)],
            ..p
        };
        assert_eq!(fresh.pass_and_fraction(), (1, 0.0));
    }

    #[test]
    fn corrupt_checkpoint_is_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        save(d.path(), &sample(), &[]).unwrap();
        let p = d.path().join(CHECKPOINT_FILE);
        let full = fs::read(&p).unwrap();
        // Truncated.
        fs::write(&p, &full[..full.len() / 2]).unwrap();
        assert!(load(d.path(), "abc").unwrap().is_none());
        assert!(!p.exists());
        assert_eq!(aside(d.path(), "corrupt").len(), 1);
        // Garbled.
        fs::write(&p, b"\x00\x01garbage{").unwrap();
        assert!(load(d.path(), "abc").unwrap().is_none());
        assert_eq!(aside(d.path(), "corrupt").len(), 2);
        // Another format version.
        let mut cp = sample();
        cp.version = 99;
        fs::write(&p, serde_json::to_vec(&cp).unwrap()).unwrap();
        assert!(matches!(read(d.path()), Err(StateError::Corrupt { .. })));
        assert!(load(d.path(), "abc").unwrap().is_none());
        assert_eq!(aside(d.path(), "corrupt").len(), 3);
    }

    #[test]
    fn damaged_genmap_moves_the_checkpoint_aside() {
        let d = tempfile::tempdir().unwrap();
        save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
        let cp = read(d.path()).unwrap().unwrap();
        let side = d.path().join(&cp.targets[0].genmap.as_ref().unwrap().file);
        let mut b = fs::read(&side).unwrap();
        b[40] ^= 0xff;
        fs::write(&side, &b).unwrap();
        assert!(load(d.path(), "abc").unwrap().is_none());
        assert!(!d.path().join(CHECKPOINT_FILE).exists());
        // The sidecar went aside with it, as evidence.
        assert_eq!(aside(d.path(), "corrupt").len(), 2);
        // Missing sidecar.
        save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
        let cp = read(d.path()).unwrap().unwrap();
        fs::remove_file(d.path().join(&cp.targets[0].genmap.as_ref().unwrap().file)).unwrap();
        assert!(load(d.path(), "abc").unwrap().is_none());
    }

    #[test]
    fn other_plan_is_moved_aside_as_stale() {
        let d = tempfile::tempdir().unwrap();
        save(d.path(), &sample(), &[]).unwrap();
        assert!(load(d.path(), "another-plan").unwrap().is_none());
        assert_eq!(aside(d.path(), "stale").len(), 1);
        assert!(load(d.path(), "abc").unwrap().is_none(), "never reused");
    }

    #[test]
    fn leftover_temp_file_does_not_break_load() {
        let d = tempfile::tempdir().unwrap();
        save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
        // A crash mid-save leaves a half-written temporary checkpoint and sidecar.
        let tmp = d.path().join(".checkpoint.json.tmp-999999-0");
        fs::write(&tmp, b"{\"version\": 1, \"plan_ha").unwrap();
        let tmp2 = d.path().join(".genmap-0-t0-1.bin.tmp-999999-1");
        fs::write(&tmp2, b"NVGEN").unwrap();
        let l = load(d.path(), "abc")
            .unwrap()
            .expect("the last complete save");
        assert_eq!(l.checkpoint.targets[0].phase_index, 2);
        assert!(!tmp.exists() && !tmp2.exists(), "leftovers are cleaned up");
        save(d.path(), &sample(), &[]).unwrap();
        assert!(load(d.path(), "abc").unwrap().is_some());
    }

    #[test]
    fn checkpoint_is_always_parseable_while_saving() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        let map = sample_map();
        save(&dir, &sample(), &[("t0", &map)]).unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let dir = dir.clone();
            let done = done.clone();
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) || reads == 0 {
                    let cp = read(&dir).expect("parseable").expect("present");
                    assert_eq!(cp.plan_hash, "abc");
                    // The sidecar it names exists and matches (kept for one more save).
                    if let Some(r) = &cp.targets[0].genmap
                        && let Err(e) = read_genmap(&dir, r)
                    {
                        // It may have been superseded twice while we read; then it is gone,
                        // never half-written.
                        assert!(e.to_string().contains("missing"), "{e}");
                    }
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..200u64 {
            let mut cp = sample();
            cp.targets[0].totals.read_ops = i;
            map.set(0, (i % 100 + 1) as u32);
            save(&dir, &cp, &[("t0", &map)]).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        let reads = reader.join().expect("reader thread");
        assert!(reads > 0);
        let l = load(&dir, "abc").unwrap().unwrap();
        assert_eq!(l.checkpoint.targets[0].totals.read_ops, 199);
        assert_eq!(l.genmaps["t0"].get(0), 100);
    }

    #[test]
    fn reset_moves_aside() {
        let d = tempfile::tempdir().unwrap();
        assert!(reset(d.path()).unwrap().is_none());
        save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
        let to = reset(d.path()).unwrap().expect("moved");
        assert!(to.to_string_lossy().contains("checkpoint.json.reset-"));
        assert!(to.exists());
        assert!(load(d.path(), "abc").unwrap().is_none());
    }

    #[test]
    fn aside_names_parse_back_and_never_collide() {
        assert_eq!(
            parse_aside_name("t0.json.stale-1764573300"),
            Some(("t0.json", "stale", 1_764_573_300))
        );
        assert_eq!(
            parse_aside_name("a.b.json.reset-17-2"),
            Some(("a.b.json", "reset", 17))
        );
        assert_eq!(
            parse_aside_name("checkpoint.json.corrupt-5"),
            Some(("checkpoint.json", "corrupt", 5))
        );
        for bad in [
            "t0.json",
            "t0.json.stale",
            "t0.json.stale-x",
            "t0.json.other-5",
            "t0.json.stale-5-x",
            ".stale-5",
        ] {
            assert_eq!(parse_aside_name(bad), None, "{bad}");
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        let mut moved = Vec::new();
        for i in 0..3 {
            fs::write(&p, format!("run {i}")).unwrap();
            moved.push(move_file_aside(&p, "restart").unwrap());
        }
        assert!(!p.exists());
        for (i, m) in moved.iter().enumerate() {
            assert_eq!(fs::read_to_string(m).unwrap(), format!("run {i}"));
            let name = m.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_aside_name(name).map(|x| x.1), Some("restart"));
        }
    }

    #[test]
    fn checkpoint_for_another_device_is_moved_aside() {
        let d = tempfile::tempdir().unwrap();
        let mut cp = sample();
        cp.targets[1].identity = Some("S123".into());
        save(d.path(), &cp, &[("t0", &sample_map())]).unwrap();
        let same: BTreeMap<String, String> = [("t1".to_string(), "S123".to_string())].into();
        assert!(load_for(d.path(), "abc", &same).unwrap().is_ok());
        // No current identity (a file) or none recorded: not compared.
        assert!(load_for(d.path(), "abc", &BTreeMap::new()).unwrap().is_ok());
        let other: BTreeMap<String, String> = [("t1".to_string(), "S999".to_string())].into();
        assert_eq!(
            load_for(d.path(), "abc", &other).unwrap().err(),
            Some(Fresh::OtherDevice)
        );
        assert!(!d.path().join(CHECKPOINT_FILE).exists());
        // The checkpoint and its sidecar, as evidence.
        assert_eq!(aside(d.path(), "device").len(), 2);
        assert_eq!(
            load_for(d.path(), "abc", &other).unwrap().err(),
            Some(Fresh::NoCheckpoint)
        );
    }

    #[test]
    fn sidecar_of_another_target_is_not_used() {
        let d = tempfile::tempdir().unwrap();
        save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
        // Point t1 at t0's sidecar (a hand-edited or mixed-up checkpoint).
        let mut cp = read(d.path()).unwrap().unwrap();
        cp.targets[1].genmap = cp.targets[0].genmap.clone();
        fs::write(
            d.path().join(CHECKPOINT_FILE),
            serde_json::to_vec(&cp).unwrap(),
        )
        .unwrap();
        assert_eq!(
            load_for(d.path(), "abc", &BTreeMap::new()).unwrap().err(),
            Some(Fresh::Corrupt)
        );
        assert_eq!(aside(d.path(), "corrupt").len(), 2);
    }

    #[test]
    fn save_stats_count_and_time() {
        let s = SaveStats::default();
        assert_eq!(s.snapshot(), SaveStatsSnapshot::default());
        s.started();
        assert!(s.snapshot().in_flight);
        s.skipped_tick();
        s.finished(false, 0.5);
        let snap = s.snapshot();
        assert_eq!((snap.saves, snap.failures, snap.skipped_ticks), (0, 1, 1));
        assert_eq!(snap.last_success_unix, None);
        assert_eq!(snap.last_duration_secs, Some(0.5));
        assert!(!snap.in_flight);
        s.started();
        s.finished(true, 0.25);
        let snap = s.snapshot();
        assert_eq!((snap.saves, snap.failures), (1, 1));
        assert!(snap.last_success_unix.is_some_and(|t| t > 1.0e9));
        assert_eq!(snap.last_duration_secs, Some(0.25));
    }

    #[test]
    fn state_dir_lock_is_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let l = lock(d.path()).unwrap();
        assert_eq!(
            fs::read_to_string(&l.path).unwrap(),
            format!("nvsoak pid={}\n", std::process::id())
        );
        // flock locks belong to the open file, so a second open conflicts even in-process.
        let e = lock(d.path()).unwrap_err();
        assert!(matches!(e, StateError::Locked { .. }), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        drop(l);
        lock(d.path()).expect("free again");
    }

    #[test]
    fn plan_hash_tracks_the_plan() {
        let s = crate::config::builtin_default();
        let h = plan_hash(&s.targets);
        assert_eq!(h.len(), 64);
        assert_eq!(h, plan_hash(&s.targets.clone()));
        let mut t = s.targets.clone();
        t[0].name = "other".into();
        assert_ne!(h, plan_hash(&t));
    }
}
