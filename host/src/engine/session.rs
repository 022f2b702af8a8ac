//! The one way a run is assembled: a [`Session`] holds a finder opened once, the pedestal
//! its inputs start from, the engine's ring and its settings, and runs any number of inputs
//! of one frame shape through the engine into sinks.
//!
//! Who builds one and how:
//! * `cluda find`, `cluda demo`, the file sessions of the Python package: `Session::open`
//!   (`engine/run.rs`), the device opened while the pedestal input is read;
//! * the detector's stream (one session per frame shape, each acquisition an input) and the
//!   Python `ClusterFinder` (its finder kept between calls): [`Session::with_finder`] around
//!   a finder the caller opened, the pedestal given ([`Session::set_pedestal`],
//!   [`Session::start_from`]), added up from dark acquisitions ([`Session::add_dark`]) or
//!   learnt from an input's first frames ([`Session::learn_pedestal`]), then carried from
//!   one input to the next ([`Session::find_into`]) or restarted
//!   ([`Session::restart_pedestal`]).
//!
//! Every input goes through the same engine loop (the reader thread, the ring, the finder's
//! `find_feed`), told to a [`Sink`] the same way ([`super::sink::SinkEvents`]).

use std::time::{Duration, Instant};

use super::feeding::FedFinder;
use super::input::{Cancel, Input};
use super::outputs::{InputOutputs, SessionInputs};
use super::report::{RunReport, RunTiming};
use super::sink::Sink;
use super::{EngineConfig, EngineStats, RingSlots};
use crate::error::Result;
use crate::frames::Frames;
use crate::io::FrameSource;
use crate::pedestal::Pedestal;

/// What a session does with the engine's ring from one input to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingPlan {
    /// Allocated when the session is made (unless every input is mapped,
    /// [`EngineConfig::map`]) and kept for every input: page-locked slots on a GPU cost
    /// about 1 s per GiB, more than a short input takes.
    Kept,
    /// Each input allocates a ring no larger than it needs and lets it go when it ends (a
    /// CPU finder's plain memory, held by nobody between inputs).
    PerInput,
}

/// A finder opened once with the pedestal its inputs start from, ready for any number of
/// data inputs of one frame shape: the device opened once, the ring allocated once (see the
/// module docs). Each input of [`Session::find_all`] starts from the session's pedestal,
/// unless told to carry it on; [`Session::find_into`] carries it on.
pub struct Session {
    pub(super) finder: Box<dyn FedFinder + Send>,
    /// The pedestal inputs start from (as read, or given; empty when none was).
    pub(super) pedestal: Pedestal,
    pub(super) slots: Option<RingSlots>,
    pub(super) engine: EngineConfig,
    pub(super) ring: RingPlan,
    pub(super) read_threads: Option<usize>,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) note: String,
    /// Start-up timing, for the first input's report.
    pub(super) startup: RunTiming,
    /// Gap warnings of the pedestal input.
    pub(super) warnings: Vec<String>,
    /// A chunk of frames for pedestal frames and frames thrown away, kept from one input to
    /// the next (a new one would fault its pages in again).
    pub(super) scratch: Vec<u16>,
}

