//! Per-pixel pedestal (dark level and noise) with the exact arithmetic of docs/semantics.md.
//!
//! The arithmetic itself lives in `cluda_gpu::pedestal`, shared with the GPU kernels; this
//! module owns the per-pixel arrays, the fill phase (the first N samples) and the maps users
//! look at.

mod chunks;
#[cfg(test)]
mod cropped_tests;
mod fill;
mod maps;
mod state;
#[cfg(test)]
mod tests;

pub use state::{PixelMaps, ReadyState};

use crate::config::{FinderConfig, Precision};
use crate::error::{Error, Result};

/// Sums of the fill phase (the first N samples of every pixel).
#[derive(Clone, Debug, PartialEq)]
enum Fill {
    /// `F64`: raw sums in f64, aare's accumulation (exact: integers below 2^53).
    Raw64 { sum: Vec<f64>, sum2: Vec<f64> },
    /// `F32` (B1): exact integer sums, centred when the pedestal becomes ready.
    Exact { sum: Vec<u64>, sum2: Vec<u64> },
    /// `F32Naive`: raw sums in f32 (rounded every step: the naive scheme).
    Raw32 { sum: Vec<f32>, sum2: Vec<f32> },
}

/// A per-pixel running pedestal over a window of N frames.
#[derive(Debug, PartialEq)]
pub struct Pedestal {
    rows: usize,
    cols: usize,
    n: u32,
    precision: Precision,
    count: u32,
    fill: Option<Fill>,
    ready: Option<ReadyState>,
}

