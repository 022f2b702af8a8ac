//! Classification of one row of pixels, [`LANES`] at a time (steps 2 and 3 of the module docs
//! of `finder::cpu`): window maxima and sums against the thresholds as bit masks, the exact
//! row-major window sum only where the separable one cannot decide (with its error bound,
//! [`sum_margin`]), and the pedestal update of the quiet pixels.

use cluda_gpu::classify::threshold;
use cluda_gpu::pedestal::{push_ready, std_dev};
use cluda_gpu::real::Real;

use super::isa::Build;
use super::lanes::{LANES, Unit};

/// Smallest window side whose window sums go through the separable sum and its margin test
/// first (the exact row-major sum only where the margin cannot decide).
pub(super) const SEP_MIN: usize = 3;

/// Lower bound used for a row's largest `|c|` in [`sum_margin`], so that the margin never
/// underflows (a larger bound is always safe: it only sends more pixels to the exact sum).
pub(super) const M_FLOOR: f64 = 1.0 / (1u64 << 20) as f64;

/// The margin `D` such that the separable window sum `s_sep` decides `total > k` for the exact
/// row-major sum `total`: `s_sep - k > D` implies `total > k`, and `s_sep - k < -D` implies
/// `total < k`, both with `s_sep - k` evaluated in floating point.
///
/// Proof. The window has `n = side^2` values `v_i` (out-of-frame ones are exact zeros), with
/// `|v_i| <= m` (`m` = the largest `|c|` of the window's rows, at least [`M_FLOOR`]). Any
/// floating-point summation of `n` terms, in any order or tree, satisfies
/// `|fl_sum - sum v_i| <= g * sum |v_i| <= g n m` with `g = gamma_(n-1) = (n-1)u / (1-(n-1)u)`
/// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 4.4; additions whose
/// result is subnormal are exact, so gradual underflow does not break it). Both the row-major sum
/// and the separable sum (row sums, then their sum) are such summations, so
/// `|total - s_sep| <= 2 g n m =: E`. The computed difference is `d = (s_sep - k)(1 + e)`,
/// `|e| <= u`, with the same sign as `s_sep - k`; so `d > D` gives `s_sep - k > D / (1 + u)`,
/// and if `D / (1 + u) >= E` then `total >= s_sep - E > k`; likewise `d < -D` gives
/// `total <= s_sep + E < k`. We compute `D = fl(C m)` with `C = 4 n^2 u` (exact: an integer
/// times a power of two). With `m >= 2^-20` and `n >= 9` the product is a normal number, so
/// `D >= C m (1 - u)`, and `C (1 - u) / (1 + u) = 4 n^2 u (1-u)/(1+u) >= 2 n (n-1) u / (1 - (n-1)u)
/// = 2 g n` because `(n-1) u <= 80 * 2^-24 < 10^-5`, so `D / (1 + u) >= E`. QED.
#[inline(always)]
pub(super) fn sum_margin<R: Unit, const S: usize>(m: R) -> R {
    let c = R::from_f64(4.0 * (S * S * S * S) as f64 * R::U);
    c * m
}
/// What [`classify_chunk`] reads of the current row `y` and its window.
#[derive(Clone, Copy)]
pub(super) struct RowCtx<'a, R, const S: usize> {
    pub(super) c_rows: &'a [&'a [R]; S],
    /// Row `y` of `c` from its column 0 (`c_rows[r]` without the left padding).
    pub(super) c_mid: &'a [R],
    pub(super) hmax_rows: &'a [&'a [R]; S],
    pub(super) hsum_rows: &'a [&'a [R]; S],
    pub(super) frame_row: &'a [u16],
    pub(super) base_row: &'a [R],
    pub(super) t_row: &'a [R],
    pub(super) margin: R,
    pub(super) side: R,
    pub(super) inv: R,
    pub(super) n_sigma: R,
    pub(super) base_zero: bool,
}

