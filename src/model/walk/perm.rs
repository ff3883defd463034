//! A keyed bijection over `0..n` for any `n`: a 4-round balanced Feistel network on the
//! smallest even number of bits that holds `n`, restricted to `0..n` by cycle walking (apply
//! the network again while the result is out of range). Cycle walking keeps it a bijection,
//! because the network is one on its whole power-of-two domain, and since that domain is less
//! than 4 n, fewer than 4 steps are expected. The inverse walks the inverse network the same
//! way, so a position and a block are each one short computation from the other.
//!
//! It is what lets a verified random workload write every block exactly once per pass, in
//! an order that is still uniformly scattered, without any table: block `perm(k)` is the
//! `k`-th written, and a block's place in the order is `perm.inverse(block)`.

use serde::{Deserialize, Serialize};

/// Rounds of the network (Luby–Rackoff: 4 rounds with a good round function make a
/// pseudorandom permutation; the workload only needs the order to look random).
const ROUNDS: usize = 4;

#[inline]
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A keyed permutation of `0..n` (see the module docs). Small and `Copy`: every worker holds
/// its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perm {
    n: u64,
    /// Bits per half of the network's domain.
    half: u32,
    keys: [u64; ROUNDS],
}

impl Perm {
    /// The permutation of `0..n` for `key`. `n` of 0 or 1 gives the identity.
    pub fn new(n: u64, key: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let mut k = key;
        let keys = std::array::from_fn(|_| {
            k = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
            mix64(k)
        });
        Perm { n, half, keys }
    }

    /// Size of the domain.
    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    #[inline]
    fn mask(&self) -> u64 {
        (1u64 << self.half) - 1
    }

    #[inline]
    fn round(&self, r: usize, x: u64) -> u64 {
        mix64(x ^ self.keys[r]) & self.mask()
    }

    #[inline]
    fn network(&self, x: u64) -> u64 {
        let m = self.mask();
        let (mut l, mut r) = (x >> self.half, x & m);
        for i in 0..ROUNDS {
            let t = l ^ self.round(i, r);
            l = r;
            r = t;
        }
        (l << self.half) | r
    }

    #[inline]
    fn network_inv(&self, y: u64) -> u64 {
        let m = self.mask();
        let (mut l, mut r) = (y >> self.half, y & m);
        for i in (0..ROUNDS).rev() {
            let t = r ^ self.round(i, l);
            r = l;
            l = t;
        }
        (l << self.half) | r
    }

    /// The element at position `x` (`x < n`).
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.n.max(1));
        if self.n <= 1 {
            return x;
        }
        let mut y = self.network(x);
        while y >= self.n {
            y = self.network(y);
        }
        y
    }

    /// The position of element `y` (`y < n`): `inverse(apply(x)) == x`.
    #[inline]
    pub fn inverse(&self, y: u64) -> u64 {
        debug_assert!(y < self.n.max(1));
        if self.n <= 1 {
            return y;
        }
        let mut x = self.network_inv(y);
        while x >= self.n {
            x = self.network_inv(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_is_a_bijection_with_its_inverse() {
        for n in (0..=300u64).chain([511, 512, 513, 1000, 4095, 4097, 65_537, 100_003]) {
            let p = Perm::new(n, 0x1234 ^ n);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n, "n {n}: {x} -> {y} out of range");
                assert!(!seen[y as usize], "n {n}: {y} reached twice");
                seen[y as usize] = true;
                assert_eq!(p.inverse(y), x, "n {n}: inverse of {y}");
            }
        }
    }

    #[test]
    fn huge_domains_invert_and_stay_in_range() {
        // 16 TB of 4 KiB blocks, and an odd size past 2^40.
        for n in [3_906_250_000u64, (1 << 40) + 12_345] {
            let p = Perm::new(n, 99);
            let mut x = 7u64;
            for _ in 0..10_000 {
                x = (x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1)) % n;
                let y = p.apply(x);
                assert!(y < n);
                assert_eq!(p.inverse(y), x);
            }
        }
    }

    #[test]
    fn the_order_looks_scattered_and_differs_by_key() {
        let n = 1 << 16;
        let a = Perm::new(n, 1);
        let b = Perm::new(n, 2);
        // Consecutive positions land far apart: the mean gap is near n/3 for a random order.
        let mean_gap = (0..n - 1)
            .map(|x| a.apply(x).abs_diff(a.apply(x + 1)) as f64)
            .sum::<f64>()
            / (n - 1) as f64;
        assert!(
            (mean_gap - n as f64 / 3.0).abs() < n as f64 * 0.02,
            "mean gap {mean_gap} for n {n}"
        );
        // Each quarter of the positions covers each quarter of the blocks about equally.
        let mut cells = [[0u32; 4]; 4];
        for x in 0..n {
            cells[(x * 4 / n) as usize][(a.apply(x) * 4 / n) as usize] += 1;
        }
        for row in cells {
            for c in row {
                assert!(
                    (c as f64 - n as f64 / 16.0).abs() < n as f64 / 16.0 * 0.1,
                    "{cells:?}"
                );
            }
        }
        let same = (0..n).filter(|&x| a.apply(x) == b.apply(x)).count();
        assert!(same < 20, "{same} positions agree between two keys");
    }
}
