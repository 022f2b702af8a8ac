//! Typed launches of the cluster-finding kernels (`gpu/src/kernels/`).
//!
//! Each launch fills the kernel family's argument struct from `cluda_gpu::args` (the struct
//! the kernels' parameter lists are declared from) and hands the driver the address of every
//! field; the entry names come from `cluda_gpu::args::names`. So the host and the kernels
//! share one definition of every parameter list.

use std::ffi::c_void;
use std::sync::OnceLock;

use cluda_gpu::args::{ClassifyArgs, DevicePtr, PrepareArgs, RunArgs, StepArgs, StepNext, names};
use cudarc::driver::CudaFunction;
use cudarc::driver::sys::{self, CUstream};

use crate::cluster::ClusterSize;
use crate::config::Precision;
use crate::cuda::Device;
use crate::error::{CudaContextExt, Error, Result};

/// Threads per block of the finder's kernels; also the pixels per tile.
pub(crate) const BLOCK: u32 = cluda_gpu::layout::BLOCK;
/// Words before the run kernels' progress flags (one arrival counter per count slot).
const RUN_WORK_HEAD: usize = cluda_gpu::layout::WORK_HEAD as usize;
/// Slots of per-tile counts the run kernels cycle through.
const RUN_COUNT_SLOTS: usize = cluda_gpu::layout::COUNT_SLOTS as usize;
/// Planes of corrected values the run kernels cycle through.
pub(crate) const RUN_PLANES: usize = cluda_gpu::layout::PLANES as usize;

/// A floating-point kernel parameter in the finder's precision.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scalar {
    /// An `f64` parameter.
    F64(f64),
    /// An `f32` parameter.
    F32(f32),
}

/// `inv` and `n_sigma` of one precision, for the argument structs of that real type.
#[derive(Clone, Copy, Debug)]
enum Reals {
    F64(f64, f64),
    F32(f32, f32),
}

/// A device address as the kernels' pointer parameter of `T` values.
fn dev<T>(addr: u64) -> DevicePtr<T> {
    DevicePtr::new(addr)
}

/// Launches `f` with `params` (the field addresses of its argument struct) on `stream`:
/// `grid` blocks of [`BLOCK`] threads, as a cooperative launch when `cooperative` (every
/// block resident at once), through [`crate::cuda::launch`].
///
/// # Safety
///
/// As [`crate::cuda::launch`]: `params` must be the fields of the argument struct of `f`'s
/// family, alive until the call returns, with every pointer a live device buffer of the sizes
/// the kernel reads and writes.
unsafe fn launch(
    f: &CudaFunction,
    grid: u32,
    stream: CUstream,
    params: &mut [*mut c_void],
    cooperative: bool,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    // SAFETY: as the caller promises.
    unsafe { crate::cuda::launch(f, (grid, 1), BLOCK, stream, params, cooperative) }
}

/// Frame geometry shared by both kernels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Columns per frame.
    pub cols: u32,
    /// Pixels per frame.
    pub pixels: u32,
    /// Row stride of the padded plane of corrected values.
    pub stride: u32,
    /// Padding (window radius) of that plane.
    pub r: u32,
    /// Classify tiles per frame.
    pub tiles: u32,
}

impl Geometry {
    /// The geometry of `rows x cols` frames with `size` windows.
    pub fn new(rows: usize, cols: usize, size: ClusterSize) -> Self {
        let r = size.side() / 2;
        let pixels = (rows * cols) as u32;
        Self {
            cols: cols as u32,
            pixels,
            stride: (cols + 2 * r) as u32,
            r: r as u32,
            tiles: pixels.div_ceil(BLOCK),
        }
    }

    /// Elements of the padded plane.
    pub fn plane_len(&self, rows: usize) -> usize {
        (rows + 2 * self.r as usize) * self.stride as usize
    }

    /// Look-back words of one classify launch: the ticket, then one per tile.
    pub fn status_len(&self) -> usize {
        1 + self.tiles as usize
    }

