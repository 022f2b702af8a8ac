//! The matcher V4's screening bound: how far a TF32 tensor-core screen of a squared distance
//! can be from the exact value, and which right rows it therefore cannot rule out.
//!
//! Shared by the GPU fold kernel (`cluda_match_v4_fold`) and the host's tests, so that the
//! CPU proptest of the bound checks the very formulas the kernel evaluates. The derivation,
//! with every constant, is in `docs/matcher.md` ("v4: the bound"); in short, for a left row
//! `a` and a right row `b`:
//!
//! * the screen `s = fl(fl_tc(-2 a.b) + nb)` (`fl_tc`: cuBLAS's TF32 GEMM, `nb`: `||b||^2` in
//!   f32) differs from the exact `r = ||b||^2 - 2 a.b` by at most
//!   `e(b) = C_DOT |a| |b| + C_NORM |b|^2 + C_FLUSH (|a| + |b|) + ETA`, with the norms replaced
//!   by the radii of [`radius`] (upper bounds of the exact norms);
//! * V2's f32 distance `d2` of a pair is within `THETA d + ETA` of its exact distance `d`.
//!
//! With `tau = min_j (s_j + e_j)` over all right rows, V2's winner `j*` has
//! `s_j* - e_j* <= threshold(tau, |a|)`, so the candidate list `{ j : s_j - e_j <= threshold }`
//! always holds it.
//!
//! All arithmetic here is `f32` and the constants carry margins that absorb its own roundings.

use crate::real::Real;

/// Bound on `|fl_tc(-2 a.b) - (-2 a.b)| / (|a| |b|)` plus the screen's own roundings:
/// `2 * (2 u_t + u_t^2) + 2 * acc` with `u_t = 2^-10` (TF32 input conversion, truncation or
/// rounding: 10 stored mantissa bits) and `acc = 2^-14` (FP32 accumulation of 128 products in
/// any order, with truncated alignment; see the docs), rounded up: `2^-8 + 2^-12`.
pub const C_DOT: f32 = 1.0 / 256.0 + 1.0 / 4096.0;

/// Bound on the error of `nb = ||b||^2` in f32 (`gamma_130` of `2^-24`, about `7.8e-6`) plus the
/// fold's addition, relative to `||b||^2`.
pub const C_NORM: f32 = 1.0e-5;

/// Absolute error per unit norm of tensor-core inputs flushed to zero (subnormal inputs below
/// `2^-126`: `2 * 2 * sqrt(128) * 2^-126 < 2^-120`).
pub const C_FLUSH: f32 = 1.0 / (1u128 << 120) as f32;

/// Absolute slack for underflowed products, squares and sums: 128 products flushed below
/// `2^-126`, doubled, are at most `2^-118`; the sums' and squares' subnormal roundings add far
/// less. Rows whose distances are all below this (descriptors of magnitude ~1e-19) cannot be
/// screened and go to the exact fallback.
pub const ETA: f32 = 1.0 / (1u128 << 112) as f32;

/// Twice V2's relative rounding error bound `gamma_131` of `2^-24` (about `7.8e-6`), divided
/// by `1 - gamma_131`, rounded up: how much more than the screen's best candidate V2's winner
/// can be in exact terms.
pub const THETA: f32 = 2.0e-5;

/// Relative slack on the running minimum for the roundings of `s - e`, `s + e` and the
/// threshold itself (`4 * 2^-24`, doubled).
pub const ROUNDING: f32 = 1.0 / (1u32 << 21) as f32;

/// Smallest radius: the exact norm of a vector whose squares all underflow in f32 is below
/// `sqrt(128 * 2^-149) < 2^-70`.
pub const RADIUS_FLOOR: f32 = 1.0 / (1u128 << 70) as f32;

/// Scale on `sqrt(nb)` covering the f32 norm's own rounding error (`(1 + 8e-6)^(1/2)`, rounded
/// up to `1 + 2^-16`).
pub const RADIUS_SCALE: f32 = 1.0 + 1.0 / 65536.0;

/// An upper bound of the exact Euclidean norm from the f32 squared norm `norm2` (as computed by
/// `cluda_match_sqnorms`).
#[inline(always)]
pub fn radius(norm2: f32) -> f32 {
    <f32 as Real>::fma(<f32 as Real>::sqrt(norm2), RADIUS_SCALE, RADIUS_FLOOR)
}

/// The per-left-row constants `(p, q)` of [`error`] for a left row of radius `ra`.
#[inline(always)]
pub fn row_terms(ra: f32) -> (f32, f32) {
    (
        <f32 as Real>::fma(C_DOT, ra, C_FLUSH),
        <f32 as Real>::fma(C_FLUSH, ra, ETA),
    )
}

/// The screen's error bound `e(b)` for a right row of radius `rb` (with [`row_terms`] of the
/// left row): `rb (C_DOT ra + C_FLUSH + C_NORM rb) + C_FLUSH ra + ETA`.
#[inline(always)]
pub fn error(rb: f32, p: f32, q: f32) -> f32 {
    <f32 as Real>::fma(rb, <f32 as Real>::fma(C_NORM, rb, p), q)
}

/// The candidate threshold for a row whose smallest upper bound `min_j (s_j + e_j)` is `tau`,
/// for a left row of radius `ra`: every right row with `s_j - e_j <= threshold` is rescored.
///
/// `tau + ra^2` bounds the exact distance of the row holding `tau` from above; V2's winner is at
/// most `THETA` times that (plus `ETA`) beyond it.
#[inline(always)]
pub fn threshold(tau: f32, ra: f32) -> f32 {
    let upper = <f32 as Real>::fma(ra, ra, tau);
    let upper = if upper > 0.0 { upper } else { 0.0 };
    let slack = <f32 as Real>::fma(THETA, upper, ETA);
    let abs = if tau < 0.0 { -tau } else { tau };
    tau + <f32 as Real>::fma(ROUNDING, abs, slack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_cover_the_derivation() {
        let u_t = (2.0f64).powi(-10);
        let acc = (2.0f64).powi(-14);
        let needed = 2.0 * (2.0 * u_t + u_t * u_t) + 2.0 * acc;
        assert!(f64::from(C_DOT) > needed, "{C_DOT} vs {needed}");
        let u = (2.0f64).powi(-24);
        let gamma = |k: f64| k * u / (1.0 - k * u);
        assert!(f64::from(C_NORM) > gamma(130.0) + 2.0 * u);
        let g = gamma(131.0);
        assert!(f64::from(THETA) > 2.0 * g / (1.0 - g));
        assert!(f64::from(RADIUS_FLOOR).powi(2) > 128.0 * (2.0f64).powi(-149));
        assert!(f64::from(C_FLUSH) > 4.0 * 128f64.sqrt() * (2.0f64).powi(-126));
        assert!(f64::from(ETA) > 2.0 * 128.0 * (2.0f64).powi(-126) + 300.0 * (2.0f64).powi(-149));
    }

    #[test]
    fn radius_bounds_the_norm() {
        for x in [0.0f32, 1e-30, 1.0, 2.0, 1e16, 3.4e34] {
            let r = radius(x);
            assert!(f64::from(r) >= f64::from(x).sqrt(), "{x}");
        }
    }

    #[test]
    fn threshold_is_above_tau() {
        for tau in [-1e30f32, -5.0, -1e-30, 0.0, 1e-30, 7.0, 1e30] {
            assert!(threshold(tau, 3.0) > tau);
        }
    }
}
