//! V4, fused (feature `experimental`): the screen computed on the tensor cores inside the
//! kernel (`mma.sync` TF32), never stored. Two variants, both slower today than cuBLAS tiles
//! and [`super::v4`]'s fold: `cluda_match_v4_fused` in two passes (row bounds, then
//! candidates) and `cluda_match_v4_fused1` in one (running bounds and per-split lists in
//! shared memory) followed by `cluda_match_v4_merge`. Their candidates go to V4's rescoring.

use core::arch::asm;
use core::arch::nvptx::{_block_idx_x, _block_idx_y, _syncthreads};
use core::sync::atomic::{AtomicU32, Ordering};

use super::tid;
use super::tile::{Side, staged_chunks};
use crate::kernels::global_index_x;
use crate::kernels::prims::{
    asm_u32, ld_shared_f32x4, ld_shared_u32, shared_array, shfl_xor_f32, st_shared_f32,
    st_shared_u32,
};
use crate::layout::matcher::{BLOCK, BM, BN, DIM, KC, V4_SLOTS, V4_SPLIT_SLOTS, mma};
use crate::matcher::args::{MatchV4Fused1Args, MatchV4FusedArgs, MatchV4MergeArgs};
use crate::matcher::bound::{error, row_terms, threshold};

/// `f32` to TF32, rounded to nearest (ties away from zero), as the bits `mma` reads.
#[inline(always)]
fn to_tf32(x: f32) -> u32 {
    // A register-only conversion (PTX 7.0, sm_80): no contract.
    asm_u32!("cvt.rna.tf32.f32 {r}, {x};", x = x; pure, nomem, nostack)
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
    (a, n, row0): Side,
    (b, m, col0): Side,
    (sa, sb): (u64, u64),
    t: usize,
) -> [[[f32; 4]; 4]; 4] {
    let lane = t % 32;
    let w = t / 32;
    let (wm, wn) = (w % 2, w / 2);
    let mut acc = [[[0.0f32; 4]; 4]; 4];
    // `sa` and `sb` are the block's stages of `mma::STAGE` floats (the caller's contract).
    staged_chunks!(
        (a, n, row0),
        (b, m, col0),
        t,
        |pa, pb| {
            store_stage(sa, pa, t, mma::a_slot);
            store_stage(sb, pb, t, mma::b_slot);
        },
        {
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
                        unsafe {
                            mma_tf32(&mut acc[MI][NI], fa, [fb[NI][2 * KS], fb[NI][2 * KS + 1]])
                        };
                    });
                });
            });
        }
    );
    acc
}

/// The calling block's share of a split launch (as V2's): block `(x, y)`
/// owns left rows `x*128..` and, of the `m` right rows' 128-row tiles, those of split `y`
/// (`tiles_per_split` each). Returns `(row0, split, first tile, end tile)`.
#[inline(always)]
fn block_split(m: usize, tiles_per_split: u32) -> (usize, usize, usize, usize) {
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    let row0 = unsafe { _block_idx_x() as usize } * BM;
    // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
    let split = unsafe { _block_idx_y() as usize };
    let tiles = m.div_ceil(BN);
    let first = split * tiles_per_split as usize;
    let last = core::cmp::min(first + tiles_per_split as usize, tiles);
    (row0, split, first, last)
}

/// Where a thread's values of the block tile lie after [`tile_dots_tc`]: warp `w` holds left
/// rows `64 (w % 2)..+64` and right rows `32 (w / 2)..+32`, and lane `4 g + q` of it eight
/// rows and eight columns of those.
#[derive(Clone, Copy)]
struct Frag {
    g: usize,
    q: usize,
    w: usize,
}

impl Frag {
    #[inline(always)]
    fn of(t: usize) -> Self {
        let lane = t % 32;
        Frag {
            g: lane / 4,
            q: lane % 4,
            w: t / 32,
        }
    }

    /// Block row of this thread's row `ri` (0..8).
    #[inline(always)]
    fn row(self, ri: usize) -> usize {
        64 * (self.w % 2) + 16 * (ri / 2) + self.g + 8 * (ri % 2)
    }

    /// Block column of this thread's column `ci` (0..8).
    #[inline(always)]
    fn col(self, ci: usize) -> usize {
        32 * (self.w / 2) + 8 * (ci / 2) + 2 * self.q + ci % 2
    }
}

/// `a . b` of this thread's row `ri` and column `ci` (as [`Frag`] numbers them) from
/// [`tile_dots_tc`]'s accumulators.
#[inline(always)]
fn dot(acc: &[[[f32; 4]; 4]; 4], ri: usize, ci: usize) -> f32 {
    acc[ri / 2][ci / 2][2 * (ri % 2) + ci % 2]
}

