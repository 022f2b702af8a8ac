//! Nearest-neighbour descriptor matching kernels (128-float descriptors, squared L2).
//!
//! Three pipelines are built from these kernels (the host side is `host/src/matcher/`):
//!
//! * **V1** `cluda_match_v1_distances` writes the full `n x m` distance matrix, then
//!   `cluda_match_v1_rowmin` takes each row's minimum (one warp per row).
//! * **V2** `cluda_match_v2_fused` is one fused, register-tiled kernel: a block owns 128 left
//!   rows and walks a range of 128-wide right tiles; every 16-dimension chunk of both tiles is
//!   staged in shared memory (transposed, padded rows against bank conflicts) from 16-byte
//!   global loads; each thread keeps an 8 x 8 micro-tile of exact `(a - b)^2` sums in registers
//!   (`fma`) and, after each right tile, folds it into its rows' running best. Nothing of the
//!   distance matrix is ever stored. The right side can be split over `gridDim.y` blocks (to fill
//!   the GPU when `n` is small); `cluda_match_merge_partials` then merges the splits.
//! * **V3** the host computes tiles of `-2 A B^T` with cuBLAS SGEMM; `cluda_match_sqnorms`
//!   computes squared norms, `cluda_match_v3_fold` adds `||b||^2` to a tile and folds it into
//!   each row's running best *four* candidates (the tile is then discarded), and
//!   `cluda_match_v3_rescore` recomputes the exact fp32 distance of those four candidates,
//!   keeps the best and flags rows where the GEMM's rounding error could have hidden the true
//!   neighbour outside the four (the host recomputes those rows with V2).
//!
//! Shared memory is declared with inline PTX (`.shared`), one distinct name per kernel, and
//! accessed with `ld.shared` / `st.shared`; warp reductions use `shfl.sync.bfly`.
//! Ties are broken towards the smaller right index wherever two candidates are compared.

use core::arch::asm;

use super::prims::{
    ballot, ld_shared_f32x4, ld_shared_u32, shared_array, shfl_idx, shfl_xor_f32, shfl_xor_u32,
    st_shared_f32, st_shared_u32,
};
use core::arch::nvptx::{_block_dim_x, _block_idx_x, _block_idx_y, _syncthreads, _thread_idx_x};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::args::{
    MatchMergePartialsArgs, MatchSqnormsArgs, MatchV1DistancesArgs, MatchV1RowminArgs,
    MatchV2FusedArgs, MatchV3FoldArgs, MatchV3RescoreArgs, MatchV4FoldArgs, MatchV4Fused1Args,
    MatchV4FusedArgs, MatchV4MergeArgs, MatchV4RadiiArgs, MatchV4RescoreArgs,
};
use crate::layout::matcher::{BLOCK, BM, BN, KC, LD, TILE_BYTES, mma};
pub use crate::layout::matcher::{DIM, V3_K, V4_SLOTS, V4_SPLIT_SLOTS};
use crate::match_bound::{error, radius, row_terms, threshold};

/// Repeats `$body` with `$i` bound to the constants 0..N (guaranteed unrolling, so that
/// small per-thread arrays stay in registers instead of local memory).
macro_rules! unroll {
    (2, $i:ident, $body:block) => {{
        {
            const $i: usize = 0;
            $body
        }
        {
            const $i: usize = 1;
            $body
        }
    }};
    (4, $i:ident, $body:block) => {{
        {
            const $i: usize = 0;
            $body
        }
        {
            const $i: usize = 1;
            $body
        }
        {
            const $i: usize = 2;
            $body
        }
        {
            const $i: usize = 3;
            $body
        }
    }};
    (8, $i:ident, $body:block) => {{
        {
            const $i: usize = 0;
            $body
        }
        {
            const $i: usize = 1;
            $body
        }
        {
            const $i: usize = 2;
            $body
        }
        {
            const $i: usize = 3;
            $body
        }
        {
            const $i: usize = 4;
            $body
        }
        {
            const $i: usize = 5;
            $body
        }
        {
            const $i: usize = 6;
            $body
        }
        {
            const $i: usize = 7;
            $body
        }
    }};
}

/// Loads four consecutive floats from global memory through the read-only path.
#[inline(always)]
unsafe fn ldg4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    // SAFETY: a 16-byte aligned address of four floats in global memory (the caller's contract).
    unsafe {
        asm!(
            "ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];",
            p = in(reg64) p,
            a = out(reg32) a,
            b = out(reg32) b,
            c = out(reg32) c,
            d = out(reg32) d,
            options(pure, readonly, nostack),
        );
    }
    [a, b, c, d]
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

// ---------------------------------------------------------------------------------------------
// Shared tile machinery of V1 and V2
// ---------------------------------------------------------------------------------------------

/// Loads this thread's two float4s of chunk `kc` of the 128-row tile starting at `row0`
/// (rows past `rows` are clamped to the last row; their results are never used).
#[inline(always)]
unsafe fn load_chunk(
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
unsafe fn store_chunk(sh: u64, v: [[f32; 4]; 2], t: usize) {
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

/// Exact squared distances of this thread's 8 x 8 micro-tile: left rows
/// `row0 + {ty*4..ty*4+4, 64+ty*4..64+ty*4+4}` against right rows
/// `col0 + {tx*4..tx*4+4, 64+tx*4..64+tx*4+4}` (256 threads, tx = t % 16, ty = t / 16).
/// Global loads of the next chunk are issued before the current chunk is consumed.
#[inline(always)]
unsafe fn tile_distances(
    a: *const f32,
    n: usize,
    row0: usize,
    b: *const f32,
    m: usize,
    col0: usize,
    sa: u64,
    sb: u64,
    t: usize,
) -> [[f32; 8]; 8] {
    let tx = t % 16;
    let ty = t / 16;
    let mut acc = [[0.0f32; 8]; 8];
    // SAFETY: `a` holds `n` rows of 128 floats (the caller's contract), as `load_chunk` needs.
    let mut pa = unsafe { load_chunk(a, row0, n, 0, t) };
    // SAFETY: `b` holds `m` rows of 128 floats (the caller's contract).
    let mut pb = unsafe { load_chunk(b, col0, m, 0, t) };
    let mut kc = 0;
    while kc < DIM / KC {
        // SAFETY: every thread of the block reaches these barriers (the loop bounds are block-
        // uniform); `sa` and `sb` are the block's shared tiles.
        unsafe {
            _syncthreads(); // everyone is done reading the previous chunk
            store_chunk(sa, pa, t);
            store_chunk(sb, pb, t);
            _syncthreads();
        }
        if kc + 1 < DIM / KC {
            // SAFETY: as the first `load_chunk` above.
            pa = unsafe { load_chunk(a, row0, n, kc + 1, t) };
            // SAFETY: as the first `load_chunk` above.
            pb = unsafe { load_chunk(b, col0, m, kc + 1, t) };
        }
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
        kc += 1;
    }
    acc
}

/// Offset of micro-tile element `i` (0..8) of thread coordinate `c` (tx or ty) in its tile.
#[inline(always)]
fn micro(c: usize, i: usize) -> usize {
    if i < 4 {
        c * 4 + i
    } else {
        64 + c * 4 + (i - 4)
    }
}

// ---------------------------------------------------------------------------------------------
// V1
// ---------------------------------------------------------------------------------------------

/// V1 step 1: `dist[i * m + j] = ||lhs_i - rhs_j||^2` (fp32, fma) for the 128 x 128 tile
/// (`blockIdx.y`, `blockIdx.x`). 256 threads per block.
impl MatchV1DistancesArgs {
    /// The body of `cluda_match_v1_distances` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            n,
            rhs,
            m,
            dist,
        } = self;
        let sa = shared_array!(window "cluda_v1_sa", TILE_BYTES);
        let sb = shared_array!(window "cluda_v1_sb", TILE_BYTES);
        let (n, m) = (n as usize, m as usize);
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let (row0, col0) = unsafe { (_block_idx_y() as usize * BM, _block_idx_x() as usize * BN) };
        // SAFETY: `lhs` and `rhs` hold `n` and `m` rows of 128 floats, `sa`/`sb` are this kernel's
        // shared tiles, and every thread of the block calls this (the launch's contract).
        let acc = unsafe { tile_distances(lhs, n, row0, rhs, m, col0, sa, sb, t) };
        let (tx, ty) = (t % 16, t / 16);
        unroll!(8, I, {
            let r = row0 + micro(ty, I);
            if r < n {
                unroll!(8, J, {
                    let c = col0 + micro(tx, J);
                    if c < m {
                        // SAFETY: `r < n` and `c < m`, and `dist` holds `n x m` floats (the
                        // launch's contract).
                        unsafe { *dist.add(r * m + c) = acc[I][J] };
                    }
                });
            }
        });
    }
}

