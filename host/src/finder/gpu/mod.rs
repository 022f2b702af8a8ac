//! The GPU cluster finder: Rust kernels (`gpu/src/kernels/`) loaded as PTX through cudarc.
//!
//! [`GpuFinder`] implements [`ClusterFinder`] like the CPU finder and gives the same bytes
//! (same clusters, values and order) for every precision, size, threshold mode and pipeline
//! configuration. The pedestal's fill phase (the first N frames) runs on the host; once ready
//! the state is uploaded and updated on the device, frame after frame, and downloaded again
//! when [`ClusterFinder::pedestal`] asks for it or more pedestal frames are pushed.

pub mod settings;

mod accumulate;
mod buffers;
mod input;
mod launch;
mod launch_args;
mod pipeline;
mod reals;

pub use accumulate::{DeviceAccum, DeviceClusters};
pub use pipeline::KernelTime;
pub use settings::{Collect, DEFAULT_SLOT_BYTES, InputMode, Launch, Overflow, PipelineConfig};

use crate::cluster::FrameClusters;
use crate::config::{FinderConfig, Precision, ThresholdMode};
use crate::cuda::Device;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::frames::Frames;
use crate::pedestal::{Pedestal, PixelMaps, ReadyState};
use buffers::{DeviceState, PinnedBuf};
use launch::{Kernels, Scalar};
use pipeline::Pipeline;
use reals::DeviceReal;

/// The GPU cluster finder.
pub struct GpuFinder {
    config: FinderConfig,
    device: Device,
    pipeline: Pipeline,
    /// The host pedestal: authoritative until uploaded, and again after a download.
    host: Pedestal,
    /// The device pedestal, once uploaded.
    state: Option<DeviceState>,
    /// The host pedestal changed since the upload (pushes, `set_pedestal`).
    host_changed: bool,
    /// The device pedestal moved past the host copy (frames were found).
    device_newer: bool,
}

impl GpuFinder {
    /// A finder on device 0 with the default pipeline ([`PipelineConfig::default`]).
    pub fn new(config: FinderConfig) -> Result<Self> {
        Self::with_pipeline(config, PipelineConfig::default())
    }

    /// A finder on device 0 with pipeline settings `pipeline`.
    pub fn with_pipeline(config: FinderConfig, pipeline: PipelineConfig) -> Result<Self> {
        Self::on_device(Device::open(0)?, config, pipeline)
    }

    /// A finder on an opened `device`.
    pub fn on_device(
        device: Device,
        config: FinderConfig,
        pipeline: PipelineConfig,
    ) -> Result<Self> {
        config.validate()?;
        pipeline.validate()?;
        let host = Pedestal::new(
            config.rows,
            config.cols,
            config.pedestal_frames,
            config.precision,
        )?;
        let inv = match config.precision {
            Precision::F64 => Scalar::F64(1.0 / config.pedestal_frames as f64),
            Precision::F32 | Precision::F32Naive => {
                Scalar::F32(1.0f32 / config.pedestal_frames as f32)
            }
        };
        let kernels = Kernels::load(
            &device,
            config.precision,
            config.size,
            launch_args::Geometry::new(config.rows, config.cols, config.size),
            inv,
            config.n_sigma,
            config.threshold == ThresholdMode::Live,
        )?;
        let ctx = device.context().clone();
        let pipeline = Pipeline::new(
            &ctx,
            pipeline,
            kernels,
            config.rows,
            config.size,
            config.precision,
        )?;
        Ok(Self {
            config,
            device,
            pipeline,
            host,
            state: None,
            host_changed: true,
            device_newer: false,
        })
    }

    /// The pipeline settings.
    pub fn pipeline_config(&self) -> &PipelineConfig {
        self.pipeline.config()
    }

    /// Whether this finder finds a whole upload group per launch ([`Launch::PerUpload`]
    /// asked for, and the frame's 256-pixel tiles fit on the device at once, one block per
    /// tile); `false` means one launch per frame, with the same results.
    pub fn launches_per_upload_group(&self) -> bool {
        self.pipeline.per_upload()
    }

    /// Clusters per frame the result buffers have room for now (the configured cap, or more
    /// after a call grew them).
    pub fn cap(&self) -> usize {
        self.pipeline.cap()
    }

    /// The device this finder runs on.
    pub fn gpu(&self) -> &Device {
        &self.device
    }

    /// Allocates every buffer a call of `frames` frames needs (device memory, pinned slots),
    /// so that a timed call allocates nothing. Processes no frame.
    pub fn reserve(&mut self, frames: usize) -> Result<()> {
        self.pipeline.reserve(frames)
    }

