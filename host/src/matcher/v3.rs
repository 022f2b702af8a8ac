//! V3: cuBLAS SGEMM tiles + a Rust fold kernel, with exact re-scoring.
//!
//! 1. `cluda_match_sqnorms` computes `||a||^2` and `||b||^2` (and the largest `||b||^2`).
//! 2. For each tile of `rows` left x `cols` right descriptors, cuBLAS computes
//!    `T = -2 A B^T` (SGEMM, FP32, `CUBLAS_DEFAULT_MATH`: no TF32 or other reduced-precision
//!    tensor-op path) into one reused tile buffer; `cluda_match_v3_fold` adds `||b||^2` and folds
//!    each row into its running best four `(estimate, index)` pairs. The tile is then
//!    overwritten by the next one: the `n x m` matrix never exists.
//! 3. `cluda_match_v3_rescore` recomputes the four candidates' distances directly
//!    (`sum (a-b)^2` in f32) and keeps the best, so the returned distance is not the
//!    cancellation-prone expansion. A row is flagged when the GEMM's worst-case rounding error
//!    (`gamma_128` bound, see the kernel) could have hidden its true neighbour outside the four;
//!    flagged rows (typically none, except for clusters of near-duplicates) are recomputed
//!    exactly with V2 by the caller.
//!
//! The estimate `||b||^2 - 2 a.b` omits `||a||^2`, which is the same for a whole row.
//!
//! cuBLAS is loaded at run time under the name the installed CUDA (11, 12 or 13) gives it; see
//! [`super::cublas`] for the search. Without cuBLAS, V3 fails with [`Error::NoGpu`] naming the
//! files tried; V1 and V2 do not need it.

use std::sync::Arc;

use cluda_gpu::args::{MatchSqnormsArgs, MatchV3FoldArgs, MatchV3RescoreArgs};
use cudarc::cublas::GemmConfig;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::cublas::{Blas, CublasStatus, Math};
use super::gpu::{DeviceResult, GpuMatcher, launch, warp_rows_grid};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Error, Result};

/// Candidates kept per row (the kernels' `V3_K`, shared with them).
const K: usize = cluda_gpu::layout::matcher::V3_K;

/// V3's flagged rows (and V4's overflowed rows) on the device: a counter (`u32`) and the list it counts into (`u32`).
pub(super) struct Flags {
    count: DeviceBuf,
    rows: DeviceBuf,
}

impl Flags {
    /// Flags in `rows`, counted by the `u32` in `count`.
    pub(super) fn new(count: DeviceBuf, rows: DeviceBuf) -> Self {
        Flags { count, rows }
    }

    /// The flagged rows, sorted.
    pub(super) fn download(&self, s: &Arc<CudaStream>) -> Result<Vec<u32>> {
        let mut count = [0u32];
        self.count.download_on(s, &mut count, "v3's flag count")?;
        let count = (count[0] as usize).min(self.rows.bytes() / 4);
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut rows = vec![0u32; count];
        self.rows.download_on(s, &mut rows, "v3's flagged rows")?;
        rows.sort_unstable();
        Ok(rows)
    }
}

/// An event on `stream` marking the work queued so far (no timing), for another stream to
/// wait for.
pub(super) fn mark(stream: &CudaStream, what: &str) -> Result<CudaEvent> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .cuda(what)
}

/// Makes `main` wait for everything queued on `fold` so far, on every way out of a tiled V3
/// or V4 run with overlapped tiles (the folds on a stream of their own): [`FoldsJoined::join`]
/// on the normal path, the drop on an early return (a failed SGEMM or launch). Buffers the
/// folds read (the tiles, the norms and radii, the candidates, the caller's descriptors) are
/// freed, or reused, in `main`'s order, so none goes before the folds are done. Created after
/// every such buffer of the run (locals drop in reverse order: this one first). Without
/// overlap (one stream) it does nothing.
pub(super) struct FoldsJoined<'a> {
    fold: &'a CudaStream,
    main: &'a CudaStream,
    /// Still to join (overlap, and not joined yet).
    pending: bool,
}

impl<'a> FoldsJoined<'a> {
    /// Joins `fold` into `main` when dropped or joined; `overlap` false: the two are one
    /// stream, nothing to join.
    pub(super) fn new(fold: &'a CudaStream, main: &'a CudaStream, overlap: bool) -> Self {
        Self {
            fold,
            main,
            pending: overlap,
        }
    }

    fn join_now(&self) -> Result<()> {
        let done = mark(self.fold, "marking the last fold")?;
        self.main
            .wait(&done)
            .cuda("ordering the matcher's stream after the folds")
    }

    /// Orders `main` after the folds now (the rescoring reads their candidates). On failure
    /// the drop still waits for the folds.
    pub(super) fn join(mut self) -> Result<()> {
        let joined = self.join_now();
        self.pending = joined.is_err();
        joined
    }
}

