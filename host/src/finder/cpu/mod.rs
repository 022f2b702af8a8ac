//! The CPU reference finder: exact semantics, SIMD across neighbouring pixels, one band of rows
//! per thread.
//!
//! Each frame is one pass over bands of rows (one band per thread; with one thread everything
//! runs on the calling thread). A band walks its rows top to bottom and, for row `y`:
//! 1. *prepares* row `y + r` (r = side / 2): corrected values `c` into a ring of `side`
//!    zero-padded rows, and for that row the running window maximum and window sum along the row
//!    (`hmax`, `hsum`: `side` values each) and the row's largest `|c|`;
//! 2. *classifies* row `y` [`LANES`] pixels at a time: the window maximum is the maximum of the
//!    `side` `hmax` values above and below (maxima do not depend on the order); the lanes are
//!    compared with their thresholds at once, giving bit masks; only pixels with
//!    `c >= -t` and `max <= t` need the window sum (see below), and only centres (rare) take the
//!    scalar path that writes their records;
//! 3. *updates* row `y`'s pedestal at once (branch-free select over the lanes): its `c` was
//!    computed when it was prepared, and the rows below it that still need the old state are
//!    prepared already, so the update is frame-synchronous as the definition requires.
//!
//! The window sum must be the row-major sum from the top-left, rounded at every addition. It is
//! computed exactly that way whenever it can change the outcome; elsewhere the separable sum
//! (sum of the `hsum` values) decides, with a rigorous error bound (see `sum_margin`). This
//! pays off from 3x3 on: 3 loads and adds per pixel instead of 9. The outcome is therefore bit-identical to the definition for every pixel.
//!
//! Zero padding is exact: an out-of-frame neighbour adds `+0` to a sum (no change) and a `0`
//! in a maximum can only matter when every in-frame value is negative, where the pixel is
//! classified "pedestal" either way because thresholds are never negative.
//!
//! With several bands, the rows a band reads from its neighbours (`r` above, `r` below) are
//! copies of their pedestal state before the frame, so every band updates its own rows in place
//! without waiting. Each band keeps its thread for the whole call, in step with the others frame
//! by frame (module `pipeline`; a fork-join per frame cost about a third of the time on 2
//! cores). Bands are concatenated in order, so results do not depend on the thread count.

use cluda_gpu::classify::threshold;
use cluda_gpu::pedestal::{corrected, mean_offset, push_ready, std_dev};
use cluda_gpu::real::Real;

use crate::cluster::{FrameClusters, pack_xy};
use crate::config::{FinderConfig, ThresholdMode};
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::frames::Frames;
use crate::pedestal::{Pedestal, PixelMaps, ReadyState};

mod pipeline;

/// Neighbouring pixels classified together (the SIMD width of the classification).
pub const LANES: usize = 16;

/// The CPU reference finder.
pub struct CpuFinder {
    config: FinderConfig,
    pedestal: Pedestal,
    /// Worker threads; `None` for one thread (everything runs on the calling thread).
    pool: Option<rayon::ThreadPool>,
    threads: usize,
}

impl CpuFinder {
    /// A finder using every available core.
    pub fn new(config: FinderConfig) -> Result<Self> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self::with_threads(config, threads)
    }

    /// A finder using exactly `threads` worker threads (1: single-threaded).
    pub fn with_threads(config: FinderConfig, threads: usize) -> Result<Self> {
        config.validate()?;
        if threads == 0 {
            return Err(Error::param("threads", "must be at least 1"));
        }
        let pool = if threads == 1 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("cluda-cpu-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::param("threads", format!("cannot start {threads} threads: {e}"))
                    })?,
            )
        };
        let pedestal = Pedestal::new(
            config.rows,
            config.cols,
            config.pedestal_frames,
            config.precision,
        )?;
        Ok(Self {
            config,
            pedestal,
            pool,
            threads,
        })
    }

    /// Worker threads in use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The pedestal, borrowed.
    pub fn pedestal_ref(&self) -> &Pedestal {
        &self.pedestal
    }
}

impl ClusterFinder for CpuFinder {
    fn config(&self) -> &FinderConfig {
        &self.config
    }

    fn device(&self) -> String {
        "cpu".into()
    }

    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()> {
        let pedestal = &mut self.pedestal;
        match &self.pool {
            Some(pool) => pool.install(|| pedestal.push_frames(frames)),
            None => pedestal.push_frames_with(frames, false),
        }
    }

    fn is_ready(&self) -> bool {
        self.pedestal.is_ready()
    }

