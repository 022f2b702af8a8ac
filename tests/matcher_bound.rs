//! CPU tests of V4's screening bound (`cluda::matcher::match_bound`, the functions its fold
//! kernel evaluates): a TF32 GEMM is emulated on the CPU (inputs rounded to nearest or
//! truncated to TF32's 10 mantissa bits, subnormals flushed or kept, products exact, FP32
//! accumulation sequential, pairwise or truncating in blocks of four), with the GPU's f32 norms,
//! and every screened value must lie within the bound of the exact `||b||^2 - 2 a.b`; V2's f32
//! distance must lie within `THETA / 2` of the exact one; and the candidate set the bound
//! selects must contain V2's winner on random and adversarial data.

use cluda::matcher::match_bound::{ETA, THETA, error, radius, row_terms, threshold};
use cluda::matcher::{DIM, Descriptor};
use proptest::prelude::*;
use support::matcher::*;

/// How the emulated tensor core reduces an f32 input to TF32.
#[derive(Clone, Copy, Debug)]
enum Convert {
    /// Round to nearest, ties to even.
    Nearest,
    /// Drop the low 13 mantissa bits.
    Truncate,
}

/// How the emulated GEMM accumulates the 128 products.
#[derive(Clone, Copy, Debug)]
enum Accumulate {
    /// In order, f32 round to nearest.
    Sequential,
    /// A pairwise tree, f32 round to nearest.
    Pairwise,
    /// Blocks of four products summed exactly, added to the accumulator and truncated
    /// towards zero (the behaviour measured on tensor cores).
    TruncatedBlocks,
}

fn tf32(x: f32, c: Convert, flush: bool) -> f32 {
    if flush && x.abs() < f32::MIN_POSITIVE {
        return 0.0;
    }
    let b = x.to_bits();
    let low = b & 0x1fff;
    let kept = b & !0x1fff;
    match c {
        Convert::Truncate => f32::from_bits(kept),
        Convert::Nearest => {
            let half = 0x1000;
            let up = low > half || (low == half && (kept >> 13) & 1 == 1);
            if up {
                // Carries into the exponent correctly (to infinity only beyond f32's range,
                // which the accepted inputs never reach).
                f32::from_bits(kept + 0x2000)
            } else {
                f32::from_bits(kept)
            }
        }
    }
}

