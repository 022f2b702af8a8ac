//! The scheduling of the GPU finder: chunks of frames through uploads, kernels and downloads.
//!
//! One compute stream runs every frame's kernels in frame order (one cooperative `run` launch
//! per upload group; or one `step` launch per frame that classifies it and prepares the next;
//! or `prepare` + `classify` per frame with event timing), so the one pedestal on the device
//! is updated exactly as the CPU updates it, whatever the stream count or chunk size. Uploads
//! and downloads of frame groups go round-robin over `streams` copy streams and meet the
//! compute stream through events: the compute stream waits for a group's upload, a copy
//! stream waits for the group's kernels before downloading their results. The host waits only
//! when it collects a chunk (no per-frame synchronisation), and with `depth` 2 the next chunk
//! is already queued while it does. Compact results come down on two streams of their own,
//! counts then records, so that no upload of the next chunk queues behind a download that
//! waits for kernels, and no collection behind the next chunk's kernels.
//!
//! A checkpoint of the pedestal sums is copied (on the device, in stream order) at the start
//! of every chunk; overflowing result room or a failing visitor rolls the pedestal back to it.
//! With [`Overflow::Fail`] one more is taken at the start of each part of the input (the
//! whole call, or each chunk of a feed), the state a failure goes back to.
//!
//! The frames come from an [`Input`]: one call's slice, or a feed's chunks, which run through
//! the same loop without a wait for the GPU between them: chunk i+1's uploads are queued
//! before chunk i's results are collected. A feed's chunk is given back once the results of
//! its last frames are in (so its uploads are complete) and their room checked, before they
//! are visited; a failing visitor's redo runs from the frames still on the device.

mod chunk;
mod collect;
mod copies;
mod imaging;
mod queue;
mod slots;
mod until_idle;

use std::collections::VecDeque;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use super::accumulate::{DeviceAccum, DevicePlacer};
use super::buffers::{DeviceBuf, DeviceState};
use super::input::{CallInput, FeedInput, Input, Source, source_for};
use super::launch::Kernels;
use super::launch_args::{Geometry, RUN_PLANES};
use super::reals::{RealAlloc, RealBuf};
use super::settings::{InputMode, Launch, Overflow, PipelineConfig};
use crate::cluster::{ClusterSize, FrameClusters};
use crate::config::Precision;
use crate::error::{CudaContextExt, Error, Result};
use crate::finder::feed::FrameFeed;
use crate::frames::Frames;
use crate::interpolation::AccumulationPeek;
pub use chunk::KernelTime;
use chunk::{Job, Slot, Stop, Work};
use copies::copy_dtod;
pub(crate) use until_idle::UntilIdle;

/// The GPU pipeline of one finder.
pub(crate) struct Pipeline {
    cfg: PipelineConfig,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copies: Vec<Arc<CudaStream>>,
    /// Downloads of a collected chunk's records (compact results).
    fetch: Arc<CudaStream>,
    /// Downloads of each chunk's per-frame cluster counts (compact results).
    tally: Arc<CudaStream>,
    kernels: Kernels,
    geom: Geometry,
    size: ClusterSize,
    /// Allocations in the pedestal's real type (of the device's pedestal and scratch).
    reals: RealAlloc,
    work: Work,
    /// Current clusters per frame of room (grows on overflow with [`Overflow::Grow`]).
    cap: usize,
    slots: Vec<Slot>,
    slots_staged: bool,
    /// With [`Overflow::Fail`]: the pedestal sums at the start of each part of the input in
    /// flight (the call, or a feed's chunk), indexed by part modulo their count (`depth`:
    /// every part in flight has a chunk in flight).
    part_ckpts: Vec<RealBuf>,
    owned: Vec<u32>,
    owned_ends: Vec<usize>,
    times_us: Vec<KernelTime>,
    /// An eta cube or image accumulated from every checked chunk (compact results only).
    accum: Option<DeviceAccum>,
    /// Requests for a copy of `accum`'s counts, answered between chunks.
    peek: Option<Arc<AccumulationPeek>>,
    /// Places every record right after its chunk's kernels, for rows handed out with the
    /// clusters (compact results only).
    placer: Option<DevicePlacer>,
}

