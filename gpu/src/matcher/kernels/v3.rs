//! V3's kernels around the host's cuBLAS SGEMM tiles of `-2 A B^T`: `cluda_match_sqnorms`
//! (squared norms, also used by V4), `cluda_match_v3_fold` (adds `||b||^2` to a tile and folds
//! it into each row's running best *four* candidates; the tile is then discarded) and
//! `cluda_match_v3_rescore` (the exact fp32 distance of those four, the best kept, and the rows
//! where the GEMM's rounding could have hidden the true neighbour flagged for V2).

use core::sync::atomic::{AtomicU32, Ordering};

use super::{better, fma, ldg4, warp_row};
use crate::kernels::prims::{shfl_xor_f32, shfl_xor_u32};
use crate::layout::matcher::{DIM, V3_K};
use crate::matcher::args::{MatchSqnormsArgs, MatchV3FoldArgs, MatchV3RescoreArgs};

/// Squared norms `norms[r] = ||x_r||^2` (fp32, fma), one warp per row, and the largest of
/// them, as f32 bits (non-negative floats order like their bits), into `*max_bits`.
impl MatchSqnormsArgs {
    /// The body of `cluda_match_sqnorms` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let (row, lane) = warp_row();
        if row >= self.rows as usize {
            return;
        }
        // SAFETY: `row < rows` and `lane * 4 + 3 < 128`, inside the `rows x 128` input; 16-byte
        // aligned.
        let v = unsafe { ldg4(self.x.add(row * DIM + lane * 4)) };
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
                *self.norms.add(row) = s;
                (*(self.max_bits as *const AtomicU32)).fetch_max(s.to_bits(), Ordering::Relaxed);
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
    /// The body of `cluda_match_v3_fold` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let (r, lane) = warp_row();
        if r >= self.rows as usize {
            return;
        }
        let (cols, ld, col0) = (self.cols as usize, self.ld as usize, self.col0 as usize);
        // SAFETY: `r < rows`, and the tile holds `rows` rows of `ld` floats (the launch's
        // contract).
        let line = unsafe { self.tile.add(r * ld) };
        // SAFETY: `norms_b` holds the right norms padded to a multiple of 4 beyond `col0 + ld` (the
        // launch's contract).
        let nb = unsafe { self.norms_b.add(col0) };
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
            let g = (self.row0 as usize + r) * V3_K;
            if self.first == 0 {
                unroll!(4, K, {
                    // SAFETY: `row0 + r < n`, and `best_d`/`best_i` hold `n x 4` values (the
                    // launch's contract).
                    unsafe { top.insert(*self.best_d.add(g + K), *self.best_i.add(g + K)) };
                });
            }
            unroll!(4, K, {
                // SAFETY: as above.
                unsafe {
                    *self.best_d.add(g + K) = top.d[K];
                    *self.best_i.add(g + K) = top.i[K];
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
    /// The body of `cluda_match_v3_rescore` (declared from `crate::matcher::args`).
    #[inline(always)]
    pub(super) unsafe fn run(self) {
        let (row, lane) = warp_row();
        if row >= self.n as usize {
            return;
        }
        // SAFETY: `row < n` and `lane * 4 + 3 < 128`, inside the `n x 128` left input; 16-byte
        // aligned.
        let a = unsafe { ldg4(self.lhs.add(row * DIM + lane * 4)) };
        let (mut bd, mut bi) = (f32::INFINITY, u32::MAX);
        let mut k = 0;
        while k < V3_K {
            // SAFETY: `row < n` and `k < 4`, inside the `n x 4` candidates (the launch's contract).
            let j = unsafe { *self.best_i.add(row * V3_K + k) };
            if j != u32::MAX {
                // SAFETY: `j < m` (a candidate index, not `u32::MAX`), inside the `m x 128` right
                // input; 16-byte aligned.
                let b = unsafe { ldg4(self.rhs.add(j as usize * DIM + lane * 4)) };
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
            let fourth = unsafe { *self.best_i.add(row * V3_K + V3_K - 1) };
            let safe = if fourth == u32::MAX {
                true // fewer than four right descriptors: all were rescored
            } else {
                // SAFETY: `row < n`, and `norms_a` holds `n` floats (the launch's contract).
                let na = unsafe { *self.norms_a.add(row) };
                // SAFETY: `max_bits_b` is one word (the launch's contract).
                let nb = f32::from_bits(unsafe { *self.max_bits_b });
                let root = core::f32::math::sqrt(na) + core::f32::math::sqrt(nb);
                let e = 2.0 * 130.0 * (1.0 / 16_777_216.0) * root * root;
                // SAFETY: `row < n`, inside the `n x 4` candidates.
                let floor = unsafe { *self.best_d.add(row * V3_K + V3_K - 1) } + na - e;
                bd <= floor
            };
            // SAFETY: `row < n`; the outputs and the flag list hold `n` values and the counter one
            // word (the launch's contract).
            unsafe { put_best!(self, row, (bd, bi), !safe) };
        }
    }
}
