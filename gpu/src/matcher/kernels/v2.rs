//! V2: `cluda_match_v2_fused` is one fused, register-tiled kernel: a block owns 128 left rows
//! and walks a range of 128-wide right tiles ([`super::tile`]), folding every tile into its
//! rows' running best; nothing of the distance matrix is stored. The right side can be split
//! over `gridDim.y` blocks (to fill the GPU when `n` is small); `cluda_match_merge_partials`
//! then merges the splits.

use core::arch::nvptx::{_block_idx_x, _block_idx_y};

use super::tile::{micro, tile_distances};
use super::{better, tid};
use crate::kernels::global_index_x;
use crate::kernels::prims::{shared_array, shfl_xor_f32, shfl_xor_u32};
use crate::layout::matcher::{BM, BN, TILE_BYTES};
use crate::matcher::args::{MatchMergePartialsArgs, MatchV2FusedArgs};

/// V2: fused tiled nearest neighbour. Block `(x, y)` handles left rows `x*128..x*128+128`
/// against right tiles `y*tiles_per_split ..` (at most `tiles_per_split` tiles of 128 rows),
/// keeping each row's best in registers, and writes `(part_dist, part_idx)[row * splits + y]`.
/// 256 threads per block.
impl MatchV2FusedArgs {
    /// The body of `cluda_match_v2_fused` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let sa = shared_array!(window "cluda_v2_sa", TILE_BYTES);
        let sb = shared_array!(window "cluda_v2_sb", TILE_BYTES);
        let (n, m) = (self.n as usize, self.m as usize);
        let t = tid();
        let (tx, ty) = (t % 16, t / 16);
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row0 = unsafe { _block_idx_x() as usize } * BM;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let split = unsafe { _block_idx_y() as usize };
        let tiles = m.div_ceil(BN);
        let first = split * self.tiles_per_split as usize;
        let last = core::cmp::min(first + self.tiles_per_split as usize, tiles);
        let mut bd = [f32::INFINITY; 8];
        let mut bi = [u32::MAX; 8];
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: as in V1: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's
            // tiles, and every thread of the block calls this.
            let acc =
                unsafe { tile_distances((self.lhs, n, row0), (self.rhs, m, col0), (sa, sb), t) };
            unroll!(8, J, {
                let c = col0 + micro(tx, J);
                if c < m {
                    unroll!(8, I, {
                        // columns are visited in increasing order within a thread: `<` keeps the
                        // smaller index on ties.
                        if acc[I][J] < bd[I] {
                            bd[I] = acc[I][J];
                            bi[I] = c as u32;
                        }
                    });
                }
            });
            tile += 1;
        }
        // The 16 threads of a row group (same ty) are one half-warp: reduce over tx.
        unroll!(8, I, {
            unroll!(4, S, {
                let o = 8u32 >> S;
                // SAFETY: unconditional, so all 32 lanes execute it.
                let (d, k) = unsafe { (shfl_xor_f32(bd[I], o), shfl_xor_u32(bi[I], o)) };
                if better(d, k, bd[I], bi[I]) {
                    bd[I] = d;
                    bi[I] = k;
                }
            });
        });
        if tx == 0 {
            let splits = self.splits as usize;
            unroll!(8, I, {
                let r = row0 + micro(ty, I);
                if r < n {
                    // SAFETY: `r < n` and `split < splits`, and the partials hold `n x splits`
                    // values (the launch's contract).
                    unsafe {
                        *self.part_dist.add(r * splits + split) = bd[I];
                        *self.part_idx.add(r * splits + split) = bi[I];
                    }
                }
            });
        }
    }
}

/// V2 step 2 (only when the right side was split): each row's best over its `splits` partial
/// results. One thread per row.
impl MatchMergePartialsArgs {
    /// The body of `cluda_match_merge_partials` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let row = global_index_x();
        if row >= self.n as usize {
            return;
        }
        let s = self.splits as usize;
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let mut k = 0;
        while k < s {
            // SAFETY: `row < n` and `k < splits`, inside the `n x splits` partials (the launch's
            // contract).
            let (d, i) = unsafe {
                (
                    *self.part_dist.add(row * s + k),
                    *self.part_idx.add(row * s + k),
                )
            };
            if better(d, i, bd, bi) {
                bd = d;
                bi = i;
            }
            k += 1;
        }
        // SAFETY: `row < n`, and the outputs hold `n` values each (the launch's contract).
        unsafe {
            *self.out_idx.add(row) = bi;
            *self.out_dist.add(row) = bd;
        }
    }
}