    fn pedestal(&self) -> Result<Pedestal> {
        Ok(self.pedestal.clone())
    }

    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()> {
        pedestal.check_fits(&self.config)?;
        self.pedestal = pedestal;
        Ok(())
    }

    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        frames.expect_shape(self.config.rows, self.config.cols, "data frames")?;
        let config = &self.config;
        let pool = self.pool.as_ref();
        match self.pedestal.ready_mut()? {
            ReadyState::F64(m) => run_sized(config, pool, m, frames, visit),
            ReadyState::F32(m) => run_sized(config, pool, m, frames, visit),
        }
    }
}

fn run_sized<R: Unit>(
    config: &FinderConfig,
    pool: Option<&rayon::ThreadPool>,
    maps: &mut PixelMaps<R>,
    frames: Frames<'_>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    match config.size.side() {
        3 => run::<R, 3>(config, pool, maps, frames, visit),
        5 => run::<R, 5>(config, pool, maps, frames, visit),
        7 => run::<R, 7>(config, pool, maps, frames, visit),
        _ => run::<R, 9>(config, pool, maps, frames, visit),
    }
}

/// What the finder needs of a precision beyond [`Real`]: its unit roundoff, and lane-wise
/// comparisons of [`LANES`] values as bit masks (bit `l` = lane `l`; one vector compare and a
/// mask move, where a loop of `(a < b) as u32) << l` would be reduced lane by lane).
pub(crate) trait Unit: Real + Default + Send + Sync {
    /// `u = 2^-p` for a `p`-bit significand (half the distance from 1 to the next number).
    const U: f64;
    /// Bits of `a[l] < b[l]`.
    fn lt_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// Bits of `a[l] > b[l]`.
    fn gt_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// Bits of `a[l] == b[l]`.
    fn eq_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32;
    /// Lane `l` of `yes` where bit `l` of `bits` is set, else of `no`.
    fn select_bits(bits: u32, yes: &[Self; LANES], no: &[Self; LANES]) -> [Self; LANES];
    /// `dst[..LANES] = v` as vector stores (a plain copy may become a `memcpy` call).
    fn store_lanes(dst: &mut [Self], v: &[Self; LANES]);
    /// [`along_row`] for this precision: explicit vector loads at every offset (written lane by
    /// lane, the overlapping loads were merged into long shuffle chains), the same operations.
    fn along_row_lanes<const S: usize>(c: &[Self], hmax: &mut [Self], hsum: &mut [Self]) -> Self;
    /// [`Real::round_half_away`] of every lane, as vector operations (the same operations lane
    /// by lane: truncate, exact remainder, round up at `>= 0.5`, saturate, sign).
    fn round_lanes(v: &[Self; LANES]) -> [i32; LANES];
}

