//! Computed verification state: which generation each 4 KiB unit of a region holds, worked
//! out from a few counters per run segment instead of stored per unit (the stored map,
//! [`crate::model::genmap`], costs 544 MiB per TiB; this costs bytes per segment).
//!
//! ## Legs
//!
//! Every run segment that writes under verification is a **leg**. A leg writes blocks of
//! `block_units` units over the target's `blocks = units / block_units` blocks, split into
//! one **slice** of positions per worker. Worker `i` writes the positions of its slice in order,
//! starting `from` positions in and wrapping at its end: its `k`-th write is position
//! `a = from + k`, i.e. slice offset `a mod len` in pass `a / len`, and carries generation
//! `gen_base + a / len`. A position is a block through the leg's order: the identity for a
//! sequential leg (its slices are the workers' stripes), or a keyed permutation ([`Perm`]) for
//! a random one (each slice is then a scattered, disjoint set of blocks, and every block is
//! written once per pass, in an order that is still uniformly random). A leg therefore needs
//! only `(start, len, from, count)` per worker.
//!
//! The unit's expected generation is that of the newest leg that wrote it: a leg wrote the
//! block at slice offset `o` iff some `a = o + m·len` lies in `from..from + count`, the last
//! such `m` being its pass. Legs start at increasing `gen_base`s (past every generation an
//! earlier leg wrote), so generations only grow and are compared in full 32 bits
//! ([`Expect::Exact`], [`Expect::AtLeast`]). A leg that wrote every block of a region that is
//! a whole number of its blocks hides every older leg, which is then dropped.
//!
//! ## What is stored besides the legs
//!
//! - **Exceptions**, a small map from unit to expectation: a failed write (the device may hold
//!   the old block or the new one: [`Expect::AtLeast`] the old, or anything ours if there was
//!   none), and, after a restart, units found newer than the record (learnt as
//!   [`Expect::Exact`]). A write of the unit removes its exception.
//! - **The restart mark**: after a restart, the legs recorded before it may have gone on
//!   beyond their counts, and further legs may have run and died unrecorded. Every unit whose
//!   newest recorded write is from before the mark is then accepted at its recorded generation
//!   *or newer* ([`Expect::AtLeast`], or anything ours when there is no record), and a newer
//!   one found is learnt as an exception; the first leg after the restart starts
//!   [`RECOVERY_JUMP`] generations past everything recorded (a leg and pass each). This is the stored map's
//!   "recovered" rule, unit for unit, so detection is exactly as strong.
//!
//! Concurrency: a leg's slice counts are atomics, each written only by its worker (at
//! submission, as the stored map is) and read by that worker and the checkpointer; a worker
//! checks reads only within its own slice while its leg writes, so no other worker's
//! in-flight write can race it. The list of legs changes only between segments: hooks take a
//! snapshot ([`WalkMap::legs`]) when their segment starts.

mod fits;
pub mod perm;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

pub use fits::{plan_fits, walk_fits};
pub use perm::Perm;

use crate::model::genmap::{Expect, VERIFY_UNIT};

/// One worker's slice of a leg.
#[derive(Debug)]
pub struct Slice {
    /// First position of the slice in the leg's order.
    pub start: u64,
    /// Positions in the slice (> 0).
    pub len: u64,
    /// Where in the slice the walk started (0 unless it resumed a walk).
    pub from: u64,
    /// Writes issued so far.
    count: AtomicU64,
}

impl Slice {
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Positions written at least once: `from..from + written()` (wrapping at `len`).
    pub fn written(&self) -> u64 {
        self.count().min(self.len)
    }

    /// The slice offset and generation of the `k`-th write, relative to the leg's base.
    #[inline]
    fn nth(&self, k: u64) -> (u64, u64) {
        let a = self.from + k;
        (a % self.len, a / self.len)
    }

