//! The GEMM tile driver V3 and V4 share: tiles of `-2 A B^T` from cuBLAS (FP32 for V3, TF32
//! for V4), each folded by the version's kernel as soon as it is written, so the `n x m` matrix
//! never exists; and the bare GEMM of the whole problem, their floor in the benchmark.
//!
//! With overlap ([`V3Tiling::overlap`](crate::matcher::V3Tiling)) there are two tile buffers
//! and the folds run on the matcher's high-priority fold stream: a fold waits for the GEMM of
//! its tile, a GEMM waits for the last fold that read its tile, and the caller's stream waits
//! for the last fold before the driver returns (or unwinds).

use cudarc::cublas::GemmConfig;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaStream};

use super::cublas::{Blas, CublasStatus, Math};
use super::{GpuMatcher, Kernels, Sides};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Error, Result};
use crate::matcher::types::Descriptor;
use cluda_gpu::args::DevicePtr;

/// One GEMM tile, as its fold reads it: `rows x cols` values `-2 a_(row0+r) . b_(col0+c)`,
/// row-major with row stride `ld` (`cols` rounded up to a multiple of 4).
pub(super) struct Tile {
    pub at: DevicePtr<f32>,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub row0: usize,
    pub col0: usize,
}

impl Tile {
    /// The first tile of its rows (`col0 == 0`): the fold starts the rows' state afresh.
    pub fn first(&self) -> u32 {
        u32::from(self.col0 == 0)
    }
}

/// `$args { tile, rows, cols, ld, row0, col0 (of the [`Tile`] `$tile`), $rest }`: a fold
/// kernel's arguments, whose first fields are the GEMM tile's (the kernels' field group).
macro_rules! fold_args {
    ($args:ident, $tile:expr, { $($rest:tt)* }) => {
        $args {
            tile: $tile.at,
            rows: $tile.rows as u32,
            cols: $tile.cols as u32,
            ld: $tile.ld as u32,
            row0: $tile.row0 as u32,
            col0: $tile.col0 as u32,
            $($rest)*
        }
    };
}
pub(super) use fold_args;

/// `-2 A B^T` of `rows` left rows and `cols` right rows into a row-major `rows x ld` tile:
/// cuBLAS's column-major `C (cols x rows, ldc = ld) = B^T (cols x 128) * A (128 x rows)`.
fn gemm_config(rows: usize, cols: usize, ld: usize) -> GemmConfig<f32> {
    GemmConfig {
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
    }
}

/// An event on `stream` marking the work queued so far (no timing), for another stream to
/// wait for.
fn mark(stream: &CudaStream, what: &str) -> Result<CudaEvent> {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
        .cuda(what)
}

/// Makes `main` wait for everything queued on `fold` so far, on every way out of a tiled V3
/// or V4 run with overlapped tiles (the folds on a stream of their own): [`FoldsJoined::join`]
/// on the normal path, the drop on an early return (a failed GEMM or launch). Buffers the
/// folds read (the tiles, the norms and radii, the candidates, the caller's descriptors) are
/// freed, or reused, in `main`'s order, so none goes before the folds are done. Created after
/// every such buffer of the run (locals drop in reverse order: this one first). Without
/// overlap (one stream) it does nothing.
struct FoldsJoined<'a> {
    fold: &'a CudaStream,
    main: &'a CudaStream,
    /// Still to join (overlap, and not joined yet).
    pending: bool,
}