impl Pipeline {
    /// A pipeline running `kernels` on frames of `rows` rows (of the kernels' geometry) with
    /// `size` windows, the pedestal in `precision`.
    pub fn new(
        ctx: &Arc<CudaContext>,
        cfg: PipelineConfig,
        kernels: Kernels,
        rows: usize,
        size: ClusterSize,
        precision: Precision,
    ) -> Result<Self> {
        cfg.validate()?;
        let geom = kernels.geometry();
        let compute = ctx.new_stream().cuda("creating the compute stream")?;
        let fetch = ctx.new_stream().cuda("creating the result stream")?;
        let tally = ctx.new_stream().cuda("creating the count stream")?;
        let copies = (0..cfg.streams)
            .map(|_| ctx.new_stream().cuda("creating a copy stream"))
            .collect::<Result<Vec<_>>>()?;
        let reals = RealAlloc::new(ctx, precision);
        let plane = || reals.zeroed(geom.plane_len(rows), "the corrected values");
        let thresholds = || reals.uninit(geom.pixels as usize, "the thresholds");
        let status = || DeviceBuf::zeroed(ctx, geom.status_len(), "the look-back words");
        let work = Work {
            c_plane: [plane()?, plane()?],
            t: [thresholds()?, thresholds()?],
            status: [status()?, status()?],
            run_planes: reals.zeroed(
                RUN_PLANES * geom.plane_len(rows),
                "the run kernel's corrected values",
            )?,
            run_work: DeviceBuf::zeroed(ctx, geom.run_work_len(), "the run kernel's counts")?,
        };
        // The zeroing ran on the legacy stream; our streams do not wait for it.
        ctx.synchronize().cuda("waiting for the GPU")?;
        Ok(Self {
            cap: cfg.cap,
            cfg,
            ctx: ctx.clone(),
            compute,
            copies,
            fetch,
            tally,
            kernels,
            geom,
            size,
            reals,
            work,
            slots: Vec::new(),
            slots_staged: false,
            part_ckpts: Vec::new(),
            owned: Vec::new(),
            owned_ends: Vec::new(),
            times_us: Vec::new(),
            accum: None,
            peek: None,
            placer: None,
        })
    }

    /// The settings.
    pub fn config(&self) -> &PipelineConfig {
        &self.cfg
    }

    /// The current clusters-per-frame room (the configured cap, or more after growing).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Kernel times of the last call's frames, in microseconds (only with `timing`).
    pub fn times_us(&self) -> &[KernelTime] {
        &self.times_us
    }

    /// Whether frames go one launch per upload group: asked for, with compact results, and
    /// a run kernel covers the frame (otherwise one launch per frame).
    pub fn per_upload(&self) -> bool {
        self.cfg.compact && self.cfg.launch == Launch::PerUpload && self.kernels.has_run()
    }

    /// Finds the clusters of `frames` with the pedestal `state`, handing every frame's
    /// clusters to `visit` in order.
    pub fn run(
        &mut self,
        state: &DeviceState,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        self.times_us.clear();
        if frames.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let data = frames.as_slice();
        let (src, lock) = source_for(&self.ctx, self.cfg.input, data);
        // Held (with the caller's frames, borrowed for the call) until the GPU is done: on
        // every way out of this call, a panicking visitor's unwind included.
        let lock = UntilIdle::new(&self.ctx, lock);
        let mut input = CallInput {
            data,
            numbers: frames.numbers(),
            frame_len: self.geom.pixels as usize,
            src,
        };
        let staged = src == Source::Staged;
        let result = self.schedule(state, &mut input, frames.len(), staged, visit);
        // Nothing may still read the caller's memory or the slots once we return.
        let (drained, _lock) = lock.wait();
        result.and(drained)
    }

    /// Finds the clusters of every frame `feed` lends, as one stream (see the module docs),
    /// handing every frame's clusters to `visit` in order, named by their chunks' numbers.
    pub fn run_feed(
        &mut self,
        state: &DeviceState,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        self.times_us.clear();
        self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let cols = self.geom.cols as usize;
        let rows = self.geom.pixels as usize / cols.max(1);
        let input = FeedInput::new(feed, self.ctx.clone(), self.cfg.input, rows, cols);
        // The chunks (and their holds) go back only once nothing reads them: on every way
        // out of this call, a panicking visitor's unwind included.
        let mut input = UntilIdle::new(&self.ctx, input);
        let staged = self.cfg.input == InputMode::Staged;
        let result = self.schedule(state, input.get_mut(), usize::MAX, staged, visit);
        let (drained, input) = input.wait();
        let ended = input.map_or(Ok(()), FeedInput::finish);
        result.and(drained).and(ended)
    }

