//! The runs: the publisher (one endpoint or frames in parts), the bare receive loop, and
//! `cluda stream` through the library.

use crate::*;

/// Starts the publisher on a thread: binds `parts` loopback ports from `port` on, waits for a
/// subscriber on each, replays `acquisitions` acquisitions of `per` frames each, back to back
/// (each numbered from 0, `fileIndex` 0, 1, 2, ...); with several parts, every frame goes out
/// as `parts` parts, each from a thread of its own.
pub(crate) fn publish(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    (port, parts): (u16, usize),
    rate: Option<f64>,
    no_drop: bool,
    (acquisitions, per): (u64, u64),
) -> Result<std::thread::JoinHandle<Result<cluda::stream::ReplayStats, String>>, String> {
    let (frames, rows, cols, total) = (Arc::clone(frames), o.rows, o.cols, per);
    // Named, so the thread table tells its libzmq I/O threads and its part threads (which take
    // its name) from the receiver's.
    let named = std::thread::Builder::new().name("bench-replay".into());
    let spawned = named.spawn(move || {
        SENDER_TID.store(this_tid(), std::sync::atomic::Ordering::SeqCst);
        let mut pubs = (0..parts as u16)
            .map(|i| Publisher::bind(&loopback(port + i), 1000, no_drop).map_err(|e| e.to_string()))
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
            repeat: acquisitions,
            ..ReplaySettings::default()
        };
        replay_parts(
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
    spawned.map_err(|e| format!("the sender's thread: {e}"))
}

/// A SUB socket of `ctx` subscribed to everything on the loopback `port`.
pub(crate) fn subscriber(ctx: &zmq::Context, port: u16) -> Result<zmq::Socket, String> {
    let sub = ctx.socket(zmq::SUB).map_err(|e| e.to_string())?;
    sub.set_rcvhwm(256).map_err(|e| e.to_string())?;
    sub.set_subscribe(b"").map_err(|e| e.to_string())?;
    sub.connect(&loopback(port)).map_err(|e| e.to_string())?;
    Ok(sub)
}

/// The bare loop's work on one socket: receives both parts of every message, counting frames,
/// until `ends` end messages came; returns the frames counted and the first one's arrival.
pub(crate) fn count_frames(sub: &zmq::Socket, ends: u64) -> Result<(u64, Option<Instant>), String> {
    let (mut count, mut first, mut seen) = (0u64, None, 0u64);
    loop {
        let head = sub.recv_msg(0).map_err(|e| e.to_string())?;
        if !sub.get_rcvmore().map_err(|e| e.to_string())? {
            let h = ZmqHeader::parse(&head).map_err(|e| format!("{e:?}"))?;
            if !h.is_data() {
                seen += 1;
                if seen == ends {
                    return Ok((count, first));
                }
            }
            continue;
        }
        let data = sub.recv_msg(0).map_err(|e| e.to_string())?;
        std::hint::black_box(data.len());
        first.get_or_insert_with(Instant::now);
        count += 1;
    }
}

/// The bare loop: a SUB socket receiving both parts of every message, counting frames until
/// the end message; frames/s from the first frame to the end.
pub(crate) fn bare(o: &Opts, frames: &Arc<Vec<u16>>) -> Result<f64, String> {
    bare_acquisitions(o, frames, (1, o.frames))
}

/// As [`bare`] over `acquisitions` acquisitions of `per` frames sent back to back: frames/s
/// from the first frame to the last end message.
pub(crate) fn bare_acquisitions(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    (acquisitions, per): (u64, u64),
) -> Result<f64, String> {
    let port = free_ports(1);
    let ctx = zmq::Context::new();
    let sub = subscriber(&ctx, port)?;
    let publisher = publish(o, frames, (port, 1), None, true, (acquisitions, per))?;
    let (count, first) = count_frames(&sub, acquisitions)?;
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

/// One `cluda stream` run of one acquisition on `parts` endpoints; returns its summary.
pub(crate) fn stream(
    o: &Opts,
    frames: &Arc<Vec<u16>>,
    pedestal: &Pedestal,
    (size, parts): (ClusterSize, usize),
    rate: Option<f64>,
    full: FullQueue,
) -> Result<AcquisitionSummary, String> {
    let run = Run {
        size,
        rate,
        full,
        shape: (1, o.frames),
        parts,
    };
    stream_run(o, frames, pedestal, &run, None)?
        .0
        .pop()
        .ok_or_else(|| "no summary from the stream".to_string())
}

/// One `cluda stream` run over `acquisitions` acquisitions of `per` frames sent back to back;
/// returns their summaries in order.
pub(crate) fn stream_acquisitions(
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
        parts: 1,
    };
    stream_run(o, frames, pedestal, &run, None).map(|(summaries, _)| summaries)
}

/// What one `cluda stream` run is asked for: the cluster size, the sender's rate (`None`: as
/// fast as the stream takes frames), what a full queue does, `(acquisitions, frames each)`,
/// and the endpoints every frame comes on in parts.
pub(crate) struct Run {
    pub(crate) size: ClusterSize,
    pub(crate) rate: Option<f64>,
    pub(crate) full: FullQueue,
    pub(crate) shape: (u64, u64),
    pub(crate) parts: usize,
}

/// As [`stream_acquisitions`], with `live` eta interpolation: also returns what it counted
/// (see [`live_output`]; 0 without it).
pub(crate) fn stream_run(
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
        parts,
    } = run;
    let port = free_ports(parts);
    let dir = tempfile::Builder::new()
        .prefix("cluda-stream-bench")
        .tempdir_in(&o.tmp)
        .map_err(|e| e.to_string())?;
    let mut config = ReceiverConfig::new(&loopback(port));
    config.more_endpoints = (1..parts as u16).map(|i| loopback(port + i)).collect();
    config.full = full;
    let no_drop = full == FullQueue::Block;
    let publisher = publish(o, frames, (port, parts), rate, no_drop, (acquisitions, per))?;
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
