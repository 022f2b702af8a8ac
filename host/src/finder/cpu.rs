//! The CPU reference finder: exact semantics, SIMD across neighbouring pixels, rayon over rows.
//!
//! Each frame runs in three phases, each parallel over bands of rows:
//! 1. *prepare*: corrected value `c` of every pixel into a zero-padded plane, and its threshold;
//! 2. *classify*: for runs of [`LANES`] neighbouring pixels at once, the window sums and maxima
//!    are accumulated lane-wise, each lane adding its window in row-major order from the
//!    top-left, so every pixel's sum is rounded exactly as the definition says; then each
//!    pixel is classified and centres are written as packed records;
//! 3. *update*: quiet pixels push their raw value into the pedestal, after the whole frame.
//!
//! Zero padding is exact: an out-of-frame neighbour adds `+0` to a sum (no change) and a `0`
//! in a maximum can only matter when every in-frame value is negative, where the pixel is
//! classified "pedestal" either way because thresholds are never negative.
//! Bands are concatenated in order, so results do not depend on the thread count.

use cluda_gpu::classify::{PixelClass, classify, threshold};
use cluda_gpu::pedestal::{corrected, mean_offset, std_dev};
use cluda_gpu::real::Real;
use rayon::prelude::*;

use crate::cluster::{FrameClusters, pack_xy};
use crate::config::{FinderConfig, ThresholdMode};
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::frames::Frames;
use crate::pedestal::{Pedestal, PixelMaps, ReadyState};

/// Neighbouring pixels whose windows are accumulated together (the SIMD width of phase 2).
pub const LANES: usize = 16;

/// The CPU reference finder.
pub struct CpuFinder {
    config: FinderConfig,
    pedestal: Pedestal,
    pool: rayon::ThreadPool,
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
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("cluda-cpu-{i}"))
            .build()
            .map_err(|e| Error::param("threads", format!("cannot start {threads} threads: {e}")))?;
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
        self.pool.install(|| pedestal.push_frames(frames))
    }

    fn is_ready(&self) -> bool {
        self.pedestal.is_ready()
    }

    fn pedestal(&self) -> Result<Pedestal> {
        Ok(self.pedestal.clone())
    }

    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()> {
        let c = &self.config;
        if (pedestal.rows(), pedestal.cols()) != (c.rows, c.cols)
            || pedestal.window() != c.pedestal_frames
            || pedestal.precision() != c.precision
        {
            return Err(Error::shape(
                "pedestal",
                format!(
                    "{} x {}, N = {}, {}",
                    c.rows,
                    c.cols,
                    c.pedestal_frames,
                    c.precision.name()
                ),
                format!(
                    "{} x {}, N = {}, {}",
                    pedestal.rows(),
                    pedestal.cols(),
                    pedestal.window(),
                    pedestal.precision().name()
                ),
            ));
        }
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
        let pool = &self.pool;
        match self.pedestal.ready_mut()? {
            ReadyState::F64(m) => run_sized(config, pool, m, frames, visit),
            ReadyState::F32(m) => run_sized(config, pool, m, frames, visit),
        }
    }
}

fn run_sized<R: Real>(
    config: &FinderConfig,
    pool: &rayon::ThreadPool,
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

/// Per-call working memory: the padded plane of corrected values, thresholds, the pedestal
/// update mask and one record buffer per band.
struct Scratch<R> {
    c: Vec<R>,
    t: Vec<R>,
    mask: Vec<u8>,
    bands: Vec<Vec<u32>>,
    frame_words: Vec<u32>,
}

/// Geometry of the padded plane.
#[derive(Clone, Copy)]
struct Plane {
    cols: usize,
    r: usize,
    stride: usize,
}

impl Plane {
    #[inline(always)]
    fn at(&self, x: usize, y: usize) -> usize {
        (y + self.r) * self.stride + x + self.r
    }
}

fn run<R: Real, const S: usize>(
    config: &FinderConfig,
    pool: &rayon::ThreadPool,
    maps: &mut PixelMaps<R>,
    frames: Frames<'_>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    let (rows, cols) = (config.rows, config.cols);
    let r = S / 2;
    let plane = Plane {
        cols,
        r,
        stride: cols + 2 * r + LANES,
    };
    let threads = pool.current_num_threads();
    let band_rows = if threads <= 1 {
        rows
    } else {
        rows.div_ceil(threads * 4).max(1)
    };
    let n_bands = rows.div_ceil(band_rows);
    let mut s = Scratch::<R> {
        c: vec![R::ZERO; (rows + 2 * r) * plane.stride],
        t: vec![R::ZERO; rows * cols],
        mask: vec![0; rows * cols],
        bands: vec![Vec::new(); n_bands],
        frame_words: Vec::new(),
    };
    let n_sigma = R::from_f64(config.n_sigma);
    let live = config.threshold == ThresholdMode::Live;
    let fma = has_fast_fma();
    for i in 0..frames.len() {
        let frame = frames.frame(i);
        pool.install(|| {
            let maps_ref = &*maps;
            let c_rows = s.c[r * plane.stride..].par_chunks_mut(plane.stride * band_rows);
            let t_rows = s.t.par_chunks_mut(cols * band_rows);
            c_rows.zip(t_rows).enumerate().for_each(|(band, (c, t))| {
                let y0 = band * band_rows;
                let ny = t.len() / cols;
                prepare_band(fma, maps_ref, frame, plane, y0, ny, n_sigma, live, c, t);
            });
            let (c, t) = (&s.c[..], &s.t[..]);
            s.mask
                .par_chunks_mut(cols * band_rows)
                .zip(s.bands.par_iter_mut())
                .enumerate()
                .for_each(|(band, (mask, out))| {
                    out.clear();
                    let y0 = band * band_rows;
                    classify_band::<R, S>(fma, c, t, plane, y0, mask.len() / cols, mask, out);
                });
        });
        s.frame_words.clear();
        for b in &s.bands {
            s.frame_words.extend_from_slice(b);
        }
        pool.install(|| maps.push_masked(frame, Some(&s.mask)));
        visit(FrameClusters::new(i, config.size, &s.frame_words))?;
    }
    Ok(())
}

/// Whether this CPU has AVX2 and FMA, so the multiversioned hot loops can use them (the fma of
/// the variance is then one instruction instead of a library call).
fn has_fast_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Defines `$name` as a dispatcher to an AVX2+FMA build of `$imp` (when `fast` is true) or to
/// the portable build. Both builds perform identical IEEE operations.
macro_rules! multiversion {
    (fn $name:ident<$($g:ident $(: $b:path)?),* $(; const $cg:ident: usize)?>($($a:ident: $t:ty),*) => $imp:ident) => {
        #[allow(clippy::too_many_arguments)]
        fn $name<$($g $(: $b)?),* $(, const $cg: usize)?>(fast: bool, $($a: $t),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn avx2<$($g $(: $b)?),* $(, const $cg: usize)?>($($a: $t),*) {
                    $imp::<$($g),* $(, $cg)?>($($a),*)
                }
                if fast {
                    // SAFETY: `fast` is true only when the CPU reports AVX2 and FMA.
                    return unsafe { avx2::<$($g),* $(, $cg)?>($($a),*) };
                }
            }
            let _ = fast;
            $imp::<$($g),* $(, $cg)?>($($a),*)
        }
    };
}

