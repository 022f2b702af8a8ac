//! Nearest-neighbour descriptor matching: for every left descriptor, the index of its
//! nearest right descriptor in squared L2 distance, and that distance.
//!
//! Descriptors are 128 `f32`s. Four implementations, selected by [`MatchVersion`]:
//!
//! * [`MatchVersion::Cpu`]: the reference, rayon over left rows ([`cpu`]).
//! * [`MatchVersion::V1`]: GPU, full `n x m` distance matrix, then a row-minimum kernel. It
//!   materialises the matrix, so it refuses sizes whose matrix does not fit in free device memory.
//! * [`MatchVersion::V2`]: GPU, one fused tiled Rust kernel that keeps each row's running best and
//!   never stores the matrix.
//! * [`MatchVersion::V3`]: GPU, tiles of `-2 A B^T` from cuBLAS SGEMM (pure FP32:
//!   `CUBLAS_DEFAULT_MATH`, no TF32), folded tile by tile into each row's best four candidates
//!   by a Rust kernel; the four are re-scored exactly and rows whose winner the GEMM's rounding
//!   could have hidden are recomputed with V2 (see `v3`).
//! * [`MatchVersion::V4`]: GPU, a TF32 tensor-core screen (cuBLAS) whose proven error bound
//!   leaves a few candidates per row, rescored with V2's exact arithmetic: the result equals
//!   V2's bit for bit (see `v4` and `docs/matcher.md`).
//!
//! The GPU versions need the `gpu` feature; without it they are [`Error::NoGpu`] errors.
//!
//! **What [`Match::distance`] holds**: for every version, the squared L2 distance of the
//! returned pair computed directly as `sum((a_k - b_k)^2)` in `f32` (with fused multiply-adds on
//! the GPU); never the cancellation-prone `||a||^2 + ||b||^2 - 2ab` estimate. Its relative error
//! is about 1e-6. The returned index is the exact nearest neighbour up to that rounding: its
//! exact (f64) distance is within 1e-5 relative of the true minimum. Ties may pick either index
//! (the implementations prefer the smaller one).
//!
//! **Inputs**: every value must be finite and of magnitude at most [`MAX_ABS_VALUE`] (larger
//! values would overflow the f32 squared distance); violations are [`Error::InvalidParameter`]
//! naming the side (`lhs`/`rhs`), the row and the dimension. An empty `lhs` gives an empty result;
//! an empty `rhs` is an error (no neighbour exists). Both sides hold at most `u32::MAX` rows.

pub mod cpu;
#[cfg(feature = "gpu")]
pub mod cublas;
mod files;
#[cfg(feature = "gpu")]
mod gpu;
mod tiling;
#[cfg(feature = "gpu")]
mod v1;
#[cfg(feature = "gpu")]
mod v2;
#[cfg(feature = "gpu")]
pub mod v3;
#[cfg(feature = "gpu")]
pub mod v4;

/// V4's screening bound (shared with its fold kernel), for tests and documentation.
pub use cluda_gpu::match_bound;

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

pub use files::{read_descriptors, write_descriptors, write_matches};
#[cfg(feature = "gpu")]
pub use gpu::{CandidateStats, GpuMatcher, GpuRun};
pub use tiling::V3Tiling;

#[cfg(feature = "gpu")]
use crate::cuda::Device;
use crate::error::{Error, Result};

/// Floats per descriptor (the kernels' `DIM`, shared with them).
pub const DIM: usize = cluda_gpu::layout::matcher::DIM;

/// One descriptor.
pub type Descriptor = [f32; DIM];

/// Largest accepted magnitude of a descriptor value: `(2 * 1e16)^2 * 128` still fits in `f32`.
pub const MAX_ABS_VALUE: f32 = 1e16;

/// The nearest right descriptor of one left descriptor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    /// Row of the nearest right descriptor.
    pub index: u32,
    /// Its squared L2 distance, computed directly in f32 (see the module docs).
    pub distance: f32,
}

/// Which implementation [`match_nearest`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchVersion {
    /// CPU reference (rayon).
    Cpu,
    /// GPU: materialised distance matrix + row minimum.
    V1,
    /// GPU: fused tiled kernel with running best per row.
    V2,
    /// GPU: cuBLAS SGEMM tiles + norms + Rust fold, exact re-scoring.
    V3,
    /// GPU: cuBLAS TF32 tensor-core screen with a proven bound + V2's exact arithmetic on the
    /// candidates; equal to V2 bit for bit.
    V4,
}

impl MatchVersion {
    /// All versions, CPU first.
    pub const ALL: [MatchVersion; 5] = [
        MatchVersion::Cpu,
        MatchVersion::V1,
        MatchVersion::V2,
        MatchVersion::V3,
        MatchVersion::V4,
    ];
    /// The GPU versions.
    pub const GPU: [MatchVersion; 4] = [
        MatchVersion::V1,
        MatchVersion::V2,
        MatchVersion::V3,
        MatchVersion::V4,
    ];

