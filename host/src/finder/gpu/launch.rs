//! Typed launch wrappers of the cluster-finding kernels (`gpu/src/kernels/`).
//!
//! Each wrapper takes the kernel's parameters in the kernel's order with the kernel's types
//! (device pointers as `u64`), so a mismatch shows up here in one place.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUstream};
use cudarc::driver::{CudaFunction, result};

use crate::cluster::ClusterSize;
use crate::config::Precision;
use crate::cuda::Device;
use crate::error::{CudaContextExt, Result};

/// Threads per block of both kernels; also the pixels per classify tile (`BLOCK` in
/// `gpu/src/kernels/frame.rs`).
pub(crate) const BLOCK: u32 = 256;
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

/// A kernel's parameters in launch order, each in an 8-byte slot of its own (device pointers
/// as `u64`; a `u32` or `f32` in the slot's first bytes, which is where a little-endian host
/// keeps the low half), so that every wrapper below lists a kernel's parameters once, with
/// their types, instead of keeping a local and a pointer to it per parameter.
#[derive(Default)]
struct Params(Vec<u64>);

#[cfg(not(target_endian = "little"))]
compile_error!("kernel parameters are packed for little-endian hosts");

impl Params {
    /// A device address (`*const T` / `*mut T` in the kernel).
    fn ptr(mut self, v: u64) -> Self {
        self.0.push(v);
        self
    }

    /// A `u32`.
    fn u32(mut self, v: u32) -> Self {
        self.0.push(u64::from(v));
        self
    }

    /// An `f32` or `f64` in the finder's precision.
    fn real(mut self, v: Scalar) -> Self {
        self.0.push(match v {
            Scalar::F64(x) => x.to_bits(),
            Scalar::F32(x) => u64::from(x.to_bits()),
        });
        self
    }

    /// The `void **` array a launch takes; valid while `self` lives and is not changed.
    fn pointers(&mut self) -> Vec<*mut c_void> {
        self.0
            .iter_mut()
            .map(|v| v as *mut u64 as *mut c_void)
            .collect()
    }
}