multiversion!(fn prepare_band<R: Real>(maps: &PixelMaps<R>, frame: &[u16], plane: Plane, y0: usize, ny: usize, n_sigma: R, live: bool, c: &mut [R], t: &mut [R]) => prepare_band_impl);
multiversion!(fn classify_band<R: Real; const S: usize>(c: &[R], t: &[R], plane: Plane, y0: usize, ny: usize, mask: &mut [u8], out: &mut Vec<u32>) => classify_band_impl);

/// Phase 1 for rows `y0 .. y0+ny`: `c` is this band's part of the padded plane (starting at
/// its first row), `t` its thresholds.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn prepare_band_impl<R: Real>(
    maps: &PixelMaps<R>,
    frame: &[u16],
    plane: Plane,
    y0: usize,
    ny: usize,
    n_sigma: R,
    live: bool,
    c: &mut [R],
    t: &mut [R],
) {
    let (cols, inv) = (plane.cols, maps.inv);
    for yy in 0..ny {
        let p0 = (y0 + yy) * cols;
        let crow = &mut c[yy * plane.stride + plane.r..][..cols];
        let trow = &mut t[yy * cols..][..cols];
        let (x, a, b, base) = (
            &frame[p0..p0 + cols],
            &maps.a[p0..p0 + cols],
            &maps.b[p0..p0 + cols],
            &maps.base[p0..p0 + cols],
        );
        for i in 0..cols {
            crow[i] = corrected(x[i], base[i], mean_offset(a[i], inv));
        }
        if live {
            for i in 0..cols {
                trow[i] = threshold(n_sigma, std_dev(a[i], b[i], inv));
            }
        } else {
            let fs = &maps.frozen_std[p0..p0 + cols];
            for i in 0..cols {
                trow[i] = threshold(n_sigma, fs[i]);
            }
        }
    }
}

/// Phase 2 for rows `y0 .. y0+ny`: classifies every pixel, appends centres to `out` in
/// row-major order and sets `mask` (this band's part) to 1 for pixels that update the pedestal.
#[inline(always)]
fn classify_band_impl<R: Real, const S: usize>(
    c: &[R],
    t: &[R],
    plane: Plane,
    y0: usize,
    ny: usize,
    mask: &mut [u8],
    out: &mut Vec<u32>,
) {
    let cols = plane.cols;
    let side = R::from_u16(S as u16);
    for yy in 0..ny {
        let y = y0 + yy;
        let mut x0 = 0;
        while x0 < cols {
            let mut sum = [R::ZERO; LANES];
            let first = plane.at(x0, y) - plane.r * plane.stride - plane.r;
            let mut max: [R; LANES] = c[first..first + LANES].try_into().expect("LANES values");
            for dy in 0..S {
                let row = first + dy * plane.stride;
                for dx in 0..S {
                    let v = &c[row + dx..row + dx + LANES];
                    for l in 0..LANES {
                        sum[l] = sum[l] + v[l];
                        max[l] = max[l].max_of(v[l]);
                    }
                }
            }
            for l in 0..LANES.min(cols - x0) {
                let x = x0 + l;
                let p = y * cols + x;
                let cp = c[plane.at(x, y)];
                let class = classify(cp, t[p], sum[l], max[l], side);
                mask[yy * cols + x] = (class == PixelClass::Pedestal) as u8;
                if class == PixelClass::Centre {
                    out.push(pack_xy(x as u16, y as u16));
                    let first = plane.at(x, y) - plane.r * plane.stride - plane.r;
                    for dy in 0..S {
                        let row = first + dy * plane.stride;
                        out.extend(c[row..row + S].iter().map(|v| v.round_half_away() as u32));
                    }
                }
            }
            x0 += LANES;
        }
    }
}