/// V1 step 2: for each row of the `n x m` matrix, its minimum and the (smallest) index of it.
/// One warp per row; any block size that is a multiple of 32.
impl MatchV1RowminArgs {
    /// The body of `cluda_match_v1_rowmin` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            dist,
            n,
            m,
            out_idx,
            out_dist,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        let (n, m) = (n as usize, m as usize);
        if row >= n {
            return; // whole warp leaves together
        }
        // SAFETY: `row < n`, and `dist` holds `n x m` floats (the launch's contract).
        let base = unsafe { dist.add(row * m) };
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
                *out_idx.add(row) = bi;
                *out_dist.add(row) = bd;
            }
        }
    }
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

// ---------------------------------------------------------------------------------------------
// V2
// ---------------------------------------------------------------------------------------------

/// V2: fused tiled nearest neighbour. Block `(x, y)` handles left rows `x*128..x*128+128`
/// against right tiles `y*tiles_per_split ..` (at most `tiles_per_split` tiles of 128 rows),
/// keeping each row's best in registers, and writes `(part_dist, part_idx)[row * splits + y]`.
/// 256 threads per block.
impl MatchV2FusedArgs {
    /// The body of `cluda_match_v2_fused` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            n,
            rhs,
            m,
            tiles_per_split,
            splits,
            part_dist,
            part_idx,
        } = self;
        let sa = shared_array!(window "cluda_v2_sa", TILE_BYTES);
        let sb = shared_array!(window "cluda_v2_sb", TILE_BYTES);
        let (n, m) = (n as usize, m as usize);
        let t = tid();
        let (tx, ty) = (t % 16, t / 16);
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row0 = unsafe { _block_idx_x() as usize } * BM;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let split = unsafe { _block_idx_y() as usize };
        let tiles = m.div_ceil(BN);
        let first = split * tiles_per_split as usize;
        let last = core::cmp::min(first + tiles_per_split as usize, tiles);
        let mut bd = [f32::INFINITY; 8];
        let mut bi = [u32::MAX; 8];
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: as in V1: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's
            // tiles, and every thread of the block calls this.
            let acc = unsafe { tile_distances(lhs, n, row0, rhs, m, col0, sa, sb, t) };
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
            let splits = splits as usize;
            unroll!(8, I, {
                let r = row0 + micro(ty, I);
                if r < n {
                    // SAFETY: `r < n` and `split < splits`, and the partials hold `n x splits`
                    // values (the launch's contract).
                    unsafe {
                        *part_dist.add(r * splits + split) = bd[I];
                        *part_idx.add(r * splits + split) = bi[I];
                    }
                }
            });
        }
    }
}

/// V2 step 2 (only when the right side was split): each row's best over its `splits` partial
/// results. One thread per row.
impl MatchMergePartialsArgs {
    /// The body of `cluda_match_merge_partials` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            part_dist,
            part_idx,
            n,
            splits,
            out_idx,
            out_dist,
        } = self;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize * _block_dim_x() as usize } + tid();
        if row >= n as usize {
            return;
        }
        let s = splits as usize;
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let mut k = 0;
        while k < s {
            // SAFETY: `row < n` and `k < splits`, inside the `n x splits` partials (the launch's
            // contract).
            let (d, i) = unsafe { (*part_dist.add(row * s + k), *part_idx.add(row * s + k)) };
            if better(d, i, bd, bi) {
                bd = d;
                bi = i;
            }
            k += 1;
        }
        // SAFETY: `row < n`, and the outputs hold `n` values each (the launch's contract).
        unsafe {
            *out_idx.add(row) = bi;
            *out_dist.add(row) = bd;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// V3
// ---------------------------------------------------------------------------------------------

/// Squared norms `norms[r] = ||x_r||^2` (fp32, fma), one warp per row, and the largest of
/// them, as f32 bits (non-negative floats order like their bits), into `*max_bits`.
impl MatchSqnormsArgs {
    /// The body of `cluda_match_sqnorms` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            x,
            rows,
            norms,
            max_bits,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if row >= rows as usize {
            return;
        }
        // SAFETY: `row < rows` and `lane * 4 + 3 < 128`, inside the `rows x 128` input; 16-byte
        // aligned.
        let v = unsafe { ldg4(x.add(row * DIM + lane * 4)) };
        let mut s = v[0] * v[0];
        s = fma(v[1], v[1], s);
        s = fma(v[2], v[2], s);
        s = fma(v[3], v[3], s);
        let mut o = 16;
        while o > 0 {
            // SAFETY: the whole warp runs this: its rows are warp-uniform and a warp past the last
            // row returned as a whole.
            s += unsafe { shfl_xor_f32(s, o) };
            o /= 2;
        }
        if lane == 0 {
            // SAFETY: `row < rows`, `norms` holds `rows` floats and `max_bits` one word (the
            // launch's contract); the atomic is a plain `u32` in global memory.
            unsafe {
                *norms.add(row) = s;
                (*(max_bits as *const AtomicU32)).fetch_max(s.to_bits(), Ordering::Relaxed);
            }
        }
    }
}

/// The best four `(estimate, index)` pairs seen, sorted ascending.
#[derive(Clone, Copy)]
struct Top4 {
    d: [f32; 4],
    i: [u32; 4],
}

impl Top4 {
    #[inline(always)]
    fn empty() -> Self {
        Top4 {
            d: [f32::INFINITY; 4],
            i: [u32::MAX; 4],
        }
    }

    /// Inserts `(v, j)` if it beats the fourth; equal estimates keep the earlier entry.
    #[inline(always)]
    fn insert(&mut self, v: f32, j: u32) {
        if v < self.d[3] {
            if v < self.d[2] {
                self.d[3] = self.d[2];
                self.i[3] = self.i[2];
                if v < self.d[1] {
                    self.d[2] = self.d[1];
                    self.i[2] = self.i[1];
                    if v < self.d[0] {
                        self.d[1] = self.d[0];
                        self.i[1] = self.i[0];
                        self.d[0] = v;
                        self.i[0] = j;
                    } else {
                        self.d[1] = v;
                        self.i[1] = j;
                    }
                } else {
                    self.d[2] = v;
                    self.i[2] = j;
                }
            } else {
                self.d[3] = v;
                self.i[3] = j;
            }
        }
    }
}

