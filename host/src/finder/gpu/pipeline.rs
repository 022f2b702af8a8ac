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

use std::collections::VecDeque;
use std::sync::Arc;

use cluda_gpu::args::DevicePtr;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use super::accumulate::{ChunkRecords, DeviceAccum, DevicePlacer, PlacedOutputs};
use super::buffers::{DeviceBuf, DeviceState, PinnedBuf};
use super::input::{CallInput, FeedInput, Input, Source, source_for};
use super::launch::Kernels;
use super::launch_args::{Destination, FrameAt, FrameBuffers, Geometry, RUN_PLANES, RunBuffers};
use super::reals::{RealAlloc, RealBuf};
use super::settings::{Collect, InputMode, Launch, Overflow, PipelineConfig};
use crate::cluster::{ClusterSize, FrameClusters};
use crate::config::Precision;
use crate::error::{CudaContextExt, Error, Result};
use crate::finder::feed::FrameFeed;
use crate::frames::Frames;
use crate::interpolation::{AccumulationPeek, PlacedRow};

/// Per-frame scratch on the device, two of each so that one launch can classify frame k from
/// one set while it prepares frame k+1 into the other: the zero-padded plane of corrected
/// values, the thresholds and the classify kernel's look-back words.
struct Work {
    c_plane: [RealBuf; 2],
    t: [RealBuf; 2],
    status: [DeviceBuf<u64>; 2],
    /// The run kernels' planes (zero padding written once, like the two above).
    run_planes: RealBuf,
    /// The run kernels' arrival counters, progress flags and per-tile counts.
    run_work: DeviceBuf<u32>,
}

/// The buffers of one chunk in flight.
struct Slot {
    /// Frames this slot holds.
    frames: usize,
    /// The numbers the frames of the chunk in the slot are reported by ([`Input::numbers`]).
    numbers: Vec<crate::FrameNumber>,
    dev_in: DeviceBuf<u16>,
    pin_in: Option<PinnedBuf<u16>>,
    dev_out: DeviceBuf<u32>,
    pin_out: PinnedBuf<u32>,
    /// Pedestal sums at the start of the chunk.
    ckpt: RealBuf,
    /// Where each record's placed row goes on the device, and comes down to (while rows are
    /// placed: [`Pipeline::place_rows`]), a row per record of room.
    rows: Option<(DeviceBuf<PlacedRow>, PinnedBuf<PlacedRow>)>,
    /// Recorded after the chunk's rows were placed.
    placed: CudaEvent,
    up: Vec<CudaEvent>,
    done: Vec<CudaEvent>,
    dl: Vec<CudaEvent>,
    t0: Vec<CudaEvent>,
    tm: Vec<CudaEvent>,
    t1: Vec<CudaEvent>,
}

/// GPU time of one frame's kernels (event timing; only with `timing`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTime {
    /// The prepare kernel, microseconds.
    pub prepare_us: f32,
    /// The classify kernel, microseconds.
    pub classify_us: f32,
}

impl KernelTime {
    /// Both kernels, microseconds.
    pub fn total_us(&self) -> f32 {
        self.prepare_us + self.classify_us
    }
}

/// A chunk: frames `start .. start + n` of the call (or stream), read from `host`, in slot
/// `slot` (which holds the numbers they are reported by).
#[derive(Clone, Copy, Debug)]
struct Job {
    start: usize,
    n: usize,
    slot: usize,
    /// The chunk's first frame in host memory, held by the input until the chunk's results
    /// are collected.
    host: *const u16,
    src: Source,
    /// Part of the input it belongs to, and whether it starts it (see [`Input`]).
    part: usize,
    opens: bool,
}

/// Why collecting a chunk stopped early.
enum Stop {
    /// Frame `frame` of the chunk found `found` clusters with room for `limit`; a cap of
    /// `need_cap` holds the whole chunk.
    Overflow {
        frame: usize,
        found: usize,
        limit: usize,
        need_cap: usize,
    },
    /// The visitor failed at frame `frame` of the chunk.
    Visitor(usize, Error),
    /// A CUDA failure.
    Error(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}

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

