//! Live cluster finding on a ZMQ stream, measured: `replay` -> `stream` over TCP loopback against
//! a bare ZMQ receive loop that only counts frames, in the same run.
//!
//! `cargo bench --bench stream -- [--frames 200000] [--distinct 1000] [--sizes 3,9]
//!  [--device auto|gpu|cpu] [--rows 400] [--cols 400] [--fraction 0.9] [--parts 2] [--tmp DIR]
//!  [--out DIR]`
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
//! With `--parts N` (N > 1, default 2) the same again with every frame sent as N parts on N
//! ports (`cluda replay --interfaces N`, each part from its own thread) and received on N
//! endpoints (`cluda stream --zmq .. --zmq ..`, a receiving thread each): `bare-Nep` (N SUB
//! sockets on N threads, counting), `stream-Nep-max` and `stream-Nep-rate` (at `--fraction`
//! of `bare-Nep`), each also against the one-endpoint bare loop (goal: `stream-Nep-max` at
//! least 1.8 times it, 0 dropped at the fixed rate).
//!
//! `fps` counts frames from the first frame's arrival to the acquisition's end (for `stream`:
//! its last cluster written and the file committed). Cluster files go to `--tmp` (default
//! `/dev/shm` when it exists) and are removed after each run. Results: `stream.csv` and
//! `stream.md` under `--out` (default `bench-results/stream`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluda::finder::select::DeviceChoice;
use cluda::generate::{GenConfig, Generator};
use cluda::stream::{
    AcquisitionSummary, Callbacks, FullQueue, PedestalPlan, Publisher, ReceiverConfig,
    ReplaySettings, StreamSettings, ZmqHeader, replay,
};
use cluda::{ClusterSize, Frames, Pedestal, Precision};
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
}

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

/// Starts the publisher on a thread: binds, waits for one subscriber, replays.
fn publish(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    port: u16,
    rate: Option<f64>,
    no_drop: bool,
) -> std::thread::JoinHandle<Result<cluda::stream::ReplayStats, String>> {
    let (frames, rows, cols, total) = (Arc::clone(frames), o.rows, o.cols, o.frames);
    std::thread::spawn(move || {
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
    })
}

/// The bare loop: a SUB socket receiving both parts of every message, counting frames until
/// the end message; frames/s from the first frame to the end.
fn bare(o: &Opts, frames: &Arc<Vec<u16>>) -> Result<f64, String> {
    let port = free_port()?;
    let ctx = zmq::Context::new();
    let sub = ctx.socket(zmq::SUB).map_err(|e| e.to_string())?;
    sub.set_rcvhwm(256).map_err(|e| e.to_string())?;
    sub.set_subscribe(b"").map_err(|e| e.to_string())?;
    sub.connect(&format!("tcp://127.0.0.1:{port}"))
        .map_err(|e| e.to_string())?;
    let publisher = publish(o, frames, port, None, true);
    let (mut count, mut first) = (0u64, None);
    loop {
        let head = sub.recv_msg(0).map_err(|e| e.to_string())?;
        let more = sub.get_rcvmore().map_err(|e| e.to_string())?;
        if !more {
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
    let secs = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    publisher
        .join()
        .map_err(|_| "publisher panicked".to_string())??;
    if count != o.frames {
        return Err(format!("bare loop got {count} of {} frames", o.frames));
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
    let port = free_port()?;
    let dir = tempfile::Builder::new()
        .prefix("cluda-stream-bench")
        .tempdir_in(&o.tmp)
        .map_err(|e| e.to_string())?;
    let mut config = ReceiverConfig::new(&format!("tcp://127.0.0.1:{port}"));
    config.full = full;
    let publisher = publish(o, frames, port, rate, full == FullQueue::Block);
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
    // The sender's end message can be dropped at its high-water mark like any frame.
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

fn main() {
    if let Err(e) = run() {
        eprintln!("stream bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let o = parse()?;
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
    for &side in &o.sizes {
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
            eprintln!("size {side}: {name}");
            let s = stream(&o, &frames, &pedestal, size, rate, full)?;
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
        if o.parts > 1 {
            parts_rows(
                &o, &frames, &pedestal, size, bare_fps, &mut csv, &mut md, &mut goals,
            )?;
        }
    }
    if o.parts > 1 {
        let n = o.parts;
        let _ = writeln!(
            md,
            "\n`--parts {n}`: `bare-{n}ep`, `stream-{n}ep-max`, `stream-{n}ep-rate` send every frame as {n} parts of {} rows on {n} ports (`cluda replay --interfaces {n}`, a thread per part) into {n} endpoints (`cluda stream --zmq .. --zmq ..`, a receiving thread each); `bare-{n}ep` receives and counts on {n} SUB sockets and threads; `stream-{n}ep-rate` sends at {:.0} % of `bare-{n}ep`. \"of bare\" is against the one-endpoint bare loop; `dropped` counts frames dropped or incomplete.",
            o.rows / n,
            o.fraction * 100.0
        );
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
) -> std::thread::JoinHandle<Result<cluda::stream::ReplayStats, String>> {
    let (frames, rows, cols, total) = (Arc::clone(frames), o.rows, o.cols, o.frames);
    std::thread::spawn(move || {
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
    })
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
    let publisher = publish_parts(o, frames, port, parts, None, true);
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
    let publisher = publish_parts(o, frames, port, o.parts, rate, full == FullQueue::Block);
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

/// The rows of frames in `o.parts` parts for one cluster size: the bare loop on that many
/// endpoints, the stream as fast as it takes frames and at `--fraction` of the bare rate;
/// ratios against the one-endpoint bare loop `bare_fps`.
#[allow(clippy::too_many_arguments)]
fn parts_rows(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    size: ClusterSize,
    bare_fps: f64,
    csv: &mut String,
    md: &mut String,
    goals: &mut Vec<String>,
) -> Result<(), String> {
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
        let s = stream_parts(o, frames, pedestal, size, rate, full)?;
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