/// The bound's terms of this thread's eight left rows: radius and `row_terms` (zero past `n`).
#[derive(Default)]
struct Rows {
    ra: [f32; 8],
    p: [f32; 8],
    q: [f32; 8],
}

impl Rows {
    /// The terms of the rows `row0 + f.row(ri)`.
    ///
    /// # Safety
    /// `radii_a` holds `n` floats.
    #[inline(always)]
    unsafe fn of(radii_a: *const f32, row0: usize, n: usize, f: Frag) -> Self {
        let mut rows = Rows::default();
        unroll!(8, RI, {
            let r = row0 + f.row(RI);
            if r < n {
                // SAFETY: `r < n`: inside the left radii (the caller's contract).
                rows.ra[RI] = unsafe { *radii_a.add(r) };
                (rows.p[RI], rows.q[RI]) = row_terms(rows.ra[RI]);
            }
        });
        rows
    }

    /// The screen `s = fl(-2 a.b + ||b||^2)` of row `ri` against a right row of norm `nb` and
    /// radius `rb`, and its error bound `e` (as `cluda_match_v4_fold` computes them).
    #[inline(always)]
    fn screen(&self, ri: usize, dot: f32, nb: f32, rb: f32) -> (f32, f32) {
        (-2.0 * dot + nb, error(rb, self.p[ri], self.q[ri]))
    }
}

/// The right norms and radii of this thread's eight columns of a tile, and which of them are
/// right rows (below `m`).
#[derive(Default)]
struct Cols {
    nb: [f32; 8],
    rb: [f32; 8],
    ok: [bool; 8],
}

impl Cols {
    /// The columns `col0 + f.col(ci)`.
    ///
    /// # Safety
    /// `norms_b` and `radii_b` hold `m` floats.
    #[inline(always)]
    unsafe fn of(norms_b: *const f32, radii_b: *const f32, col0: usize, m: usize, f: Frag) -> Self {
        let mut cols = Cols::default();
        unroll!(8, CI, {
            let c = col0 + f.col(CI);
            if c < m {
                cols.ok[CI] = true;
                // SAFETY: `c < m`: inside the right norms and radii (the caller's contract).
                (cols.nb[CI], cols.rb[CI]) = unsafe { (*norms_b.add(c), *radii_b.add(c)) };
            }
        });
        cols
    }
}

/// This thread's rows' smallest upper bound `s + e` over its columns of a tile.
#[inline(always)]
fn upper_minima(acc: &[[[f32; 4]; 4]; 4], rows: &Rows, cols: &Cols) -> [f32; 8] {
    let mut tmin = [f32::INFINITY; 8];
    unroll!(8, CI, {
        if cols.ok[CI] {
            unroll!(8, RI, {
                let (s, e) = rows.screen(RI, dot(acc, RI, CI), cols.nb[CI], cols.rb[CI]);
                if s + e < tmin[RI] {
                    tmin[RI] = s + e;
                }
            });
        }
    });
    tmin
}

/// The block's row minima of every thread's `tmin` (its rows' values, as [`Frag`] numbers
/// them): over the four lanes of a row group, then, through `sm` (128 rows x 4 column warps of
/// floats, 16-byte aligned), over the four column warps. Thread `t < 128` gets row `t`'s
/// minimum, the others infinity.
///
/// # Safety
/// Every thread of the block calls this (it holds a barrier); `sm` is the block's array.
#[inline(always)]
unsafe fn row_minima(mut tmin: [f32; 8], sm: u64, f: Frag, t: usize) -> f32 {
    unroll!(8, RI, {
        unroll!(2, S, {
            // SAFETY: unconditional, so every lane runs it.
            let o = unsafe { shfl_xor_f32(tmin[RI], 1 << S) };
            if o < tmin[RI] {
                tmin[RI] = o;
            }
        });
    });
    if f.q == 0 {
        unroll!(8, RI, {
            // SAFETY: `f.row(RI) < 128` and `w / 2 < 4`: inside the 2048-byte array.
            unsafe { st_shared_f32(sm + ((f.row(RI) * 4 + f.w / 2) * 4) as u64, tmin[RI]) };
        });
    }
    // SAFETY: every thread of the block reaches this barrier (the caller's contract).
    unsafe { _syncthreads() };
    let mut best = f32::INFINITY;
    if t < BM {
        // SAFETY: `t < 128`: inside the array, 16-byte aligned.
        let v = unsafe { ld_shared_f32x4(sm + (t * 16) as u64) };
        unroll!(4, K, {
            if v[K] < best {
                best = v[K];
            }
        });
    }
    best
}

