//! Deterministic MOENCH-like test frames (docs/test-data.md).
//!
//! Per-pixel baseline near 4600 ADU with spatial structure, per-pixel Gaussian noise of
//! 35-55 ADU with a few noisy pixels, a slow global baseline drift, and Poisson photons (about
//! 2500 per 400x400 frame, about 400 ADU each) whose charge spreads over neighbours as a
//! Gaussian cloud. Frame `k` depends only on the configuration and `k`, so frames can be made
//! in parallel, in any order, and are the same on every machine.
//!
//! The generator knows the truth: [`Generator::frame_with_truth`] also returns every photon's
//! true position and charge ([`TruePhoton`]), and [`Illumination`] lets photons through a
//! mask only (a slanted knife edge, a grid of holes) instead of a flat field.

use std::cell::RefCell;

use bytemuck::{Pod, Zeroable};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson, StandardNormal};
use rayon::prelude::*;

use crate::error::{Error, Result};

#[cfg(test)]
mod reference;
mod source;
mod ziggurat;

pub use source::Generated;

thread_local! {
    /// Each thread's `f32` frame that [`Generator::frame_into`] builds a frame in (kept, so
    /// that a frame costs no allocation: a fresh 640 KB buffer per 400x400 frame was a
    /// `mmap`, its page faults and a `munmap` that interrupts every core the process runs on).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Parameters of the generator; [`GenConfig::new`] gives MOENCH-like defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GenConfig {
    /// Rows per frame.
    pub rows: usize,
    /// Columns per frame.
    pub cols: usize,
    /// Seed of everything random.
    pub seed: u64,
    /// Mean number of photons per frame (Poisson).
    pub photons_per_frame: f64,
    /// Mean charge of one photon, ADU.
    pub photon_adu: f64,
    /// Sigma of the charge cloud, pixels.
    pub cloud_sigma: f64,
    /// Mean baseline, ADU.
    pub baseline: f64,
    /// Range of per-pixel noise sigmas, ADU.
    pub noise: (f64, f64),
    /// Fraction of pixels that are noisy.
    pub noisy_fraction: f64,
    /// Noise sigma of a noisy pixel, ADU.
    pub noisy_sigma: f64,
    /// Amplitude of the slow global baseline drift, ADU.
    pub drift_amplitude: f64,
    /// Period of the drift, frames.
    pub drift_period: f64,
    /// Where photons reach the sensor (default [`Illumination::Flat`]).
    pub illumination: Illumination,
}

/// Where photons reach the sensor. A photon is drawn as for a flat field (uniform over the
/// frame, continuous within the pixel) and then kept only if the mask lets its true position
/// ([`TruePhoton`]) through, so a masked acquisition's photons are a subset of the flat
/// field's of the same seed: the same draws, fewer photons, the same noise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Illumination {
    /// Every photon reaches the sensor.
    Flat,
    /// A straight knife edge through the frame's centre `(cols / 2, rows / 2)`, turned
    /// `degrees` from the vertical: the line `x = cols/2 + (y - rows/2) tan(degrees)` (rows
    /// growing downwards, so a positive angle moves the edge right further down). Photons
    /// reach the sensor only where [`Illumination::knife_distance`] is negative (left of the
    /// edge).
    Knife {
        /// Angle of the edge from the vertical, degrees.
        degrees: f64,
    },
    /// An opaque sheet with square holes of side `hole` every `pitch` px on both axes, each
    /// hole centred on the corner shared by pixels: a photon passes iff `(x - pitch / 2)
    /// mod pitch` and `(y - pitch / 2) mod pitch` both lie within `hole / 2` of 0 (with the
    /// defaults, 0.3 px holes every 2 px: x in `[2k + 0.85, 2k + 1.15)`).
    Grid {
        /// Distance between hole centres, px.
        pitch: f64,
        /// Side of a hole, px.
        hole: f64,
    },
}

impl Illumination {
    /// `gen --illumination knife`: the edge 4 degrees from the vertical.
    pub const KNIFE: Self = Self::Knife { degrees: 4.0 };
    /// `gen --illumination grid`: 0.3 px holes every 2 px.
    pub const GRID: Self = Self::Grid {
        pitch: 2.0,
        hole: 0.3,
    };

    /// The signed distance in px of `(x, y)` from a knife edge through the centre of a
    /// `rows x cols` frame turned `degrees` from the vertical: `(x - cols/2) cos a - (y -
    /// rows/2) sin a`, negative on the illuminated side.
    pub fn knife_distance(degrees: f64, rows: usize, cols: usize, x: f64, y: f64) -> f64 {
        let a = degrees.to_radians();
        (x - cols as f64 / 2.0) * a.cos() - (y - rows as f64 / 2.0) * a.sin()
    }