    /// Finds the clusters of every frame `feed` lends in one pipeline through all its chunks
    /// (the engine's `find_feed` for this finder): chunk i+1's uploads are queued before
    /// chunk i's results are collected, and no chunk boundary waits for the GPU. A chunk goes
    /// back to the feed once its last frames' results are in and their room is checked
    /// (before they are visited); the finder holds at most as many chunks as it has chunks
    /// in flight (`depth`). Chunks that are not page-locked are read as the input mode says
    /// (staged by default, [`InputMode::Auto`]; registered while held with
    /// [`InputMode::Registered`]), as for `find_each`. Frames are named by their chunk's
    /// numbers.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`] (for each chunk), and the feed's errors; an overflow
    /// with [`Overflow::Fail`] leaves the pedestal as it was before the chunk that holds the
    /// frame.
    pub fn find_feed(
        &mut self,
        feed: &mut dyn crate::finder::feed::FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        self.run_with_state(|pipeline, state| pipeline.run_feed(state, feed, visit))
    }

    /// A function that page-locks host memory for this finder's context until the guard it
    /// returns is dropped (`None` when the driver refuses, e.g. a page of it is locked
    /// already); usable on any thread (the engine's reader locks mapped chunks with it).
    pub fn page_locker(
        &self,
    ) -> impl Fn(*const u8, usize) -> Option<Box<dyn Send>> + Send + Sync + 'static {
        let ctx = self.device.context().clone();
        move |ptr, bytes| buffers::register(&ctx, ptr, bytes).map(|r| Box::new(r) as Box<dyn Send>)
    }

    /// Page-locks the caller's frames in place (registers them with the CUDA driver) until
    /// the returned guard is dropped, so that calls on them upload by DMA straight from that
    /// memory, with no staging copy and no registration per call: the zero-copy way for
    /// frames the caller already has (for frames still to be read, [`PinnedFrames`] or
    /// [`crate::engine::FedFinder::frame_store`] give page-locked memory to read them into).
    /// Locking costs about as much as allocating page-locked memory, once. Only memory this crate
    /// page-locked counts as such, in one range that covers a call's frames: the call holds
    /// that range locked until its uploads are done (dropping the guard during a call
    /// unlocks the memory only when the call ends), which it could not do for memory locked
    /// by other means; such memory is staged (or registered with
    /// [`InputMode::Registered`]).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the driver refuses (e.g. the memory-lock limit).
    pub fn lock_frames<'a>(&self, frames: &'a [u16]) -> Result<LockedFrames<'a>> {
        let ptr = frames.as_ptr() as *const u8;
        let bytes = std::mem::size_of_val(frames);
        let registration =
            buffers::register(self.device.context(), ptr, bytes).ok_or_else(|| {
                Error::param(
                    "frames",
                    format!("the CUDA driver refused to page-lock {bytes} bytes of frames"),
                )
            })?;
        Ok(LockedFrames {
            frames,
            _registration: registration,
        })
    }

    /// Per-frame kernel times of the last call (empty unless the pipeline was configured
    /// with `timing`).
    pub fn kernel_times(&self) -> &[KernelTime] {
        self.pipeline.times_us()
    }

    /// Brings the host pedestal up to date with the device.
    fn pull(&mut self) -> Result<()> {
        if self.device_newer {
            if let Some(state) = &self.state {
                download(state, &mut self.host)?;
            }
            self.device_newer = false;
        }
        Ok(())
    }

    /// Uploads the host pedestal when the device has none or an older one.
    fn push_state(&mut self) -> Result<()> {
        if self.state.is_none() || self.host_changed {
            let ctx = self.device.context();
            // Into the buffers already there when the size allows (a stream's acquisitions
            // start from the same pedestal), else into new ones.
            match (&mut self.state, self.host.ready()?) {
                (Some(state), ReadyState::F64(m)) if state.fits(m) => state.refill(ctx, m)?,
                (Some(state), ReadyState::F32(m)) if state.fits(m) => state.refill(ctx, m)?,
                (state, ReadyState::F64(m)) => *state = Some(DeviceState::upload(ctx, m)?),
                (state, ReadyState::F32(m)) => *state = Some(DeviceState::upload(ctx, m)?),
            }
            self.host_changed = false;
        }
        Ok(())
    }

    /// Runs `work` on the pipeline with the device pedestal (uploaded first when the host's
    /// is newer), after marking the device's copy as the newer one: the start that
    /// `find_each` and `find_feed` share. One helper because `work` needs the pipeline
    /// mutably and the state at once, which a reference returned by `push_state` (a borrow
    /// of the whole finder) cannot give.
    fn run_with_state(
        &mut self,
        work: impl FnOnce(&mut Pipeline, &DeviceState) -> Result<()>,
    ) -> Result<()> {
        self.push_state()?;
        let Self {
            pipeline,
            state,
            device_newer,
            ..
        } = self;
        let state = state
            .as_ref()
            .ok_or_else(|| Error::Internal("the device pedestal is missing".into()))?;
        *device_newer = true;
        work(pipeline, state)
    }
}

fn download(state: &DeviceState, host: &mut Pedestal) -> Result<()> {
    fn get<R: DeviceReal>(state: &DeviceState, m: &mut PixelMaps<R>) -> Result<()> {
        state.download(m)
    }
    match host.ready_mut()? {
        ReadyState::F64(m) => get(state, m),
        ReadyState::F32(m) => get(state, m),
    }
}

