//! `cluda stream`: live cluster finding on a detector's ZMQ stream (the library's
//! [`cluda::stream::run`]), with its reports on stderr, one summary line per acquisition on
//! stdout, and optional live plots.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cluda::engine::input::Input;
use cluda::engine::run::read_pedestal;
use cluda::plot::{Histogram, PlotAccumulator, map_png, spectrum_png};
use cluda::stream::{
    Callbacks, FullQueue, PedestalPlan, ReceiverConfig, StreamEvent, StreamSettings,
};
use cluda::{Error, FindOptions, Pedestal, Result};

use super::args::StreamArgs;
use super::find::find_options;
use super::output::print_line;
use super::signals;

/// Runs `cluda stream` until SIGINT (or `--acquisitions`); exits 0 after finishing the current
/// acquisition.
pub fn run(args: &StreamArgs) -> Result<()> {
    if args.out_dir.exists() && !args.out_dir.is_dir() {
        return Err(Error::param(
            "out-dir",
            format!("{} exists and is not a directory", args.out_dir.display()),
        ));
    }
    // Created if missing, and a file must be creatable in it: checked now, not when the first
    // acquisition's file is due.
    cluda::stream::check_out_dir(&args.out_dir)?;
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::param("plot", format!("cannot create {}: {e}", dir.display())))?;
        for name in LIVE_PLOTS {
            cluda::io::check_overwrite(&dir.join(name), "plot", args.overwrite)?;
        }
        if args.eta.is_some() {
            cluda::io::check_overwrite(&dir.join(LIVE_IMAGE), "plot", args.overwrite)?;
        }
        cluda::plot::register_font()?;
    }
    let f = &args.finder;
    let finder = find_options(f);
    let pedestal = match (&args.pedestal, args.dark_acquisitions) {
        (Some(path), _) => PedestalPlan::Fixed(fixed_pedestal(path, finder)?),
        (None, Some(k)) => PedestalPlan::DarkAcquisitions(k),
        (None, None) => PedestalPlan::FirstFrames,
    };
    let mut settings = StreamSettings::new(finder, &args.out_dir);
    settings.pedestal_frames = args.pedestal_frames;
    settings.device = f.device;
    settings.threads = f.threads;
    settings.pedestal = pedestal;
    settings.acquisitions = args.acquisitions;
    settings.chunk = args.chunk as usize;
    settings.slow_sink = Duration::from_micros(args.slow_sink_us);
    settings.sampling = args.sampled;
    if args.eta.is_some() || args.eta_out.is_some() {
        let image = match &args.eta {
            Some(path) => {
                let (axes, cube, _) = cluda::interpolation::files::read_cube(path, None)?;
                let maps = cluda::interpolation::Interpolator::new(axes, &cube, args.maps)?;
                Some((Arc::new(maps), args.subpixels))
            }
            None => None,
        };
        let cube = match &args.eta_out {
            Some(path) => {
                cluda::io::check_output(path, "eta-out", &[])?;
                cluda::io::check_overwrite(path, "eta-out", false)?;
                let kind = cluda::interpolation::EtaKind::Eta2;
                Some((
                    cluda::interpolation::CubeAxes::default_for(kind),
                    path.clone(),
                ))
            }
            None => None,
        };
        settings.imaging = Some(cluda::stream::StreamImaging { image, cube });
    }
    // Bounded (0 ..= 86400) by its parser; a conversion that fails anyway is an error.
    settings.idle_end = seconds("idle-end", args.idle_end)?;
    let (first, more) = args
        .zmq
        .split_first()
        .ok_or_else(|| Error::param("zmq", "no endpoint given"))?;
    let mut config = ReceiverConfig::new(first);
    config.more_endpoints = more.to_vec();
    config.part_window = usize::try_from(args.part_window)
        .map_err(|_| Error::param("part-window", "too large for this machine"))?;
    config.part_wait = Duration::from_millis(args.part_wait_ms);
    if let PedestalPlan::Fixed(p) = &settings.pedestal {
        // The frames' shape is known: a larger message part is not a frame of this stream.
        config.max_message_bytes = ReceiverConfig::message_limit(Some((p.rows(), p.cols())));
    }
    config.queue_frames = args.queue as usize;
    config.full = if args.on_full == "block" {
        FullQueue::Block
    } else {
        FullQueue::Drop
    };
    let stop = signals::stop_flag().unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
    let report: cluda::stream::Reporter = Arc::new(|e: &StreamEvent| match e {
        StreamEvent::Fault { kind, message } => {
            eprintln!("warning: stream: {}: {message}", kind.name())
        }
        StreamEvent::Behind {
            depth,
            capacity,
            dropped,
        } => eprintln!(
            "warning: stream: cluda is falling behind: {depth} of {capacity} frames queued, {dropped} frames dropped in this acquisition so far"
        ),
        StreamEvent::Output(message) => eprintln!("warning: stream: {message}"),
        StreamEvent::Connection(message) => eprintln!("warning: stream: {message}"),
        StreamEvent::Note(message) => eprintln!("note: stream: {message}"),
        StreamEvent::Suppressed(kind) => eprintln!(
            "note: stream: further `{}` reports of this acquisition are left out (its summary line counts them)",
            kind.name()
        ),
    });
    let every = seconds("plot-every", args.plot_every)?;
    let plots = RefCell::new(
        args.plot
            .as_ref()
            .map(|d| LivePlots::new(d, every, args.overwrite)),
    );
    let mut note = |s: &str| eprintln!("note: {s}");
    let mut summary = |s: &cluda::stream::AcquisitionSummary| {
        if let Some(p) = plots.borrow_mut().as_mut() {
            p.finish();
        }
        print_line(&s.to_string())
    };
    let mut frame = |shape: (usize, usize), fc: &cluda::FrameClusters<'_>| {
        if let Some(p) = plots.borrow_mut().as_mut() {
            p.add(shape, fc);
        }
    };
    let mut show = |u: cluda::stream::ImageUpdate| {
        if let Some(p) = plots.borrow_mut().as_mut() {
            p.image(u);
        }
    };
    // With --eta and --plot: image.png refreshed as often as the other plots.
    let image = (args.plot.is_some() && args.eta.is_some()).then_some(cluda::stream::LiveImage {
        every,
        show: &mut show,
    });
    let totals = cluda::stream::run(
        config,
        &settings,
        stop,
        Callbacks {
            report,
            note: &mut note,
            summary: &mut summary,
            frame: &mut frame,
            image,
        },
    )?;
    eprintln!(
        "note: stream: {} acquisitions, {} data frames, {} clusters",
        totals.acquisitions, totals.frames, totals.clusters
    );
    Ok(())
}

