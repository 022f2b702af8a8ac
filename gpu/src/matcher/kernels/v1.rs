//! V1: `cluda_match_v1_distances` writes the full `n x m` distance matrix (the shared
//! [`super::tile`] distances, 128 x 128 per block), then `cluda_match_v1_rowmin` takes each
//! row's minimum (one warp per row).

use core::arch::nvptx::{_block_idx_x, _block_idx_y};

use super::tile::{micro, tile_distances};
use super::{tid, warp_min, warp_row};
use crate::kernels::prims::shared_array;
use crate::layout::matcher::{BM, BN, TILE_BYTES};
use crate::matcher::args::{MatchV1DistancesArgs, MatchV1RowminArgs};

/// V1 step 1: `dist[i * m + j] = ||lhs_i - rhs_j||^2` (fp32, fma) for the 128 x 128 tile
/// (`blockIdx.y`, `blockIdx.x`). 256 threads per block.
impl MatchV1DistancesArgs {
    /// The body of `cluda_match_v1_distances` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let sa = shared_array!(window "cluda_v1_sa", TILE_BYTES);
        let sb = shared_array!(window "cluda_v1_sb", TILE_BYTES);
        let (n, m) = (self.n as usize, self.m as usize);
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let (row0, col0) = unsafe { (_block_idx_y() as usize * BM, _block_idx_x() as usize * BN) };
        // SAFETY: `lhs` and `rhs` hold `n` and `m` rows of 128 floats, `sa`/`sb` are this kernel's
        // shared tiles, and every thread of the block calls this (the launch's contract).
        let acc = unsafe { tile_distances((self.lhs, n, row0), (self.rhs, m, col0), (sa, sb), t) };
        let (tx, ty) = (t % 16, t / 16);
        unroll!(8, I, {
            let r = row0 + micro(ty, I);
            if r < n {
                unroll!(8, J, {
                    let c = col0 + micro(tx, J);
                    if c < m {
                        // SAFETY: `r < n` and `c < m`, and `dist` holds `n x m` floats (the
                        // launch's contract).
                        unsafe { *self.dist.add(r * m + c) = acc[I][J] };
                    }
                });
            }
        });
    }
}

/// V1 step 2: for each row of the `n x m` matrix, its minimum and the (smallest) index of it.
/// One warp per row; any block size that is a multiple of 32.
impl MatchV1RowminArgs {
    /// The body of `cluda_match_v1_rowmin` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let (row, lane) = warp_row();
        let (n, m) = (self.n as usize, self.m as usize);
        if row >= n {
            return; // whole warp leaves together
        }
        // SAFETY: `row < n`, and `dist` holds `n x m` floats (the launch's contract).
        let base = unsafe { self.dist.add(row * m) };
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let mut j = lane;
        while j < m {
            // SAFETY: `j < m`: inside row `row`.
            let d = unsafe { *base.add(j) };
            if d < bd {
                bd = d;
                bi = j as u32;
            }
            j += 32;
        }
        let (bd, bi) = warp_min(bd, bi);
        if lane == 0 {
            // SAFETY: `row < n`, and `out_idx`/`out_dist` hold `n` values each (the launch's
            // contract).
            unsafe {
                *self.out_idx.add(row) = bi;
                *self.out_dist.add(row) = bd;
            }
        }
    }
}
