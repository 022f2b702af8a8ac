//! The matcher's kernels (compiled for `nvptx64-nvidia-cuda` only), one module per version;
//! the host side is `host/src/matcher/`.
//!
//! * [`v1`]: the full `n x m` distance matrix, then each row's minimum.
//! * [`v2`]: one fused, register-tiled kernel keeping each row's running best (and the merge
//!   of the right side's splits).
//! * [`v3`]: norms, the fold of cuBLAS SGEMM tiles into each row's best four, and their exact
//!   rescoring.
//! * [`v4`]: radii, the fold of cuBLAS TF32 tiles against a proven bound into each row's
//!   candidates, and their exact rescoring with V2's arithmetic.
//! * `fused` (feature `experimental`): V4's screen on the tensor cores inside the kernel.
//!
//! [`tile`] holds the exact register-tiled distances V1 and V2 share. Every kernel is declared
//! from the list in [`crate::matcher::args`] and runs its argument struct's `run`. Shared memory
//! is declared with inline PTX (`.shared`), one distinct name per kernel, and accessed with
//! `ld.shared` / `st.shared`; warp reductions use `shfl.sync.bfly`. Ties are broken towards the
//! smaller right index wherever two candidates are compared.

use core::arch::nvptx::{_block_dim_x, _block_idx_x, _thread_idx_x};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::kernels::prims::{shfl_xor_f32, shfl_xor_u32};
use crate::kernels::struct_entries;
use crate::layout::matcher::TILE_BYTES;
use crate::matcher::args::{
    MatchMergePartialsArgs, MatchSqnormsArgs, MatchV1DistancesArgs, MatchV1RowminArgs,
    MatchV2FusedArgs, MatchV3FoldArgs, MatchV3RescoreArgs, MatchV4FoldArgs, MatchV4RadiiArgs,
    MatchV4RescoreArgs,
};
#[cfg(feature = "experimental")]
use crate::matcher::args::{MatchV4Fused1Args, MatchV4FusedArgs, MatchV4MergeArgs};

/// Repeats `$body` with `$i` bound to the constants 0..N (guaranteed unrolling, so that
/// small per-thread arrays stay in registers instead of local memory).
macro_rules! unroll {
    (2, $i:ident, $body:block) => {
        unroll!(@ $i $body; 0 1)
    };
    (4, $i:ident, $body:block) => {
        unroll!(@ $i $body; 0 1 2 3)
    };
    (8, $i:ident, $body:block) => {
        unroll!(@ $i $body; 0 1 2 3 4 5 6 7)
    };
    (@ $i:ident $body:block; $($n:literal)*) => {{
        $({
            const $i: usize = $n;
            $body
        })*
    }};
}

/// [`put_best`] with the outputs of `$args` (a rescoring's argument struct, whose fields
/// `out_idx`, `out_dist`, `flag_count` and `flag_rows` are the group both rescorings share).
macro_rules! put_best {
    ($args:expr, $row:expr, $best:expr, $flag:expr) => {
        super::put_best(
            $args.out_idx,
            $args.out_dist,
            $row,
            $best,
            $flag,
            $args.flag_count,
            $args.flag_rows,
        )
    };
}

#[cfg(feature = "experimental")]
mod fused;
mod tile;
mod v1;
mod v2;
mod v3;
mod v4;

/// Loads four consecutive floats from global memory through the read-only path.
///
/// # Safety
/// `p` is a 16-byte aligned address of four floats in global memory.
#[inline(always)]
unsafe fn ldg4(p: *const f32) -> [f32; 4] {
    // SAFETY: as the caller promises.
    unsafe { crate::kernels::prims::ld_global_nc_f32x4(p) }
}

/// `(d, i)` beats `(bd, bi)`: smaller distance, ties to the smaller index.
#[inline(always)]
fn better(d: f32, i: u32, bd: f32, bi: u32) -> bool {
    d < bd || (d == bd && i < bi)
}

#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::f32::math::mul_add(a, b, c)
}

#[inline(always)]
fn tid() -> usize {
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    unsafe { _thread_idx_x() as usize }
}

/// `(row, lane)` of the calling thread in a launch of one warp per row.
#[inline(always)]
fn warp_row() -> (usize, usize) {
    let t = tid();
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    let warps = unsafe { _block_dim_x() as usize } / 32;
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    let row = unsafe { _block_idx_x() as usize } * warps + t / 32;
    (row, t % 32)
}

/// Minimum `(distance, index)` over the warp (ties to the smaller index); every lane gets it.
#[inline(always)]
fn warp_min(mut bd: f32, mut bi: u32) -> (f32, u32) {
    let mut o = 16;
    while o > 0 {
        // SAFETY: the whole warp runs this: its rows are warp-uniform and a warp past the last row
        // returned as a whole (its callers' contract).
        let (d, i) = unsafe { (shfl_xor_f32(bd, o), shfl_xor_u32(bi, o)) };
        if better(d, i, bd, bi) {
            bd = d;
            bi = i;
        }
        o /= 2;
    }
    (bd, bi)
}

/// Writes row `row`'s best `(distance, index)` to `out_dist` / `out_idx` and, when `flag`,
/// appends the row to `flag_rows` (counted by the `u32` at `flag_count`): the end of V3's and
/// V4's rescoring.
///
/// # Safety
/// `row < n`, the outputs and the flag list hold `n` values and the counter one word, and each
/// row is flagged at most once (so at most `n` are).
#[inline(always)]
unsafe fn put_best(
    out_idx: *mut u32,
    out_dist: *mut f32,
    row: usize,
    (bd, bi): (f32, u32),
    flag: bool,
    flag_count: *mut u32,
    flag_rows: *mut u32,
) {
    // SAFETY: as the caller promises; at most `n` rows are flagged, so `slot < n`.
    unsafe {
        *out_idx.add(row) = bi;
        *out_dist.add(row) = bd;
        if flag {
            let slot = (*(flag_count as *const AtomicU32)).fetch_add(1, Ordering::Relaxed);
            *flag_rows.add(slot as usize) = row as u32;
        }
    }
}

// Keep the unused-constant lint quiet for tile sizes only used in the docs' arithmetic.
const _: () = assert!(TILE_BYTES == 8448);

crate::matcher_kernels!(plain; struct_entries;);
#[cfg(feature = "experimental")]
crate::matcher_kernels!(fused; struct_entries;);
