//! One run of the finder, assembled: a pedestal input and a data input in, clusters out to a
//! cluster file, plots and the caller's visitor. `cluda find` and `cluda demo` are this and
//! nothing more; library callers get the same start-up, ring, writer and plot staging.
//!
//! ```text
//!  device thread: open the finder, allocate the ring  ┐ at the same time
//!  this thread:   read the pedestal into a host pedestal ┘
//!  then: the engine (reader thread -> finder -> visitor: cluster file writer, plots, caller)
//! ```
//!
//! Start-up overlaps: the device opens (and allocates the frame ring, page-locked memory on a
//! GPU) on a thread of its own while the pedestal frames are read and pushed into a host
//! pedestal; on a GPU the two take about as long, so start-up costs the longer one.

#[cfg(feature = "plot")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::input::{Cancel, Input};
use super::sink::{FnSink, Sink};
use super::{EngineConfig, EngineStats, RingSlots};
use crate::cluster::FrameClusters;
use crate::config::{FindOptions, FinderConfig};
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::finder::select::{DeviceChoice, open_finder};
use crate::frames::Frames;
use crate::io::write_behind::{DEFAULT_WRITE_THREADS, WriteStats};
use crate::io::{Claim, ClusterFileWriter};
use crate::pedestal::Pedestal;
#[cfg(feature = "plot")]
use crate::plot::{PlotAccumulator, SpectrumOptions};

/// How the data frames reach the finder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputPath {
    /// What the finder reads fastest ([`ClusterFinder::prefers_mapped_input`]): mapped for the
    /// CPU finder (no reader threads take the cores its band threads run on), read for the
    /// GPU (the default).
    #[default]
    Auto,
    /// Each chunk is read from the file into the finder's memory (page-locked on a GPU) by
    /// several threads.
    Read,
    /// A `.npy` file is mapped and the finder is handed the mapped pages themselves
    /// (page-locked in place on a GPU); other inputs are read.
    Map,
}

impl InputPath {
    /// The name used on the command line (`--input`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Read => "read",
            Self::Map => "map",
        }
    }
}

impl std::str::FromStr for InputPath {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "read" => Ok(Self::Read),
            "map" => Ok(Self::Map),
            _ => Err(Error::param(
                "input",
                format!("`{s}` is not one of auto, read, map"),
            )),
        }
    }
}

/// What a run finds and where: the finder's options (the frame shape and the pedestal window
/// N come from the inputs), the device and the CPU threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct FinderChoice {
    /// Cluster size, n_sigma, threshold mode, precision.
    pub options: FindOptions,
    /// Which device finds.
    pub device: DeviceChoice,
    /// CPU worker threads (`None`: every core).
    pub threads: Option<usize>,
}

/// The plots a run draws (`spectrum.png`, `hitmap.png`, `pedestal_mean.png`,
/// `pedestal_noise.png`) into a directory.
#[cfg(feature = "plot")]
#[derive(Clone, Debug)]
pub struct PlotOutput {
    /// The directory (created when missing).
    pub dir: PathBuf,
    /// How the spectrum is binned and drawn.
    pub options: SpectrumOptions,
    /// Replace plot files already there (`--overwrite`); without it an existing one is an
    /// error naming it, also when it appears during the run.
    pub overwrite: bool,
}

/// Everything about a run but its inputs and the caller's visitor.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The finder.
    pub finder: FinderChoice,
    /// How data frames reach the finder.
    pub input: InputPath,
    /// Threads that read each chunk (`None`: what the finder asks for,
    /// [`ClusterFinder::read_threads`]; for the pedestal, every core up to 16).
    pub read_threads: Option<usize>,
    /// The cluster file to write (aare's layout), under a temporary name renamed when whole.
    pub cluster_file: Option<PathBuf>,
    /// What the cluster file's rename does when its name exists by then (default: refuse,
    /// an error naming the file; `--overwrite`: [`Claim::Replace`]).
    pub claim: Claim,
    /// Plots to draw when the run ends.
    #[cfg(feature = "plot")]
    pub plots: Option<PlotOutput>,
}

impl RunOptions {
    /// A run with `finder` and nothing written: read input, no cluster file, no plots.
    pub fn new(finder: FinderChoice) -> Self {
        Self {
            finder,
            input: InputPath::default(),
            read_threads: None,
            cluster_file: None,
            claim: Claim::default(),
            #[cfg(feature = "plot")]
            plots: None,
        }
    }
}