/// The smallest of row `r`'s bounds over the `splits` right splits (`part_tau[r * splits..]`).
///
/// # Safety
/// `part_tau` holds at least `(r + 1) * splits` floats.
#[inline(always)]
unsafe fn min_over_splits(part_tau: *const f32, r: usize, splits: usize) -> f32 {
    let mut tau = f32::INFINITY;
    let mut k = 0;
    while k < splits {
        // SAFETY: `k < splits`: inside row `r`'s partials (the caller's contract).
        let v = unsafe { *part_tau.add(r * splits + k) };
        if v < tau {
            tau = v;
        }
        k += 1;
    }
    tau
}

/// V4 fused: the screen of V4 computed here on the tensor cores, never stored. Block `(x, y)`
/// owns left rows `x*128..` and right tiles `y*tiles_per_split..` (as V2). For every element,
/// `s = fl(-2 acc + ||b||^2)` and `e = match_bound::error` bound `||b||^2 - 2 a.b`, exactly as
/// in `cluda_match_v4_fold`. Pass 1 (`gather == 0`): each row's `min (s + e)` over the split
/// into `part_tau`. Pass 2: the row's `tau` is the minimum over its splits, and every right row
/// with `s - e <= threshold(tau)` is appended to its slots (global atomics: candidates are
/// rare). 256 threads per block.
impl MatchV4FusedArgs {
    /// The body of `cluda_match_v4_fused` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let sa = shared_array!(window "cluda_v4f_sa", mma::STAGE * 4);
        let sb = shared_array!(window "cluda_v4f_sb", mma::STAGE * 4);
        // 128 rows x 4 column warps: the per-warp row minima of pass 1.
        let sm = shared_array!(window "cluda_v4f_min", 2048);
        let (n, m, splits) = (self.n as usize, self.m as usize, self.splits as usize);
        let t = tid();
        let f = Frag::of(t);
        let (row0, split, first, last) = block_split(m, self.tiles_per_split);
        // SAFETY: the left radii hold `n` floats (the launch's contract).
        let rows = unsafe { Rows::of(self.radii_a, row0, n, f) };
        let mut thr = [f32::INFINITY; 8];
        if self.gather != 0 {
            unroll!(8, RI, {
                let r = row0 + f.row(RI);
                if r < n {
                    // SAFETY: `r < n`: inside the `n x splits` partials.
                    let tau = unsafe { min_over_splits(self.part_tau, r, splits) };
                    thr[RI] = threshold(tau, rows.ra[RI]);
                }
            });
        }
        let mut tmin = [f32::INFINITY; 8];
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's tiles, and
            // every thread of the block calls this.
            let acc =
                unsafe { tile_dots_tc((self.lhs, n, row0), (self.rhs, m, col0), (sa, sb), t) };
            // SAFETY: the right norms and radii hold `m` floats (the launch's contract).
            let cols = unsafe { Cols::of(self.norms_b, self.radii_b, col0, m, f) };
            if self.gather == 0 {
                let up = upper_minima(&acc, &rows, &cols);
                unroll!(8, RI, {
                    if up[RI] < tmin[RI] {
                        tmin[RI] = up[RI];
                    }
                });
            } else {
                unroll!(8, RI, {
                    let r = row0 + f.row(RI);
                    unroll!(8, CI, {
                        let (s, e) = rows.screen(RI, dot(&acc, RI, CI), cols.nb[CI], cols.rb[CI]);
                        if cols.ok[CI] && s - e <= thr[RI] && r < n {
                            // SAFETY: `r < n`: the row's counter and slots (the launch's
                            // contract); the counter is a plain `u32`.
                            unsafe {
                                let k = (*(self.count.add(r) as *const AtomicU32))
                                    .fetch_add(1, Ordering::Relaxed)
                                    as usize;
                                if k < V4_SLOTS {
                                    *self.slot_i.add(r * V4_SLOTS + k) = (col0 + f.col(CI)) as u32;
                                }
                            }
                        }
                    });
                });
            }
            tile += 1;
        }
        if self.gather != 0 {
            return;
        }
        // SAFETY: every thread calls this (no thread returned in pass 1); `sm` is this kernel's.
        let best = unsafe { row_minima(tmin, sm, f, t) };
        if t < BM && row0 + t < n {
            // SAFETY: `row0 + t < n`, `split < splits`: inside the `n x splits` partials.
            unsafe { *self.part_tau.add((row0 + t) * splits + split) = best };
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
    /// The body of `cluda_match_v4_fused1` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
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
        let (n, m, splits) = (self.n as usize, self.m as usize, self.splits as usize);
        let t = tid();
        let f = Frag::of(t);
        let (row0, split, first, last) = block_split(m, self.tiles_per_split);
        if t < BM {
            // SAFETY: `t < 128`: inside the per-row arrays of 128 words. Read only after the
            // barriers of the first tile.
            unsafe {
                st_shared_f32(s_tau + (t * 4) as u64, f32::INFINITY);
                *s_cnt.add(t) = 0;
                st_shared_u32(s_ov + (t * 4) as u64, 0);
            }
        }
        // SAFETY: the left radii hold `n` floats (the launch's contract).
        let rows = unsafe { Rows::of(self.radii_a, row0, n, f) };
        let mut tile = first;
        while tile < last {
            let col0 = tile * BN;
            // SAFETY: the inputs hold `n` and `m` rows, `sa`/`sb` are this kernel's stages, and
            // every thread of the block calls this. Its first barrier also orders the previous
            // tile's list appends before this tile's compaction.
            let acc =
                unsafe { tile_dots_tc((self.lhs, n, row0), (self.rhs, m, col0), (sa, sb), t) };
            // This thread's eight columns' norms and radii (the screen is recomputed from `acc`
            // for the appends rather than kept: fewer registers live across the barriers).
            // SAFETY: the right norms and radii hold `m` floats (the launch's contract).
            let cols = unsafe { Cols::of(self.norms_b, self.radii_b, col0, m, f) };
            // SAFETY: every thread calls this (block-uniform loop); `sm` is this kernel's.
            let tile_min = unsafe { row_minima(upper_minima(&acc, &rows, &cols), sm, f, t) };
            if t < BM {
                // SAFETY: `t < 128`: inside the per-row arrays and the list of row `t`.
                unsafe {
                    let mut tau = f32::from_bits(ld_shared_u32(s_tau + (t * 4) as u64));
                    if tile_min < tau {
                        tau = tile_min;
                    }
                    st_shared_f32(s_tau + (t * 4) as u64, tau);
                    let cnt = *s_cnt.add(t) as usize;
                    if cnt >= S / 2 && row0 + t < n {
                        // Drop the entries the current threshold rules out.
                        let thr = threshold(tau, *self.radii_a.add(row0 + t));
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
                let rl = f.row(RI);
                // SAFETY: `rl < 128`: inside the per-row bounds.
                let tau = f32::from_bits(unsafe { ld_shared_u32(s_tau + (rl * 4) as u64) });
                let thr = threshold(tau, rows.ra[RI]);
                unroll!(8, CI, {
                    let (s, e) = rows.screen(RI, dot(&acc, RI, CI), cols.nb[CI], cols.rb[CI]);
                    if cols.ok[CI] && s - e <= thr && row0 + rl < n {
                        let c = col0 + f.col(CI);
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
                *self.part_tau.add(o) = f32::from_bits(ld_shared_u32(s_tau + (t * 4) as u64));
                *self.part_cnt.add(o) = if ov { u32::MAX } else { cnt as u32 };
                let mut k = 0;
                while k < cnt {
                    let a = ((t * S + k) * 4) as u64;
                    *self.part_l.add(o * S + k) = f32::from_bits(ld_shared_u32(s_l + a));
                    *self.part_j.add(o * S + k) = ld_shared_u32(s_j + a);
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
    /// The body of `cluda_match_v4_merge` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        const S: usize = V4_SPLIT_SLOTS;
        let row = global_index_x();
        if row >= self.n as usize {
            return;
        }
        let splits = self.splits as usize;
        // SAFETY: `row < n`, `k < splits`: inside the `n x splits` partials (and their `S`
        // slots), the left radii and the row's outputs (the launch's contract).
        unsafe {
            let thr = threshold(
                min_over_splits(self.part_tau, row, splits),
                *self.radii_a.add(row),
            );
            let mut c = 0usize;
            let mut over = false;
            let mut k = 0;
            while k < splits {
                let o = row * splits + k;
                let cnt = *self.part_cnt.add(o);
                if cnt == u32::MAX {
                    over = true;
                } else {
                    let mut e = 0;
                    while e < cnt as usize {
                        if *self.part_l.add(o * S + e) <= thr {
                            if c < V4_SLOTS {
                                *self.slot_i.add(row * V4_SLOTS + c) = *self.part_j.add(o * S + e);
                            }
                            c += 1;
                        }
                        e += 1;
                    }
                }
                k += 1;
            }
            *self.count.add(row) = if over { u32::MAX } else { c as u32 };
        }
    }
}
