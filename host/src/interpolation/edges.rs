//! Histogram edges of an eta cube's axes, checked once so that every lookup can trust them.

use cluda_gpu::eta;

use crate::error::{Error, Result};

/// The strictly increasing edges of one axis of an eta cube (at least two: one bin), none
/// NaN. The first and last edge may be infinite (the default energy axis is `[0, +inf]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Edges {
    values: Vec<f64>,
}

impl Edges {
    /// Most edges an axis may have (a cube of 4096 x 4096 x 16 bins is already 2 GiB).
    pub const MAX_EDGES: usize = 1 << 16;

    /// Checks `values` as the edges of the axis named `name` (in errors).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`name`) for fewer than two or more than
    /// [`Edges::MAX_EDGES`] edges, a NaN, or edges that do not strictly increase (naming the
    /// first offending index).
    pub fn new(name: &'static str, values: Vec<f64>) -> Result<Self> {
        if values.len() < 2 || values.len() > Self::MAX_EDGES {
            return Err(Error::param(
                name,
                format!(
                    "{} edges given; an axis needs 2 to {} edges (1 to {} bins)",
                    values.len(),
                    Self::MAX_EDGES,
                    Self::MAX_EDGES - 1
                ),
            ));
        }
        if let Some(i) = values.iter().position(|v| v.is_nan()) {
            return Err(Error::param(name, format!("edge {i} is NaN")));
        }
        if let Some(i) = values.windows(2).position(|w| w[0] >= w[1]) {
            return Err(Error::param(
                name,
                format!(
                    "edges must strictly increase; edge {} ({}) is not below edge {} ({})",
                    i,
                    values[i],
                    i + 1,
                    values[i + 1]
                ),
            ));
        }
        Ok(Self { values })
    }

    /// `bins + 1` evenly spaced edges from `lo` to `hi`, bit for bit those of
    /// `numpy.linspace(lo, hi, bins + 1)`: edge `i` is `i * step + lo` with `step = (hi - lo)
    /// / bins`, and the last edge is `hi` itself.
    ///
    /// # Errors
    /// As [`Edges::new`], and for a zero bin count or non-finite ends.
    pub fn linspace(name: &'static str, lo: f64, hi: f64, bins: usize) -> Result<Self> {
        if bins == 0 || !lo.is_finite() || !hi.is_finite() {
            return Err(Error::param(
                name,
                format!("{bins} bins from {lo} to {hi}: give at least 1 bin between finite ends"),
            ));
        }
        if bins >= Self::MAX_EDGES {
            return Err(Error::param(
                name,
                format!("{bins} bins; at most {} per axis", Self::MAX_EDGES - 1),
            ));
        }
        let step = (hi - lo) / bins as f64;
        let mut values: Vec<f64> = (0..=bins).map(|i| i as f64 * step + lo).collect();
        values[bins] = hi;
        Self::new(name, values)
    }

    /// The edges.
    pub fn as_slice(&self) -> &[f64] {
        &self.values
    }

    /// Bins on this axis (edges - 1).
    pub fn bins(&self) -> usize {
        self.values.len() - 1
    }

    /// The bin of `value`, or `None` outside the edges ([`cluda_gpu::eta::bin`]).
    pub fn bin(&self, value: f64) -> Option<usize> {
        eta::bin(&self.values, value)
    }
}
