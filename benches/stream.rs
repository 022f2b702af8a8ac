//! Live cluster finding on a ZMQ stream, measured: `replay` -> `stream` over TCP loopback against
//! a bare ZMQ receive loop that only counts frames, in the same run.
//!
//! `cargo bench --bench stream -- [--frames 200000] [--distinct 1000] [--sizes 3,9]
//!  [--device auto|gpu|cpu] [--rows 400] [--cols 400] [--fraction 0.9] [--tmp DIR] [--out DIR]
//!  [--sections endpoint,parts,back-to-back] [--back-to-back 20x1000] [--parts 2]
//!  [--live eta,eta-view,eta-out|none]`
//!
//! Everything runs in this process through the library calls `cluda replay` and `cluda stream`
//! make (the commands only parse their arguments around them): the publisher
//! ([`cluda::stream::replay`] on an XPUB socket, as slsReceiver's PUB on the wire) on a thread,
//! the receiver ([`cluda::stream::run`]: SUB socket, receiving thread, queue, engine, finder,
//! cluster file) on the main thread. `--distinct` generated frames are sent over and over as one
//! acquisition of `--frames` frames, numbered 0, 1, 2, ... (the data does not have to fit in
//! memory or on disk); the pedestal is 1000 dark frames given up front, so every frame is a
//! data frame. Per cluster size:
//!
//! 1. `bare`: the publisher as fast as the receiver takes the frames (`ZMQ_XPUB_NODROP`), the
//!    receiver a SUB socket that receives both parts of every message and counts them.
//! 2. `stream-max`: the same publisher, `cluda stream` with `--on-full block`: its sustained
//!    frames/s, comparable to the bare loop's (the goal is at least 90 % of it).
//! 3. `stream-rate`: the publisher at a fixed `--fraction` of the bare loop's rate, dropping at
//!    its high-water mark as slsReceiver does, `cluda stream` with its defaults (dropping when
//!    its queue is full): the frames dropped and missing at that rate (the goal is 0) and
//!    whether it kept up (processed at least 95 % of the rate sent: with fewer frames than its
//!    queue holds, a stream that falls behind would lose nothing and still not keep up).
//!
//! 4. `stream-max --eta`, `stream-max --eta --plot` and `stream-max --eta-out` (`--live`, all
//!    by default): `stream-max` with eta interpolation live (`StreamSettings::imaging`):
//!    `--eta CUBE --subpixels 4` (default maps; the cube made once up front per size, as
//!    `cluda eta` makes it, from the generated flat field's clusters on the CPU finder), a
//!    sub-pixel image per acquisition beside its cluster file; the same with a live view of
//!    the image (`eta-view`: a copy of it every second, `Callbacks::image`, as `--plot
//!    --plot-every 1` asks; the copies are counted, not drawn); and `--eta-out FILE`, one eta
//!    cube of the stream. Against the plain `stream-max` row of the same size and run (the
//!    goal: at least 95 % of its frames/s); each run's image or cube is read back and must
//!    count something.
//!
//! A table says where each `stream` run's time went (the finder waiting for frames, finding,
//! writing, the writer's waits, the commit).
//!
//! Section `back-to-back` (per cluster size): `--back-to-back A x F` (default 20 x 1000):
//! A acquisitions of F frames sent back to back against one acquisition of A * F frames, both
//! as fast as cluda takes them (`--on-full block`), then the A acquisitions again at
//! `--fraction` of their bare loop's rate with `stream`'s defaults; a bare loop over the same
//! sends gives the sender's own pace over acquisition boundaries, so cluda's per-acquisition
//! start-up is told apart from it. Per run: frames/s (from the first acquisition's first
//! frame's arrival to the last one's last clusters written), against the bare loop and against
//! the long acquisition (the goal: at least 90 %), and per acquisition (median / worst) the
//! first frame's lag (its arrival to its clusters written; the goal: a few ms, read in the
//! paced run, where frames do not queue), the set-up, the commit and the waits.
//!
//! Section `parts` (with `--parts N`, N > 1, default 2): the endpoint rows again with every frame sent as N parts on N
//! ports (`cluda replay --interfaces N`, each part from its own thread) and received on N
//! endpoints (`cluda stream --zmq .. --zmq ..`, a receiving thread each): `bare-Nep` (N SUB
//! sockets on N threads, counting), `stream-Nep-max` and `stream-Nep-rate` (at `--fraction`
//! of `bare-Nep`), each also against the one-endpoint bare loop (goal: `stream-Nep-max` at
//! least 1.8 times it, 0 dropped at the fixed rate).
//!
//! `fps` counts frames from the first frame's arrival to the acquisition's end (for `stream`:
//! its last cluster written; the file's commit follows on a thread of its own). Cluster files
//! go to `--tmp` (default `/dev/shm` when it exists) and are removed after each run. Results:
//! `stream.csv`, `stream-eta.csv` (the live eta rows), `stream-back-to-back.csv` and
//! `stream.md` under `--out` (default `bench-results/stream`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluda::engine::imaging::CubeSink;
use cluda::engine::sink::Sink;
use cluda::finder::select::DeviceChoice;
use cluda::generate::{GenConfig, Generator};
use cluda::interpolation::{CubeAxes, EtaKind, Interpolator, MapKind};
use cluda::stream::{
    AcquisitionSummary, Callbacks, FullQueue, PedestalPlan, Publisher, ReceiverConfig,
    ReplaySettings, StreamImaging, StreamSettings, ZmqHeader, replay,
};
use cluda::{ClusterFinder, ClusterSize, Frames, Pedestal, Precision};
/// `--distinct` frames sent over and over, numbered from 0, `--frames` in all: the long-run
/// tests' pool source, shared with them.
use support::pool_source::PoolSource;

struct Opts {
    frames: u64,
    distinct: usize,
    sizes: Vec<usize>,
    device: DeviceChoice,
    rows: usize,
    cols: usize,
    fraction: f64,
    tmp: PathBuf,
    out: PathBuf,
    /// Endpoints of the frames-in-parts rows (1: none).
    parts: usize,
    /// `--back-to-back AxF`: A acquisitions of F frames for the back-to-back section.
    back_to_back: (u64, u64),
    /// `--sections`: which sections run (`endpoint`, `parts`, `back-to-back`).
    sections: Vec<String>,
    /// `--live`: the live eta-interpolation rows of the endpoint section (`eta`, `eta-out`;
    /// `none`: neither).
    live: Vec<LiveRow>,
}

/// A live eta-interpolation row of the endpoint section (see [`live_rows`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum LiveRow {
    /// `stream-max --eta`.
    Eta,
    /// `stream-max --eta` with a live view of the image.
    EtaView,
    /// `stream-max --eta-out`.
    EtaOut,
}

/// Sub-pixels per pixel of the `stream-max --eta` row (`cluda stream --subpixels`' default).
const SUBPIXELS: u32 = 4;