    /// Whether a photon at `(x, y)` of a `rows x cols` frame reaches the sensor.
    pub fn passes(&self, rows: usize, cols: usize, x: f64, y: f64) -> bool {
        match *self {
            Self::Flat => true,
            Self::Knife { degrees } => Self::knife_distance(degrees, rows, cols, x, y) < 0.0,
            Self::Grid { pitch, hole } => {
                let inside = |v: f64| {
                    let phase = (v - pitch / 2.0).rem_euclid(pitch);
                    phase < hole / 2.0 || phase >= pitch - hole / 2.0
                };
                inside(x) && inside(y)
            }
        }
    }

    /// Errors for parameters that make no mask.
    fn check(&self) -> Result<()> {
        match *self {
            Self::Flat => Ok(()),
            Self::Knife { degrees } if degrees.is_finite() => Ok(()),
            Self::Grid { pitch, hole }
                if pitch > 0.0 && pitch.is_finite() && hole > 0.0 && hole <= pitch =>
            {
                Ok(())
            }
            other => Err(Error::param(
                "illumination",
                format!("{other:?} makes no mask (a finite angle; 0 < hole <= pitch)"),
            )),
        }
    }
}

/// One photon as the generator made it: `gen --truth` writes these as the rows of
/// `truth.npy`, a structured little-endian `.npy` with fields `frame` (`<i8`), `x`, `y`,
/// `energy` (`<f8`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct TruePhoton {
    /// The frame: the generator's frame index `k` from [`Generator::frame_with_truth`]; `gen`
    /// writes the number the frame has in the file it writes (as `find` numbers it).
    pub frame: i64,
    /// Column position of the charge cloud's centre, in cluda's convention (pixel column `c`
    /// spans `[c, c + 1)`): the hit pixel plus the centre of its sub-pixel bin of the
    /// charge-sharing table, `px + (bin + 0.5) / 256`, which is where the cloud whose charge
    /// the pixels hold is centred.
    pub x: f64,
    /// Row position, likewise.
    pub y: f64,
    /// The photon's charge in ADU (all of it; the part of a cloud that falls outside the
    /// frame is lost from the pixels but counted here).
    pub energy: f64,
}

/// NumPy's descriptor of [`TruePhoton`] rows (32 bytes: four 8-byte fields, no padding).
pub const TRUTH_DESCR: &str = "[('frame', '<i8'), ('x', '<f8'), ('y', '<f8'), ('energy', '<f8')]";

impl crate::io::npy::Record for TruePhoton {
    const DESCR: &'static str = TRUTH_DESCR;
    fn extend_le(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.frame.to_le_bytes());
        out.extend_from_slice(&self.x.to_le_bytes());
        out.extend_from_slice(&self.y.to_le_bytes());
        out.extend_from_slice(&self.energy.to_le_bytes());
    }
}

impl GenConfig {
    /// MOENCH-like defaults for `rows x cols` frames; photons scale with area (2500 at 400x400).
    pub fn new(rows: usize, cols: usize, seed: u64) -> Self {
        Self {
            rows,
            cols,
            seed,
            photons_per_frame: 2500.0 * (rows * cols) as f64 / 160_000.0,
            photon_adu: 400.0,
            cloud_sigma: 0.35,
            baseline: 4600.0,
            noise: (35.0, 55.0),
            noisy_fraction: 0.002,
            noisy_sigma: 150.0,
            drift_amplitude: 4.0,
            drift_period: 20_000.0,
            illumination: Illumination::Flat,
        }
    }
}

/// Number of sub-pixel bins of the charge-sharing table.
const BINS: usize = 256;

