//! The generator: fixed per-pixel maps, and frame `k` made from them and `k` alone.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson, StandardNormal};
use rayon::prelude::*;
use std::cell::RefCell;

use super::config::{GenConfig, TruePhoton};
use super::ziggurat;
use crate::error::{Error, Result};

thread_local! {
    /// Each thread's `f32` frame that [`Generator::frame_into`] builds a frame in (kept, so
    /// that a frame costs no allocation: a fresh 640 KB buffer per 400x400 frame was a
    /// `mmap`, its page faults and a `munmap` that interrupts every core the process runs on).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Number of sub-pixel bins of the charge-sharing table.
pub(super) const BINS: usize = 256;

/// A frame generator with its fixed per-pixel maps.
#[derive(Clone, Debug)]
pub struct Generator {
    pub(super) config: GenConfig,
    pub(super) base: Vec<f32>,
    pub(super) sigma: Vec<f32>,
    /// Charge fractions on the pixel before, at and after the one hit, by sub-pixel bin.
    pub(super) share: Vec<[f32; 3]>,
    /// The law of the photon count per frame; `None` when frames get no photons.
    photons: Option<Poisson<f64>>,
}

impl Generator {
    /// Builds the per-pixel maps; errors on an empty frame or nonsensical parameters.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the field: frames without pixels, a negative or
    /// non-finite photon rate, photon ADU or baseline, or a cloud sigma that is not finite and > 0;
    /// [`Error::TooLarge`] when the maps (8 bytes a pixel) and a frame's working copy (4 more)
    /// do not fit in the available memory.
    pub fn new(config: GenConfig) -> Result<Self> {
        Self::with_cancel(config, &|| Ok(()))
    }

    /// As [`Generator::new`], calling `cancel` before every row (a 65536 x 65536 frame's maps
    /// take minutes): its error ends the work at once.
    ///
    /// # Errors
    /// As [`Generator::new`]; `cancel`'s error.
    pub fn with_cancel(
        config: GenConfig,
        cancel: &(dyn Fn() -> Result<()> + Sync),
    ) -> Result<Self> {
        let c = &config;
        crate::params::frame_pixels(c.rows, c.cols)?;
        for (name, v) in [
            ("photons", c.photons_per_frame),
            ("photon-adu", c.photon_adu),
            ("baseline", c.baseline),
        ] {
            crate::params::finite_non_negative(name, v)?;
        }
        c.illumination.check()?;
        if !(c.cloud_sigma.is_finite() && c.cloud_sigma > 0.0) {
            return Err(Error::param(
                "cloud-sigma",
                format!("must be finite and > 0, got {}", c.cloud_sigma),
            ));
        }
        let mut rng = SmallRng::seed_from_u64(c.seed ^ 0x6d6f_656e_6368_0001);
        let n = c.rows.checked_mul(c.cols).ok_or_else(|| {
            Error::param(
                "rows/cols",
                format!("{} x {} pixels overflow", c.rows, c.cols),
            )
        })?;
        let what = || format!("the generator's maps of {} x {} pixels", c.rows, c.cols);
        crate::memory::check(what, (n as u64).saturating_mul(12))?;
        let mut base: Vec<f32> = crate::memory::with_capacity(what, n)?;
        let mut sigma: Vec<f32> = crate::memory::with_capacity(what, n)?;
        for y in 0..c.rows {
            // A row of 65536 pixels takes a few milliseconds.
            cancel()?;
            for x in 0..c.cols {
                let (fx, fy) = (x as f64, y as f64);
                // Smooth structure plus a per-column (readout) offset and pixel scatter.
                let smooth = 120.0 * (fx / 37.0).sin() * (fy / 53.0).cos()
                    + 0.2 * (fy - c.rows as f64 / 2.0);
                let column = 25.0 * ((x * 7919 % 97) as f64 / 97.0 - 0.5);
                let scatter: f64 = rng.sample::<f64, _>(StandardNormal) * 30.0;
                base.push((c.baseline + smooth + column + scatter) as f32);
                let s = if rng.random::<f64>() < c.noisy_fraction {
                    c.noisy_sigma
                } else {
                    c.noise.0 + (c.noise.1 - c.noise.0) * rng.random::<f64>()
                };
                sigma.push(s as f32);
            }
        }
        let share = (0..BINS)
            .map(|i| {
                let s = (i as f64 + 0.5) / BINS as f64;
                let k = std::f64::consts::FRAC_1_SQRT_2 / c.cloud_sigma;
                let lo = normal_cdf(-s * k);
                let hi = normal_cdf((1.0 - s) * k);
                [lo as f32, (hi - lo) as f32, (1.0 - hi) as f32]
            })
            .collect();
        // As the plain version: no photons unless the rate is positive and the law exists.
        let photons = if c.photons_per_frame > 0.0 {
            Poisson::new(c.photons_per_frame).ok()
        } else {
            None
        };
        Ok(Self {
            config,
            base,
            sigma,
            share,
            photons,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GenConfig {
        &self.config
    }

    /// Writes frame `k` into `out` (`rows * cols` samples); `photons: false` gives a dark
    /// (pedestal) frame.
    pub fn frame_into(&self, k: u64, photons: bool, out: &mut [u16]) {
        // Without a cancel function the only error is none at all.
        let _ = self.frame_into_with_cancel(k, photons, out, &|| Ok(()));
    }

    /// As [`Generator::frame_into`], calling `cancel` every 2^20 pixels (a 65536 x 65536
    /// frame takes minutes): its error ends the frame at once (`out` is then partly written).
    /// The frame made is the same as [`Generator::frame_into`]'s.
    ///
    /// # Errors
    /// `cancel`'s error.
    pub fn frame_into_with_cancel(
        &self,
        k: u64,
        photons: bool,
        out: &mut [u16],
        cancel: &(dyn Fn() -> Result<()> + Sync),
    ) -> Result<()> {
        SCRATCH.with_borrow_mut(|value| self.frame_with(k, photons, out, value, None, cancel))
    }

    /// As [`Generator::frame_into`] (the same frame), appending to `truth` every photon the
    /// frame holds, in the order they were added, with `frame` = `k`.
    pub fn frame_with_truth(
        &self,
        k: u64,
        photons: bool,
        out: &mut [u16],
        truth: &mut Vec<TruePhoton>,
    ) {
        SCRATCH.with_borrow_mut(|value| {
            // Without a cancel function the only error is none at all.
            let _ = self.frame_with(k, photons, out, value, Some(truth), &|| Ok(()));
        });
    }

    /// [`Generator::frame_into_with_cancel`] with `value` as the frame's `f32` scratch. The
    /// same draws in the same order and the same `f32` operations as the plain version
    /// (`reference.rs`), faster: the normal's common case inline ([`ziggurat`]), one pass for
    /// baseline, drift and noise, the Poisson law built once, the photons' bounds checked once
    /// per photon.
    pub(super) fn frame_with(
        &self,
        k: u64,
        photons: bool,
        out: &mut [u16],
        value: &mut Vec<f32>,
        mut truth: Option<&mut Vec<TruePhoton>>,
        cancel: &(dyn Fn() -> Result<()> + Sync),
    ) -> Result<()> {
        const STEP: usize = 1 << 20;
        let c = &self.config;
        let mut rng = SmallRng::seed_from_u64(splitmix(c.seed ^ splitmix(k.wrapping_add(1))));
        let drift = c.drift_amplitude * (k as f64 * std::f64::consts::TAU / c.drift_period).sin();
        // Every element is written below; resizing a thread's scratch is a no-op after its
        // first frame of this size.
        value.resize(self.base.len(), 0.0);
        for from in (0..value.len()).step_by(STEP) {
            cancel()?;
            let to = (from + STEP).min(value.len());
            rng = self.noise(rng, drift as f32, from, &mut value[from..to]);
        }
        if let (true, Some(poisson)) = (photons, &self.photons) {
            let count = poisson.sample(&mut rng) as usize;
            for _ in 0..count {
                let hit = self.add_photon(&mut rng, value);
                if let (Some(t), Some(mut p)) = (truth.as_deref_mut(), hit) {
                    p.frame = k as i64;
                    t.push(p);
                }
            }
        }
        for (o, &v) in out.iter_mut().zip(value.iter()) {
            *o = round_to_u16(v);
        }
        Ok(())
    }

    /// As [`Generator::frames`], with the buffer's memory checked first: an
    /// [`Error::TooLarge`] naming the frames instead of an abort when it is not there.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for more frames than the available memory holds.
    pub fn try_frames(&self, first: u64, count: usize, photons: bool) -> Result<Vec<u16>> {
        let (r, c) = (self.config.rows, self.config.cols);
        let n = r
            .checked_mul(c)
            .and_then(|p| p.checked_mul(count))
            .ok_or_else(|| Error::TooLarge {
                what: format!("{count} generated frames of {r} x {c}"),
                bytes: u64::MAX,
                available: crate::memory::available_bytes().unwrap_or(0),
            })?;
        let mut data: Vec<u16> =
            crate::memory::zeroed_vec(|| format!("{count} generated frames of {r} x {c}"), n)?;
        data.par_chunks_mut((r * c).max(1))
            .enumerate()
            .for_each(|(i, f)| self.frame_into(first + i as u64, photons, f));
        Ok(data)
    }

    /// Fills `value` (pixels `from ..`) with each pixel's baseline plus `drift` plus its
    /// noise, drawing the noise in pixel order from `rng`; returns the generator after the last draw. The state
    /// comes and goes by value so that it stays in registers through the loop.
    #[inline(never)]
    fn noise(&self, rng: SmallRng, drift: f32, from: usize, value: &mut [f32]) -> SmallRng {
        let mut rng = rng;
        let to = from + value.len();
        for ((v, &b), &s) in value
            .iter_mut()
            .zip(&self.base[from..to])
            .zip(&self.sigma[from..to])
        {
            *v = (b + drift) + s * ziggurat::standard_normal_f32(&mut rng);
        }
        rng
    }

    /// Draws one photon and, if the illumination lets it through, adds its charge to the
    /// pixels around where it hit (in the order of the plain version: rows, then columns,
    /// each from -1 to +1) and returns it (`frame` 0).
    #[inline]
    fn add_photon(&self, rng: &mut SmallRng, value: &mut [f32]) -> Option<TruePhoton> {
        let c = &self.config;
        let u = rng.random::<f64>() * c.cols as f64;
        let w = rng.random::<f64>() * c.rows as f64;
        let energy = c.photon_adu as f32 * (1.0 + 0.03 * ziggurat::standard_normal_f32(rng));
        let (px, py) = (u as usize, w as usize);
        // `u - px` is exact and below 1, so its product with 256 (exact) is below 256.
        let (bx, by) = (
            ((u - px as f64) * BINS as f64) as usize % BINS,
            ((w - py as f64) * BINS as f64) as usize % BINS,
        );
        // The cloud's centre: the charge fractions of bin `b` are those of a cloud centred
        // at `(b + 0.5) / 256` within the pixel (`share`), exact in f64.
        let truth = TruePhoton {
            frame: 0,
            x: px as f64 + (bx as f64 + 0.5) / BINS as f64,
            y: py as f64 + (by as f64 + 0.5) / BINS as f64,
            energy: energy as f64,
        };
        if !c.illumination.passes(c.rows, c.cols, truth.x, truth.y) {
            return None;
        }
        let sx = &self.share[bx];
        let sy = &self.share[by];
        if px >= 1 && py >= 1 && px + 1 < c.cols && py + 1 < c.rows {
            // Inside the frame: all nine pixels.
            for (dy, fy) in sy.iter().enumerate() {
                let row = &mut value[(py + dy - 1) * c.cols + px - 1..][..3];
                for (v, fx) in row.iter_mut().zip(sx) {
                    *v += energy * fx * fy;
                }
            }
            return Some(truth);
        }
        for (dy, fy) in sy.iter().enumerate() {
            let yy = py as isize + dy as isize - 1;
            if yy < 0 || yy >= c.rows as isize {
                continue;
            }
            for (dx, fx) in sx.iter().enumerate() {
                let xx = px as isize + dx as isize - 1;
                if xx < 0 || xx >= c.cols as isize {
                    continue;
                }
                value[yy as usize * c.cols + xx as usize] += energy * fx * fy;
            }
        }
        Some(truth)
    }

    /// Frames `first .. first + count` as one C-order buffer, generated in parallel.
    pub fn frames(&self, first: u64, count: usize, photons: bool) -> Vec<u16> {
        let n = self.config.rows * self.config.cols;
        let mut data = vec![0u16; count * n];
        data.par_chunks_mut(n.max(1))
            .enumerate()
            .for_each(|(i, f)| self.frame_into(first + i as u64, photons, f));
        data
    }
}

/// The standard normal CDF Phi(x / sqrt(2) * sqrt(2)) = 0.5 * erfc(-x) for the argument scaled
/// by 1/sqrt(2) already (Abramowitz & Stegun 7.1.26, error below 1.5e-7: plenty for test data).
fn normal_cdf(x_over_sqrt2: f64) -> f64 {
    let x = x_over_sqrt2;
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let erf = 1.0 - poly * (-x * x).exp();
    0.5 * (1.0 + if x < 0.0 { -erf } else { erf })
}

/// `v.round().clamp(0, 65535) as u16` (rounding half away from zero; NaN gives 0) in `f32` and
/// integer steps that vectorise on baseline x86-64 (no `roundf` call, no `f64`): the clamped
/// value `c` (NaN goes to 0 through `max`) is below 2^16, so its truncation `t` is exact, the
/// fraction `c - t` is exact (Sterbenz for `c >= 1`, `t = 0` below), and rounding half away
/// from zero adds 1 exactly when the fraction is at least 1/2.
#[inline]
pub(super) fn round_to_u16(v: f32) -> u16 {
    let c = v.max(0.0).min(u16::MAX as f32);
    // SAFETY: `c` is finite and in [0, 65535] (`max` maps NaN to 0), so it truncates to an
    // `i32` exactly; the unchecked form lets the loop vectorise (the saturating `as` did not).
    let t = unsafe { c.to_int_unchecked::<i32>() };
    let f = c - t as f32;
    (t + i32::from(f >= 0.5)) as u16
}

pub(super) fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
