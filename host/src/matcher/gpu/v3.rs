//! V3: cuBLAS SGEMM tiles + a Rust fold kernel, with exact re-scoring.
//!
//! 1. `cluda_match_sqnorms` computes `||a||^2` and `||b||^2` (and the largest `||b||^2`).
//! 2. For each tile of `rows` left x `cols` right descriptors, cuBLAS computes
//!    `T = -2 A B^T` (SGEMM, FP32, `CUBLAS_DEFAULT_MATH`: no TF32 or other reduced-precision
//!    tensor-op path) into one reused tile buffer; `cluda_match_v3_fold` adds `||b||^2` and folds
//!    each row into its running best four `(estimate, index)` pairs. The tile is then
//!    overwritten by the next one: the `n x m` matrix never exists.
//! 3. `cluda_match_v3_rescore` recomputes the four candidates' distances directly
//!    (`sum (a-b)^2` in f32) and keeps the best, so the returned distance is not the
//!    cancellation-prone expansion. A row is flagged when the GEMM's worst-case rounding error
//!    (`gamma_128` bound, see the kernel) could have hidden its true neighbour outside the four;
//!    flagged rows (typically none, except for clusters of near-duplicates) are recomputed
//!    exactly with V2 by the caller.
//!
//! The estimate `||b||^2 - 2 a.b` omits `||a||^2`, which is the same for a whole row.
//!
//! The tile loop is `gpu/tiles.rs`, shared with V4. cuBLAS is loaded at run time under the
//! name the installed CUDA (11, 12 or 13) gives it; see [`super::cublas`] for the search.
//! Without cuBLAS, V3 fails with [`Error::NoGpu`](crate::error::Error::NoGpu) naming the files
//! tried; V1 and V2 do not need it.

use cluda_gpu::args::{MatchSqnormsArgs, MatchV3FoldArgs, MatchV3RescoreArgs};

use super::cublas::Math;
use super::tiles::{bare_gemm_ms, fold_args};
use super::{DeviceResult, Flags, GpuMatcher, Sides, launch_rows, rescore_args};
use crate::device_memory::DeviceBuf;
use crate::error::Result;
use crate::matcher::types::Descriptor;

/// Candidates kept per row (the kernels' `V3_K`, shared with them).
const K: usize = cluda_gpu::layout::matcher::V3_K;

/// Runs a bare SGEMM of the same shape as V3's whole problem (`n x m x 128`, FP32, one call,
/// output `n x m`), `reps` times after one warm-up; returns the median device milliseconds.
/// This is the floor V3 is measured against.
pub fn bare_sgemm_ms(
    matcher: &mut GpuMatcher,
    lhs: &[Descriptor],
    rhs: &[Descriptor],
    reps: usize,
) -> Result<f64> {
    bare_gemm_ms(matcher, lhs, rhs, reps, Math::Fp32)
}

impl GpuMatcher {
    /// Squared norms of `x` (`rows` descriptors) into `norms` (at least `rows` floats), the
    /// largest as f32 bits added into `max` (one word, zeroed before); `what` names the launch.
    pub(super) fn sqnorms(
        &self,
        x: &DeviceBuf<f32>,
        rows: usize,
        norms: &DeviceBuf<f32>,
        max: &DeviceBuf<u32>,
        what: &str,
    ) -> Result<()> {
        let a = MatchSqnormsArgs {
            x: x.ptr(),
            rows: rows as u32,
            norms: norms.ptr(),
            max_bits: max.ptr(),
        };
        // SAFETY: x rows x 128, norms >= rows, max 1 (the caller's buffers, as documented).
        unsafe { launch_rows(&self.stream, &self.k.sqnorms, rows, a, what) }
    }

    /// V3 on uploaded descriptors (`n`, `m` >= 1). Returns the per-row result and the rows that
    /// must be recomputed exactly (still on the device; see [`Flags::download`]).
    pub(super) fn v3(&mut self, p: Sides<'_>) -> Result<(DeviceResult, Flags)> {
        let Sides(lhs, n, rhs, m) = p;
        let s = self.stream.clone();
        // Buffers that a kernel writes entirely are left uninitialised (no memset in the timed
        // path); the right norms' padding and the counters must start at zero.
        let norms_a = DeviceBuf::on_stream(&s, n, "v3's left norms")?;
        let norms_b = DeviceBuf::zeroed_on_stream(&s, m.next_multiple_of(4), "v3's right norms")?;
        let max_a = DeviceBuf::zeroed_on_stream(&s, 1, "v3's norm maximum")?;
        let max_b = DeviceBuf::zeroed_on_stream(&s, 1, "v3's norm maximum")?;
        self.sqnorms(lhs, n, &norms_a, &max_a, "v3's norm kernel (lhs)")?;
        self.sqnorms(rhs, m, &norms_b, &max_b, "v3's norm kernel (rhs)")?;
        // The first column tile (`first`) writes all four entries of every row.
        let best_d = DeviceBuf::on_stream(&s, n * K, "v3's candidates")?;
        let best_i = DeviceBuf::on_stream(&s, n * K, "v3's candidates")?;
        self.gemm_tiles(Math::Fp32, p, "v3", |k, fold, tile| {
            let a = fold_args!(MatchV3FoldArgs, tile, {
                norms_b: norms_b.ptr(),
                best_d: best_d.ptr(),
                best_i: best_i.ptr(),
                first: tile.first(),
            });
            // SAFETY: tile rows x ld, norms_b padded to a multiple of 4 >= col0 + ld, best_*
            // n x 4 with row0 + rows <= n; all ready on the fold stream (the driver's waits).
            unsafe { launch_rows(fold, &k.v3_fold, tile.rows, a, "v3's fold kernel") }
        })?;
        // The rescoring writes every row's index and distance; flag_rows is read only up to
        // the count.
        let out = DeviceResult::on_stream(&s, n, "v3")?;
        let flags = Flags::on_stream(&s, n, "v3")?;
        let a = rescore_args!(MatchV3RescoreArgs, p, out, flags, {
            norms_a: norms_a.ptr(),
            max_bits_b: max_b.ptr(),
            best_d: best_d.ptr(),
            best_i: best_i.ptr(),
        });
        // SAFETY: lhs n x 128, rhs m x 128 (candidate indices < m or u32::MAX), best_* n x 4,
        // idx/dist/flag_rows n, flag_count 1; the folds are done (joined by the driver).
        unsafe { launch_rows(&s, &self.k.v3_rescore, n, a, "v3's rescoring kernel") }?;
        Ok((out, flags))
    }
}
