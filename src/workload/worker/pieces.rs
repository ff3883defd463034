//! Pure pieces of the worker: random numbers, block sizes, offsets, stripes, pacing.

use crate::model::spec::{Access, JobSpec, Skew};

/// xoshiro256++ seeded through splitmix64: small, fast, good enough for workload generation.
#[derive(Clone)]
pub struct Rng([u64; 4]);

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut s = seed;
        Rng([
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
        ])
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }
    /// Uniform in `0..n` (`n > 0`), by multiply-shift (Lemire), without division.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Weighted block-size selection from a [`crate::model::spec::BlockSizeMix`].
#[derive(Clone, Debug)]
pub struct BsPicker {
    sizes: Vec<u32>,
    /// Cumulative weights.
    cum: Vec<u64>,
    total: u64,
}

impl BsPicker {
    pub fn new(entries: &[(u32, u32)]) -> Self {
        let mut cum = Vec::with_capacity(entries.len());
        let mut total = 0u64;
        let mut sizes = Vec::with_capacity(entries.len());
        for &(bs, w) in entries.iter().filter(|e| e.1 > 0) {
            total += w as u64;
            cum.push(total);
            sizes.push(bs);
        }
        if sizes.is_empty() {
            sizes.push(4096);
            cum.push(1);
            total = 1;
        }
        BsPicker { sizes, cum, total }
    }
    /// Index into the size table.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.sizes.len() == 1 {
            return 0;
        }
        let r = rng.below(self.total);
        let mut i = 0;
        while r >= self.cum[i] {
            i += 1;
        }
        i
    }
    pub fn size(&self, i: usize) -> u32 {
        self.sizes[i]
    }
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Offset alignment of a job: the smallest block size for random access, the gcd of the block
/// sizes for sequential access; at least 512 bytes either way.
pub fn job_align(job: &JobSpec) -> u64 {
    let sizes = job.bs.entries.iter().map(|e| e.0 as u64);
    let a = match job.access {
        Access::Sequential => sizes.fold(0, gcd),
        Access::Random { .. } => sizes.min().unwrap_or(4096),
    };
    a.max(512)
}

/// The aligned part of a region: `(start, len)` with both multiples of `align`.
pub fn aligned_region(region_start: u64, region_len: u64, align: u64) -> (u64, u64) {
    let start = region_start.div_ceil(align) * align;
    let end = (region_start + region_len) / align * align;
    (start, end.saturating_sub(start))
}

/// Stripe `index` of `workers` for sequential access: `(start, len)` in bytes, aligned to
/// `align`. The aligned region is split into `workers` stripes whose lengths differ by at
/// most one block; together they cover it exactly.
pub fn stripe_bounds(
    region_start: u64,
    region_len: u64,
    workers: u32,
    index: usize,
    align: u64,
) -> (u64, u64) {
    let (start, len) = aligned_region(region_start, region_len, align);
    let blocks = (len / align) as u128;
    let w = workers.max(1) as u128;
    let i = (index as u128).min(w - 1);
    let b0 = (blocks * i / w) as u64;
    let b1 = (blocks * (i + 1) / w) as u64;
    (start + b0 * align, (b1 - b0) * align)
}

/// Sum of `i^-theta` for `i` in `1..=n`: exact for the first 65536 terms, Euler–Maclaurin for
/// the tail, so setup stays O(1) even for billions of blocks.
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1 << 16;
    let m = n.min(EXACT);
    let mut s = 0.0;
    for i in 1..=m {
        s += (i as f64).powf(-theta);
    }
    if n > m {
        let (a, b) = (m as f64, n as f64);
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (b / a).ln()
        } else {
            (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
        };
        // sum_{i=m+1}^{n} f(i) = ∫_m^n f + (f(n) - f(m))/2 + (f'(n) - f'(m))/12 + ...
        s += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    s
}

