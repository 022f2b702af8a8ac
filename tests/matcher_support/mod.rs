//! Shared by the matcher tests: deterministic data sets and the f64 oracle.
#![allow(dead_code)]

use cluda::matcher::{DIM, Descriptor, Match};

/// SplitMix64: small, deterministic, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Roughly normal (sum of four uniforms, centred, unit variance).
    pub fn normal(&mut self) -> f32 {
        let s: f32 = (0..4).map(|_| self.unit()).sum();
        (s - 2.0) * 3.0f32.sqrt()
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `n` descriptors uniform in [0, 1).
pub fn uniform(n: usize, seed: u64) -> Vec<Descriptor> {
    let mut r = Rng::new(seed);
    (0..n).map(|_| std::array::from_fn(|_| r.unit())).collect()
}

/// `n` descriptors around `k` cluster centres (spread `sigma`).
pub fn clustered(n: usize, k: usize, sigma: f32, seed: u64) -> Vec<Descriptor> {
    let mut r = Rng::new(seed);
    let centres: Vec<Descriptor> = (0..k).map(|_| std::array::from_fn(|_| r.unit())).collect();
    (0..n)
        .map(|_| {
            let c = &centres[r.below(k)];
            std::array::from_fn(|d| c[d] + sigma * r.normal())
        })
        .collect()
}

/// Copies `a` with noise of scale `sigma` (squared distance about 128 sigma^2).
pub fn near(a: &Descriptor, sigma: f32, r: &mut Rng) -> Descriptor {
    std::array::from_fn(|d| a[d] + sigma * r.normal())
}

/// `lhs` uniform and `rhs` uniform with, for every `every`-th left row, near-duplicates at
/// noise scales `sigmas` (and an exact copy when `exact`) inserted at random positions.
pub fn with_near_duplicates(
    n: usize,
    m: usize,
    every: usize,
    sigmas: &[f32],
    exact: bool,
    seed: u64,
) -> (Vec<Descriptor>, Vec<Descriptor>) {
    let lhs = uniform(n, seed);
    let mut rhs = uniform(m, seed + 1);
    let mut r = Rng::new(seed + 2);
    for i in (0..n).step_by(every.max(1)) {
        for &s in sigmas {
            let pos = r.below(rhs.len() + 1);
            rhs.insert(pos, near(&lhs[i], s, &mut r));
        }
        if exact {
            let pos = r.below(rhs.len() + 1);
            rhs.insert(pos, lhs[i]);
        }
    }
    (lhs, rhs)
}

/// Exact squared distance in f64 (an indexed loop: fast enough in unoptimised test builds).
pub fn exact(a: &Descriptor, b: &Descriptor) -> f64 {
    let mut s = 0.0f64;
    for k in 0..DIM {
        let d = f64::from(a[k]) - f64::from(b[k]);
        s += d * d;
    }
    s
}

/// The acceptance criterion of issue 6, item 3: the returned index's exact distance is within
/// 1e-5 relative of the exact minimum, plus `1e-12 (1 + ||a||^2)` absolute (below float32's
/// resolution of the inputs); the returned distance is the chosen pair's distance to 1e-5
/// relative (plus the same absolute term). Returns the number of rows violating it and the
/// worst `excess / tolerance` seen, printing the first few failures.
pub fn check(label: &str, lhs: &[Descriptor], rhs: &[Descriptor], got: &[Match]) -> (usize, f64) {
    use rayon::prelude::*;
    assert_eq!(got.len(), lhs.len(), "{label}: one match per left row");
    let rows: Vec<(usize, bool, f64)> = lhs
        .par_iter()
        .zip(got)
        .enumerate()
        .map(|(i, (a, m))| {
            let j = m.index as usize;
            if j >= rhs.len() {
                return (i, false, f64::INFINITY);
            }
            let dmin = rhs
                .iter()
                .map(|b| exact(a, b))
                .fold(f64::INFINITY, f64::min);
            let dj = exact(a, &rhs[j]);
            let norm: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum();
            let abs = 1e-12 * (1.0 + norm);
            let tol = 1e-5 * dmin + abs;
            let excess = (dj - dmin) / tol;
            let dist_ok = (f64::from(m.distance) - dj).abs() <= 1e-5 * dj + abs;
            (i, excess <= 1.0 && dist_ok, excess)
        })
        .collect();
    let bad: Vec<_> = rows.iter().filter(|r| !r.1).collect();
    for (i, _, e) in bad.iter().take(5) {
        let m = got[*i];
        let dj = if (m.index as usize) < rhs.len() {
            exact(&lhs[*i], &rhs[m.index as usize])
        } else {
            f64::NAN
        };
        let dmin = rhs
            .iter()
            .map(|b| exact(&lhs[*i], b))
            .fold(f64::INFINITY, f64::min);
        eprintln!(
            "{label}: row {i}: index {} distance {} (exact {dj:e}) vs exact minimum {dmin:e} (excess/tol {e:.3})",
            m.index, m.distance
        );
    }
    let worst = rows.iter().map(|r| r.2).fold(0.0f64, f64::max);
    (bad.len(), worst)
}

/// Panics with a summary when [`check`] finds violations.
pub fn assert_ok(label: &str, lhs: &[Descriptor], rhs: &[Descriptor], got: &[Match]) {
    let (bad, worst) = check(label, lhs, rhs, got);
    assert_eq!(
        bad,
        0,
        "{label}: {bad} of {} rows violate the criterion (worst excess/tol {worst:.3})",
        lhs.len()
    );
}

/// Descriptor dimension re-exported for the tests.
pub const D: usize = DIM;
