//! Typed launches of the cluster-finding kernels (`gpu/src/kernels/`).
//!
//! Each launch fills the kernel family's argument struct from `cluda_gpu::args` (the struct
//! the kernels' parameter lists are declared from) and hands the driver the address of every
//! field; the entry names come from `cluda_gpu::args::names`. So the host and the kernels
//! share one definition of every parameter list.

use std::sync::OnceLock;

use cluda_gpu::args::{
    ClassifyArgs, DevicePtr, KernelArgs, PrepareArgs, RunArgs, StepArgs, StepNext, names,
};
use cudarc::driver::CudaStream;
use cudarc::driver::sys;

use super::buffers::{DeviceBuf, DeviceState};
use super::reals::{DeviceReal, RealBuf};
use crate::cluster::ClusterSize;
use crate::config::Precision;
use crate::cuda::Device;
use crate::error::{CudaContextExt, Error, Result};
use crate::kernel::{Grid, Kernel};

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

/// What a run launch needs besides the pedestal ([`FrameBuffers`]): its [`RUN_PLANES`]
/// padded planes, one after another, and its work area (counters and flags first, zeroed
/// before every launch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunBuffers<'a> {
    pub planes: &'a RealBuf,
    pub work: &'a DeviceBuf<u32>,
}

/// The pedestal state and scratch a frame's kernels read and write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameBuffers<'a> {
    /// The pedestal: baselines, sums, frozen std.
    pub state: &'a DeviceState,
    /// The padded plane of corrected values.
    pub c_plane: &'a RealBuf,
    /// The thresholds.
    pub t: &'a RealBuf,
    /// The classify kernel's look-back words.
    pub status: &'a DeviceBuf<u64>,
}

/// [`FrameBuffers`] as the kernels of real type `R` take them.
#[derive(Clone, Copy, Debug)]
struct FramePtrs<R> {
    base: DevicePtr<R>,
    a: DevicePtr<R>,
    b: DevicePtr<R>,
    frozen_std: DevicePtr<R>,
    c_plane: DevicePtr<R>,
    t: DevicePtr<R>,
    status: DevicePtr<u64>,
}

impl FrameBuffers<'_> {
    /// The pointers, in the kernels' real type `R` (an internal error for buffers of the
    /// other one).
    fn ptrs<R: DeviceReal>(&self) -> Result<FramePtrs<R>> {
        Ok(FramePtrs {
            base: self.state.base.get::<R>()?.ptr(),
            a: self.state.a()?,
            b: self.state.b()?,
            frozen_std: self.state.frozen_std.get::<R>()?.ptr(),
            c_plane: self.c_plane.get::<R>()?.ptr(),
            t: self.t.get::<R>()?.ptr(),
            status: self.status.ptr(),
        })
    }
}

/// Where a classify launch puts the frame's clusters (see `Output` in the kernel).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Destination {
    /// The clusters already in the buffer (compact mode), or null.
    pub base_in: DevicePtr<u32>,
    /// Where the count (plus `*base_in`) goes.
    pub count_out: DevicePtr<u32>,
    /// First record of the buffer.
    pub records: DevicePtr<u32>,
    /// Records the buffer has room for.
    pub room: u32,
}

/// What every launch of one finder shares: the frame geometry, the constants in the real
/// type `R`, and the threshold mode.
#[derive(Clone, Copy, Debug)]
struct Constants<R> {
    g: Geometry,
    inv: R,
    n_sigma: R,
    /// 1: live thresholds, 0: frozen ones.
    live: u32,
}

/// The prepare arguments of the frame at `frame` with the pedestal and scratch of `buf`.
fn prepare_args<R: Copy>(
    k: &Constants<R>,
    frame: DevicePtr<u16>,
    buf: &FramePtrs<R>,
) -> PrepareArgs<R> {
    let g = &k.g;
    PrepareArgs {
        frame,
        base: buf.base,
        a: buf.a,
        b: buf.b,
        frozen_std: buf.frozen_std,
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        r: g.r,
        inv: k.inv,
        n_sigma: k.n_sigma,
        live: k.live,
        c_plane: buf.c_plane,
        t_out: buf.t,
        status: buf.status,
        n_status: g.status_len() as u32,
    }
}

