//! V4: a TF32 tensor-core screen (cuBLAS) with a proven error bound, then V2's exact f32
//! arithmetic on every candidate the screen cannot rule out: the result equals V2's bit for
//! bit (index and distance, ties to the smaller index).
//!
//! 1. `cluda_match_sqnorms` computes `||a||^2` and `||b||^2`; `cluda_match_v4_radii` turns them
//!    into radii, upper bounds of the exact norms ([`cluda_gpu::match_bound::radius`]).
//! 2. For each tile of left x right descriptors, cuBLAS computes `T = -2 A B^T` on the tensor
//!    cores (`CUBLAS_TF32_TENSOR_OP_MATH`: inputs reduced to TF32, FP32 accumulation) into a
//!    reused tile buffer; `cluda_match_v4_fold` adds `||b||^2` (the screen `s`), bounds its
//!    error `e` ([`cluda_gpu::match_bound::error`]), lowers the row's running
//!    `tau = min (s + e)` and appends every right row with `s - e <= threshold(tau)` to the
//!    row's candidate slots (`V4_SLOTS` per row; a row that needs more is marked overflowed).
//!    The tile is then overwritten by the next one: the `n x m` matrix never exists.
//! 3. `cluda_match_v4_rescore` computes each candidate's distance exactly as V2 does (`fma`
//!    over the 128 dimensions in order) and keeps the smallest, ties to the smaller index.
//!    Overflowed rows (clusters of near-duplicates) are recomputed with V2 by the caller.
//!
//! With [`GpuMatcher::set_v4_kernel`], step 2 is instead done by a kernel of ours that computes
//! the same screen with `mma.sync` TF32 instructions and never stores it: either in two passes
//! (`cluda_match_v4_fused`: each row's `tau`, then the candidates against the final threshold)
//! or in one (`cluda_match_v4_fused1`: running bounds and candidate lists per right split,
//! merged by `cluda_match_v4_merge`).
//!
//! Why V2's winner is always a candidate, with every constant: `docs/matcher.md`, "v4".

use cluda_gpu::args::{
    MatchSqnormsArgs, MatchV4FoldArgs, MatchV4Fused1Args, MatchV4FusedArgs, MatchV4MergeArgs,
    MatchV4RadiiArgs, MatchV4RescoreArgs,
};
use cudarc::cublas::GemmConfig;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::CudaEvent;

use super::cublas::Math;
use super::gpu::{BLOCK, DeviceResult, GpuMatcher, grid_dim, launch, warp_rows_grid};
use super::tiling::V4Kernel;
use super::v2::split_plan;
use super::v3::{Flags, FoldsJoined, bare_gemm_ms, blas_err, mark};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Error, Result};

/// Candidate slots per row (the kernels' `V4_SLOTS`, shared with them).
pub const SLOTS: usize = cluda_gpu::layout::matcher::V4_SLOTS;

/// Candidate slots per row and right split of the one-pass fused kernel.
const SPLIT_SLOTS: usize = cluda_gpu::layout::matcher::V4_SPLIT_SLOTS;

/// Runs a bare TF32 GEMM (`CUBLAS_TF32_TENSOR_OP_MATH`) of V4's whole problem (`n x m x 128`,
/// one call, output `n x m`), `reps` times after one warm-up; returns the median device
/// milliseconds. This is the floor V4 is measured against.
pub fn bare_tf32_ms(
    matcher: &mut GpuMatcher,
    lhs: &[super::types::Descriptor],
    rhs: &[super::types::Descriptor],
    reps: usize,
) -> Result<f64> {
    bare_gemm_ms(matcher, lhs, rhs, reps, Math::Tf32)
}

/// V4's outputs on the device: the per-row result, the overflowed rows (to recompute with V2)
/// and the candidate count per row (above [`SLOTS`] for an overflowed row).
pub(super) struct V4Out {
    pub result: DeviceResult,
    pub flags: Flags,
    pub counts: DeviceBuf,
}

impl GpuMatcher {
    /// Chooses how V4 computes its screen (default: cuBLAS tiles and the fold).
    pub fn set_v4_kernel(&mut self, kernel: V4Kernel) {
        self.v4_kernel = kernel;
    }

    /// V4 on uploaded descriptors (`n`, `m` >= 1), fused or tiled as set.
    pub(super) fn v4(
        &mut self,
        lhs: &DeviceBuf,
        n: usize,
        rhs: &DeviceBuf,
        m: usize,
    ) -> Result<V4Out> {
        match self.v4_kernel {
            V4Kernel::Cublas => self.v4_tiled(lhs, n, rhs, m),
            V4Kernel::FusedTwoPass => self.v4_fused(lhs, n, rhs, m),
            V4Kernel::FusedOnePass => self.v4_fused1(lhs, n, rhs, m),
        }
    }

