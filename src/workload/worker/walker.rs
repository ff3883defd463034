//! Verification's permuted walk for one worker (`model::walk`): where its writes and reads go
//! when the target keeps the computed state.
//!
//! A worker owns one slice of the leg's order, or two: a **hot band** and a cold one, each a
//! slice of positions of the same keyed permutation. The permutation's first positions are the
//! hot band, so under verification the hot set is a scattered, keyed share of the region's
//! blocks rather than its first LBAs (as fio's zipf scrambles its hot set); the share of I/Os
//! each band gets is the profile's. Writes take each slice's positions in order, so every
//! block of a band is written once per pass of that band.
//!
//! **Mixed block sizes**: the leg's block is the job's largest size (every other size divides
//! it). A block is written either whole, or as **pieces** of the smaller sizes laid end to end
//! from its start, all stamped with the block's generation; the walk counts the block written
//! when its last piece is queued. Until then the block is **open**: a read that lands in it
//! takes a neighbouring block instead, or, with no other block to go to, only the part no
//! piece has reached yet (which still holds what the walk's record says). Sizes are drawn so
//! that the I/O count per size follows the job's weights (whole blocks included).

use crate::model::walk::Perm;
use crate::workload::worker::Rng;

/// A slice of the leg's positions: `start..start + len`, written from `from` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    pub start: u64,
    pub len: u64,
    pub from: u64,
}

/// A worker's place in a verified random leg (see the module docs); position `j` is block
/// `perm.apply(j)` of `block` bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WalkPlace {
    pub perm: Perm,
    /// The worker's (hot) slice.
    pub band: Band,
    /// The cold slice, when the job has a hot band; `hot_share` of the I/Os go to `band`.
    pub cold: Option<Band>,
    pub hot_share: f64,
    pub block: u64,
    /// Reads too take the slice's positions in order, from `from` on (the verification pass's
    /// read-back of what a leg wrote); otherwise a read takes a random position of a slice.
    pub in_order: bool,
}

/// How a block is cut into pieces of the job's sizes: each next size is drawn among those
/// that fit what is left of the block, weighted by how far each lags behind its share of the
/// writes so far. The forced fits at a block's end (a 4 KiB piece left over) are made up for
/// by the next draws, so the count per size follows the job's weights.
#[derive(Clone, Debug)]
struct Split {
    sizes: Vec<u64>,
    share: Vec<f64>,
    count: Vec<f64>,
    n: f64,
}

impl Split {
    /// `entries`: the job's `(size, weight)`s, every size dividing `block`. `None` when every
    /// write is a whole block.
    fn new(entries: &[(u32, u32)], block: u64) -> Option<Split> {
        let e: Vec<(u64, f64)> = entries
            .iter()
            .filter(|e| e.1 > 0)
            .map(|&(s, w)| (s as u64, w as f64))
            .collect();
        if e.iter().all(|&(s, _)| s == block) {
            return None;
        }
        let total: f64 = e.iter().map(|x| x.1).sum();
        Some(Split {
            sizes: e.iter().map(|x| x.0).collect(),
            share: e.iter().map(|x| x.1 / total).collect(),
            count: vec![0.0; e.len()],
            n: 0.0,
        })
    }

    /// The next write's size with `left` bytes of the block still to write (every size is a
    /// multiple of the smallest, and so is `left`).
    fn piece(&mut self, rng: &mut Rng, left: u64) -> u64 {
        self.n += 1.0;
        let deficit = |i: usize| self.share[i] * self.n - self.count[i];
        let fits = |i: &usize| self.sizes[*i] <= left;
        let n = self.sizes.len();
        let lag: f64 = (0..n).filter(fits).map(|i| deficit(i).max(0.0)).sum();
        let pick = if lag > 0.0 {
            let mut r = rng.f64() * lag;
            let mut pick = None;
            for i in (0..n).filter(fits) {
                let d = deficit(i).max(0.0);
                if d > 0.0 {
                    pick = Some(i);
                    if r < d {
                        break;
                    }
                    r -= d;
                }
            }
            pick
        } else {
            (0..n)
                .filter(fits)
                .max_by(|&a, &b| deficit(a).total_cmp(&deficit(b)))
        };
        match pick {
            Some(i) => {
                self.count[i] += 1.0;
                self.sizes[i]
            }
            None => left,
        }
    }
}

