//! The lane operations of [`Unit`](super::lanes::Unit) as AVX-512 and AVX2 intrinsics (x86-64
//! only): one module per build and precision, with the values in as many registers as they
//! need ([`LANES`](super::lanes::LANES) values; f32: one `zmm` or two `ymm`; f64: two `zmm` or four `ymm`).
//!
//! Each module's primitives (one intrinsic each) have the build's target features; the
//! operations built from them are `#[inline(always)]` without features, so that they inline
//! into that build of the band kernel (see `dispatch`), where the primitives inline in turn
//! (a larger `#[target_feature]` function was left as a call in the huge kernel). Calling one
//! is `unsafe` because the CPU must have the features (the lane operations hold a build token
//! that proves it).
//!
//! The operations are those of the portable implementation in `lanes`, in the same order:
//! `max_of(a, b)` (`b` where `b > a`, else `a`) is `max(b, a)` (`vmaxps`/`pd` returns its second
//! operand unless the first is greater), negation flips the sign bit, and comparisons are
//! ordered and quiet (false for NaN, like `<`, `>`, `==`).

/// The functions of one build and precision over the helpers `zero`, `loadu`, `storeu`, `max`,
/// `add`, `neg` and `cmp` defined beside it (`W` lanes per register).
macro_rules! lane_ops {
    ($t:ty, $reg:ty) => {
        use cluda_gpu::real::Real;

        use super::super::isa::LANES;

        /// Lanes per register.
        const W: usize = LANES / N;
        /// [`LANES`] values in registers.
        type V = [$reg; N];

        /// `s[..LANES]` into registers.
        #[inline(always)]
        unsafe fn load(s: &[$t]) -> V {
            let s = &s[..LANES];
            // SAFETY: the caller's CPU has the features.
            let mut v = [unsafe { zero() }; N];
            for (i, r) in v.iter_mut().enumerate() {
                // SAFETY: `s` holds LANES = N * W values; the CPU has the features.
                *r = unsafe { loadu(s.as_ptr().add(i * W)) };
            }
            v
        }

        /// `v` into `s[..LANES]`.
        #[inline(always)]
        unsafe fn store(s: &mut [$t], v: V) {
            let s = &mut s[..LANES];
            for (i, &r) in v.iter().enumerate() {
                // SAFETY: `s` holds LANES = N * W values; the CPU has the features.
                unsafe { storeu(s.as_mut_ptr().add(i * W), r) };
            }
        }

        /// Bits of `op(a[l], b[l])` for the comparison predicate `OP`.
        #[inline(always)]
        unsafe fn bits<const OP: i32>(a: &[$t; LANES], b: &[$t; LANES]) -> u32 {
            // SAFETY: the caller's CPU has the features.
            unsafe {
                let (a, b) = (load(a), load(b));
                let mut bits = 0;
                for i in 0..N {
                    bits |= cmp::<OP>(a[i], b[i]) << (i * W);
                }
                bits
            }
        }

        /// See [`Unit::lt_bits`](crate::finder::cpu::lanes::Unit::lt_bits).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn lt_bits(a: &[$t; LANES], b: &[$t; LANES]) -> u32 {
            // SAFETY: as the caller.
            unsafe { bits::<_CMP_LT_OQ>(a, b) }
        }

        /// See [`Unit::gt_bits`](crate::finder::cpu::lanes::Unit::gt_bits).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn gt_bits(a: &[$t; LANES], b: &[$t; LANES]) -> u32 {
            // SAFETY: as the caller.
            unsafe { bits::<_CMP_GT_OQ>(a, b) }
        }

        /// See [`Unit::eq_bits`](crate::finder::cpu::lanes::Unit::eq_bits).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn eq_bits(a: &[$t; LANES], b: &[$t; LANES]) -> u32 {
            // SAFETY: as the caller.
            unsafe { bits::<_CMP_EQ_OQ>(a, b) }
        }

        /// See [`Unit::store_lanes`](crate::finder::cpu::lanes::Unit::store_lanes).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn store_lanes(dst: &mut [$t], v: &[$t; LANES]) {
            // SAFETY: as the caller.
            unsafe { store(dst, load(v)) }
        }

        /// See [`Unit::select_bits`](crate::finder::cpu::lanes::Unit::select_bits).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn select_bits(
            bits: u32,
            yes: &[$t; LANES],
            no: &[$t; LANES],
        ) -> [$t; LANES] {
            let mut out = [0.0; LANES];
            // SAFETY: as the caller.
            unsafe {
                let (yes, mut v) = (load(yes), load(no));
                for i in 0..N {
                    v[i] = blend(bits >> (i * W), v[i], yes[i]);
                }
                store(&mut out, v);
            }
            out
        }

        /// `b` where `b > a`, else `a`, lane by lane ([`Real::max_of`]).
        #[inline(always)]
        unsafe fn max_of(a: $reg, b: $reg) -> $reg {
            // SAFETY: as the caller.
            unsafe { max(b, a) }
        }

        /// See [`Unit::along_row_lanes`](crate::finder::cpu::lanes::Unit::along_row_lanes).
        #[inline(always)]
        pub(in crate::finder::cpu) unsafe fn along_row<const S: usize>(
            c: &[$t],
            hmax: &mut [$t],
            hsum: &mut [$t],
            sums: bool,
        ) -> $t {
            let w = hmax.len();
            // Cut to the lengths the loop reads, so that its condition (`w` is a multiple of
            // LANES) proves every load and store in bounds.
            let c = &c[..w + S - 1];
            let hsum = if sums { &mut hsum[..w] } else { hsum };
            // SAFETY: the caller's CPU has the features (this function's contract), which is
            // all the intrinsics need; every unsafe block below relies on the same.
            let mut big = [unsafe { zero() }; N];
            let mut x0 = 0;
            while x0 + LANES <= w {
                // SAFETY: the features, as above.
                let v = unsafe { load(&c[x0..x0 + LANES]) };
                let (mut m, mut s) = (v, v);
                for i in 0..N {
                    // SAFETY: the features, as above.
                    big[i] = unsafe { max_of(max_of(big[i], v[i]), neg(v[i])) };
                }
                for dx in 1..S {
                    // SAFETY: the features, as above.
                    let u = unsafe { load(&c[x0 + dx..x0 + dx + LANES]) };
                    for i in 0..N {
                        // SAFETY: the features, as above.
                        m[i] = unsafe { max_of(m[i], u[i]) };
                        // SAFETY: the features, as above.
                        s[i] = unsafe { add(s[i], u[i]) };
                    }
                }
                // SAFETY: the features, as above.
                unsafe { store(&mut hmax[x0..x0 + LANES], m) };
                if sums {
                    // SAFETY: the features, as above.
                    unsafe { store(&mut hsum[x0..x0 + LANES], s) };
                }
                x0 += LANES;
            }
            // The chunks started at indices 0 .. w; the last S - 1 values of the padded row
            // follow.
            let tail = c[w..]
                .iter()
                .fold(0.0, |acc: $t, &v| acc.max_of(v).max_of(-v));
            let mut lanes = [0.0; LANES];
            // SAFETY: the features, as above.
            unsafe { store(&mut lanes, big) };
            lanes.iter().fold(tail, |acc, &v| acc.max_of(v))
        }
    };
}

