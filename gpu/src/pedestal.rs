//! Per-pixel pedestal arithmetic (`docs/semantics.md`).
//!
//! All three precisions share one representation once the pedestal is ready: a per-pixel
//! baseline `base`, a window sum `a` of `y = x - base` and a window sum of squares `b` of `y`.
//! - `F64`: `base = 0`, so `y = x` exactly and `a`, `b` are aare's `sum`, `sum2` operation for
//!   operation (`x - 0.0 == x`, `0.0 + m == m`).
//! - `F32` (the centred rewrite "B1"): `base = X0 = round(mean)` frozen when the pedestal becomes
//!   ready; `a`, `b` are the centred sums, formed exactly and rounded once to `f32`.
//! - `F32Naive`: `base = 0` in `f32`, raw sums: shows the catastrophic cancellation.
//!
//! Before the pedestal is ready (the first N samples) the sums are accumulated exactly as
//! integers by the host; [`freeze_b1`] and [`freeze_raw`] turn them into the ready state.

use crate::real::Real;

/// The window update of one ready pixel with sample `x`:
/// `a += y - a*inv; b += y*y - b*inv` with `y = x - base`, each operation rounded.
#[inline(always)]
pub fn push_ready<R: Real>(a: &mut R, b: &mut R, base: R, x: u16, inv: R) {
    let y = R::from_u16(x) - base;
    *a = *a + (y - *a * inv);
    *b = *b + (y * y - *b * inv);
}

/// The mean of the samples relative to `base`: `m = a * inv` (the mean itself is `base + m`).
#[inline(always)]
pub fn mean_offset<R: Real>(a: R, inv: R) -> R {
    a * inv
}

/// The variance `max(fma(-m, m, b*inv), 0)`, the one deliberate fused multiply-add.
#[inline(always)]
pub fn variance<R: Real>(a: R, b: R, inv: R) -> R {
    let m = mean_offset(a, inv);
    let v = R::fma(-m, m, b * inv);
    if v > R::ZERO { v } else { R::ZERO }
}

/// The standard deviation `sqrt(variance)`.
#[inline(always)]
pub fn std_dev<R: Real>(a: R, b: R, inv: R) -> R {
    variance(a, b, inv).sqrt()
}

/// The pedestal-corrected value `c = (x - base) - m` of one sample.
///
/// With `base = 0` this is exactly `x - mean`.
#[inline(always)]
pub fn corrected<R: Real>(x: u16, base: R, m: R) -> R {
    (R::from_u16(x) - base) - m
}

/// A pixel's ready state: baseline and the two window sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ready<R> {
    /// Baseline the sums are centred on (0 except for the B1 rewrite).
    pub base: R,
    /// Window sum of `x - base`.
    pub a: R,
    /// Window sum of `(x - base)^2`.
    pub b: R,
}

/// Ready state from exact sums, without centring (`F64`, and `F32Naive` from its `f32` sums).
#[inline]
pub fn freeze_raw<R: Real>(sum: R, sum2: R) -> Ready<R> {
    Ready {
        base: R::ZERO,
        a: sum,
        b: sum2,
    }
}

/// The B1 ready state from the exact integer sums of the first `n` samples:
/// `X0 = round(sum * inv)` (half away from zero), `a = sum(x - X0)`, `b = sum((x - X0)^2)`,
/// both formed exactly in integers and rounded once to `f32`.
#[inline]
pub fn freeze_b1(sum: u64, sum2: u64, n: u32, inv: f64) -> Ready<f32> {
    let x0 = (sum as f64 * inv).round_half_away() as i128;
    let (s, s2, n) = (sum as i128, sum2 as i128, n as i128);
    let sy = s - n * x0;
    let sy2 = s2 - 2 * x0 * s + n * x0 * x0;
    Ready {
        base: x0 as f32,
        a: sy as f32,
        b: sy2 as f32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b1_sums_are_exact_for_integers() {
        let xs: [u16; 5] = [4600, 4601, 4590, 4650, 4612];
        let sum: u64 = xs.iter().map(|&x| x as u64).sum();
        let sum2: u64 = xs.iter().map(|&x| (x as u64).pow(2)).sum();
        let r = freeze_b1(sum, sum2, 5, 1.0 / 5.0);
        let x0 = (sum as f64 / 5.0).round();
        assert_eq!(r.base as f64, x0);
        let sy: f64 = xs.iter().map(|&x| x as f64 - x0).sum();
        let sy2: f64 = xs.iter().map(|&x| (x as f64 - x0).powi(2)).sum();
        assert_eq!(r.a as f64, sy);
        assert_eq!(r.b as f64, sy2);
    }

    #[test]
    fn window_update_matches_written_formula() {
        let (mut a, mut b) = (4600.0f64 * 10.0, 4600.0f64 * 4600.0 * 10.0);
        let inv = 1.0 / 10.0;
        push_ready(&mut a, &mut b, 0.0, 4700, inv);
        let (a0, b0) = (46000.0f64, 211_600_000.0f64);
        assert_eq!(a, a0 + (4700.0 - a0 * inv));
        assert_eq!(b, b0 + (4700.0 * 4700.0 - b0 * inv));
    }

    #[test]
    fn variance_is_clamped_at_zero() {
        // sum2*inv slightly below mean^2 from rounding: the clamp gives exactly +0.
        let v = variance(3.0f64, 0.8999999999, 1.0 / 10.0);
        assert_eq!(v.to_bits(), 0.0f64.to_bits());
    }
}