    fn frame_words(&self) -> usize {
        1 + self.cap * self.size.record_words()
    }

    /// Frames per chunk: the configured chunk, bounded by `slot_bytes` of pinned memory per
    /// slot (but at least one frame), rounded down to a multiple of the stream count.
    fn plan_chunk(&self, staged: bool) -> usize {
        let mut per_frame = 4 * self.frame_words();
        if self.placer.is_some() {
            per_frame += size_of::<PlacedRow>() * self.cap;
        }
        if staged {
            per_frame += 2 * self.geom.pixels as usize;
        }
        let fit = (self.cfg.slot_bytes / per_frame).max(1);
        let chunk = self.cfg.chunk.min(fit);
        let s = self.cfg.streams;
        if chunk >= s { chunk - chunk % s } else { chunk }
    }

    /// Allocates the slots for chunks of `frames` frames (and staging buffers when `staged`)
    /// unless the present ones already fit. Must only be called with no work in flight.
    fn ensure_slots(&mut self, frames: usize, staged: bool) -> Result<()> {
        let depth = self.cfg.depth;
        let placing = self.placer.is_some();
        let fits = self.slots.len() == depth
            && self.slots.iter().all(|s| s.frames >= frames)
            && self.slots.iter().all(|s| !placing || s.rows.is_some())
            && (!staged || self.slots_staged);
        if fits {
            return Ok(());
        }
        let frames = frames.max(self.slots.first().map_or(0, |s| s.frames));
        self.slots.clear();
        for _ in 0..depth {
            let slot = self.new_slot(frames, staged)?;
            self.slots.push(slot);
        }
        self.slots_staged = staged;
        Ok(())
    }

    fn out_words(&self, frames: usize) -> usize {
        if self.cfg.compact {
            frames + 1 + frames * self.cap * self.size.record_words()
        } else {
            frames * self.frame_words()
        }
    }

    fn new_slot(&self, frames: usize, staged: bool) -> Result<Slot> {
        let ctx = &self.ctx;
        let px = self.geom.pixels as usize;
        let out_words = self.out_words(frames);
        let events = |flags: Option<CUevent_flags>, n: usize| {
            (0..n)
                .map(|_| ctx.new_event(flags).cuda("creating an event"))
                .collect::<Result<Vec<_>>>()
        };
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let nt = if self.cfg.timing { frames } else { 0 };
        Ok(Slot {
            frames,
            numbers: Vec::with_capacity(frames),
            dev_in: DeviceBuf::new(ctx, frames * px, "uploaded frames")?,
            pin_in: if staged {
                Some(PinnedBuf::new(ctx, frames * px, true, "staged frames")?)
            } else {
                None
            },
            dev_out: DeviceBuf::new(ctx, out_words, "cluster results")?,
            pin_out: PinnedBuf::new(ctx, out_words, false, "cluster results")?,
            ckpt: self.reals.uninit(2 * px, "a pedestal checkpoint")?,
            rows: match self.placer {
                Some(_) => {
                    let room = frames * self.cap;
                    Some((
                        DeviceBuf::new(ctx, room, "placed photons")?,
                        PinnedBuf::new(ctx, room, false, "placed photons")?,
                    ))
                }
                None => None,
            },
            placed: ctx.new_event(None).cuda("creating an event")?,
            up: events(None, frames)?,
            done: events(None, frames)?,
            dl: events(None, frames)?,
            t0: events(timing, nt)?,
            tm: events(timing, nt)?,
            t1: events(timing, nt)?,
        })
    }