/// By hand for `clone_from`, which copies into the arrays already there: a stream resets its
/// finder to the same saved pedestal at every acquisition's start, and a fresh copy of a
/// 400 x 400 pedestal (5 MB of new pages) took about a millisecond of it.
impl Clone for Pedestal {
    fn clone(&self) -> Self {
        Self {
            rows: self.rows,
            cols: self.cols,
            n: self.n,
            precision: self.precision,
            count: self.count,
            fill: self.fill.clone(),
            ready: self.ready.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.rows = source.rows;
        self.cols = source.cols;
        self.n = source.n;
        self.precision = source.precision;
        self.count = source.count;
        self.fill.clone_from(&source.fill);
        // Option's clone_from copies into a Some already there.
        self.ready.clone_from(&source.ready);
    }
}

impl Pedestal {
    /// An empty pedestal for `rows x cols` frames with window `n` in `precision`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when `rows` or `cols` is 0 (`rows/cols`), the frame is too
    /// large, or `n` is 0 (`pedestal-frames`).
    pub fn new(rows: usize, cols: usize, n: u32, precision: Precision) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::param(
                "rows/cols",
                format!("a pedestal needs at least one pixel, got {rows} x {cols}"),
            ));
        }
        if n == 0 {
            return Err(Error::param(
                "pedestal-frames",
                "the pedestal window needs at least one frame",
            ));
        }
        let p = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::param("rows/cols", "frame too large"))?;
        // Peak per pixel: the two fill sums, then (when the pedestal becomes ready) the
        // per-pixel state and the four maps built from it, all at once.
        let real = if precision == Precision::F64 { 8 } else { 4 };
        let per_pixel = 16 + 7 * real;
        let what = || {
            format!(
                "the pedestal state of {rows} x {cols} pixels ({})",
                precision.name()
            )
        };
        crate::memory::check(what, (p as u64).saturating_mul(per_pixel))?;
        let fill = match precision {
            Precision::F64 => Fill::Raw64 {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
            Precision::F32 => Fill::Exact {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
            Precision::F32Naive => Fill::Raw32 {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
        };
        Ok(Self {
            rows,
            cols,
            n,
            precision,
            count: 0,
            fill: Some(fill),
            ready: None,
        })
    }

    /// The pedestal of the rectangle `roi` of the frames (detector pixels, both ends
    /// inclusive): every per-pixel sum and state cut down to it. Pixels are independent, so
    /// this is exactly the pedestal the frames cut down to `roi` would have given (a pedestal
    /// of the whole detector used with frames of a receiver ROI).
    ///
    /// # Errors
    /// [`Error::Shape`] when `roi` does not lie inside the frames.
    pub fn cropped(&self, roi: &crate::io::raw::Roi) -> Result<Self> {
        if !roi.fits(self.rows, self.cols) {
            return Err(Error::shape(
                "a receiver ROI to cut the pedestal down to",
                format!("an ROI inside frames of {} x {}", self.rows, self.cols),
                format!("ROI {roi} (xmin, xmax, ymin, ymax)"),
            ));
        }
        let cols = self.cols;
        fn maps<R: Copy>(m: &PixelMaps<R>, cols: usize, roi: &crate::io::raw::Roi) -> PixelMaps<R> {
            PixelMaps {
                base: cut_rows(&m.base, cols, roi),
                a: cut_rows(&m.a, cols, roi),
                b: cut_rows(&m.b, cols, roi),
                frozen_std: cut_rows(&m.frozen_std, cols, roi),
                inv: m.inv,
            }
        }
        let fill = self.fill.as_ref().map(|f| match f {
            Fill::Raw64 { sum, sum2 } => Fill::Raw64 {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
            Fill::Exact { sum, sum2 } => Fill::Exact {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
            Fill::Raw32 { sum, sum2 } => Fill::Raw32 {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
        });
        let ready = self.ready.as_ref().map(|r| match r {
            ReadyState::F64(m) => ReadyState::F64(maps(m, cols, roi)),
            ReadyState::F32(m) => ReadyState::F32(maps(m, cols, roi)),
        });
        Ok(Self {
            rows: roi.rows(),
            cols: roi.cols(),
            n: self.n,
            precision: self.precision,
            count: self.count,
            fill,
            ready,
        })
    }

    /// Rows per frame.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns per frame.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The window N.
    pub fn window(&self) -> u32 {
        self.n
    }

    /// The precision.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Frames pushed during the fill phase (saturates at N).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether every pixel holds N samples, so that clusters can be found.
    pub fn is_ready(&self) -> bool {
        self.ready.is_some()
    }

    /// The ready state, or [`Error::PedestalNotReady`].
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`] until `n` frames have been pushed.
    pub fn ready(&self) -> Result<&ReadyState> {
        self.ready.as_ref().ok_or(Error::PedestalNotReady {
            have: self.count,
            need: self.n,
        })
    }

    /// Mutable ready state (finders apply their frame-synchronous updates through it).
    pub(crate) fn ready_mut(&mut self) -> Result<&mut ReadyState> {
        let (have, need) = (self.count, self.n);
        self.ready
            .as_mut()
            .ok_or(Error::PedestalNotReady { have, need })
    }
}

impl Pedestal {
    /// Checks that this pedestal fits `config` (shape, window N, precision), so a finder with
    /// that configuration can adopt it.
    ///
    /// # Errors
    /// [`Error::Shape`] naming both the wanted and the given shape, window and precision.
    pub fn check_fits(&self, config: &FinderConfig) -> Result<()> {
        let want = (
            config.rows,
            config.cols,
            config.pedestal_frames,
            config.precision,
        );
        let got = (self.rows(), self.cols(), self.window(), self.precision());
        if want == got {
            return Ok(());
        }
        let show = |(r, c, n, p): (usize, usize, u32, Precision)| {
            format!("{r} x {c}, N = {n}, {}", p.name())
        };
        Err(Error::shape("pedestal", show(want), show(got)))
    }
}

/// The samples of `roi` (rows of `cols` samples, both ends inclusive) out of per-pixel
/// values `v` of whole frames, row by row.
fn cut_rows<T: Copy>(v: &[T], cols: usize, roi: &crate::io::raw::Roi) -> Vec<T> {
    (roi.ymin..=roi.ymax)
        .flat_map(|y| v[y * cols + roi.xmin..=y * cols + roi.xmax].iter().copied())
        .collect()
}
