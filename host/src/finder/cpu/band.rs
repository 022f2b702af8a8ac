//! One band of rows through one frame: its working memory and the pass that prepares,
//! classifies and updates every row (steps 1 to 3 of the module docs of `finder::cpu`).

use cluda_gpu::pedestal::{corrected, mean_offset};
use cluda_gpu::real::Real;

use super::classify::{M_FLOOR, RowCtx, SEP_MIN, classify_chunk, classify_full, sum_margin};
use super::isa::Build;
use super::lanes::{LANES, Unit};
use super::record::write_record;

/// Fixed per-call parameters of the band pass.
#[derive(Clone, Copy)]
pub(super) struct Setup<R> {
    pub(super) rows: usize,
    pub(super) cols: usize,
    /// `cols` rounded up to a multiple of [`LANES`].
    pub(super) w: usize,
    /// Length of one padded row of `c`: `w + 2r`; column `x` is at `x + r`.
    pub(super) stride: usize,
    pub(super) n_sigma: R,
    pub(super) live: bool,
    /// Every baseline is `+0` (F64, F32Naive), so `x - base == x` and `base` need not be read.
    pub(super) base_zero: bool,
}

/// Working memory of one band of rows `y0 .. y1`. Aligned (and so padded) to 128 bytes: bands
/// sit side by side in a `Vec`, and one band's record pushes (its `out` length) must not share a
/// cache line (or an adjacent-line prefetch pair) with another thread's band.
#[repr(align(128))]
pub(super) struct Band<R> {
    pub(super) y0: usize,
    pub(super) y1: usize,
    /// Ring of `side` padded rows of `c` (row `y` in slot `y % side`).
    pub(super) c: Vec<R>,
    /// Ring of the along-row window maxima and sums: `hmax[x] = max c[x-r ..= x+r]`.
    pub(super) hmax: Vec<R>,
    pub(super) hsum: Vec<R>,
    /// Per ring slot: the largest `|c|` of the row (at least [`M_FLOOR`]).
    pub(super) mrow: Vec<R>,
    /// Pedestal sums `a` of the `r` rows above and below the band, as they were before the frame
    /// (their owners update them during the pass).
    pub(super) halo_top: Vec<R>,
    pub(super) halo_bottom: Vec<R>,
    /// Packed records of the band's centres, in row-major order.
    pub(super) out: Vec<u32>,
}

impl<R: Unit> Band<R> {
    /// A band of rows `y0 .. y1` for windows of side `S`, with its working memory (allocated by
    /// the thread that runs the band: it then comes from that thread's allocator arena and
    /// never shares a cache line with another band's).
    pub(super) fn new<const S: usize>(y0: usize, y1: usize, setup: &Setup<R>) -> Self {
        Band {
            y0,
            y1,
            c: vec![R::ZERO; S * setup.stride],
            hmax: vec![R::ZERO; S * setup.w],
            hsum: vec![R::ZERO; if S >= SEP_MIN { S * setup.w } else { 0 }],
            mrow: vec![R::ZERO; S],
            halo_top: Vec::new(),
            halo_bottom: Vec::new(),
            out: Vec::new(),
        }
    }
}
/// The pedestal state a band may update: sums `a`, `b` of its own rows (starting at its first
/// row), and everyone's baselines and `1/N`.
pub(super) struct BandMaps<'a, R> {
    pub(super) a: &'a mut [R],
    pub(super) b: &'a mut [R],
    pub(super) base: &'a [R],
    pub(super) inv: R,
}

