//! The register-tiled exact distances V1 and V2 share: a block's 128 x 128 tile of
//! `sum (a_k - b_k)^2`, staged through shared memory 16 dimensions at a time (transposed,
//! padded rows against bank conflicts) from 16-byte global loads, each thread keeping an
//! 8 x 8 micro-tile in registers. `load_chunk` also feeds the fused V4 kernels' stages.

use super::{fma, ldg4};
use crate::kernels::prims::{ld_shared_f32x4, st_shared_f32};
use crate::layout::matcher::{BLOCK, DIM, KC, LD};

/// Loads this thread's two float4s of chunk `kc` of the 128-row tile starting at `row0`
/// (rows past `rows` are clamped to the last row; their results are never used).
#[inline(always)]
pub(super) unsafe fn load_chunk(
    base: *const f32,
    row0: usize,
    rows: usize,
    kc: usize,
    t: usize,
) -> [[f32; 4]; 2] {
    let mut out = [[0.0f32; 4]; 2];
    unroll!(2, Q, {
        let f = t + BLOCK as usize * Q;
        let row = f / 4;
        let part = f % 4;
        let mut r = row0 + row;
        if r >= rows {
            r = rows - 1;
        }
        // SAFETY: `r < rows` (clamped) and the chunk's 16 dimensions lie inside row `r` of the
        // `rows x 128` array at `base` (the caller's contract); 16-byte aligned (an allocation's
        // start, rows of 512 bytes, parts of 16).
        out[Q] = unsafe { ldg4(base.add(r * DIM + kc * KC + part * 4)) };
    });
    out
}

/// Stores a loaded chunk transposed (`sh[k][row]`) into shared memory.
#[inline(always)]
pub(super) unsafe fn store_chunk(sh: u64, v: [[f32; 4]; 2], t: usize) {
    unroll!(2, Q, {
        let f = t + BLOCK as usize * Q;
        let row = f / 4;
        let part = f % 4;
        unroll!(4, E, {
            // SAFETY: `sh` is a shared tile of KC x LD floats (the caller's contract); `part * 4 +
            // E < KC` and `row < BM <= LD`, so the address lies inside it, 4-byte aligned.
            unsafe { st_shared_f32(sh + (((part * 4 + E) * LD + row) * 4) as u64, v[Q][E]) };
        });
    });
}

/// The chunk loop of a block tile of `a . b` products, written once for [`tile_distances`] and
/// V4's fused kernels (a macro rather than a function taking closures: the closures would not
/// all be inlined): for each 16-dimension chunk of the 128, between two barriers `$stage` (in
/// an `unsafe` block) stores this thread's part of the chunk of both sides, `$pa` and `$pb`
/// (as [`load_chunk`] loads them), into the block's shared memory; the next chunk's global
/// loads are issued before `$consume` reads the staged chunk. The caller ensures that
/// `$a` holds `$n` rows and `$b` `$m` rows of 128 floats and that every thread of the block
/// runs this (it holds barriers).
macro_rules! staged_chunks {
    (($a:expr, $n:expr, $row0:expr), ($b:expr, $m:expr, $col0:expr), $t:expr,
        |$pa:ident, $pb:ident| $stage:block, $consume:block) => {{
        // SAFETY: `$a` holds `$n` rows of 128 floats (the caller's contract), as `load_chunk`
        // needs.
        let mut $pa = unsafe { $crate::matcher::kernels::tile::load_chunk($a, $row0, $n, 0, $t) };
        // SAFETY: `$b` holds `$m` rows of 128 floats (the caller's contract).
        let mut $pb = unsafe { $crate::matcher::kernels::tile::load_chunk($b, $col0, $m, 0, $t) };
        let mut kc = 0;
        while kc < DIM / KC {
            // SAFETY: every thread of the block reaches these barriers (the loop bounds are
            // block-uniform); the stores go to the block's shared arrays (the caller's
            // contract).
            unsafe {
                core::arch::nvptx::_syncthreads(); // everyone is done reading the previous chunk
                $stage
                core::arch::nvptx::_syncthreads();
            }
            if kc + 1 < DIM / KC {
                // SAFETY: as the first `load_chunk` above.
                $pa = unsafe {
                    $crate::matcher::kernels::tile::load_chunk($a, $row0, $n, kc + 1, $t)
                };
                // SAFETY: as the first `load_chunk` above.
                $pb = unsafe {
                    $crate::matcher::kernels::tile::load_chunk($b, $col0, $m, kc + 1, $t)
                };
            }
            $consume
            kc += 1;
        }
    }};
}
#[cfg(feature = "experimental")]
pub(super) use staged_chunks;

/// One side of a block tile: its descriptors (rows of 128 floats), how many, and the tile's
/// first row.
pub(super) type Side = (*const f32, usize, usize);

/// Exact squared distances of this thread's 8 x 8 micro-tile: left rows
/// `row0 + {ty*4..ty*4+4, 64+ty*4..64+ty*4+4}` against right rows
/// `col0 + {tx*4..tx*4+4, 64+tx*4..64+tx*4+4}` (256 threads, tx = t % 16, ty = t / 16).
/// Global loads of the next chunk are issued before the current chunk is consumed. `sa` and
/// `sb` are the block's shared tiles.
#[inline(always)]
pub(super) unsafe fn tile_distances(
    (a, n, row0): Side,
    (b, m, col0): Side,
    (sa, sb): (u64, u64),
    t: usize,
) -> [[f32; 8]; 8] {
    let tx = t % 16;
    let ty = t / 16;
    let mut acc = [[0.0f32; 8]; 8];
    // `sa` and `sb` are the block's shared tiles (the caller's contract).
    staged_chunks!(
        (a, n, row0),
        (b, m, col0),
        t,
        |pa, pb| {
            store_chunk(sa, pa, t);
            store_chunk(sb, pb, t);
        },
        {
            let mut k = 0;
            while k < KC {
                unroll!(4, KK, {
                    let row = ((k + KK) * LD * 4) as u64;
                    // SAFETY: `sa` is a shared tile of KC x LD floats; `k + KK < KC` and the row
                    // offsets (at most 256 + 15 * 16 + 16 bytes) lie inside a row of `LD * 4` bytes,
                    // 16-byte aligned.
                    let a0 = unsafe { ld_shared_f32x4(sa + row + (ty * 16) as u64) };
                    // SAFETY: as above.
                    let a1 = unsafe { ld_shared_f32x4(sa + row + (256 + ty * 16) as u64) };
                    // SAFETY: as above, in `sb`.
                    let b0 = unsafe { ld_shared_f32x4(sb + row + (tx * 16) as u64) };
                    // SAFETY: as above, in `sb`.
                    let b1 = unsafe { ld_shared_f32x4(sb + row + (256 + tx * 16) as u64) };
                    let av = [a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]];
                    let bv = [b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]];
                    unroll!(8, I, {
                        unroll!(8, J, {
                            let d = av[I] - bv[J];
                            acc[I][J] = fma(d, d, acc[I][J]);
                        });
                    });
                });
                k += 4;
            }
        }
    );
    acc
}

/// Offset of micro-tile element `i` (0..8) of thread coordinate `c` (tx or ty) in its tile.
#[inline(always)]
pub(super) fn micro(c: usize, i: usize) -> usize {
    if i < 4 {
        c * 4 + i
    } else {
        64 + c * 4 + (i - 4)
    }
}
