//! Classification of one pixel from its window (`docs/semantics.md`, step 3).

use crate::real::Real;

/// What the frame does with one pixel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelClass {
    /// `c(p) < -t(p)`: no cluster and no pedestal update.
    Negative,
    /// A photon is near but `p` is not the window maximum: no cluster and no pedestal update.
    Nothing,
    /// `p` is the centre of a cluster.
    Centre,
    /// Quiet pixel: its raw value is pushed into its pedestal after the frame.
    Pedestal,
}

/// Classifies pixel `p` from its corrected value `c_p`, threshold `t`, and the window's sum
/// `total` (in row-major order from the top-left) and maximum `max`. `side` is
/// `sqrt(X*Y)`, the window's side for the square sizes cluda supports.
#[inline(always)]
pub fn classify<R: Real>(c_p: R, t: R, total: R, max: R, side: R) -> PixelClass {
    if c_p < -t {
        PixelClass::Negative
    } else if max > t || total > side * t {
        if c_p == max {
            PixelClass::Centre
        } else {
            PixelClass::Nothing
        }
    } else {
        PixelClass::Pedestal
    }
}

/// The threshold `t = n_sigma * std`.
#[inline(always)]
pub fn threshold<R: Real>(n_sigma: R, std: R) -> R {
    n_sigma * std
}

/// Window sum and maximum of pixel `(col, row)` by direct iteration: `c(q)` for in-frame
/// neighbours in row-major window order from the top-left; out-of-frame neighbours are skipped.
/// `get(col, row)` returns `c` of an in-frame pixel. The straightforward form, used by kernels
/// that read each neighbour once; the CPU finder computes the same sums lane-wise.
#[inline(always)]
pub fn window_total_max<R: Real, const SIDE: usize>(
    rows: usize,
    cols: usize,
    col: usize,
    row: usize,
    get: impl Fn(usize, usize) -> R,
) -> (R, R) {
    let r = SIDE / 2;
    let mut total = R::ZERO;
    let mut max = get(col, row);
    for dy in 0..SIDE {
        let yy = row as isize + dy as isize - r as isize;
        if yy < 0 || yy >= rows as isize {
            continue;
        }
        for dx in 0..SIDE {
            let xx = col as isize + dx as isize - r as isize;
            if xx < 0 || xx >= cols as isize {
                continue;
            }
            let v = get(xx as usize, yy as usize);
            total = total + v;
            max = max.max_of(v);
        }
    }
    (total, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify(-6.0, 5.0, 0.0, 1.0, 3.0), PixelClass::Negative);
        assert_eq!(classify(6.0, 5.0, 6.0, 6.0, 3.0), PixelClass::Centre);
        assert_eq!(classify(4.0, 5.0, 10.0, 6.0, 3.0), PixelClass::Nothing);
        assert_eq!(classify(4.0, 5.0, 16.0, 4.0, 3.0), PixelClass::Centre);
        assert_eq!(classify(4.0, 5.0, 15.0, 4.0, 3.0), PixelClass::Pedestal);
        assert_eq!(classify(-5.0, 5.0, -20.0, 1.0, 3.0), PixelClass::Pedestal);
    }
}