/// `value` seconds of option `--name` as a [`Duration`]: an error naming the option, never a
/// panic, for a value no `Duration` holds (negative, not finite, too large).
fn seconds(name: &'static str, value: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|e| Error::param(name, format!("{value:?} seconds: {e}")))
}

/// Reads every frame of a dark-frame file into a pedestal whose window N is their count
/// (the library's [`read_pedestal`], as `cluda find` reads its pedestal).
fn fixed_pedestal(path: &Path, options: FindOptions) -> Result<Pedestal> {
    let (mut input, n) = Input::pedestal(path, &signals::check)?;
    let (rows, cols) = (input.frames.rows(), input.frames.cols());
    let config = options.config(rows, cols, n);
    let (pedestal, _) = read_pedestal(
        &mut input,
        &config,
        cluda::io::readahead::read_threads(),
        true,
        &signals::check,
    )?;
    if let Some(w) = input.gap_warning() {
        eprintln!("warning: {w}");
    }
    eprintln!(
        "note: pedestal: {} frames of {rows} x {cols} from {}",
        n, input.describe
    );
    Ok(pedestal)
}

/// What one refresh of the plots draws: a snapshot of the accumulator.
struct Snapshot {
    spectrum: Histogram,
    hits: Vec<f64>,
    rows: usize,
    cols: usize,
    frames: u64,
}