impl<'a> FoldsJoined<'a> {
    /// Joins `fold` into `main` when dropped or joined; `overlap` false: the two are one
    /// stream, nothing to join.
    fn new(fold: &'a CudaStream, main: &'a CudaStream, overlap: bool) -> Self {
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
    fn join(mut self) -> Result<()> {
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

/// The error of a failed cuBLAS call, with `context`.
fn blas_err(context: &str) -> impl FnOnce(CublasStatus) -> Error + '_ {
    move |source| Error::Cublas {
        context: context.to_string(),
        source: Box::new(source),
    }
}

impl GpuMatcher {
    /// The cuBLAS handle on the matcher's stream for `math`, created on first use (one handle
    /// per mode, so that V3 and the bare SGEMM never run in TF32).
    fn blas_for(&mut self, math: Math) -> Result<&mut Blas> {
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

    /// `-2 A B^T` of the uploaded descriptors (`n`, `m` >= 1), tile by tile with cuBLAS in
    /// `math` in the shape of [`GpuMatcher::set_v3_tiling`], each tile handed to `fold` (the
    /// kernels, the stream to launch on, the tile) right after its GEMM. Every fold is done, in
    /// the matcher's stream's order, when this returns, also on an error. `what` (`v3`, `v4`)
    /// names the run in errors.
    pub(super) fn gemm_tiles(
        &mut self,
        math: Math,
        Sides(lhs, n, rhs, m): Sides<'_>,
        what: &str,
        mut fold: impl FnMut(&Kernels, &CudaStream, &Tile) -> Result<()>,
    ) -> Result<()> {
        self.blas_for(math)?;
        let s = self.stream.clone();
        let tiling = self.tiling;
        let rows_t = tiling.rows.min(n);
        let cols_t = tiling.cols.min(m.next_multiple_of(4));
        // Each tile region is written by the GEMM before the fold reads it.
        let nbuf = if tiling.overlap { 2 } else { 1 };
        let mut tiles = Vec::with_capacity(nbuf);
        for _ in 0..nbuf {
            tiles.push(self.take_scratch(rows_t * cols_t, &format!("{what}'s tile"))?);
        }
        let fold_stream = if tiling.overlap {
            self.fold_stream.clone()
        } else {
            s.clone()
        };
        let mut folded: Vec<Option<CudaEvent>> = (0..nbuf).map(|_| None).collect();
        let blas = match math {
            Math::Fp32 => self.blas.as_mut(),
            Math::Tf32 => self.blas_tf32.as_mut(),
        }
        .ok_or_else(|| Error::NoGpu("cuBLAS handle unavailable".into()))?;
        let kernels = &self.k;
        let running = format!("running the {what} GEMM tile");
        let after_fold = format!("ordering {what}'s GEMM after its tile's last fold");
        let after_gemm = format!("ordering {what}'s fold after its GEMM tile");
        // From here on the folds may read every buffer of the run: joined on every way out.
        let folds = FoldsJoined::new(&fold_stream, &s, tiling.overlap);
        let mut step = 0usize;
        for row0 in (0..n).step_by(rows_t) {
            let rows = rows_t.min(n - row0);
            for col0 in (0..m).step_by(cols_t) {
                let cols = cols_t.min(m - col0);
                let ld = cols.next_multiple_of(4);
                let slot = step % nbuf;
                step += 1;
                let buf = &tiles[slot];
                if let Some(read) = &folded[slot] {
                    s.wait(read).cuda(&after_fold)?;
                }
                // SAFETY: rhs from row col0 (cols x 128 floats), lhs from row row0 (rows x 128)
                // and the tile (rows_t x cols_t >= rows x ld floats) hold what the
                // configuration addresses; the tile's last reader is done (the wait above).
                unsafe {
                    blas.gemm(
                        gemm_config(rows, cols, ld),
                        rhs.at(col0 * 128),
                        lhs.at(row0 * 128),
                        buf.ptr(),
                    )
                }
                .map_err(blas_err(&running))?;
                if tiling.overlap {
                    let written = mark(&s, "marking a GEMM tile")?;
                    fold_stream.wait(&written).cuda(&after_gemm)?;
                }
                let tile = Tile {
                    at: buf.ptr(),
                    rows,
                    cols,
                    ld,
                    row0,
                    col0,
                };
                fold(kernels, &fold_stream, &tile)?;
                if tiling.overlap {
                    folded[slot] = Some(mark(&fold_stream, "marking a fold")?);
                }
            }
        }
        folds.join()?;
        for t in tiles {
            self.give_back(t);
        }
        Ok(())
    }
}

/// Runs a bare GEMM in `math` of the same shape as V3's and V4's whole problem
/// (`n x m x 128`, one call, output `n x m`), `reps` times after one warm-up; returns the
/// median device milliseconds: the floor V3 (FP32) and V4 (TF32) are measured against.
pub(super) fn bare_gemm_ms(
    matcher: &mut GpuMatcher,
    lhs: &[Descriptor],
    rhs: &[Descriptor],
    reps: usize,
    math: Math,
) -> Result<f64> {
    matcher.blas_for(math)?;
    let s = matcher.stream.clone();
    let (n, m) = (lhs.len(), rhs.len());
    let a = DeviceBuf::upload_on(&s, rhs.as_flattened(), "the SGEMM operand")?;
    let b = DeviceBuf::upload_on(&s, lhs.as_flattened(), "the SGEMM operand")?;
    // Uninitialised: SGEMM with beta = 0 writes every element before it is read.
    let c = DeviceBuf::on_stream(&s, n * m, "the SGEMM output")?;
    let gemm = gemm_config(n, m, m);
    let mut times = Vec::with_capacity(reps);
    for rep in 0..=reps {
        let start = matcher.event()?;
        let blas = matcher.blas_for(math)?;
        // SAFETY: a m x 128, b n x 128, c n x m.
        unsafe { blas.gemm(gemm, a.ptr(), b.ptr(), c.ptr()) }
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
