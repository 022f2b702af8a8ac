//! V2: one fused tiled kernel (`cluda_match_v2_fused`, see `gpu/src/matcher/kernels/v2.rs`): a
//! block owns 128 left rows and a contiguous range of 128-wide right tiles and keeps each row's
//! running best in registers; the distance matrix is never stored. When the left side alone
//! gives too few blocks to fill the GPU, the right side is split over `gridDim.y`, and
//! `cluda_match_merge_partials` merges the per-split bests.

use cluda_gpu::args::{MatchMergePartialsArgs, MatchV2FusedArgs};

use super::{BLOCK, DeviceResult, GpuMatcher, Sides, grid_dim, launch};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Result};

/// Blocks per multiprocessor V2 aims for (several waves keep the tail short).
const BLOCKS_PER_SM: usize = 16;

/// `(splits, tiles_per_split)` for `n x m`: enough blocks to fill `sms` multiprocessors, every
/// split holding at least one right tile.
pub(super) fn split_plan(n: usize, m: usize, sms: usize) -> (usize, usize) {
    let left_blocks = n.div_ceil(128).max(1);
    let tiles = m.div_ceil(128).max(1);
    let want = (sms * BLOCKS_PER_SM)
        .div_ceil(left_blocks)
        .clamp(1, tiles.min(65_535));
    let per = tiles.div_ceil(want);
    (tiles.div_ceil(per), per)
}

impl GpuMatcher {
    /// V2 on uploaded descriptors (`n`, `m` >= 1).
    pub(super) fn v2(&self, p: Sides<'_>) -> Result<DeviceResult> {
        let Sides(lhs, n, rhs, m) = p;
        let s = &self.stream;
        let (splits, per) = split_plan(n, m, self.sms);
        let part_d = DeviceBuf::zeroed_on_stream(s, n * splits, "v2's partial distances")?;
        let part_i = DeviceBuf::zeroed_on_stream(s, n * splits, "v2's partial indices")?;
        let (n32, m32, per32, splits32) = (n as u32, m as u32, per as u32, splits as u32);
        let grid = (grid_dim(n.div_ceil(128), "left tiles")?, splits32);
        {
            let a = MatchV2FusedArgs {
                lhs: lhs.ptr(),
                n: n32,
                rhs: rhs.ptr(),
                m: m32,
                tiles_per_split: per32,
                splits: splits32,
                part_dist: part_d.ptr(),
                part_idx: part_i.ptr(),
            };
            // SAFETY: lhs n x 128, rhs m x 128, partials n x splits, as the kernel indexes
            // them.
            unsafe { launch(s, &self.k.v2_fused, grid, a) }.cuda("launching v2's fused kernel")?;
        }
        let idx = DeviceBuf::zeroed_on_stream(s, n, "v2's indices")?;
        let dist = DeviceBuf::zeroed_on_stream(s, n, "v2's distances")?;
        {
            let a = MatchMergePartialsArgs {
                part_dist: part_d.ptr(),
                part_idx: part_i.ptr(),
                n: n32,
                splits: splits32,
                out_idx: idx.ptr(),
                out_dist: dist.ptr(),
            };
            let grid = (grid_dim(n.div_ceil(BLOCK as usize), "rows")?, 1);
            // SAFETY: partials n x splits, idx and dist n.
            unsafe { launch(s, &self.k.merge_partials, grid, a) }
                .cuda("launching v2's merge kernel")?;
        }
        Ok(DeviceResult { idx, dist })
    }
}

#[cfg(test)]
mod tests {
    use super::split_plan;

    #[test]
    fn every_split_has_a_tile_and_all_tiles_are_covered() {
        for n in [1, 127, 128, 129, 4097, 16384, 1 << 20] {
            for m in [1, 5, 128, 129, 5000, 16384, 100_000] {
                for sms in [1, 8, 132] {
                    let (splits, per) = split_plan(n, m, sms);
                    let tiles = m.div_ceil(128);
                    assert!((1..=65_535).contains(&splits), "{n} {m} {sms}");
                    assert!(splits * per >= tiles, "{n} {m} {sms}: tiles uncovered");
                    assert!((splits - 1) * per < tiles, "{n} {m} {sms}: an empty split");
                }
            }
        }
    }
}
