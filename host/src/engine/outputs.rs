//! What each input of a [`super::run::Session`] writes itself: its cluster file (aare's
//! layout, under a temporary name renamed when whole) and its plots (drawn into a staging
//! directory, renamed into place when the input ends). `SessionInputs` are the engine's
//! events of a session's run: they open an input's outputs when it begins, write each
//! frame, commit when it ends, tell the caller's [`Sink`] in the same order, and hand each
//! input's [`RunReport`] on.

#[cfg(feature = "plot")]
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

use super::EngineStats;
use super::input::Cancel;
use super::report::{RunReport, RunTiming};
use super::sink::{InputEvents, Sink};
use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::io::write_behind::{DEFAULT_WRITE_THREADS, WriteBehind};
use crate::io::{AtomicFile, Claim, ClusterFileWriter};
use crate::pedestal::Pedestal;
#[cfg(feature = "plot")]
use crate::plot::{PlotAccumulator, SpectrumOptions};

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

/// What one input of a [`super::run::Session`] writes.
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

/// The outputs of the input being found, opened when it began.
struct Current {
    writer: Option<ClusterFileWriter<WriteBehind<AtomicFile>>>,
    #[cfg(feature = "plot")]
    plot: Option<(PlotAccumulator, PlotStage)>,
    clusters: u64,
}

/// The events of a session's run of inputs ([`super::find_streams`]). Input `k` writes
/// `outputs(k)` and starts from `pedestal`, unless `carry` (or it is the run's first input:
/// it starts from where the session is); the caller's `sink` hears begin, each frame, end
/// (or abandon) after the session's own outputs; `done(k, report)` receives each input's
/// report or the error that failed it. `cancel` is asked at every event.
pub(super) struct SessionInputs<'a> {
    pub(super) cancel: Cancel<'a>,
    pub(super) carry: bool,
    pub(super) pedestal: &'a Pedestal,
    pub(super) outputs: &'a mut dyn FnMut(usize) -> Result<InputOutputs>,
    pub(super) sink: &'a mut dyn Sink,
    pub(super) done: &'a mut dyn FnMut(usize, Result<RunReport>) -> Result<()>,
    /// Each input as errors name it.
    pub(super) describe: Vec<String>,
    /// Where each input's frames lie on the detector (row, column of their corner: a raw
    /// acquisition with a receiver ROI, else 0, 0): its cluster file is written in detector
    /// coordinates; plots and the sink see the frames' own.
    pub(super) origins: Vec<(usize, usize)>,
    /// Scratch for clusters moved into detector coordinates.
    shifted: Vec<u32>,
    /// Start-up timing, for the first input's report.
    pub(super) startup: RunTiming,
    /// Threads that read each chunk.
    pub(super) read_threads: usize,
    /// The frame shape (the plots').
    #[cfg_attr(not(feature = "plot"), allow(dead_code))]
    pub(super) shape: (usize, usize),
    /// Inputs begun so far.
    pub(super) begun: usize,
    current: Option<Current>,
}

impl<'a> SessionInputs<'a> {
    /// The events of a run whose other fields the caller sets; no input begun yet.
    pub(super) fn new(
        cancel: Cancel<'a>,
        pedestal: &'a Pedestal,
        sink: &'a mut dyn Sink,
        outputs: &'a mut dyn FnMut(usize) -> Result<InputOutputs>,
        done: &'a mut dyn FnMut(usize, Result<RunReport>) -> Result<()>,
    ) -> Self {
        Self {
            cancel,
            carry: false,
            pedestal,
            outputs,
            sink,
            done,
            describe: Vec::new(),
            origins: Vec::new(),
            shifted: Vec::new(),
            startup: RunTiming::default(),
            read_threads: 0,
            shape: (0, 0),
            begun: 0,
            current: None,
        }
    }

    /// Input `k`'s report: its outputs committed, the sink ended.
    fn report(
        &mut self,
        finder: &mut dyn ClusterFinder,
        k: usize,
        current: Option<Current>,
        stats: EngineStats,
    ) -> Result<RunReport> {
        (self.cancel)()?;
        let Some(c) = current else {
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
            (self.cancel)()?;
            plots = stage.commit(drawn)?;
        }
        let timing = if k == 0 {
            self.startup.clone()
        } else {
            RunTiming::default()
        };
        self.sink.end(k, finder)?;
        Ok(RunReport {
            frames: stats.frames,
            clusters: c.clusters,
            device: finder.device(),
            device_note: String::new(),
            timing: RunTiming {
                engine: stats,
                read_threads: self.read_threads,
                write: written.as_ref().map(|(_, w)| *w),
                busy,
                ..timing
            },
            // Gap reports are known once the input was read to its end: the session gathers
            // them ([`super::run::Session::take_warnings`]).
            warnings: Vec::new(),
            cluster_file: written.map(|(p, _)| p),
            plots,
        })
    }
}

impl InputEvents for SessionInputs<'_> {
    fn begin(&mut self, finder: &mut dyn ClusterFinder, k: usize) -> Result<()> {
        (self.cancel)()?;
        if self.begun > 0 && !self.carry {
            finder.set_pedestal(self.pedestal.clone())?;
        }
        self.begun += 1;
        let outputs = (self.outputs)(k)?;
        let writer = outputs
            .cluster_file
            .as_deref()
            .map(|p| ClusterFileWriter::create_claiming(p, DEFAULT_WRITE_THREADS, outputs.claim))
            .transpose()?;
        #[cfg(feature = "plot")]
        let plot = match &outputs.plots {
            Some(p) => Some((
                PlotAccumulator::with_options(self.shape.0, self.shape.1, &p.options)?,
                PlotStage::create(&p.dir, p.overwrite)?,
            )),
            None => None,
        };
        self.current = Some(Current {
            writer,
            #[cfg(feature = "plot")]
            plot,
            clusters: 0,
        });
        self.sink.begin(k, finder)
    }

    fn frame(&mut self, k: usize, fc: FrameClusters<'_>) -> Result<()> {
        (self.cancel)()?;
        let Some(c) = self.current.as_mut() else {
            return Err(Error::Internal("a frame before its input began".into()));
        };
        c.clusters += fc.len() as u64;
        if let Some(w) = c.writer.as_mut() {
            let describe = self.describe.get(k).map_or("the input", String::as_str);
            let n = fc.frame.to_file("out", describe)?;
            match self.origins.get(k).copied().unwrap_or((0, 0)) {
                (0, 0) => w.write_frame(n, &fc)?,
                (dy, dx) => w.write_frame(n, &fc.shifted_into(dy, dx, &mut self.shifted)?)?,
            }
        }
        #[cfg(feature = "plot")]
        if let Some((p, _)) = c.plot.as_mut() {
            p.add(&fc);
        }
        self.sink.frame(k, &fc)
    }

    fn end(
        &mut self,
        finder: &mut dyn ClusterFinder,
        k: usize,
        result: Result<EngineStats>,
    ) -> Result<()> {
        let current = self.current.take();
        let report = result.and_then(|stats| self.report(finder, k, current, stats));
        if report.is_err() {
            self.sink.abandon(k, finder);
        }
        (self.done)(k, report)
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
        Ok(Self {
            dir: dir.to_path_buf(),
            stage: crate::io::staged::stage_in(dir, ".cluda-plots.")?,
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