/// V3 fold: `tile` holds `rows x cols` values `-2 a_r . b_c` (row stride `ld`, a multiple of
/// 4) for left rows `row0..` and right rows `col0..` (`col0` a multiple of 4). Adds
/// `norms_b[col0 + c]` (padded to a multiple of 4 with zeros) and folds the row into the
/// running best four of left row `row0 + r` in `best_d` / `best_i` (`n x 4`); `first != 0`
/// starts them afresh. One warp per row; the tile can be discarded afterwards.
impl MatchV3FoldArgs {
    /// The body of `cluda_match_v3_fold` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            tile,
            rows,
            cols,
            ld,
            row0,
            col0,
            norms_b,
            best_d,
            best_i,
            first,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let r = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if r >= rows as usize {
            return;
        }
        let (cols, ld, col0) = (cols as usize, ld as usize, col0 as usize);
        // SAFETY: `r < rows`, and the tile holds `rows` rows of `ld` floats (the launch's
        // contract).
        let line = unsafe { tile.add(r * ld) };
        // SAFETY: `norms_b` holds the right norms padded to a multiple of 4 beyond `col0 + ld` (the
        // launch's contract).
        let nb = unsafe { norms_b.add(col0) };
        let mut top = Top4::empty();
        let full = cols / 4 * 4;
        let mut j = lane * 4;
        // Four 512-byte warp loads in flight before the (rarely taken) inserts.
        while j + 3 * 128 < full {
            // SAFETY: `j + 3 < full <= cols <= ld`: inside row `r` of the tile, 16-byte aligned
            // (`ld` and `j` are multiples of 4).
            let v0 = unsafe { ldg4(line.add(j)) };
            // SAFETY: as above (`j + 128 + 3 < full`).
            let v1 = unsafe { ldg4(line.add(j + 128)) };
            // SAFETY: as above (`j + 256 + 3 < full`).
            let v2 = unsafe { ldg4(line.add(j + 256)) };
            // SAFETY: as above (`j + 384 + 3 < full`).
            let v3 = unsafe { ldg4(line.add(j + 384)) };
            // SAFETY: `col0 + j + 3 < col0 + ld`, inside the padded norms, 16-byte aligned (`col0`
            // a multiple of 4).
            let w0 = unsafe { ldg4(nb.add(j)) };
            // SAFETY: as above.
            let w1 = unsafe { ldg4(nb.add(j + 128)) };
            // SAFETY: as above.
            let w2 = unsafe { ldg4(nb.add(j + 256)) };
            // SAFETY: as above.
            let w3 = unsafe { ldg4(nb.add(j + 384)) };
            let g = (col0 + j) as u32;
            unroll!(4, E, {
                top.insert(v0[E] + w0[E], g + E as u32);
            });
            unroll!(4, E, {
                top.insert(v1[E] + w1[E], g + 128 + E as u32);
            });
            unroll!(4, E, {
                top.insert(v2[E] + w2[E], g + 256 + E as u32);
            });
            unroll!(4, E, {
                top.insert(v3[E] + w3[E], g + 384 + E as u32);
            });
            j += 512;
        }
        while j < full {
            // SAFETY: `j + 3 < full`: inside row `r` of the tile, 16-byte aligned.
            let v = unsafe { ldg4(line.add(j)) };
            // SAFETY: inside the padded norms, 16-byte aligned.
            let w = unsafe { ldg4(nb.add(j)) };
            let g = (col0 + j) as u32;
            top.insert(v[0] + w[0], g);
            top.insert(v[1] + w[1], g + 1);
            top.insert(v[2] + w[2], g + 2);
            top.insert(v[3] + w[3], g + 3);
            j += 128;
        }
        let j = full + lane;
        if j < cols {
            // SAFETY: `j < cols`: inside row `r` and the padded norms.
            let v = unsafe { *line.add(j) + *nb.add(j) };
            top.insert(v, (col0 + j) as u32);
        }
        // Butterfly merge: afterwards every lane holds the warp's best four.
        let mut o = 16;
        while o > 0 {
            let mut other = Top4::empty();
            unroll!(4, K, {
                // SAFETY: the whole warp runs this: its rows are warp-uniform and a warp past the
                // last row returned as a whole.
                unsafe {
                    other.d[K] = shfl_xor_f32(top.d[K], o);
                    other.i[K] = shfl_xor_u32(top.i[K], o);
                }
            });
            unroll!(4, K, {
                top.insert(other.d[K], other.i[K]);
            });
            o /= 2;
        }
        if lane == 0 {
            let g = (row0 as usize + r) * V3_K;
            if first == 0 {
                unroll!(4, K, {
                    // SAFETY: `row0 + r < n`, and `best_d`/`best_i` hold `n x 4` values (the
                    // launch's contract).
                    unsafe { top.insert(*best_d.add(g + K), *best_i.add(g + K)) };
                });
            }
            unroll!(4, K, {
                // SAFETY: as above.
                unsafe {
                    *best_d.add(g + K) = top.d[K];
                    *best_i.add(g + K) = top.i[K];
                }
            });
        }
    }
}