    /// Words of the run kernels' work area: the arrival counters, one progress flag per
    /// tile, then the slots of one count per tile.
    pub fn run_work_len(&self) -> usize {
        self.run_flags_len() + RUN_COUNT_SLOTS * self.tiles as usize
    }

    /// Words at the start of the run kernels' work area that must be zero before every
    /// launch: the arrival counters and the progress flags.
    pub fn run_flags_len(&self) -> usize {
        RUN_WORK_HEAD + self.tiles as usize
    }
}

/// What a run launch needs besides the pedestal ([`FrameBuffers`]): its planes and its
/// work area (counters and flags first, zeroed before every launch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunBuffers {
    /// [`RUN_PLANES`] padded planes, `plane_len` elements apart.
    pub planes: u64,
    pub plane_len: u32,
    pub work: u64,
}

/// The run kernel of a frame geometry whose grid (one block per tile) fits on the device at
/// once.
#[derive(Clone, Debug)]
pub(crate) struct RunKernel {
    function: CudaFunction,
    /// Blocks of the launch: one per tile.
    grid: u32,
}

/// The pedestal state and scratch a frame's kernels read and write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameBuffers {
    pub base: u64,
    pub a: u64,
    pub b: u64,
    pub frozen_std: u64,
    pub c_plane: u64,
    pub t: u64,
    pub status: u64,
}

/// Where a classify launch puts the frame's clusters (see `Output` in the kernel).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Destination {
    /// Address of the clusters already in the buffer (compact mode), or 0.
    pub base_in: u64,
    /// Where the count (plus `*base_in`) goes.
    pub count_out: u64,
    /// First record of the buffer.
    pub records: u64,
    /// Records the buffer has room for.
    pub room: u32,
}

/// The prepare arguments of the frame at `frame` with the pedestal and scratch of `buf`.
fn prepare_args<R>(
    (inv, n_sigma): (R, R),
    live: u32,
    g: &Geometry,
    frame: u64,
    buf: &FrameBuffers,
) -> PrepareArgs<R> {
    PrepareArgs {
        frame: dev(frame),
        base: dev(buf.base),
        a: dev(buf.a),
        b: dev(buf.b),
        frozen_std: dev(buf.frozen_std),
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        r: g.r,
        inv,
        n_sigma,
        live,
        c_plane: dev(buf.c_plane),
        t_out: dev(buf.t),
        status: dev(buf.status),
        n_status: g.status_len() as u32,
    }
}

/// The classify arguments of the frame at `frame`: its pedestal state, plane and thresholds,
/// the geometry, and where its records go.
fn classify_args<R>(
    inv: R,
    g: &Geometry,
    frame: u64,
    buf: &FrameBuffers,
    dst: &Destination,
) -> ClassifyArgs<R> {
    ClassifyArgs {
        frame: dev(frame),
        base: dev(buf.base),
        a: dev(buf.a),
        b: dev(buf.b),
        c: dev(buf.c_plane),
        t: dev(buf.t),
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        tiles: g.tiles,
        inv,
        status: dev(buf.status),
        base_in: dev(dst.base_in),
        count_out: dev(dst.count_out),
        records: dev(dst.records),
        room: dst.room,
    }
}

/// The step arguments: classify `c`'s frame, then prepare the frame at `next_frame` (0: none)
/// into `next`'s plane, thresholds and look-back words.
fn step_args<R>(
    c: ClassifyArgs<R>,
    n_sigma: R,
    live: u32,
    g: &Geometry,
    frozen_std: u64,
    next_frame: u64,
    next: &FrameBuffers,
) -> StepArgs<R> {
    StepArgs::join(
        c,
        StepNext {
            next_frame: dev(next_frame),
            frozen_std: dev(frozen_std),
            r: g.r,
            n_sigma,
            live,
            c_next: dev(next.c_plane),
            t_next: dev(next.t),
            status_next: dev(next.status),
        },
    )
}

