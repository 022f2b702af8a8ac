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
//!
//! One module a job: [`endpoint`] (the runs), [`live`] (live eta rows), [`threads`] (where the
//! time went), [`back_to_back`], [`parts`].

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
use cluda::stream::replay::replay_parts;
use cluda::stream::{
    AcquisitionSummary, Callbacks, FullQueue, PedestalPlan, Publisher, ReceiverConfig,
    ReplaySettings, StreamImaging, StreamSettings, ZmqHeader,
};
use cluda::{ClusterFinder, ClusterSize, Frames, Pedestal, Precision};
/// `--distinct` frames sent over and over, numbered from 0, `--frames` in all: the long-run
/// tests' pool source, shared with them.
use support::pool_source::PoolSource;
use support::stream::{free_ports, loopback};

mod back_to_back;
mod endpoint;
mod live;
mod parts;
mod threads;

use back_to_back::*;
use endpoint::*;
use live::*;
use parts::*;
use threads::*;

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
            "--sizes" => o.sizes = support::bench::parse_list(&val()?)?,
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

fn main() {
    support::bench::main("stream bench", run);
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
        support::bench::comma_list(&o.sizes),
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
            let s = stream(&o, &frames, &pedestal, (size, 1), rate, full)?;
            timings.push(timing_row(side, name, &s, &sampler.stop()));
            let (fps, c) = (s.fps(), &s.counts);
            stream_row((&mut csv, &mut md), (side, name), &s, bare_fps, c.dropped);
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

/// The tables a section adds its rows to: the results' csv and md, the goals, the time
/// breakdowns.
struct Tables<'a> {
    csv: &'a mut String,
    md: &'a mut String,
    goals: &'a mut Vec<String>,
    timings: &'a mut Vec<String>,
}

/// Writes one `cluda stream` run's row (`name`, its summary `s`) to the csv and md tables,
/// against the bare loop's `bare_fps`; `dropped` is what the row counts as dropped.
fn stream_row(
    (csv, md): (&mut String, &mut String),
    (side, name): (usize, &str),
    s: &AcquisitionSummary,
    bare_fps: f64,
    dropped: u64,
) {
    let fps = s.fps();
    let (missing, lag_ms) = (s.counts.missing, s.worst_lag.as_secs_f64() * 1e3);
    let (frames, device) = (s.data_frames, &s.device);
    let _ = writeln!(
        csv,
        "{side},{name},{frames},{fps:.1},{:.3},{dropped},{missing},{lag_ms:.1},{device}",
        fps / bare_fps
    );
    let _ = writeln!(
        md,
        "| {side}x{side} | {name} | {fps:.0} | {:.1} % | {dropped} | {missing} | {lag_ms:.1} | {device} |",
        100.0 * fps / bare_fps
    );
}