/// The block being written in pieces.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// Its band and position.
    band: usize,
    j: u64,
    /// Its first byte, and the bytes its pieces have covered so far (`< block`).
    base: u64,
    done: u64,
}

/// The walk's state in the worker's offset generator.
#[derive(Clone, Debug)]
pub(super) struct Walker {
    place: WalkPlace,
    /// Writes taken from each band so far.
    next: [u64; 2],
    hot: u64,
    split: Option<Split>,
    open: Option<Open>,
    /// Offsets inside a block are multiples of this (the job's smallest size).
    align: u64,
}

impl Walker {
    /// `entries`: the job's block sizes and weights (each dividing `place.block`).
    pub(super) fn new(place: WalkPlace, entries: &[(u32, u32)]) -> Walker {
        let align = entries
            .iter()
            .map(|e| e.0 as u64)
            .min()
            .unwrap_or(place.block)
            .clamp(1, place.block);
        Walker {
            place,
            next: [0; 2],
            hot: (place.hot_share.clamp(0.0, 1.0) * u64::MAX as f64) as u64,
            split: Split::new(entries, place.block),
            open: None,
            align,
        }
    }

    fn band(&self, b: usize) -> Band {
        match (b, self.place.cold) {
            (1, Some(c)) => c,
            _ => self.place.band,
        }
    }

    #[inline]
    fn pick_band(&self, rng: &mut Rng) -> usize {
        match self.place.cold {
            Some(_) if rng.next_u64() >= self.hot => 1,
            _ => 0,
        }
    }