fn parse() -> Result<Opts, String> {
    let shm = PathBuf::from("/dev/shm");
    let mut o = Opts {
        frames: 200_000,
        distinct: 1000,
        sizes: vec![3, 9],
        device: DeviceChoice::Auto,
        rows: 400,
        cols: 400,
        fraction: 0.9,
        tmp: if shm.is_dir() {
            shm
        } else {
            std::env::temp_dir()
        },
        out: PathBuf::from("bench-results/stream"),
        parts: 2,
        back_to_back: (20, 1000),
        sections: vec!["endpoint".into(), "parts".into(), "back-to-back".into()],
        live: vec![LiveRow::Eta, LiveRow::EtaView, LiveRow::EtaOut],
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{v}: {e}"));
        match a.as_str() {
            "--bench" => {}
            "--frames" => o.frames = num(val()?)?.max(1),
            "--distinct" => o.distinct = num(val()?)?.max(1) as usize,
            "--rows" => o.rows = num(val()?)? as usize,
            "--cols" => o.cols = num(val()?)? as usize,
            "--fraction" => {
                o.fraction = val()?.parse().map_err(|e| format!("--fraction: {e}"))?;
                if !(o.fraction > 0.0 && o.fraction <= 1.0) {
                    return Err("--fraction must be in (0, 1]".into());
                }
            }
            "--sizes" => {
                o.sizes = val()?
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("{s}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--device" => o.device = val()?.parse().map_err(|e: cluda::Error| e.to_string())?,
            "--tmp" => o.tmp = val()?.into(),
            "--back-to-back" => {
                let v = val()?;
                let (a, f) = v
                    .split_once('x')
                    .ok_or_else(|| format!("--back-to-back {v}: want AxF, e.g. 20x1000"))?;
                o.back_to_back = (num(a.into())?.max(1), num(f.into())?.max(1));
            }
            "--sections" => {
                o.sections = val()?.split(',').map(str::to_string).collect();
                for s in &o.sections {
                    if !matches!(s.as_str(), "endpoint" | "parts" | "back-to-back") {
                        return Err(format!("--sections: unknown section {s}"));
                    }
                }
            }
            "--live" => {
                o.live.clear();
                for l in val()?.split(',') {
                    match l {
                        "eta" => o.live.push(LiveRow::Eta),
                        "eta-view" => o.live.push(LiveRow::EtaView),
                        "eta-out" => o.live.push(LiveRow::EtaOut),
                        "none" => {}
                        other => {
                            return Err(format!(
                                "--live: {other}: want eta, eta-view, eta-out or none"
                            ));
                        }
                    }
                }
            }
            "--out" => o.out = val()?.into(),
            "--parts" => o.parts = num(val()?)?.clamp(1, 16) as usize,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Starts the publisher on a thread: binds, waits for one subscriber, replays `acquisitions`
/// acquisitions of `per` frames each, back to back (each numbered from 0, `fileIndex` 0, 1,
/// 2, ...).
fn publish_acquisitions(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    port: u16,
    rate: Option<f64>,
    no_drop: bool,
    (acquisitions, per): (u64, u64),
) -> Result<std::thread::JoinHandle<Result<cluda::stream::ReplayStats, String>>, String> {
    let (frames, rows, cols, total) = (Arc::clone(frames), o.rows, o.cols, per);
    let named = std::thread::Builder::new().name("bench-replay".into());
    let spawned = named.spawn(move || {
        SENDER_TID.store(this_tid(), std::sync::atomic::Ordering::SeqCst);
        let mut p = Publisher::bind(&format!("tcp://127.0.0.1:{port}"), 1000, no_drop)
            .map_err(|e| e.to_string())?;
        if p.wait_for_subscribers(1, Duration::from_secs(60))
            .map_err(|e| e.to_string())?
            < 1
        {
            return Err("no subscriber within 60 s".into());
        }
        let settings = ReplaySettings {
            rate,
            repeat: acquisitions,
            ..ReplaySettings::default()
        };
        replay(
            &mut p,
            1,
            &mut |_| {
                Ok(Box::new(PoolSource::from_pool(
                    Arc::clone(&frames),
                    rows,
                    cols,
                    total,
                )))
            },
            &settings,
            &AtomicBool::new(false),
        )
        .map_err(|e| e.to_string())
    });
    spawned.map_err(|e| format!("the sender's thread: {e}"))
}

/// The bare loop: a SUB socket receiving both parts of every message, counting frames until
/// the end message; frames/s from the first frame to the end.
fn bare(o: &Opts, frames: &Arc<Vec<u16>>) -> Result<f64, String> {
    bare_acquisitions(o, frames, (1, o.frames))
}

/// As [`bare`] over `acquisitions` acquisitions of `per` frames sent back to back: frames/s
/// from the first frame to the last end message.
fn bare_acquisitions(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    (acquisitions, per): (u64, u64),
) -> Result<f64, String> {
    let port = free_port()?;
    let ctx = zmq::Context::new();
    let sub = ctx.socket(zmq::SUB).map_err(|e| e.to_string())?;
    sub.set_rcvhwm(256).map_err(|e| e.to_string())?;
    sub.set_subscribe(b"").map_err(|e| e.to_string())?;
    sub.connect(&format!("tcp://127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?;
    let publisher = publish_acquisitions(o, frames, port, None, true, (acquisitions, per))?;
    let (mut count, mut first, mut ends) = (0u64, None, 0u64);
    loop {
        let head = sub.recv_msg(0).map_err(|e| e.to_string())?;
        let more = sub.get_rcvmore().map_err(|e| e.to_string())?;
        if !more {
            let h = ZmqHeader::parse(&head).map_err(|e| format!("{e:?}"))?;
            if !h.is_data() {
                ends += 1;
                if ends == acquisitions {
                    break;
                }
            }
            continue;
        }
        let data = sub.recv_msg(0).map_err(|e| e.to_string())?;
        std::hint::black_box(data.len());
        first.get_or_insert_with(Instant::now);
        count += 1;
    }
    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    if count != acquisitions * per {
        return Err(format!(
            "bare loop got {count} of {} frames",
            acquisitions * per
        ));
    }
    Ok(count as f64 / secs.max(1e-9))
}

/// One `cluda stream` run of one acquisition; returns its summary.
fn stream(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    rate: Option<f64>,
    full: FullQueue,
) -> Result<AcquisitionSummary, String> {
    stream_acquisitions(o, frames, pedestal, size, rate, full, (1, o.frames))?
        .pop()
        .ok_or_else(|| "no summary from the stream".to_string())
}

/// One `cluda stream` run over `acquisitions` acquisitions of `per` frames sent back to back;
/// returns their summaries in order.
fn stream_acquisitions(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    rate: Option<f64>,
    full: FullQueue,
    shape: (u64, u64),
) -> Result<Vec<AcquisitionSummary>, String> {
    let run = Run {
        size,
        rate,
        full,
        shape,
    };
    stream_run(o, frames, pedestal, &run, None).map(|(summaries, _)| summaries)
}

/// What one `cluda stream` run is asked for: the cluster size, the sender's rate (`None`: as
/// fast as the stream takes frames), what a full queue does, and `(acquisitions, frames
/// each)`.
struct Run {
    size: ClusterSize,
    rate: Option<f64>,
    full: FullQueue,
    shape: (u64, u64),
}

/// The eta interpolation a `stream-max` row runs live (`StreamSettings::imaging`).
enum Live {
    /// `cluda stream --eta CUBE --subpixels N` (default maps): a sub-pixel image of each
    /// acquisition beside its cluster file.
    Image(Arc<Interpolator>, u32),
    /// The same with a live view asking for a copy of the image every [`VIEW_EVERY`]
    /// (`--plot --plot-every 1`; the copies are counted, not drawn).
    ImageView(Arc<Interpolator>, u32),
    /// `cluda stream --eta-out FILE`: one eta cube (default axes) of every data acquisition.
    Cube,
}

impl Live {
    /// The row's name in the tables.
    fn name(&self) -> &'static str {
        match self {
            Self::Image(..) => "stream-max --eta",
            Self::ImageView(..) => "stream-max --eta --plot",
            Self::Cube => "stream-max --eta-out",
        }
    }
}

/// How often the `stream-max --eta --plot` row's live view asks for a copy of the image.
const VIEW_EVERY: Duration = Duration::from_secs(1);

/// The file name of the `--eta-out` cube in a run's directory.
const ETA_OUT: &str = "eta-out.npz";

/// What a live-imaging run wrote, read back from its directory before it is removed: the
/// photons counted into its images (`--eta`: every `*.image.npy`, one per acquisition) or the
/// clusters counted into its cube (`--eta-out`). An error when a file is missing or counts
/// nothing, so that a row cannot measure a stream that made no image.
fn live_output(dir: &std::path::Path, live: &Live, acquisitions: u64) -> Result<u64, String> {
    match live {
        Live::Image(..) | Live::ImageView(..) => {
            let mut images = 0u64;
            let mut photons = 0u64;
            for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if !path.to_string_lossy().ends_with(".image.npy") {
                    continue;
                }
                let image = cluda::io::npy::read_array::<u32>(&path).map_err(|e| e.to_string())?;
                photons += image.data.iter().map(|&c| u64::from(c)).sum::<u64>();
                images += 1;
            }
            if images != acquisitions || photons == 0 {
                return Err(format!(
                    "--eta: {images} sub-pixel images ({acquisitions} acquisitions) with {photons} photons in {}",
                    dir.display()
                ));
            }
            Ok(photons)
        }
        Live::Cube => {
            let path = dir.join(ETA_OUT);
            let (_, cube, _) = cluda::interpolation::files::read_cube(&path, None)
                .map_err(|e| format!("--eta-out: {e}"))?;
            let clusters = cube.iter().sum::<f64>() as u64;
            if clusters == 0 {
                return Err(format!("--eta-out: {} counts nothing", path.display()));
            }
            Ok(clusters)
        }
    }
}

/// As [`stream_acquisitions`], with `live` eta interpolation: also returns what it counted
/// (see [`live_output`]; 0 without it).
fn stream_run(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    run: &Run,
    live: Option<&Live>,
) -> Result<(Vec<AcquisitionSummary>, u64), String> {
    let &Run {
        size,
        rate,
        full,
        shape: (acquisitions, per),
    } = run;
    let port = free_port()?;
    let dir = tempfile::Builder::new()
        .prefix("cluda-stream-bench")
        .tempdir_in(&o.tmp)
        .map_err(|e| e.to_string())?;
    let mut config = ReceiverConfig::new(&format!("tcp://127.0.0.1:{port}"));
    config.full = full;
    let publisher = publish_acquisitions(
        o,
        frames,
        port,
        rate,
        full == FullQueue::Block,
        (acquisitions, per),
    )?;
    let mut settings = StreamSettings::new(
        cluda::FindOptions {
            size,
            n_sigma: 5.0,
            precision: Precision::F64,
            ..cluda::FindOptions::default()
        },
        dir.path(),
    );
    settings.device = o.device;
    settings.pedestal = PedestalPlan::Fixed(pedestal.clone());
    settings.acquisitions = Some(acquisitions);
    // The sender's end message can be dropped at its high-water mark like any frame.
    settings.idle_end = Duration::from_secs(2);
    settings.imaging = live.map(|l| match l {
        Live::Image(maps, n) | Live::ImageView(maps, n) => StreamImaging {
            image: Some((Arc::clone(maps), *n)),
            cube: None,
        },
        Live::Cube => StreamImaging {
            image: None,
            cube: Some((
                CubeAxes::default_for(EtaKind::Eta2),
                dir.path().join(ETA_OUT),
            )),
        },
    });
    let got = Mutex::new(Vec::new());
    let report: cluda::stream::Reporter = Arc::new(|e: &cluda::stream::StreamEvent| {
        eprintln!("  {e:?}");
    });
    // The live view's copies (mid-acquisition, final), counted and dropped.
    let (mut copies, mut finals) = (0u64, 0u64);
    let mut show = |u: cluda::stream::ImageUpdate| {
        if u.done {
            finals += 1;
        } else {
            copies += 1;
        }
    };
    let image = matches!(live, Some(Live::ImageView(..))).then(|| cluda::stream::LiveImage {
        every: VIEW_EVERY,
        show: &mut show,
    });
    cluda::stream::run(
        config,
        &settings,
        Arc::new(AtomicBool::new(false)),
        Callbacks {
            report,
            note: &mut |s: &str| eprintln!("  note: {s}"),
            summary: &mut |s: &AcquisitionSummary| {
                if let Ok(mut g) = got.lock() {
                    g.push(s.clone());
                }
                Ok(())
            },
            frame: &mut |_, _| {},
            image,
        },
    )
    .map_err(|e| e.to_string())?;
    if matches!(live, Some(Live::ImageView(..))) {
        eprintln!("  live view: {copies} copies of the image while frames came, {finals} final");
        if finals != acquisitions {
            return Err(format!(
                "the live view got {finals} final images of {acquisitions} acquisitions"
            ));
        }
    }
    let sent = publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    let summaries = got.into_inner().map_err(|e| e.to_string())?;
    for summary in &summaries {
        eprintln!("  {summary}");
    }
    eprintln!(
        "  (sent {} frames in {} acquisitions)",
        sent.frames, sent.acquisitions
    );
    if summaries.len() as u64 != acquisitions {
        return Err(format!(
            "{} summaries from the stream, {acquisitions} acquisitions sent",
            summaries.len()
        ));
    }
    let counted = match live {
        Some(l) => live_output(dir.path(), l, acquisitions)?,
        None => 0,
    };
    Ok((summaries, counted))
}

/// The maps `cluda stream --eta CUBE` makes (default maps), of the cube `cluda eta` makes of
/// the generated flat field `frames` with clusters of `size` (default axes; the stream's
/// finder options, its pedestal): a [`CubeSink`] on a CPU finder, as `cluda eta --device cpu`
/// runs it. Also the clusters counted into the cube.
fn eta_maps(
    o: &Opts,
    frames: &[u16],
    pedestal: &Pedestal,
    size: ClusterSize,
) -> Result<(Arc<Interpolator>, u64), String> {
    let e = |e: cluda::Error| e.to_string();
    let options = cluda::FindOptions {
        size,
        n_sigma: 5.0,
        precision: Precision::F64,
        ..cluda::FindOptions::default()
    };
    let mut finder =
        cluda::CpuFinder::new(options.config(o.rows, o.cols, pedestal.window())).map_err(e)?;
    finder.set_pedestal(pedestal.clone()).map_err(e)?;
    let mut sink = CubeSink::new(CubeAxes::default_for(EtaKind::Eta2), true).map_err(e)?;
    let n = frames.len() / (o.rows * o.cols).max(1);
    let frames = Frames::new(frames, n, o.rows, o.cols).map_err(e)?;
    sink.begin(0, &mut finder).map_err(e)?;
    finder
        .find_each(frames, &mut |fc| sink.frame(0, &fc))
        .map_err(e)?;
    sink.end(0, &mut finder).map_err(e)?;
    let cube = sink.into_cube();
    let clusters = cube.counts().iter().sum::<u64>();
    if clusters == 0 {
        return Err(format!(
            "the flat field's eta cube ({side}x{side}) counts nothing",
            side = size.side()
        ));
    }
    let maps =
        Interpolator::new(cube.axes().clone(), &cube.to_f64(), MapKind::default()).map_err(e)?;
    Ok((Arc::new(maps), clusters))
}

/// The head of the live eta-interpolation table.
fn live_head() -> String {
    format!(
        "\n## Live eta interpolation (one endpoint)\n\n`stream-max --eta`: `stream-max` with `cluda stream --eta CUBE --subpixels {SUBPIXELS}` (default maps; the cube made once up front per size, as `cluda eta` makes it, from the generated flat field's clusters on the CPU finder): a sub-pixel image per acquisition beside its cluster file; `counted`: the photons in it. `stream-max --eta --plot`: the same with a live view of the image (`Callbacks::image`: a copy every {} s, as `cluda stream --plot --plot-every 1` asks, counted and dropped, not drawn: the placement worker copies the host's image, a GPU finder downloads its counts between two chunks). `stream-max --eta-out`: with `--eta-out FILE` (default axes): one eta cube of the stream; `counted`: the clusters in it. A GPU finder counts either on the device (`ClusterFinder::accumulate`, in its output stage); the CPU finder's clusters are placed or counted on the host, on the engine's thread, frame by frame. frames/s ends at the last cluster written, as `stream-max`'s (the image's or cube's download and write follow). \"of stream-max\": against the plain `stream-max` row of the same size just before (goal >= 95 %).\n\n| size | run | frames/s | of stream-max | of bare | counted | dropped | missing | worst lag (ms) | device |\n|---|---|---|---|---|---|---|---|---|---|\n",
        VIEW_EVERY.as_secs()
    )
}

/// The live eta-interpolation rows (`o.live`) of one cluster size: `stream-max` with `--eta`
/// and/or `--eta-out`, against the plain `stream-max` row's `plain_fps` and the bare loop's
/// `bare_fps`.
fn live_rows(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    (bare_fps, plain_fps): (f64, f64),
    out: Tables<'_>,
) -> Result<(), String> {
    let Tables {
        csv,
        md,
        goals,
        timings,
    } = out;
    let side = size.side();
    let maps = if o.live.contains(&LiveRow::Eta) || o.live.contains(&LiveRow::EtaView) {
        let t = Instant::now();
        let (maps, clusters) = eta_maps(o, frames, pedestal, size)?;
        eprintln!(
            "size {side}: eta cube of the flat field ({} frames): {clusters} clusters, {:.1} s",
            o.distinct,
            t.elapsed().as_secs_f64()
        );
        Some(maps)
    } else {
        None
    };
    for row in &o.live {
        let live = match (row, &maps) {
            (LiveRow::Eta, Some(m)) => Live::Image(Arc::clone(m), SUBPIXELS),
            (LiveRow::EtaView, Some(m)) => Live::ImageView(Arc::clone(m), SUBPIXELS),
            (LiveRow::Eta | LiveRow::EtaView, None) => {
                return Err("no maps for the --eta row".into());
            }
            (LiveRow::EtaOut, _) => Live::Cube,
        };
        let name = live.name();
        eprintln!("size {side}: {name}");
        let run = Run {
            size,
            rate: None,
            full: FullQueue::Block,
            shape: (1, o.frames),
        };
        let sampler = ThreadSampler::start();
        let (mut sums, counted) = stream_run(o, frames, pedestal, &run, Some(&live))?;
        let s = sums.pop().ok_or("no summary from the stream")?;
        timings.push(timing_row(side, name, &s, &sampler.stop()));
        let fps = s.fps();
        let ratio = fps / plain_fps.max(1e-9);
        let c = &s.counts;
        eprintln!("  {name}: {fps:.0} frames/s = {ratio:.3} of stream-max, counted {counted}");
        let _ = writeln!(
            csv,
            "{side},{name},{},{fps:.1},{ratio:.3},{:.3},{counted},{},{},{:.1},{}",
            s.data_frames,
            fps / bare_fps,
            c.dropped,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        let _ = writeln!(
            md,
            "| {side}x{side} | {name} | {fps:.0} | {:.1} % | {:.1} % | {counted} | {} | {} | {:.1} | {} |",
            100.0 * ratio,
            100.0 * fps / bare_fps,
            c.dropped,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        goals.push(format!(
            "- {side}x{side}: `{name}` sustains {fps:.0} frames/s = {:.1} % of `stream-max`'s {plain_fps:.0} (goal >= 95 %): {}",
            100.0 * ratio,
            if ratio >= 0.95 { "met" } else { "NOT met" }
        ));
    }
    Ok(())
}

/// The head of the one-endpoint section's "where the time went" table.
fn timing_head() -> String {
    "\n## Where the time went (one endpoint)\n\nPer run: the finder waiting for frames (the stream the slower side), in the finder's calls (the visitor, which writes the cluster file, included), in the visitor, the reader thread filling slots (taking messages and copying frames), the finder waiting for the file's writer (the file system the slower side), the writer threads busy (added over threads), the commit (last writes, sync, rename), in seconds, over the acquisition's wall time.\n\nThe busiest threads: CPU time of each thread of the process (the sender's included: `bench-replay` and one of the `ZMQbg/IO/0`) over the run, sampled every 50 ms from /proc, in % of one core; a thread near 100 % bounds the run.\n\n| size | run | wall (s) | input wait | find | visit | reading | write wait | writer busy | commit | busiest threads (% of a core) |\n|---|---|---|---|---|---|---|---|---|---|---|\n".to_string()
}

/// One run's row of the "where the time went" table.
fn timing_row(side: usize, name: &str, s: &AcquisitionSummary, busiest: &str) -> String {
    let t = &s.timing;
    let e = &t.engine;
    format!(
        "| {side}x{side} | {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {busiest} |\n",
        e.wall.as_secs_f64(),
        e.waited_for_input.as_secs_f64(),
        e.find.as_secs_f64(),
        e.visit.as_secs_f64(),
        e.read_busy.as_secs_f64(),
        t.write.waited.as_secs_f64(),
        t.write.busy.as_secs_f64(),
        t.commit.as_secs_f64(),
    )
}

/// Samples the CPU time of every thread of this process (`/proc/self/task/*/stat`) every
/// 50 ms on a thread of its own, so a run's busiest threads can be named: a thread near 100 %
/// of a core is what bounds it. Threads that end between two samples lose at most 50 ms.
struct ThreadSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Duration, Seen)>,
}

/// Per thread id: its name, its CPU ticks when first seen and when last seen.
type Seen = HashMap<u64, (String, u64, u64)>;

/// The sender's thread id (its libzmq I/O thread takes its name, `bench-replay`).
static SENDER_TID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The calling thread's id (from `/proc/thread-self`, a link to `<pid>/task/<tid>`).
fn this_tid() -> u64 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(0)
}

/// A thread's name for the table: the main thread, the sender, rayon's workers (named at
/// start), and libzmq's I/O threads, which take their creator's name (the receiver's
/// context is made on the main thread, the sender's on the sender's).
fn thread_label(tid: u64, comm: &str, process: &str) -> String {
    if tid == u64::from(std::process::id()) {
        "main".into()
    } else if tid == SENDER_TID.load(std::sync::atomic::Ordering::SeqCst) {
        "sender".into()
    } else if comm == "bench-replay" {
        "zmq-io(sender)".into()
    } else if comm == process {
        "zmq-io(receiver)".into()
    } else {
        comm.into()
    }
}

/// `(comm, utime + stime in clock ticks)` of thread `tid` of this process.
fn thread_ticks(tid: &str) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: state is field 3, utime field 14, stime field 15.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((comm, ticks))
}

impl ThreadSampler {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut seen = Seen::new();
            loop {
                let done = flag.load(std::sync::atomic::Ordering::SeqCst);
                if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
                    for entry in dir.flatten() {
                        let tid = entry.file_name().to_string_lossy().to_string();
                        let (Ok(id), Some((comm, ticks))) =
                            (tid.parse::<u64>(), thread_ticks(&tid))
                        else {
                            continue;
                        };
                        let e = seen.entry(id).or_insert((comm.clone(), ticks, ticks));
                        e.0 = comm;
                        e.2 = ticks;
                    }
                }
                if done {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            (t0.elapsed(), seen)
        });
        Self { stop, thread }
    }

    /// Stops sampling; the busiest threads as `name pct %, ...` (at most 6, those above 5 %).
    fn stop(self) -> String {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let Ok((wall, seen)) = self.thread.join() else {
            return "-".into();
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let process = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let process = process.trim_end();
        let mut busy: Vec<(String, f64)> = seen
            .into_iter()
            .map(|(tid, (comm, first, last))| {
                let name = thread_label(tid, &comm, process);
                (
                    name,
                    100.0 * (last - first) as f64 / hz / wall.as_secs_f64().max(1e-9),
                )
            })
            .filter(|(_, pct)| *pct >= 5.0)
            .collect();
        busy.sort_by(|a, b| b.1.total_cmp(&a.1));
        busy.truncate(6);
        if busy.is_empty() {
            return "-".into();
        }
        busy.iter()
            .map(|(n, p)| format!("{n} {p:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Data frames per second over a run of acquisitions: from the first one's first frame's
/// arrival to the last one's last clusters written (the commits of all but the last, and every
/// set-up between them, inside).
fn span_fps(summaries: &[AcquisitionSummary]) -> f64 {
    let first = summaries
        .iter()
        .filter_map(|s| s.counts.first_arrival)
        .min();
    let last = summaries
        .iter()
        .filter_map(|s| {
            s.counts
                .first_arrival
                .map(|a| a + Duration::from_secs_f64(s.seconds))
        })
        .max();
    let frames: u64 = summaries.iter().map(|s| s.data_frames).sum();
    match (first, last) {
        (Some(a), Some(b)) if b > a => frames as f64 / (b - a).as_secs_f64(),
        _ => 0.0,
    }
}

/// `(median, worst)` of `values` in milliseconds (0 for none).
fn median_worst(mut values: Vec<f64>) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    values.sort_by(f64::total_cmp);
    (
        values[values.len() / 2] * 1e3,
        values[values.len() - 1] * 1e3,
    )
}

/// Section "acquisitions back to back": per cluster size, the same sender sends
/// `o.back_to_back` (acquisitions, frames) back to back, then one acquisition of all those
/// frames; a bare loop and `cluda stream` (pedestal given up front, `--on-full block`) take
/// each. The bare loops give the sender's own pace over the acquisition boundaries, so cluda's
/// per-acquisition set-up is told apart from it. Returns the section's markdown, its CSV rows
/// and its goal lines.
fn back_to_back(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    side: usize,
) -> Result<(String, String, Vec<String>), String> {
    let (n, per) = o.back_to_back;
    let (mut md, mut csv, mut goals) = (String::new(), String::new(), Vec::new());
    let (mut long_fps, mut b2b_bare) = (0.0, 0.0);
    // The long acquisition first: the short ones are compared to it. Then the short ones as
    // fast as cluda takes them, and at `--fraction` of their bare loop's rate, where cluda
    // keeps up and an acquisition's first frames wait for nothing but its start.
    for (name, shape, paced) in [
        ("one-long", (1, n * per), false),
        ("back-to-back", (n, per), false),
        ("back-to-back-paced", (n, per), true),
    ] {
        let (bare_fps, rate, full) = if paced {
            (b2b_bare, Some(b2b_bare * o.fraction), FullQueue::Drop)
        } else {
            eprintln!(
                "size {side}: {name}: bare loop over {} x {} frames",
                shape.0, shape.1
            );
            (bare_acquisitions(o, frames, shape)?, None, FullQueue::Block)
        };
        if name == "back-to-back" {
            b2b_bare = bare_fps;
        }
        eprintln!("  bare: {bare_fps:.0} frames/s");
        eprintln!("size {side}: {name}: stream");
        let sums = stream_acquisitions(o, frames, pedestal, size, rate, full, shape)?;
        let fps = span_fps(&sums);
        if name == "one-long" {
            long_fps = fps;
        }
        let secs = |f: &dyn Fn(&AcquisitionSummary) -> Duration| {
            sums.iter().map(|s| f(s).as_secs_f64()).collect::<Vec<_>>()
        };
        let first = median_worst(secs(&|s| s.first_lag.unwrap_or_default()));
        let setup = median_worst(secs(&|s| s.timing.setup));
        let commit = median_worst(secs(&|s| s.timing.commit));
        let input_wait = median_worst(secs(&|s| s.timing.engine.waited_for_input));
        let write_wait = median_worst(secs(&|s| s.timing.write.waited));
        let lost: u64 = sums
            .iter()
            .map(|s| s.counts.dropped + s.counts.missing)
            .sum();
        let _ = writeln!(
            csv,
            "{side},{name},{},{},{bare_fps:.1},{fps:.1},{:.3},{:.3},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{lost}",
            shape.0,
            shape.1,
            fps / bare_fps,
            fps / long_fps.max(1e-9),
            first.0,
            first.1,
            setup.0,
            setup.1,
            commit.0,
            commit.1
        );
        let _ = writeln!(
            md,
            "| {side}x{side} | {name} | {} x {} | {bare_fps:.0} | {fps:.0} | {:.1} % | {:.1} % | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | {:.0} / {:.0} | {:.0} / {:.0} | {lost} |",
            shape.0,
            shape.1,
            100.0 * fps / bare_fps,
            100.0 * fps / long_fps.max(1e-9),
            first.0,
            first.1,
            setup.0,
            setup.1,
            commit.0,
            commit.1,
            input_wait.0,
            input_wait.1,
            write_wait.0,
            write_wait.1,
        );
        if name == "back-to-back" {
            goals.push(format!(
                "- {side}x{side}: {n} acquisitions of {per} frames back to back at {fps:.0} frames/s = {:.1} % of one acquisition of {} at {long_fps:.0} (goal >= 90 %): {}",
                100.0 * fps / long_fps.max(1e-9),
                n * per,
                if fps >= 0.9 * long_fps { "met" } else { "NOT met" },
            ));
        } else if paced {
            goals.push(format!(
                "- {side}x{side}: sent at {:.0} % of the bare rate, an acquisition's first frame's clusters were written {:.1} ms after its arrival (median; worst {:.1}; goal: a few ms), {lost} frames lost",
                o.fraction * 100.0,
                first.0,
                first.1
            ));
        }
    }
    Ok((md, csv, goals))
}

/// The section's table head (markdown) and CSV header.
fn back_to_back_heads(o: &Opts) -> (String, String) {
    let (n, per) = o.back_to_back;
    (
        format!(
            "\n## Acquisitions back to back\n\n{n} acquisitions of {per} frames sent back to back by the same sender as one acquisition of {}, pedestal given up front, `--on-full block`; `back-to-back-paced`: the same sent at {:.0} % of their bare loop's rate, `cluda stream` with its defaults. `bare`: the bare loop over the same sends (the sender's own pace); frames/s from the first frame's arrival to the last clusters written; first lag: from an acquisition's first frame's arrival to its clusters written; set-up: from an acquisition's first frame taken off the queue to its first data frame asked of the engine; commit: the file's last writes, sync and rename; input wait: the finder waiting for frames; write wait: the finder waiting for the file's writer (median / worst over the acquisitions, ms).\n\n| size | run | acquisitions x frames | bare frames/s | frames/s | of bare | of one long | first lag (ms) | set-up (ms) | commit (ms) | input wait (ms) | write wait (ms) | lost |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            n * per,
            o.fraction * 100.0
        ),
        "size,run,acquisitions,frames_each,bare_fps,fps,ratio_to_bare,ratio_to_long,first_lag_median_ms,first_lag_worst_ms,setup_median_ms,setup_worst_ms,commit_median_ms,commit_worst_ms,lost\n".to_string(),
    )
}

fn main() {
    if let Err(e) = run() {
        eprintln!("stream bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = parse()?;
    // Named, so the busiest-threads column tells them from libzmq's I/O threads.
    rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("rayon-{i}"))
        .build_global()
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let g = Generator::new(GenConfig::new(o.rows, o.cols, 1)).map_err(|e| e.to_string())?;
    let dark = g.frames(0, 1000, false);
    let mut pedestal =
        Pedestal::new(o.rows, o.cols, 1000, Precision::F64).map_err(|e| e.to_string())?;
    pedestal
        .push_frames(Frames::new(&dark, 1000, o.rows, o.cols).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let frames = Arc::new(g.frames(1000, o.distinct, true));
    eprintln!(
        "{} frames of {}x{} ({} distinct), sizes {:?}, device {}",
        o.frames,
        o.rows,
        o.cols,
        o.distinct,
        o.sizes,
        o.device.name()
    );
    let mut csv =
        String::from("size,run,frames,fps,ratio_to_bare,dropped,missing,worst_lag_ms,device\n");
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Live cluster finding on a ZMQ stream\n\ncommand: `cargo bench --bench stream -- --frames {} --sizes {} --device {}`\n\n{} frames of {}x{} per run, replayed over TCP loopback (one acquisition; {} distinct generated frames over and over), n_sigma 5, F64, pedestal of 1000 dark frames given up front. `bare`: a SUB loop that only receives and counts; `stream-max`: `cluda stream --on-full block` fed as fast as it takes frames; `stream-rate`: the sender at {:.0} % of the bare rate, dropping at its high-water mark as slsReceiver does, `cluda stream` with its defaults.\n\n| size | run | frames/s | of bare | dropped | missing | worst lag (ms) | device |\n|---|---|---|---|---|---|---|---|",
        o.frames,
        o.sizes
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(","),
        o.device.name(),
        o.frames,
        o.rows,
        o.cols,
        o.distinct,
        o.fraction * 100.0
    );
    let mut goals = Vec::new();
    let mut timings = Vec::new();
    let section = |name: &str| o.sections.iter().any(|s| s == name);
    let parts = o.parts > 1 && section("parts");
    let mut live_md = String::new();
    let mut live_csv = String::from(
        "size,run,frames,fps,ratio_to_stream_max,ratio_to_bare,counted,dropped,missing,worst_lag_ms,device\n",
    );
    for &side in &o.sizes {
        if !section("endpoint") && !parts {
            break;
        }
        let size = ClusterSize::from_side(side).map_err(|e| e.to_string())?;
        eprintln!("size {side}: bare loop");
        let bare_fps = bare(&o, &frames)?;
        eprintln!("  bare: {bare_fps:.0} frames/s");
        let _ = writeln!(csv, "{side},bare,{},{bare_fps:.1},1.000,0,0,0,-", o.frames);
        let _ = writeln!(
            md,
            "| {side}x{side} | bare | {bare_fps:.0} | 100 % | 0 | 0 | - | - |"
        );
        for (name, rate, full) in [
            ("stream-max", None, FullQueue::Block),
            ("stream-rate", Some(bare_fps * o.fraction), FullQueue::Drop),
        ] {
            if !section("endpoint") {
                // The parts section alone: the one-endpoint bare loop is its yardstick.
                break;
            }
            eprintln!("size {side}: {name}");
            let sampler = ThreadSampler::start();
            let s = stream(&o, &frames, &pedestal, size, rate, full)?;
            timings.push(timing_row(side, name, &s, &sampler.stop()));
            let fps = s.fps();
            let c = &s.counts;
            let _ = writeln!(
                csv,
                "{side},{name},{},{fps:.1},{:.3},{},{},{:.1},{}",
                s.data_frames,
                fps / bare_fps,
                c.dropped,
                c.missing,
                s.worst_lag.as_secs_f64() * 1e3,
                s.device
            );
            let _ = writeln!(
                md,
                "| {side}x{side} | {name} | {fps:.0} | {:.1} % | {} | {} | {:.1} | {} |",
                100.0 * fps / bare_fps,
                c.dropped,
                c.missing,
                s.worst_lag.as_secs_f64() * 1e3,
                s.device
            );
            if name == "stream-max" {
                goals.push(format!(
                    "- {side}x{side}: stream sustains {fps:.0} frames/s = {:.1} % of the bare loop's {bare_fps:.0} (goal >= 90 %): {}",
                    100.0 * fps / bare_fps,
                    if fps >= 0.9 * bare_fps { "met" } else { "NOT met" }
                ));
                if side == 3 {
                    goals.push(format!(
                        "- 3x3: {fps:.0} frames/s (goal >= 40,000 where the bare loop allows it: bare {bare_fps:.0}): {}",
                        if fps >= 40_000.0 {
                            "met"
                        } else if bare_fps < 40_000.0 / 0.9 {
                            "bare loop below it"
                        } else {
                            "NOT met"
                        }
                    ));
                }
                // Right after the plain row, which they are compared to.
                let out = Tables {
                    csv: &mut live_csv,
                    md: &mut live_md,
                    goals: &mut goals,
                    timings: &mut timings,
                };
                live_rows(&o, &frames, &pedestal, size, (bare_fps, fps), out)?;
            } else {
                // Kept up: no frame lost and the frames processed as fast as they were sent
                // (a queue larger than the run could otherwise hide a stream that falls behind).
                let sent = rate.unwrap_or(0.0);
                let kept_up = c.dropped + c.missing == 0 && fps >= 0.95 * sent;
                goals.push(format!(
                    "- {side}x{side}: sent at {sent:.0} frames/s ({:.0} % of bare), stream processed {fps:.0} frames/s, dropped {} and missed {} frames (goal: 0 lost, keeping up): {}",
                    o.fraction * 100.0,
                    c.dropped,
                    c.missing,
                    if kept_up { "met" } else { "NOT met" }
                ));
            }
        }
        if parts {
            let out = Tables {
                csv: &mut csv,
                md: &mut md,
                goals: &mut goals,
                timings: &mut timings,
            };
            parts_rows(&o, &frames, &pedestal, size, bare_fps, out)?;
        }
    }
    if parts {
        let n = o.parts;
        let _ = writeln!(
            md,
            "\n`--parts {n}`: `bare-{n}ep`, `stream-{n}ep-max`, `stream-{n}ep-rate` send every frame as {n} parts of {} rows on {n} ports (`cluda replay --interfaces {n}`, a thread per part) into {n} endpoints (`cluda stream --zmq .. --zmq ..`, a receiving thread each); `bare-{n}ep` receives and counts on {n} SUB sockets and threads; `stream-{n}ep-rate` sends at {:.0} % of `bare-{n}ep`. \"of bare\" is against the one-endpoint bare loop; `dropped` counts frames dropped or incomplete.",
            o.rows / n,
            o.fraction * 100.0
        );
    }
    if !live_md.is_empty() {
        let _ = write!(md, "{}{live_md}", live_head());
        std::fs::write(o.out.join("stream-eta.csv"), &live_csv).map_err(|e| e.to_string())?;
    }
    if !timings.is_empty() {
        let _ = write!(md, "{}{}", timing_head(), timings.concat());
    }
    if o.sections.iter().any(|s| s == "back-to-back") {
        let (head, mut b2b_csv) = back_to_back_heads(&o);
        let _ = write!(md, "{head}");
        for &side in &o.sizes {
            let size = ClusterSize::from_side(side).map_err(|e| e.to_string())?;
            let (rows, c, g) = back_to_back(&o, &frames, &pedestal, size, side)?;
            let _ = write!(md, "{rows}");
            b2b_csv.push_str(&c);
            goals.extend(g);
        }
        std::fs::write(o.out.join("stream-back-to-back.csv"), &b2b_csv)
            .map_err(|e| e.to_string())?;
    }
    let _ = writeln!(md, "\n## Goals\n\n{}", goals.join("\n"));
    std::fs::write(o.out.join("stream.csv"), &csv).map_err(|e| e.to_string())?;
    std::fs::write(o.out.join("stream.md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    eprintln!("wrote {}", o.out.join("stream.md").display());
    Ok(())
}

/// Starts the publisher of frames in `parts` parts on `parts` ports from `port` on, on a thread
/// (each part then goes out from a thread of its own): binds, waits for the subscribers,
/// replays.
fn publish_parts(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    port: u16,
    parts: usize,
    rate: Option<f64>,
    no_drop: bool,
) -> Result<std::thread::JoinHandle<Result<cluda::stream::ReplayStats, String>>, String> {
    let (frames, rows, cols, total) = (Arc::clone(frames), o.rows, o.cols, o.frames);
    // Named as the one-endpoint sender, so the thread table tells its libzmq I/O threads and
    // its part threads (which take its name) from the receiver's.
    let named = std::thread::Builder::new().name("bench-replay".into());
    let spawned = named.spawn(move || {
        SENDER_TID.store(this_tid(), std::sync::atomic::Ordering::SeqCst);
        let mut pubs = (0..parts)
            .map(|i| {
                Publisher::bind(
                    &format!("tcp://127.0.0.1:{}", port as usize + i),
                    1000,
                    no_drop,
                )
                .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, String>>()?;
        for p in &mut pubs {
            if p.wait_for_subscribers(1, Duration::from_secs(60))
                .map_err(|e| e.to_string())?
                < 1
            {
                return Err("no subscriber within 60 s".into());
            }
        }
        let settings = ReplaySettings {
            rate,
            ..ReplaySettings::default()
        };
        cluda::stream::replay::replay_parts(
            &mut pubs,
            1,
            &mut |_| {
                Ok(Box::new(PoolSource::from_pool(
                    Arc::clone(&frames),
                    rows,
                    cols,
                    total,
                )))
            },
            &settings,
            &AtomicBool::new(false),
        )
        .map_err(|e| e.to_string())
    });
    spawned.map_err(|e| format!("cannot start the sender: {e}"))
}

/// `parts` consecutive loopback ports that were free a moment ago.
fn free_ports(parts: usize) -> Result<u16, String> {
    for _ in 0..100 {
        let first = free_port()?;
        if (0..parts).all(|i| {
            u16::try_from(first as usize + i)
                .is_ok_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        }) {
            return Ok(first);
        }
    }
    Err(format!("no {parts} consecutive free ports"))
}

/// One endpoint's frames counted, its first part's arrival and its end.
type Counted = (u64, Option<Instant>, Instant);

/// The bare loop on `parts` endpoints: a SUB socket and a thread each, receiving both message
/// parts and counting until the end message; frames/s of the slowest endpoint from the first
/// part's arrival anywhere to the last end.
fn bare_parts(o: &Opts, frames: &Arc<Vec<u16>>, parts: usize) -> Result<f64, String> {
    let port = free_ports(parts)?;
    let ctx = zmq::Context::new();
    let mut subs = Vec::new();
    for i in 0..parts {
        let sub = ctx.socket(zmq::SUB).map_err(|e| e.to_string())?;
        sub.set_rcvhwm(256).map_err(|e| e.to_string())?;
        sub.set_subscribe(b"").map_err(|e| e.to_string())?;
        sub.connect(&format!("tcp://127.0.0.1:{}", port as usize + i))
            .map_err(|e| e.to_string())?;
        subs.push(sub);
    }
    let publisher = publish_parts(o, frames, port, parts, None, true)?;
    let counted: Vec<Result<Counted, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = subs
            .into_iter()
            .map(|sub| {
                s.spawn(move || {
                    let (mut count, mut first) = (0u64, None);
                    loop {
                        let head = sub.recv_msg(0).map_err(|e| e.to_string())?;
                        if !sub.get_rcvmore().map_err(|e| e.to_string())? {
                            let h = ZmqHeader::parse(&head).map_err(|e| format!("{e:?}"))?;
                            if !h.is_data() {
                                break;
                            }
                            continue;
                        }
                        let data = sub.recv_msg(0).map_err(|e| e.to_string())?;
                        std::hint::black_box(data.len());
                        first.get_or_insert_with(Instant::now);
                        count += 1;
                    }
                    Ok((count, first, Instant::now()))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a bare thread panicked".into()))
            })
            .collect()
    });
    publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut least = u64::MAX;
    for c in counted {
        let (count, f, l) = c?;
        least = least.min(count);
        if let Some(f) = f {
            first = Some(first.map_or(f, |x| x.min(f)));
        }
        last = Some(last.map_or(l, |x| x.max(l)));
    }
    if least != o.frames {
        return Err(format!(
            "bare {parts}-endpoint loop got {least} of {} frames",
            o.frames
        ));
    }
    let secs = match (first, last) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Ok(least as f64 / secs.max(1e-9))
}

/// One `cluda stream` run on `parts` endpoints of one acquisition; returns its summary.
fn stream_parts(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    rate: Option<f64>,
    full: FullQueue,
) -> Result<AcquisitionSummary, String> {
    let port = free_ports(o.parts)?;
    let dir = tempfile::Builder::new()
        .prefix("cluda-stream-bench")
        .tempdir_in(&o.tmp)
        .map_err(|e| e.to_string())?;
    let mut config = ReceiverConfig::new(&format!("tcp://127.0.0.1:{port}"));
    config.more_endpoints = (1..o.parts)
        .map(|i| format!("tcp://127.0.0.1:{}", port as usize + i))
        .collect();
    config.full = full;
    let publisher = publish_parts(o, frames, port, o.parts, rate, full == FullQueue::Block)?;
    let mut settings = StreamSettings::new(
        cluda::FindOptions {
            size,
            n_sigma: 5.0,
            precision: Precision::F64,
            ..cluda::FindOptions::default()
        },
        dir.path(),
    );
    settings.device = o.device;
    settings.pedestal = PedestalPlan::Fixed(pedestal.clone());
    settings.acquisitions = Some(1);
    settings.idle_end = Duration::from_secs(2);
    let got = Mutex::new(None);
    let report: cluda::stream::Reporter = Arc::new(|e: &cluda::stream::StreamEvent| {
        eprintln!("  {e:?}");
    });
    cluda::stream::run(
        config,
        &settings,
        Arc::new(AtomicBool::new(false)),
        Callbacks {
            report,
            note: &mut |s: &str| eprintln!("  note: {s}"),
            summary: &mut |s: &AcquisitionSummary| {
                if let Ok(mut g) = got.lock() {
                    *g = Some(s.clone());
                }
                Ok(())
            },
            frame: &mut |_, _| {},
            image: None,
        },
    )
    .map_err(|e| e.to_string())?;
    let sent = publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    let summary = got
        .into_inner()
        .ok()
        .flatten()
        .ok_or("no summary from the stream")?;
    eprintln!("  {summary}  (sent {} frames)", sent.frames);
    Ok(summary)
}

/// The tables a section adds its rows to: the results' csv and md, the goals, the time
/// breakdowns.
struct Tables<'a> {
    csv: &'a mut String,
    md: &'a mut String,
    goals: &'a mut Vec<String>,
    timings: &'a mut Vec<String>,
}

/// The rows of frames in `o.parts` parts for one cluster size: the bare loop on that many
/// endpoints, the stream as fast as it takes frames and at `--fraction` of the bare rate;
/// ratios against the one-endpoint bare loop `bare_fps`.
fn parts_rows(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    bare_fps: f64,
    out: Tables<'_>,
) -> Result<(), String> {
    let Tables {
        csv,
        md,
        goals,
        timings,
    } = out;
    let (side, n) = (size.side(), o.parts);
    eprintln!("size {side}: bare loop on {n} endpoints");
    let bare_n = bare_parts(o, frames, n)?;
    eprintln!("  bare-{n}ep: {bare_n:.0} frames/s");
    let _ = writeln!(
        csv,
        "{side},bare-{n}ep,{},{bare_n:.1},{:.3},0,0,0,-",
        o.frames,
        bare_n / bare_fps
    );
    let _ = writeln!(
        md,
        "| {side}x{side} | bare-{n}ep | {bare_n:.0} | {:.1} % | 0 | 0 | - | - |",
        100.0 * bare_n / bare_fps
    );
    goals.push(format!(
        "- {side}x{side}: {n} endpoints / 1 endpoint, bare loops: {bare_n:.0} / {bare_fps:.0} = {:.2}x",
        bare_n / bare_fps
    ));
    for (name, rate, full) in [
        (format!("stream-{n}ep-max"), None, FullQueue::Block),
        (
            format!("stream-{n}ep-rate"),
            Some(bare_n * o.fraction),
            FullQueue::Drop,
        ),
    ] {
        eprintln!("size {side}: {name}");
        let sampler = ThreadSampler::start();
        let s = stream_parts(o, frames, pedestal, size, rate, full)?;
        timings.push(timing_row(side, &name, &s, &sampler.stop()));
        let fps = s.fps();
        let c = &s.counts;
        let _ = writeln!(
            csv,
            "{side},{name},{},{fps:.1},{:.3},{},{},{:.1},{}",
            s.data_frames,
            fps / bare_fps,
            c.dropped + c.incomplete,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        let _ = writeln!(
            md,
            "| {side}x{side} | {name} | {fps:.0} | {:.1} % | {} | {} | {:.1} | {} |",
            100.0 * fps / bare_fps,
            c.dropped + c.incomplete,
            c.missing,
            s.worst_lag.as_secs_f64() * 1e3,
            s.device
        );
        if rate.is_none() {
            goals.push(format!(
                "- {side}x{side}: {n}-endpoint stream sustains {fps:.0} frames/s = {:.2}x the one-endpoint bare loop's {bare_fps:.0} (goal >= 1.8x): {}",
                fps / bare_fps,
                if fps >= 1.8 * bare_fps { "met" } else { "NOT met" }
            ));
        } else {
            let sent = rate.unwrap_or(0.0);
            let lost = c.dropped + c.missing + c.incomplete;
            let kept_up = lost == 0 && fps >= 0.95 * sent;
            goals.push(format!(
                "- {side}x{side}: {n} endpoints sent at {sent:.0} frames/s ({:.0} % of bare-{n}ep), stream processed {fps:.0} frames/s, dropped {}, incomplete {}, missed {} frames, {} late parts (goal: 0 lost, keeping up): {}",
                o.fraction * 100.0,
                c.dropped,
                c.incomplete,
                c.missing,
                c.late,
                if kept_up { "met" } else { "NOT met" }
            ));
        }
    }
    Ok(())
}
