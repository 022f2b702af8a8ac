//! V4: a TF32 tensor-core screen (cuBLAS) with a proven error bound, then V2's exact f32
//! arithmetic on every candidate the screen cannot rule out: the result equals V2's bit for
//! bit (index and distance, ties to the smaller index).
//!
//! 1. `cluda_match_sqnorms` computes `||a||^2` and `||b||^2`; `cluda_match_v4_radii` turns them
//!    into radii, upper bounds of the exact norms ([`cluda_gpu::match_bound::radius`]).
//! 2. For each tile of left x right descriptors, cuBLAS computes `T = -2 A B^T` on the tensor
//!    cores (`CUBLAS_TF32_TENSOR_OP_MATH`: inputs reduced to TF32, FP32 accumulation) into a
//!    reused tile buffer; `cluda_match_v4_fold` adds `||b||^2` (the screen `s`), bounds its
//!    error `e` ([`cluda_gpu::match_bound::error`]), lowers the row's running
//!    `tau = min (s + e)` and appends every right row with `s - e <= threshold(tau)` to the
//!    row's candidate slots (`V4_SLOTS` per row; a row that needs more is marked overflowed).
//!    The tile is then overwritten by the next one: the `n x m` matrix never exists.
//! 3. `cluda_match_v4_rescore` computes each candidate's distance exactly as V2 does (`fma`
//!    over the 128 dimensions in order) and keeps the smallest, ties to the smaller index.
//!    Overflowed rows (clusters of near-duplicates) are recomputed with V2 by the caller.
//!
//! Step 2's tile loop is `gpu/tiles.rs`, shared with V3. With the feature `experimental`,
//! [`GpuMatcher::set_v4_kernel`] can have step 2 done instead by a kernel of ours that computes
//! the same screen with `mma.sync` TF32 instructions and never stores it (`fused`: two passes,
//! or one pass and a merge); slower today.
//!
//! Why V2's winner is always a candidate, with every constant: `docs/matcher.md`, "v4".

use cluda_gpu::args::{MatchV4FoldArgs, MatchV4RadiiArgs, MatchV4RescoreArgs};

use super::cublas::Math;
use super::tiles::{bare_gemm_ms, fold_args};
use super::{
    BLOCK, DeviceResult, Flags, GpuMatcher, Sides, grid_dim, launch, launch_rows, rescore_args,
};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Result};
use crate::matcher::tiling::V4Kernel;
use crate::matcher::types::Descriptor;

/// Candidate slots per row (the kernels' `V4_SLOTS`, shared with them).
pub const SLOTS: usize = cluda_gpu::layout::matcher::V4_SLOTS;

/// Runs a bare TF32 GEMM (`CUBLAS_TF32_TENSOR_OP_MATH`) of V4's whole problem (`n x m x 128`,
/// one call, output `n x m`), `reps` times after one warm-up; returns the median device
/// milliseconds. This is the floor V4 is measured against.
pub fn bare_tf32_ms(
    matcher: &mut GpuMatcher,
    lhs: &[Descriptor],
    rhs: &[Descriptor],
    reps: usize,
) -> Result<f64> {
    bare_gemm_ms(matcher, lhs, rhs, reps, Math::Tf32)
}

/// V4's outputs on the device: the per-row result, the overflowed rows (to recompute with V2)
/// and the candidate count per row (above [`SLOTS`] for an overflowed row).
pub(super) struct V4Out {
    pub result: DeviceResult,
    pub flags: Flags,
    pub counts: DeviceBuf<u32>,
}

/// V4's norms and radii of both sides, the right ones padded with zero norms to a multiple
/// of 4.
pub(super) struct Radii {
    pub norms_b: DeviceBuf<f32>,
    pub radii_a: DeviceBuf<f32>,
    pub radii_b: DeviceBuf<f32>,
}

impl GpuMatcher {
    /// Chooses how V4 computes its screen (default: cuBLAS tiles and the fold; the fused
    /// kernels need the feature `experimental`).
    pub fn set_v4_kernel(&mut self, kernel: V4Kernel) {
        self.v4_kernel = kernel;
    }

    /// V4 on uploaded descriptors (`n`, `m` >= 1), fused or tiled as set.
    pub(super) fn v4(&mut self, p: Sides<'_>) -> Result<V4Out> {
        match self.v4_kernel {
            V4Kernel::Cublas => self.v4_tiled(p),
            #[cfg(feature = "experimental")]
            V4Kernel::FusedTwoPass => self.v4_fused(p),
            #[cfg(feature = "experimental")]
            V4Kernel::FusedOnePass => self.v4_fused1(p),
        }
    }