/// The run arguments of `n` frames at `frames`.
#[allow(clippy::too_many_arguments)]
fn run_args<R>(
    (inv, n_sigma): (R, R),
    live: u32,
    g: &Geometry,
    frames: u64,
    n: u32,
    buf: &FrameBuffers,
    run: &RunBuffers,
    dst: &Destination,
) -> RunArgs<R> {
    RunArgs {
        frames: dev(frames),
        n,
        base: dev(buf.base),
        a: dev(buf.a),
        b: dev(buf.b),
        frozen_std: dev(buf.frozen_std),
        planes: dev(run.planes),
        plane_len: run.plane_len,
        work: dev(run.work),
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        tiles: g.tiles,
        r: g.r,
        inv,
        n_sigma,
        live,
        base_in: dev(dst.base_in),
        count_out: dev(dst.count_out),
        records: dev(dst.records),
        room: dst.room,
    }
}

/// Evaluates `$body` with `$reals` (`(inv, n_sigma)`) in the real type of `$k`'s precision.
macro_rules! with_reals {
    ($k:expr, |$reals:ident| $body:expr) => {
        match $k.reals {
            Reals::F64(inv, n_sigma) => {
                let $reals = (inv, n_sigma);
                $body
            }
            Reals::F32(inv, n_sigma) => {
                let $reals = (inv, n_sigma);
                $body
            }
        }
    };
}

/// A kernel loaded (its module JIT-compiled by the driver) on its first launch, so that a
/// run pays only for the kernels it launches: opt10 never launches `classify` or `step`.
struct LazyKernel {
    name: &'static str,
    function: OnceLock<CudaFunction>,
}

impl LazyKernel {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            function: OnceLock::new(),
        }
    }

    /// The kernel, loaded from `device` the first time.
    fn get(&self, device: &Device) -> Result<&CudaFunction> {
        if let Some(f) = self.function.get() {
            return Ok(f);
        }
        let f = device.function(self.name)?;
        Ok(self.function.get_or_init(|| f))
    }
}

/// The kernels of one precision and cluster size: `prepare` and `classify` (two launches per
/// frame), `step` (classify this frame and prepare the next one in one launch), and `run`
/// (many frames in one cooperative launch).
pub(crate) struct Kernels {
    device: Device,
    prepare: LazyKernel,
    classify: LazyKernel,
    step: LazyKernel,
    /// `None` when no run variant covers a frame's tiles (launches go per frame then).
    run: Option<RunKernel>,
    reals: Reals,
    live: u32,
}

