//! `cluda find`, and the find path it shares with `cluda demo`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cluda::engine::write_behind::WriteStats;
use cluda::engine::{EngineConfig, EngineStats, RingSlots, find_stream_with};
use cluda::finder::select::open_finder;
use cluda::io::{AtomicFile, ClusterFileWriter, check_output, input_files};
use cluda::plot::{PlotAccumulator, SpectrumOptions};
use cluda::{ClusterFinder, Error, FinderConfig, Frames, Pedestal, Result};

use super::args::{FindArgs, FinderArgs};
use super::inputs::{Input, chunk_frames};
use super::progress::frames_bar;
use super::signals;
use super::summary::{Spectrum, Summary};

/// Runs `cluda find`: prints the summary line on stdout. Every input and output is checked
/// before any frame is read: inputs must be regular files (for a raw acquisition the master
/// and every data file), and no output may be one of them.
pub fn run(args: &FindArgs) -> Result<()> {
    let mut inputs = input_files(&args.pedestal)?;
    inputs.extend(input_files(&args.data)?);
    if let Some(out) = &args.out {
        check_output(out, "out", &inputs)?;
        // Can a file be created there? (A temporary one, removed at once.)
        drop(AtomicFile::create(out)?);
    }
    if let Some(dir) = &args.plot {
        check_plot_dir(dir, &inputs)?;
    }
    let mut pedestal = Input::count_exactly(&args.pedestal, "pedestal")?;
    let mut data = Input::open(&args.data, "data")?;
    let summary = find_clusters(
        &args.finder,
        &mut pedestal,
        &mut data,
        Outputs {
            clusters: args.out.as_deref(),
            spectrum: None,
            plots: args.plot.as_deref(),
            plot_options: args.spectrum.options(),
        },
    )?;
    print_line(&summary.to_string())
}

/// What [`find_clusters`] writes besides the summary.
#[derive(Default)]
pub struct Outputs<'a> {
    /// The cluster file (aare's layout) to write.
    pub clusters: Option<&'a Path>,
    /// A text spectrum to add every cluster sum to.
    pub spectrum: Option<&'a mut Spectrum>,
    /// A directory for the PNG plots ([`PlotAccumulator::finish`]).
    pub plots: Option<&'a Path>,
    /// How the PNG spectrum is binned and drawn.
    pub plot_options: SpectrumOptions,
}

/// The PNG files [`PlotAccumulator::finish`] writes, checked up front.
const PLOT_FILES: [&str; 4] = [
    "spectrum.png",
    "hitmap.png",
    "pedestal_mean.png",
    "pedestal_noise.png",
];

/// Checks `--plot DIR` before any work: DIR is a directory (or can be created), none of its
/// PNGs is an input or a non-file, and the plot font loads.
pub fn check_plot_dir(dir: &Path, inputs: &[PathBuf]) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(Error::param(
                "plot",
                format!("{} exists and is not a directory", dir.display()),
            ));
        }
        Ok(_) => {
            for name in PLOT_FILES {
                check_output(&dir.join(name), "plot", inputs)?;
            }
        }
        Err(_) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::param("plot", format!("cannot create {}: {e}", dir.display()))
            })?;
        }
    }
    // Can files be created in it? (The staging directory, removed at once.)
    drop(PlotStage::create(dir)?);
    cluda::plot::register_font()
}

/// A directory beside the plots' final place that they are drawn into, then renamed from, so
/// an interrupted or failed run leaves no half-drawn PNG; removed (with what is in it) when
/// dropped ([`tempfile::TempDir`]).
struct PlotStage {
    dir: PathBuf,
    stage: tempfile::TempDir,
}

impl PlotStage {
    /// Creates `DIR/.cluda-plots.<random>.tmp`.
    fn create(dir: &Path) -> Result<Self> {
        let stage = tempfile::Builder::new()
            .prefix(".cluda-plots.")
            .suffix(".tmp")
            .tempdir_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            stage,
        })
    }

    /// The staging directory the plots are drawn into.
    fn path(&self) -> &Path {
        self.stage.path()
    }

    /// Moves every drawn file into the final directory; returns their final paths.
    fn commit(&self, drawn: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
        let mut done = Vec::new();
        for p in drawn {
            let Some(name) = p.file_name() else { continue };
            let to = self.dir.join(name);
            std::fs::rename(&p, &to).map_err(|e| Error::io(&to, e))?;
            done.push(to);
        }
        Ok(done)
    }
}

