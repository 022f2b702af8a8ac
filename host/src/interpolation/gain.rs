//! Energy in keV: a per-pixel gain map (ADU per keV, aare's `InvertedGainMap` input), by
//! which each pixel of a cluster is divided before its eta and energy are computed.
//!
//! cluda divides in `f64` and keeps the quotients (etas and energies from `v / g` with no
//! truncation). aare's `InvertedGainMap` multiplies by `1 / g` and casts the result back to
//! the cluster's integer type, and it zeroes clusters centred on the outermost rows and
//! columns; cluda keeps those clusters (their missing neighbours hold 0, as without a gain).

use std::path::Path;

use crate::cluster::ClusterRef;
use crate::error::{Error, Result};
use crate::io::npy;

/// Gains in ADU per keV, one per pixel, each finite and above 0.
#[derive(Clone, Debug, PartialEq)]
pub struct GainMap {
    rows: usize,
    cols: usize,
    gain: Vec<f64>,
}

impl GainMap {
    /// A map of `rows x cols` gains, row-major.
    ///
    /// # Errors
    /// [`Error::Shape`] when `gain` does not hold `rows * cols` values;
    /// [`Error::InvalidParameter`] (`gain`) naming the first pixel whose gain is not finite
    /// and above 0 (a zero or NaN gain would make infinite or NaN energies).
    pub fn new(rows: usize, cols: usize, gain: Vec<f64>) -> Result<Self> {
        crate::params::per_pixel("gain", rows, cols, &gain)?;
        if let Some(i) = gain.iter().position(|g| !(g.is_finite() && *g > 0.0)) {
            return Err(Error::param(
                "gain",
                format!(
                    "pixel (row {}, column {}) has gain {}; every gain must be finite and above 0 ADU/keV",
                    i / cols,
                    i % cols,
                    gain[i]
                ),
            ));
        }
        Ok(Self { rows, cols, gain })
    }

    /// Reads a 2-D `float64` or `float32` `.npy` of gains (ADU per keV).
    ///
    /// # Errors
    /// The file's errors (naming it), and as [`GainMap::new`].
    pub fn read(path: &Path) -> Result<Self> {
        let (shape, values) = match npy::read_array::<f64>(path) {
            Ok(a) => (a.shape.clone(), a.data),
            Err(_) => {
                let a = npy::read_array::<f32>(path)?;
                (a.shape.clone(), a.data.iter().map(|&v| v as f64).collect())
            }
        };
        if shape.len() != 2 {
            return Err(Error::format(
                path,
                format!("a gain map is rows x cols, got {} dimensions", shape.len()),
            ));
        }
        Self::new(shape[0], shape[1], values).map_err(|e| Error::format(path, e.to_string()))
    }

    /// Its shape.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// The cluster's values divided by their pixels' gains into `out` (row-major, `side *
    /// side`); cells outside the map hold 0.
    pub fn divide(&self, c: &ClusterRef<'_>, side: usize, out: &mut [f64]) {
        let r = (side / 2) as isize;
        for (i, (&v, o)) in c.data.iter().zip(out.iter_mut()).enumerate() {
            let row = c.y as isize - r + (i / side) as isize;
            let col = c.x as isize - r + (i % side) as isize;
            *o = if row >= 0 && col >= 0 && (row as usize) < self.rows && (col as usize) < self.cols
            {
                v as f64 / self.gain[row as usize * self.cols + col as usize]
            } else {
                0.0
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cell is divided by its own pixel's gain; cells beyond the frame hold 0.
    #[test]
    fn divide_uses_each_pixels_gain_and_zero_outside() {
        // 3 x 4 frame, gain = 1 + row * 10 + column.
        let g = GainMap::new(
            3,
            4,
            (0..12).map(|i| 1.0 + (i / 4 * 10 + i % 4) as f64).collect(),
        )
        .unwrap();
        let data: Vec<i32> = (1..=9).collect();
        // Centre at column 0, row 2: the left column and the bottom row are outside.
        let c = ClusterRef {
            x: 0,
            y: 2,
            data: &data,
        };
        let mut out = [f64::NAN; 9];
        g.divide(&c, 3, &mut out);
        let gain = |r: usize, col: usize| 1.0 + (r * 10 + col) as f64;
        let want = [
            0.0,
            2.0 / gain(1, 0),
            3.0 / gain(1, 1),
            0.0,
            5.0 / gain(2, 0),
            6.0 / gain(2, 1),
            0.0,
            0.0,
            0.0,
        ];
        assert_eq!(out, want);
    }

    #[test]
    fn bad_gains_are_refused_by_pixel() {
        let e = GainMap::new(2, 2, vec![1.0, f64::NAN, 1.0, 1.0]).unwrap_err();
        assert!(e.to_string().contains("row 0, column 1"), "{e}");
        assert!(GainMap::new(2, 2, vec![1.0, 1.0, -1.0, 1.0]).is_err());
        assert!(GainMap::new(2, 2, vec![1.0; 3]).is_err());
    }
}