/// The AVX-512 build, f32: one `zmm`.
pub(super) mod avx512_f32 {
    use core::arch::x86_64::*;

    /// Registers per [`LANES`] values.
    const N: usize = 1;

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn loadu(p: *const f32) -> __m512 {
        // SAFETY: the caller passes 16 readable values.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn storeu(p: *mut f32, v: __m512) {
        // SAFETY: the caller passes 16 writable values.
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn max(a: __m512, b: __m512) -> __m512 {
        _mm512_max_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn neg(a: __m512) -> __m512 {
        _mm512_xor_ps(a, _mm512_set1_ps(-0.0))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn cmp<const OP: i32>(a: __m512, b: __m512) -> u32 {
        _mm512_cmp_ps_mask::<OP>(a, b) as u32
    }

    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn blend(bits: u32, no: __m512, yes: __m512) -> __m512 {
        _mm512_mask_blend_ps(bits as u16, no, yes)
    }

    lane_ops!(f32, __m512);
}

/// The AVX-512 build, f64: two `zmm`.
pub(super) mod avx512_f64 {
    use core::arch::x86_64::*;

    /// Registers per [`LANES`] values.
    const N: usize = 2;

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn zero() -> __m512d {
        _mm512_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn loadu(p: *const f64) -> __m512d {
        // SAFETY: the caller passes 8 readable values.
        unsafe { _mm512_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn storeu(p: *mut f64, v: __m512d) {
        // SAFETY: the caller passes 8 writable values.
        unsafe { _mm512_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn max(a: __m512d, b: __m512d) -> __m512d {
        _mm512_max_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn add(a: __m512d, b: __m512d) -> __m512d {
        _mm512_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn neg(a: __m512d) -> __m512d {
        _mm512_xor_pd(a, _mm512_set1_pd(-0.0))
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn cmp<const OP: i32>(a: __m512d, b: __m512d) -> u32 {
        _mm512_cmp_pd_mask::<OP>(a, b) as u32
    }

    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn blend(bits: u32, no: __m512d, yes: __m512d) -> __m512d {
        _mm512_mask_blend_pd(bits as u8, no, yes)
    }

    lane_ops!(f64, __m512d);
}

/// The AVX2 build, f32: two `ymm`.
pub(super) mod avx2_f32 {
    use core::arch::x86_64::*;

    /// Registers per [`LANES`] values.
    const N: usize = 2;

    #[inline]
    #[target_feature(enable = "avx2")]
    fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn loadu(p: *const f32) -> __m256 {
        // SAFETY: the caller passes 8 readable values.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn storeu(p: *mut f32, v: __m256) {
        // SAFETY: the caller passes 8 writable values.
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn max(a: __m256, b: __m256) -> __m256 {
        _mm256_max_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn neg(a: __m256) -> __m256 {
        _mm256_xor_ps(a, _mm256_set1_ps(-0.0))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn cmp<const OP: i32>(a: __m256, b: __m256) -> u32 {
        _mm256_movemask_ps(_mm256_cmp_ps::<OP>(a, b)) as u32
    }

    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn blend(bits: u32, no: __m256, yes: __m256) -> __m256 {
        let lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let set = _mm256_and_si256(_mm256_set1_epi32(bits as i32), lane_bit);
        let mask = _mm256_castsi256_ps(_mm256_cmpeq_epi32(set, lane_bit));
        _mm256_blendv_ps(no, yes, mask)
    }

    lane_ops!(f32, __m256);
}

/// The AVX2 build, f64: four `ymm`.
pub(super) mod avx2_f64 {
    use core::arch::x86_64::*;

    /// Registers per [`LANES`] values.
    const N: usize = 4;

    #[inline]
    #[target_feature(enable = "avx2")]
    fn zero() -> __m256d {
        _mm256_setzero_pd()
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn loadu(p: *const f64) -> __m256d {
        // SAFETY: the caller passes 4 readable values.
        unsafe { _mm256_loadu_pd(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn storeu(p: *mut f64, v: __m256d) {
        // SAFETY: the caller passes 4 writable values.
        unsafe { _mm256_storeu_pd(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn max(a: __m256d, b: __m256d) -> __m256d {
        _mm256_max_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add(a: __m256d, b: __m256d) -> __m256d {
        _mm256_add_pd(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn neg(a: __m256d) -> __m256d {
        _mm256_xor_pd(a, _mm256_set1_pd(-0.0))
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    fn cmp<const OP: i32>(a: __m256d, b: __m256d) -> u32 {
        _mm256_movemask_pd(_mm256_cmp_pd::<OP>(a, b)) as u32
    }

    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn blend(bits: u32, no: __m256d, yes: __m256d) -> __m256d {
        let lane_bit = _mm256_setr_epi64x(1, 2, 4, 8);
        let set = _mm256_and_si256(_mm256_set1_epi64x(bits as i64), lane_bit);
        let mask = _mm256_castsi256_pd(_mm256_cmpeq_epi64(set, lane_bit));
        _mm256_blendv_pd(no, yes, mask)
    }

    lane_ops!(f64, __m256d);
}
