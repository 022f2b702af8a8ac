//! Bad pixels: a mask whose `true` pixels' photons are flagged and never counted.

use crate::error::Result;

/// A bad-pixel mask: `true` marks a pixel whose photons are flagged and never counted.
#[derive(Clone, Debug, PartialEq)]
pub struct PixelMask {
    rows: usize,
    cols: usize,
    bad: Vec<bool>,
}

impl PixelMask {
    /// A mask of `rows x cols` pixels, row-major.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::error::Error::Shape) when `bad` does not hold `rows * cols` values.
    pub fn new(rows: usize, cols: usize, bad: Vec<bool>) -> Result<Self> {
        crate::params::per_pixel("mask", rows, cols, &bad)?;
        Ok(Self { rows, cols, bad })
    }

    /// Its shape.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Whether pixel (column `x`, row `y`) is bad (outside the mask: not).
    pub fn is_bad(&self, x: u16, y: u16) -> bool {
        let (x, y) = (x as usize, y as usize);
        x < self.cols && y < self.rows && self.bad[y * self.cols + x]
    }
}