/// Where the time of a run went (see [`RunTiming::lines`]).
#[derive(Clone, Debug, Default)]
pub struct RunTiming {
    /// Start-up: from the call to the first data frame asked for (device and pedestal).
    pub startup: Duration,
    /// Opening the device.
    pub open: Duration,
    /// Allocating the frame ring on the device thread (`None`: not ahead; see
    /// [`EngineStats::alloc`]).
    pub ring_ahead: Option<Duration>,
    /// The finder's buffers for a chunk.
    pub reserve: Duration,
    /// Reading and pushing the pedestal.
    pub pedestal: Duration,
    /// Pedestal frames.
    pub pedestal_frames: u64,
    /// The engine's data phase.
    pub engine: EngineStats,
    /// Threads the data was read with.
    pub read_threads: usize,
    /// The cluster file writer's, when one was written.
    pub write: Option<WriteStats>,
    /// The data phase and the cluster file's commit.
    pub busy: Duration,
    /// Releasing the device (its memory, the context).
    pub release: Duration,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Data frames found.
    pub frames: u64,
    /// Clusters found in them.
    pub clusters: u64,
    /// The finder's device, as it describes itself.
    pub device: String,
    /// Why that device (e.g. "no GPU found, using the CPU").
    pub device_note: String,
    /// Where the time went.
    pub timing: RunTiming,
    /// Gap reports of inputs that lost frames (raw acquisitions), for a person.
    pub warnings: Vec<String>,
    /// The cluster file written, if any.
    pub cluster_file: Option<PathBuf>,
    /// The plots written, if any.
    pub plots: Vec<PathBuf>,
}

impl RunReport {
    /// Seconds the data phase took, the cluster file's commit included, less its waits for
    /// input: finding and writing (what `cluda find`'s summary line reports as `seconds`).
    pub fn seconds(&self) -> f64 {
        self.timing
            .busy
            .saturating_sub(self.timing.engine.waited_for_input)
            .as_secs_f64()
    }

    /// Seconds the input's own threads spent reading (or generating) the data frames,
    /// overlapped with finding; 0 for a mapped input.
    pub fn input_seconds(&self) -> f64 {
        self.timing.engine.read_busy.as_secs_f64()
    }
}

/// Runs the finder over `data` with a pedestal of every frame of `pedestal` (its window N is
/// their count, [`Input::pedestal_window`]), writing what `options` asks for, handing each
/// frame's clusters with its frame number (the input's: a raw acquisition's header frame
/// numbers, else counting from 0) to `visit`, in order. `cancel` is asked between chunks and
/// frames. Nothing holds more than the ring's chunks of frames or clusters. The same as
/// [`Session::open`], [`Session::find`] and [`Session::close`].
///
/// # Errors
/// Shapes that differ between the inputs, an empty pedestal, the device's, the inputs', the
/// writer's and the visitor's errors, and `cancel`'s. A cluster file is then not written (its
/// temporary file is removed) and no plot is left half-drawn.
pub fn run(
    options: &RunOptions,
    pedestal: &mut Input<'_>,
    data: &mut Input<'_>,
    cancel: Cancel<'_>,
    visit: &mut dyn FnMut(u64, &FrameClusters<'_>) -> Result<()>,
) -> Result<RunReport> {
    check_shapes(pedestal, std::slice::from_ref(&&*data))?;
    let mut session = Session::open(options, pedestal, data.len, cancel)?;
    let outputs = InputOutputs {
        cluster_file: options.cluster_file.clone(),
        claim: options.claim,
        #[cfg(feature = "plot")]
        plots: options.plots.clone(),
    };
    let mut report = session.find(data, &outputs, cancel, visit)?;
    report.warnings = session.take_warnings();
    report.device_note = session.note.clone();
    report.timing.release = session.close();
    Ok(report)
}

/// What one input of a [`Session`] writes.
#[derive(Clone, Debug, Default)]
pub struct InputOutputs {
    /// The cluster file (aare's layout), under a temporary name renamed when whole.
    pub cluster_file: Option<PathBuf>,
    /// What its rename does when the name exists by then (default: refuse;
    /// [`Claim::NextFree`] for a planned name of `--out-dir`).
    pub claim: Claim,
    /// Plots drawn when the input ends, with the pedestal as it is then.
    #[cfg(feature = "plot")]
    pub plots: Option<PlotOutput>,
}

/// A finder opened with its pedestal, ready for any number of data inputs of one frame shape:
/// the device opened once, the pedestal read once, the ring allocated once. Each input starts
/// from the pedestal as it was read ([`Session::find`], [`Session::find_all`]), unless told to
/// carry it on.
pub struct Session {
    finder: Box<dyn ClusterFinder + Send>,
    /// The pedestal as read, for each input to start from.
    pedestal: Pedestal,
    slots: Option<RingSlots>,
    engine: EngineConfig,
    read_threads: Option<usize>,
    rows: usize,
    cols: usize,
    note: String,
    /// Start-up timing, for the first input's report.
    startup: RunTiming,
    /// Gap warnings of the pedestal input.
    warnings: Vec<String>,
}

/// Checks that every data input has the pedestal's frame shape.
fn check_shapes(pedestal: &Input<'_>, data: &[&Input<'_>]) -> Result<()> {
    let (rows, cols) = (pedestal.frames.rows(), pedestal.frames.cols());
    for d in data {
        if (d.frames.rows(), d.frames.cols()) != (rows, cols) {
            return Err(super::input::shape_mismatch(
                d,
                &pedestal.describe,
                (rows, cols),
            ));
        }
        if let Some(e) = super::input::place_mismatch(d, pedestal) {
            return Err(e);
        }
    }
    Ok(())
}