/// What the drawer thread draws.
enum Drawing {
    /// `spectrum.png` and `hitmap.png`.
    Plots(Snapshot),
    /// `image.png`: a copy of the acquisition's sub-pixel image (`--eta`).
    Image(cluda::interpolation::SubpixelImage),
}

/// Spectrum and hit map of the current acquisition, refreshed every `every` seconds and when
/// it ends, and with `--eta` its sub-pixel image, copied as often by the library
/// ([`cluda::stream::LiveImage`]) and drawn as it comes. Drawing happens on a thread of its
/// own from a snapshot, so the finder is never held up by it (a refresh is skipped while the
/// drawer is still busy with the last ones); each PNG is written under a temporary name and
/// renamed, so a viewer never sees half a file.
struct LivePlots {
    every: Duration,
    acc: Option<PlotAccumulator>,
    shape: (usize, usize),
    last: Instant,
    tx: Option<SyncSender<Drawing>>,
    drawer: Option<JoinHandle<()>>,
}

impl LivePlots {
    /// Starts the drawer thread for `dir`; `overwrite`: plot files there that this run did
    /// not write may be replaced.
    fn new(dir: &Path, every: Duration, overwrite: bool) -> Self {
        // Room for one of each: a refresh of the plots and an image copy that come close
        // together are both drawn.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Drawing>(2);
        let dir = dir.to_path_buf();
        let drawer = std::thread::Builder::new()
            .name("cluda-plots".into())
            .spawn(move || {
                let mut owned = Owned::new();
                while let Ok(d) = rx.recv() {
                    match d {
                        Drawing::Plots(s) => draw(&dir, &s, overwrite, &mut owned),
                        Drawing::Image(img) => draw_image(&dir, &img, overwrite, &mut owned),
                    }
                }
            })
            .map_err(|e| eprintln!("warning: stream: no plot thread ({e}); plots are off"))
            .ok();
        Self {
            every,
            acc: None,
            shape: (0, 0),
            last: Instant::now(),
            tx: drawer.as_ref().map(|_| tx),
            drawer,
        }
    }

    fn add(&mut self, shape: (usize, usize), fc: &cluda::FrameClusters<'_>) {
        if self.acc.is_none() || self.shape != shape {
            self.acc = Some(PlotAccumulator::new(shape.0, shape.1));
            self.shape = shape;
            self.last = Instant::now();
        }
        if let Some(a) = self.acc.as_mut() {
            a.add(fc);
        }
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            if let (Some(tx), Some(s)) = (&self.tx, self.snapshot()) {
                // Busy drawing the last ones: this refresh is skipped.
                let _ = tx.try_send(Drawing::Plots(s));
            }
        }
    }

    /// A copy of the acquisition's sub-pixel image: drawn unless the drawer is busy; the
    /// final one always (waiting for the drawer), before the acquisition's final plots.
    fn image(&mut self, u: cluda::stream::ImageUpdate) {
        if let Some(tx) = &self.tx {
            if u.done {
                let _ = tx.send(Drawing::Image(u.image));
            } else {
                let _ = tx.try_send(Drawing::Image(u.image));
            }
        }
    }

    /// The acquisition ended: its final plots are drawn (waiting for the drawer).
    fn finish(&mut self) {
        if let (Some(tx), Some(s)) = (&self.tx, self.snapshot()) {
            let _ = tx.send(Drawing::Plots(s));
        }
        self.acc = None;
    }

    fn snapshot(&self) -> Option<Snapshot> {
        let acc = self.acc.as_ref()?;
        Some(Snapshot {
            spectrum: acc.spectrum(),
            hits: acc.hits().iter().map(|&h| h as f64).collect(),
            rows: self.shape.0,
            cols: self.shape.1,
            frames: acc.frames(),
        })
    }
}

impl Drop for LivePlots {
    fn drop(&mut self) {
        // Closing the channel ends the drawer once it has drawn what it holds.
        self.tx = None;
        if let Some(d) = self.drawer.take() {
            let _ = d.join();
        }
    }
}