/// A frame generator with its fixed per-pixel maps.
#[derive(Clone, Debug)]
pub struct Generator {
    config: GenConfig,
    base: Vec<f32>,
    sigma: Vec<f32>,
    /// Charge fractions on the pixel before, at and after the one hit, by sub-pixel bin.
    share: Vec<[f32; 3]>,
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
        if c.rows == 0 || c.cols == 0 {
            return Err(Error::param(
                "rows/cols",
                format!(
                    "frames need at least one pixel, got {} x {}",
                    c.rows, c.cols
                ),
            ));
        }
        for (name, v) in [
            ("photons", c.photons_per_frame),
            ("photon-adu", c.photon_adu),
            ("baseline", c.baseline),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::param(
                    name,
                    format!("must be finite and >= 0, got {v}"),
                ));
            }
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
    fn frame_with(
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
fn round_to_u16(v: f32) -> u16 {
    let c = v.max(0.0).min(u16::MAX as f32);
    // SAFETY: `c` is finite and in [0, 65535] (`max` maps NaN to 0), so it truncates to an
    // `i32` exactly; the unchecked form lets the loop vectorise (the saturating `as` did not).
    let t = unsafe { c.to_int_unchecked::<i32>() };
    let f = c - t as f32;
    (t + i32::from(f >= 0.5)) as u16
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_frame_independent() {
        let g = Generator::new(GenConfig::new(20, 30, 7)).unwrap();
        let a = g.frames(5, 3, true);
        let b = g.frames(6, 1, true);
        assert_eq!(&a[600..1200], &b[..]);
        assert_eq!(a, g.frames(5, 3, true));
        assert_ne!(a[..600], a[600..1200]);
    }

    /// The fast frame equals the plain version's sample for sample: frames with and without
    /// photons, photons near every edge (small frames, many photons), one-pixel-wide frames,
    /// no photons at all, and a frame after a larger one on the same thread (the scratch).
    #[test]
    fn frames_equal_the_plain_version() {
        let mut configs = vec![
            GenConfig::new(400, 400, 42),
            GenConfig::new(20, 30, 7),
            GenConfig::new(1, 17, 3),
            GenConfig::new(9, 1, 4),
            GenConfig::new(3, 3, 5),
        ];
        let mut dense = GenConfig::new(12, 10, 8);
        dense.photons_per_frame = 400.0;
        configs.push(dense);
        let mut none = GenConfig::new(16, 16, 9);
        none.photons_per_frame = 0.0;
        configs.push(none);
        for c in configs {
            let g = Generator::new(c.clone()).unwrap();
            let n = c.rows * c.cols;
            let (mut fast, mut plain) = (vec![0u16; n], vec![0u16; n]);
            let frames: &[u64] = if n > 10_000 {
                &[0, 1000, 7_777]
            } else {
                &[0, 1, 2, 50, 999, 12_345, u64::MAX]
            };
            for &k in frames {
                for photons in [false, true] {
                    g.frame_into(k, photons, &mut fast);
                    reference::frame_into(&g, k, photons, &mut plain);
                    assert!(fast == plain, "{c:?} frame {k} photons {photons}");
                    // The values before rounding too, bit for bit (an operation reordered
                    // would rarely change a rounded sample).
                    let mut values = Vec::new();
                    g.frame_with(k, photons, &mut fast, &mut values, None, &|| Ok(()))
                        .expect("no cancel");
                    let want = reference::values(&g, k, photons);
                    assert!(
                        values
                            .iter()
                            .map(|v| v.to_bits())
                            .eq(want.iter().map(|v| v.to_bits())),
                        "{c:?} frame {k} photons {photons}: values"
                    );
                }
            }
        }
    }

    /// The truth changes nothing in the frame; a mask keeps exactly the flat field's photons
    /// that it lets through (the same draws), and the frames differ only where they are.
    #[test]
    fn truth_and_masks() {
        let flat = GenConfig::new(40, 60, 11);
        let g = Generator::new(flat.clone()).unwrap();
        let n = flat.rows * flat.cols;
        let (mut plain, mut with) = (vec![0u16; n], vec![0u16; n]);
        for k in [0u64, 7, 1234] {
            g.frame_into(k, true, &mut plain);
            let mut truth = Vec::new();
            g.frame_with_truth(k, true, &mut with, &mut truth);
            assert_eq!(plain, with);
            assert!(truth.len() > 20, "{}", truth.len());
            for p in &truth {
                let p = *p;
                assert_eq!(p.frame, k as i64);
                assert!((0.0..60.0).contains(&p.x) && (0.0..40.0).contains(&p.y));
                // The centre of one of 256 sub-pixel bins.
                let b = (p.x.fract() * 256.0 - 0.5, p.y.fract() * 256.0 - 0.5);
                assert!(b.0 == b.0.round() && b.1 == b.1.round(), "{p:?}");
                assert!((p.energy - 400.0).abs() < 100.0);
            }
            // No photons: no truth.
            let mut none = Vec::new();
            g.frame_with_truth(k, false, &mut with, &mut none);
            assert!(none.is_empty());
            for mask in [Illumination::KNIFE, Illumination::GRID] {
                let gm = Generator::new(GenConfig {
                    illumination: mask,
                    ..flat.clone()
                })
                .unwrap();
                let mut kept = Vec::new();
                gm.frame_with_truth(k, true, &mut with, &mut kept);
                let want: Vec<_> = truth
                    .iter()
                    .copied()
                    .filter(|p| mask.passes(40, 60, p.x, p.y))
                    .collect();
                assert_eq!(kept, want, "{mask:?}");
                assert!(kept.len() < truth.len());
            }
        }
    }

    #[test]
    fn masks_let_through_what_they_say() {
        let knife = Illumination::KNIFE;
        // Through the centre of a 100 x 200 frame (x 100, y 50), 4 degrees from the vertical:
        // at y = 50 - 10 the edge is at x = 100 - 10 tan 4 deg.
        let at = 100.0 - 10.0 * 4f64.to_radians().tan();
        assert!(knife.passes(100, 200, at - 1e-9, 40.0));
        assert!(!knife.passes(100, 200, at + 1e-9, 40.0));
        assert!(Illumination::knife_distance(4.0, 100, 200, at, 40.0).abs() < 1e-12);
        let grid = Illumination::GRID;
        for (x, y, want) in [
            (0.85, 0.85, true),
            (1.0, 1.149, true),
            (1.151, 1.0, false),
            (0.84, 1.0, false),
            (2.9, 5.1, true),
            (2.0, 1.0, false),
        ] {
            assert_eq!(grid.passes(10, 10, x, y), want, "({x}, {y})");
        }
        for bad in [
            Illumination::Knife { degrees: f64::NAN },
            Illumination::Grid {
                pitch: 1.0,
                hole: 2.0,
            },
            Illumination::Grid {
                pitch: 0.0,
                hole: 0.0,
            },
        ] {
            let c = GenConfig {
                illumination: bad,
                ..GenConfig::new(4, 4, 1)
            };
            assert!(Generator::new(c).is_err(), "{bad:?}");
        }
    }

    /// A narrow cloud puts all of a photon's charge into the pixel its true position is in.
    #[test]
    fn truth_is_in_the_pixel_that_holds_the_charge() {
        let c = GenConfig {
            cloud_sigma: 1e-4,
            noise: (0.0, 0.0),
            noisy_fraction: 0.0,
            drift_amplitude: 0.0,
            photons_per_frame: 3.0,
            ..GenConfig::new(30, 30, 3)
        };
        let g = Generator::new(c).unwrap();
        let (mut dark, mut lit) = (vec![0u16; 900], vec![0u16; 900]);
        for k in 0..20 {
            g.frame_into(k, false, &mut dark);
            let mut truth = Vec::new();
            g.frame_with_truth(k, true, &mut lit, &mut truth);
            let mut want = vec![0i32; 900];
            for p in &truth {
                let p = *p;
                want[p.y as usize * 30 + p.x as usize] += p.energy.round() as i32;
            }
            for i in 0..900 {
                let got = lit[i] as i32 - dark[i] as i32;
                assert!(
                    (got - want[i]).abs() <= 2,
                    "frame {k} pixel {i}: {got} vs {}",
                    want[i]
                );
            }
        }
    }

    #[test]
    fn dark_frames_are_near_baseline() {
        let g = Generator::new(GenConfig::new(50, 50, 1)).unwrap();
        let f = g.frames(0, 1, false);
        let mean = f.iter().map(|&v| v as f64).sum::<f64>() / f.len() as f64;
        assert!((mean - 4600.0).abs() < 100.0, "mean {mean}");
    }

    #[test]
    fn fast_rounding_equals_round_and_clamp() {
        let mut cases = vec![
            -1e9,
            -0.5,
            -0.49999997,
            -0.0,
            0.0,
            1e-30,
            0.49999997,
            0.5,
            1.5,
            2.5,
            4600.5,
            65534.5,
            65534.496,
            65535.0,
            65535.5,
            65536.0,
            1e9,
        ];
        cases.extend((0..10_000).map(|i| i as f32 * 6.5537 + 0.5));
        // Every half-integer of the range and its two neighbours on each side (the ties and
        // the values that round to them in a wider type), below 0 and above the top too.
        for h in -4..(2 * 65_540) {
            let x = h as f32 / 2.0;
            let (mut lo, mut hi) = (x, x);
            cases.push(x);
            for _ in 0..2 {
                lo = lo.next_down();
                hi = hi.next_up();
                cases.extend([lo, hi]);
            }
        }
        cases.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
        ]);
        for v in cases {
            let want = v.round().clamp(0.0, u16::MAX as f32) as u16;
            assert_eq!(round_to_u16(v), want, "{v}");
            assert_eq!(reference::round_to_u16(v), want, "{v}");
        }
    }

    #[test]
    fn charge_fractions_sum_to_one() {
        let g = Generator::new(GenConfig::new(4, 4, 1)).unwrap();
        for s in &g.share {
            assert!((s.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
}