/// [`classify_chunk`] over the whole chunks of a row whose slices are all cut to
/// `centres.len() * LANES` values (so the loop condition proves every chunk in bounds).
/// `LIVE`: thresholds from the current sums (else `row.t_row`).
#[inline(always)]
pub(super) fn classify_full<R: Unit, const S: usize, const LIVE: bool, B: Build>(
    isa: B,
    row: &RowCtx<'_, R, S>,
    a_row: &mut [R],
    b_row: &mut [R],
    centres: &mut [u32],
) {
    let len = a_row.len();
    let mut x0 = 0;
    for centre in centres.iter_mut() {
        if x0 + LANES > len {
            break;
        }
        *centre = classify_chunk::<R, S, true, LIVE, B>(isa, row, a_row, b_row, x0, LANES);
        x0 += LANES;
    }
}

/// Classifies pixels `x0 .. x0 + n` of the row (steps 2 and 3 of the module docs), updates the
/// pedestal of its quiet pixels, and returns the bits of its centres. `FULL`: `n == LANES`.
#[inline(always)]
pub(super) fn classify_chunk<
    R: Unit,
    const S: usize,
    const FULL: bool,
    const LIVE: bool,
    B: Build,
>(
    isa: B,
    row: &RowCtx<'_, R, S>,
    a_row: &mut [R],
    b_row: &mut [R],
    x0: usize,
    n: usize,
) -> u32 {
    let n = if FULL { LANES } else { n };
    let RowCtx {
        c_rows,
        c_mid,
        hmax_rows,
        hsum_rows,
        frame_row,
        base_row,
        t_row,
        margin,
        side,
        inv,
        n_sigma,
        base_zero,
        ..
    } = *row;
    let a: [R; LANES] = load(a_row, x0, n);
    let b: [R; LANES] = load(b_row, x0, n);
    let t: [R; LANES] = if LIVE {
        let mut t = [R::ZERO; LANES];
        for l in 0..LANES {
            t[l] = threshold(n_sigma, std_dev(a[l], b[l], inv));
        }
        t
    } else {
        load(t_row, x0, n)
    };
    let cp: [R; LANES] = load(c_mid, x0, LANES);
    let mut max: [R; LANES] = hmax_rows[0][x0..][..LANES].try_into().expect("LANES");
    for row in &hmax_rows[1..] {
        let v = &row[x0..][..LANES];
        for l in 0..LANES {
            max[l] = max[l].max_of(v[l]);
        }
    }
    let (mut k, mut neg_t) = ([R::ZERO; LANES], [R::ZERO; LANES]);
    for l in 0..LANES {
        k[l] = side * t[l];
        neg_t[l] = -t[l];
    }
    let neg = R::lt_bits(isa, &cp, &neg_t);
    let mut hot = R::gt_bits(isa, &max, &t);
    let eq = R::eq_bits(isa, &cp, &max);
    let valid = if n == LANES {
        u32::MAX >> (32 - LANES)
    } else {
        (1u32 << n) - 1
    };
    // Pixels whose outcome depends on the window sum.
    let need = valid & !neg & !hot;
    if need != 0 {
        let mut decided = false;
        if S >= SEP_MIN {
            let mut s: [R; LANES] = hsum_rows[0][x0..][..LANES].try_into().expect("LANES");
            for row in &hsum_rows[1..] {
                let v = &row[x0..][..LANES];
                for l in 0..LANES {
                    s[l] = s[l] + v[l];
                }
            }
            let (mut d, hi, lo) = ([R::ZERO; LANES], [margin; LANES], [-margin; LANES]);
            for l in 0..LANES {
                d[l] = s[l] - k[l];
            }
            let above = R::gt_bits(isa, &d, &hi);
            let below = R::lt_bits(isa, &d, &lo);
            if need & !(above | below) == 0 {
                hot |= need & above;
                decided = true;
            }
        }
        if !decided {
            let total = exact_sums::<R, S>(c_rows, x0);
            hot |= need & R::gt_bits(isa, &total, &k);
        }
    }
    let centre = valid & !neg & hot & eq;
    let pedestal = valid & !neg & !hot;
    // 3. Update the pedestal of the quiet pixels (select, no branches).
    if pedestal != 0 {
        let xs: [u16; LANES] = load(frame_row, x0, n);
        let base: [R; LANES] = if base_zero {
            [R::ZERO; LANES]
        } else {
            load(base_row, x0, n)
        };
        let (mut pa, mut pb) = (a, b);
        for l in 0..LANES {
            push_ready(&mut pa[l], &mut pb[l], base[l], xs[l], inv);
        }
        let na = R::select_bits(isa, pedestal, &pa, &a);
        let nb = R::select_bits(isa, pedestal, &pb, &b);
        store(isa, a_row, x0, n, &na);
        store(isa, b_row, x0, n, &nb);
    }
    centre
}