/// The classify arguments of the frame at `frame`: its pedestal state, plane and thresholds,
/// the geometry, and where its records go.
fn classify_args<R: Copy>(
    k: &Constants<R>,
    frame: DevicePtr<u16>,
    buf: &FramePtrs<R>,
    dst: &Destination,
) -> ClassifyArgs<R> {
    let g = &k.g;
    ClassifyArgs {
        frame,
        base: buf.base,
        a: buf.a,
        b: buf.b,
        c: buf.c_plane,
        t: buf.t,
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        tiles: g.tiles,
        inv: k.inv,
        status: buf.status,
        base_in: dst.base_in,
        count_out: dst.count_out,
        records: dst.records,
        room: dst.room,
    }
}

/// The step arguments: classify `c`'s frame, then prepare the frame at `next_frame` (null:
/// none) into `next`'s plane, thresholds and look-back words (its pedestal is `c`'s).
fn step_args<R: Copy>(
    k: &Constants<R>,
    c: ClassifyArgs<R>,
    next_frame: DevicePtr<u16>,
    next: &FramePtrs<R>,
) -> StepArgs<R> {
    StepArgs::join(
        c,
        StepNext {
            next_frame,
            frozen_std: next.frozen_std,
            r: k.g.r,
            n_sigma: k.n_sigma,
            live: k.live,
            c_next: next.c_plane,
            t_next: next.t,
            status_next: next.status,
        },
    )
}

/// [`RunBuffers`] as the run kernels of real type `R` take them.
#[derive(Clone, Copy, Debug)]
struct RunPtrs<R> {
    planes: DevicePtr<R>,
    /// Values per plane.
    plane_len: u32,
    work: DevicePtr<u32>,
}

impl RunBuffers<'_> {
    /// The pointers, in the kernels' real type `R`.
    fn ptrs<R: DeviceReal>(&self) -> Result<RunPtrs<R>> {
        Ok(RunPtrs {
            planes: self.planes.get::<R>()?.ptr(),
            plane_len: (self.planes.len() / RUN_PLANES) as u32,
            work: self.work.ptr(),
        })
    }
}

/// The run arguments of `n` frames at `frames`.
fn run_args<R: Copy>(
    k: &Constants<R>,
    (frames, n): (DevicePtr<u16>, u32),
    buf: &FramePtrs<R>,
    run: &RunPtrs<R>,
    dst: &Destination,
) -> RunArgs<R> {
    let g = &k.g;
    RunArgs {
        frames,
        n,
        base: buf.base,
        a: buf.a,
        b: buf.b,
        frozen_std: buf.frozen_std,
        planes: run.planes,
        plane_len: run.plane_len,
        work: run.work,
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        tiles: g.tiles,
        r: g.r,
        inv: k.inv,
        n_sigma: k.n_sigma,
        live: k.live,
        base_in: dst.base_in,
        count_out: dst.count_out,
        records: dst.records,
        room: dst.room,
    }
}

/// A kernel loaded (its module JIT-compiled by the driver) on its first launch, so that a
/// run pays only for the kernels it launches: opt10 never launches `classify` or `step`.
struct LazyKernel<A> {
    device: Device,
    name: &'static str,
    /// What a failed launch says it was doing.
    context: &'static str,
    kernel: OnceLock<Kernel<A>>,
}

impl<A: KernelArgs> LazyKernel<A> {
    /// The kernel `name` of `device`, not loaded yet; a failed launch says it was `context`.
    fn new(device: &Device, name: &'static str, context: &'static str) -> Self {
        Self {
            device: device.clone(),
            name,
            context,
            kernel: OnceLock::new(),
        }
    }

    /// The kernel, loaded the first time.
    fn get(&self) -> Result<&Kernel<A>> {
        if let Some(k) = self.kernel.get() {
            return Ok(k);
        }
        let k = Kernel::load_named(&self.device, self.name)?;
        Ok(self.kernel.get_or_init(|| k))
    }