/// V3 rescoring: for each left row, the exact fp32 distance of its four candidates (one warp
/// per row, a float4 per lane); the best is written to `out_idx` / `out_dist`.
///
/// The candidates were ranked by the estimate `||b||^2 - 2 a.b` whose error is at most
/// `e = 2 * 130 * 2^-24 * (||a|| + max ||b||)^2` (the classic `gamma_k` bound of a k = 128 dot
/// product, doubled for the norms and the final roundings). A neighbour outside the four has
/// an estimate of at least the fourth's, so its true distance is at least
/// `est_4 + ||a||^2 - e`; if the chosen exact distance is not below that, the row is appended
/// to `flag_rows` (count in `*flag_count`) for an exact recomputation.
impl MatchV3RescoreArgs {
    /// The body of `cluda_match_v3_rescore` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            rhs,
            n,
            norms_a,
            max_bits_b,
            best_d,
            best_i,
            out_idx,
            out_dist,
            flag_count,
            flag_rows,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if row >= n as usize {
            return;
        }
        // SAFETY: `row < n` and `lane * 4 + 3 < 128`, inside the `n x 128` left input; 16-byte
        // aligned.
        let a = unsafe { ldg4(lhs.add(row * DIM + lane * 4)) };
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let mut k = 0;
        while k < V3_K {
            // SAFETY: `row < n` and `k < 4`, inside the `n x 4` candidates (the launch's contract).
            let j = unsafe { *best_i.add(row * V3_K + k) };
            if j != u32::MAX {
                // SAFETY: `j < m` (a candidate index, not `u32::MAX`), inside the `m x 128` right
                // input; 16-byte aligned.
                let b = unsafe { ldg4(rhs.add(j as usize * DIM + lane * 4)) };
                let mut s = 0.0f32;
                unroll!(4, E, {
                    let d = a[E] - b[E];
                    s = fma(d, d, s);
                });
                let mut o = 16;
                while o > 0 {
                    // SAFETY: the whole warp runs this: its rows are warp-uniform and a warp past
                    // the last row returned as a whole; `j` is the same for the whole warp (same
                    // row and `k`).
                    s += unsafe { shfl_xor_f32(s, o) };
                    o /= 2;
                }
                if better(s, j, bd, bi) {
                    bd = s;
                    bi = j;
                }
            }
            k += 1;
        }
        if lane == 0 {
            // SAFETY: `row < n`, inside the `n x 4` candidates.
            let fourth = unsafe { *best_i.add(row * V3_K + V3_K - 1) };
            let safe = if fourth == u32::MAX {
                true // fewer than four right descriptors: all were rescored
            } else {
                // SAFETY: `row < n`, and `norms_a` holds `n` floats (the launch's contract).
                let na = unsafe { *norms_a.add(row) };
                // SAFETY: `max_bits_b` is one word (the launch's contract).
                let nb = f32::from_bits(unsafe { *max_bits_b });
                let root = core::f32::math::sqrt(na) + core::f32::math::sqrt(nb);
                let e = 2.0 * 130.0 * (1.0 / 16_777_216.0) * root * root;
                // SAFETY: `row < n`, inside the `n x 4` candidates.
                let floor = unsafe { *best_d.add(row * V3_K + V3_K - 1) } + na - e;
                bd <= floor
            };
            // SAFETY: `row < n`; the outputs and the flag list hold `n` values and the counter one
            // word (the launch's contract), and at most `n` rows are flagged, so `slot < n`.
            unsafe {
                *out_idx.add(row) = bi;
                *out_dist.add(row) = bd;
                if !safe {
                    let slot = (*(flag_count as *const AtomicU32)).fetch_add(1, Ordering::Relaxed);
                    *flag_rows.add(slot as usize) = row as u32;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// V4
// ---------------------------------------------------------------------------------------------

/// V4 radii: `radii[k] = match_bound::radius(norms[k])` (an upper bound of the exact norm) for
/// `k < len`; one thread per value.
impl MatchV4RadiiArgs {
    /// The body of `cluda_match_v4_radii` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self { norms, len, radii } = self;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let k = unsafe { _block_idx_x() as usize * _block_dim_x() as usize } + tid();
        if k < len as usize {
            // SAFETY: `k < len`, and both arrays hold `len` floats (the launch's contract).
            unsafe { *radii.add(k) = radius(*norms.add(k)) };
        }
    }
}

/// Minimum over the warp; every lane gets it.
#[inline(always)]
fn warp_min_f32(mut v: f32) -> f32 {
    let mut o = 16;
    while o > 0 {
        // SAFETY: the whole warp runs this (its callers' contract: warp-uniform control flow).
        let w = unsafe { shfl_xor_f32(v, o) };
        if w < v {
            v = w;
        }
        o /= 2;
    }
    v
}

/// One V4 row's fold state: the running bound, the threshold it gives, the slot count
/// (meaningful on lane 0, which alone writes the slots) and where the row's slots live.
struct V4Row {
    ra: f32,
    p: f32,
    q: f32,
    tau: f32,
    thr: f32,
    count: u32,
    slot_d: *mut f32,
    slot_i: *mut u32,
    lane: usize,
}

impl V4Row {
    /// Folds four float4s per lane: `v` tile values, `w` right norms, `x` right radii, the
    /// element `(q, e)` being right row `g[q] + e`, used when `ok[q][e]`. Every lane of the
    /// warp calls this.
    #[inline(always)]
    unsafe fn chunk(
        &mut self,
        v: [[f32; 4]; 4],
        w: [[f32; 4]; 4],
        x: [[f32; 4]; 4],
        g: [u32; 4],
        ok: [[bool; 4]; 4],
    ) {
        let mut lo = [[f32::INFINITY; 4]; 4];
        let mut best = f32::INFINITY;
        unroll!(4, Q, {
            unroll!(4, E, {
                if ok[Q][E] {
                    let s = v[Q][E] + w[Q][E];
                    let e = error(x[Q][E], self.p, self.q);
                    let up = s + e;
                    if up < best {
                        best = up;
                    }
                    lo[Q][E] = s - e;
                }
            });
        });
        let best = warp_min_f32(best);
        if best < self.tau {
            self.tau = best;
            self.thr = threshold(best, self.ra);
        }
        let thr = self.thr;
        let mut any = false;
        unroll!(4, Q, {
            unroll!(4, E, {
                any |= lo[Q][E] <= thr;
            });
        });
        // SAFETY: every lane runs this (the caller's contract).
        if unsafe { ballot(any) } == 0 {
            return;
        }
        unroll!(4, Q, {
            unroll!(4, E, {
                // SAFETY: every lane runs this: the unrolled loop is warp-uniform.
                let mut mask = unsafe { ballot(lo[Q][E] <= thr) };
                while mask != 0 {
                    let src = mask.trailing_zeros();
                    // SAFETY: every lane runs this: `mask` is warp-uniform (a ballot).
                    let (l, j) = unsafe {
                        (
                            f32::from_bits(shfl_idx(lo[Q][E].to_bits(), src)),
                            shfl_idx(g[Q] + E as u32, src),
                        )
                    };
                    if self.lane == 0 {
                        // SAFETY: the row's slots (the caller's contract); lane 0 alone.
                        self.count = unsafe {
                            v4_append(self.count, self.thr, self.slot_d, self.slot_i, l, j)
                        };
                    }
                    mask &= mask - 1;
                }
            });
        });
    }
}

/// Appends candidate `(l, j)` to a row's slots holding `count` entries (lane 0 only) and
/// returns the new count: when the slots are full, first drops the entries the threshold
/// `thr` rules out; if they are still full, returns `u32::MAX` (overflowed: the row goes to
/// the exact fallback), which later appends keep. Not inlined: the fold calls it from 48
/// unrolled places on its rare slow path, and inlining them made the kernel a megabyte of PTX.
///
/// # Safety
/// `slot_d` and `slot_i` point at the row's `V4_SLOTS` slots.
#[inline(never)]
unsafe fn v4_append(
    count: u32,
    thr: f32,
    slot_d: *mut f32,
    slot_i: *mut u32,
    l: f32,
    j: u32,
) -> u32 {
    if count == u32::MAX {
        return count;
    }
    let mut count = count as usize;
    if count == V4_SLOTS {
        let mut kept = 0;
        let mut s = 0;
        while s < V4_SLOTS {
            // SAFETY: `s, kept < V4_SLOTS`: inside the row's slots.
            unsafe {
                let d = *slot_d.add(s);
                if d <= thr {
                    *slot_d.add(kept) = d;
                    *slot_i.add(kept) = *slot_i.add(s);
                    kept += 1;
                }
            }
            s += 1;
        }
        count = kept;
    }
    if count < V4_SLOTS {
        // SAFETY: `count < V4_SLOTS`: inside the row's slots.
        unsafe {
            *slot_d.add(count) = l;
            *slot_i.add(count) = j;
        }
        (count + 1) as u32
    } else {
        u32::MAX
    }
}

/// V4 fold: `tile` holds `rows x cols` TF32 GEMM values `-2 a_r . b_c` (row stride `ld`, a
/// multiple of 4) for left rows `row0..` and right rows `col0..` (`col0` a multiple of 4). For
/// each element, the screen `s = tile + norms_b` and its error bound `e`
/// (`match_bound::error`) give the bounds `s - e <= ||b||^2 - 2 a.b <= s + e`; the row's running
/// `tau = min (s + e)` is lowered, and every right row with `s - e <= threshold(tau)` is
/// appended to the row's candidate slots. The threshold only falls as the row proceeds, so a
/// right row that meets the final threshold met it when it was seen. One warp per row.
impl MatchV4FoldArgs {
    /// The body of `cluda_match_v4_fold` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            tile,
            rows,
            cols,
            ld,
            row0,
            col0,
            norms_b,
            radii_b,
            radii_a,
            tau,
            count,
            slot_d,
            slot_i,
            first,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let r = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if r >= rows as usize {
            return;
        }
        let (cols, ld, col0) = (cols as usize, ld as usize, col0 as usize);
        let gr = row0 as usize + r;
        // SAFETY: `gr < n`: the per-row arrays hold `n` values, the slots `n x V4_SLOTS` (the
        // launch's contract).
        let (ra, tau0, count0, sd, si) = unsafe {
            let ra = *radii_a.add(gr);
            if first != 0 {
                (
                    ra,
                    f32::INFINITY,
                    0,
                    slot_d.add(gr * V4_SLOTS),
                    slot_i.add(gr * V4_SLOTS),
                )
            } else {
                (
                    ra,
                    *tau.add(gr),
                    *count.add(gr),
                    slot_d.add(gr * V4_SLOTS),
                    slot_i.add(gr * V4_SLOTS),
                )
            }
        };
        let (p, q) = row_terms(ra);
        let mut row = V4Row {
            ra,
            p,
            q,
            tau: tau0,
            thr: if tau0 < f32::INFINITY {
                threshold(tau0, ra)
            } else {
                f32::INFINITY
            },
            count: count0,
            slot_d: sd,
            slot_i: si,
            lane,
        };
        // SAFETY: `r < rows`, and the tile holds `rows` rows of `ld` floats (the launch's
        // contract).
        let line = unsafe { tile.add(r * ld) };
        // SAFETY: the right norms and radii are padded to a multiple of 4 beyond `col0 + ld`.
        let (nb, rb) = unsafe { (norms_b.add(col0), radii_b.add(col0)) };
        let full = cols / 4 * 4;
        let mut j = lane * 4;
        // The chunk loops' bounds are warp-uniform (`j - lane * 4` is), as `chunk` needs.
        while j - lane * 4 + 3 * 128 + 128 <= full {
            let mut v = [[0.0f32; 4]; 4];
            let mut w = [[0.0f32; 4]; 4];
            let mut x = [[0.0f32; 4]; 4];
            let mut g = [0u32; 4];
            unroll!(4, Q, {
                // SAFETY: `j + Q * 128 + 3 < full <= cols <= ld`: inside row `r` of the tile and
                // the padded norms and radii, 16-byte aligned (`ld`, `col0` and `j` multiples of
                // 4).
                unsafe {
                    v[Q] = ldg4(line.add(j + Q * 128));
                    w[Q] = ldg4(nb.add(j + Q * 128));
                    x[Q] = ldg4(rb.add(j + Q * 128));
                }
                g[Q] = (col0 + j + Q * 128) as u32;
            });
            // SAFETY: every lane runs this; the row's slots are `sd`/`si`.
            unsafe { row.chunk(v, w, x, g, [[true; 4]; 4]) };
            j += 512;
        }
        while j - lane * 4 + 128 <= full {
            // SAFETY: `j + 3 < full`: inside the tile row and the padded arrays, aligned.
            let (v, w, x) = unsafe { (ldg4(line.add(j)), ldg4(nb.add(j)), ldg4(rb.add(j))) };
            let z = [0.0f32; 4];
            let no = [false; 4];
            let g = (col0 + j) as u32;
            // SAFETY: every lane runs this.
            unsafe {
                row.chunk(
                    [v, z, z, z],
                    [w, z, z, z],
                    [x, z, z, z],
                    [g; 4],
                    [[true; 4], no, no, no],
                )
            };
            j += 128;
        }
        // The rest (fewer than 128 columns): one column per lane and step.
        let mut c = full - full % 128;
        while c < cols {
            let k = c + lane;
            let mut v = [0.0f32; 4];
            let mut w = [0.0f32; 4];
            let mut x = [0.0f32; 4];
            let ok = k < cols;
            if ok {
                // SAFETY: `k < cols`: inside the tile row and the padded arrays.
                unsafe {
                    v[0] = *line.add(k);
                    w[0] = *nb.add(k);
                    x[0] = *rb.add(k);
                }
            }
            let z = [0.0f32; 4];
            let no = [false; 4];
            let g = (col0 + k) as u32;
            // SAFETY: every lane runs this (`c` is warp-uniform).
            unsafe {
                row.chunk(
                    [v, z, z, z],
                    [w, z, z, z],
                    [x, z, z, z],
                    [g; 4],
                    [[ok, false, false, false], no, no, no],
                )
            };
            c += 32;
        }
        if lane == 0 {
            // SAFETY: `gr < n`, inside the per-row arrays (the launch's contract).
            unsafe {
                *tau.add(gr) = row.tau;
                *count.add(gr) = row.count;
            }
        }
    }
}

/// V4 rescoring: for each left row, V2's exact f32 distance (`fma` over the 128 dimensions in
/// order, from zero) of each of its candidates, one lane per slot, and the best (smaller
/// distance, ties to the smaller index) into `out_idx` / `out_dist`. A row whose slots
/// overflowed (`count > V4_SLOTS`: the fold's `u32::MAX`, or the fused kernel's count of every
/// candidate) is appended to `flag_rows` for V2. One warp per row.
impl MatchV4RescoreArgs {
    /// The body of `cluda_match_v4_rescore` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            rhs,
            n,
            count,
            slot_i,
            out_idx,
            out_dist,
            flag_count,
            flag_rows,
        } = self;
        let t = tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { _block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if row >= n as usize {
            return;
        }
        // SAFETY: `row < n`, inside the per-row counts (the launch's contract).
        let c = unsafe { *count.add(row) };
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let overflowed = c as usize > V4_SLOTS;
        if !overflowed && lane < c as usize {
            // SAFETY: `lane < c <= V4_SLOTS`: a filled slot of row `row`; its index is `< m`.
            let j = unsafe { *slot_i.add(row * V4_SLOTS + lane) };
            // SAFETY: `row < n` and `j < m`: rows of the `n x 128` and `m x 128` inputs.
            let (a, b) = unsafe { (lhs.add(row * DIM), rhs.add(j as usize * DIM)) };
            let mut s = 0.0f32;
            let mut k = 0;
            while k < DIM {
                // SAFETY: `k + 3 < 128`: inside both rows, 16-byte aligned.
                let (x, y) = unsafe { (ldg4(a.add(k)), ldg4(b.add(k))) };
                unroll!(4, E, {
                    let d = x[E] - y[E];
                    s = fma(d, d, s);
                });
                k += 4;
            }
            bd = s;
            bi = j;
        }
        let (bd, bi) = warp_min(bd, bi);
        if lane == 0 {
            // SAFETY: `row < n`; the outputs and the flag list hold `n` values and the counter one
            // word (the launch's contract), and at most `n` rows are flagged, so `slot < n`.
            unsafe {
                *out_idx.add(row) = bi;
                *out_dist.add(row) = bd;
                if overflowed {
                    let slot = (*(flag_count as *const AtomicU32)).fetch_add(1, Ordering::Relaxed);
                    *flag_rows.add(slot as usize) = row as u32;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// V4, fused: the screen on the tensor cores inside the kernel (`mma.sync` TF32)
// ---------------------------------------------------------------------------------------------

/// `f32` to TF32, rounded to nearest (ties away from zero), as the bits `mma` reads.
#[inline(always)]
fn to_tf32(x: f32) -> u32 {
    let r: u32;
    // SAFETY: a register-only conversion (PTX 7.0, sm_80).
    unsafe {
        asm!(
            "cvt.rna.tf32.f32 {r}, {x};",
            r = out(reg32) r,
            x = in(reg32) x,
            options(pure, nomem, nostack),
        );
    }
    r
}

/// `d += a b` for one 16 x 8 x 8 TF32 tile of the warp (`mma.sync.aligned.m16n8k8`, FP32
/// accumulation). Lane `l` holds `a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]`,
/// `b = B[t][g], B[t+4][g]` and `d = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]` with
/// `g = l / 4`, `t = l % 4`.
#[inline(always)]
unsafe fn mma_tf32(d: &mut [f32; 4], a: [u32; 4], b: [u32; 2]) {
    // SAFETY: a warp-synchronous instruction; every lane of the warp executes it (the caller's
    // contract).
    unsafe {
        asm!(
            "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, {{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            a0 = in(reg32) a[0],
            a1 = in(reg32) a[1],
            a2 = in(reg32) a[2],
            a3 = in(reg32) a[3],
            b0 = in(reg32) b[0],
            b1 = in(reg32) b[1],
            // Not `pure`: a warp-synchronous instruction must not be moved into divergent code.
            options(nomem, nostack),
        );
    }
}

/// Stores a loaded chunk (as `load_chunk` hands it) of 128 rows x 16 dimensions into an
/// operand stage at `sh`, converted to TF32, at the places `slot(row, k)` (`mma::a_slot` or
/// `mma::b_slot`) where the `mma` fragments read it.
#[inline(always)]
unsafe fn store_stage(sh: u64, v: [[f32; 4]; 2], t: usize, slot: fn(usize, usize) -> usize) {
    unroll!(2, Q, {
        let f = t + BLOCK as usize * Q;
        let row = f / 4;
        let part = f % 4;
        unroll!(4, E, {
            // SAFETY: `row < 128` and `part * 4 + E < 16`, so the slot is below `mma::STAGE`,
            // inside the stage of `STAGE` floats (the caller's contract), 4-byte aligned.
            unsafe { st_shared_u32(sh + (slot(row, part * 4 + E) * 4) as u64, to_tf32(v[Q][E])) };
        });
    });
}

/// Reads a 16-byte fragment (four TF32 values) from shared-window address `a`.
#[inline(always)]
unsafe fn ld_fragment(a: u64) -> [u32; 4] {
    // SAFETY: the caller's contract: a 16-byte aligned address inside a stage.
    let v = unsafe { ld_shared_f32x4(a) };
    [
        v[0].to_bits(),
        v[1].to_bits(),
        v[2].to_bits(),
        v[3].to_bits(),
    ]
}

/// The TF32 dot products `a_r . b_c` of this thread's part of the 128 x 128 block tile: warp
/// `w` owns left rows `64 (w % 2) ..+64` and right rows `32 (w / 2) ..+32`, as 4 x 4 `mma`
/// tiles of 16 x 8; `acc[mi][ni]` is `mma`'s `d` of tile `(mi, ni)`. Staged through shared
/// memory 16 dimensions at a time in fragment order (`layout::matcher::mma`), one 16-byte
/// load per fragment, the next chunk's global loads issued before the current one is
/// consumed.
#[inline(always)]
unsafe fn tile_dots_tc(
    a: *const f32,
    n: usize,
    row0: usize,
    b: *const f32,
    m: usize,
    col0: usize,
    sa: u64,
    sb: u64,
    t: usize,
) -> [[[f32; 4]; 4]; 4] {
    let lane = t % 32;
    let w = t / 32;
    let (wm, wn) = (w % 2, w / 2);
    let mut acc = [[[0.0f32; 4]; 4]; 4];
    // SAFETY: `a` holds `n` rows of 128 floats (the caller's contract), as `load_chunk` needs.
    let mut pa = unsafe { load_chunk(a, row0, n, 0, t) };
    // SAFETY: `b` holds `m` rows of 128 floats (the caller's contract).
    let mut pb = unsafe { load_chunk(b, col0, m, 0, t) };
    let mut kc = 0;
    while kc < DIM / KC {
        // SAFETY: every thread of the block reaches these barriers (block-uniform loop); `sa`
        // and `sb` are the block's stages of `mma::STAGE` floats.
        unsafe {
            _syncthreads();
            store_stage(sa, pa, t, mma::a_slot);
            store_stage(sb, pb, t, mma::b_slot);
            _syncthreads();
        }
        if kc + 1 < DIM / KC {
            // SAFETY: as the first `load_chunk` above.
            pa = unsafe { load_chunk(a, row0, n, kc + 1, t) };
            // SAFETY: as the first `load_chunk` above.
            pb = unsafe { load_chunk(b, col0, m, kc + 1, t) };
        }
        let mut fb = [[0u32; 4]; 4];
        unroll!(4, NI, {
            // SAFETY: `((wn * 4 + NI) * 32 + lane) * 4 + 3 < STAGE`: inside `sb`, 16-byte aligned.
            fb[NI] = unsafe { ld_fragment(sb + ((((wn * 4 + NI) * 32 + lane) * 16) as u64)) };
        });
        unroll!(2, KS, {
            unroll!(4, MI, {
                // SAFETY: `(((wm * 4 + MI) * 2 + KS) * 32 + lane) * 4 + 3 < STAGE`: inside `sa`,
                // 16-byte aligned.
                let fa = unsafe {
                    ld_fragment(sa + (((((wm * 4 + MI) * 2 + KS) * 32 + lane) * 16) as u64))
                };
                unroll!(4, NI, {
                    // SAFETY: every lane of every warp runs this (block-uniform control flow).
                    unsafe { mma_tf32(&mut acc[MI][NI], fa, [fb[NI][2 * KS], fb[NI][2 * KS + 1]]) };
                });
            });
        });
        kc += 1;
    }
    acc
}

/// V4 fused: the screen of V4 computed here on the tensor cores, never stored. Block `(x, y)`
/// owns left rows `x*128..` and right tiles `y*tiles_per_split..` (as V2). For every element,
/// `s = fl(-2 acc + ||b||^2)` and `e = match_bound::error` bound `||b||^2 - 2 a.b`, exactly as
/// in `cluda_match_v4_fold`. Pass 1 (`gather == 0`): each row's `min (s + e)` over the split
/// into `part_tau`. Pass 2: the row's `tau` is the minimum over its splits, and every right row
/// with `s - e <= threshold(tau)` is appended to its slots (global atomics: candidates are
/// rare). 256 threads per block.
impl MatchV4FusedArgs {
    /// The body of `cluda_match_v4_fused` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            n,
            rhs,
            m,
            tiles_per_split,
            splits,
            norms_b,
            radii_b,
            radii_a,
            part_tau,
            count,
            slot_i,
            gather,
        } = self;
        let sa = shared_array!(window "cluda_v4f_sa", mma::STAGE * 4);
        let sb = shared_array!(window "cluda_v4f_sb", mma::STAGE * 4);
        // 128 rows x 4 column warps: the per-warp row minima of pass 1.
        let sm = shared_array!(window "cluda_v4f_min", 2048);
        let (n, m, splits) = (n as usize, m as usize, splits as usize);
        let t = tid();
        let lane = t % 32;
        let w = t / 32;
        let (g, q) = (lane / 4, lane % 4);
        let (rbase, cbase) = (64 * (w % 2), 32 * (w / 2));
        // SAFETY: reads special registers (block indices); no preconditions.
        let (row0, split) = unsafe { (_block_idx_x() as usize * BM, _block_idx_y() as usize) };
        let tiles = m.div_ceil(BN);
        let first = split * tiles_per_split as usize;
        let last = core::cmp::min(first + tiles_per_split as usize, tiles);
        // This thread's eight rows: `rbase + 16 mi + g + 8 h`, index `2 mi + h`.
        let mut ra = [0.0f32; 8];
        let mut p = [0.0f32; 8];
        let mut qq = [0.0f32; 8];
        let mut thr = [f32::INFINITY; 8];
        let mut tmin = [f32::INFINITY; 8];
        unroll!(8, RI, {
            let r = row0 + rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
            if r < n {
                // SAFETY: `r < n`: inside the left radii (the launch's contract).
                ra[RI] = unsafe { *radii_a.add(r) };
                let (pp, qv) = row_terms(ra[RI]);
                p[RI] = pp;
                qq[RI] = qv;
                if gather != 0 {
                    let mut tau = f32::INFINITY;
                    let mut k = 0;
                    while k < splits {
                        // SAFETY: `r < n`, `k < splits`: inside the `n x splits` partials.
                        let v = unsafe { *part_tau.add(r * splits + k) };
                        if v < tau {
                            tau = v;
                        }
                        k += 1;
                    }
                    thr[RI] = threshold(tau, ra[RI]);
                }
            }
        });
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's tiles, and
            // every thread of the block calls this.
            let acc = unsafe { tile_dots_tc(lhs, n, row0, rhs, m, col0, sa, sb, t) };
            unroll!(4, NI, {
                unroll!(2, E, {
                    let c = col0 + cbase + 8 * NI + 2 * q + E;
                    if c < m {
                        // SAFETY: `c < m`: inside the right norms and radii.
                        let (nb, rb) = unsafe { (*norms_b.add(c), *radii_b.add(c)) };
                        unroll!(8, RI, {
                            let v = acc[RI / 2][NI][2 * (RI % 2) + E];
                            let s = -2.0 * v + nb;
                            let e = error(rb, p[RI], qq[RI]);
                            if gather == 0 {
                                let up = s + e;
                                if up < tmin[RI] {
                                    tmin[RI] = up;
                                }
                            } else if s - e <= thr[RI] {
                                let r = row0 + rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
                                if r < n {
                                    // SAFETY: `r < n`: the row's counter and slots (the
                                    // launch's contract); the counter is a plain `u32`.
                                    unsafe {
                                        let k = (*(count.add(r) as *const AtomicU32))
                                            .fetch_add(1, Ordering::Relaxed)
                                            as usize;
                                        if k < V4_SLOTS {
                                            *slot_i.add(r * V4_SLOTS + k) = c as u32;
                                        }
                                    }
                                }
                            }
                        });
                    }
                });
            });
            tile += 1;
        }
        if gather != 0 {
            return;
        }
        // The row minima: over the four lanes of a row group, then over the four column warps.
        unroll!(8, RI, {
            unroll!(2, S, {
                // SAFETY: unconditional, so every lane runs it.
                let o = unsafe { shfl_xor_f32(tmin[RI], 1 << S) };
                if o < tmin[RI] {
                    tmin[RI] = o;
                }
            });
        });
        if q == 0 {
            unroll!(8, RI, {
                let rl = rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
                // SAFETY: `rl < 128` and `w / 2 < 4`: inside the 2048-byte array.
                unsafe { st_shared_f32(sm + ((rl * 4 + w / 2) * 4) as u64, tmin[RI]) };
            });
        }
        // SAFETY: every thread reaches this barrier (no thread returned in pass 1).
        unsafe { _syncthreads() };
        if t < BM && row0 + t < n {
            // SAFETY: `t < 128`: inside the array, 16-byte aligned.
            let v = unsafe { ld_shared_f32x4(sm + (t * 16) as u64) };
            let mut best = v[0];
            unroll!(4, K, {
                if v[K] < best {
                    best = v[K];
                }
            });
            // SAFETY: `row0 + t < n`, `split < splits`: inside the `n x splits` partials.
            unsafe { *part_tau.add((row0 + t) * splits + split) = best };
        }
    }
}

/// V4 fused, one pass: as `cluda_match_v4_fused`, but each block keeps, per row, a running
/// bound `tau` (the smallest `s + e` of its split so far, updated after every right tile) and
/// a list of the right rows with `s - e <= threshold(tau)` in shared memory. The threshold only
/// falls, so a right row that meets the split's final threshold met it when it was seen;
/// entries the current threshold rules out are dropped when the list fills; a row whose list
/// still overflows is marked (`u32::MAX`). `cluda_match_v4_merge` then filters the splits'
/// lists with the row's final threshold. 256 threads per block.
impl MatchV4Fused1Args {
    /// The body of `cluda_match_v4_fused1` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            lhs,
            n,
            rhs,
            m,
            tiles_per_split,
            splits,
            norms_b,
            radii_b,
            radii_a,
            part_tau,
            part_cnt,
            part_l,
            part_j,
        } = self;
        const S: usize = V4_SPLIT_SLOTS;
        let sa = shared_array!(window "cluda_v4g_sa", mma::STAGE * 4);
        let sb = shared_array!(window "cluda_v4g_sb", mma::STAGE * 4);
        // 128 rows x 4 column warps: the per-warp row minima of a tile.
        let sm = shared_array!(window "cluda_v4g_min", 2048);
        // Per row: the running bound, the list's count (generic address: atomics), a sticky
        // overflow flag, and the list (bounds and right rows).
        let s_tau = shared_array!(window "cluda_v4g_tau", 512);
        let s_cnt = shared_array!(generic "cluda_v4g_cnt", 512) as *mut u32;
        let s_ov = shared_array!(window "cluda_v4g_ov", 512);
        let s_l = shared_array!(window "cluda_v4g_l", 128 * V4_SPLIT_SLOTS * 4);
        let s_j = shared_array!(window "cluda_v4g_j", 128 * V4_SPLIT_SLOTS * 4);
        let (n, m, splits) = (n as usize, m as usize, splits as usize);
        let t = tid();
        let lane = t % 32;
        let w = t / 32;
        let (g, q) = (lane / 4, lane % 4);
        let (rbase, cbase) = (64 * (w % 2), 32 * (w / 2));
        // SAFETY: reads special registers (block indices); no preconditions.
        let (row0, split) = unsafe { (_block_idx_x() as usize * BM, _block_idx_y() as usize) };
        let tiles = m.div_ceil(BN);
        let first = split * tiles_per_split as usize;
        let last = core::cmp::min(first + tiles_per_split as usize, tiles);
        if t < BM {
            // SAFETY: `t < 128`: inside the per-row arrays of 128 words. Read only after the
            // barriers of the first tile.
            unsafe {
                st_shared_f32(s_tau + (t * 4) as u64, f32::INFINITY);
                *s_cnt.add(t) = 0;
                st_shared_u32(s_ov + (t * 4) as u64, 0);
            }
        }
        let mut ra = [0.0f32; 8];
        let mut p = [0.0f32; 8];
        let mut qq = [0.0f32; 8];
        unroll!(8, RI, {
            let r = row0 + rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
            if r < n {
                // SAFETY: `r < n`: inside the left radii (the launch's contract).
                ra[RI] = unsafe { *radii_a.add(r) };
                let (pp, qv) = row_terms(ra[RI]);
                p[RI] = pp;
                qq[RI] = qv;
            }
        });
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's stages, and
            // every thread of the block calls this. Its first barrier also orders the previous
            // tile's list appends before this tile's compaction.
            let acc = unsafe { tile_dots_tc(lhs, n, row0, rhs, m, col0, sa, sb, t) };
            // This thread's eight columns' norms and radii (the screen is recomputed from `acc`
            // for the appends rather than kept: fewer registers live across the barriers).
            let mut nbv = [0.0f32; 8];
            let mut rbv = [0.0f32; 8];
            let mut ok = [false; 8];
            let mut tmin = [f32::INFINITY; 8];
            unroll!(4, NI, {
                unroll!(2, E, {
                    let c = col0 + cbase + 8 * NI + 2 * q + E;
                    if c < m {
                        ok[NI * 2 + E] = true;
                        // SAFETY: `c < m`: inside the right norms and radii.
                        let (nb, rb) = unsafe { (*norms_b.add(c), *radii_b.add(c)) };
                        nbv[NI * 2 + E] = nb;
                        rbv[NI * 2 + E] = rb;
                        unroll!(8, RI, {
                            let v = acc[RI / 2][NI][2 * (RI % 2) + E];
                            let s = -2.0 * v + nb;
                            let e = error(rb, p[RI], qq[RI]);
                            let up = s + e;
                            if up < tmin[RI] {
                                tmin[RI] = up;
                            }
                        });
                    }
                });
            });
            unroll!(8, RI, {
                unroll!(2, S2, {
                    // SAFETY: unconditional, so every lane runs it.
                    let o = unsafe { shfl_xor_f32(tmin[RI], 1 << S2) };
                    if o < tmin[RI] {
                        tmin[RI] = o;
                    }
                });
            });
            if q == 0 {
                unroll!(8, RI, {
                    let rl = rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
                    // SAFETY: `rl < 128`, `w / 2 < 4`: inside the 2048-byte array.
                    unsafe { st_shared_f32(sm + ((rl * 4 + w / 2) * 4) as u64, tmin[RI]) };
                });
            }
            // SAFETY: every thread reaches this barrier (block-uniform loop).
            unsafe { _syncthreads() };
            if t < BM {
                // SAFETY: `t < 128`: inside the per-row arrays and the list of row `t`.
                unsafe {
                    let v = ld_shared_f32x4(sm + (t * 16) as u64);
                    let mut tau = f32::from_bits(ld_shared_u32(s_tau + (t * 4) as u64));
                    unroll!(4, K, {
                        if v[K] < tau {
                            tau = v[K];
                        }
                    });
                    st_shared_f32(s_tau + (t * 4) as u64, tau);
                    let cnt = *s_cnt.add(t) as usize;
                    if cnt >= S / 2 && row0 + t < n {
                        // Drop the entries the current threshold rules out.
                        let thr = threshold(tau, *radii_a.add(row0 + t));
                        let mut kept = 0;
                        let mut k = 0;
                        while k < core::cmp::min(cnt, S) {
                            let a = ((t * S + k) * 4) as u64;
                            let l = f32::from_bits(ld_shared_u32(s_l + a));
                            if l <= thr {
                                let b = ((t * S + kept) * 4) as u64;
                                st_shared_f32(s_l + b, l);
                                st_shared_u32(s_j + b, ld_shared_u32(s_j + a));
                                kept += 1;
                            }
                            k += 1;
                        }
                        *s_cnt.add(t) = kept as u32;
                    }
                }
            }
            // SAFETY: every thread reaches this barrier.
            unsafe { _syncthreads() };
            unroll!(8, RI, {
                let rl = rbase + 16 * (RI / 2) + g + 8 * (RI % 2);
                // SAFETY: `rl < 128`: inside the per-row bounds.
                let tau = f32::from_bits(unsafe { ld_shared_u32(s_tau + (rl * 4) as u64) });
                let thr = threshold(tau, ra[RI]);
                unroll!(8, CI, {
                    let s = -2.0 * acc[RI / 2][CI / 2][2 * (RI % 2) + CI % 2] + nbv[CI];
                    let e = error(rbv[CI], p[RI], qq[RI]);
                    if ok[CI] && s - e <= thr && row0 + rl < n {
                        let c = col0 + cbase + 8 * (CI / 2) + 2 * q + CI % 2;
                        // SAFETY: `rl < 128`: the row's counter (a shared word, reached through
                        // its generic address) and list slots `k < S`.
                        unsafe {
                            let k = (*(s_cnt.add(rl) as *const AtomicU32))
                                .fetch_add(1, Ordering::Relaxed)
                                as usize;
                            if k < S {
                                let a = ((rl * S + k) * 4) as u64;
                                st_shared_f32(s_l + a, s - e);
                                st_shared_u32(s_j + a, c as u32);
                            } else {
                                st_shared_u32(s_ov + (rl * 4) as u64, 1);
                            }
                        }
                    }
                });
            });
            tile += 1;
        }
        // SAFETY: every thread reaches this barrier: the last appends are done.
        unsafe { _syncthreads() };
        if t < BM && row0 + t < n {
            let o = (row0 + t) * splits + split;
            // SAFETY: `t < 128`: the row's shared state; `row0 + t < n`, `split < splits`:
            // inside the `n x splits` partials and their `S` slots each.
            unsafe {
                let cnt = core::cmp::min(*s_cnt.add(t) as usize, S);
                let ov = ld_shared_u32(s_ov + (t * 4) as u64) != 0;
                *part_tau.add(o) = f32::from_bits(ld_shared_u32(s_tau + (t * 4) as u64));
                *part_cnt.add(o) = if ov { u32::MAX } else { cnt as u32 };
                let mut k = 0;
                while k < cnt {
                    let a = ((t * S + k) * 4) as u64;
                    *part_l.add(o * S + k) = f32::from_bits(ld_shared_u32(s_l + a));
                    *part_j.add(o * S + k) = ld_shared_u32(s_j + a);
                    k += 1;
                }
            }
        }
    }
}