    /// The name used on the command line (`cpu`, `v1`, `v2`, `v3`, `v4`).
    pub fn name(self) -> &'static str {
        match self {
            MatchVersion::Cpu => "cpu",
            MatchVersion::V1 => "v1",
            MatchVersion::V2 => "v2",
            MatchVersion::V3 => "v3",
            MatchVersion::V4 => "v4",
        }
    }
}

impl fmt::Display for MatchVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MatchVersion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "cpu" => Ok(MatchVersion::Cpu),
            "v1" => Ok(MatchVersion::V1),
            "v2" => Ok(MatchVersion::V2),
            "v3" => Ok(MatchVersion::V3),
            "v4" => Ok(MatchVersion::V4),
            other => Err(Error::param(
                "version",
                format!("`{other}` is not one of v1, v2, v3, v4, cpu"),
            )),
        }
    }
}

/// For each descriptor of `lhs`, its nearest descriptor in `rhs` (squared L2), with `version`.
///
/// GPU versions open device 0 for this call (use `GpuMatcher` to keep one open across calls);
/// without a GPU, or in a cluda built without the `gpu` feature, they return [`Error::NoGpu`]. See the module docs for the input rules and what
/// the result holds.
///
/// # Errors
/// [`Error::Shape`] or [`Error::InvalidParameter`] when the inputs break the rules above
/// ([`validate`]); [`Error::NoGpu`] for a GPU version without a GPU (or, for V3, without
/// cuBLAS); CUDA, cuBLAS or out-of-memory errors from the device.
pub fn match_nearest(
    lhs: &[Descriptor],
    rhs: &[Descriptor],
    version: MatchVersion,
) -> Result<Vec<Match>> {
    if version == MatchVersion::Cpu {
        return cpu::match_cpu(lhs, rhs);
    }
    validate(lhs, rhs)?;
    if lhs.is_empty() {
        return Ok(Vec::new());
    }
    #[cfg(feature = "gpu")]
    {
        let device = Device::open(0)?;
        let mut matcher = GpuMatcher::new(&device)?;
        Ok(matcher.run(lhs, rhs, version)?.matches)
    }
    #[cfg(not(feature = "gpu"))]
    Err(Error::built_without_gpu(&format!(
        "matcher version {version}"
    )))
}

/// Checks both sides (see the module docs); `Ok` means every version can run on them.
///
/// # Errors
/// [`Error::Shape`] for an empty `rhs` or more than `u32::MAX` rows;
/// [`Error::InvalidParameter`] naming the side, row and dimension of a NaN, an infinity or a
/// value beyond [`MAX_ABS_VALUE`].
pub fn validate(lhs: &[Descriptor], rhs: &[Descriptor]) -> Result<()> {
    if rhs.is_empty() {
        return Err(Error::shape(
            "rhs descriptors",
            "at least one right descriptor (every left descriptor needs a neighbour)",
            "0 rows",
        ));
    }
    for (side, rows) in [("lhs", lhs), ("rhs", rhs)] {
        if rows.len() > u32::MAX as usize {
            return Err(Error::shape(
                format!("{side} descriptors"),
                format!("at most {} rows", u32::MAX),
                format!("{} rows", rows.len()),
            ));
        }
    }
    check_values("lhs", lhs)?;
    check_values("rhs", rhs)
}

/// The first row (and dimension) of `rows` holding a NaN, an infinity or a value beyond
/// [`MAX_ABS_VALUE`], as an error naming `side`.
fn check_values(side: &'static str, rows: &[Descriptor]) -> Result<()> {
    let bad = rows
        .par_iter()
        .enumerate()
        .find_first(|(_, row)| row.iter().any(|&v| !acceptable(v)));
    match bad {
        None => Ok(()),
        Some((r, row)) => {
            let (k, v) = row
                .iter()
                .enumerate()
                .find(|&(_, &v)| !acceptable(v))
                .map(|(k, v)| (k, *v))
                .unwrap_or((0, f32::NAN));
            let what = if v.is_nan() {
                "NaN".to_string()
            } else if v.is_infinite() {
                format!("{v}")
            } else {
                format!("{v:e}, beyond the largest accepted magnitude {MAX_ABS_VALUE:e}")
            };
            Err(Error::param(
                side,
                format!(
                    "descriptor row {r} holds {what} at dimension {k}; descriptors must be finite"
                ),
            ))
        }
    }
}

/// Finite and within [`MAX_ABS_VALUE`].
fn acceptable(v: f32) -> bool {
    v.is_finite() && v.abs() <= MAX_ABS_VALUE
}