/// Says on stderr that `path` was not written when `result` is an error (the writer removed
/// its temporary file); passes `result` on.
pub fn note_unwritten<T>(path: &Path, result: Result<T>) -> Result<T> {
    if result.is_err() {
        eprintln!(
            "note: {} was not written (its unfinished temporary file was removed)",
            path.display()
        );
    }
    result
}

/// Says on stderr that an output was not written, when dropped before [`Pending::done`]: the
/// error path of a run that had started an output (its temporary file is removed by its
/// writer).
struct Pending<'a>(Option<&'a Path>);

impl Pending<'_> {
    fn done(mut self) {
        self.0 = None;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            eprintln!(
                "note: {} was not written (its unfinished temporary file was removed)",
                p.display()
            );
        }
    }
}

/// Prints a line on stdout; a closed stdout is an error, not a panic.
pub fn print_line(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("<stdout>", e))
}

/// Pushes every frame of `pedestal` into a new finder's pedestal (its window N is their
/// count), then finds the clusters of every frame of `data` a chunk at a time, writing them to
/// the cluster file (with the input's frame numbers: a raw acquisition's header frame numbers,
/// else counting from 0), adding their sums to the spectrum and the plots as they stream past.
/// Nothing holds more than one chunk of frames or clusters. Missing or partial frames of a
/// raw input are reported on stderr as a warning.
pub fn find_clusters(
    args: &FinderArgs,
    pedestal: &mut Input<'_>,
    data: &mut Input<'_>,
    mut outputs: Outputs<'_>,
) -> Result<Summary> {
    let (rows, cols) = (pedestal.frames.rows(), pedestal.frames.cols());
    if (data.frames.rows(), data.frames.cols()) != (rows, cols) {
        return Err(Error::shape(
            format!("{} against {}", data.describe, pedestal.describe),
            format!("{rows} x {cols} frames (as in the pedestal)"),
            format!("{} x {} frames", data.frames.rows(), data.frames.cols()),
        ));
    }
    if pedestal.len == 0 {
        return Err(Error::param(
            "pedestal",
            format!(
                "{} holds no frames; the pedestal needs at least one",
                pedestal.describe
            ),
        ));
    }
    let n = u32::try_from(pedestal.len).map_err(|_| {
        Error::param(
            "pedestal",
            format!(
                "{} holds {} frames, more than a pedestal window of at most {} frames",
                pedestal.describe,
                pedestal.len,
                u32::MAX
            ),
        )
    })?;
    let config = FinderConfig::new(rows, cols)
        .size(args.options.cluster)
        .n_sigma(args.options.nsigma)
        .pedestal_frames(n)
        .threshold(args.options.threshold)
        .precision(args.options.precision);
    let engine = EngineConfig {
        map: args.input == "map",
        ..EngineConfig::for_frames(rows, cols).capped(data.len)
    };
    // Start-up: the device opens (and allocates the frame ring: page-locked memory on a GPU)
    // on a thread of its own while the pedestal frames are read and pushed into a host
    // pedestal here; on a GPU the two take about as long, so start-up costs the longer one.
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let (opened, host_pedestal) = std::thread::scope(|s| -> Result<_> {
        let opener = std::thread::Builder::new()
            .name("cluda-open".into())
            .spawn_scoped(s, || {
                let r = open_device(&config, args, engine);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
            .map_err(|e| Error::io("<device thread>", e))?;
        let host_pedestal = read_pedestal(pedestal, &config, args, &stop);
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
    } = opened?;
    let (host_pedestal, pedestal_time) = host_pedestal?
        .ok_or_else(|| Error::Internal("the pedestal stopped without a device error".into()))?;
    eprintln!("note: {note}");
    finder.set_pedestal(host_pedestal)?;
    let startup = started.elapsed();
    let read_threads = args.read_threads.unwrap_or_else(|| finder.read_threads());
    data.frames.set_read_threads(read_threads);
    let ring_ahead = slots.as_ref().map(RingSlots::alloc_time);
    let stage = outputs.plots.map(PlotStage::create).transpose()?;
    let mut writer = outputs
        .clusters
        .map(ClusterFileWriter::create)
        .transpose()?;
    let pending = Pending(outputs.clusters);
    let mut plot = outputs
        .plots
        .map(|_| PlotAccumulator::with_options(rows, cols, &outputs.plot_options))
        .transpose()?;

    let bar = frames_bar(data.len, "finding");
    let mut clusters = 0u64;
    let describe = &data.describe;
    let stats = find_stream_with(
        finder.as_mut(),
        data.frames.as_mut(),
        engine,
        slots,
        &mut |number, fc| {
            signals::check()?;
            clusters += fc.len() as u64;
            if let Some(w) = writer.as_mut() {
                let number = i32::try_from(number).map_err(|_| {
                    Error::param(
                        "out",
                        format!(
                            "frame number {number} of {describe} does not fit the cluster file's i32 frame numbers"
                        ),
                    )
                })?;
                w.write_frame(number, &fc)?;
            }
            if let Some(s) = outputs.spectrum.as_deref_mut() {
                for c in fc.iter() {
                    s.add(c.sum());
                }
            }
            if let Some(p) = plot.as_mut() {
                p.add(&fc);
            }
            bar.inc(1);
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    signals::check()?;
    let start = Instant::now();
    let written = writer.map(|w| w.commit()).transpose()?;
    let busy = stats.wall + start.elapsed();
    if args.timing {
        let bytes = written.as_ref().map_or(0, |(_, w)| w.bytes);
        let ring = match ring_ahead {
            Some(t) => format!("then the frame ring {:.3} s", t.as_secs_f64()),
            // Mapped input: no ring, unless the source could not be mapped and the engine
            // allocated one after the start-up.
            None if stats.alloc.is_zero() => "(no frame ring: the input is mapped)".to_string(),
            None => format!(
                "(the frame ring {:.3} s in the engine, after the start-up)",
                stats.alloc.as_secs_f64()
            ),
        };
        eprintln!(
            "timing: start-up {:.3} s: opening the device {:.3} s {ring}, then the finder's buffers {:.3} s on one thread, the pedestal {:.3} s ({} frames) on another at the same time",
            startup.as_secs_f64(),
            open_time.as_secs_f64(),
            reserve_time.as_secs_f64(),
            pedestal_time.as_secs_f64(),
            pedestal.len,
        );
        eprintln!(
            "{}",
            timing_line(
                &stats,
                data.frames.read_threads(),
                written.as_ref().map(|(_, w)| w),
                busy,
                bytes
            )
        );
    }
    if let (Some(p), Some(stage)) = (plot, stage.as_ref()) {
        let drawn = p.finish(&finder.pedestal()?, stage.path())?;
        signals::check()?;
        for path in stage.commit(drawn)? {
            eprintln!("wrote {}", path.display());
        }
    }
    pending.done();
    warn_gaps(data);
    let device = finder.device();
    // Releasing the device (its memory, the context) is part of the command's wall time.
    let released = Instant::now();
    drop(finder);
    if args.timing {
        eprintln!(
            "timing: releasing the device {:.3} s",
            released.elapsed().as_secs_f64()
        );
    }
    Ok(Summary {
        frames: stats.frames,
        clusters,
        seconds: busy.as_secs_f64(),
        device: device.split_whitespace().next().unwrap_or("?").to_string(),
        precision: args.options.precision.name(),
    })
}

/// A finder opened on the device thread, with the ring it allocated.
struct Opened {
    finder: Box<dyn ClusterFinder + Send>,
    note: String,
    open_time: Duration,
    slots: Option<RingSlots>,
    /// Time the finder took to allocate its buffers for a chunk.
    reserve_time: Duration,
}

/// Opens the finder on `args.options.device`, allocates the engine's ring for it (not for a mapped
/// input, which needs none) and the finder's buffers for a chunk.
fn open_device(config: &FinderConfig, args: &FinderArgs, engine: EngineConfig) -> Result<Opened> {
    let t = Instant::now();
    let (mut finder, note) =
        open_finder(config.clone(), args.options.device, args.options.threads)?;
    let open_time = t.elapsed();
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
    })
}

/// Reads every frame of `pedestal` into a host pedestal for `config` (what a finder's
/// `push_pedestal` computes, so [`ClusterFinder::set_pedestal`] gives the same state), with
/// every core reading (nothing else runs yet) unless `--read-threads` says otherwise; and how
/// long that took. `None` when `stop` was raised (the device failed to open).
fn read_pedestal(
    pedestal: &mut Input<'_>,
    config: &FinderConfig,
    args: &FinderArgs,
    stop: &AtomicBool,
) -> Result<Option<(Pedestal, Duration)>> {
    let start = Instant::now();
    let (rows, cols) = (config.rows, config.cols);
    let mut host = Pedestal::new(rows, cols, config.pedestal_frames, config.precision)?;
    pedestal.frames.set_read_threads(
        args.read_threads
            .unwrap_or_else(cluda::engine::read_threads),
    );
    // A CPU finder asked for one thread does not start rayon's pool for its pedestal either.
    let parallel = args.options.threads != Some(1);
    // No larger than the pedestal; zeroed by the allocator, so the page faults of its first
    // use are taken by the reading threads, in parallel.
    let chunk = chunk_frames(rows, cols).min(usize::try_from(pedestal.len).unwrap_or(usize::MAX));
    let (mut buf, mut numbers) = (vec![0u16; chunk.max(1) * rows * cols], Vec::new());
    let bar = frames_bar(pedestal.len, "pedestal");
    let mut pushed = 0u64;
    loop {
        signals::check()?;
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
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
        bar.inc(k as u64);
    }
    bar.finish_and_clear();
    if pushed != pedestal.len {
        return Err(Error::param(
            "pedestal",
            format!(
                "{} delivered {pushed} frames, {} when counted (did it change while cluda read it?)",
                pedestal.describe, pedestal.len
            ),
        ));
    }
    warn_gaps(pedestal);
    Ok(Some((host, start.elapsed())))
}

/// Prints a raw input's gap report on stderr when frames were missing, partial or truncated.
fn warn_gaps(input: &Input<'_>) {
    if let Some(g) = input.frames.gaps().filter(|g| !g.is_clean()) {
        eprintln!("warning: {}: {}", input.describe, g.summary());
    }
}

/// The `--timing` line: where the data phase went, each stage with its bandwidth. The reader
/// and writer threads overlap the finder, so their busy times add up to more than the phase
/// when the run is overlapped; the stage whose busy time is closest to the phase bounds it.
fn timing_line(
    stats: &EngineStats,
    read_threads: usize,
    write: Option<&WriteStats>,
    phase: Duration,
    written: u64,
) -> String {
    let gbs = |bytes: u64, t: Duration| {
        if t.is_zero() {
            0.0
        } else {
            bytes as f64 / t.as_secs_f64() / 1e9
        }
    };
    let s = |t: Duration| t.as_secs_f64();
    let frames = stats.frames.max(1) as f64;
    let mut line = format!(
        "timing: data phase {:.3} s ({:.2} us/frame); read {:.3} s busy with {read_threads} threads ({:.1} GB/s); waited for frames {:.3} s; find {:.3} s ({:.1} GB/s of frames, {:.2} us/frame), of which handing clusters on {:.3} s",
        s(phase),
        s(phase) * 1e6 / frames,
        s(stats.read_busy),
        gbs(stats.read_bytes, stats.read_busy),
        s(stats.waited_for_input),
        s(stats.find),
        gbs(stats.read_bytes, stats.find),
        s(stats.find) * 1e6 / frames,
        s(stats.visit),
    );
    if let Some(w) = write {
        line.push_str(&format!(
            "; write {:.3} s busy in {} threads ({:.1} GB/s per busy thread, {written} bytes); waited for the writer {:.3} s",
            s(w.busy),
            w.threads,
            gbs(w.bytes, w.busy),
            s(w.waited),
        ));
    }
    line
}
