//! `cluda find`, and the find path it shares with `cluda demo`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cluda::finder::select::open_finder;
use cluda::io::ClusterFileWriter;
use cluda::{Error, FinderConfig, Frames, Result};

use super::args::{FindArgs, FinderArgs};
use super::progress::frames_bar;
use super::source::{FrameSource, NpySource, chunk_frames};
use super::summary::{Spectrum, Summary};

/// Runs `cluda find`: prints the summary line on stdout.
pub fn run(args: &FindArgs) -> Result<()> {
    let mut pedestal = NpySource::open(&args.pedestal, "pedestal")?;
    let mut data = NpySource::open(&args.data, "data")?;
    let summary = find_clusters(
        &args.finder,
        &mut pedestal,
        &mut data,
        args.out.as_deref(),
        None,
    )?;
    print_line(&summary.to_string())
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
/// `out` (aare's cluster file, frame numbers counting from 0) and adding their sums to
/// `spectrum` as they stream past. Nothing holds more than one chunk of frames or clusters.
pub fn find_clusters(
    args: &FinderArgs,
    pedestal: &mut dyn FrameSource,
    data: &mut dyn FrameSource,
    out: Option<&Path>,
    mut spectrum: Option<&mut Spectrum>,
) -> Result<Summary> {
    let (rows, cols) = (pedestal.rows(), pedestal.cols());
    if (data.rows(), data.cols()) != (rows, cols) {
        return Err(Error::shape(
            format!("{} against {}", data.describe(), pedestal.describe()),
            format!("{rows} x {cols} frames (as in the pedestal)"),
            format!("{} x {} frames", data.rows(), data.cols()),
        ));
    }
    if pedestal.len() == 0 {
        return Err(Error::param(
            "pedestal",
            format!(
                "{} holds no frames; the pedestal needs at least one",
                pedestal.describe()
            ),
        ));
    }
    let n = u32::try_from(pedestal.len()).map_err(|_| {
        Error::param(
            "pedestal",
            format!(
                "{} holds {} frames, more than a pedestal window of at most {} frames",
                pedestal.describe(),
                pedestal.len(),
                u32::MAX
            ),
        )
    })?;
    if out.is_some() && data.len() > i32::MAX as usize + 1 {
        return Err(Error::param(
            "out",
            format!(
                "{} holds {} frames; cluster file frame numbers are i32",
                data.describe(),
                data.len()
            ),
        ));
    }
    let config = FinderConfig::new(rows, cols)
        .size(args.cluster)
        .n_sigma(args.nsigma)
        .pedestal_frames(n)
        .threshold(args.threshold)
        .precision(args.precision);
    let (mut finder, note) = open_finder(config, args.device, args.threads)?;
    eprintln!("note: {note}");
    let mut writer = out.map(ClusterFileWriter::create).transpose()?;
    let chunk = chunk_frames(rows, cols);
    let mut buf = Vec::new();

    let bar = frames_bar(pedestal.len() as u64, "pedestal");
    loop {
        let k = pedestal.read_into(chunk, &mut buf)?;
        if k == 0 {
            break;
        }
        finder.push_pedestal(Frames::new(&buf, k, rows, cols)?)?;
        bar.inc(k as u64);
    }
    bar.finish_and_clear();

    let bar = frames_bar(data.len() as u64, "finding");
    let (mut frames, mut clusters) = (0u64, 0u64);
    let mut busy = Duration::ZERO;
    loop {
        let k = data.read_into(chunk, &mut buf)?;
        if k == 0 {
            break;
        }
        let first = frames;
        let start = Instant::now();
        finder.find_each(Frames::new(&buf, k, rows, cols)?, &mut |fc| {
            clusters += fc.len() as u64;
            if let Some(w) = writer.as_mut() {
                // Checked above: every frame number fits in i32.
                w.write_frame((first + fc.frame as u64) as i32, &fc)?;
            }
            if let Some(s) = spectrum.as_deref_mut() {
                for c in fc.iter() {
                    s.add(c.sum());
                }
            }
            Ok(())
        })?;
        busy += start.elapsed();
        frames += k as u64;
        bar.inc(k as u64);
    }
    if let Some(w) = writer {
        let start = Instant::now();
        w.finish()?;
        busy += start.elapsed();
    }
    bar.finish_and_clear();
    let device = finder.device();
    Ok(Summary {
        frames,
        clusters,
        seconds: busy.as_secs_f64(),
        device: device.split_whitespace().next().unwrap_or("?").to_string(),
        precision: args.precision.name(),
    })
}
