//! Operations on [`LANES`] neighbouring pixels at once, per precision and instruction set.
//!
//! Stable Rust has no portable vector type, so each operation has one implementation per
//! build of the band kernel (see `dispatch`): AVX-512 and AVX2 intrinsics (module `x86`) where
//! plain code does not compile to the instructions we want, and plain loops elsewhere.
//! - The comparisons return bit masks. Written as a loop of `((a < b) as u32) << l`, LLVM
//!   reduces them through shuffles and ORs; the intrinsics give one compare and a mask move
//!   per register (AVX-512: the compare writes a mask register; AVX2: `vmovmskps`/`pd`).
//! - [`Unit::store_lanes`] and [`Unit::along_row_lanes`] are explicit vector loads and stores:
//!   written lane by lane, a copy became a `memcpy` call and the overlapping loads at every
//!   offset were merged into long shuffle chains.
//! - [`Unit::select_bits`] is a mask blend: as a plain loop it vectorised on its own, but in
//!   the kernel its per-lane branches kept the pedestal update feeding it scalar (f32 about
//!   2.5 times slower).
//! - [`Unit::round_lanes`] is a plain loop over fixed-size arrays, which LLVM vectorises
//!   (`vcvttps2qq`, ...).
//!
//! Intrinsics rather than a SIMD crate: `wide` picks its instructions when the crate is compiled
//! (baseline SSE2 here), not in the AVX2 and AVX-512 builds chosen at run time, and `pulp` would
//! replace the crate's own dispatch; the few intrinsics needed are simpler.
//!
//! Every implementation performs the same IEEE operations in the same order as the scalar
//! definition, so all builds give bit-identical results (tests here and in `dispatch`).

use cluda_gpu::real::Real;

use super::isa::Build;
pub use super::isa::LANES;