macro_rules! impl_unit {
    ($t:ty, $m:ty, $bits:expr) => {
        impl Unit for $t {
            const U: f64 = 1.0 / (1u64 << $bits) as f64;
            #[inline(always)]
            fn lt_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                use std::simd::prelude::*;
                Simd::from_array(*a)
                    .simd_lt(Simd::from_array(*b))
                    .to_bitmask() as u32
            }
            #[inline(always)]
            fn gt_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                use std::simd::prelude::*;
                Simd::from_array(*a)
                    .simd_gt(Simd::from_array(*b))
                    .to_bitmask() as u32
            }
            #[inline(always)]
            fn eq_bits(a: &[Self; LANES], b: &[Self; LANES]) -> u32 {
                use std::simd::prelude::*;
                Simd::from_array(*a)
                    .simd_eq(Simd::from_array(*b))
                    .to_bitmask() as u32
            }
            #[inline(always)]
            fn select_bits(bits: u32, yes: &[Self; LANES], no: &[Self; LANES]) -> [Self; LANES] {
                use std::simd::prelude::*;
                Mask::<$m, LANES>::from_bitmask(bits as u64)
                    .select(Simd::from_array(*yes), Simd::from_array(*no))
                    .to_array()
            }
            #[inline(always)]
            fn store_lanes(dst: &mut [Self], v: &[Self; LANES]) {
                use std::simd::prelude::*;
                Simd::from_array(*v).copy_to_slice(&mut dst[..LANES]);
            }
            #[inline(always)]
            fn along_row_lanes<const S: usize>(
                c: &[Self],
                hmax: &mut [Self],
                hsum: &mut [Self],
            ) -> Self {
                use std::simd::prelude::*;
                type V = Simd<$t, LANES>;
                // `max_of` lane by lane: `b` where `b > a`, else `a` (one `vmaxpd`).
                let max_of = |a: V, b: V| b.simd_gt(a).select(b, a);
                let w = hmax.len();
                // Cut to the lengths the loop reads, so that its condition (`w` is a
                // multiple of LANES) proves every load and store in bounds.
                let c = &c[..w + S - 1];
                let hsum = if S >= SEP_MIN { &mut hsum[..w] } else { hsum };
                let mut big = V::splat(0.0);
                let mut x0 = 0;
                while x0 + LANES <= w {
                    let v = V::from_slice(&c[x0..x0 + LANES]);
                    big = max_of(max_of(big, v), -v);
                    let (mut m, mut s) = (v, v);
                    for dx in 1..S {
                        let u = V::from_slice(&c[x0 + dx..x0 + dx + LANES]);
                        m = max_of(m, u);
                        s += u;
                    }
                    m.copy_to_slice(&mut hmax[x0..x0 + LANES]);
                    if S >= SEP_MIN {
                        s.copy_to_slice(&mut hsum[x0..x0 + LANES]);
                    }
                    x0 += LANES;
                }
                // The chunks started at indices 0 .. w; the last 2r values of the padded row
                // follow.
                let tail = c[w..]
                    .iter()
                    .fold(0.0, |acc: $t, &v| acc.max_of(v).max_of(-v));
                big.to_array().iter().fold(tail, |acc, &v| acc.max_of(v))
            }
            #[inline(always)]
            fn round_lanes(v: &[Self; LANES]) -> [i32; LANES] {
                use std::simd::prelude::*;
                let arr = *v;
                let v = Simd::<$t, LANES>::from_array(arr);
                let a = v.abs();
                // Beyond i32's range (or NaN) the saturating cast is not one instruction:
                // the scalar definition, lane by lane (never for corrected values).
                if !a.simd_lt(Simd::splat(2147483648.0)).all() {
                    return arr.map(|x| x.round_half_away());
                }
                // SAFETY: every lane is finite and below 2^31 in magnitude, so it truncates to
                // an i64 exactly as the saturating cast would.
                let t: Simd<i64, LANES> = unsafe { a.to_int_unchecked() };
                let frac = a - t.cast::<$t>();
                let r = frac.simd_ge(Simd::splat(0.5)).select(t + Simd::splat(1), t);
                let max = Simd::splat(i32::MAX as i64);
                let r: Simd<i32, LANES> = r.simd_gt(max).select(max, r).cast();
                v.simd_lt(Simd::splat(0.0))
                    .cast::<i32>()
                    .select(-r, r)
                    .to_array()
            }
        }
    };
}
impl_unit!(f32, i32, 24);
impl_unit!(f64, i64, 53);

/// Smallest window side whose window sums go through the separable sum and its margin test
/// first (the exact row-major sum only where the margin cannot decide).
const SEP_MIN: usize = 3;

/// Fixed per-call parameters of the band pass.
#[derive(Clone, Copy)]
struct Setup<R> {
    rows: usize,
    cols: usize,
    /// `cols` rounded up to a multiple of [`LANES`].
    w: usize,
    /// Length of one padded row of `c`: `w + 2r`; column `x` is at `x + r`.
    stride: usize,
    n_sigma: R,
    live: bool,
    /// Every baseline is `+0` (F64, F32Naive), so `x - base == x` and `base` need not be read.
    base_zero: bool,
}

/// Working memory of one band of rows `y0 .. y1`. Aligned (and so padded) to 128 bytes: bands
/// sit side by side in a `Vec`, and one band's record pushes (its `out` length) must not share a
/// cache line (or an adjacent-line prefetch pair) with another thread's band.
#[repr(align(128))]
struct Band<R> {
    y0: usize,
    y1: usize,
    /// Ring of `side` padded rows of `c` (row `y` in slot `y % side`).
    c: Vec<R>,
    /// Ring of the along-row window maxima and sums: `hmax[x] = max c[x-r ..= x+r]`.
    hmax: Vec<R>,
    hsum: Vec<R>,
    /// Per ring slot: the largest `|c|` of the row (at least [`M_FLOOR`]).
    mrow: Vec<R>,
    /// Pedestal sums `a` of the `r` rows above and below the band, as they were before the frame
    /// (their owners update them during the pass).
    halo_top: Vec<R>,
    halo_bottom: Vec<R>,
    /// Packed records of the band's centres, in row-major order.
    out: Vec<u32>,
}

