//! What to generate: the generator's parameters, the illumination, and the true photons it
//! reports.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};

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
    pub(super) fn check(&self) -> Result<()> {
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
    /// The frame: the generator's frame index `k` from [`Generator::frame_with_truth`](crate::generate::Generator::frame_with_truth); `gen`
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