/// Draws one PNG at a path.
type Draw<'a> = dyn Fn(&Path) -> Result<()> + 'a;

/// The files the live plots write into the plot directory.
const LIVE_PLOTS: [&str; 2] = ["spectrum.png", "hitmap.png"];

/// The live sub-pixel image's file in the plot directory (`--eta`).
const LIVE_IMAGE: &str = "image.png";

/// The plot files this run put in place, by name, with the (device, inode) each got: a
/// refresh replaces its own file of this run, never one another program put there.
type Owned = std::collections::HashMap<&'static str, (u64, u64)>;

/// Draws `spectrum.png` and `hitmap.png` of a snapshot into `dir`, each under a temporary name
/// renamed into place ([`place`]); a failure is a warning (the stream goes on).
fn draw(dir: &Path, s: &Snapshot, overwrite: bool, owned: &mut Owned) {
    let title = format!("Cluster sums: {} frames so far", s.frames);
    let draws: [(&str, Box<Draw<'_>>); 2] = [
        (
            "spectrum.png",
            Box::new(|p: &Path| spectrum_png(p, &s.spectrum, &title, false)),
        ),
        (
            "hitmap.png",
            Box::new(|p: &Path| {
                map_png(
                    p,
                    s.rows,
                    s.cols,
                    &s.hits,
                    "Hit map (cluster centres per pixel)",
                    "clusters",
                )
            }),
        ),
    ];
    for (name, draw) in draws {
        let done = dir.join(name);
        if let Err(e) = place(dir, name, &*draw, overwrite, owned) {
            eprintln!("warning: stream: plot {} not drawn: {e}", done.display());
        }
    }
}

/// Draws `image.png` of a copy of the sub-pixel image into `dir` as `cluda image --plot` draws
/// it ([`cluda::plot::subpixel_png`]: binned to at most 2048 bins a side), renamed into place
/// ([`place`]); a failure is a warning (the stream goes on).
fn draw_image(
    dir: &Path,
    image: &cluda::interpolation::SubpixelImage,
    overwrite: bool,
    owned: &mut Owned,
) {
    // subpixel_png puts its own temporary file over `place`'s, which is then renamed into
    // place by `place`'s rules.
    let draw = |p: &Path| cluda::plot::subpixel_png(p, image, true);
    if let Err(e) = place(dir, LIVE_IMAGE, &draw, overwrite, owned) {
        eprintln!(
            "warning: stream: plot {} not drawn: {e}",
            dir.join(LIVE_IMAGE).display()
        );
    }
}

/// Draws `dir/name` under a fresh temporary name (removed on an error) and renames it into
/// place: over the file there only with `overwrite` or when it is this run's own (`owned`),
/// else by a rename that refuses an existing name, so a file another program put there is
/// never replaced.
fn place(
    dir: &Path,
    name: &'static str,
    draw: &Draw<'_>,
    overwrite: bool,
    owned: &mut Owned,
) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let done = dir.join(name);
    let prefix = format!(".{name}.{}.", std::process::id());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp.png");
    // A plot gets the mode any new file gets (0o666 less the umask), not a temporary file's.
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    draw(tmp.path())?;
    let m = std::fs::symlink_metadata(tmp.path()).map_err(|e| Error::io(tmp.path(), e))?;
    let id = (m.dev(), m.ino());
    let ours = owned
        .get(name)
        .is_some_and(|&o| std::fs::symlink_metadata(&done).is_ok_and(|m| (m.dev(), m.ino()) == o));
    if overwrite || ours {
        tmp.persist(&done).map_err(|e| Error::io(&done, e.error))?;
    } else {
        tmp.persist_noclobber(&done).map_err(|e| match e.error.kind() {
            std::io::ErrorKind::AlreadyExists => Error::param(
                "plot",
                format!(
                    "{} exists and was not written by this run; it is not replaced unless you allow it (--overwrite)",
                    done.display()
                ),
            ),
            _ => Error::io(&done, e.error),
        })?;
    }
    owned.insert(name, id);
    Ok(())
}
