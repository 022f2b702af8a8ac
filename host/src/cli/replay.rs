//! `cluda replay`: publishes `.npy` or raw acquisitions on a ZMQ socket as slsReceiver does
//! (the library's [`cluda::stream::replay`]), for testing a DAQ set-up without a detector.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use cluda::io::{FrameSource, NpyFrames, input_files, open_frames_or};
use cluda::stream::replay::{consecutive_endpoints, replay_parts};
use cluda::stream::{Publisher, ReplaySettings};
use cluda::{Error, Result};

use super::args::ReplayArgs;
use super::output::print_line;
use super::signals;

/// Runs `cluda replay`; prints `acquisitions=K frames=N seconds=X fps=X` on stdout.
pub fn run(args: &ReplayArgs) -> Result<()> {
    for p in &args.data {
        input_files(p)?;
    }
    if !(args.wait.is_finite() && (0.0..=86_400.0).contains(&args.wait)) {
        return Err(Error::param(
            "wait",
            format!("must be between 0 and 86400 seconds, got {}", args.wait),
        ));
    }
    if let Some(r) = args.rate {
        cluda::stream::replay::period_of(r)?;
    }
    if args.hwm < 0 {
        return Err(Error::param(
            "hwm",
            format!("must not be negative, got {}", args.hwm),
        ));
    }
    // Open every input once before binding, so a bad file fails before anything is sent.
    for p in &args.data {
        drop(open(p)?);
    }
    let endpoints = consecutive_endpoints(&args.zmq, args.interfaces as usize)?;
    let mut publishers = endpoints
        .iter()
        .map(|e| Publisher::bind(e, args.hwm, args.no_drop))
        .collect::<Result<Vec<_>>>()?;
    for (p, e) in publishers.iter().zip(&endpoints) {
        eprintln!(
            "note: publishing on {} (XPUB, as slsReceiver's PUB)",
            p.last_endpoint().unwrap_or_else(|_| e.clone())
        );
    }
    for publisher in &mut publishers {
        wait_for(publisher, args)?;
    }
    let settings = ReplaySettings {
        rate: args.rate,
        repeat: args.acquisitions,
        first_frame: args.first_frame,
        fname: args.fname.clone(),
        file_index: args.file_index,
        every: args.every,
        rx_roi: args
            .rx_roi
            .map(|r| [r.xmin, r.xmax, r.ymin, r.ymax].map(|v| v as i64)),
        ..ReplaySettings::default()
    };
    let stop = signals::stop_flag().unwrap_or_else(|| Arc::new(AtomicBool::new(false)));
    let data: Vec<PathBuf> = args.data.clone();
    let stats = replay_parts(
        &mut publishers,
        data.len(),
        &mut |i| open(&data[i]),
        &settings,
        &stop,
    )?;
    signals::check()?;
    let fps = if stats.seconds > 0.0 {
        stats.frames as f64 / stats.seconds
    } else {
        0.0
    };
    print_line(&format!(
        "acquisitions={} frames={} seconds={:.3} fps={fps:.1}",
        stats.acquisitions, stats.frames, stats.seconds
    ))
}

fn open(path: &std::path::Path) -> Result<Box<dyn FrameSource + Send>> {
    open_frames_or(path, |p| {
        Ok(Box::new(NpyFrames::open(p)?) as Box<dyn FrameSource + Send>)
    })
}

/// Waits (at most `--wait` seconds, in slices so a signal ends it) for `--subscribers`
/// subscribers of `publisher`; fewer is a warning.
fn wait_for(publisher: &mut Publisher, args: &ReplayArgs) -> Result<()> {
    if args.subscribers == 0 {
        return Ok(());
    }
    let until = Instant::now() + Duration::from_secs_f64(args.wait);
    let mut got = publisher.subscribers();
    while got < args.subscribers {
        signals::check()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        got = publisher
            .wait_for_subscribers(args.subscribers, left.min(Duration::from_millis(200)))?;
    }
    signals::check()?;
    if got < args.subscribers {
        eprintln!(
            "warning: replay: {got} of {} subscribers after {} s; sending anyway",
            args.subscribers, args.wait
        );
    }
    Ok(())
}