/// The parameters of `cluda_classify_*`, which `cluda_step_*` also starts with: the frame,
/// its pedestal state, plane and thresholds, the geometry, and where its records go.
fn classify_params(
    inv: Scalar,
    g: &Geometry,
    frame: u64,
    buf: &FrameBuffers,
    dst: &Destination,
) -> Params {
    Params::default()
        .ptr(frame)
        .ptr(buf.base)
        .ptr(buf.a)
        .ptr(buf.b)
        .ptr(buf.c_plane)
        .ptr(buf.t)
        .u32(g.cols)
        .u32(g.pixels)
        .u32(g.stride)
        .u32(g.tiles)
        .real(inv)
        .ptr(buf.status)
        .ptr(dst.base_in)
        .ptr(dst.count_out)
        .ptr(dst.records)
        .u32(dst.room)
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

/// The kernels of one precision and cluster size: `prepare` and `classify` (two launches per
/// frame), and `step` (classify this frame and prepare the next one in one launch).
pub(crate) struct Kernels {
    prepare: CudaFunction,
    classify: CudaFunction,
    step: CudaFunction,
    /// `None` when no run variant covers a frame's tiles (launches go per frame then).
    run: Option<RunKernel>,
    inv: Scalar,
    n_sigma: Scalar,
    live: u32,
}

impl Kernels {
    /// Loads the kernels for `precision` and `size`; `inv` and `n_sigma` are converted to the
    /// kernels' precision exactly as the CPU finder converts them.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        device: &Device,
        precision: Precision,
        size: ClusterSize,
        tiles: u32,
        inv: Scalar,
        n_sigma: f64,
        live: bool,
    ) -> Result<Self> {
        let p = match precision {
            Precision::F64 => "f64",
            Precision::F32 | Precision::F32Naive => "f32",
        };
        let n_sigma = match precision {
            Precision::F64 => Scalar::F64(n_sigma),
            Precision::F32 | Precision::F32Naive => Scalar::F32(n_sigma as f32),
        };
        // One block per tile, all resident at once (the kernel's waits need it).
        let function = device.function(&format!("cluda_run1_{p}_{}", size.side()))?;
        let run = (tiles <= resident_blocks(device, &function)?).then_some(RunKernel {
            function,
            grid: tiles,
        });
        Ok(Self {
            run,
            prepare: device.function(&format!("cluda_prepare_{p}"))?,
            classify: device.function(&format!("cluda_classify_{p}_{}", size.side()))?,
            step: device.function(&format!("cluda_step_{p}_{}", size.side()))?,
            inv,
            n_sigma,
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
        let n_status = g.tiles + 1;
        let mut values = Params::default()
            .ptr(frame)
            .ptr(buf.base)
            .ptr(buf.a)
            .ptr(buf.b)
            .ptr(buf.frozen_std)
            .u32(g.cols)
            .u32(g.pixels)
            .u32(g.stride)
            .u32(g.r)
            .real(self.inv)
            .real(self.n_sigma)
            .u32(self.live)
            .ptr(buf.c_plane)
            .ptr(buf.t)
            .ptr(buf.status)
            .u32(n_status);
        let mut params = values.pointers();
        let grid = g.pixels.max(n_status).div_ceil(BLOCK);
        // SAFETY: the parameters match `cluda_prepare_*` in order and type; every pointer is
        // a live device buffer of the sizes the geometry implies.
        unsafe {
            result::launch_kernel(
                self.prepare.cu_function(),
                (grid, 1, 1),
                (BLOCK, 1, 1),
                0,
                stream,
                &mut params,
            )
        }
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
        let mut values = classify_params(self.inv, g, frame, buf, dst);
        let mut params = values.pointers();
        // SAFETY: the parameters match `cluda_classify_*` in order and type; every pointer is
        // a live device buffer of the sizes the geometry and destination imply.
        unsafe {
            result::launch_kernel(
                self.classify.cu_function(),
                (g.tiles, 1, 1),
                (BLOCK, 1, 1),
                0,
                stream,
                &mut params,
            )
        }
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
        let mut values = classify_params(self.inv, g, frame, buf, dst)
            .ptr(next_frame)
            .ptr(buf.frozen_std)
            .u32(g.r)
            .real(self.n_sigma)
            .u32(self.live)
            .ptr(next.c_plane)
            .ptr(next.t)
            .ptr(next.status);
        let mut params = values.pointers();
        // SAFETY: the parameters match `cluda_step_*` in order and type; every pointer is a
        // live device buffer of the sizes the geometry and destination imply.
        unsafe {
            result::launch_kernel(
                self.step.cu_function(),
                (g.tiles, 1, 1),
                (BLOCK, 1, 1),
                0,
                stream,
                &mut params,
            )
        }
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
            return Err(crate::error::Error::param(
                "launch",
                "no run kernel covers this frame size; use one launch per frame",
            ));
        };
        let mut values = Params::default()
            .ptr(frames)
            .u32(n)
            .ptr(buf.base)
            .ptr(buf.a)
            .ptr(buf.b)
            .ptr(buf.frozen_std)
            .ptr(run.planes)
            .u32(run.plane_len)
            .ptr(run.work)
            .u32(g.cols)
            .u32(g.pixels)
            .u32(g.stride)
            .u32(g.tiles)
            .u32(g.r)
            .real(self.inv)
            .real(self.n_sigma)
            .u32(self.live)
            .ptr(dst.base_in)
            .ptr(dst.count_out)
            .ptr(dst.records)
            .u32(dst.room);
        let mut params = values.pointers();
        // SAFETY: the parameters match `cluda_run*` in order and type; every pointer is a
        // live device buffer of the sizes the geometry and destination imply; the grid fits
        // on the device at once (checked at load, and by the cooperative launch) and has one
        // block per tile.
        unsafe {
            sys::cuLaunchCooperativeKernel(
                kernel.function.cu_function(),
                kernel.grid,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                stream,
                params.as_mut_ptr(),
            )
        }
        .result()
        .cuda("launching the run kernel")
    }
}

/// Blocks of `f` (with [`BLOCK`] threads) that fit on `device` at once: the grid bound of a
/// cooperative launch.
fn resident_blocks(device: &Device, f: &CudaFunction) -> Result<u32> {
    // The occupancy query is a context call: the context must be current on this thread.
    device
        .context()
        .bind_to_thread()
        .cuda("binding the CUDA context")?;
    let mut per_sm: std::ffi::c_int = 0;
    // SAFETY: `f` is a loaded function of the current context; `per_sm` is a valid out
    // pointer.
    unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut per_sm,
            f.cu_function(),
            BLOCK as std::ffi::c_int,
            0,
        )
    }
    .result()
    .cuda("querying the run kernel's occupancy")?;
    let sms = device
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .cuda("querying the multiprocessor count")?;
    Ok((per_sm.max(0) as u32) * (sms.max(0) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every parameter pointer reads back its value with the kernel's type.
    #[test]
    fn params_point_at_their_values_with_their_types() {
        let mut values = Params::default()
            .ptr(0x1234_5678_9abc_def0)
            .u32(0xdead_beef)
            .real(Scalar::F32(-1.5))
            .real(Scalar::F64(2.0f64.powi(-40)))
            .u32(7);
        let p = values.pointers();
        assert_eq!(p.len(), 5);
        // SAFETY: each pointer is an 8-byte-aligned slot of `values`, alive and unchanged.
        unsafe {
            assert_eq!(*(p[0] as *const u64), 0x1234_5678_9abc_def0);
            assert_eq!(*(p[1] as *const u32), 0xdead_beef);
            assert_eq!(*(p[2] as *const f32), -1.5);
            assert_eq!(*(p[3] as *const f64), 2.0f64.powi(-40));
            assert_eq!(*(p[4] as *const u32), 7);
        }
    }

    /// `classify_params` lists `cluda_classify_*`'s parameters in the kernel's order
    /// (`gpu/src/kernels/frame.rs`), every field its own slot.
    #[test]
    fn classify_params_follow_the_kernel_signature() {
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
        let got = classify_params(Scalar::F64(0.5), &g, 1, &buf, &dst).0;
        let want = [
            1,
            2,
            3,
            4,
            5,
            6,
            11,
            12,
            13,
            15,
            0.5f64.to_bits(),
            7,
            8,
            9,
            10,
            16,
        ];
        assert_eq!(got, want);
    }
}
