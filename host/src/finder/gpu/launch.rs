//! Typed launches of the cluster-finding kernels (`gpu/src/kernels/`).
//!
//! Each launch fills the kernel family's argument struct from `cluda_gpu::args` (the struct
//! the kernels' parameter lists are declared from; filled in [`super::launch_args`] with
//! typed pointers into the finder's device buffers) and launches the kernel loaded for that
//! struct ([`Kernel`]); the entry names come from `cluda_gpu::args::names`. So the host and
//! the kernels share one definition of every parameter list. The precision is chosen at run
//! time: [`Kernels`] holds the kernels of one real type, and the buffers in that type
//! ([`super::reals::RealBuf`]) are checked against it at every launch.

use std::sync::OnceLock;

use cluda_gpu::args::{ClassifyArgs, DevicePtr, KernelArgs, PrepareArgs, RunArgs, StepArgs, names};
use cudarc::driver::CudaStream;
use cudarc::driver::sys;

use super::launch_args::{
    Constants, Destination, FrameAt, FrameBuffers, Geometry, RunBuffers, classify_args,
    prepare_args, run_args, step_args,
};
use super::reals::DeviceReal;
use crate::cluster::ClusterSize;
use crate::config::Precision;
use crate::cuda::Device;
use crate::error::{CudaContextExt, Error, Result};
use crate::kernel::{Grid, Kernel};

pub(crate) use super::launch_args::BLOCK;

/// A floating-point kernel parameter in the finder's precision.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scalar {
    /// An `f64` parameter.
    F64(f64),
    /// An `f32` parameter.
    F32(f32),
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
            let args = run_args(&k.k, &buf.ptrs()?, &run.ptrs(frames)?, dst);
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