    /// The pass in which the slice's walk last wrote slice offset `o`, if it did.
    #[inline]
    fn last_pass(&self, o: u64) -> Option<u64> {
        let e = self.from + self.count();
        if e == 0 || e - 1 < o {
            return None;
        }
        let m = (e - 1 - o) / self.len;
        (o + m * self.len >= self.from).then_some(m)
    }
}

/// One run segment's writes (see the module docs).
#[derive(Debug)]
pub struct Leg {
    pub gen_base: u32,
    pub block_units: u32,
    /// Blocks in the leg's order (the region's whole blocks).
    pub blocks: u64,
    /// `None`: sequential (positions are blocks).
    pub perm: Option<Perm>,
    /// Sorted by `start`, disjoint.
    pub slices: Box<[Slice]>,
}

impl Leg {
    /// Where block `b` is in this leg's order.
    #[inline]
    fn position(&self, b: u64) -> u64 {
        self.perm.map_or(b, |p| p.inverse(b))
    }

    /// The slice holding position `j`.
    #[inline]
    fn slice_of(&self, j: u64) -> Option<(usize, &Slice)> {
        let i = self
            .slices
            .partition_point(|s| s.start <= j)
            .checked_sub(1)?;
        let s = &self.slices[i];
        (j < s.start + s.len).then_some((i, s))
    }

    /// The generation this leg last wrote at position `j`, if it did.
    #[inline]
    fn written_at(&self, j: u64) -> Option<u32> {
        let (_, s) = self.slice_of(j)?;
        s.last_pass(j - s.start)
            .map(|m| self.gen_base.wrapping_add(m as u32))
    }

    /// One past the newest generation this leg has written (its base if none).
    fn gen_end(&self) -> u32 {
        let passes = self
            .slices
            .iter()
            .map(|s| (s.from + s.count()).div_ceil(s.len))
            .max()
            .unwrap_or(0);
        self.gen_base.wrapping_add(passes as u32)
    }

    /// Every block written at least once, over a region that is all whole blocks.
    fn covers_everything(&self, units: u64) -> bool {
        self.blocks * self.block_units as u64 == units
            && self.slices.iter().map(|s| s.len).sum::<u64>() == self.blocks
            && self.slices.iter().all(|s| s.count() >= s.len)
    }

    /// The unit of the `k`-th write of slice `i` (its first unit) and its generation, which
    /// a worker stamps on it; the count is not advanced.
    #[inline]
    pub fn nth_write(&self, i: usize, k: u64) -> (u64, u32) {
        let s = &self.slices[i];
        let (o, m) = s.nth(k);
        let j = s.start + o;
        let b = self.perm.map_or(j, |p| p.apply(j));
        (
            b * self.block_units as u64,
            self.gen_base.wrapping_add(m as u32),
        )
    }

    pub fn slice(&self, i: usize) -> &Slice {
        &self.slices[i]
    }
}

/// What a new leg is: its block size in units, whether its order is permuted, and each
/// worker's slice `(start, len, from)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegPlan {
    pub block_units: u32,
    pub permuted: bool,
    pub slices: Vec<(u64, u64, u64)>,
}

/// Errors of a leg plan or a record that does not fit the region.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WalkError {
    #[error("verification walk: {0}")]
    Plan(String),
    #[error("verification walk record: {0}; the checkpoint does not fit this target")]
    Record(String),
}

/// The serialised state: what the checkpoint keeps in place of a generation map (bytes, not
/// megabytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkRecord {
    pub seed: u64,
    pub units: u64,
    pub legs: Vec<LegRecord>,
    /// Legs recorded before the latest restart (see the module docs); `None`: never restarted
    /// since the oldest leg kept.
    #[serde(default)]
    pub recovered_legs: Option<usize>,
    /// Unit, kind (`exact`, `at_least`, `any_ours`, `never`), generation. A restore reads
    /// `exact` as `at_least` and `never` as `any_ours` (the unit may have been written since).
    #[serde(default)]
    pub exceptions: Vec<(u64, String, u32)>,
    /// The base of the next leg.
    pub next_gen: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegRecord {
    pub gen_base: u32,
    pub block_units: u32,
    pub permuted: bool,
    /// `(start, len, from, count)` per worker.
    pub slices: Vec<(u64, u64, u64, u64)>,
}