impl<R: Unit> Band<R> {
    /// A band of rows `y0 .. y1` for windows of side `S`, with its working memory (allocated by
    /// the thread that runs the band: it then comes from that thread's allocator arena and
    /// never shares a cache line with another band's).
    fn new<const S: usize>(y0: usize, y1: usize, setup: &Setup<R>) -> Self {
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

fn run<R: Unit, const S: usize>(
    config: &FinderConfig,
    pool: Option<&rayon::ThreadPool>,
    maps: &mut PixelMaps<R>,
    frames: Frames<'_>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    let (rows, cols) = (config.rows, config.cols);
    let r = S / 2;
    let w = cols.div_ceil(LANES) * LANES;
    let setup = Setup {
        rows,
        cols,
        w,
        stride: w + 2 * r,
        n_sigma: R::from_f64(config.n_sigma),
        live: config.threshold == ThresholdMode::Live,
        base_zero: maps.base.iter().all(|b| b.to_f64().to_bits() == 0),
    };
    // Frozen thresholds do not change during the call: computed once.
    let frozen_t: Vec<R> = if setup.live {
        Vec::new()
    } else {
        maps.frozen_std
            .iter()
            .map(|&s| threshold(setup.n_sigma, s))
            .collect()
    };
    let threads = pool.map_or(1, |p| p.current_num_threads());
    let (n_bands, band_rows) = band_split(rows, r, threads);
    let isa = Isa::detect();
    if let (Some(pool), true) = (pool, n_bands > 1) {
        let job = Job {
            isa,
            setup: &setup,
            frozen_t: &frozen_t,
            frames,
            size: config.size,
        };
        return pipeline::run_bands::<R, S>(pool, &job, n_bands, band_rows, maps, visit);
    }
    let band = &mut Band::new::<S>(0, rows, &setup);
    for i in 0..frames.len() {
        band_pass::<R, S>(isa, &setup, band, &frozen_t, frames.frame(i), maps);
        visit(FrameClusters::new(i, config.size, &band.out))?;
    }
    Ok(())
}

/// Bands and rows per band for `threads` threads: every band but the last has at least `r`
/// rows, so a band's halo (`r` rows above and below) lies in its two neighbours.
fn band_split(rows: usize, r: usize, threads: usize) -> (usize, usize) {
    let n = threads.min(rows / r.max(1)).max(1);
    let band_rows = rows.div_ceil(n);
    (rows.div_ceil(band_rows), band_rows)
}

/// What every band of a call shares.
struct Job<'a, R> {
    isa: Isa,
    setup: &'a Setup<R>,
    frozen_t: &'a [R],
    frames: Frames<'a>,
    size: crate::cluster::ClusterSize,
}

/// The pedestal state a band may update: sums `a`, `b` of its own rows (starting at its first
/// row), and everyone's baselines and `1/N`.
struct BandMaps<'a, R> {
    a: &'a mut [R],
    b: &'a mut [R],
    base: &'a [R],
    inv: R,
}

/// The instruction sets the hot loop is compiled for; chosen once per call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            use std::is_x86_feature_detected as has;
            if has!("avx512f")
                && has!("avx512vl")
                && has!("avx512dq")
                && has!("avx512bw")
                && has!("avx2")
                && has!("fma")
            {
                return Isa::Avx512;
            }
            if has!("avx2") && has!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// Runs one band over the whole pedestal (one band per frame: no halo).
fn band_pass<R: Unit, const S: usize>(
    isa: Isa,
    setup: &Setup<R>,
    band: &mut Band<R>,
    frozen_t: &[R],
    frame: &[u16],
    maps: &mut PixelMaps<R>,
) {
    let mut own = BandMaps {
        a: &mut maps.a,
        b: &mut maps.b,
        base: &maps.base,
        inv: maps.inv,
    };
    band_pass_split::<R, S>(isa, setup, band, frozen_t, frame, &mut own);
}