/// The band pass: prepare, classify and update every row of the band (module docs).
#[inline(always)]
pub(super) fn band_impl<R: Unit, const S: usize, B: Build>(
    isa: B,
    setup: &Setup<R>,
    band: &mut Band<R>,
    frozen_t: &[R],
    frame: &[u16],
    own: &mut BandMaps<'_, R>,
) {
    let r = S / 2;
    let Setup {
        rows,
        cols,
        w,
        stride,
        n_sigma,
        live,
        base_zero,
    } = *setup;
    let (y0, y1) = (band.y0, band.y1);
    let inv = own.inv;
    let side = R::from_u16(S as u16);
    band.out.clear();
    // Per chunk of the current row: its centres (records are written after the row's chunk
    // loop, which then has no calls that would force its vectors out to the stack).
    let mut centres = vec![0u32; w / LANES];
    let zero_c = vec![R::ZERO; stride];
    let zero_w = vec![R::ZERO; w];
    let m_floor = R::from_f64(M_FLOOR);
    let top = y0.saturating_sub(r);
    let end = (y1 + r).min(rows);
    let mut next = top; // next row to prepare
    for y in y0..y1 {
        // 1. Prepare rows up to y + r.
        while next < end.min(y + r + 1) {
            let yy = next;
            let slot = yy % S;
            let a_row: &[R] = if yy < y0 {
                &band.halo_top[(yy - top) * cols..][..cols]
            } else if yy >= y1 {
                &band.halo_bottom[(yy - y1) * cols..][..cols]
            } else {
                &own.a[(yy - y0) * cols..][..cols]
            };
            let x_row = &frame[yy * cols..][..cols];
            let c_row = &mut band.c[slot * stride..][..stride];
            prepare_row(
                x_row,
                a_row,
                (!base_zero).then(|| &own.base[yy * cols..][..cols]),
                inv,
                &mut c_row[r..r + cols],
            );
            let hmax = &mut band.hmax[slot * w..][..w];
            let hsum: &mut [R] = if S >= SEP_MIN {
                &mut band.hsum[slot * w..][..w]
            } else {
                &mut []
            };
            band.mrow[slot] = along_row::<R, S, B>(isa, c_row, hmax, hsum).max_of(m_floor);
            next += 1;
        }
        // Rows of the window of row y (zero rows outside the frame).
        let mut c_rows: [&[R]; S] = [&zero_c[..]; S];
        let mut hmax_rows: [&[R]; S] = [&zero_w[..]; S];
        let mut hsum_rows: [&[R]; S] = [&zero_w[..]; S];
        let mut m_win = m_floor;
        for dy in 0..S {
            let yy = y + dy;
            if yy < r || yy - r >= rows {
                continue;
            }
            let slot = (yy - r) % S;
            c_rows[dy] = &band.c[slot * stride..][..stride];
            hmax_rows[dy] = &band.hmax[slot * w..][..w];
            if S >= SEP_MIN {
                hsum_rows[dy] = &band.hsum[slot * w..][..w];
            }
            m_win = m_win.max_of(band.mrow[slot]);
        }
        let margin = sum_margin::<R, S>(m_win);
        let row_off = (y - y0) * cols;
        let frame_row = &frame[y * cols..][..cols];
        let base_row = &own.base[y * cols..][..cols];
        let a_row = &mut own.a[row_off..][..cols];
        let b_row = &mut own.b[row_off..][..cols];
        let t_row: &[R] = if live {
            &[]
        } else {
            &frozen_t[y * cols..][..cols]
        };
        let row = RowCtx {
            c_rows: &c_rows,
            c_mid: &c_rows[r][r..],
            hmax_rows: &hmax_rows,
            hsum_rows: &hsum_rows,
            frame_row,
            base_row,
            t_row,
            margin,
            side,
            inv,
            n_sigma,
            base_zero,
        };
        // Whole chunks through a build with `n == LANES` known (plain vector loads and stores,
        // nothing spilled around a partial copy), then the partial chunk, if any. For the whole
        // chunks every row is cut to `len` (`len + 2r` padded), so that the loop condition
        // proves each chunk's slices in bounds.
        let full = cols / LANES;
        let len = full * LANES;
        {
            let (c_cut, hmax_cut, hsum_cut) = (
                c_rows.map(|s| &s[..len + 2 * r]),
                hmax_rows.map(|s| &s[..len]),
                hsum_rows.map(|s| if S >= SEP_MIN { &s[..len] } else { s }),
            );
            let cut = RowCtx {
                c_rows: &c_cut,
                c_mid: &c_cut[r][r..r + len],
                hmax_rows: &hmax_cut,
                hsum_rows: &hsum_cut,
                frame_row: &frame_row[..len],
                base_row: &base_row[..len],
                t_row: if live { t_row } else { &t_row[..len] },
                ..row
            };
            let (a_cut, b_cut) = (&mut a_row[..len], &mut b_row[..len]);
            if live {
                classify_full::<R, S, true, B>(isa, &cut, a_cut, b_cut, &mut centres[..full]);
            } else {
                classify_full::<R, S, false, B>(isa, &cut, a_cut, b_cut, &mut centres[..full]);
            }
        }
        if full * LANES < cols {
            let x0 = full * LANES;
            centres[full] = if live {
                classify_chunk::<R, S, false, true, B>(isa, &row, a_row, b_row, x0, cols - x0)
            } else {
                classify_chunk::<R, S, false, false, B>(isa, &row, a_row, b_row, x0, cols - x0)
            };
        }
        for (ci, &centre) in centres.iter().enumerate() {
            let mut bits = centre;
            while bits != 0 {
                let l = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                write_record::<R, S>(&mut band.out, &c_rows, ci * LANES + l, y);
            }
        }
    }
}
/// Corrected values of one row: `c = (x - base) - a * inv` (`base = 0` when `None`, where
/// `x - 0 == x` exactly).
#[inline(always)]
fn prepare_row<R: Real>(x: &[u16], a: &[R], base: Option<&[R]>, inv: R, c: &mut [R]) {
    let n = c.len();
    let (x, a) = (&x[..n], &a[..n]);
    match base {
        None => {
            for i in 0..n {
                c[i] = R::from_u16(x[i]) - mean_offset(a[i], inv);
            }
        }
        Some(base) => {
            let base = &base[..n];
            for i in 0..n {
                c[i] = corrected(x[i], base[i], mean_offset(a[i], inv));
            }
        }
    }
}

/// Along one padded row of `c`: `hmax[x]` = maximum and `hsum[x]` = sum (left to right) of the
/// `S` values centred on column `x` (`hsum` empty below [`SEP_MIN`]). Returns the largest `|c|`
/// of the row.
#[inline(always)]
fn along_row<R: Unit, const S: usize, B: Build>(
    isa: B,
    c: &[R],
    hmax: &mut [R],
    hsum: &mut [R],
) -> R {
    R::along_row_lanes::<B, S>(isa, c, hmax, hsum, S >= SEP_MIN)
}