/// The computed verification state of one target (see the module docs).
pub struct WalkMap {
    seed: u64,
    units: u64,
    legs: Mutex<Arc<[Arc<Leg>]>>,
    /// See [`WalkRecord::recovered_legs`].
    /// `NOT_RECOVERED` for `None`.
    recovered_legs: AtomicUsize,
    exceptions: Mutex<HashMap<u64, Expect>>,
    /// Entries in `exceptions`: the hot path looks at the map only when there are any.
    exception_count: AtomicUsize,
    next_gen: Mutex<u32>,
}

impl std::fmt::Debug for WalkMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalkMap")
            .field("units", &self.units)
            .field("legs", &self.legs().len())
            .field("exceptions", &self.exception_count.load(Ordering::Relaxed))
            .finish()
    }
}

const NOT_RECOVERED: usize = usize::MAX;

/// How far the first leg after a restart starts past every recorded generation: past any
/// leg that ran unrecorded after the last checkpoint. Generations are a whole target's (one
/// per leg and pass), so on a tiny region a minute can use thousands; 2^20 leaves room for
/// 4,000 restarts in 32 bits.
pub const RECOVERY_JUMP: u32 = 1 << 20;

/// Bytes per exception entry in memory (key, value and hash-table overhead, rounded up).
const EXCEPTION_BYTES: usize = 48;

