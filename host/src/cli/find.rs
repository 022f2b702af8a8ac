//! `cluda find`, and the find path it shares with `cluda demo`.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cluda::finder::select::open_finder;
use cluda::io::ClusterFileWriter;
use cluda::plot::{PlotAccumulator, SpectrumOptions};
use cluda::{Error, FinderConfig, Frames, Result};

use super::args::{FindArgs, FinderArgs};
use super::inputs::{Input, chunk_frames};
use super::progress::frames_bar;
use super::summary::{Spectrum, Summary};

/// Runs `cluda find`: prints the summary line on stdout.
pub fn run(args: &FindArgs) -> Result<()> {
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
        .size(args.cluster)
        .n_sigma(args.nsigma)
        .pedestal_frames(n)
        .threshold(args.threshold)
        .precision(args.precision);
    let (mut finder, note) = open_finder(config, args.device, args.threads)?;
    eprintln!("note: {note}");
    let mut writer = outputs
        .clusters
        .map(ClusterFileWriter::create)
        .transpose()?;
    let mut plot = outputs
        .plots
        .map(|_| PlotAccumulator::with_options(rows, cols, &outputs.plot_options))
        .transpose()?;
    let chunk = chunk_frames(rows, cols);
    let (mut buf, mut numbers) = (Vec::new(), Vec::new());

    let bar = frames_bar(pedestal.len, "pedestal");
    let mut pushed = 0u64;
    loop {
        buf.clear();
        numbers.clear();
        let k = pedestal.frames.read_frames(chunk, &mut buf, &mut numbers)?;
        if k == 0 {
            break;
        }
        pushed += k as u64;
        if pushed > pedestal.len {
            break;
        }
        finder.push_pedestal(Frames::new(&buf, k, rows, cols)?)?;
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

    let bar = frames_bar(data.len, "finding");
    let (mut frames, mut clusters) = (0u64, 0u64);
    let mut busy = Duration::ZERO;
    loop {
        buf.clear();
        numbers.clear();
        let k = data.frames.read_frames(chunk, &mut buf, &mut numbers)?;
        if k == 0 {
            break;
        }
        let start = Instant::now();
        let describe = &data.describe;
        finder.find_each(Frames::new(&buf, k, rows, cols)?, &mut |fc| {
            clusters += fc.len() as u64;
            if let Some(w) = writer.as_mut() {
                let number = numbers.get(fc.frame).copied().unwrap_or(u64::MAX);
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
    warn_gaps(data);
    if let (Some(p), Some(dir)) = (plot, outputs.plots) {
        for path in p.finish(&finder.pedestal()?, dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    let device = finder.device();
    Ok(Summary {
        frames,
        clusters,
        seconds: busy.as_secs_f64(),
        device: device.split_whitespace().next().unwrap_or("?").to_string(),
        precision: args.precision.name(),
    })
}

/// Prints a raw input's gap report on stderr when frames were missing, partial or truncated.
fn warn_gaps(input: &Input<'_>) {
    if let Some(g) = input.frames.gaps().filter(|g| !g.is_clean()) {
        eprintln!("warning: {}: {}", input.describe, g.summary());
    }
}