impl ClusterFinder for GpuFinder {
    fn config(&self) -> &FinderConfig {
        &self.config
    }

    fn device(&self) -> String {
        format!("gpu ({})", self.device.name())
    }

    /// On the device, in the output stage, with compacted results (the default pipeline).
    fn accumulate(&mut self, what: &crate::interpolation::Accumulate) -> Result<bool> {
        let (rows, cols) = (self.config.rows, self.config.cols);
        self.pipeline
            .start_accumulating(&self.device, what, rows, cols)
    }

    /// On the device, right after each chunk's kernels, with compacted results (the default
    /// pipeline): the rows come down with the records.
    fn place_rows(&mut self, rules: Option<&crate::interpolation::PlaceRows>) -> Result<bool> {
        self.pipeline.place_rows(&self.device, rules)
    }

    fn take_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        self.pipeline.take_accumulated()
    }

    /// The narrowed counts downloaded on the compute stream, after every chunk checked so far.
    fn peek_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        self.pipeline.peek_accumulated()
    }

    /// Answered by the pipeline after the chunk being visited when asked.
    fn accumulation_peek(
        &mut self,
    ) -> Option<std::sync::Arc<crate::interpolation::AccumulationPeek>> {
        self.pipeline.accumulation_peek()
    }

    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()> {
        frames.expect_shape(self.config.rows, self.config.cols, "pedestal frames")?;
        self.pull()?;
        self.host.push_frames(frames)?;
        self.host_changed = true;
        Ok(())
    }

    fn is_ready(&self) -> bool {
        self.host.is_ready()
    }

    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()> {
        pedestal.check_fits(&self.config)?;
        self.host = pedestal;
        self.host_changed = true;
        self.device_newer = false;
        Ok(())
    }

    fn reset_pedestal(&mut self, pedestal: &Pedestal) -> Result<()> {
        pedestal.check_fits(&self.config)?;
        self.host.clone_from(pedestal);
        self.host_changed = true;
        self.device_newer = false;
        Ok(())
    }

    fn pedestal(&self) -> Result<Pedestal> {
        let mut p = self.host.clone();
        if let (true, Some(state)) = (self.device_newer, &self.state) {
            download(state, &mut p)?;
        }
        Ok(p)
    }

    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        frames.expect_shape(self.config.rows, self.config.cols, "data frames")?;
        self.run_with_state(|pipeline, state| pipeline.run(state, frames, visit))
    }
}

/// The caller's frames page-locked in place ([`GpuFinder::lock_frames`]) while this lives
/// (and until a call uploading from them when it is dropped ends).
pub struct LockedFrames<'a> {
    frames: &'a [u16],
    _registration: buffers::Lease,
}

impl<'a> LockedFrames<'a> {
    /// The locked samples, to hand to the finder (e.g. through [`Frames::new`]).
    pub fn samples(&self) -> &'a [u16] {
        self.frames
    }
}

/// Frames in page-locked host memory: uploads from here run at DMA speed with no per-call
/// registration (fill them, then pass [`PinnedFrames::frames`] to a GPU finder).
pub struct PinnedFrames {
    buf: PinnedBuf<u16>,
    frames: usize,
    rows: usize,
    cols: usize,
}

impl PinnedFrames {
    /// Zeroed pinned memory for `frames x rows x cols` samples on `device`.
    pub fn new(device: &Device, frames: usize, rows: usize, cols: usize) -> Result<Self> {
        Self::alloc(device, frames, rows, cols, false)
    }

    /// The same in write-combined memory: for frames the host only writes and the GPU
    /// reads. Host writes skip reading each line in first (less memory traffic while
    /// uploads share the bus), but host reads of it are very slow (uncached).
    pub fn write_combined(
        device: &Device,
        frames: usize,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        Self::alloc(device, frames, rows, cols, true)
    }

    fn alloc(
        device: &Device,
        frames: usize,
        rows: usize,
        cols: usize,
        write_combined: bool,
    ) -> Result<Self> {
        let len = frames
            .checked_mul(rows)
            .and_then(|n| n.checked_mul(cols))
            .ok_or_else(|| Error::param("frames", "shape too large"))?;
        Ok(Self {
            buf: PinnedBuf::new(device.context(), len, write_combined, "pinned frames")?,
            frames,
            rows,
            cols,
        })
    }

    /// The samples, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u16] {
        self.buf.as_mut_slice()
    }

    /// The samples, to read.
    pub fn as_slice(&self) -> &[u16] {
        self.buf.as_slice()
    }

    /// The frames as a view.
    pub fn frames(&self) -> Result<Frames<'_>> {
        Frames::new(self.buf.as_slice(), self.frames, self.rows, self.cols)
    }
}

impl crate::finder::feed::FrameStore for PinnedFrames {
    fn samples(&self) -> &[u16] {
        self.buf.as_slice()
    }
    fn samples_mut(&mut self) -> &mut [u16] {
        self.buf.as_mut_slice()
    }
}