impl WalkMap {
    /// A region of `len` bytes (a trailing partial unit is not covered), nothing written.
    pub fn new(len: u64, seed: u64) -> Self {
        WalkMap {
            seed,
            units: len / VERIFY_UNIT as u64,
            legs: Mutex::new(Arc::from(Vec::new())),
            recovered_legs: AtomicUsize::new(NOT_RECOVERED),
            exceptions: Mutex::new(HashMap::new()),
            exception_count: AtomicUsize::new(0),
            next_gen: Mutex::new(1),
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn units(&self) -> u64 {
        self.units
    }

    /// What a verification pass must read to check every unit written: `None` when some leg
    /// wrote every block (read the whole region), else the legs that wrote anything, each of
    /// whose slices wrote positions `from..from + written` ([`Slice::written`]).
    pub fn read_back_legs(&self) -> Option<Vec<Arc<Leg>>> {
        let legs = self.legs();
        if legs.iter().any(|l| l.covers_everything(self.units)) {
            return None;
        }
        Some(
            legs.iter()
                .filter(|l| l.slices.iter().any(|s| s.count() > 0))
                .cloned()
                .collect(),
        )
    }

    /// Units the legs `legs` wrote at least once, each leg counted apart.
    pub fn written_units(legs: &[Arc<Leg>]) -> u64 {
        legs.iter()
            .flat_map(|l| l.slices.iter().map(|s| s.written() * l.block_units as u64))
            .sum()
    }

    /// The legs now, newest last: what a segment's hooks check against.
    pub fn legs(&self) -> Arc<[Arc<Leg>]> {
        lock(&self.legs).clone()
    }

    fn recovered(&self) -> Option<usize> {
        let n = self.recovered_legs.load(Ordering::Relaxed);
        (n != NOT_RECOVERED).then_some(n)
    }

    fn set_recovered(&self, n: Option<usize>) {
        self.recovered_legs
            .store(n.unwrap_or(NOT_RECOVERED), Ordering::Relaxed);
    }

    /// The order key for legs of `block_units`: one per block size, so legs of the same
    /// block size share their positions and a unit's position is worked out once.
    fn key(&self, block_units: u32) -> u64 {
        self.seed ^ (block_units as u64).wrapping_mul(0xd6e8_feb8_6659_fd93)
    }

    /// Start a leg. Its slices must be disjoint, inside `0..units / block_units`, and no
    /// segment of this target may be running.
    pub fn begin_leg(&self, plan: &LegPlan) -> Result<Arc<Leg>, WalkError> {
        let bad = |m: String| WalkError::Plan(m);
        if plan.block_units == 0 {
            return Err(bad("a block of 0 units".into()));
        }
        let blocks = self.units / plan.block_units as u64;
        let mut slices: Vec<(u64, u64, u64)> = plan.slices.clone();
        slices.sort_unstable();
        let mut end = 0;
        for &(start, len, from) in &slices {
            if len == 0 || start < end || start + len > blocks || from >= len {
                return Err(bad(format!(
                    "slice {start}+{len} (from {from}) does not fit {blocks} blocks or overlaps another"
                )));
            }
            end = start + len;
        }
        let gen_base = self.refresh_next_gen();
        let leg = Arc::new(Leg {
            gen_base,
            block_units: plan.block_units,
            blocks,
            perm: plan
                .permuted
                .then(|| Perm::new(blocks, self.key(plan.block_units))),
            slices: slices
                .into_iter()
                .map(|(start, len, from)| Slice {
                    start,
                    len,
                    from,
                    count: AtomicU64::new(0),
                })
                .collect(),
        });
        let mut legs = lock(&self.legs);
        let mut v: Vec<Arc<Leg>> = legs.iter().cloned().collect();
        // A finished leg that wrote everything hides all older ones.
        if let Some(i) = v.iter().rposition(|l| l.covers_everything(self.units)) {
            v.drain(..i);
            let rec = self.recovered();
            self.set_recovered(rec.and_then(|n| n.checked_sub(i).filter(|&n| n > 0)));
        }
        v.push(leg.clone());
        *legs = Arc::from(v);
        // The next base is worked out from this leg's counts when the next leg begins.
        Ok(leg)
    }

    /// The base the next leg would start at: past every generation written.
    fn refresh_next_gen(&self) -> u32 {
        let end = self.legs().iter().map(|l| l.gen_end()).max().unwrap_or(1);
        let mut next = lock(&self.next_gen);
        *next = (*next).max(end).max(1);
        *next
    }

    /// Record the `k`-th write of slice `i` of `leg` as issued: its count becomes `k + 1`.
    #[inline]
    pub fn issue_write(&self, leg: &Leg, i: usize, k: u64) {
        leg.slices[i].count.store(k + 1, Ordering::Relaxed);
    }

    /// A write of `len_units` units at `unit` completed: units with an exception lose it.
    #[inline]
    pub fn complete_write(&self, unit: u64, len_units: u64) {
        if self.exception_count.load(Ordering::Relaxed) > 0 {
            let mut ex = lock(&self.exceptions);
            for u in unit..unit + len_units {
                ex.remove(&u);
            }
            self.exception_count.store(ex.len(), Ordering::Relaxed);
        }
    }

    /// A write of `len_units` units at `unit`, issued as the `k`-th of slice `i` of leg
    /// `legs[leg_index]`, failed: each unit may hold what it held before or the new block, so
    /// both are accepted (until a read learns which, or the unit is written again).
    pub fn fail_write(
        &self,
        legs: &[Arc<Leg>],
        at: (usize, usize, u64),
        unit: u64,
        len_units: u64,
    ) {
        self.set_before(legs, at, (unit, len_units), |before| match before {
            Expect::Exact(g) | Expect::AtLeast(g) | Expect::Generation(g) => Expect::AtLeast(g),
            _ => Expect::Recovered(None),
        });
    }

    /// The `k`-th write of slice `i` of `legs[leg_index]` stopped short: it is counted, but
    /// the `len_units` units from `unit` on were never written by it and keep exactly what
    /// they held before it (a block written in pieces whose worker stopped inside it).
    pub fn keep_unwritten(
        &self,
        legs: &[Arc<Leg>],
        at: (usize, usize, u64),
        unit: u64,
        len_units: u64,
    ) {
        self.set_before(legs, at, (unit, len_units), |before| before);
    }

    /// Give each unit of `units` (first, count) the exception `rule(before)`, where `before`
    /// is what it held before the `k`-th write of slice `i` of `legs[leg_index]`: its
    /// exception, else this leg's write of it one pass earlier, else the older legs.
    fn set_before(
        &self,
        legs: &[Arc<Leg>],
        (leg_index, i, k): (usize, usize, u64),
        (unit, len_units): (u64, u64),
        rule: impl Fn(Expect) -> Expect,
    ) {
        if len_units == 0 {
            return;
        }
        let leg = &legs[leg_index];
        let s = &leg.slices[i];
        let a = s.from + k;
        let mut ex = lock(&self.exceptions);
        for u in unit..unit + len_units {
            let before = match ex.get(&u) {
                Some(e) => *e,
                None if a >= s.from + s.len => {
                    Expect::Exact(leg.gen_base.wrapping_add((a / s.len - 1) as u32))
                }
                None => self.expect_in(&legs[..leg_index], u),
            };
            ex.insert(u, rule(before));
        }
        self.exception_count.store(ex.len(), Ordering::Relaxed);
    }

    /// What a read of unit `u` should find, by the legs `legs` (a hook's snapshot).
    #[inline]
    pub fn expect(&self, legs: &[Arc<Leg>], u: u64) -> Expect {
        if self.exception_count.load(Ordering::Relaxed) > 0
            && let Some(e) = lock(&self.exceptions).get(&u)
        {
            return *e;
        }
        self.expect_in(legs, u)
    }

    fn expect_in(&self, legs: &[Arc<Leg>], u: u64) -> Expect {
        let recovered = self.recovered();
        // One position per (block size, order) met on the way: legs of a block size share it.
        let mut cache: [(u32, bool, u64); 4] = [(0, false, 0); 4];
        let mut cached = 0usize;
        for (idx, leg) in legs.iter().enumerate().rev() {
            let b = u / leg.block_units as u64;
            if b >= leg.blocks {
                continue;
            }
            let key = (leg.block_units, leg.perm.is_some());
            let j = match cache[..cached].iter().find(|c| (c.0, c.1) == key) {
                Some(c) => c.2,
                None => {
                    let j = leg.position(b);
                    if cached < cache.len() {
                        cache[cached] = (key.0, key.1, j);
                        cached += 1;
                    }
                    j
                }
            };
            if let Some(g) = leg.written_at(j) {
                return match recovered {
                    Some(n) if idx < n => Expect::AtLeast(g),
                    _ => Expect::Exact(g),
                };
            }
        }
        if recovered.is_some() {
            Expect::Recovered(None)
        } else {
            Expect::NeverWritten
        }
    }

    /// A unit that may be newer than the record (after a restart or a failed write) checked
    /// out holding generation `found`: expect exactly that until it is written again.
    pub fn learn(&self, u: u64, expected: Expect, found: Option<u32>) {
        let (Some(f), true) = (found, expected.is_recovered()) else {
            // Not ours (anything foreign stays accepted), or nothing to learn.
            return;
        };
        let as_recorded = expected == Expect::AtLeast(f);
        if as_recorded && self.exception_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut ex = lock(&self.exceptions);
        // A unit as recorded needs an entry only to replace a failed write's; the record
        // already says the rest.
        if as_recorded && !ex.contains_key(&u) {
            return;
        }
        ex.insert(u, Expect::Exact(f));
        self.exception_count.store(ex.len(), Ordering::Relaxed);
    }

    /// Units with an exception.
    pub fn exceptions(&self) -> usize {
        self.exception_count.load(Ordering::Relaxed)
    }

    /// Bytes of memory the state uses: the legs, their slices and the exceptions.
    pub fn memory_bytes(&self) -> usize {
        let legs = self.legs();
        std::mem::size_of::<Self>()
            + legs
                .iter()
                .map(|l| std::mem::size_of::<Leg>() + l.slices.len() * std::mem::size_of::<Slice>())
                .sum::<usize>()
            + self.exceptions() * EXCEPTION_BYTES
    }

    /// The state as the checkpoint keeps it.
    pub fn record(&self) -> WalkRecord {
        let legs = self.legs();
        let next_gen = self.refresh_next_gen();
        WalkRecord {
            seed: self.seed,
            units: self.units,
            legs: legs
                .iter()
                .map(|l| LegRecord {
                    gen_base: l.gen_base,
                    block_units: l.block_units,
                    permuted: l.perm.is_some(),
                    slices: l
                        .slices
                        .iter()
                        .map(|s| (s.start, s.len, s.from, s.count()))
                        .collect(),
                })
                .collect(),
            recovered_legs: self.recovered(),
            exceptions: {
                let mut v: Vec<(u64, String, u32)> = lock(&self.exceptions)
                    .iter()
                    .filter_map(|(&u, e)| {
                        let (kind, g) = match *e {
                            Expect::Exact(g) => ("exact", g),
                            Expect::AtLeast(g) => ("at_least", g),
                            Expect::Recovered(None) => ("any_ours", 0),
                            Expect::NeverWritten => ("never", 0),
                            _ => return None,
                        };
                        Some((u, kind.to_string(), g))
                    })
                    .collect();
                v.sort_unstable();
                v
            },
            next_gen,
        }
    }

    /// The state after a restart from `rec`: every recorded leg is behind the restart mark,
    /// and the next leg starts [`RECOVERY_JUMP`] generations past everything recorded.
    pub fn restore(rec: &WalkRecord) -> Result<WalkMap, WalkError> {
        let bad = |m: String| WalkError::Record(m);
        let map = WalkMap::new(rec.units * VERIFY_UNIT as u64, rec.seed);
        let mut legs = Vec::with_capacity(rec.legs.len());
        for l in &rec.legs {
            if l.block_units == 0 {
                return Err(bad("a leg of 0-unit blocks".into()));
            }
            let blocks = rec.units / l.block_units as u64;
            let mut end = 0;
            let mut slices = Vec::with_capacity(l.slices.len());
            for &(start, len, from, count) in &l.slices {
                if len == 0 || start < end || start.saturating_add(len) > blocks || from >= len {
                    return Err(bad(format!(
                        "slice {start}+{len} does not fit {blocks} blocks"
                    )));
                }
                end = start + len;
                slices.push(Slice {
                    start,
                    len,
                    from,
                    count: AtomicU64::new(count),
                });
            }
            legs.push(Arc::new(Leg {
                gen_base: l.gen_base,
                block_units: l.block_units,
                blocks,
                perm: l
                    .permuted
                    .then(|| Perm::new(blocks, map.key(l.block_units))),
                slices: slices.into_boxed_slice(),
            }));
        }
        let n = legs.len();
        *lock(&map.legs) = Arc::from(legs);
        map.set_recovered(Some(n));
        {
            let mut ex = lock(&map.exceptions);
            for (u, kind, g) in &rec.exceptions {
                // What a unit held at the record it may have been written since, like every
                // unit behind the restart mark: its recorded generation or newer.
                let e = match kind.as_str() {
                    "exact" | "at_least" => Expect::AtLeast(*g),
                    "any_ours" | "never" => Expect::Recovered(None),
                    other => return Err(bad(format!("unknown exception kind {other:?}"))),
                };
                if *u >= rec.units {
                    return Err(bad(format!("exception for unit {u} past the region")));
                }
                ex.insert(*u, e);
            }
            map.exception_count.store(ex.len(), Ordering::Relaxed);
        }
        let end = map.refresh_next_gen();
        *lock(&map.next_gen) = end.max(rec.next_gen).wrapping_add(RECOVERY_JUMP);
        Ok(map)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