impl Drop for FoldsJoined<'_> {
    fn drop(&mut self) {
        // Ordered by an event when that can be queued, else by waiting for the folds here.
        if self.pending && self.join_now().is_err() {
            let _ = self.fold.synchronize();
        }
    }
}

/// Runs a bare SGEMM of the same shape as V3's whole problem (`n x m x 128`, FP32, one call,
/// output `n x m`), `reps` times after one warm-up; returns the median device milliseconds.
/// This is the floor V3 is measured against.
pub fn bare_sgemm_ms(
    matcher: &mut GpuMatcher,
    lhs: &[super::types::Descriptor],
    rhs: &[super::types::Descriptor],
    reps: usize,
) -> Result<f64> {
    bare_gemm_ms(matcher, lhs, rhs, reps, Math::Fp32)
}

/// [`bare_sgemm_ms`] with the SGEMM in `math` (V4's floor is the TF32 one).
pub(super) fn bare_gemm_ms(
    matcher: &mut GpuMatcher,
    lhs: &[super::types::Descriptor],
    rhs: &[super::types::Descriptor],
    reps: usize,
    math: Math,
) -> Result<f64> {
    matcher.blas_for(math)?;
    let s = matcher.stream.clone();
    let (n, m) = (lhs.len(), rhs.len());
    let a = DeviceBuf::upload_on(&s, rhs.as_flattened(), "the SGEMM operand")?;
    let b = DeviceBuf::upload_on(&s, lhs.as_flattened(), "the SGEMM operand")?;
    // Uninitialised: SGEMM with beta = 0 writes every element before it is read.
    let c = DeviceBuf::on_stream(&s, n * m * 4, "the SGEMM output")?;
    let gemm = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: m as i32,
        n: n as i32,
        k: 128,
        alpha: -2.0f32,
        lda: 128,
        ldb: 128,
        beta: 0.0f32,
        ldc: m as i32,
    };
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = matcher.event()?;
        let blas = matcher.blas_for(math)?;
        // SAFETY: a m x 128, b n x 128, c n x m.
        unsafe { blas.gemm(gemm, a.at(), b.at(), c.at()) }
            .map_err(blas_err("running the bare SGEMM"))?;
        let end = matcher.event()?;
        let ms = f64::from(start.elapsed_ms(&end).cuda("timing the bare SGEMM")?);
        if rep > 0 {
            times.push(ms);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times.get(times.len() / 2).copied().unwrap_or(f64::NAN))
}

pub(super) fn blas_err(context: &str) -> impl FnOnce(CublasStatus) -> Error + '_ {
    move |source| Error::Cublas {
        context: context.to_string(),
        source: Box::new(source),
    }
}