    /// Allocates everything a call of `frames` frames needs, so that a timed call allocates
    /// nothing (pinned memory is locked and touched here).
    pub fn reserve(&mut self, frames: usize) -> Result<()> {
        let staged = self.cfg.input == InputMode::Staged;
        let chunk = self.plan_chunk(staged).min(frames.max(1));
        self.ctx.synchronize().cuda("waiting for the GPU")?;
        self.ensure_slots(chunk, staged)
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
    fn schedule(
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

    /// Queues chunk `job`: checkpoints, uploads (unless its frames are on the device
    /// already: `upload` false), kernels, downloads. No host wait.
    fn submit(&mut self, job: Job, state: &DeviceState, upload: bool) -> Result<()> {
        if job.opens && self.cfg.overflow == Overflow::Fail {
            let depth = self.part_ckpts.len().max(1);
            if let Some(ck) = self.part_ckpts.get(job.part % depth) {
                copy_dtod(ck, &state.ab, &self.compute)?;
            }
        }
        copy_dtod(&self.slots[job.slot].ckpt, &state.ab, &self.compute)?;
        if upload {
            self.upload(job)?;
        }
        let slot = &self.slots[job.slot];
        if self.cfg.compact {
            slot.dev_out
                .zero_async(0..1, &self.compute)
                .cuda("clearing the chunk's cluster count")?;
        }
        let bufs = self.frame_buffers(state);
        if self.per_upload() {
            self.launch_per_upload(job, slot, &bufs[0])?;
        } else {
            self.launch_per_frame(job, slot, &bufs)?;
        }
        self.place(job, slot)?;
        self.download(job, slot)
    }

    /// The records of the chunk in `slot` (compact results), as the eta kernels read them.
    fn chunk_records(&self, job: Job, slot: &Slot) -> ChunkRecords {
        ChunkRecords {
            out: slot.dev_out.ptr(),
            frames: job.n as u32,
            records_at: (slot.frames + 1) as u32,
            room: (slot.frames * self.cap) as u32,
        }
    }

    /// Queues the placement of chunk `job`'s records (when rows are asked for) on the compute
    /// stream, right after its kernels, and marks it done with the slot's `placed` event. An
    /// overflowing chunk's records are not placed (the kernel sees the count over the room);
    /// a chunk redone is placed again.
    fn place(&self, job: Job, slot: &Slot) -> Result<()> {
        let (Some(placer), Some((rows, _))) = (&self.placer, &slot.rows) else {
            return Ok(());
        };
        placer.launch(
            &self.compute,
            self.chunk_records(job, slot),
            PlacedOutputs::rows(rows.ptr()),
        )?;
        slot.placed
            .record(&self.compute)
            .cuda("recording a placement event")
    }

    /// Queues the accumulation of a checked chunk's records (when one is asked for), on the
    /// compute stream: after its kernels, before anything the slot's next chunk queues.
    fn accumulate(&self, job: Job) -> Result<()> {
        let Some(acc) = &self.accum else {
            return Ok(());
        };
        let slot = &self.slots[job.slot];
        acc.launch(&self.compute, self.chunk_records(job, slot))
    }

    /// Starts placing every chunk's records on the device from the next call on, for rows
    /// handed out with the clusters (`Some`), or stops (`None`). Whether rows will come:
    /// `false` without compact results (the records are not in one buffer). Must only be
    /// called between calls (the slots are remade with room for the rows).
    pub fn place_rows(
        &mut self,
        device: &crate::cuda::Device,
        rules: Option<&crate::interpolation::PlaceRows>,
    ) -> Result<bool> {
        self.placer = None;
        let Some(rules) = rules else {
            return Ok(false);
        };
        if !self.cfg.compact {
            return Ok(false);
        }
        self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let placer = DevicePlacer::new(device, &self.compute, rules, self.size)?;
        // The uploads ran on the compute stream, which every launch follows.
        self.placer = Some(placer);
        Ok(true)
    }

    /// Starts accumulating `what` from every chunk found from now on; `false` without compact
    /// results (the records are not in one buffer) or while another accumulation is under
    /// way (one at a time: the caller counts on the host).
    pub fn start_accumulating(
        &mut self,
        device: &crate::cuda::Device,
        what: &crate::interpolation::Accumulate,
        rows: usize,
        cols: usize,
    ) -> Result<bool> {
        if !self.cfg.compact || self.accum.is_some() {
            return Ok(false);
        }
        self.accum = Some(DeviceAccum::new(
            device,
            &self.compute,
            what,
            self.size,
            rows,
            cols,
        )?);
        Ok(true)
    }

    /// A copy of what was accumulated so far (every chunk checked until now), on the compute
    /// stream; the accumulation goes on.
    pub fn peek_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        match &self.accum {
            Some(a) => {
                self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
                a.peek(&self.compute).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The request for copies of the accumulation under way, made when first asked for.
    pub fn accumulation_peek(&mut self) -> Option<Arc<AccumulationPeek>> {
        self.accum.as_ref()?;
        Some(self.peek.get_or_insert_with(Default::default).clone())
    }

    /// Answers a request for a copy of the counts, if one was made: after a chunk was
    /// delivered, so the copy counts every frame visited so far. The download waits for the
    /// chunks in flight on the compute stream (which the next checks wait for anyway): one
    /// short gap in the pipeline per request.
    fn answer_peek(&mut self) {
        if let Some(p) = self.peek.clone()
            && p.is_wanted()
        {
            let counts = self.peek_accumulated().and_then(|a| {
                a.ok_or_else(|| Error::Internal("a peek with nothing accumulated".into()))
            });
            p.answer(counts);
        }
    }

    /// What was accumulated, which stops accumulating.
    pub fn take_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        self.peek = None;
        match self.accum.take() {
            Some(a) => a.take(&self.compute).map(Some),
            None => Ok(None),
        }
    }

    /// Frames per upload group of chunk `job`, and how many groups it has.
    fn groups(&self, job: Job) -> (usize, usize) {
        let g = self.cfg.upload_frames.clamp(1, job.n);
        (g, job.n.div_ceil(g))
    }

    /// The pedestal state with each of the two sets of per-frame scratch.
    fn frame_buffers<'a>(&'a self, state: &'a DeviceState) -> [FrameBuffers<'a>; 2] {
        let w = &self.work;
        [0, 1].map(|i| FrameBuffers {
            state,
            c_plane: &w.c_plane[i],
            t: &w.t[i],
            status: &w.status[i],
        })
    }

    /// Queues the uploads of chunk `job`, one copy per upload group, round-robin over the
    /// copy streams, each followed by its `up` event (staged: after a host copy into the
    /// slot's pinned staging buffer, allocated here if the slot has none).
    fn upload(&mut self, job: Job) -> Result<()> {
        let px = self.geom.pixels as usize;
        let (g, groups) = self.groups(job);
        let ctx = self.ctx.clone();
        let slot = &mut self.slots[job.slot];
        let host: *const u16 = match job.src {
            Source::Direct => job.host,
            Source::Staged => {
                if slot.pin_in.is_none() {
                    slot.pin_in = Some(PinnedBuf::new(
                        &ctx,
                        slot.frames * px,
                        true,
                        "staged frames",
                    )?);
                }
                let pin = slot
                    .pin_in
                    .as_mut()
                    .ok_or_else(|| Error::Internal("staging buffer missing".into()))?;
                // SAFETY: the input holds `job.n` frames at `job.host` until the chunk is
                // collected (see `Input`).
                let input = unsafe { std::slice::from_raw_parts(job.host, job.n * px) };
                copy_parallel(&mut pin.as_mut_slice()[..input.len()], input);
                pin.ptr_at(0)
            }
        };
        for gi in 0..groups {
            let (f0, m) = (gi * g, g.min(job.n - gi * g));
            let s = &self.copies[gi % self.copies.len()];
            // SAFETY: source: `m` frames of the input, held until the chunk is collected and,
            // when read by DMA, page-locked under the input's hold until then (a call's hold
            // until the GPU is idle: `UntilIdle`), or pageable (copied by the driver before
            // this returns); or of the staging buffer (not written again before the chunk is
            // collected, not freed before the GPU is idle: `Drop for Pipeline`); destination
            // inside `dev_in`.
            unsafe {
                let src = std::slice::from_raw_parts(host.add(f0 * px), m * px);
                slot.dev_in.upload_async(f0 * px, src, s)
            }
            .cuda("uploading frames")?;
            slot.up[gi].record(s).cuda("recording an upload event")?;
        }
        Ok(())
    }

    /// Frame `k` of the chunk in `slot`, on the device.
    fn frame_at(&self, slot: &Slot, k: usize) -> DevicePtr<u16> {
        slot.dev_in.at(k * self.geom.pixels as usize)
    }

    /// Where compact results of the chunk in `slot` from its frame `f` on go: after the
    /// running count of the frames before it, into the chunk's one record buffer.
    fn compact_from(&self, slot: &Slot, f: usize) -> Destination {
        let out = &slot.dev_out;
        Destination {
            base_in: out.at(f),
            count_out: out.at(f + 1),
            records: out.at(slot.frames + 1),
            room: (slot.frames * self.cap) as u32,
        }
    }

    /// Records timing event `events[i]` on the compute stream (only with `timing`: without
    /// it the slot has no timing events).
    fn mark(&self, events: &[CudaEvent], i: usize) -> Result<()> {
        if self.cfg.timing {
            events[i]
                .record(&self.compute)
                .cuda("recording a timing event")?;
        }
        Ok(())
    }

    /// One cooperative run launch per upload group of chunk `job`, each right after its
    /// upload, with its flags cleared before it.
    fn launch_per_upload(&self, job: Job, slot: &Slot, buf: &FrameBuffers) -> Result<()> {
        let (g, groups) = self.groups(job);
        let w = &self.work;
        let run = RunBuffers {
            planes: &w.run_planes,
            work: &w.run_work,
        };
        for gi in 0..groups {
            let (f0, m) = (gi * g, g.min(job.n - gi * g));
            self.compute
                .wait(&slot.up[gi])
                .cuda("waiting for an upload")?;
            // The run kernels' counters and flags, at the start of their work area
            // (`run_work_len` >= `run_flags_len` words).
            w.run_work
                .zero_async(0..self.geom.run_flags_len(), &self.compute)
                .cuda("clearing the run kernel's flags")?;
            self.mark(&slot.t0, gi)?;
            let dst = self.compact_from(slot, f0);
            let frames = self.frame_at(slot, f0);
            self.kernels
                .run(&self.compute, (frames, m as u32), buf, &run, &dst)?;
            self.mark(&slot.t1, gi)?;
            slot.done[gi]
                .record(&self.compute)
                .cuda("recording a kernel event")?;
        }
        Ok(())
    }

    /// Launches per frame of chunk `job`: one `step` launch per frame (classify frame k,
    /// prepare frame k+1, from alternating sets of `bufs`) after one `prepare` of the first
    /// frame; or, with event timing, `prepare` and `classify` per frame, timed apart.
    fn launch_per_frame(&self, job: Job, slot: &Slot, bufs: &[FrameBuffers; 2]) -> Result<()> {
        let (g, _) = self.groups(job);
        let cs = &self.compute;
        let timing = self.cfg.timing;
        let fused = !timing;
        // Frame k of the chunk with the set of scratch `buf`.
        let at = |k: usize, buf| FrameAt {
            frame: self.frame_at(slot, k),
            buf,
        };
        if fused {
            self.compute
                .wait(&slot.up[0])
                .cuda("waiting for an upload")?;
            self.kernels.prepare(cs, at(0, bufs[0]))?;
        }
        let fw = self.frame_words();
        for k in 0..job.n {
            // The launch that first reads a group's frames waits for its upload: frame k's
            // prepare, or with `fused` the launch before it (it prepares frame k+1).
            let first = if fused { k + 1 } else { k };
            if first < job.n && first % g == 0 {
                self.compute
                    .wait(&slot.up[first / g])
                    .cuda("waiting for an upload")?;
            }
            self.mark(&slot.t0, k)?;
            if !fused {
                self.kernels.prepare(cs, at(k, bufs[0]))?;
            }
            self.mark(&slot.tm, k)?;
            let dst = if self.cfg.compact {
                self.compact_from(slot, k)
            } else {
                Destination {
                    base_in: DevicePtr::NULL,
                    count_out: slot.dev_out.at(k * fw),
                    records: slot.dev_out.at(k * fw + 1),
                    room: self.cap as u32,
                }
            };
            if fused {
                let buf = bufs[(k + 1) % 2];
                let next = if k + 1 < job.n {
                    at(k + 1, buf)
                } else {
                    FrameAt {
                        frame: DevicePtr::NULL,
                        buf,
                    }
                };
                self.kernels.step(cs, at(k, bufs[k % 2]), &dst, next)?;
            } else {
                self.kernels.classify(cs, at(k, bufs[0]), &dst)?;
            }
            self.mark(&slot.t1, k)?;
            if k % g == g - 1 || k + 1 == job.n {
                slot.done[k / g]
                    .record(&self.compute)
                    .cuda("recording a kernel event")?;
            }
        }
        Ok(())
    }

    /// Queues the downloads of chunk `job`'s results, each after the kernels it reads: the
    /// per-frame counts of compact results on the count stream (the records follow at
    /// collection), else each upload group's result slots on its copy stream.
    fn download(&self, job: Job, slot: &Slot) -> Result<()> {
        let (g, groups) = self.groups(job);
        let out = &slot.dev_out;
        if self.cfg.compact {
            // Not on a copy stream: the next chunk's uploads must not queue behind a
            // download that waits for this chunk's kernels.
            let s = &self.tally;
            s.wait(&slot.done[groups - 1]).cuda("waiting for kernels")?;
            dtoh(&slot.pin_out, out, 0, job.n + 1, s)?;
            slot.dl[0].record(s).cuda("recording a download event")?;
        } else {
            let fw = self.frame_words();
            for gi in 0..groups {
                let (f0, m) = (gi * g, g.min(job.n - gi * g));
                let s = &self.copies[gi % self.copies.len()];
                s.wait(&slot.done[gi]).cuda("waiting for kernels")?;
                dtoh(&slot.pin_out, out, f0 * fw, m * fw, s)?;
                slot.dl[gi].record(s).cuda("recording a download event")?;
            }
        }
        Ok(())
    }

    /// Waits for chunk `job`'s results (its uploads and kernels are then complete), checks
    /// every frame's count against the room, and brings compact records down: after this,
    /// [`Pipeline::deliver`] reads only the pinned result buffer.
    fn check(&mut self, job: Job) -> Result<(), Stop> {
        let rw = self.size.record_words();
        let fw = self.frame_words();
        let cap = self.cap;
        let per_upload = self.per_upload();
        let slot = &mut self.slots[job.slot];
        let g = self.cfg.upload_frames.clamp(1, job.n);
        let rec_off = slot.frames + 1;
        if self.cfg.compact {
            slot.dl[0].synchronize().cuda("waiting for results")?;
            let prefix = &slot.pin_out.as_slice()[..=job.n];
            let room = slot.frames * cap;
            let total = prefix[job.n] as usize;
            if total > room {
                let k = (0..job.n)
                    .find(|&k| prefix[k + 1] as usize > room)
                    .unwrap_or(job.n - 1);
                return Err(Stop::Overflow {
                    frame: k,
                    found: (prefix[k + 1] - prefix[k]) as usize,
                    limit: room.saturating_sub(prefix[k] as usize),
                    need_cap: total.div_ceil(slot.frames),
                });
            }
            if total > 0 {
                // On a stream of its own: the copy streams already hold the next chunk's
                // downloads, queued behind its kernels, and this one must not wait for them.
                let s = &self.fetch;
                dtoh(&slot.pin_out, &slot.dev_out, rec_off, total * rw, s)?;
                if let (Some(_), Some((rows, pinned))) = (&self.placer, &slot.rows) {
                    s.wait(&slot.placed).cuda("waiting for the placement")?;
                    dtoh(pinned, rows, 0, total, s)?;
                }
                s.synchronize().cuda("waiting for results")?;
            }
        } else {
            for gi in 0..job.n.div_ceil(g) {
                slot.dl[gi].synchronize().cuda("waiting for results")?;
            }
            let out = slot.pin_out.as_slice();
            let counts = (0..job.n).map(|k| out[k * fw] as usize);
            if let Some((k, found)) = counts.clone().enumerate().find(|&(_, c)| c > cap) {
                return Err(Stop::Overflow {
                    frame: k,
                    found,
                    limit: cap,
                    need_cap: counts.max().unwrap_or(found),
                });
            }
        }
        if self.cfg.timing && per_upload {
            // One launch per upload group: its time, shared evenly by its frames.
            for gi in 0..job.n.div_ceil(g) {
                let m = g.min(job.n - gi * g);
                let t = slot.t0[gi].elapsed_ms(&slot.t1[gi]);
                let per_frame = t.cuda("reading kernel times")? * 1000.0 / m as f32;
                self.times_us.extend((0..m).map(|_| KernelTime {
                    prepare_us: 0.0,
                    classify_us: per_frame,
                }));
            }
        } else if self.cfg.timing {
            for k in 0..job.n {
                let p = slot.t0[k].elapsed_ms(&slot.tm[k]);
                let c = slot.tm[k].elapsed_ms(&slot.t1[k]);
                self.times_us.push(KernelTime {
                    prepare_us: p.cuda("reading kernel times")? * 1000.0,
                    classify_us: c.cuda("reading kernel times")? * 1000.0,
                });
            }
        }
        Ok(())
    }

    /// Hands chunk `job`'s frames to `visit`, from the results [`Pipeline::check`] brought
    /// down.
    fn deliver(
        &mut self,
        job: Job,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<(), Stop> {
        let rw = self.size.record_words();
        let fw = self.frame_words();
        let size = self.size;
        let slot = &self.slots[job.slot];
        let rec_off = slot.frames + 1;
        let out = slot.pin_out.as_slice();
        let compact = self.cfg.compact;
        let number = |k: usize| {
            slot.numbers.get(k).copied().ok_or_else(|| {
                Stop::Error(Error::Internal(format!(
                    "frame {k} of a chunk has no number"
                )))
            })
        };
        let words = |k: usize| -> &[u32] {
            if compact {
                let (a, b) = (out[k] as usize, out[k + 1] as usize);
                &out[rec_off + a * rw..rec_off + b * rw]
            } else {
                let n = out[k * fw] as usize;
                &out[k * fw + 1..k * fw + 1 + n * rw]
            }
        };
        // Rows placed on the device: frame k's are its records' (compact results only).
        let rows = match (&self.placer, &slot.rows) {
            (Some(_), Some((_, pinned))) if compact => Some(pinned.as_slice()),
            _ => None,
        };
        let rows_of = |k: usize| rows.map(|r| &r[out[k] as usize..out[k + 1] as usize]);
        match self.cfg.collect {
            Collect::ZeroCopy => {
                for k in 0..job.n {
                    let fc = attach(FrameClusters::new(number(k)?, size, words(k)), rows_of(k))?;
                    visit(fc).map_err(|e| Stop::Visitor(k, e))?;
                }
            }
            Collect::Owned => {
                self.owned.clear();
                self.owned_ends.clear();
                for k in 0..job.n {
                    self.owned.extend_from_slice(words(k));
                    self.owned_ends.push(self.owned.len());
                }
                let mut from = 0;
                for (k, &end) in self.owned_ends.iter().enumerate() {
                    let fc = FrameClusters::new(number(k)?, size, &self.owned[from..end]);
                    let fc = attach(fc, rows_of(k))?;
                    visit(fc).map_err(|e| Stop::Visitor(k, e))?;
                    from = end;
                }
            }
        }
        Ok(())
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

/// A value that queued GPU work may still use (host memory it reads or writes, or the hold
/// that keeps such memory page-locked), released only once the context has no work left:
/// [`UntilIdle::wait`] on the normal path (the wait every call ends with anyway); on any
/// other way out, an early return or an unwind (a panicking visitor), the drop waits for the
/// GPU first. Locals drop in reverse order, but this owns its value, so no ordering of
/// declarations is involved. When the GPU cannot be waited for (a failed context), the value
/// is leaked rather than released under work that might still run.
pub(crate) struct UntilIdle<T> {
    ctx: Arc<CudaContext>,
    /// `Some` until [`UntilIdle::wait`] or the drop takes it.
    value: Option<T>,
}

impl<T> UntilIdle<T> {
    /// Holds `value` until `ctx` is idle.
    pub fn new(ctx: &Arc<CudaContext>, value: T) -> Self {
        Self {
            ctx: ctx.clone(),
            value: Some(value),
        }
    }

    /// The value, to use while the GPU may still use it too.
    pub fn get_mut(&mut self) -> &mut T {
        match &mut self.value {
            Some(v) => v,
            // Taken only by `wait` (which consumes self) and the drop.
            None => unreachable!("an UntilIdle's value is taken only when it goes"),
        }
    }

    /// Waits for the GPU, then gives the value back; `None` (the value leaked) when the wait
    /// failed.
    pub fn wait(mut self) -> (Result<()>, Option<T>) {
        let idle = self.ctx.synchronize().cuda("waiting for the GPU");
        let value = self.value.take();
        match idle {
            Ok(()) => (Ok(()), value),
            Err(e) => {
                std::mem::forget(value);
                (Err(e), None)
            }
        }
    }
}

impl<T> Drop for UntilIdle<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take()
            && self.ctx.synchronize().is_err()
        {
            std::mem::forget(value);
        }
    }
}

/// Copies `src` into `dst` (the same length) on rayon's threads in pieces of 4 MiB: one core
/// copies at about a quarter of what the memory bus and an upload can take.
fn copy_parallel(dst: &mut [u16], src: &[u16]) {
    use rayon::prelude::*;
    const PIECE: usize = 2 << 20;
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// `fc` with its placed rows, when there are any.
fn attach<'a>(
    fc: FrameClusters<'a>,
    rows: Option<&'a [PlacedRow]>,
) -> Result<FrameClusters<'a>, Stop> {
    match rows {
        Some(r) => fc.with_placed(r).map_err(Stop::Error),
        None => Ok(fc),
    }
}

/// Device-to-device copy of all of the pedestal sums `src` into `dst`, queued on `stream`.
fn copy_dtod(dst: &RealBuf, src: &RealBuf, stream: &CudaStream) -> Result<()> {
    dst.copy_from_async(src, stream, "the pedestal")
}

/// Queues a download of elements `from .. from + len` of `src` into the same elements of
/// `dst`.
fn dtoh<T: bytemuck::Pod>(
    dst: &PinnedBuf<T>,
    src: &DeviceBuf<T>,
    from: usize,
    len: usize,
    stream: &CudaStream,
) -> Result<()> {
    assert!(from + len <= dst.len());
    // SAFETY: the destination range lies inside the pinned buffer, which outlives the copy
    // (the owner synchronises before freeing or reading it).
    unsafe { src.download_async(from, dst.ptr_at(from), len, stream) }.cuda("downloading results")
}