    /// Norms and radii of both sides: `(norms_b, radii_a, radii_b)`, the right ones padded
    /// with zero norms to `mp` (a multiple of 4).
    fn v4_radii(
        &self,
        lhs: &DeviceBuf,
        n: usize,
        rhs: &DeviceBuf,
        m: usize,
        mp: usize,
    ) -> Result<(DeviceBuf, DeviceBuf, DeviceBuf)> {
        let s = &self.stream;
        // Buffers that a kernel writes entirely are left uninitialised; the right norms'
        // padding and the norm maximum (unused by V4) start at zero.
        let norms_a = DeviceBuf::on_stream(s, n * 4, "v4's left norms")?;
        let norms_b = DeviceBuf::zeroed_on_stream(s, mp * 4, "v4's right norms")?;
        let radii_a = DeviceBuf::on_stream(s, n * 4, "v4's left radii")?;
        let radii_b = DeviceBuf::on_stream(s, mp * 4, "v4's right radii")?;
        let max = DeviceBuf::zeroed_on_stream(s, 4, "v4's norm maximum")?;
        for (x, rows, len, norms, radii, what) in [
            (lhs, n, n, &norms_a, &radii_a, "v4's norm kernels (lhs)"),
            (rhs, m, mp, &norms_b, &radii_b, "v4's norm kernels (rhs)"),
        ] {
            let mut a = MatchSqnormsArgs {
                x: x.at(),
                rows: rows as u32,
                norms: norms.at(),
                max_bits: max.at(),
            };
            // SAFETY: x rows x 128, norms >= rows (lhs: n, rhs: m padded), max 1.
            unsafe {
                launch(
                    s,
                    &self.k.sqnorms,
                    (warp_rows_grid(rows)?, 1),
                    &mut a.params(),
                )
            }
            .cuda(what)?;
            let mut a = MatchV4RadiiArgs {
                norms: norms.at(),
                len: len as u32,
                radii: radii.at(),
            };
            let grid = (grid_dim(len.div_ceil(BLOCK as usize), "radii")?, 1);
            // SAFETY: norms and radii hold `len` floats (the right ones padded with zeros).
            unsafe { launch(s, &self.k.v4_radii, grid, &mut a.params()) }.cuda(what)?;
        }
        Ok((norms_b, radii_a, radii_b))
    }