impl GpuMatcher {
    /// The cuBLAS handle on the matcher's stream for `math`, created on first use (one handle
    /// per mode, so that V3 and the bare SGEMM never run in TF32).
    pub(super) fn blas_for(&mut self, math: Math) -> Result<&mut Blas> {
        let slot = match math {
            Math::Fp32 => &mut self.blas,
            Math::Tf32 => &mut self.blas_tf32,
        };
        if slot.is_none() {
            *slot = Some(Blas::new(self.stream.clone(), math)?);
        }
        slot.as_mut()
            .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))
    }

    /// V3 on uploaded descriptors (`n`, `m` >= 1). Returns the per-row result and the rows that
    /// must be recomputed exactly (still on the device; see [`Flags::download`]).
    pub(super) fn v3(
        &mut self,
        lhs: &DeviceBuf,
        n: usize,
        rhs: &DeviceBuf,
        m: usize,
    ) -> Result<(DeviceResult, Flags)> {
        self.blas_for(Math::Fp32)?;
        let s = self.stream.clone();
        let tiling = self.tiling;
        let rows_t = tiling.rows.min(n);
        let cols_t = tiling.cols.min(m.next_multiple_of(4));
        let n32 = n as u32;

        // Buffers that a kernel writes entirely are left uninitialised (no memset in the timed
        // path); the right norms' padding and the counters must start at zero.
        let norms_a = DeviceBuf::on_stream(&s, n * 4, "v3's left norms")?;
        let norms_b =
            DeviceBuf::zeroed_on_stream(&s, m.next_multiple_of(4) * 4, "v3's right norms")?;
        let max_a = DeviceBuf::zeroed_on_stream(&s, 4, "v3's norm maximum")?;
        let max_b = DeviceBuf::zeroed_on_stream(&s, 4, "v3's norm maximum")?;
        for (x, rows, norms, max, what) in [
            (lhs, n, &norms_a, &max_a, "launching v3's norm kernel (lhs)"),
            (rhs, m, &norms_b, &max_b, "launching v3's norm kernel (rhs)"),
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
                    &s,
                    &self.k.sqnorms,
                    (warp_rows_grid(rows)?, 1),
                    &mut a.params(),
                )
            }
            .cuda(what)?;
        }

        // Each tile region is written by SGEMM before the fold reads it.
        let nbuf = if tiling.overlap { 2 } else { 1 };
        let mut tiles = Vec::with_capacity(nbuf);
        for _ in 0..nbuf {
            tiles.push(self.take_scratch(rows_t * cols_t, "v3's tile")?);
        }
        // With overlap the folds run on their own stream; the two streams are ordered by
        // events: a fold waits for the SGEMM of its tile (which came after the norms and the
        // allocations on `s`), an SGEMM waits for the last fold that read its tile, and the
        // rescoring waits for the last fold.
        let fold_stream = if tiling.overlap {
            self.fold_stream.clone()
        } else {
            s.clone()
        };
        let mut folded: Vec<Option<CudaEvent>> = (0..nbuf).map(|_| None).collect();
        let mut step = 0usize;
        // The first column tile (c0 = 0, `first`) writes all four entries of every row.
        let best_d = DeviceBuf::on_stream(&s, n * K * 4, "v3's candidates")?;
        let best_i = DeviceBuf::on_stream(&s, n * K * 4, "v3's candidates")?;
        let blas = self
            .blas
            .as_mut()
            .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))?;
        // From here on the folds may read every buffer above: joined on every way out.
        let folds = FoldsJoined::new(&fold_stream, &s, tiling.overlap);
        for r0 in (0..n).step_by(rows_t) {
            let rows = rows_t.min(n - r0);
            for c0 in (0..m).step_by(cols_t) {
                let cols = cols_t.min(m - c0);
                let ld = cols.next_multiple_of(4);
                // Column-major view: C (cols x rows, ldc = ld) = B_tile^T (cols x 128) * A_tile (128 x rows),
                // i.e. row-major rows x ld with C[r][c] = -2 a_(r0+r) . b_(c0+c).
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
                        .cuda("ordering v3's SGEMM after its tile's last fold")?;
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
                .map_err(blas_err("running the v3 SGEMM tile"))?;
                if tiling.overlap {
                    let written = mark(&s, "marking v3's SGEMM tile")?;
                    fold_stream
                        .wait(&written)
                        .cuda("ordering v3's fold after its SGEMM tile")?;
                }
                let mut a = MatchV3FoldArgs {
                    tile: tile.at(),
                    rows: rows as u32,
                    cols: cols as u32,
                    ld: ld as u32,
                    row0: r0 as u32,
                    col0: c0 as u32,
                    norms_b: norms_b.at(),
                    best_d: best_d.at(),
                    best_i: best_i.at(),
                    first: u32::from(c0 == 0),
                };
                let grid = (warp_rows_grid(rows)?, 1);
                // SAFETY: tile rows x ld, norms_b padded to a multiple of 4 >= c0 + ld,
                // best_* n x 4 with r0 + rows <= n; all ready on the fold stream (the waits
                // above).
                unsafe { launch(&fold_stream, &self.k.v3_fold, grid, &mut a.params()) }
                    .cuda("launching v3's fold kernel")?;
                if tiling.overlap {
                    folded[slot] = Some(mark(&fold_stream, "marking v3's fold")?);
                }
            }
        }
        // The rescoring reads the folds' candidates, and the tiles (and, when freed, the
        // candidates) are reused on `s`: all after the last fold.
        folds.join()?;
        for t in tiles {
            self.give_back(t);
        }

        // The rescoring writes every row's index and distance; flag_rows is read only up to
        // the count.
        let idx = DeviceBuf::on_stream(&s, n * 4, "v3's indices")?;
        let dist = DeviceBuf::on_stream(&s, n * 4, "v3's distances")?;
        let flag_count = DeviceBuf::zeroed_on_stream(&s, 4, "v3's flag counter")?;
        let flag_rows = DeviceBuf::on_stream(&s, n * 4, "v3's flag list")?;
        let mut a = MatchV3RescoreArgs {
            lhs: lhs.at(),
            rhs: rhs.at(),
            n: n32,
            norms_a: norms_a.at(),
            max_bits_b: max_b.at(),
            best_d: best_d.at(),
            best_i: best_i.at(),
            out_idx: idx.at(),
            out_dist: dist.at(),
            flag_count: flag_count.at(),
            flag_rows: flag_rows.at(),
        };
        // SAFETY: lhs n x 128, rhs m x 128 (candidate indices < m or u32::MAX), best_* n x 4,
        // idx/dist/flag_rows n, flag_count 1; the folds are done (the wait above).
        unsafe {
            launch(
                &s,
                &self.k.v3_rescore,
                (warp_rows_grid(n)?, 1),
                &mut a.params(),
            )
        }
        .cuda("launching v3's rescoring kernel")?;
        Ok((
            DeviceResult { idx, dist },
            Flags {
                count: flag_count,
                rows: flag_rows,
            },
        ))
    }
}