    /// Norms and radii of both sides (the right ones padded to `m` rounded up to 4).
    pub(super) fn v4_radii(&self, p: Sides<'_>) -> Result<Radii> {
        let Sides(lhs, n, rhs, m) = p;
        let s = &self.stream;
        let mp = m.next_multiple_of(4);
        // Buffers that a kernel writes entirely are left uninitialised; the right norms'
        // padding and the norm maximum (unused by V4) start at zero.
        let norms_a = DeviceBuf::on_stream(s, n, "v4's left norms")?;
        let norms_b = DeviceBuf::zeroed_on_stream(s, mp, "v4's right norms")?;
        let radii_a = DeviceBuf::on_stream(s, n, "v4's left radii")?;
        let radii_b = DeviceBuf::on_stream(s, mp, "v4's right radii")?;
        let max = DeviceBuf::zeroed_on_stream(s, 1, "v4's norm maximum")?;
        for (x, rows, len, norms, radii, what) in [
            (lhs, n, n, &norms_a, &radii_a, "v4's norm kernels (lhs)"),
            (rhs, m, mp, &norms_b, &radii_b, "v4's norm kernels (rhs)"),
        ] {
            self.sqnorms(x, rows, norms, &max, what)?;
            let a = MatchV4RadiiArgs {
                norms: norms.ptr(),
                len: len as u32,
                radii: radii.ptr(),
            };
            let grid = (grid_dim(len.div_ceil(BLOCK as usize), "radii")?, 1);
            // SAFETY: norms and radii hold `len` floats (the right ones padded with zeros).
            unsafe { launch(s, &self.k.v4_radii, grid, a) }.cuda(&format!("launching {what}"))?;
        }
        Ok(Radii {
            norms_b,
            radii_a,
            radii_b,
        })
    }

    /// V4 with cuBLAS TF32 tiles and the fold kernel.
    fn v4_tiled(&mut self, p: Sides<'_>) -> Result<V4Out> {
        let n = p.1;
        let s = self.stream.clone();
        let r = self.v4_radii(p)?;
        // The first column tile (`first`) initialises every row's tau and count; slots are
        // written before they are counted.
        let tau = DeviceBuf::on_stream(&s, n, "v4's row bounds")?;
        let counts = DeviceBuf::on_stream(&s, n, "v4's candidate counts")?;
        let slot_d = DeviceBuf::on_stream(&s, n * SLOTS, "v4's candidates")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS, "v4's candidates")?;
        self.gemm_tiles(Math::Tf32, p, "v4", |k, fold, tile| {
            let a = fold_args!(MatchV4FoldArgs, tile, {
                norms_b: r.norms_b.ptr(),
                radii_b: r.radii_b.ptr(),
                radii_a: r.radii_a.ptr(),
                tau: tau.ptr(),
                count: counts.ptr(),
                slot_d: slot_d.ptr(),
                slot_i: slot_i.ptr(),
                first: tile.first(),
            });
            // SAFETY: tile rows x ld; right norms and radii padded to a multiple of 4 >= col0
            // + ld; per-row arrays n and slots n x SLOTS with row0 + rows <= n; all ready on
            // the fold stream (the driver's waits).
            unsafe { launch_rows(fold, &k.v4_fold, tile.rows, a, "v4's fold kernel") }
        })?;
        self.v4_rescore(p, counts, slot_i)
    }

    /// The exact rescoring of every row's candidates (`counts`, `slot_i`), and the overflowed
    /// rows' list.
    pub(super) fn v4_rescore(
        &self,
        p: Sides<'_>,
        counts: DeviceBuf<u32>,
        slot_i: DeviceBuf<u32>,
    ) -> Result<V4Out> {
        let (s, n) = (&self.stream, p.1);
        let out = DeviceResult::on_stream(s, n, "v4")?;
        let flags = Flags::on_stream(s, n, "v4")?;
        let a = rescore_args!(MatchV4RescoreArgs, p, out, flags, {
            count: counts.ptr(),
            slot_i: slot_i.ptr(),
        });
        // SAFETY: lhs n x 128, rhs m x 128 (slot indices < m), counts n, slots n x SLOTS,
        // idx/dist/flag_rows n, flag_count 1; the candidates are complete (in the stream's
        // order).
        unsafe { launch_rows(s, &self.k.v4_rescore, n, a, "v4's rescoring kernel") }?;
        Ok(V4Out {
            result: out,
            flags,
            counts,
        })
    }
}