/// What the finder needs of a precision beyond [`Real`]: its unit roundoff, and lane-wise
/// operations on [`LANES`] values (comparisons as bit masks: bit `l` = lane `l`).
///
/// The operations taking a build token `B` use that build's instructions: holding a `B` proves
/// the CPU has them (see `dispatch`).
pub(crate) trait Unit: Real + Default + Send + Sync {
    /// `u = 2^-p` for a `p`-bit significand (half the distance from 1 to the next number).
    const U: f64;
    /// Bits of `a[l] < b[l]`.
    fn lt_bits<B: Build>(isa: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// Bits of `a[l] > b[l]`.
    fn gt_bits<B: Build>(isa: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// Bits of `a[l] == b[l]`.
    fn eq_bits<B: Build>(isa: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// `dst[..LANES] = v` as vector stores.
    fn store_lanes<B: Build>(isa: B, dst: &mut [Self], v: &[Self; LANES]);
    /// Along one padded row `c` of `hmax.len() + S - 1` values (`hmax.len()` a multiple of
    /// [`LANES`]): `hmax[x]` = maximum and, if `sums`, `hsum[x]` = sum (left to right) of
    /// `c[x .. x + S]`. Returns the largest `|c|` of the row (at least `+0`).
    fn along_row_lanes<B: Build, const S: usize>(
        isa: B,
        c: &[Self],
        hmax: &mut [Self],
        hsum: &mut [Self],
        sums: bool,
    ) -> Self;

    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    fn select_bits<B: Build>(
        isa: B,
        bits: u32,
        yes: &[Self; LANES],
        no: &[Self; LANES],
    ) -> [Self; LANES];

    /// [`Real::round_half_away`] of every lane, in a form that vectorises (the same operations
    /// lane by lane: truncate, exact remainder, round up at `>= 0.5`, saturate, sign).
    fn round_lanes(v: &[Self; LANES]) -> [i32; LANES];
}

/// Calls `$f` of the build's intrinsics module for `$b` (`$avx512`, `$avx2`), or evaluates
/// `$portable` in the portable build.
macro_rules! by_isa {
    ($b:ty, $avx512:ident, $avx2:ident, $f:ident $(::<$s:ident>)? ($($arg:expr),*), $portable:expr) => {{
        #[cfg(target_arch = "x86_64")]
        match <$b as Build>::ISA {
            // SAFETY: a value of `$b` exists only where the CPU has the build's features.
            super::isa::Isa::Avx512 => return unsafe { super::x86::$avx512::$f$(::<$s>)?($($arg),*) },
            // SAFETY: as above.
            super::isa::Isa::Avx2 => return unsafe { super::x86::$avx2::$f$(::<$s>)?($($arg),*) },
            super::isa::Isa::Portable => {}
        }
        // (Elsewhere every build is portable.)
        #[cfg(not(target_arch = "x86_64"))]
        let _: super::isa::Isa = <$b as Build>::ISA;
        $portable
    }};
}

macro_rules! impl_unit {
    ($t:ty, $bits:expr, $avx512:ident, $avx2:ident) => {
        impl Unit for $t {
            const U: f64 = 1.0 / (1u64 << $bits) as f64;
            #[inline(always)]
            fn lt_bits<B: Build>(_: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                by_isa!(B, $avx512, $avx2, lt_bits(a, b), bits(a, b, |x, y| x < y))
            }
            #[inline(always)]
            fn gt_bits<B: Build>(_: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                by_isa!(B, $avx512, $avx2, gt_bits(a, b), bits(a, b, |x, y| x > y))
            }
            #[inline(always)]
            fn eq_bits<B: Build>(_: B, a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                by_isa!(B, $avx512, $avx2, eq_bits(a, b), bits(a, b, |x, y| x == y))
            }
            #[inline(always)]
            fn select_bits<B: Build>(
                _: B,
                bits: u32,
                yes: &[Self; LANES],
                no: &[Self; LANES],
            ) -> [Self; LANES] {
                by_isa!(
                    B,
                    $avx512,
                    $avx2,
                    select_bits(bits, yes, no),
                    std::array::from_fn(|l| if bits >> l & 1 != 0 { yes[l] } else { no[l] })
                )
            }
            #[inline(always)]
            fn store_lanes<B: Build>(_: B, dst: &mut [Self], v: &[Self; LANES]) {
                by_isa!(
                    B,
                    $avx512,
                    $avx2,
                    store_lanes(dst, v),
                    dst[..LANES].copy_from_slice(v)
                )
            }
            #[inline(always)]
            fn along_row_lanes<B: Build, const S: usize>(
                _: B,
                c: &[Self],
                hmax: &mut [Self],
                hsum: &mut [Self],
                sums: bool,
            ) -> Self {
                by_isa!(
                    B,
                    $avx512,
                    $avx2,
                    along_row::<S>(c, hmax, hsum, sums),
                    along_row::<$t, S>(c, hmax, hsum, sums)
                )
            }
            #[inline(always)]
            fn round_lanes(v: &[Self; LANES]) -> [i32; LANES] {
                // Beyond i32's range (or NaN) the truncation below is undefined: the scalar
                // definition, lane by lane (never for corrected values).
                let mut small = true;
                for &x in v {
                    small &= x.abs() < 2147483648.0;
                }
                if !small {
                    return v.map(|x| x.round_half_away());
                }
                let mut out = [0i32; LANES];
                for l in 0..LANES {
                    let a = v[l].abs();
                    // SAFETY: `a` is finite and below 2^31, so it truncates to an i64 exactly
                    // as the saturating cast would.
                    let t: i64 = unsafe { a.to_int_unchecked() };
                    let frac = a - t as $t;
                    let r = if frac >= 0.5 { t + 1 } else { t };
                    let r = r.min(i32::MAX as i64) as i32;
                    out[l] = if v[l] < 0.0 { r.wrapping_neg() } else { r };
                }
                out
            }
        }
    };
}
impl_unit!(f32, 24, avx512_f32, avx2_f32);
impl_unit!(f64, 53, avx512_f64, avx2_f64);

/// The portable comparison: bit `l` = `op(a[l], b[l])`.
#[inline(always)]
fn bits<R: Copy>(a: &[R; LANES], b: &[R; LANES], op: impl Fn(R, R) -> bool) -> u32 {
    let mut bits = 0;
    for l in 0..LANES {
        bits |= (op(a[l], b[l]) as u32) << l;
    }
    bits
}

/// The portable [`Unit::along_row_lanes`]: the same operations on lane arrays.
#[inline(always)]
fn along_row<R: Real, const S: usize>(c: &[R], hmax: &mut [R], hsum: &mut [R], sums: bool) -> R {
    let w = hmax.len();
    // Cut to the lengths the loop reads, so that its condition (`w` is a multiple of LANES)
    // proves every load and store in bounds.
    let c = &c[..w + S - 1];
    let hsum = if sums { &mut hsum[..w] } else { hsum };
    let mut big = [R::ZERO; LANES];
    let mut x0 = 0;
    while x0 + LANES <= w {
        let v = &c[x0..x0 + LANES];
        let (mut m, mut s) = ([R::ZERO; LANES], [R::ZERO; LANES]);
        for l in 0..LANES {
            big[l] = big[l].max_of(v[l]).max_of(-v[l]);
            (m[l], s[l]) = (v[l], v[l]);
        }
        for dx in 1..S {
            let u = &c[x0 + dx..x0 + dx + LANES];
            for l in 0..LANES {
                m[l] = m[l].max_of(u[l]);
                s[l] = s[l] + u[l];
            }
        }
        hmax[x0..x0 + LANES].copy_from_slice(&m);
        if sums {
            hsum[x0..x0 + LANES].copy_from_slice(&s);
        }
        x0 += LANES;
    }
    // The chunks started at indices 0 .. w; the last S - 1 values of the padded row follow.
    let tail = c[w..]
        .iter()
        .fold(R::ZERO, |acc, &v| acc.max_of(v).max_of(-v));
    big.iter().fold(tail, |acc, &v| acc.max_of(v))
}

#[cfg(test)]
mod tests {
    use super::super::isa::Portable;
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    /// The vector rounding equals the scalar definition, on ties, near-ties, huge, tiny and
    /// NaN values of both signs.
    fn round_lanes_matches<R: Unit>(values: &[f64]) {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut all: Vec<R> = values.iter().map(|&v| R::from_f64(v)).collect();
        all.extend(values.iter().map(|&v| R::from_f64(-v)));
        for _ in 0..20000 {
            let k: i32 = rng.random_range(-70000..70000);
            let f = [0.0, 0.5, 0.25, 0.75, 0.4999999, 0.5000001][rng.random_range(0..6)];
            all.push(R::from_f64(k as f64 + f));
            all.push(R::from_f64(rng.random_range(-1e5..1e5)));
        }
        for chunk in all.chunks(LANES) {
            let mut v = [R::ZERO; LANES];
            v[..chunk.len()].copy_from_slice(chunk);
            let got = R::round_lanes(&v);
            for l in 0..LANES {
                assert_eq!(got[l], v[l].round_half_away(), "value {}", v[l].to_f64());
            }
        }
    }

    #[test]
    fn round_lanes_matches_round_half_away() {
        let values = [
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            4503599627370495.5,
            8388607.5,
            2147483647.0,
            2147483647.5,
            2147483648.0,
            3e9,
            9.2e18,
            f64::MIN_POSITIVE,
            5e-324,
            f64::NAN,
        ];
        // (Values at or beyond 2^63 are left out: the scalar `+ 1` overflows there, which
        // panics in a debug build; corrected values are far below.)
        round_lanes_matches::<f64>(&values);
        round_lanes_matches::<f32>(&values);
    }

    /// A value for the lane tests: ties, both zeros, and (`nan`) NaN are frequent.
    fn pick<R: Unit>(rng: &mut SmallRng, nan: bool) -> R {
        match rng.random_range(0..8) {
            0 => R::ZERO,
            1 => -R::ZERO,
            2 => R::from_f64(1.5),
            3 if nan => R::from_f64(f64::NAN),
            _ => R::from_f64(rng.random_range(-3.0..3.0)),
        }
    }

    /// The bits of a slice, for exact comparison (signed zeros included).
    fn to_bits<R: Unit>(v: &[R]) -> Vec<u64> {
        v.iter().map(|x| x.to_f64().to_bits()).collect()
    }

    /// One build of `along_row_lanes` over a row: `(c, hmax, hsum) -> largest |c|`.
    type AlongRow<'a, R> = &'a dyn Fn(&[R], &mut [R], &mut [R]) -> R;

    /// `along_row_lanes` of window side `S`, for build `isa` and for the portable build.
    fn along_row_agrees<R: Unit, B: Build, const S: usize>(isa: B, rng: &mut SmallRng) {
        let w = 3 * LANES;
        let c: Vec<R> = (0..w + S - 1).map(|_| pick(rng, false)).collect();
        let run = |build: AlongRow<'_, R>| {
            let (mut hmax, mut hsum) = (vec![R::ZERO; w], vec![R::ZERO; w]);
            let big = build(&c, &mut hmax, &mut hsum);
            (to_bits(&[big]), to_bits(&hmax), to_bits(&hsum))
        };
        let got = run(&|c, m, s| R::along_row_lanes::<B, S>(isa, c, m, s, true));
        let want = run(&|c, m, s| R::along_row_lanes::<Portable, S>(Portable, c, m, s, true));
        assert_eq!(got, want, "along_row, side {S}");
    }

    /// Build `isa`'s lane operations give the portable results, bit for bit.
    fn build_agrees<R: Unit, B: Build>(isa: B, seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..5000 {
            let a: [R; LANES] = std::array::from_fn(|_| pick(&mut rng, true));
            let b: [R; LANES] = std::array::from_fn(|_| pick(&mut rng, true));
            assert_eq!(R::lt_bits(isa, &a, &b), R::lt_bits(Portable, &a, &b));
            assert_eq!(R::gt_bits(isa, &a, &b), R::gt_bits(Portable, &a, &b));
            assert_eq!(R::eq_bits(isa, &a, &b), R::eq_bits(Portable, &a, &b));
            let bits = rng.random::<u32>() & 0xffff;
            assert_eq!(
                to_bits(&R::select_bits(isa, bits, &a, &b)),
                to_bits(&R::select_bits(Portable, bits, &a, &b))
            );
            let want: Vec<u64> = (0..LANES)
                .map(|l| if bits >> l & 1 != 0 { a[l] } else { b[l] })
                .map(|x| x.to_f64().to_bits())
                .collect();
            assert_eq!(to_bits(&R::select_bits(isa, bits, &a, &b)), want);
            let mut dst = [R::ZERO; LANES + 3];
            R::store_lanes(isa, &mut dst[1..], &a);
            assert_eq!(to_bits(&dst[1..=LANES]), to_bits(&a));
            assert_eq!(to_bits(&dst[LANES + 1..]), to_bits(&[R::ZERO; 2]));
        }
        for _ in 0..200 {
            along_row_agrees::<R, B, 3>(isa, &mut rng);
            along_row_agrees::<R, B, 5>(isa, &mut rng);
            along_row_agrees::<R, B, 9>(isa, &mut rng);
        }
    }

    /// Every build the CPU runs agrees with the portable lane operations.
    #[test]
    fn builds_match_the_portable_lanes() {
        build_agrees::<f32, _>(Portable, 1);
        #[cfg(target_arch = "x86_64")]
        {
            use super::super::isa::{Avx2, Avx512};
            if let Some(isa) = Avx2::new() {
                build_agrees::<f32, _>(isa, 2);
                build_agrees::<f64, _>(isa, 3);
            }
            if let Some(isa) = Avx512::new() {
                build_agrees::<f32, _>(isa, 4);
                build_agrees::<f64, _>(isa, 5);
            }
        }
    }
}