/// V4 merge (after `cluda_match_v4_fused1`): each row's bound is the smallest over its splits;
/// every split's candidate whose `s - e` meets the row's threshold goes to the row's slots.
/// A split that overflowed, or more than `V4_SLOTS` candidates, make the row overflowed
/// (`count > V4_SLOTS`). One thread per row.
impl MatchV4MergeArgs {
    /// The body of `cluda_match_v4_merge` (declared from `crate::args::matcher_kernels`).
    #[inline(always)]
    unsafe fn run(self) {
        let Self {
            part_tau,
            part_cnt,
            part_l,
            part_j,
            n,
            splits,
            radii_a,
            count,
            slot_i,
        } = self;
        const S: usize = V4_SPLIT_SLOTS;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { _block_idx_x() as usize * _block_dim_x() as usize } + tid();
        if row >= n as usize {
            return;
        }
        let splits = splits as usize;
        // SAFETY: `row < n`, `k < splits`: inside the `n x splits` partials (and their `S`
        // slots), the left radii and the row's outputs (the launch's contract).
        unsafe {
            let mut tau = f32::INFINITY;
            let mut k = 0;
            while k < splits {
                let v = *part_tau.add(row * splits + k);
                if v < tau {
                    tau = v;
                }
                k += 1;
            }
            let thr = threshold(tau, *radii_a.add(row));
            let mut c = 0usize;
            let mut over = false;
            let mut k = 0;
            while k < splits {
                let o = row * splits + k;
                let cnt = *part_cnt.add(o);
                if cnt == u32::MAX {
                    over = true;
                } else {
                    let mut e = 0;
                    while e < cnt as usize {
                        if *part_l.add(o * S + e) <= thr {
                            if c < V4_SLOTS {
                                *slot_i.add(row * V4_SLOTS + c) = *part_j.add(o * S + e);
                            }
                            c += 1;
                        }
                        e += 1;
                    }
                }
                k += 1;
            }
            *count.add(row) = if over { u32::MAX } else { c as u32 };
        }
    }
}

// Keep the unused-constant lint quiet for tile sizes only used in the docs' arithmetic.
const _: () = assert!(TILE_BYTES == 8448);

/// Declares the matcher's kernels from their list (`crate::args::matcher_kernels`): each takes
/// its argument struct's fields as its parameters and runs the struct's `run`.
macro_rules! matcher_entries {
    ([$($(#[$m:meta])* $k:ident => $args:ident {
        $($(#[$fm:meta])* $f:ident: $ty:ty,)*
    })*]) => {
        $(
            $(#[$m])*
            ///
            /// # Safety
            ///
            /// Launched by the host with its argument struct's fields as its parameters: every
            /// pointer a live device buffer of the sizes the struct's docs give, in blocks of
            /// `layout::matcher::BLOCK` threads.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $k($($f: $ty),*) {
                // SAFETY: the launch's contract, stated on the struct's `run`.
                unsafe { $args { $($f),* }.run() }
            }
        )*
    };
}

crate::matcher_kernels!(matcher_entries;);
