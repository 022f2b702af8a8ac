//! The GPU matcher: one stream, the matcher's kernels, the cuBLAS handles (created on first V3
//! or V4 use), and the upload / time / download frame around the four versions, one module
//! each ([`v1`], [`v2`], [`v3`], [`v4`]; V4's fused kernels in `fused`, feature
//! `experimental`), with the GEMM tile driver of V3 and V4 in [`tiles`] and cuBLAS's loading
//! in [`cublas`].

pub mod cublas;
#[cfg(feature = "experimental")]
mod fused;
mod tiles;
mod v1;
mod v2;
pub mod v3;
pub mod v4;

use std::sync::Arc;
use std::time::Instant;

use cluda_gpu::args::KernelArgs;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaEvent, CudaStream, DriverError};

use self::cublas::Blas;
use super::tiling::{V3Tiling, V4Kernel};
use super::types::{Descriptor, Match, MatchVersion, validate};
use crate::cuda::Device;
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Error, Result};
use crate::kernel::{Grid, Kernel};

/// Threads per block of every matcher launch (the kernels' tiles assume it).
const BLOCK: u32 = cluda_gpu::layout::matcher::BLOCK;

/// Declares [`Kernels`], one field per matcher kernel, loaded by its argument struct's entry
/// name; the fused ones only with the feature `experimental`.
macro_rules! kernels {
    ($($(#[$m:meta])* $field:ident: $args:ident,)*) => {
        /// The matcher's kernels, loaded from cluda's PTX module by the entry names of their
        /// argument structs.
        struct Kernels {
            $($(#[$m])* pub $field: Kernel<cluda_gpu::args::$args>,)*
        }

        impl Kernels {
            fn load(device: &Device) -> Result<Self> {
                Ok(Self {
                    $($(#[$m])* $field: Kernel::load(device)?,)*
                })
            }
        }
    };
}

kernels! {
    v1_distances: MatchV1DistancesArgs,
    v1_rowmin: MatchV1RowminArgs,
    v2_fused: MatchV2FusedArgs,
    merge_partials: MatchMergePartialsArgs,
    sqnorms: MatchSqnormsArgs,
    v3_fold: MatchV3FoldArgs,
    v3_rescore: MatchV3RescoreArgs,
    v4_radii: MatchV4RadiiArgs,
    v4_fold: MatchV4FoldArgs,
    v4_rescore: MatchV4RescoreArgs,
    #[cfg(feature = "experimental")]
    v4_fused: MatchV4FusedArgs,
    #[cfg(feature = "experimental")]
    v4_fused1: MatchV4Fused1Args,
    #[cfg(feature = "experimental")]
    v4_merge: MatchV4MergeArgs,
}

/// A GPU matcher bound to one device; reuse it across calls to avoid re-opening the context
/// and re-creating the cuBLAS handle.
pub struct GpuMatcher {
    device: Device,
    stream: Arc<CudaStream>,
    /// Second, high-priority stream: V3 folds tile k on it while SGEMM computes tile k+1 on
    /// `stream`.
    fold_stream: Arc<CudaStream>,
    k: Kernels,
    /// Large scratch buffers (V1's matrix, V3's tiles) kept between calls: stream-ordered
    /// allocations of hundreds of MiB cost more than the work they hold. See
    /// [`GpuMatcher::release_workspace`].
    workspace: Vec<DeviceBuf<f32>>,
    blas: Option<Blas>,
    /// V4's cuBLAS handle, in TF32 tensor-op mode (a handle of its own, so that V3 and the
    /// bare SGEMM never run in TF32).
    blas_tf32: Option<Blas>,
    sms: usize,
    tiling: V3Tiling,
    /// How V4 computes its screen (see `super::v4`).
    v4_kernel: V4Kernel,
}

/// Result of one GPU match with its timings.
#[derive(Clone, Debug)]
pub struct GpuRun {
    /// One match per left descriptor.
    pub matches: Vec<Match>,
    /// Wall time of the whole call (validation, upload, kernels, download), milliseconds.
    pub wall_ms: f64,
    /// Device time of the matching work alone (CUDA events around the kernels and GEMMs, after
    /// the upload and before the download), milliseconds.
    pub device_ms: f64,
    /// V3: rows whose four GEMM-ranked candidates could not be proven to contain the nearest
    /// neighbour; V4: rows with more candidates than its slots. Both recomputed exactly with
    /// V2 (0 for V1/V2).
    pub recomputed_rows: usize,
    /// V4 only: how many candidates per row its screen left for exact rescoring.
    pub candidates: Option<CandidateStats>,
}

/// V4's rescored candidates per left row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidateStats {
    /// Mean over the rows that did not overflow.
    pub mean: f64,
    /// Largest count of a row that did not overflow (at most the slots per row).
    pub max: u32,
    /// Rows with more candidates than slots (recomputed with V2).
    pub overflow_rows: usize,
}

impl CandidateStats {
    /// Statistics of V4's per-row counts (above `slots`: overflowed).
    fn of(counts: &[u32], slots: usize) -> Self {
        let ok: Vec<u32> = counts
            .iter()
            .copied()
            .filter(|&c| c as usize <= slots)
            .collect();
        let sum: f64 = ok.iter().map(|&c| f64::from(c)).sum();
        CandidateStats {
            mean: if ok.is_empty() {
                0.0
            } else {
                sum / ok.len() as f64
            },
            max: ok.iter().copied().max().unwrap_or(0),
            overflow_rows: counts.len() - ok.len(),
        }
    }
}

/// The two sides of a match on the device: the left descriptors and their count `n`, the right
/// ones and their count `m` (both at least 1).
#[derive(Clone, Copy)]
struct Sides<'a>(&'a DeviceBuf<f32>, usize, &'a DeviceBuf<f32>, usize);

/// Device-side outputs of a version: index (`u32`) and distance (`f32`) per left row.
struct DeviceResult {
    pub idx: DeviceBuf<u32>,
    pub dist: DeviceBuf<f32>,
}

impl DeviceResult {
    /// Room for `n` rows, uninitialised (the kernel writes every row); `what` names the
    /// version in errors.
    fn on_stream(s: &Arc<CudaStream>, n: usize, what: &str) -> Result<Self> {
        Ok(Self {
            idx: DeviceBuf::on_stream(s, n, &format!("{what}'s indices"))?,
            dist: DeviceBuf::on_stream(s, n, &format!("{what}'s distances"))?,
        })
    }

    /// The first `n` matches, downloaded in `stream`'s order; `what` names them in errors.
    fn download(&self, stream: &Arc<CudaStream>, n: usize, what: &str) -> Result<Vec<Match>> {
        let mut idx = vec![0u32; n];
        let mut dist = vec![0f32; n];
        self.idx
            .download_on(stream, &mut idx, &format!("the {what} indices"))?;
        self.dist
            .download_on(stream, &mut dist, &format!("the {what} distances"))?;
        Ok(idx
            .into_iter()
            .zip(dist)
            .map(|(index, distance)| Match { index, distance })
            .collect())
    }
}

/// V3's flagged rows (and V4's overflowed rows) on the device: a counter (`u32`) and the
/// list it counts into (`u32`).
struct Flags {
    pub count: DeviceBuf<u32>,
    pub rows: DeviceBuf<u32>,
}

impl Flags {
    /// Room for `n` flagged rows, the counter zeroed; `what` names the version in errors.
    fn on_stream(s: &Arc<CudaStream>, n: usize, what: &str) -> Result<Self> {
        Ok(Self {
            count: DeviceBuf::zeroed_on_stream(s, 1, &format!("{what}'s flag counter"))?,
            rows: DeviceBuf::on_stream(s, n, &format!("{what}'s flag list"))?,
        })
    }

    /// The flagged rows, sorted.
    fn download(&self, s: &Arc<CudaStream>) -> Result<Vec<u32>> {
        let mut count = [0u32];
        self.count.download_on(s, &mut count, "the flag count")?;
        let count = (count[0] as usize).min(self.rows.len());
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut rows = vec![0u32; count];
        self.rows.download_on(s, &mut rows, "the flagged rows")?;
        rows.sort_unstable();
        Ok(rows)
    }
}

impl GpuMatcher {
    /// Loads the matcher's kernels on `device` and creates its stream.
    pub fn new(device: &Device) -> Result<Self> {
        let ctx = device.context();
        let stream = ctx.new_stream().cuda("creating the matcher's stream")?;
        // The fold stream gets the highest priority, so that the block scheduler hands free
        // multiprocessors to the (memory-bound) fold of tile k while the (compute-bound)
        // SGEMM of tile k + 1 still has blocks waiting: the two overlap instead of the fold
        // only filling the GEMM's tail.
        let (_least, greatest) = cudarc::driver::result::stream::get_priority_range()
            .cuda("querying stream priorities")?;
        let fold_stream = ctx
            .new_stream_with_priority(greatest)
            .cuda("creating the matcher's fold stream")?;
        let k = Kernels::load(device)?;
        let sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .cuda("reading the multiprocessor count")?
            .max(1) as usize;
        Ok(Self {
            device: device.clone(),
            stream,
            fold_stream,
            k,
            workspace: Vec::new(),
            blas: None,
            blas_tf32: None,
            sms,
            tiling: V3Tiling::default(),
            v4_kernel: V4Kernel::default(),
        })
    }

    /// The device this matcher runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Frees the scratch buffers kept between calls (V1's distance matrix, V3's tiles).
    pub fn release_workspace(&mut self) {
        self.workspace.clear();
    }

    /// A scratch buffer of at least `len` floats: a kept one if large enough, else a new one
    /// (contents undefined). Give it back with [`Self::give_back`].
    fn take_scratch(&mut self, len: usize, what: &str) -> Result<DeviceBuf<f32>> {
        if let Some(pos) = self.workspace.iter().position(|b| b.len() >= len) {
            return Ok(self.workspace.swap_remove(pos));
        }
        // None fits: free what is kept before allocating (V1's matrix may need all of it).
        self.workspace.clear();
        // Uninitialised: every user writes the part it reads first.
        DeviceBuf::on_stream(&self.stream, len, what)
    }

    /// Keeps a scratch buffer for the next call (at most two are kept).
    fn give_back(&mut self, buf: DeviceBuf<f32>) {
        self.workspace.push(buf);
        self.workspace.sort_by_key(|b| std::cmp::Reverse(b.len()));
        self.workspace.truncate(2);
    }

    /// Sets V3's tile shape (GEMM block of left rows x right rows); see [`V3Tiling`].
    pub fn set_v3_tiling(&mut self, tiling: V3Tiling) -> Result<()> {
        tiling.check()?;
        self.tiling = tiling;
        Ok(())
    }

    /// Matches on the GPU with V1, V2, V3 or V4 (see [`super::match_nearest`]).
    pub fn run(
        &mut self,
        lhs: &[Descriptor],
        rhs: &[Descriptor],
        version: MatchVersion,
    ) -> Result<GpuRun> {
        let t0 = Instant::now();
        validate(lhs, rhs)?;
        if version == MatchVersion::Cpu {
            return Err(Error::param(
                "version",
                "GpuMatcher runs v1, v2, v3 or v4; use matcher::cpu for the CPU",
            ));
        }
        if lhs.is_empty() {
            return Ok(GpuRun {
                matches: Vec::new(),
                wall_ms: 0.0,
                device_ms: 0.0,
                recomputed_rows: 0,
                candidates: None,
            });
        }
        if version == MatchVersion::V1 {
            self.v1_check_memory(lhs.len(), rhs.len())?;
        }
        let lhs_d = DeviceBuf::upload_on(&self.stream, lhs.as_flattened(), "the left descriptors")?;
        let rhs_d =
            DeviceBuf::upload_on(&self.stream, rhs.as_flattened(), "the right descriptors")?;
        let (n, m) = (lhs.len(), rhs.len());
        let sides = Sides(&lhs_d, n, &rhs_d, m);
        let start = self.event()?;
        let mut counts = None;
        let (res, flagged) = match version {
            MatchVersion::V1 => (self.v1(sides)?, None),
            MatchVersion::V2 => (self.v2(sides)?, None),
            MatchVersion::V4 => {
                let out = self.v4(sides)?;
                counts = Some(out.counts);
                (out.result, Some(out.flags))
            }
            _ => {
                let (r, f) = self.v3(sides)?;
                (r, Some(f))
            }
        };
        let end = self.event()?;
        let candidates = match counts {
            Some(buf) => {
                let mut c = vec![0u32; n];
                buf.download_on(&self.stream, &mut c, "v4's candidate counts")?;
                Some(CandidateStats::of(&c, cluda_gpu::layout::matcher::V4_SLOTS))
            }
            None => None,
        };
        let flagged = match flagged {
            Some(f) => Some(f.download(&self.stream)?),
            None => None,
        };
        let mut matches = res.download(&self.stream, n, "match")?;
        let mut device_ms = f64::from(start.elapsed_ms(&end).cuda("timing the match")?);
        let mut recomputed_rows = 0;
        if let Some(rows) = flagged.filter(|r| !r.is_empty()) {
            // Exact fallback for the rows V3 could not certify or V4's slots could not hold: V2
            // on just those rows.
            recomputed_rows = rows.len();
            let sub: Vec<Descriptor> = rows.iter().map(|&r| lhs[r as usize]).collect();
            let sub_d =
                DeviceBuf::upload_on(&self.stream, sub.as_flattened(), "the rows to recompute")?;
            let s = self.event()?;
            let res = self.v2(Sides(&sub_d, sub.len(), &rhs_d, m))?;
            let e = self.event()?;
            let redone = res.download(&self.stream, sub.len(), "recomputed")?;
            device_ms += f64::from(s.elapsed_ms(&e).cuda("timing the recomputation")?);
            for (&r, found) in rows.iter().zip(redone) {
                matches[r as usize] = found;
            }
        }
        self.stream.synchronize().cuda("finishing the match")?;
        Ok(GpuRun {
            matches,
            wall_ms: t0.elapsed().as_secs_f64() * 1e3,
            device_ms,
            recomputed_rows,
            candidates,
        })
    }

    /// A timing event recorded now on the matcher's stream.
    fn event(&self) -> Result<CudaEvent> {
        self.stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .cuda("recording a timing event")
    }
}

/// Launches matcher kernel `k` on `stream` with `args`: `grid` blocks of [`BLOCK`] threads,
/// the stream's context bound first.
///
/// # Safety
///
/// As [`Kernel::launch`]: every pointer in `args` a live device buffer of the sizes the
/// kernel reads and writes for this grid, usable on `stream` (allocated on it, or ordered
/// after it by an event).
unsafe fn launch<A: KernelArgs>(
    stream: &CudaStream,
    k: &Kernel<A>,
    grid: (u32, u32),
    args: A,
) -> std::result::Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    // SAFETY: as the caller promises; the stream's context is current.
    unsafe { k.launch(stream, Grid::new(grid, BLOCK), args) }
}

/// [`launch`]es `k` on `stream` with one warp per row of `rows` ([`warp_rows_grid`]); a
/// failure is "launching `what`".
///
/// # Safety
///
/// As [`launch`], for a grid of one warp per row.
unsafe fn launch_rows<A: KernelArgs>(
    stream: &CudaStream,
    k: &Kernel<A>,
    rows: usize,
    args: A,
    what: &str,
) -> Result<()> {
    let grid = (warp_rows_grid(rows)?, 1);
    // SAFETY: as the caller promises.
    unsafe { launch(stream, k, grid, args) }.cuda(&format!("launching {what}"))
}

/// `$args { lhs, rhs, n (of the [`Sides`] `$p`), $mid, the outputs of `$out` and `$flags` }`:
/// a rescoring kernel's arguments, whose first and last fields are the groups both
/// rescorings share.
macro_rules! rescore_args {
    ($args:ident, $p:expr, $out:expr, $flags:expr, { $($mid:tt)* }) => {{
        let Sides(lhs, n, rhs, _) = $p;
        $args {
            lhs: lhs.ptr(),
            rhs: rhs.ptr(),
            n: n as u32,
            $($mid)*
            out_idx: $out.idx.ptr(),
            out_dist: $out.dist.ptr(),
            flag_count: $flags.count.ptr(),
            flag_rows: $flags.rows.ptr(),
        }
    }};
}
use rescore_args;

/// Grid size for one warp per row with [`BLOCK`]-thread blocks.
fn warp_rows_grid(rows: usize) -> Result<u32> {
    grid_dim(rows.div_ceil((BLOCK / 32) as usize), "rows")
}

/// A grid dimension as u32, or a clear error.
fn grid_dim(blocks: usize, what: &str) -> Result<u32> {
    u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| {
            Error::shape(
                format!("GPU grid over {what}"),
                "at most 2^31-1 blocks",
                format!("{blocks}"),
            )
        })
}