    /// V4 with its fused kernel: two passes of `cluda_match_v4_fused` (row bounds, then
    /// candidates), then the rescoring.
    fn v4_fused(&mut self, lhs: &DeviceBuf, n: usize, rhs: &DeviceBuf, m: usize) -> Result<V4Out> {
        let s = self.stream.clone();
        let mp = m.next_multiple_of(4);
        let (norms_b, radii_a, radii_b) = self.v4_radii(lhs, n, rhs, m, mp)?;
        let (splits, per) = split_plan(n, m, self.sms);
        // Pass 1 writes every (row, split); the counts start at zero; slots are written
        // before they are counted.
        let part_tau = DeviceBuf::on_stream(&s, n * splits * 4, "v4's row bounds")?;
        let counts = DeviceBuf::zeroed_on_stream(&s, n * 4, "v4's candidate counts")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS * 4, "v4's candidates")?;
        let grid = (grid_dim(n.div_ceil(128), "left tiles")?, splits as u32);
        for gather in [0u32, 1] {
            let mut a = MatchV4FusedArgs {
                lhs: lhs.at(),
                n: n as u32,
                rhs: rhs.at(),
                m: m as u32,
                tiles_per_split: per as u32,
                splits: splits as u32,
                norms_b: norms_b.at(),
                radii_b: radii_b.at(),
                radii_a: radii_a.at(),
                part_tau: part_tau.at(),
                count: counts.at(),
                slot_i: slot_i.at(),
                gather,
            };
            // SAFETY: lhs n x 128, rhs m x 128, right norms and radii >= m, left radii n,
            // partials n x splits, counts n, slots n x SLOTS, as the kernel indexes them; pass
            // 2 runs after pass 1 on the same stream.
            unsafe { launch(&s, &self.k.v4_fused, grid, &mut a.params()) }
                .cuda("launching v4's fused kernel")?;
        }
        self.v4_rescore(lhs, n, rhs, counts, slot_i)
    }

    /// V4 with its one-pass fused kernel and the merge, then the rescoring.
    fn v4_fused1(&mut self, lhs: &DeviceBuf, n: usize, rhs: &DeviceBuf, m: usize) -> Result<V4Out> {
        let s = self.stream.clone();
        let mp = m.next_multiple_of(4);
        let (norms_b, radii_a, radii_b) = self.v4_radii(lhs, n, rhs, m, mp)?;
        let (splits, per) = split_plan(n, m, self.sms);
        // Every (row, split) of the partials is written by the fused kernel, the lists up to
        // their counts; the merge writes every count and the slots up to it.
        let part_tau = DeviceBuf::on_stream(&s, n * splits * 4, "v4's row bounds")?;
        let part_cnt = DeviceBuf::on_stream(&s, n * splits * 4, "v4's split counts")?;
        let part_l = DeviceBuf::on_stream(&s, n * splits * SPLIT_SLOTS * 4, "v4's split lists")?;
        let part_j = DeviceBuf::on_stream(&s, n * splits * SPLIT_SLOTS * 4, "v4's split lists")?;
        let counts = DeviceBuf::on_stream(&s, n * 4, "v4's candidate counts")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS * 4, "v4's candidates")?;
        let mut a = MatchV4Fused1Args {
            lhs: lhs.at(),
            n: n as u32,
            rhs: rhs.at(),
            m: m as u32,
            tiles_per_split: per as u32,
            splits: splits as u32,
            norms_b: norms_b.at(),
            radii_b: radii_b.at(),
            radii_a: radii_a.at(),
            part_tau: part_tau.at(),
            part_cnt: part_cnt.at(),
            part_l: part_l.at(),
            part_j: part_j.at(),
        };
        let grid = (grid_dim(n.div_ceil(128), "left tiles")?, splits as u32);
        // SAFETY: lhs n x 128, rhs m x 128, right norms and radii >= m, left radii n,
        // partials n x splits (lists n x splits x SPLIT_SLOTS), as the kernel indexes them.
        unsafe { launch(&s, &self.k.v4_fused1, grid, &mut a.params()) }
            .cuda("launching v4's one-pass fused kernel")?;
        let mut a = MatchV4MergeArgs {
            part_tau: part_tau.at(),
            part_cnt: part_cnt.at(),
            part_l: part_l.at(),
            part_j: part_j.at(),
            n: n as u32,
            splits: splits as u32,
            radii_a: radii_a.at(),
            count: counts.at(),
            slot_i: slot_i.at(),
        };
        let grid = (grid_dim(n.div_ceil(BLOCK as usize), "rows")?, 1);
        // SAFETY: the partials as above, left radii n, counts n, slots n x SLOTS; after the
        // fused kernel on the same stream.
        unsafe { launch(&s, &self.k.v4_merge, grid, &mut a.params()) }
            .cuda("launching v4's merge kernel")?;
        self.v4_rescore(lhs, n, rhs, counts, slot_i)
    }

    /// V4 with cuBLAS TF32 tiles and the fold kernel.
    fn v4_tiled(&mut self, lhs: &DeviceBuf, n: usize, rhs: &DeviceBuf, m: usize) -> Result<V4Out> {
        self.blas_for(Math::Tf32)?;
        let s = self.stream.clone();
        let tiling = self.tiling;
        let rows_t = tiling.rows.min(n);
        let mp = m.next_multiple_of(4);
        let cols_t = tiling.cols.min(mp);
        let (norms_b, radii_a, radii_b) = self.v4_radii(lhs, n, rhs, m, mp)?;

        let nbuf = if tiling.overlap { 2 } else { 1 };
        let mut tiles = Vec::with_capacity(nbuf);
        for _ in 0..nbuf {
            tiles.push(self.take_scratch(rows_t * cols_t, "v4's tile")?);
        }
        // As V3: with overlap the folds run on the high-priority stream, ordered by events.
        let fold_stream = if tiling.overlap {
            self.fold_stream.clone()
        } else {
            s.clone()
        };
        let mut folded: Vec<Option<CudaEvent>> = (0..nbuf).map(|_| None).collect();
        let mut step = 0usize;
        // The first column tile (`first`) initialises every row's tau and count; slots are
        // written before they are counted.
        let tau = DeviceBuf::on_stream(&s, n * 4, "v4's row bounds")?;
        let counts = DeviceBuf::on_stream(&s, n * 4, "v4's candidate counts")?;
        let slot_d = DeviceBuf::on_stream(&s, n * SLOTS * 4, "v4's candidates")?;
        let slot_i = DeviceBuf::on_stream(&s, n * SLOTS * 4, "v4's candidates")?;
        let blas = self
            .blas_tf32
            .as_mut()
            .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))?;
        // From here on the folds may read every buffer above: joined on every way out.
        let folds = FoldsJoined::new(&fold_stream, &s, tiling.overlap);
        for r0 in (0..n).step_by(rows_t) {
            let rows = rows_t.min(n - r0);
            for c0 in (0..m).step_by(cols_t) {
                let cols = cols_t.min(m - c0);
                let ld = cols.next_multiple_of(4);
                // Column-major view, as V3: row-major rows x ld with C[r][c] = -2 a . b.
                let gemm = GemmConfig {
                    transa: cublasOperation_t::CUBLAS_OP_T,
                    transb: cublasOperation_t::CUBLAS_OP_N,
                    m: cols as i32,
                    n: rows as i32,
                    k: 128,
                    alpha: -2.0f32,
                    lda: 128,
                    ldb: 128,
                    beta: 0.0f32,
                    ldc: ld as i32,
                };
                let slot = step % nbuf;
                step += 1;
                let tile = &tiles[slot];
                if let Some(read) = &folded[slot] {
                    s.wait(read)
                        .cuda("ordering v4's GEMM after its tile's last fold")?;
                }
                // SAFETY: rhs from row c0 (cols x 128 floats), lhs from row r0 (rows x 128) and
                // the tile (rows_t x cols_t >= rows x ld floats) hold what the configuration
                // addresses; the tile's last reader is done (the wait above).
                unsafe {
                    blas.gemm(
                        gemm,
                        rhs.at::<f32>().add(c0 * 128),
                        lhs.at::<f32>().add(r0 * 128),
                        tile.at(),
                    )
                }
                .map_err(blas_err("running the v4 TF32 GEMM tile"))?;
                if tiling.overlap {
                    let written = mark(&s, "marking v4's GEMM tile")?;
                    fold_stream
                        .wait(&written)
                        .cuda("ordering v4's fold after its GEMM tile")?;
                }
                let mut a = MatchV4FoldArgs {
                    tile: tile.at(),
                    rows: rows as u32,
                    cols: cols as u32,
                    ld: ld as u32,
                    row0: r0 as u32,
                    col0: c0 as u32,
                    norms_b: norms_b.at(),
                    radii_b: radii_b.at(),
                    radii_a: radii_a.at(),
                    tau: tau.at(),
                    count: counts.at(),
                    slot_d: slot_d.at(),
                    slot_i: slot_i.at(),
                    first: u32::from(c0 == 0),
                };
                let grid = (warp_rows_grid(rows)?, 1);
                // SAFETY: tile rows x ld; right norms and radii padded to a multiple of 4 >= c0
                // + ld; per-row arrays n and slots n x SLOTS with r0 + rows <= n; all ready on
                // the fold stream (the waits above).
                unsafe { launch(&fold_stream, &self.k.v4_fold, grid, &mut a.params()) }
                    .cuda("launching v4's fold kernel")?;
                if tiling.overlap {
                    folded[slot] = Some(mark(&fold_stream, "marking v4's fold")?);
                }
            }
        }
        folds.join()?;
        for t in tiles {
            self.give_back(t);
        }
        self.v4_rescore(lhs, n, rhs, counts, slot_i)
    }

    /// The exact rescoring of every row's candidates (`counts`, `slot_i`), and the overflowed
    /// rows' list.
    fn v4_rescore(
        &self,
        lhs: &DeviceBuf,
        n: usize,
        rhs: &DeviceBuf,
        counts: DeviceBuf,
        slot_i: DeviceBuf,
    ) -> Result<V4Out> {
        let s = &self.stream;
        let idx = DeviceBuf::on_stream(s, n * 4, "v4's indices")?;
        let dist = DeviceBuf::on_stream(s, n * 4, "v4's distances")?;
        let flag_count = DeviceBuf::zeroed_on_stream(s, 4, "v4's overflow counter")?;
        let flag_rows = DeviceBuf::on_stream(s, n * 4, "v4's overflow list")?;
        let mut a = MatchV4RescoreArgs {
            lhs: lhs.at(),
            rhs: rhs.at(),
            n: n as u32,
            count: counts.at(),
            slot_i: slot_i.at(),
            out_idx: idx.at(),
            out_dist: dist.at(),
            flag_count: flag_count.at(),
            flag_rows: flag_rows.at(),
        };
        // SAFETY: lhs n x 128, rhs m x 128 (slot indices < m), counts n, slots n x SLOTS,
        // idx/dist/flag_rows n, flag_count 1; the folds are done (the wait above).
        unsafe {
            launch(
                s,
                &self.k.v4_rescore,
                (warp_rows_grid(n)?, 1),
                &mut a.params(),
            )
        }
        .cuda("launching v4's rescoring kernel")?;
        Ok(V4Out {
            result: DeviceResult { idx, dist },
            flags: Flags::new(flag_count, flag_rows),
            counts,
        })
    }
}