impl Session {
    /// Opens the device of `options` and reads every frame of `pedestal` into its pedestal
    /// at the same time (see the module docs); the ring is sized for inputs of at most
    /// `longest` frames (a short run allocates no more than it reads).
    ///
    /// # Errors
    /// An empty pedestal, the device's and the input's errors, and `cancel`'s.
    pub fn open(
        options: &RunOptions,
        pedestal: &mut Input<'_>,
        longest: u64,
        cancel: Cancel<'_>,
    ) -> Result<Self> {
        let (rows, cols) = (pedestal.frames.rows(), pedestal.frames.cols());
        let n = pedestal.pedestal_window()?;
        let config = options.finder.options.config(rows, cols, n);
        // `map` is settled once the finder is open (`InputPath::Auto`).
        let engine = EngineConfig::for_frames(rows, cols).capped(longest);
        #[cfg(feature = "plot")]
        if let Some(p) = &options.plots {
            p.options.validate()?;
        }
        let started = Instant::now();
        let stop = AtomicBool::new(false);
        let (opened, host_pedestal) = std::thread::scope(|s| -> Result<_> {
            let opener = std::thread::Builder::new()
                .name("cluda-open".into())
                .spawn_scoped(s, || {
                    let r = open_device(&config, &options.finder, engine, options.input);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
                .map_err(|e| Error::io("<device thread>", e))?;
            let threads = options
                .read_threads
                .unwrap_or_else(crate::io::readahead::read_threads);
            let parallel = options.finder.threads != Some(1);
            let stopped = || -> Result<()> {
                if stop.load(Ordering::Relaxed) {
                    return Err(Error::Internal("stopped for the device's error".into()));
                }
                cancel()
            };
            let host_pedestal = read_pedestal(pedestal, &config, threads, parallel, &stopped);
            let opened = opener
                .join()
                .map_err(|_| Error::Internal("the device thread panicked".into()))?;
            Ok((opened, host_pedestal))
        })?;
        // A device error first (the pedestal stopped early for it), as when it opened first.
        let Opened {
            mut finder,
            note,
            open_time,
            slots,
            reserve_time,
            engine,
        } = opened?;
        let (host_pedestal, pedestal_time) = host_pedestal?;
        finder.set_pedestal(host_pedestal.clone())?;
        Ok(Self {
            finder,
            pedestal: host_pedestal,
            startup: RunTiming {
                startup: started.elapsed(),
                open: open_time,
                ring_ahead: slots.as_ref().map(RingSlots::alloc_time),
                reserve: reserve_time,
                pedestal: pedestal_time,
                pedestal_frames: pedestal.len,
                ..RunTiming::default()
            },
            slots,
            engine,
            read_threads: options.read_threads,
            rows,
            cols,
            note,
            warnings: pedestal.gap_warning().into_iter().collect(),
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

    /// Finds the clusters of every frame of `data`, starting from the pedestal as the
    /// session read it (or as the last input left it, when it is the first input), writing
    /// `outputs` and handing each frame's clusters with its frame number to `visit`.
    ///
    /// # Errors
    /// As [`run`].
    pub fn find(
        &mut self,
        data: &mut Input<'_>,
        outputs: &InputOutputs,
        cancel: Cancel<'_>,
        visit: &mut dyn FnMut(u64, &FrameClusters<'_>) -> Result<()>,
    ) -> Result<RunReport> {
        let mut report = None;
        // The visitor sees what the cluster file holds: detector coordinates.
        let (dy, dx) = data.frames.origin();
        let mut shifted = Vec::new();
        self.find_all(
            std::slice::from_mut(data),
            &mut |_| Ok(outputs.clone()),
            true,
            cancel,
            &mut FnSink(|_, n, fc: &FrameClusters<'_>| {
                if (dy, dx) == (0, 0) {
                    visit(n, fc)
                } else {
                    visit(n, &fc.shifted_into(dy, dx, &mut shifted)?)
                }
            }),
            &mut |_, r| {
                report = Some(r);
                Ok(())
            },
        )?;
        report.unwrap_or_else(|| Err(Error::Internal("the session ended no input".into())))
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
        #[cfg(feature = "plot")]
        let (rows, cols) = (self.rows, self.cols);
        let pedestal = &self.pedestal;
        let startup = std::mem::take(&mut self.startup);
        // The current input's outputs, opened in `begin` and finished in `end`.
        struct Current {
            writer: Option<
                ClusterFileWriter<crate::io::write_behind::WriteBehind<crate::io::AtomicFile>>,
            >,
            #[cfg(feature = "plot")]
            plot: Option<(PlotAccumulator, PlotStage)>,
            clusters: u64,
        }
        let current: std::cell::RefCell<Option<Current>> = std::cell::RefCell::new(None);
        let sink = std::cell::RefCell::new(sink);
        let describe: Vec<String> = data.iter().map(|d| d.describe.clone()).collect();
        // Where each input's frames lie on the detector: its cluster file is written in
        // detector coordinates (a raw acquisition with a receiver ROI: moved by the ROI's
        // corner); plots and sinks see the frames' own coordinates.
        let origins: Vec<(usize, usize)> = data.iter().map(|d| d.frames.origin()).collect();
        let mut shifted: Vec<u32> = Vec::new();
        let mut sources: Vec<&mut (dyn crate::io::FrameSource + Send)> = Vec::new();
        for d in data.iter_mut() {
            sources.push(&mut *d.frames);
        }
        let mut first = true;
        let result = super::find_streams(
            self.finder.as_mut(),
            &mut sources,
            self.engine,
            &mut self.slots,
            &mut |finder, k| {
                cancel()?;
                if !first && !carry {
                    finder.set_pedestal(pedestal.clone())?;
                }
                first = false;
                let outputs = outputs(k)?;
                let writer = outputs
                    .cluster_file
                    .as_deref()
                    .map(|p| {
                        ClusterFileWriter::create_claiming(p, DEFAULT_WRITE_THREADS, outputs.claim)
                    })
                    .transpose()?;
                #[cfg(feature = "plot")]
                let plot = match &outputs.plots {
                    Some(p) => Some((
                        PlotAccumulator::with_options(rows, cols, &p.options)?,
                        PlotStage::create(&p.dir, p.overwrite)?,
                    )),
                    None => None,
                };
                *current.borrow_mut() = Some(Current {
                    writer,
                    #[cfg(feature = "plot")]
                    plot,
                    clusters: 0,
                });
                sink.borrow_mut().begin(k, finder)
            },
            &mut |k, number, fc| {
                cancel()?;
                let mut cur = current.borrow_mut();
                let Some(c) = cur.as_mut() else {
                    return Err(Error::Internal("a frame before its input began".into()));
                };
                c.clusters += fc.len() as u64;
                if let Some(w) = c.writer.as_mut() {
                    let n = crate::io::file_frame_number(number, "out", &describe[k])?;
                    match origins.get(k).copied().unwrap_or((0, 0)) {
                        (0, 0) => w.write_frame(n, &fc)?,
                        (dy, dx) => w.write_frame(n, &fc.shifted_into(dy, dx, &mut shifted)?)?,
                    }
                }
                #[cfg(feature = "plot")]
                if let Some((p, _)) = c.plot.as_mut() {
                    p.add(&fc);
                }
                sink.borrow_mut().frame(k, number, &fc)
            },
            &mut |finder: &mut dyn ClusterFinder, k, result| {
                let c = current.borrow_mut().take();
                let report = result.and_then(|stats| {
                    cancel()?;
                    let Some(c) = c else {
                        return Err(Error::Internal("an input ended before it began".into()));
                    };
                    let commit = Instant::now();
                    let written = c.writer.map(|w| w.commit()).transpose()?;
                    let busy = stats.wall + commit.elapsed();
                    #[cfg_attr(not(feature = "plot"), allow(unused_mut))]
                    let mut plots = Vec::new();
                    #[cfg(feature = "plot")]
                    if let Some((p, stage)) = c.plot {
                        let drawn = p.finish(&finder.pedestal()?, stage.path())?;
                        cancel()?;
                        plots = stage.commit(drawn)?;
                    }
                    let timing = if k == 0 {
                        startup.clone()
                    } else {
                        RunTiming::default()
                    };
                    sink.borrow_mut().end(k, &mut *finder)?;
                    Ok(RunReport {
                        frames: stats.frames,
                        clusters: c.clusters,
                        device: finder.device(),
                        device_note: String::new(),
                        timing: RunTiming {
                            engine: stats,
                            read_threads,
                            write: written.as_ref().map(|(_, w)| *w),
                            busy,
                            ..timing
                        },
                        // Gap reports are known once the input was read to its end: the
                        // session gathers them ([`Session::take_warnings`]).
                        warnings: Vec::new(),
                        cluster_file: written.map(|(p, _)| p),
                        plots,
                    })
                });
                if report.is_err() {
                    sink.borrow_mut().abandon(k, finder);
                }
                done(k, report)
            },
        );
        for d in data.iter() {
            if let Some(w) = d.gap_warning() {
                self.warnings.push(w);
            }
        }
        result
    }

    /// Puts the pedestal back as the session read it, so that the next input (of
    /// [`Session::find`] or the first of [`Session::find_all`], which start from where the
    /// session is) starts from it afresh, as if it were the session's first.
    ///
    /// # Errors
    /// The device's.
    pub fn restart_pedestal(&mut self) -> Result<()> {
        self.finder.set_pedestal(self.pedestal.clone())
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

/// A finder opened on the device thread, with the ring it allocated.
struct Opened {
    finder: Box<dyn ClusterFinder + Send>,
    note: String,
    open_time: Duration,
    slots: Option<RingSlots>,
    /// Time the finder took to allocate its buffers for a chunk.
    reserve_time: Duration,
    /// The engine's settings, the input path settled.
    engine: EngineConfig,
}

/// Opens the finder on `choice.device`, settles the input path (`Auto`: mapped when the finder
/// prefers it; an input that cannot be mapped is then read through a ring the engine
/// allocates), allocates the engine's ring for it (not for a mapped input, which needs none)
/// and the finder's buffers for a chunk.
fn open_device(
    config: &FinderConfig,
    choice: &FinderChoice,
    engine: EngineConfig,
    input: InputPath,
) -> Result<Opened> {
    let t = Instant::now();
    let (mut finder, note) = open_finder(config.clone(), choice.device, choice.threads)?;
    let open_time = t.elapsed();
    let engine = EngineConfig {
        map: match input {
            InputPath::Auto => finder.prefers_mapped_input(),
            InputPath::Read => false,
            InputPath::Map => true,
        },
        ..engine
    };
    let slots = if engine.map {
        None
    } else {
        Some(RingSlots::allocate(finder.as_ref(), engine)?)
    };
    let t = Instant::now();
    finder.reserve(engine.chunk)?;
    let reserve_time = t.elapsed();
    Ok(Opened {
        finder,
        note,
        open_time,
        slots,
        reserve_time,
        engine,
    })
}

/// Reads every frame of `pedestal` into a host pedestal for `config` (what a finder's
/// `push_pedestal` computes, so [`ClusterFinder::set_pedestal`] gives the same state) with
/// `read_threads` threads, its arithmetic on every core when `parallel`; and how long that
/// took. `config.pedestal_frames` must be the input's frame count.
///
/// # Errors
/// The input's errors; [`Error::InvalidParameter`] (`pedestal`) when it delivered another
/// number of frames than it was counted with; `cancel`'s.
pub fn read_pedestal(
    pedestal: &mut Input<'_>,
    config: &FinderConfig,
    read_threads: usize,
    parallel: bool,
    cancel: Cancel<'_>,
) -> Result<(Pedestal, Duration)> {
    let start = Instant::now();
    let (rows, cols) = (config.rows, config.cols);
    let mut host = Pedestal::new(rows, cols, config.pedestal_frames, config.precision)?;
    pedestal.frames.set_read_threads(read_threads);
    // No larger than the pedestal; zeroed by the allocator, so the page faults of its first
    // use are taken by the reading threads, in parallel.
    let chunk = EngineConfig::for_frames(rows, cols)
        .capped(pedestal.len)
        .chunk;
    let (mut buf, mut numbers) = (vec![0u16; chunk * rows * cols], Vec::new());
    let mut pushed = 0u64;
    loop {
        cancel()?;
        numbers.clear();
        let k = pedestal.frames.fill(&mut buf, &mut numbers)?;
        if k == 0 {
            break;
        }
        pushed += k as u64;
        if pushed > pedestal.len {
            break;
        }
        host.push_frames_with(
            Frames::new(&buf[..k * rows * cols], k, rows, cols)?,
            parallel,
        )?;
    }
    if pushed != pedestal.len {
        return Err(Error::param(
            "pedestal",
            format!(
                "{} delivered {pushed} frames, {} when counted (did it change while cluda read it?)",
                pedestal.describe, pedestal.len
            ),
        ));
    }
    Ok((host, start.elapsed()))
}

impl RunTiming {
    /// The `--timing` lines: start-up (device and pedestal side by side), the data phase
    /// (each stage with its bandwidth; the reader and writer threads overlap the finder, so
    /// their busy times add up to more than the phase when the run is overlapped, and the
    /// stage whose busy time is closest to the phase bounds it), and the device's release.
    pub fn lines(&self) -> Vec<String> {
        let ring = match self.ring_ahead {
            Some(t) => format!("then the frame ring {:.3} s", t.as_secs_f64()),
            // Mapped input: no ring, unless the source could not be mapped and the engine
            // allocated one after the start-up.
            None if self.engine.alloc.is_zero() => {
                "(no frame ring: the input is mapped)".to_string()
            }
            None => format!(
                "(the frame ring {:.3} s in the engine, after the start-up)",
                self.engine.alloc.as_secs_f64()
            ),
        };
        let startup = format!(
            "timing: start-up {:.3} s: opening the device {:.3} s {ring}, then the finder's buffers {:.3} s on one thread, the pedestal {:.3} s ({} frames) on another at the same time",
            self.startup.as_secs_f64(),
            self.open.as_secs_f64(),
            self.reserve.as_secs_f64(),
            self.pedestal.as_secs_f64(),
            self.pedestal_frames,
        );
        vec![
            startup,
            self.data_line(),
            format!(
                "timing: releasing the device {:.3} s",
                self.release.as_secs_f64()
            ),
        ]
    }

    /// The data phase's line of [`RunTiming::lines`].
    fn data_line(&self) -> String {
        let gbs = |bytes: u64, t: Duration| {
            if t.is_zero() {
                0.0
            } else {
                bytes as f64 / t.as_secs_f64() / 1e9
            }
        };
        let s = |t: Duration| t.as_secs_f64();
        let stats = &self.engine;
        let frames = stats.frames.max(1) as f64;
        let phase = self.busy;
        let mut line = format!(
            "timing: data phase {:.3} s ({:.2} us/frame); read {:.3} s busy with {} threads ({:.1} GB/s); waited for frames {:.3} s; find {:.3} s ({:.1} GB/s of frames, {:.2} us/frame), of which handing clusters on {:.3} s",
            s(phase),
            s(phase) * 1e6 / frames,
            s(stats.read_busy),
            self.read_threads,
            gbs(stats.read_bytes, stats.read_busy),
            s(stats.waited_for_input),
            s(stats.find),
            gbs(stats.read_bytes, stats.find),
            s(stats.find) * 1e6 / frames,
            s(stats.visit),
        );
        if let Some(w) = &self.write {
            line.push_str(&format!(
                "; write {:.3} s busy in {} threads ({:.1} GB/s per busy thread, {} bytes); waited for the writer {:.3} s",
                s(w.busy),
                w.threads,
                gbs(w.bytes, w.busy),
                w.bytes,
                s(w.waited),
            ));
        }
        line
    }
}

/// The PNG files [`PlotAccumulator::finish`] writes, checked up front by [`check_plot_dir`].
#[cfg(feature = "plot")]
pub const PLOT_FILES: [&str; 4] = [
    "spectrum.png",
    "hitmap.png",
    "pedestal_mean.png",
    "pedestal_noise.png",
];

/// Refuses a cluster file that is one of the PNGs a plot directory `dir` receives
/// ([`PLOT_FILES`]: the plots, renamed into place after the cluster file, would replace it):
/// compared by directory (canonical paths, so links and `..` count) and file name.
///
/// # Errors
/// [`Error::InvalidParameter`] (`out`) naming the file and the plot directory.
#[cfg(feature = "plot")]
pub fn check_not_a_plot(out: &Path, dir: &Path) -> Result<()> {
    let Some(name) = out.file_name() else {
        return Ok(());
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let same_dir = match (std::fs::canonicalize(parent), std::fs::canonicalize(dir)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same_dir && PLOT_FILES.iter().any(|p| name == std::ffi::OsStr::new(p)) {
        return Err(Error::param(
            "out",
            format!(
                "{} is one of the plots --plot {} writes; choose another name or directory",
                out.display(),
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Checks a plot directory before any work: `dir` is a directory (or can be created), none of
/// its PNGs is one of `inputs` or a non-file, none exists unless `overwrite`, and the plot
/// font loads.
///
/// # Errors
/// [`Error::InvalidParameter`] (`plot`) naming what is wrong.
#[cfg(feature = "plot")]
pub fn check_plot_dir(dir: &Path, inputs: &[PathBuf], overwrite: bool) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::param(
                "plot",
                format!("{} exists and is not a directory", dir.display()),
            ));
        }
        Ok(_) => {
            for name in PLOT_FILES {
                crate::io::check_output(&dir.join(name), "plot", inputs)?;
                crate::io::check_overwrite(&dir.join(name), "plot", overwrite)?;
            }
        }
        Err(_) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::param("plot", format!("cannot create {}: {e}", dir.display()))
            })?;
        }
    }
    // Can files be created in it? (The staging directory, removed at once.)
    drop(PlotStage::create(dir, overwrite)?);
    crate::plot::register_font()
}

/// A directory beside the plots' final place that they are drawn into, then renamed from, so
/// an interrupted or failed run leaves no half-drawn PNG; removed (with what is in it) when
/// dropped ([`tempfile::TempDir`]).
#[cfg(feature = "plot")]
struct PlotStage {
    dir: PathBuf,
    stage: tempfile::TempDir,
    /// Replace plot files already there.
    overwrite: bool,
}

#[cfg(feature = "plot")]
impl PlotStage {
    /// Creates `DIR/.cluda-plots.<random>.tmp`; `overwrite`: the commit replaces plot files
    /// already there.
    fn create(dir: &Path, overwrite: bool) -> Result<Self> {
        let stage = tempfile::Builder::new()
            .prefix(".cluda-plots.")
            .suffix(".tmp")
            .tempdir_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            stage,
            overwrite,
        })
    }

    /// Where plots are drawn.
    fn path(&self) -> &Path {
        self.stage.path()
    }

    /// Moves every drawn file into the final directory; returns their final paths. Without
    /// `overwrite` a file there by now (one that appeared during the run) is an error naming
    /// it, never replaced: the rename itself refuses it ([`crate::io::rename_noreplace`]).
    fn commit(&self, drawn: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
        let mut done = Vec::new();
        for p in drawn {
            let Some(name) = p.file_name() else { continue };
            let to = self.dir.join(name);
            if self.overwrite {
                std::fs::rename(&p, &to).map_err(|e| Error::io(&to, e))?;
            } else {
                crate::io::rename_noreplace(&p, &to).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AlreadyExists => crate::io::atomic::appeared(&to),
                    _ => Error::io(&to, e),
                })?;
            }
            done.push(to);
        }
        Ok(done)
    }
}
