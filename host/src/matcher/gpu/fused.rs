//! V4's fused screens (feature `experimental`): instead of cuBLAS tiles and the fold, a kernel
//! of ours computes the screen with `mma.sync` TF32 instructions and never stores it, either in
//! two passes (`cluda_match_v4_fused`: each row's `tau`, then the candidates against the final
//! threshold) or in one (`cluda_match_v4_fused1`: running bounds and candidate lists per right
//! split, merged by `cluda_match_v4_merge`). Both hand their candidates to V4's rescoring and
//! give V4's result; both are slower today than the tiled V4 (`docs/matcher.md`).

use cluda_gpu::args::{MatchV4Fused1Args, MatchV4FusedArgs, MatchV4MergeArgs};

use super::v2::split_plan;
use super::v4::{Radii, SLOTS, V4Out};
use super::{BLOCK, GpuMatcher, Sides, grid_dim, launch};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Result};

/// Candidate slots per row and right split of the one-pass fused kernel.
const SPLIT_SLOTS: usize = cluda_gpu::layout::matcher::V4_SPLIT_SLOTS;

/// `$args { the sides, the split, the right norms and both sides' radii, $rest }`: a fused
/// kernel's arguments, whose first fields are these groups (the kernels' field groups).
macro_rules! screen_args {
    ($args:ident, $plan:expr, { $($rest:tt)* }) => {{
        let Plan(Sides(lhs, n, rhs, m), r, splits, per) = $plan;
        $args {
            lhs: lhs.ptr(),
            n: n as u32,
            rhs: rhs.ptr(),
            m: m as u32,
            tiles_per_split: per as u32,
            splits: splits as u32,
            norms_b: r.norms_b.ptr(),
            radii_b: r.radii_b.ptr(),
            radii_a: r.radii_a.ptr(),
            $($rest)*
        }
    }};
}

/// A fused run's plan: the sides, their norms and radii, and the split of the right side
/// (`splits` of `per` tiles each, as V2's).
struct Plan<'a, 'r>(Sides<'a>, &'r Radii, usize, usize);

impl GpuMatcher {
    /// The norms and radii of `p` and the split of its right side.
    fn plan(&self, p: Sides<'_>) -> Result<(Radii, usize, usize)> {
        let (splits, per) = split_plan(p.1, p.3, self.sms);
        Ok((self.v4_radii(p)?, splits, per))
    }

    /// V4 with its fused kernel: two passes of `cluda_match_v4_fused` (row bounds, then
    /// candidates), then the rescoring.
    pub(super) fn v4_fused(&mut self, p: Sides<'_>) -> Result<V4Out> {
        let (s, n) = (self.stream.clone(), p.1);
        let (r, splits, per) = self.plan(p)?;
        // Pass 1 writes every (row, split); the counts start at zero; slots are written
        // before they are counted.
        let part_tau = DeviceBuf::on_stream(&s, n * splits, "v4's row bounds")?;
        let counts = DeviceBuf::zeroed_on_stream(&s, n, "v4's candidate counts")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS, "v4's candidates")?;
        let grid = (grid_dim(n.div_ceil(128), "left tiles")?, splits as u32);
        for gather in [0u32, 1] {
            let a = screen_args!(MatchV4FusedArgs, Plan(p, &r, splits, per), {
                part_tau: part_tau.ptr(),
                count: counts.ptr(),
                slot_i: slot_i.ptr(),
                gather,
            });
            // SAFETY: lhs n x 128, rhs m x 128, right norms and radii >= m, left radii n,
            // partials n x splits, counts n, slots n x SLOTS, as the kernel indexes them; pass
            // 2 runs after pass 1 on the same stream.
            unsafe { launch(&s, &self.k.v4_fused, grid, a) }.cuda("launching v4's fused kernel")?;
        }
        self.v4_rescore(p, counts, slot_i)
    }

    /// V4 with its one-pass fused kernel and the merge, then the rescoring.
    pub(super) fn v4_fused1(&mut self, p: Sides<'_>) -> Result<V4Out> {
        let (s, n) = (self.stream.clone(), p.1);
        let (r, splits, per) = self.plan(p)?;
        // Every (row, split) of the partials is written by the fused kernel, the lists up to
        // their counts; the merge writes every count and the slots up to it.
        let part_tau = DeviceBuf::on_stream(&s, n * splits, "v4's row bounds")?;
        let part_cnt = DeviceBuf::on_stream(&s, n * splits, "v4's split counts")?;
        let part_l = DeviceBuf::on_stream(&s, n * splits * SPLIT_SLOTS, "v4's split lists")?;
        let part_j = DeviceBuf::on_stream(&s, n * splits * SPLIT_SLOTS, "v4's split lists")?;
        let counts = DeviceBuf::on_stream(&s, n, "v4's candidate counts")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS, "v4's candidates")?;
        let a = screen_args!(MatchV4Fused1Args, Plan(p, &r, splits, per), {
            part_tau: part_tau.ptr(),
            part_cnt: part_cnt.ptr(),
            part_l: part_l.ptr(),
            part_j: part_j.ptr(),
        });
        let grid = (grid_dim(n.div_ceil(128), "left tiles")?, splits as u32);
        // SAFETY: lhs n x 128, rhs m x 128, right norms and radii >= m, left radii n,
        // partials n x splits (lists n x splits x SPLIT_SLOTS), as the kernel indexes them.
        unsafe { launch(&s, &self.k.v4_fused1, grid, a) }
            .cuda("launching v4's one-pass fused kernel")?;
        let a = MatchV4MergeArgs {
            part_tau: part_tau.ptr(),
            part_cnt: part_cnt.ptr(),
            part_l: part_l.ptr(),
            part_j: part_j.ptr(),
            n: n as u32,
            splits: splits as u32,
            radii_a: r.radii_a.ptr(),
            count: counts.ptr(),
            slot_i: slot_i.ptr(),
        };
        let grid = (grid_dim(n.div_ceil(BLOCK as usize), "rows")?, 1);
        // SAFETY: the partials as above, left radii n, counts n, slots n x SLOTS; after the
        // fused kernel on the same stream.
        unsafe { launch(&s, &self.k.v4_merge, grid, a) }.cuda("launching v4's merge kernel")?;
        self.v4_rescore(p, counts, slot_i)
    }
}
