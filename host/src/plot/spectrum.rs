//! The spectrum of cluster sums: its options, its automatic range and its histogram.

use crate::error::{Error, Result};

/// Largest number of spectrum bins [`SpectrumOptions`] accepts.
pub const MAX_SPECTRUM_BINS: usize = 100_000;

/// Cluster sums collected before an automatic spectrum range is chosen from their quantiles.
pub const AUTO_RANGE_SAMPLE: usize = 200_000;

/// How the spectrum of cluster sums is binned and drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct SpectrumOptions {
    /// The histogram's range `[min, max)` in ADU. `None` (the default): chosen from the first
    /// [`AUTO_RANGE_SAMPLE`] cluster sums, from their 0.05 % to 99.95 % quantiles widened by
    /// 5 % on each side ([`auto_range`]), then stretched upwards so that bins are a whole
    /// number of ADU wide; so it follows the cluster size (a 9x9 sum spreads over a much wider
    /// range than a 3x3 one). Sums outside the range are counted and reported on the plot.
    pub range: Option<(f64, f64)>,
    /// Number of equal bins, 1 ..= [`MAX_SPECTRUM_BINS`] (default 400).
    pub bins: usize,
    /// Logarithmic count axis (shows the multi-photon tail next to the single-photon peak).
    pub log: bool,
}

impl Default for SpectrumOptions {
    fn default() -> Self {
        Self {
            range: None,
            bins: 400,
            log: false,
        }
    }
}

/// The largest magnitude of a spectrum range's ends, in ADU. Cluster sums of 16-bit samples
/// stay far below it; beyond it `max - min` could overflow to infinity and the axis would
/// never finish drawing.
pub const MAX_SPECTRUM_ADU: f64 = 1e12;

/// The narrowest spectrum range, in ADU: narrower ones give bins too small to draw.
pub const MIN_SPECTRUM_SPAN: f64 = 1e-3;

impl SpectrumOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] named `spectrum-bins` when `bins` is outside
    /// 1 ..= [`MAX_SPECTRUM_BINS`], or `spectrum-range` when the range's ends are not finite,
    /// lie beyond +-[`MAX_SPECTRUM_ADU`], or are less than [`MIN_SPECTRUM_SPAN`] apart (so
    /// that `max - min` and the bin width are finite and above zero).
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_SPECTRUM_BINS).contains(&self.bins) {
            return Err(Error::param(
                "spectrum-bins",
                format!(
                    "must be between 1 and {MAX_SPECTRUM_BINS}, got {}",
                    self.bins
                ),
            ));
        }
        if let Some((min, max)) = self.range {
            if !(min.is_finite() && max.is_finite()) {
                return Err(Error::param(
                    "spectrum-range",
                    format!("both ends must be finite, got {min:?}:{max:?}"),
                ));
            }
            if min >= max {
                return Err(Error::param(
                    "spectrum-range",
                    format!("MIN must be below MAX, got {min:?}:{max:?}"),
                ));
            }
            if min < -MAX_SPECTRUM_ADU || max > MAX_SPECTRUM_ADU {
                return Err(Error::param(
                    "spectrum-range",
                    format!(
                        "both ends must lie within -{MAX_SPECTRUM_ADU:e}..{MAX_SPECTRUM_ADU:e} ADU (no cluster sum comes near), got {min:?}:{max:?}"
                    ),
                ));
            }
            if max - min < MIN_SPECTRUM_SPAN {
                return Err(Error::param(
                    "spectrum-range",
                    format!(
                        "MAX - MIN must be at least {MIN_SPECTRUM_SPAN} ADU, got {min:?}:{max:?}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The automatic spectrum range for `sums` (sorted in place): the 0.05 % .. 99.95 % quantiles
/// widened by 5 % of their span on each side and rounded outwards to whole ADU; -200 .. 2000
/// ADU when there are no sums.
pub fn auto_range(sums: &mut [f64]) -> (f64, f64) {
    sums.sort_by(f64::total_cmp);
    let finite: Vec<f64> = sums.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return (-200.0, 2000.0);
    }
    let (lo, hi) = (quantile(&finite, 0.0005), quantile(&finite, 0.9995));
    let pad = ((hi - lo) * 0.05).max(1.0);
    let (lo, hi) = ((lo - pad).floor(), (hi + pad).ceil());
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

/// A fixed-bin histogram of values in `[min, max)`, with under- and overflow counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Lower edge of the first bin.
    pub min: f64,
    /// Upper edge of the last bin.
    pub max: f64,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Values below `min` (or NaN).
    pub underflow: u64,
    /// Values at or above `max`.
    pub overflow: u64,
}

impl Histogram {
    /// `bins` equal bins over `[min, max)`; errors unless `min < max`, `max - min` is finite
    /// (ends of +-1e308 would overflow it) and `bins` is 1 ..= 2^20.
    pub fn new(min: f64, max: f64, bins: usize) -> Result<Self> {
        if !(min.is_finite() && max.is_finite() && min < max && (max - min).is_finite())
            || bins == 0
            || bins > 1 << 20
        {
            return Err(Error::param(
                "histogram",
                format!(
                    "need finite min < max and 1..=1048576 bins, got [{min}, {max}) with {bins}"
                ),
            ));
        }
        Ok(Self {
            min,
            max,
            counts: vec![0; bins],
            underflow: 0,
            overflow: 0,
        })
    }

    /// Width of one bin.
    pub fn bin_width(&self) -> f64 {
        (self.max - self.min) / self.counts.len() as f64
    }

    /// Counts `v`.
    pub fn add(&mut self, v: f64) {
        if v >= self.max {
            self.overflow += 1;
        } else if v >= self.min {
            let i = ((v - self.min) / self.bin_width()) as usize;
            let last = self.counts.len() - 1;
            self.counts[i.min(last)] += 1;
        } else {
            self.underflow += 1;
        }
    }

    /// All values counted, in range or not.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.underflow + self.overflow
    }

    /// Centre of the fullest bin at or above `from` after smoothing over 11 bins (so one
    /// noisy bin does not move the peak), if any bin there is non-empty.
    pub fn peak_from(&self, from: f64) -> Option<f64> {
        let w = self.bin_width();
        let n = self.counts.len();
        let smooth = |i: usize| -> u64 {
            self.counts[i.saturating_sub(5)..(i + 6).min(n)]
                .iter()
                .sum()
        };
        (0..n)
            .filter(|&i| self.min + (i as f64 + 0.5) * w >= from && self.counts[i] > 0)
            .max_by_key(|&i| (smooth(i), std::cmp::Reverse(i)))
            .map(|i| self.min + (i as f64 + 0.5) * w)
    }
}

/// The `q`-quantile (0..=1) of the finite values (0 when there are none).
pub(super) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}