/// `n` values of `s` from `x0` into a full lane array (the rest zero).
#[inline(always)]
fn load<T: Copy + Default>(s: &[T], x0: usize, n: usize) -> [T; LANES] {
    if n == LANES {
        s[x0..x0 + LANES].try_into().expect("LANES values")
    } else {
        let mut v = [T::default(); LANES];
        v[..n].copy_from_slice(&s[x0..x0 + n]);
        v
    }
}

/// The first `n` lanes of `v` into `s` from `x0`: a full chunk is vector stores, where a copy
/// (of `n` values, or even of `LANES`) became a `memcpy` call for every chunk, with the live
/// vectors spilled around it.
#[inline(always)]
fn store<R: Unit, B: Build>(isa: B, s: &mut [R], x0: usize, n: usize, v: &[R; LANES]) {
    if n == LANES {
        R::store_lanes(isa, &mut s[x0..], v);
    } else {
        s[x0..x0 + n].copy_from_slice(&v[..n]);
    }
}
/// The exact window sums of pixels `x0 .. x0 + LANES` of the row whose window rows are `rows`:
/// for each lane, `0 + v_1 + v_2 + ...` over the window in row-major order from the top-left.
#[inline(always)]
pub(super) fn exact_sums<R: Real, const S: usize>(rows: &[&[R]; S], x0: usize) -> [R; LANES] {
    let mut sum = [R::ZERO; LANES];
    for row in rows {
        for dx in 0..S {
            let v = &row[x0 + dx..][..LANES];
            for l in 0..LANES {
                sum[l] = sum[l] + v[l];
            }
        }
    }
    sum
}
#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    /// The margin test of [`sum_margin`] never contradicts the exact row-major sum, on windows
    /// built to sit right at the threshold (values of very different magnitudes, thresholds at
    /// the exact sum and a few ulps or margins away).
    fn margin_is_safe<R: Unit, const S: usize>(seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut decided = 0usize;
        for _ in 0..4000 {
            let scale = [1e-3, 1.0, 45.0, 4000.0, 65535.0][rng.random_range(0..5)];
            let v: Vec<R> = (0..S * S)
                .map(|_| {
                    let big = rng.random_range(0..8) == 0;
                    let x: f64 =
                        rng.random_range(-1.0..1.0) * if big { scale } else { scale * 1e-3 };
                    R::from_f64(x)
                })
                .collect();
            // Row-major exact sum (the definition) and the separable sum (the finder's order).
            let exact = v.iter().fold(R::ZERO, |s, &x| s + x);
            let mut sep = R::ZERO;
            for row in v.chunks(S) {
                sep = sep + row.iter().skip(1).fold(row[0], |s, &x| s + x);
            }
            let m = v
                .iter()
                .fold(R::from_f64(M_FLOOR), |m, &x| m.max_of(x).max_of(-x));
            let margin = sum_margin::<R, S>(m);
            let e = exact.to_f64();
            let offsets = [0.0, 1e-12, -1e-12, 1e-6, -1e-6, 1e-3, -1e-3, 1.0, -1.0];
            for &o in &offsets {
                let k = R::from_f64(e + o * e.abs().max(1e-9)).max_of(R::ZERO);
                let d = sep - k;
                if d > margin {
                    assert!(exact > k, "said above: exact {e} k {}", k.to_f64());
                    decided += 1;
                } else if d < -margin {
                    assert!(exact <= k, "said below: exact {e} k {}", k.to_f64());
                    decided += 1;
                }
            }
        }
        assert!(decided > 1000, "the margin decides too rarely ({decided})");
    }

    #[test]
    fn sum_margin_never_contradicts_the_exact_sum() {
        margin_is_safe::<f32, 3>(6);
        margin_is_safe::<f64, 3>(7);
        margin_is_safe::<f32, 5>(1);
        margin_is_safe::<f32, 7>(2);
        margin_is_safe::<f32, 9>(3);
        margin_is_safe::<f64, 5>(4);
        margin_is_safe::<f64, 9>(5);
    }
}
