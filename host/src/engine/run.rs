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

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::feeding::{FedFinder, open_finder};
use super::input::{Cancel, Input};
use super::session::RingPlan;
use super::sink::FnSink;
use super::{EngineConfig, RingSlots};
use crate::cluster::FrameClusters;
use crate::config::{FindOptions, FinderConfig};
use crate::error::{Error, Result};
use crate::finder::select::DeviceChoice;
use crate::frames::Frames;
use crate::io::Claim;
use crate::pedestal::Pedestal;

pub use super::outputs::InputOutputs;
#[cfg(feature = "plot")]
pub use super::outputs::{PLOT_FILES, PlotOutput, check_not_a_plot, check_plot_dir};
pub use super::report::{RunReport, RunTiming};
pub use super::session::Session;

/// How the data frames reach the finder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputPath {
    /// What the finder reads fastest ([`FedFinder::prefers_mapped_input`]): mapped for the
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

/// Everything about a run but its inputs and the caller's visitor.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The finder.
    pub finder: FinderChoice,
    /// How data frames reach the finder.
    pub input: InputPath,
    /// Threads that read each chunk (`None`: what the finder asks for,
    /// [`FedFinder::read_threads`]; for the pedestal, every core up to 16).
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
            ring: RingPlan::Kept,
            read_threads: options.read_threads,
            rows,
            cols,
            note,
            warnings: pedestal.gap_warning().into_iter().collect(),
            scratch: Vec::new(),
        })
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
            &mut FnSink(|_, fc: &FrameClusters<'_>| {
                if (dy, dx) == (0, 0) {
                    visit(fc.frame.get(), fc)
                } else {
                    visit(fc.frame.get(), &fc.shifted_into(dy, dx, &mut shifted)?)
                }
            }),
            &mut |_, r| {
                report = Some(r);
                Ok(())
            },
        )?;
        report.unwrap_or_else(|| Err(Error::Internal("the session ended no input".into())))
    }
}

/// A finder opened on the device thread, with the ring it allocated.
struct Opened {
    finder: Box<dyn FedFinder + Send>,
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
/// `push_pedestal` computes, so [`crate::ClusterFinder::set_pedestal`] gives the same state) with
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