/// Dispatches to the build of [`band_impl`] for `isa`. Every build performs the same IEEE
/// operations; only the instructions differ.
fn band_pass_split<R: Unit, const S: usize>(
    isa: Isa,
    setup: &Setup<R>,
    band: &mut Band<R>,
    frozen_t: &[R],
    frame: &[u16],
    own: &mut BandMaps<'_, R>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,bmi1,bmi2,popcnt")]
        unsafe fn avx512<R: Unit, const S: usize>(
            setup: &Setup<R>,
            band: &mut Band<R>,
            frozen_t: &[R],
            frame: &[u16],
            own: &mut BandMaps<'_, R>,
        ) {
            band_impl::<R, S>(setup, band, frozen_t, frame, own)
        }
        #[target_feature(enable = "avx2,fma,bmi1,bmi2,popcnt")]
        unsafe fn avx2<R: Unit, const S: usize>(
            setup: &Setup<R>,
            band: &mut Band<R>,
            frozen_t: &[R],
            frame: &[u16],
            own: &mut BandMaps<'_, R>,
        ) {
            band_impl::<R, S>(setup, band, frozen_t, frame, own)
        }
        match isa {
            // SAFETY: `Isa::detect` chose these only when the CPU reports the features.
            Isa::Avx512 => return unsafe { avx512::<R, S>(setup, band, frozen_t, frame, own) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2::<R, S>(setup, band, frozen_t, frame, own) },
            Isa::Portable => {}
        }
    }
    let _ = isa;
    band_impl::<R, S>(setup, band, frozen_t, frame, own)
}

/// Lower bound used for a row's largest `|c|` in [`sum_margin`], so that the margin never
/// underflows (a larger bound is always safe: it only sends more pixels to the exact sum).
const M_FLOOR: f64 = 1.0 / (1u64 << 20) as f64;

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
fn sum_margin<R: Unit, const S: usize>(m: R) -> R {
    let c = R::from_f64(4.0 * (S * S * S * S) as f64 * R::U);
    c * m
}

/// The band pass: prepare, classify and update every row of the band (module docs).
#[inline(always)]
fn band_impl<R: Unit, const S: usize>(
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
            band.mrow[slot] = along_row::<R, S>(c_row, hmax, hsum).max_of(m_floor);
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
                classify_full::<R, S, true>(&cut, a_cut, b_cut, &mut centres[..full]);
            } else {
                classify_full::<R, S, false>(&cut, a_cut, b_cut, &mut centres[..full]);
            }
        }
        if full * LANES < cols {
            let x0 = full * LANES;
            centres[full] = if live {
                classify_chunk::<R, S, false, true>(&row, a_row, b_row, x0, cols - x0)
            } else {
                classify_chunk::<R, S, false, false>(&row, a_row, b_row, x0, cols - x0)
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

/// What [`classify_chunk`] reads of the current row `y` and its window.
#[derive(Clone, Copy)]
struct RowCtx<'a, R, const S: usize> {
    c_rows: &'a [&'a [R]; S],
    /// Row `y` of `c` from its column 0 (`c_rows[r]` without the left padding).
    c_mid: &'a [R],
    hmax_rows: &'a [&'a [R]; S],
    hsum_rows: &'a [&'a [R]; S],
    frame_row: &'a [u16],
    base_row: &'a [R],
    t_row: &'a [R],
    margin: R,
    side: R,
    inv: R,
    n_sigma: R,
    base_zero: bool,
}

/// [`classify_chunk`] over the whole chunks of a row whose slices are all cut to
/// `centres.len() * LANES` values (so the loop condition proves every chunk in bounds).
/// `LIVE`: thresholds from the current sums (else `row.t_row`).
#[inline(always)]
fn classify_full<R: Unit, const S: usize, const LIVE: bool>(
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
        *centre = classify_chunk::<R, S, true, LIVE>(row, a_row, b_row, x0, LANES);
        x0 += LANES;
    }
}