    /// Runs the frames of `input` (`total` of them at most; `staged`: plan for staging
    /// buffers) through the slots, `depth` chunks in flight, collecting them in order.
    pub(super) fn schedule(
        &mut self,
        state: &DeviceState,
        input: &mut dyn Input,
        total: usize,
        staged: bool,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut chunk = self.plan_chunk(staged).min(total);
        self.ensure_slots(chunk, staged)?;
        let depth = self.cfg.depth.min(self.slots.len());
        if self.cfg.overflow == Overflow::Fail {
            while self.part_ckpts.len() < depth {
                self.part_ckpts.push(
                    self.reals
                        .uninit(state.ab.len(), "a pedestal checkpoint of the input")?,
                );
            }
        }
        let (mut next, mut rr) = (0usize, 0usize);
        let mut inflight: VecDeque<Job> = VecDeque::new();
        loop {
            while inflight.len() < depth {
                let Some(p) = input.piece(next, chunk)? else {
                    break;
                };
                let job = Job {
                    start: next,
                    n: p.n,
                    slot: rr,
                    host: p.host,
                    src: p.src,
                    part: p.part,
                    opens: p.opens,
                };
                input.numbers(next, p.n, &mut self.slots[rr].numbers)?;
                rr = (rr + 1) % depth;
                self.submit(job, state, true)?;
                inflight.push_back(job);
                next += job.n;
            }
            let Some(job) = inflight.pop_front() else {
                return Ok(());
            };
            let checked = self.check(job).and_then(|()| {
                self.accumulate(job)?;
                // The chunk's uploads are complete and its room suffices: its host memory
                // is no longer needed (a failing visitor's redo reads the device copy).
                input.release(job.start + job.n);
                self.deliver(job, visit)?;
                self.answer_peek();
                Ok(())
            });
            match checked {
                Ok(()) => {}
                Err(Stop::Error(e)) => return Err(e),
                Err(Stop::Overflow {
                    frame,
                    found,
                    limit,
                    need_cap,
                }) => {
                    self.ctx.synchronize().cuda("waiting for the GPU")?;
                    match self.cfg.overflow {
                        Overflow::Fail => {
                            // Back to the start of the part (the call, or the feed's chunk)
                            // that holds the overflowing frame.
                            let parts = self.part_ckpts.len().max(1);
                            let ck = self.part_ckpts.get(job.part % parts).ok_or_else(|| {
                                Error::Internal("the input's checkpoint is missing".into())
                            })?;
                            copy_dtod(&state.ab, ck, &self.compute)?;
                            self.compute.synchronize().cuda("restoring the pedestal")?;
                            let slot = &self.slots[job.slot];
                            return Err(Error::ClusterLimit {
                                frame: slot.numbers.get(frame).copied().ok_or_else(|| {
                                    Error::Internal("the overflowing frame has no number".into())
                                })?,
                                found,
                                limit,
                            });
                        }
                        Overflow::Grow => {
                            // Back to the pedestal at the start of the overflowing chunk;
                            // later chunks in flight are dropped and redone too (the input
                            // still holds their frames: nothing from this chunk on was
                            // released).
                            copy_dtod(&state.ab, &self.slots[job.slot].ckpt, &self.compute)?;
                            self.compute.synchronize().cuda("restoring the pedestal")?;
                            self.cap = need_cap.max(self.cap + 1).next_power_of_two();
                            self.slots.clear();
                            chunk = self.plan_chunk(staged).min(total);
                            self.ensure_slots(chunk, staged)?;
                            inflight.clear();
                            next = job.start;
                            rr = 0;
                        }
                    }
                }
                Err(Stop::Visitor(k, e)) => {
                    // Frames up to and including k stay consumed, as on the CPU: redo them
                    // from the chunk's checkpoint without delivering anything, from the
                    // frames still in the slot's device buffer (nothing was queued into
                    // this slot since).
                    self.ctx.synchronize().cuda("waiting for the GPU")?;
                    copy_dtod(&state.ab, &self.slots[job.slot].ckpt, &self.compute)?;
                    let redo = Job {
                        n: k + 1,
                        opens: false,
                        ..job
                    };
                    self.submit(redo, state, false)?;
                    self.ctx.synchronize().cuda("waiting for the GPU")?;
                    return Err(e);
                }
            }
        }
    }
}

impl Drop for Pipeline {
    /// Waits for the GPU before the slots' pinned and device memory go: normally nothing is
    /// queued any more (every call ends waiting for the GPU), but a call cut short must not
    /// leave DMA into freed host memory. When the wait fails (a failed GPU), the slots' host
    /// memory is leaked rather than freed under copies that might still run.
    fn drop(&mut self) {
        if self.ctx.synchronize().is_err() {
            std::mem::forget(std::mem::take(&mut self.slots));
        }
    }
}
