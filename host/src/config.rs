//! Finder parameters: cluster size, n_sigma, pedestal window, threshold mode, precision.

use crate::cluster::ClusterSize;
use crate::error::{Error, Result};
use crate::named::named_choices;

/// The arithmetic the pedestal and the finder use (docs/semantics.md, "Precisions").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Everything in `f64`: aare's FastPedestal arithmetic operation for operation.
    #[default]
    F64,
    /// `f32` with the centred rewrite "B1": exact first-N sums, a frozen integer baseline, and
    /// window updates of `x - baseline`. Agrees with `F64` to about 1e-6 in cluster count.
    F32,
    /// `f32` sums of raw values: cancels catastrophically at MOENCH baselines. Exists only to
    /// show that failure; never use it for data.
    F32Naive,
}

named_choices!(Precision, "precision", F64 => "f64", F32 => "f32", F32Naive => "f32-naive");

/// Which standard deviation the threshold `n_sigma * std` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ThresholdMode {
    /// The std of the pedestal's current state, recomputed every frame (the default).
    #[default]
    Live,
    /// The std at the moment the pedestal became ready, never recomputed (aare >= 2026.9).
    Frozen,
}

named_choices!(ThresholdMode, "threshold", Live => "live", Frozen => "frozen");

/// Builder methods: for each `field: Type`, `fn field(self, field: Type) -> Self` that sets
/// that field (with the doc comment given before it).
macro_rules! setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty),+ $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )+
    };
}

/// What a finder finds, apart from the frame shape and the pedestal window (which come with
/// the data): the one place where the finder's defaults are written (3x3, n_sigma 5, live
/// threshold, F64); the command line and Python take theirs from here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FindOptions {
    /// Cluster window size.
    pub size: ClusterSize,
    /// Threshold in standard deviations; finite and >= 0.
    pub n_sigma: f64,
    /// Live or frozen threshold.
    pub threshold: ThresholdMode,
    /// Arithmetic precision.
    pub precision: Precision,
}

impl FindOptions {
    /// The default pedestal window N, when nothing else sets it.
    pub const DEFAULT_PEDESTAL_FRAMES: u32 = 1000;

    /// The defaults: 3x3 clusters, 5 sigma, live threshold noise, f64. The one place they
    /// are written: [`FindOptions::default`], the command line's defaults and the Python
    /// package's (exported by its extension module) all read them.
    pub const DEFAULT: FindOptions = FindOptions {
        size: ClusterSize::S3,
        n_sigma: 5.0,
        threshold: ThresholdMode::Live,
        precision: Precision::F64,
    };

    /// The finder configuration for `rows x cols` frames and a pedestal window of
    /// `pedestal_frames`.
    pub fn config(&self, rows: usize, cols: usize, pedestal_frames: u32) -> FinderConfig {
        FinderConfig {
            rows,
            cols,
            size: self.size,
            n_sigma: self.n_sigma,
            pedestal_frames,
            threshold: self.threshold,
            precision: self.precision,
        }
    }
}

impl Default for FindOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Everything that determines a finder's results (but not its speed).
#[derive(Clone, Debug, PartialEq)]
pub struct FinderConfig {
    /// Rows per frame.
    pub rows: usize,
    /// Columns per frame.
    pub cols: usize,
    /// Cluster window size.
    pub size: ClusterSize,
    /// Threshold in standard deviations; finite and >= 0.
    pub n_sigma: f64,
    /// Pedestal window N (samples per pixel before the pedestal is ready).
    pub pedestal_frames: u32,
    /// Live or frozen threshold.
    pub threshold: ThresholdMode,
    /// Arithmetic precision.
    pub precision: Precision,
}

impl FinderConfig {
    /// Defaults for `rows x cols` frames ([`FindOptions::default`]: 3x3, n_sigma 5, live
    /// threshold, F64; N = 1000).
    pub fn new(rows: usize, cols: usize) -> Self {
        FindOptions::default().config(rows, cols, FindOptions::DEFAULT_PEDESTAL_FRAMES)
    }

    /// What it finds, apart from the frame shape and the pedestal window.
    pub fn options(&self) -> FindOptions {
        FindOptions {
            size: self.size,
            n_sigma: self.n_sigma,
            threshold: self.threshold,
            precision: self.precision,
        }
    }

    setters! {
        /// With cluster size `size`.
        size: ClusterSize,
        /// With threshold `n_sigma`.
        n_sigma: f64,
        /// With pedestal window `pedestal_frames`.
        pedestal_frames: u32,
        /// With threshold mode `threshold`.
        threshold: ThresholdMode,
        /// With precision `precision`.
        precision: Precision,
    }

    /// Checks every parameter, naming the first bad one.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the parameter: frames without pixels, a non-finite or
    /// negative `n_sigma`, a pedestal window of 0 frames, or a frame too large for the finders.
    pub fn validate(&self) -> Result<()> {
        crate::params::frame_pixels(self.rows, self.cols)?;
        if self.rows > u16::MAX as usize + 1 || self.cols > u16::MAX as usize + 1 {
            return Err(Error::param(
                "rows/cols",
                format!(
                    "{} x {} frames: cluster coordinates are u16, so at most 65536 rows and columns",
                    self.rows, self.cols
                ),
            ));
        }
        crate::params::finite_non_negative("nsigma", self.n_sigma)?;
        if self.pedestal_frames == 0 {
            return Err(Error::param(
                "pedestal-frames",
                "the pedestal window needs at least one frame",
            ));
        }
        Ok(())
    }
}