/// Zipf-distributed ranks in `0..n` by Gray et al., "Quickly generating billion-record
/// synthetic databases" (SIGMOD 1994), as in YCSB and fio: O(1) per draw after computing
/// `zeta(n)` once. Rank 0 is the hottest.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    half_pow: f64,
}

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Self {
        let n = n.max(1);
        // The method's exponent 1/(1-theta) is undefined at exactly 1.
        let theta = if (theta - 1.0).abs() < 1e-6 {
            1.0 - 1e-6
        } else {
            theta
        };
        let zetan = zeta(n, theta);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            0.0
        };
        Zipf {
            n,
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta,
            half_pow: 0.5f64.powf(theta),
        }
    }
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.f64();
        let uz = u * self.zetan;
        if uz < 1.0 || self.n == 1 {
            return 0;
        }
        if uz < 1.0 + self.half_pow || self.n == 2 {
            return 1;
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Spread zipf ranks over the region (as fio does with its hash), the same way for every
/// worker of a job so they share one hot set.
#[inline]
fn scramble(rank: u64, n: u64) -> u64 {
    let mut x = rank;
    splitmix64(&mut x) % n
}

/// Where the next I/O goes, in units of `align` blocks (random) or bytes (sequential).
#[derive(Clone, Debug)]
enum Placement {
    Uniform,
    Zipf(Zipf),
    /// `band` blocks at the start receive `access` (as a u64 threshold) of the I/Os.
    HotBand {
        band: u64,
        threshold: u64,
    },
    Sequential {
        start: u64,
        len: u64,
        pos: u64,
    },
    /// Verification's permuted walk ([`super::walker`]).
    Walk(Box<super::walker::Walker>),
}

/// Per-I/O offset generator, precomputed for a job and a worker.
#[derive(Clone, Debug)]
pub struct OffsetGen {
    place: Placement,
    start: u64,
    align: u64,
    /// Blocks of `align` in the region.
    blocks: u64,
    /// For each block-size index: the last block index an I/O of that size may start at.
    max_block: Vec<u64>,
}

impl OffsetGen {
    /// `sizes` as in [`BsPicker::sizes`]. Errors with the offending block size when the region
    /// (or this worker's stripe) cannot hold it.
    pub fn new(
        job: &JobSpec,
        sizes: &[u32],
        region_start: u64,
        region_len: u64,
        index: usize,
    ) -> Result<Self, u32> {
        let align = job_align(job);
        let max_bs = sizes.iter().copied().max().unwrap_or(4096);
        let (start, len) = aligned_region(region_start, region_len, align);
        let blocks = len / align;
        let place = match &job.access {
            Access::Sequential => {
                let (s, l) = stripe_bounds(region_start, region_len, job.workers, index, align);
                if l < max_bs as u64 {
                    return Err(max_bs);
                }
                Placement::Sequential {
                    start: s,
                    len: l,
                    pos: 0,
                }
            }
            Access::Random { skew } => {
                if len < max_bs as u64 {
                    return Err(max_bs);
                }
                match skew {
                    Skew::Uniform => Placement::Uniform,
                    Skew::Zipf { theta } => Placement::Zipf(Zipf::new(blocks, *theta)),
                    Skew::HotBand { fraction, access } => {
                        let band = ((blocks as f64 * fraction.clamp(0.0, 1.0)).ceil() as u64)
                            .clamp(1, blocks);
                        let threshold = (access.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
                        Placement::HotBand { band, threshold }
                    }
                }
            }
        };
        let max_block = sizes
            .iter()
            .map(|&bs| (len.saturating_sub(bs as u64)) / align)
            .collect();
        Ok(OffsetGen {
            place,
            start,
            align,
            blocks,
            max_block,
        })
    }

    /// Offset and (possibly trimmed, for a sequential stripe's end) length of the next I/O of
    /// block-size index `bsi` with size `bs`.
    #[inline]
    pub fn next(&mut self, rng: &mut Rng, bsi: usize, bs: u32, write: bool) -> (u64, u32) {
        if let Placement::Walk(w) = &mut self.place {
            return w.next(rng, bs, write);
        }
        let last = self.max_block[bsi];
        let block = match &mut self.place {
            Placement::Uniform => rng.below(last + 1),
            Placement::Zipf(z) => scramble(z.next(rng), self.blocks) % (last + 1),
            Placement::HotBand { band, threshold } => {
                let b = *band;
                let k = if rng.next_u64() < *threshold || b >= self.blocks {
                    rng.below(b)
                } else {
                    b + rng.below(self.blocks - b)
                };
                k % (last + 1)
            }
            Placement::Walk(_) => unreachable!("handled above"),
            Placement::Sequential { start, len, pos } => {
                let off = *start + *pos;
                let l = (bs as u64).min(*len - *pos);
                *pos += l;
                if *pos >= *len {
                    *pos = 0;
                }
                return (off, l as u32);
            }
        };
        (self.start + block * self.align, bs)
    }

    pub fn align(&self) -> u64 {
        self.align
    }

    /// Walk a verified random leg's slices instead (see [`super::walker`]); `entries`, the
    /// job's sizes and weights, must each divide the place's block.
    pub fn walk(&mut self, place: super::walker::WalkPlace, entries: &[(u32, u32)]) {
        self.place = Placement::Walk(Box::new(super::walker::Walker::new(place, entries)));
    }

    /// Sequential access: continue the walk `pos` bytes into the stripe (wrapping at its end,
    /// rounded down to the alignment). Random access ignores it.
    pub fn start_at(&mut self, pos: u64) {
        if let Placement::Sequential { len, pos: p, .. } = &mut self.place {
            *p = (pos % *len) / self.align * self.align;
        }
    }
}

/// Deadline pacing: I/O `k` is due at `t0 + k * interval`. Falling behind allows a catch-up
/// burst of at most `max_burst` I/Os; being ahead means waiting, never drifting.
///
/// `max_burst` is at least the I/Os of [`CATCH_UP_NS`]: a late wake-up (timer slack, a busy
/// CPU, a wait that returned late) is made up for instead of lost. With a burst of only the
/// queue depth, every oversleep of more than `depth` intervals dropped I/Os for good, which
/// capped paced psync at roughly `depth` I/Os per sleep (about 24k IOPS at depth 4).
#[derive(Clone, Debug)]
pub struct Pacer {
    interval_ns: f64,
    next_ns: f64,
    max_burst: u64,
}

/// How far behind schedule a paced worker may fall and still catch up.
pub const CATCH_UP_NS: u64 = 5_000_000;

impl Pacer {
    pub fn new(iops: f64, max_burst: u64, now_ns: u64) -> Self {
        let iops = iops.max(1e-3);
        let window = (iops * CATCH_UP_NS as f64 / 1e9).ceil() as u64;
        Pacer {
            interval_ns: 1e9 / iops,
            next_ns: now_ns as f64,
            max_burst: max_burst.max(window).max(1),
        }
    }
    /// How many I/Os may be issued at `now_ns`.
    #[inline]
    pub fn due(&mut self, now_ns: u64) -> u64 {
        let now = now_ns as f64;
        if now < self.next_ns {
            return 0;
        }
        let floor = now - (self.max_burst - 1) as f64 * self.interval_ns;
        if self.next_ns < floor {
            self.next_ns = floor;
        }
        (((now - self.next_ns) / self.interval_ns) as u64 + 1).min(self.max_burst)
    }
    #[inline]
    pub fn take(&mut self) {
        self.next_ns += self.interval_ns;
    }
    /// Nanoseconds until the next I/O is due.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        (self.next_ns - now_ns as f64).max(0.0) as u64
    }
}
