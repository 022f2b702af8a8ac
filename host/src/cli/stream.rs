//! `cluda stream`: live cluster finding on a detector's ZMQ stream (the library's
//! [`cluda::stream::run`]), with its reports on stderr, one summary line per acquisition on
//! stdout, and optional live plots.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use cluda::engine::input::Input;
use cluda::engine::run::read_pedestal;
use cluda::stream::live_plots::{LIVE_IMAGE, LIVE_PLOTS, LivePlots};
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
    let plots = RefCell::new(args.plot.as_ref().map(|d| {
        LivePlots::new(
            d,
            every,
            args.overwrite,
            Arc::new(|w: &str| eprintln!("warning: stream: {w}")),
        )
    }));
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
