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
use cudarc::driver::{CudaSlice, CudaStream};

use super::cublas::{Blas, CublasStatus};
use super::gpu::{DeviceResult, GpuMatcher, input, launch, output, warp_rows_grid};
use crate::error::{CudaContextExt, Error, Result};

/// Candidates kept per row (the kernels' `V3_K`, shared with them).
const K: usize = cluda_gpu::layout::matcher::V3_K;

/// V3's flagged rows on the device: a counter and the list it counts into.
pub(super) struct Flags {
    count: CudaSlice<u32>,
    rows: CudaSlice<u32>,
}

impl Flags {
    /// The flagged rows, sorted.
    pub(super) fn download(&self, s: &Arc<CudaStream>) -> Result<Vec<u32>> {
        let count = s
            .clone_dtoh(&self.count)
            .cuda("downloading v3's flag count")?
            .first()
            .copied()
            .unwrap_or(0) as usize;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut rows = s
            .clone_dtoh(&self.rows.slice(..count.min(self.rows.len())))
            .cuda("downloading v3's flagged rows")?;
        rows.sort_unstable();
        Ok(rows)
    }
}

/// Runs a bare SGEMM of the same shape as V3's whole problem (`n x m x 128`, FP32, one call,
/// output `n x m`), `reps` times after one warm-up; returns the median device milliseconds.
/// This is the floor V3 is measured against.
pub fn bare_sgemm_ms(
    matcher: &mut GpuMatcher,
    lhs: &[super::Descriptor],
    rhs: &[super::Descriptor],
    reps: usize,
) -> Result<f64> {
    matcher.blas()?;
    let s = matcher.stream.clone();
    let (n, m) = (lhs.len(), rhs.len());
    let a = s
        .clone_htod(rhs.as_flattened())
        .cuda("uploading the SGEMM operand")?;
    let b = s
        .clone_htod(lhs.as_flattened())
        .cuda("uploading the SGEMM operand")?;
    // SAFETY: uninitialised; SGEMM with beta = 0 writes every element before it is read.
    let mut c = unsafe { s.alloc::<f32>(n * m) }.cuda("allocating the SGEMM output")?;
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
    let blas = matcher
        .blas
        .as_ref()
        .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))?;
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = matcher.event()?;
        // SAFETY: a m x 128, b n x 128, c n x m.
        unsafe { blas.gemm(gemm, &a, &b, &mut c) }.map_err(blas_err("running the bare SGEMM"))?;
        let end = matcher.event()?;
        let ms = f64::from(start.elapsed_ms(&end).cuda("timing the bare SGEMM")?);
        if rep > 0 {
            times.push(ms);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times.get(times.len() / 2).copied().unwrap_or(f64::NAN))
}

fn blas_err(context: &str) -> impl FnOnce(CublasStatus) -> Error + '_ {
    move |source| Error::Cublas {
        context: context.to_string(),
        source: Box::new(source),
    }
}