    /// Launches the kernel (loaded the first time) on `stream`.
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch`].
    unsafe fn launch(&self, stream: &CudaStream, grid: Grid, args: A) -> Result<()> {
        let kernel = self.get()?;
        // SAFETY: as the caller promises.
        unsafe { kernel.launch(stream, grid, args) }.cuda(self.context)
    }
}

/// The run kernel of a frame geometry whose grid (one block per tile) fits on the device at
/// once.
struct RunKernel<R> {
    kernel: Kernel<RunArgs<R>>,
    /// Blocks of the launch: one per tile.
    grid: u32,
}

/// The kernels of one real type `R` and cluster size, with the constants of their launches.
struct RealKernels<R> {
    k: Constants<R>,
    prepare: LazyKernel<PrepareArgs<R>>,
    classify: LazyKernel<ClassifyArgs<R>>,
    step: LazyKernel<StepArgs<R>>,
    /// `None` when no run variant covers a frame's tiles (launches go per frame then).
    run: Option<RunKernel<R>>,
}

/// [`RealKernels`] of the finder's precision.
enum ByReal {
    F64(RealKernels<f64>),
    F32(RealKernels<f32>),
}

/// Evaluates `$body` with `$k` the [`RealKernels`] of `$self`'s precision.
macro_rules! with_real {
    ($self:expr, |$k:ident| $body:expr) => {
        match &$self.by_real {
            ByReal::F64($k) => $body,
            ByReal::F32($k) => $body,
        }
    };
}

/// A frame of a launch: the frame on the device (null: none, for the frame a step launch
/// prepares after the last), with the pedestal and scratch its kernels read and write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameAt<'a> {
    pub frame: DevicePtr<u16>,
    pub buf: FrameBuffers<'a>,
}

/// The kernels of one precision, cluster size and frame geometry: `prepare` and `classify`
/// (two launches per frame), `step` (classify this frame and prepare the next one in one
/// launch), and `run` (many frames in one cooperative launch).
pub(crate) struct Kernels {
    by_real: ByReal,
}

impl<R: DeviceReal> RealKernels<R> {
    /// Loads the kernels of real type `R` for `size`, and the run kernel when its grid fits.
    fn load(device: &Device, size: ClusterSize, k: Constants<R>) -> Result<Self> {
        let side = size.side();
        let sized = |name: Option<&'static str>| {
            name.ok_or_else(|| Error::param("size", format!("no kernels for {side}x{side}")))
        };
        // One block per tile, all resident at once (the kernel's waits need it).
        let kernel = Kernel::load_named(device, sized(names::run(R::F64, side))?)?;
        let tiles = k.g.tiles;
        let run = (tiles <= resident_blocks(device, &kernel)?).then_some(RunKernel {
            kernel,
            grid: tiles,
        });
        Ok(Self {
            k,
            prepare: LazyKernel::new(
                device,
                names::prepare(R::F64),
                "launching the prepare kernel",
            ),
            classify: LazyKernel::new(
                device,
                sized(names::classify(R::F64, side))?,
                "launching the classify kernel",
            ),
            step: LazyKernel::new(
                device,
                sized(names::step(R::F64, side))?,
                "launching the step kernel",
            ),
            run,
        })
    }

    /// Launches `prepare` for the frame `at` (as [`Kernels::prepare`]).
    fn prepare(&self, stream: &CudaStream, at: FrameAt) -> Result<()> {
        let g = &self.k.g;
        let grid = Grid::x(g.pixels.max(g.status_len() as u32).div_ceil(BLOCK), BLOCK);
        let args = prepare_args(&self.k, at.frame, &at.buf.ptrs()?);
        // SAFETY: every pointer is a live device buffer of the sizes the geometry implies.
        unsafe { self.prepare.launch(stream, grid, args) }
    }

    /// Launches `classify` for the frame `at`, or with a `next` frame `step` (as
    /// [`Kernels::classify`] and [`Kernels::step`]).
    fn classify(
        &self,
        stream: &CudaStream,
        at: FrameAt,
        dst: &Destination,
        next: Option<FrameAt>,
    ) -> Result<()> {
        let c = classify_args(&self.k, at.frame, &at.buf.ptrs()?, dst);
        let grid = Grid::x(self.k.g.tiles, BLOCK);
        match next {
            // SAFETY: every pointer is a live device buffer of the sizes the geometry and
            // destination imply.
            None => unsafe { self.classify.launch(stream, grid, c) },
            Some(next) => {
                let args = step_args(&self.k, c, next.frame, &next.buf.ptrs()?);
                // SAFETY: as for `classify`, and the next frame's buffers too.
                unsafe { self.step.launch(stream, grid, args) }
            }
        }
    }
}

impl Kernels {
    /// Loads the kernels for `precision`, `size` and the frame geometry `g`; `inv` (in the
    /// kernels' precision) and `n_sigma` (converted to it exactly as the CPU finder converts
    /// it) are the constants of every launch.
    pub fn load(
        device: &Device,
        precision: Precision,
        size: ClusterSize,
        g: Geometry,
        inv: Scalar,
        n_sigma: f64,
        live: bool,
    ) -> Result<Self> {
        let live = live as u32;
        let by_real = match (precision, inv) {
            (Precision::F64, Scalar::F64(inv)) => {
                let k = Constants {
                    g,
                    inv,
                    n_sigma,
                    live,
                };
                ByReal::F64(RealKernels::load(device, size, k)?)
            }
            (Precision::F32 | Precision::F32Naive, Scalar::F32(inv)) => {
                let k = Constants {
                    g,
                    inv,
                    n_sigma: n_sigma as f32,
                    live,
                };
                ByReal::F32(RealKernels::load(device, size, k)?)
            }
            _ => {
                return Err(Error::param(
                    "precision",
                    "the kernels' constants are not in the finder's precision",
                ));
            }
        };
        Ok(Self { by_real })
    }

    /// The frame geometry the kernels were loaded for.
    pub fn geometry(&self) -> Geometry {
        with_real!(self, |k| k.k.g)
    }

    /// Launches `prepare` for the frame `at` on `stream`.
    pub fn prepare(&self, stream: &CudaStream, at: FrameAt) -> Result<()> {
        with_real!(self, |k| k.prepare(stream, at))
    }

    /// Launches `classify` for the frame `at` on `stream`, its records into `dst`.
    pub fn classify(&self, stream: &CudaStream, at: FrameAt, dst: &Destination) -> Result<()> {
        with_real!(self, |k| k.classify(stream, at, dst, None))
    }

    /// Launches `step`: classifies the frame `at` (as [`Kernels::classify`]), then, when
    /// `next.frame` is not null, prepares that frame into `next.buf`'s plane, thresholds and
    /// look-back words (its pedestal must be `at.buf`'s).
    pub fn step(
        &self,
        stream: &CudaStream,
        at: FrameAt,
        dst: &Destination,
        next: FrameAt,
    ) -> Result<()> {
        with_real!(self, |k| k.classify(stream, at, dst, Some(next)))
    }

    /// Whether one launch can find many frames (a run kernel covers the frame's tiles).
    pub fn has_run(&self) -> bool {
        with_real!(self, |k| k.run.is_some())
    }

    /// Launches `run` for `frames.1` consecutive frames from `frames.0` (one cooperative
    /// launch; see `gpu/src/kernels/run.rs`). The caller must have zeroed the counters and
    /// flags (the first [`Geometry::run_flags_len`] words of `run.work`) on `stream` before.
    pub fn run(
        &self,
        stream: &CudaStream,
        frames: (DevicePtr<u16>, u32),
        buf: &FrameBuffers,
        run: &RunBuffers,
        dst: &Destination,
    ) -> Result<()> {
        with_real!(self, |k| {
            let Some(kernel) = &k.run else {
                return Err(Error::param(
                    "launch",
                    "no run kernel covers this frame size; use one launch per frame",
                ));
            };
            let args = run_args(&k.k, frames, &buf.ptrs()?, &run.ptrs()?, dst);
            let grid = Grid::x(kernel.grid, BLOCK);
            // SAFETY: every pointer is a live device buffer of the sizes the geometry and
            // destination imply; the grid fits on the device at once (checked at load, and by
            // the cooperative launch) and has one block per tile.
            unsafe { kernel.kernel.launch(stream, grid.cooperative(), args) }
                .cuda("launching the run kernel")
        })
    }
}

/// Blocks of `k` (with [`BLOCK`] threads) that fit on the device at once: the grid bound of
/// a cooperative launch.
fn resident_blocks<A: KernelArgs>(device: &Device, k: &Kernel<A>) -> Result<u32> {
    // The occupancy query is a context call: the context must be current on this thread.
    device
        .context()
        .bind_to_thread()
        .cuda("binding the CUDA context")?;
    let per_sm = k
        .function()
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

    fn ptr<T>(addr: u64) -> DevicePtr<T> {
        DevicePtr::new(addr)
    }

    fn sample<R>(inv: R, n_sigma: R) -> (Constants<R>, FramePtrs<R>, Destination) {
        let g = Geometry {
            cols: 11,
            pixels: 12,
            stride: 13,
            r: 14,
            tiles: 15,
        };
        let k = Constants {
            g,
            inv,
            n_sigma,
            live: 1,
        };
        let buf = FramePtrs {
            base: ptr(2),
            a: ptr(3),
            b: ptr(4),
            frozen_std: ptr(99),
            c_plane: ptr(5),
            t: ptr(6),
            status: ptr(7),
        };
        let dst = Destination {
            base_in: ptr(8),
            count_out: ptr(9),
            records: ptr(10),
            room: 16,
        };
        (k, buf, dst)
    }

    /// Every field of the classify and step arguments comes from its own source value.
    #[test]
    fn arguments_take_each_value_once() {
        let (k, buf, dst) = sample(0.5f64, 3.0);
        let c = classify_args(&k, ptr(1), &buf, &dst);
        let next = FramePtrs {
            c_plane: ptr(50),
            t: ptr(60),
            status: ptr(70),
            ..buf
        };
        let s = step_args(&k, c, ptr(40), &next);
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
        let (k, buf, _) = sample(0.25f32, 5.0f32);
        let p = prepare_args(&Constants { live: 0, ..k }, ptr(1), &buf);
        assert_eq!(
            (p.n_status, p.r, p.inv, p.n_sigma, p.live),
            (16, 14, 0.25, 5.0, 0)
        );
    }

    /// Every field of the run arguments comes from its own source value.
    #[test]
    fn run_arguments_take_each_value_once() {
        let (k, buf, dst) = sample(0.5f32, 3.0);
        let run = RunPtrs {
            planes: ptr(20),
            plane_len: 21,
            work: ptr(22),
        };
        let a = run_args(&k, (ptr(1), 23), &buf, &run, &dst);
        assert_eq!((a.frames.addr(), a.n), (1, 23));
        assert_eq!(
            [a.base.addr(), a.a.addr(), a.b.addr(), a.frozen_std.addr()],
            [2, 3, 4, 99]
        );
        assert_eq!((a.planes.addr(), a.plane_len, a.work.addr()), (20, 21, 22));
        assert_eq!(
            [a.cols, a.pixels, a.stride, a.tiles, a.r, a.live, a.room],
            [11, 12, 13, 15, 14, 1, 16]
        );
        assert_eq!((a.inv, a.n_sigma), (0.5, 3.0));
        assert_eq!(
            [a.base_in.addr(), a.count_out.addr(), a.records.addr()],
            [8, 9, 10]
        );
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
        let (k, buf, dst) = sample(0.5f32, 3.0);
        let mut c = classify_args(&k, ptr(1), &buf, &dst);
        let base = &raw const c as usize;
        let layout = ClassifyArgs::<f32>::layout();
        let p = c.params();
        assert_eq!(p.len(), layout.len());
        for (ptr, (offset, _)) in p.iter().zip(layout) {
            assert_eq!(*ptr as usize - base, offset);
        }
    }
}