impl Kernels {
    /// Loads the kernels for `precision` and `size`; `inv` (in the kernels' precision) and
    /// `n_sigma` (converted to it exactly as the CPU finder converts it) are the constants of
    /// every launch.
    pub fn load(
        device: &Device,
        precision: Precision,
        size: ClusterSize,
        tiles: u32,
        inv: Scalar,
        n_sigma: f64,
        live: bool,
    ) -> Result<Self> {
        let reals = match (precision, inv) {
            (Precision::F64, Scalar::F64(inv)) => Reals::F64(inv, n_sigma),
            (Precision::F32 | Precision::F32Naive, Scalar::F32(inv)) => {
                Reals::F32(inv, n_sigma as f32)
            }
            _ => {
                return Err(Error::param(
                    "precision",
                    "the kernels' constants are not in the finder's precision",
                ));
            }
        };
        let f64 = matches!(reals, Reals::F64(..));
        let side = size.side();
        let sized = |name: Option<&'static str>| {
            name.ok_or_else(|| Error::param("size", format!("no kernels for {side}x{side}")))
        };
        // One block per tile, all resident at once (the kernel's waits need it).
        let function = device.function(sized(names::run(f64, side))?)?;
        let run = (tiles <= resident_blocks(device, &function)?).then_some(RunKernel {
            function,
            grid: tiles,
        });
        Ok(Self {
            device: device.clone(),
            run,
            prepare: LazyKernel::new(names::prepare(f64)),
            classify: LazyKernel::new(sized(names::classify(f64, side))?),
            step: LazyKernel::new(sized(names::step(f64, side))?),
            reals,
            live: live as u32,
        })
    }

    /// Launches `prepare` for the frame at device address `frame`.
    pub fn prepare(
        &self,
        stream: CUstream,
        g: &Geometry,
        frame: u64,
        buf: &FrameBuffers,
    ) -> Result<()> {
        let grid = g.pixels.max(g.status_len() as u32).div_ceil(BLOCK);
        let prepare = self.prepare.get(&self.device)?;
        with_reals!(self, |reals| {
            let mut args = prepare_args(reals, self.live, g, frame, buf);
            // SAFETY: the fields of `cluda_prepare_*`'s struct; every pointer is a live
            // device buffer of the sizes the geometry implies.
            unsafe { launch(prepare, grid, stream, &mut args.params(), false) }
        })
        .cuda("launching the prepare kernel")
    }

    /// Launches `classify` for the frame at device address `frame`.
    pub fn classify(
        &self,
        stream: CUstream,
        g: &Geometry,
        frame: u64,
        buf: &FrameBuffers,
        dst: &Destination,
    ) -> Result<()> {
        let classify = self.classify.get(&self.device)?;
        with_reals!(self, |reals| {
            let mut args = classify_args(reals.0, g, frame, buf, dst);
            // SAFETY: the fields of `cluda_classify_*`'s struct; every pointer is a live
            // device buffer of the sizes the geometry and destination imply.
            unsafe { launch(classify, g.tiles, stream, &mut args.params(), false) }
        })
        .cuda("launching the classify kernel")
    }

    /// Launches `step`: classifies the frame at `frame` with `buf` (as [`Kernels::classify`]),
    /// then, when `next_frame` is not 0, prepares the frame at `next_frame` into `next`'s
    /// plane, thresholds and look-back words (its pedestal fields must equal `buf`'s).
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &self,
        stream: CUstream,
        g: &Geometry,
        frame: u64,
        buf: &FrameBuffers,
        dst: &Destination,
        next_frame: u64,
        next: &FrameBuffers,
    ) -> Result<()> {
        let step = self.step.get(&self.device)?;
        with_reals!(self, |reals| {
            let c = classify_args(reals.0, g, frame, buf, dst);
            let mut args = step_args(c, reals.1, self.live, g, buf.frozen_std, next_frame, next);
            // SAFETY: the fields of `cluda_step_*`'s struct; every pointer is a live device
            // buffer of the sizes the geometry and destination imply.
            unsafe { launch(step, g.tiles, stream, &mut args.params(), false) }
        })
        .cuda("launching the step kernel")
    }

    /// Whether one launch can find many frames (a run kernel covers the frame's tiles).
    pub fn has_run(&self) -> bool {
        self.run.is_some()
    }

    /// Launches `run` for `n` consecutive frames at device address `frames` (one cooperative
    /// launch; see `gpu/src/kernels/run.rs`). The caller must have zeroed the counters and flags
    /// (the first [`Geometry::run_flags_len`] words of `run.work`) on `stream` before.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        stream: CUstream,
        g: &Geometry,
        frames: u64,
        n: u32,
        buf: &FrameBuffers,
        run: &RunBuffers,
        dst: &Destination,
    ) -> Result<()> {
        let Some(kernel) = &self.run else {
            return Err(Error::param(
                "launch",
                "no run kernel covers this frame size; use one launch per frame",
            ));
        };
        with_reals!(self, |reals| {
            let mut args = run_args(reals, self.live, g, frames, n, buf, run, dst);
            // SAFETY: the fields of `cluda_run1_*`'s struct; every pointer is a live device
            // buffer of the sizes the geometry and destination imply; the grid fits on the
            // device at once (checked at load, and by the cooperative launch) and has one
            // block per tile.
            unsafe {
                launch(
                    &kernel.function,
                    kernel.grid,
                    stream,
                    &mut args.params(),
                    true,
                )
            }
        })
        .cuda("launching the run kernel")
    }
}