/// f64 to f32 rounded towards zero.
fn to_f32_trunc(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// The emulated `fl_tc(-2 a.b)`.
fn screen_dot(a: &Descriptor, b: &Descriptor, c: Convert, flush: bool, acc: Accumulate) -> f32 {
    // Products of two TF32 values (11 significant bits each) are exact in f64 and in f32.
    let p: Vec<f64> = (0..DIM)
        .map(|k| f64::from(tf32(a[k], c, flush)) * f64::from(tf32(b[k], c, flush)))
        .collect();
    let dot = match acc {
        Accumulate::Sequential => p.iter().fold(0.0f32, |s, &x| (f64::from(s) + x) as f32),
        Accumulate::Pairwise => {
            let mut v: Vec<f32> = p.iter().map(|&x| x as f32).collect();
            while v.len() > 1 {
                v = v.chunks(2).map(|c| c.iter().sum::<f32>()).collect();
            }
            v[0]
        }
        Accumulate::TruncatedBlocks => p.chunks(4).fold(0.0f32, |s, c| {
            to_f32_trunc(f64::from(s) + c.iter().sum::<f64>())
        }),
    };
    -2.0 * dot
}

/// `cluda_match_sqnorms` on the CPU: per lane four squares (`fma`), then a butterfly sum over
/// the 32 lanes; lane 0's value.
fn gpu_norm(x: &Descriptor) -> f32 {
    let mut lanes: Vec<f32> = (0..32)
        .map(|l| {
            let v = &x[l * 4..l * 4 + 4];
            let mut s = v[0] * v[0];
            for &y in &v[1..] {
                s = y.mul_add(y, s);
            }
            s
        })
        .collect();
    for o in [16, 8, 4, 2, 1] {
        lanes = (0..32).map(|l| lanes[l] + lanes[l ^ o]).collect();
    }
    lanes[0]
}

fn exact_r(a: &Descriptor, b: &Descriptor) -> f64 {
    let mut nb = 0.0f64;
    let mut dot = 0.0f64;
    for k in 0..DIM {
        nb += f64::from(b[k]) * f64::from(b[k]);
        dot += f64::from(a[k]) * f64::from(b[k]);
    }
    nb - 2.0 * dot
}

const MODES: [(Convert, bool, Accumulate); 6] = [
    (Convert::Nearest, false, Accumulate::Sequential),
    (Convert::Nearest, true, Accumulate::Pairwise),
    (Convert::Truncate, false, Accumulate::Sequential),
    (Convert::Truncate, true, Accumulate::TruncatedBlocks),
    (Convert::Nearest, true, Accumulate::TruncatedBlocks),
    (Convert::Truncate, false, Accumulate::Pairwise),
];

/// Checks the screen bound for one pair in every emulated mode; returns the largest
/// `|s - r| / e` seen.
fn check_pair(a: &Descriptor, b: &Descriptor) -> f64 {
    let (na, nb) = (gpu_norm(a), gpu_norm(b));
    let (p, q) = row_terms(radius(na));
    let e = error(radius(nb), p, q);
    let r = exact_r(a, b);
    let mut worst = 0.0f64;
    for (c, flush, acc) in MODES {
        let s = screen_dot(a, b, c, flush, acc) + nb;
        let dev = (f64::from(s) - r).abs();
        assert!(
            dev <= f64::from(e),
            "screen {s:e} vs exact {r:e}: deviation {dev:e} beyond the bound {e:e} ({c:?}, flush \
             {flush}, {acc:?})\na = {a:?}\nb = {b:?}"
        );
        worst = worst.max(dev / f64::from(e));
    }
    // V2's own rounding.
    let d2 = f64::from(v2_distance(a, b));
    let d = exact(a, b);
    assert!(
        (d2 - d).abs() <= f64::from(THETA) / 2.0 * d + f64::from(ETA),
        "v2 {d2:e} vs exact {d:e}"
    );
    worst
}

/// The candidate set the bound selects for each left row (with the final threshold, which the
/// GPU's running threshold is never below) must hold V2's winner; returns the mean and largest
/// candidate count.
fn check_selection(label: &str, lhs: &[Descriptor], rhs: &[Descriptor]) -> (f64, usize) {
    let want = v2_reference(lhs, rhs);
    let nb: Vec<f32> = rhs.iter().map(gpu_norm).collect();
    let rb: Vec<f32> = nb.iter().map(|&x| radius(x)).collect();
    let mut total = 0usize;
    let mut most = 0usize;
    for (i, a) in lhs.iter().enumerate() {
        let ra = radius(gpu_norm(a));
        let (p, q) = row_terms(ra);
        for (c, flush, acc) in [MODES[0], MODES[3]] {
            let se: Vec<(f32, f32)> = rhs
                .iter()
                .enumerate()
                .map(|(j, b)| (screen_dot(a, b, c, flush, acc) + nb[j], error(rb[j], p, q)))
                .collect();
            let tau = se.iter().map(|&(s, e)| s + e).fold(f32::INFINITY, f32::min);
            let thr = threshold(tau, ra);
            let cands: Vec<usize> = (0..rhs.len())
                .filter(|&j| se[j].0 - se[j].1 <= thr)
                .collect();
            let w = want[i].index as usize;
            assert!(
                cands.contains(&w),
                "{label}: row {i}: v2's winner {w} (screen {:e} +- {:e}) is not a candidate \
                 (tau {tau:e}, threshold {thr:e}; {c:?} {flush} {acc:?})",
                se[w].0,
                se[w].1
            );
            total += cands.len();
            most = most.max(cands.len());
        }
    }
    (total as f64 / (2 * lhs.len()) as f64, most)
}

#[test]
fn screen_bound_holds_on_adversarial_pairs() {
    let mut worst = 0.0f64;
    for (name, lhs, rhs) in adversarial(7) {
        for a in lhs.iter().take(20) {
            for b in rhs.iter().step_by(7).take(60) {
                worst = worst.max(check_pair(a, b));
            }
        }
        eprintln!("{name}: worst |s - r| / bound so far {worst:.3}");
    }
    // The bound must be useful, not only safe: well above the deviations seen, but the same
    // order (a bound 1000x too loose would still pass the line above).
    assert!(
        worst > 0.01,
        "bound far looser than needed: worst ratio {worst}"
    );
}

#[test]
fn selection_keeps_v2s_winner_on_adversarial_sets() {
    for (name, lhs, rhs) in adversarial(11) {
        let lhs = &lhs[..lhs.len().min(64)];
        let (mean, most) = check_selection(name, lhs, &rhs);
        eprintln!(
            "{name}: {} x {}: candidates per row mean {mean:.2}, max {most}",
            lhs.len(),
            rhs.len()
        );
    }
}

#[test]
fn selection_is_small_on_uniform_data() {
    let (lhs, rhs) = (uniform(64, 21), uniform(3000, 22));
    let (mean, most) = check_selection("uniform", &lhs, &rhs);
    eprintln!("uniform: candidates per row mean {mean:.2}, max {most}");
    // Uniform 128-d data: nearest and second nearest are far apart compared with the bound.
    assert!(mean < 8.0, "mean {mean}");
}

/// One value of a descriptor: small integers (ties), uniform, wide-range magnitudes
/// (1e-30..1e15) and subnormals.
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        (-3i32..4).prop_map(|v| v as f32),
        -10.0f32..10.0,
        (-30i32..16, -1.0f32..1.0).prop_map(|(e, m)| m * 10f32.powi(e)),
        (1u32..0x7f_ffff).prop_map(f32::from_bits),
    ]
}

fn descriptor() -> impl Strategy<Value = Descriptor> {
    prop::collection::vec(value(), DIM).prop_map(|v| std::array::from_fn(|k| v[k]))
}

/// A pair `(a, b)` where `b` is `a` changed in a few components by a relative `eps`.
fn close_pair() -> impl Strategy<Value = (Descriptor, Descriptor)> {
    (
        descriptor(),
        prop::collection::vec((0usize..DIM, -1e-3f32..1e-3), 1..4),
    )
        .prop_map(|(a, changes)| {
            let mut b = a;
            for (k, eps) in changes {
                b[k] += eps * b[k].abs().max(1e-30);
            }
            (a, b)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn screen_bound_holds_on_random_pairs(a in descriptor(), b in descriptor()) {
        check_pair(&a, &b);
    }

    #[test]
    fn screen_bound_holds_on_close_pairs((a, b) in close_pair()) {
        check_pair(&a, &b);
    }

    #[test]
    fn selection_keeps_v2s_winner_on_random_sets(
        lhs in prop::collection::vec(descriptor(), 1..6),
        rhs in prop::collection::vec(descriptor(), 1..40),
    ) {
        check_selection("proptest", &lhs, &rhs);
    }
}
