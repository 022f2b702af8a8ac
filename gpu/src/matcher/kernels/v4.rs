//! V4's kernels around the host's cuBLAS TF32 GEMM tiles: `cluda_match_v4_radii` (upper
//! bounds of the norms), `cluda_match_v4_fold` (the screen of a tile against its proven error
//! bound, [`crate::matcher::bound`], appending the right rows it cannot rule out to each row's
//! slots) and `cluda_match_v4_rescore` (V2's exact f32 distance of every candidate; rows whose
//! slots overflowed are flagged for V2).

use super::{fma, ldg4, warp_min, warp_row};
use crate::kernels::global_index_x;
use crate::kernels::prims::{ballot, shfl_idx, shfl_xor_f32};
use crate::layout::matcher::{DIM, V4_SLOTS};
use crate::matcher::args::{MatchV4FoldArgs, MatchV4RadiiArgs, MatchV4RescoreArgs};
use crate::matcher::bound::{error, radius, row_terms, threshold};

/// V4 radii: `radii[k] = match_bound::radius(norms[k])` (an upper bound of the exact norm) for
/// `k < len`; one thread per value.
impl MatchV4RadiiArgs {
    /// The body of `cluda_match_v4_radii` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let k = global_index_x();
        if k < self.len as usize {
            // SAFETY: `k < len`, and both arrays hold `len` floats (the launch's contract).
            unsafe { *self.radii.add(k) = radius(*self.norms.add(k)) };
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

    /// [`V4Row::chunk`] of one float4 per lane (right rows `g + e`, used when `ok[e]`).
    ///
    /// # Safety
    /// As [`V4Row::chunk`].
    #[inline(always)]
    unsafe fn chunk1(&mut self, v: [f32; 4], w: [f32; 4], x: [f32; 4], g: u32, ok: [bool; 4]) {
        let z = [0.0f32; 4];
        let no = [false; 4];
        // SAFETY: as the caller promises.
        unsafe {
            self.chunk(
                [v, z, z, z],
                [w, z, z, z],
                [x, z, z, z],
                [g; 4],
                [ok, no, no, no],
            )
        };
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
    /// The body of `cluda_match_v4_fold` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        // Destructured (not `self.field`): the loads then come in the order the PTX had
        // before the kernels were split by version.
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
        let (r, lane) = warp_row();
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
            // SAFETY: every lane runs this.
            unsafe { row.chunk1(v, w, x, (col0 + j) as u32, [true; 4]) };
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
            // SAFETY: every lane runs this (`c` is warp-uniform).
            unsafe { row.chunk1(v, w, x, (col0 + k) as u32, [ok, false, false, false]) };
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
    /// The body of `cluda_match_v4_rescore` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        // `warp_row()`, spelled out: the PTX then numbers its registers as it did before the
        // kernels were split by version.
        let t = super::tid();
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let warps = unsafe { core::arch::nvptx::_block_dim_x() as usize } / 32;
        // SAFETY: reads special registers (block and thread indices, block size); no preconditions.
        let row = unsafe { core::arch::nvptx::_block_idx_x() as usize } * warps + t / 32;
        let lane = t % 32;
        if row >= self.n as usize {
            return;
        }
        // SAFETY: `row < n`, inside the per-row counts (the launch's contract).
        let c = unsafe { *self.count.add(row) };
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let overflowed = c as usize > V4_SLOTS;
        if !overflowed && lane < c as usize {
            // SAFETY: `lane < c <= V4_SLOTS`: a filled slot of row `row`; its index is `< m`.
            let j = unsafe { *self.slot_i.add(row * V4_SLOTS + lane) };
            // SAFETY: `row < n` and `j < m`: rows of the `n x 128` and `m x 128` inputs.
            let (a, b) = unsafe { (self.lhs.add(row * DIM), self.rhs.add(j as usize * DIM)) };
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
            // word (the launch's contract).
            unsafe { put_best!(self, row, (bd, bi), overflowed) };
        }
    }
}
