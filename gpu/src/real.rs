//! The floating-point types the finder computes in, behind one trait.
//!
//! Each method is one IEEE operation (or an exactly specified composite, such as
//! [`Real::round_half_away`]), so a function generic over [`Real`] performs the same roundings
//! on the CPU and on the GPU. Multiply-add is never contracted implicitly: [`Real::fma`] is the
//! only fused operation, and the PTX is emitted with contraction switched off.
//!
//! `sqrt` and `fma` go through `core`'s float math on nvptx (a nightly feature, the kernels
//! are built with the pinned nightly anyway) and through `std` on the host (stable). Both
//! lower to the same LLVM intrinsics (`llvm.sqrt`, `llvm.fma`), which are correctly rounded
//! IEEE operations, so the results are identical on either side.

use core::ops::{Add, Mul, Neg, Sub};

/// A precision the pedestal and the finder can compute in: `f64` or `f32`.
pub trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// Additive identity.
    const ZERO: Self;
    /// Exact conversion of a detector sample (every `u16` is exact in `f32` and `f64`).
    fn from_u16(x: u16) -> Self;
    /// Conversion of an exact integer (a baseline or a count); rounds if it is not exact.
    fn from_i64(x: i64) -> Self;
    /// Conversion of an `f64` parameter (n_sigma, 1/N), rounded to nearest.
    fn from_f64(x: f64) -> Self;
    /// Widening (or identity) conversion to `f64`.
    fn to_f64(self) -> f64;
    /// `a * b + c` with a single rounding.
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// Correctly rounded square root.
    fn sqrt(self) -> Self;
    /// The larger of `self` and `other`; `self` when they compare equal.
    #[inline(always)]
    fn max_of(self, other: Self) -> Self {
        if other > self { other } else { self }
    }
    /// Rounds half away from zero to `i32` (saturating), the rounding of cluster values.
    fn round_half_away(self) -> i32;
    /// The larger of `self` and `other` for window maxima, which are only compared
    /// (`max > t`, `c == max`) and never stored: equal to [`Real::max_of`] for values that
    /// are not NaN, except that it may return either zero of `+0` and `-0`, which compare
    /// equal. In f32 it is one `max.f32` on the GPU; in f64 it stays [`Real::max_of`],
    /// because `max.f64` made ptxas spill the register-bound run kernels.
    // Measured (one ladder run): 9x9 f32 8.79 -> 7.79 us/frame with max.f32, 9x9 f64
    // 9.80 -> 13.78 us/frame with max.f64.
    fn max_cmp(self, other: Self) -> Self;
}

macro_rules! impl_real {
    ($t:ident, $max_cmp:expr) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn from_u16(x: u16) -> Self {
                x as $t
            }
            #[inline(always)]
            fn from_i64(x: i64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn fma(a: Self, b: Self, c: Self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                let r = core::$t::math::mul_add(a, b, c);
                #[cfg(not(target_arch = "nvptx64"))]
                let r = $t::mul_add(a, b, c);
                r
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                #[cfg(target_arch = "nvptx64")]
                let r = core::$t::math::sqrt(self);
                #[cfg(not(target_arch = "nvptx64"))]
                let r = $t::sqrt(self);
                r
            }
            #[inline(always)]
            fn max_cmp(self, other: Self) -> Self {
                $max_cmp(self, other)
            }
            #[inline(always)]
            fn round_half_away(self) -> i32 {
                // Truncate, then look at the exact remainder: a - trunc(a) is exact for
                // every finite a, so no double rounding (unlike floor(a + 0.5)).
                let a = if self < 0.0 { -self } else { self };
                let t = a as i64; // saturating truncation toward zero
                let frac = a - t as $t;
                let r = if frac >= 0.5 { t + 1 } else { t };
                let r = if r > i32::MAX as i64 {
                    i32::MAX as i64
                } else {
                    r
                };
                if self < 0.0 { -(r as i32) } else { r as i32 }
            }
        }
    };
}
impl_real!(f32, |a: f32, b: f32| a.max(b));
impl_real!(f64, |a: f64, b: f64| a.max_of(b));

#[cfg(test)]
mod tests {
    use super::Real;

    #[test]
    fn round_half_away_matches_std_round() {
        let cases = [
            0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999999999999994,
            -0.49999999999999994,
            1e9,
            -1e9,
            123.456,
            -123.456,
            4.5e10,
            -4.5e10,
        ];
        for &c in &cases {
            let want = f64::round(c).clamp(-(i32::MAX as f64), i32::MAX as f64) as i32;
            assert_eq!(c.round_half_away(), want, "f64 {c}");
            let c32 = c as f32;
            let want32 = (c32 as f64)
                .round()
                .clamp(-(i32::MAX as f64), i32::MAX as f64) as i32;
            assert_eq!(c32.round_half_away(), want32, "f32 {c32}");
        }
    }

    #[test]
    fn fma_rounds_once() {
        // (1 + 2^-30)^2 - 1 needs the unrounded product to be exact.
        let a = 1.0 + 2f64.powi(-30);
        assert_eq!(f64::fma(a, a, -1.0), 2f64.powi(-29) + 2f64.powi(-60));
        assert_ne!(a * a - 1.0, f64::fma(a, a, -1.0));
    }
}