impl Session {
    /// A session around `finder`, opened by the caller (`note`: why that device), with the
    /// engine's settings `engine` (`map` already settled) and its ring as `ring` says; with
    /// [`RingPlan::Kept`] the ring and the finder's buffers for a chunk are allocated now,
    /// so that no input pays for them. The session's pedestal is the finder's empty one until
    /// one is given ([`Session::set_pedestal`]); the finder's own state is where the first
    /// input starts.
    ///
    /// # Errors
    /// With a kept ring, [`EngineConfig::validate`]'s for the finder's frame shape; allocation
    /// errors (the device's on a GPU).
    pub fn with_finder(
        mut finder: Box<dyn FedFinder + Send>,
        note: String,
        engine: EngineConfig,
        ring: RingPlan,
    ) -> Result<Self> {
        let config = finder.config().clone();
        let (rows, cols) = (config.rows, config.cols);
        let pedestal = Pedestal::new(rows, cols, config.pedestal_frames, config.precision)?;
        let slots = match ring {
            RingPlan::Kept => {
                finder.reserve(engine.chunk)?;
                match engine.map {
                    true => None,
                    false => Some(RingSlots::allocate(finder.as_ref(), engine)?),
                }
            }
            RingPlan::PerInput => None,
        };
        Ok(Self {
            finder,
            pedestal,
            slots,
            engine,
            ring,
            read_threads: None,
            rows,
            cols,
            note,
            startup: RunTiming::default(),
            warnings: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// The finder's device, as it describes itself.
    pub fn device(&self) -> String {
        self.finder.device()
    }

    /// Why that device (e.g. "no GPU found, using the CPU").
    pub fn device_note(&self) -> &str {
        &self.note
    }

    /// The session's finder, to ask (its configuration, whether it is ready, its pedestal).
    pub fn finder(&self) -> &dyn FedFinder {
        self.finder.as_ref()
    }

    /// The session's finder, to push pedestal frames into or to hand frames directly
    /// ([`crate::ClusterFinder::find_each`]); what it is left with is where the next input
    /// starts.
    pub fn finder_mut(&mut self) -> &mut dyn FedFinder {
        self.finder.as_mut()
    }

    /// The engine's settings of every input.
    pub fn engine(&self) -> EngineConfig {
        self.engine
    }

    /// Every frame `source` delivers into the engine: found from the pedestal where the
    /// finder has it (carried on from the input before, or as set since), each frame's
    /// clusters to `sink` ([`Sink::begin`], [`Sink::frame`] for each, then [`Sink::end`],
    /// or [`Sink::abandon`] when anything failed), through the session's ring. The source
    /// reads with the finder's read threads ([`FedFinder::read_threads`]).
    ///
    /// # Errors
    /// [`Error::Shape`](crate::error::Error::Shape) for frames of another shape (before anything runs); the source's,
    /// the finder's and the sink's errors (what stays consumed is what
    /// [`FedFinder::find_feed`] says).
    pub fn find_into(
        &mut self,
        source: &mut (dyn FrameSource + Send),
        sink: &mut dyn Sink,
    ) -> Result<EngineStats> {
        let threads = self
            .read_threads
            .unwrap_or_else(|| self.finder.read_threads());
        source.set_read_threads(threads);
        let mut own = None;
        let (config, slots) = match self.ring {
            RingPlan::Kept => (self.engine, &mut self.slots),
            RingPlan::PerInput => (self.engine.capped(source.remaining_hint()), &mut own),
        };
        super::find_stream_into(self.finder.as_mut(), source, config, slots, sink)
    }

    /// Allocates the ring now when the session keeps one ([`RingPlan::Kept`]) and has none
    /// (an input whose slots did not all come back, or a mapped one): between inputs, while
    /// no frames are waiting (the stream, between acquisitions).
    ///
    /// # Errors
    /// Allocation errors.
    pub fn ensure_ring(&mut self) -> Result<()> {
        if self.ring == RingPlan::Kept && self.slots.is_none() && !self.engine.map {
            self.slots = Some(RingSlots::allocate(self.finder.as_ref(), self.engine)?);
        }
        Ok(())
    }

    /// Makes `pedestal` the session's: the finder starts the next input from it, and
    /// [`Session::restart_pedestal`] goes back to it.
    ///
    /// # Errors
    /// A pedestal that does not match the finder's configuration; the device's.
    pub fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()> {
        self.finder.reset_pedestal(&pedestal)?;
        self.pedestal = pedestal;
        Ok(())
    }

    /// The next input starts from a copy of `pedestal` (copied into the finder's own arrays
    /// where it can: a stream starts every data acquisition from one saved pedestal); the
    /// session's own pedestal stays.
    ///
    /// # Errors
    /// As [`Session::set_pedestal`].
    pub fn start_from(&mut self, pedestal: &Pedestal) -> Result<()> {
        self.finder.reset_pedestal(pedestal)
    }

    /// Puts the pedestal back as the session read it (or was given it), so that the next
    /// input (of `Session::find` or the first of [`Session::find_all`], which start from
    /// where the session is) starts from it afresh, as if it were the session's first.
    ///
    /// # Errors
    /// The device's.
    pub fn restart_pedestal(&mut self) -> Result<()> {
        self.finder.reset_pedestal(&self.pedestal)
    }

    /// The finder's pedestal learnt afresh from `source`'s first frames: emptied, then fed
    /// the source's frames a chunk at a time until it holds its N frames or the source ends;
    /// `each(numbers)` hears each chunk's frame numbers once it is in. The frames after those
    /// stay in the source, for [`Session::find_into`]. Returns the frames pushed; the finder
    /// is ready ([`crate::ClusterFinder::is_ready`]) when they were N.
    ///
    /// # Errors
    /// The source's and the finder's.
    pub fn learn_pedestal(
        &mut self,
        source: &mut dyn FrameSource,
        each: &mut dyn FnMut(&[u64]),
    ) -> Result<u64> {
        let config = self.finder.config().clone();
        self.finder.set_pedestal(Pedestal::new(
            self.rows,
            self.cols,
            config.pedestal_frames,
            config.precision,
        )?)?;
        let (chunk, pixels) = (self.engine.chunk, self.rows * self.cols);
        self.scratch_for(chunk)?;
        let (mut numbers, mut pushed) = (Vec::new(), 0u64);
        while !self.finder.is_ready() {
            numbers.clear();
            let want = (u64::from(config.pedestal_frames) - pushed).min(chunk as u64) as usize;
            let k = source.fill(&mut self.scratch[..want * pixels], &mut numbers)?;
            if k == 0 {
                break;
            }
            let frames = Frames::new(&self.scratch[..k * pixels], k, self.rows, self.cols)?;
            self.finder.push_pedestal(frames)?;
            pushed += k as u64;
            each(&numbers);
        }
        Ok(pushed)
    }

    /// Adds every frame of `source` into `pedestal`, a host pedestal of the session's frame
    /// shape that the caller carries from one input to the next (a stream's dark
    /// acquisitions), a chunk at a time; `each(numbers)` hears each chunk's frame numbers once
    /// it is in. Returns the frames added. The finder is not touched: the pedestal becomes
    /// its own once given ([`Session::set_pedestal`], [`Session::start_from`]).
    ///
    /// # Errors
    /// The source's; [`Error::Shape`](crate::error::Error::Shape) for a pedestal of another shape.
    pub fn add_dark(
        &mut self,
        source: &mut dyn FrameSource,
        pedestal: &mut Pedestal,
        each: &mut dyn FnMut(&[u64]),
    ) -> Result<u64> {
        let (chunk, pixels) = (self.engine.chunk, self.rows * self.cols);
        self.scratch_for(chunk)?;
        let (mut numbers, mut added) = (Vec::new(), 0u64);
        loop {
            numbers.clear();
            let k = source.fill(&mut self.scratch, &mut numbers)?;
            if k == 0 {
                return Ok(added);
            }
            pedestal.push_frames(Frames::new(
                &self.scratch[..k * pixels],
                k,
                self.rows,
                self.cols,
            )?)?;
            added += k as u64;
            each(&numbers);
        }
    }

    /// Takes (and throws away) every frame left in `source`, so that none of them is found or
    /// starts the next input (a stream's acquisition whose clusters cannot be written).
    ///
    /// # Errors
    /// The source's.
    pub fn discard(&mut self, source: &mut dyn FrameSource) -> Result<()> {
        self.scratch_for(self.engine.chunk)?;
        let mut numbers = Vec::new();
        loop {
            numbers.clear();
            if source.fill(&mut self.scratch, &mut numbers)? == 0 {
                return Ok(());
            }
        }
    }

    /// The scratch chunk, `chunk` frames long.
    fn scratch_for(&mut self, chunk: usize) -> Result<()> {
        let samples = chunk * self.rows * self.cols;
        if self.scratch.len() != samples {
            // The old one freed first: both at once could be more than memory holds.
            self.scratch = Vec::new();
            self.scratch = crate::memory::zeroed_vec(
                || format!("a chunk of {chunk} frames of {} x {}", self.rows, self.cols),
                samples,
            )?;
        }
        Ok(())
    }

    /// Finds every input of `data` in turn through one ring, the next input read while the
    /// current one is found. Input `k` writes `outputs(k)` and starts from the pedestal as the
    /// session read it, or with `carry` from where the input before it left it (the inputs
    /// are then one stream of frames; the first input starts from where the session is).
    /// Each input's results go to `sink` ([`Sink::begin`], [`Sink::frame`] for each frame's
    /// clusters, then [`Sink::end`] or, when the input failed, [`Sink::abandon`]); each
    /// input's report (or the error that stopped it: its reading, writing, or the sink's) to
    /// `done(k, report)`. One input's error does not stop the others.
    ///
    /// # Errors
    /// A data input of another frame shape (before anything runs); `cancel`'s and `done`'s,
    /// which stop the run.
    pub fn find_all(
        &mut self,
        data: &mut [Input<'_>],
        outputs: &mut dyn FnMut(usize) -> Result<InputOutputs>,
        carry: bool,
        cancel: Cancel<'_>,
        sink: &mut dyn Sink,
        done: &mut dyn FnMut(usize, Result<RunReport>) -> Result<()>,
    ) -> Result<()> {
        for d in data.iter() {
            if (d.frames.rows(), d.frames.cols()) != (self.rows, self.cols) {
                return Err(super::input::shape_mismatch(
                    d,
                    "the pedestal",
                    (self.rows, self.cols),
                ));
            }
        }
        let read_threads = self
            .read_threads
            .unwrap_or_else(|| self.finder.read_threads());
        for d in data.iter_mut() {
            d.frames.set_read_threads(read_threads);
        }
        let describe: Vec<String> = data.iter().map(|d| d.describe.clone()).collect();
        // Where each input's frames lie on the detector: its cluster file is written in
        // detector coordinates (a raw acquisition with a receiver ROI: moved by the ROI's
        // corner); plots and sinks see the frames' own coordinates.
        let origins: Vec<(usize, usize)> = data.iter().map(|d| d.frames.origin()).collect();
        let mut sources: Vec<&mut (dyn FrameSource + Send)> = Vec::new();
        for d in data.iter_mut() {
            sources.push(&mut *d.frames);
        }
        let mut events = SessionInputs::new(cancel, &self.pedestal, sink, outputs, done);
        events.carry = carry;
        events.describe = describe;
        events.origins = origins;
        events.startup = std::mem::take(&mut self.startup);
        events.read_threads = read_threads;
        events.shape = (self.rows, self.cols);
        let result = super::find_streams(
            self.finder.as_mut(),
            &mut sources,
            self.engine,
            &mut self.slots,
            &mut events,
        );
        drop(sources);
        for d in data.iter() {
            if let Some(w) = d.gap_warning() {
                self.warnings.push(w);
            }
        }
        result
    }

    /// Warnings gathered so far and not yet handed out (gap reports of the pedestal and of
    /// data inputs that lost frames), emptied by the call.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// Releases the device (its memory, the context); how long that took.
    pub fn close(self) -> Duration {
        let released = Instant::now();
        drop(self.finder);
        drop(self.slots);
        released.elapsed()
    }
}
