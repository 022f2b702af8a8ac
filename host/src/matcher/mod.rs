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
//! The GPU versions need the `gpu` feature; without it they are [`Error::NoGpu`] errors. Their
//! host side is the module tree `gpu/` (the matcher, one module per version, the GEMM tile
//! driver V3 and V4 share, cuBLAS); V4's fused kernels (`V4Kernel::FusedTwoPass`,
//! `FusedOnePass`) need the feature `experimental`.
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
mod files;
#[cfg(feature = "gpu")]
mod gpu;
mod tiling;
mod types;

/// V4's screening bound (shared with its fold kernel), for tests and documentation.
pub use cluda_gpu::match_bound;

pub use files::{read_descriptors, write_descriptors, write_matches, write_matches_claiming};
#[cfg(feature = "gpu")]
pub use gpu::{CandidateStats, GpuMatcher, GpuRun, cublas, v3, v4};
pub use tiling::{V3Tiling, V4Kernel};
pub use types::{DIM, Descriptor, MAX_ABS_VALUE, Match, MatchVersion, validate};

#[cfg(feature = "gpu")]
use crate::cuda::Device;
// `Error` is named by the docs, and used by the build without the `gpu` feature.
#[allow(unused_imports)]
use crate::error::{Error, Result};

/// For each descriptor of `lhs`, its nearest descriptor in `rhs` (squared L2), with `version`.
///
/// GPU versions open device 0 for this call (use `GpuMatcher` to keep one open across calls);
/// without a GPU, or in a cluda built without the `gpu` feature, they return [`Error::NoGpu`]. See the module docs for the input rules and what
/// the result holds.
///
/// # Errors
/// [`Error::Shape`] or [`Error::InvalidParameter`] when the inputs break the rules above
/// ([`validate`]); [`Error::NoGpu`] for a GPU version without a GPU (or, for V3 and V4, without
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