impl GpuMatcher {
    /// The cuBLAS handle on the matcher's stream, created on first use in pure FP32 mode.
    fn blas(&mut self) -> Result<&Blas> {
        if self.blas.is_none() {
            self.blas = Some(Blas::new(self.stream.clone())?);
        }
        self.blas
            .as_ref()
            .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))
    }

    /// V3 on uploaded descriptors (`n`, `m` >= 1). Returns the per-row result and the rows that
    /// must be recomputed exactly (still on the device; see [`Flags::download`]).
    pub(super) fn v3(
        &mut self,
        lhs: &CudaSlice<f32>,
        n: usize,
        rhs: &CudaSlice<f32>,
        m: usize,
    ) -> Result<(DeviceResult, Flags)> {
        self.blas()?;
        let s = self.stream.clone();
        let tiling = self.tiling;
        let rows_t = tiling.rows.min(n);
        let cols_t = tiling.cols.min(m.next_multiple_of(4));
        let n32 = n as u32;

        // Buffers that a kernel writes entirely are left uninitialised (no memset in the timed
        // path); the right norms' padding and the counters must start at zero.
        // SAFETY: uninitialised; the norm kernel writes all n entries before they are read.
        let mut norms_a = unsafe { s.alloc::<f32>(n) }.cuda("allocating v3's left norms")?; // sqnorms
        let mut norms_b = s
            .alloc_zeros::<f32>(m.next_multiple_of(4))
            .cuda("allocating v3's right norms")?;
        let mut max_a = s
            .alloc_zeros::<u32>(1)
            .cuda("allocating v3's norm maximum")?;
        let mut max_b = s
            .alloc_zeros::<u32>(1)
            .cuda("allocating v3's norm maximum")?;
        for (x, rows, norms, max, what) in [
            (
                lhs,
                n,
                &mut norms_a,
                &mut max_a,
                "launching v3's norm kernel (lhs)",
            ),
            (
                rhs,
                m,
                &mut norms_b,
                &mut max_b,
                "launching v3's norm kernel (rhs)",
            ),
        ] {
            let (x, _x) = input(x, &s);
            let (norms, _n) = output(norms, &s);
            let (max_bits, _m) = output(max, &s);
            let mut a = MatchSqnormsArgs {
                x,
                rows: rows as u32,
                norms,
                max_bits,
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
            tiles.push(self.take_scratch(rows_t * cols_t, "allocating v3's tile")?);
        }
        let fold_stream = if tiling.overlap {
            self.fold_stream.clone()
        } else {
            s.clone()
        };
        let mut step = 0usize;
        // The first column tile (c0 = 0, `first`) writes all four entries of every row.
        // SAFETY: uninitialised; written by the first column tile before being read.
        let mut best_d = unsafe { s.alloc::<f32>(n * K) }.cuda("allocating v3's candidates")?;
        // SAFETY: as `best_d`.
        let mut best_i = unsafe { s.alloc::<u32>(n * K) }.cuda("allocating v3's candidates")?;
        let blas = self
            .blas
            .as_ref()
            .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))?;
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
                let a_view = rhs.slice(c0 * 128..(c0 + cols) * 128);
                let b_view = lhs.slice(r0 * 128..(r0 + rows) * 128);
                let tile = &mut tiles[step % nbuf];
                step += 1;
                let mut c_view = tile.slice_mut(..rows * ld);
                // SAFETY: the views hold exactly the cols x 128, rows x 128 and rows x ld floats
                // the configuration addresses.
                unsafe { blas.gemm(gemm, &a_view, &b_view, &mut c_view) }
                    .map_err(blas_err("running the v3 SGEMM tile"))?;
                let (rows32, cols32, ld32, r032, c032) =
                    (rows as u32, cols as u32, ld as u32, r0 as u32, c0 as u32);
                let first = u32::from(c0 == 0);
                let (tile, _t) = input(&*tile, &fold_stream);
                let (norms_b, _n) = input(&norms_b, &fold_stream);
                let (best_d, _d) = output(&mut best_d, &fold_stream);
                let (best_i, _i) = output(&mut best_i, &fold_stream);
                let mut a = MatchV3FoldArgs {
                    tile,
                    rows: rows32,
                    cols: cols32,
                    ld: ld32,
                    row0: r032,
                    col0: c032,
                    norms_b,
                    best_d,
                    best_i,
                    first,
                };
                let grid = (warp_rows_grid(rows)?, 1);
                // SAFETY: tile rows x ld, norms_b padded to a multiple of 4 >= c0 + ld,
                // best_* n x 4 with r0 + rows <= n.
                unsafe { launch(&fold_stream, &self.k.v3_fold, grid, &mut a.params()) }
                    .cuda("launching v3's fold kernel")?;
            }
        }
        for t in tiles {
            self.give_back(t);
        }

        // The rescoring writes every row's index and distance; flag_rows is read only up to
        // the count.
        // SAFETY: uninitialised; the rescoring writes every row's entry.
        let mut idx = unsafe { s.alloc::<u32>(n) }.cuda("allocating v3's indices")?;
        // SAFETY: as `idx`.
        let mut dist = unsafe { s.alloc::<f32>(n) }.cuda("allocating v3's distances")?;
        let mut flag_count = s
            .alloc_zeros::<u32>(1)
            .cuda("allocating v3's flag counter")?;
        // SAFETY: uninitialised; read only up to `flag_count`, whose rows the rescoring wrote.
        let mut flag_rows = unsafe { s.alloc::<u32>(n) }.cuda("allocating v3's flag list")?;
        {
            let (lhs, _l) = input(lhs, &s);
            let (rhs, _r) = input(rhs, &s);
            let (norms_a, _na) = input(&norms_a, &s);
            let (max_bits_b, _mb) = input(&max_b, &s);
            let (best_d, _bd) = input(&best_d, &s);
            let (best_i, _bi) = input(&best_i, &s);
            let (out_idx, _oi) = output(&mut idx, &s);
            let (out_dist, _od) = output(&mut dist, &s);
            let (flag_count, _fc) = output(&mut flag_count, &s);
            let (flag_rows, _fr) = output(&mut flag_rows, &s);
            let mut a = MatchV3RescoreArgs {
                lhs,
                rhs,
                n: n32,
                norms_a,
                max_bits_b,
                best_d,
                best_i,
                out_idx,
                out_dist,
                flag_count,
                flag_rows,
            };
            // SAFETY: lhs n x 128, rhs m x 128 (candidate indices < m or u32::MAX), best_*
            // n x 4, idx/dist/flag_rows n, flag_count 1.
            unsafe {
                launch(
                    &s,
                    &self.k.v3_rescore,
                    (warp_rows_grid(n)?, 1),
                    &mut a.params(),
                )
            }
            .cuda("launching v3's rescoring kernel")?;
        }
        Ok((
            DeviceResult { idx, dist },
            Flags {
                count: flag_count,
                rows: flag_rows,
            },
        ))
    }
}