/// Classifies pixels `x0 .. x0 + n` of the row (steps 2 and 3 of the module docs), updates the
/// pedestal of its quiet pixels, and returns the bits of its centres. `FULL`: `n == LANES`.
#[inline(always)]
fn classify_chunk<R: Unit, const S: usize, const FULL: bool, const LIVE: bool>(
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
    let neg = R::lt_bits(&cp, &neg_t);
    let mut hot = R::gt_bits(&max, &t);
    let eq = R::eq_bits(&cp, &max);
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
            let above = R::gt_bits(&d, &hi);
            let below = R::lt_bits(&d, &lo);
            if need & !(above | below) == 0 {
                hot |= need & above;
                decided = true;
            }
        }
        if !decided {
            let total = exact_sums::<R, S>(c_rows, x0);
            hot |= need & R::gt_bits(&total, &k);
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
        let na = R::select_bits(pedestal, &pa, &a);
        let nb = R::select_bits(pedestal, &pb, &b);
        store(a_row, x0, n, &na);
        store(b_row, x0, n, &nb);
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
fn store<R: Unit>(s: &mut [R], x0: usize, n: usize, v: &[R; LANES]) {
    if n == LANES {
        R::store_lanes(&mut s[x0..], v);
    } else {
        s[x0..x0 + n].copy_from_slice(&v[..n]);
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
fn along_row<R: Unit, const S: usize>(c: &[R], hmax: &mut [R], hsum: &mut [R]) -> R {
    R::along_row_lanes::<S>(c, hmax, hsum)
}

/// The exact window sums of pixels `x0 .. x0 + LANES` of the row whose window rows are `rows`:
/// for each lane, `0 + v_1 + v_2 + ...` over the window in row-major order from the top-left.
#[inline(always)]
fn exact_sums<R: Real, const S: usize>(rows: &[&[R]; S], x0: usize) -> [R; LANES] {
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

/// Appends the packed record of the centre at column `x` of row `y`: the window's values,
/// rounded half away from zero, gathered first so that the rounding runs over all of them at
/// once (it vectorises; the rounding of each value is the shared scalar definition).
#[inline(always)]
fn write_record<R: Unit, const S: usize>(out: &mut Vec<u32>, rows: &[&[R]; S], x: usize, y: usize) {
    // The gathered values padded to whole chunks of LANES: a scratch array sized for the
    // window (zeroing one sized for 9x9 cost more than the rest of a 3x3 record).
    match S {
        0..=4 => record_n::<R, S, LANES>(out, rows, x, y),
        5 => record_n::<R, S, { 2 * LANES }>(out, rows, x, y),
        6..=8 => record_n::<R, S, { 4 * LANES }>(out, rows, x, y),
        _ => record_n::<R, S, { 6 * LANES }>(out, rows, x, y),
    }
}

/// [`write_record`] with `N >= S * S` values of scratch (a multiple of [`LANES`]).
#[inline(always)]
fn record_n<R: Unit, const S: usize, const N: usize>(
    out: &mut Vec<u32>,
    rows: &[&[R]; S],
    x: usize,
    y: usize,
) {
    let mut vals = [R::ZERO; N];
    for (dy, row) in rows.iter().enumerate() {
        vals[dy * S..dy * S + S].copy_from_slice(&row[x..x + S]);
    }
    out.reserve(1 + S * S);
    out.push(pack_xy(x as u16, y as u16));
    for (i, chunk) in vals.chunks_exact(LANES).enumerate() {
        let n = (S * S - i * LANES).min(LANES);
        let r = R::round_lanes(chunk.try_into().expect("LANES"));
        out.extend(r[..n].iter().map(|&v| v as u32));
    }
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

    /// Every build the CPU can run gives the same result (the portable one included).
    #[test]
    fn builds_agree() {
        use crate::generate::{GenConfig, Generator};
        let (rows, cols) = (37, 53);
        let g = Generator::new(GenConfig::new(rows, cols, 3)).expect("generator");
        let dark = g.frames(0, 10, false);
        let data = g.frames(10, 4, true);
        let mut isas = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                isas.push(Isa::Avx2);
            }
            if Isa::detect() == Isa::Avx512 {
                isas.push(Isa::Avx512);
            }
        }
        let mut results = Vec::new();
        for &isa in &isas {
            let mut ped = Pedestal::new(rows, cols, 10, crate::Precision::F32).expect("pedestal");
            ped.push_frames(Frames::new(&dark, 10, rows, cols).expect("frames"))
                .expect("push");
            let Ok(ReadyState::F32(maps)) = ped.ready_mut() else {
                panic!("not ready")
            };
            let setup = Setup {
                rows,
                cols,
                w: cols.div_ceil(LANES) * LANES,
                stride: cols.div_ceil(LANES) * LANES + 8,
                n_sigma: 5.0f32,
                live: true,
                base_zero: false,
            };
            let mut band = Band {
                y0: 0,
                y1: rows,
                c: vec![0.0; 9 * setup.stride],
                hmax: vec![0.0; 9 * setup.w],
                hsum: vec![0.0; 9 * setup.w],
                mrow: vec![0.0; 9],
                halo_top: Vec::new(),
                halo_bottom: Vec::new(),
                out: Vec::new(),
            };
            let mut words = Vec::new();
            for f in data.chunks(rows * cols) {
                band_pass::<f32, 9>(isa, &setup, &mut band, &[], f, maps);
                words.extend_from_slice(&band.out);
            }
            results.push((words, maps.clone()));
        }
        assert!(
            results.iter().all(|r| *r == results[0]),
            "builds differ: {isas:?}"
        );
        assert!(!results[0].0.is_empty());
    }
}