    /// Offset and length of the next I/O; `bs` is the size the job drew (reads only).
    #[inline]
    pub(super) fn next(&mut self, rng: &mut Rng, bs: u32, write: bool) -> (u64, u32) {
        let block = self.place.block;
        if write {
            if let Some(o) = self.open.as_mut() {
                let left = block - o.done;
                let len = self.split.as_mut().map_or(left, |s| s.piece(rng, left));
                let off = o.base + o.done;
                o.done += len;
                if o.done >= block {
                    self.open = None;
                }
                return (off, len as u32);
            }
            let b = self.pick_band(rng);
            let band = self.band(b);
            let j = band.start + (band.from + self.next[b]) % band.len;
            self.next[b] += 1;
            let base = self.place.perm.apply(j) * block;
            let Some(split) = self.split.as_mut() else {
                return (base, block as u32);
            };
            let len = split.piece(rng, block);
            if len < block {
                self.open = Some(Open {
                    band: b,
                    j,
                    base,
                    done: len,
                });
            }
            return (base, len as u32);
        }
        if self.place.in_order {
            let band = self.place.band;
            let j = band.start + (band.from + self.next[0]) % band.len;
            self.next[0] += 1;
            return (self.place.perm.apply(j) * block, block as u32);
        }
        let b = self.pick_band(rng);
        let mut band = self.band(b);
        let mut j = band.start + rng.below(band.len);
        let bs = (bs as u64).clamp(self.align, block);
        let inner = rng.below((block - bs) / self.align + 1) * self.align;
        if let Some(o) = self.open
            && o.band == b
            && o.j == j
        {
            if band.len > 1 {
                j = band.start + (j - band.start + 1) % band.len;
            } else if self.place.cold.is_some() {
                // The other band: its blocks are not open (one block is open at a time).
                band = self.band(1 - b);
                j = band.start + rng.below(band.len);
            } else {
                // Only the open block to read: the part no piece has reached yet.
                let tail = block - o.done;
                return (o.base + o.done, tail.min(bs) as u32);
            }
        }
        (self.place.perm.apply(j) * block + inner, bs as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(blocks: u64, block: u64, cold: bool) -> WalkPlace {
        let h = blocks / 4;
        WalkPlace {
            perm: Perm::new(blocks, 7),
            band: Band {
                start: 0,
                len: if cold { h } else { blocks },
                from: 0,
            },
            cold: cold.then_some(Band {
                start: h,
                len: blocks - h,
                from: 0,
            }),
            hot_share: 0.8,
            block,
            in_order: false,
        }
    }

    /// The count share of each size over many writes is the job's, within two points.
    #[test]
    fn pieces_follow_the_jobs_size_weights() {
        const K: u32 = 1024;
        let mixes: [&[(u32, u32)]; 4] = [
            &[(4 * K, 10), (8 * K, 80), (64 * K, 10)],
            &[(8 * K, 80), (16 * K, 12), (128 * K, 8)],
            &[
                (4 * K, 50),
                (8 * K, 10),
                (16 * K, 10),
                (32 * K, 10),
                (64 * K, 20),
            ],
            &[(4 * K, 70), (8 * K, 10), (16 * K, 10), (64 * K, 10)],
        ];
        for mix in mixes {
            let block = mix.iter().map(|e| e.0).max().unwrap() as u64;
            let mut w = Walker::new(place(1 << 12, block, true), mix);
            let mut rng = Rng::new(3);
            let mut counts = std::collections::HashMap::new();
            let n = 400_000;
            for _ in 0..n {
                let (_, len) = w.next(&mut rng, 0, true);
                *counts.entry(len).or_insert(0u64) += 1;
            }
            let total: u32 = mix.iter().map(|e| e.1).sum();
            for &(s, wt) in mix {
                let got = counts.get(&s).copied().unwrap_or(0) as f64 / n as f64;
                let want = wt as f64 / total as f64;
                assert!(
                    (got - want).abs() < 0.02,
                    "{mix:?}: {s} B is {got:.3} of the writes, the job says {want:.3}"
                );
            }
            assert_eq!(
                counts
                    .keys()
                    .filter(|s| !mix.iter().any(|e| e.0 == **s))
                    .count(),
                0,
                "{mix:?}: a size not in the job: {counts:?}"
            );
        }
    }

    /// Writes cover each block end to end, one block at a time, every block of a band once per
    /// pass, and the hot band gets its share.
    #[test]
    fn writes_cover_each_block_once_per_pass_and_the_hot_band_gets_its_share() {
        let blocks = 64u64;
        let block = 65536u64;
        let mix = [(4096u32, 10u32), (8192, 80), (65536, 10)];
        let p = place(blocks, block, true);
        let mut w = Walker::new(p, &mix);
        let mut rng = Rng::new(11);
        let hot: std::collections::HashSet<u64> =
            (0..p.band.len).map(|j| p.perm.apply(j)).collect();
        let mut written = vec![0u64; blocks as usize];
        let (mut at, mut base, mut hot_writes, mut blocks_written) = (0u64, 0u64, 0u64, 0u64);
        for _ in 0..200_000 {
            let (off, len) = w.next(&mut rng, 0, true);
            if at == 0 {
                assert_eq!(off % block, 0, "a block starts at its first byte");
                base = off;
            }
            assert_eq!(off, base + at, "pieces are laid end to end");
            at += len as u64;
            assert!(at <= block);
            if at == block {
                let b = base / block;
                written[b as usize] += 1;
                blocks_written += 1;
                hot_writes += hot.contains(&b) as u64;
                at = 0;
            }
        }
        let hot_share = hot_writes as f64 / blocks_written as f64;
        assert!((hot_share - 0.8).abs() < 0.02, "hot share {hot_share}");
        // Within a band, every block has been written the same number of times, give or take
        // the pass in progress.
        for set in [true, false] {
            let c: Vec<u64> = (0..blocks)
                .filter(|b| hot.contains(b) == set)
                .map(|b| written[b as usize])
                .collect();
            let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
            assert!(hi - lo <= 1, "band {set}: {lo}..{hi}");
        }
    }

    /// A read never lands in the part of an open block that pieces have covered.
    #[test]
    fn reads_avoid_what_an_open_block_has_written() {
        for (blocks, cold) in [(64u64, true), (1, false), (2, false), (8, true)] {
            let block = 65536u64;
            let mix = [(4096u32, 90u32), (65536, 10)];
            let mut w = Walker::new(place(blocks, block, cold && blocks >= 4), &mix);
            let mut rng = Rng::new(5);
            for _ in 0..20_000 {
                if rng.below(3) == 0 {
                    w.next(&mut rng, 0, true);
                    continue;
                }
                let open = w.open;
                let bs = [4096u32, 65536][rng.below(2) as usize];
                let (off, len) = w.next(&mut rng, bs, false);
                assert!(len > 0 && off % 4096 == 0);
                if let Some(o) = open {
                    let (a, b) = (off, off + len as u64);
                    assert!(
                        b <= o.base || a >= o.base + o.done,
                        "{blocks} blocks: read {a}..{b} overlaps what the open block {}..{} wrote",
                        o.base,
                        o.base + o.done
                    );
                }
            }
        }
    }
}