/// Blocks of `f` (with [`BLOCK`] threads) that fit on the device at once: the grid bound of
/// a cooperative launch.
fn resident_blocks(device: &Device, f: &CudaFunction) -> Result<u32> {
    // The occupancy query is a context call: the context must be current on this thread.
    device
        .context()
        .bind_to_thread()
        .cuda("binding the CUDA context")?;
    let per_sm = f
        .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
        .cuda("querying the run kernel's occupancy")?;
    let sms = device
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .cuda("querying the multiprocessor count")?;
    Ok(per_sm * (sms.max(0) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Geometry, FrameBuffers, Destination) {
        let g = Geometry {
            cols: 11,
            pixels: 12,
            stride: 13,
            r: 14,
            tiles: 15,
        };
        let buf = FrameBuffers {
            base: 2,
            a: 3,
            b: 4,
            frozen_std: 99,
            c_plane: 5,
            t: 6,
            status: 7,
        };
        let dst = Destination {
            base_in: 8,
            count_out: 9,
            records: 10,
            room: 16,
        };
        (g, buf, dst)
    }

    /// Every field of the classify and step arguments comes from its own source value.
    #[test]
    fn arguments_take_each_value_once() {
        let (g, buf, dst) = sample();
        let c = classify_args(0.5f64, &g, 1, &buf, &dst);
        let next = FrameBuffers {
            c_plane: 50,
            t: 60,
            status: 70,
            ..buf
        };
        let s = step_args(c, 3.0, 1, &g, buf.frozen_std, 40, &next);
        assert_eq!(c.frame.addr() as usize, 1);
        assert_eq!(
            [
                c.base.addr() as usize,
                c.a.addr() as usize,
                c.b.addr() as usize
            ],
            [2, 3, 4]
        );
        assert_eq!(
            [
                c.c.addr() as usize,
                c.t.addr() as usize,
                c.status.addr() as usize
            ],
            [5, 6, 7]
        );
        assert_eq!(
            [c.cols, c.pixels, c.stride, c.tiles, c.room],
            [11, 12, 13, 15, 16]
        );
        assert_eq!(
            [
                c.base_in.addr() as usize,
                c.count_out.addr() as usize,
                c.records.addr() as usize
            ],
            [8, 9, 10]
        );
        assert_eq!(c.inv, 0.5);
        assert_eq!(
            (s.next_frame.addr() as usize, s.frozen_std.addr() as usize),
            (40, 99)
        );
        assert_eq!(
            [
                s.c_next.addr() as usize,
                s.t_next.addr() as usize,
                s.status_next.addr() as usize
            ],
            [50, 60, 70]
        );
        assert_eq!((s.r, s.n_sigma, s.live), (14, 3.0, 1));
        let p = prepare_args((0.25f32, 5.0f32), 0, &g, 1, &buf);
        assert_eq!((p.n_status, p.r, p.inv, p.n_sigma), (16, 14, 0.25, 5.0));
    }

    /// A step launch's leading parameters are a classify launch's, in the same places.
    #[test]
    fn step_arguments_start_with_the_classify_arguments() {
        let n = ClassifyArgs::<f64>::PARAMS;
        assert_eq!(
            StepArgs::<f64>::layout()[..n],
            ClassifyArgs::<f64>::layout()[..]
        );
        assert_eq!(
            StepArgs::<f32>::layout()[..n],
            ClassifyArgs::<f32>::layout()[..]
        );
        assert_eq!(StepArgs::<f64>::NAMES[..n], ClassifyArgs::<f64>::NAMES[..]);
    }

    /// The parameter array of a launch points at the struct's fields, in order.
    #[test]
    fn params_point_at_the_fields() {
        let (g, buf, dst) = sample();
        let mut c = classify_args(0.5f32, &g, 1, &buf, &dst);
        let base = &raw const c as usize;
        let layout = ClassifyArgs::<f32>::layout();
        let p = c.params();
        assert_eq!(p.len(), layout.len());
        for (ptr, (offset, _)) in p.iter().zip(layout) {
            assert_eq!(*ptr as usize - base, offset);
        }
    }
}
