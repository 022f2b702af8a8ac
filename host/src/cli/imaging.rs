//! `cluda eta` and `cluda image`: a session over every data input (as `find --data A B C`)
//! with an eta-cube or imaging sink ([`cluda::engine::imaging`]) instead of cluster files,
//! then the cube or the image written.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cluda::engine::imaging::{
    CubeSink, ImagingOutputs, ImagingSink, PhotonDestination, frame_shape, read_gain_for,
    read_mask_for,
};
use cluda::engine::paths::find_paths;
use cluda::engine::plan::output_name;
use cluda::engine::sink::{FnSink, Sink, Sinks};
use cluda::interpolation::files::{ImageFormat, read_cube, write_cube, write_image};
use cluda::interpolation::{CubeAxes, Edges, Interpolator, Tally};
use cluda::io::atomic::Claim;
use cluda::io::{AtomicFile, check_output, check_overwrite, input_files};
use cluda::{Error, FrameClusters, Result};

use super::args::{EtaArgs, FinderArgs, ImageArgs};
use super::find::run_options;
use super::output::print_line;
use super::progress::frames_bar;
use super::signals;

/// What a session over several inputs did, as the summary lines need it.
struct Totals {
    frames: u64,
    seconds: f64,
    device: String,
    failed: usize,
}

/// Finds every data input through `sink` ([`find_paths`]) with a progress bar, and prints
/// the device note, each failed input, warnings and `--timing` lines on stderr.
fn find_into(
    finder: &FinderArgs,
    pedestal: &Path,
    data: &[PathBuf],
    carry: bool,
    sink: &mut dyn Sink,
) -> Result<Totals> {
    let options = run_options(finder);
    let bar = frames_bar(0, "finding");
    let mut progress = FnSink(|_, _: &FrameClusters<'_>| {
        bar.inc(1);
        Ok(())
    });
    let mut sinks = Sinks(vec![sink, &mut progress]);
    let result = find_paths(
        &options,
        pedestal,
        data,
        carry,
        &signals::check,
        &mut |frames| bar.set_length(frames),
        &mut sinks,
    );
    bar.finish_and_clear();
    let r = result?;
    eprintln!("note: {}", r.device_note);
    for n in &r.notes {
        eprintln!("note: {n}");
    }
    for (path, e) in &r.failed {
        eprintln!("error: {}: {e}", path.display());
    }
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if finder.timing {
        for line in r.reports.iter().flat_map(|r| r.timing.lines()) {
            eprintln!("{line}");
        }
    }
    Ok(Totals {
        frames: r.frames,
        seconds: r.seconds,
        device: r.device.split_whitespace().next().unwrap_or("?").into(),
        failed: r.failed.len(),
    })
}

/// Refuses an output that is an input, exists without `overwrite`, or cannot be created.
fn check_out(out: &Path, option: &'static str, inputs: &[PathBuf], overwrite: bool) -> Result<()> {
    check_output(out, option, inputs)?;
    check_overwrite(out, option, overwrite)?;
    drop(AtomicFile::create(out)?);
    Ok(())
}

/// Every file of the pedestal and data inputs.
fn all_inputs(pedestal: &Path, data: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut v = input_files(pedestal)?;
    for d in data {
        v.extend(input_files(d)?);
    }
    Ok(v)
}

/// The common tail of both summaries.
fn rate(t: &Totals) -> String {
    let us = if t.frames > 0 {
        t.seconds * 1e6 / t.frames as f64
    } else {
        0.0
    };
    format!(
        "seconds={:.3} us_per_frame={us:.2} device={}",
        t.seconds, t.device
    )
}

/// The failure of a run some of whose inputs failed.
fn failed(t: &Totals, inputs: usize) -> Result<()> {
    if t.failed > 0 {
        return Err(Error::param(
            "data",
            format!(
                "{} of {inputs} inputs failed (named above); the others were counted",
                t.failed
            ),
        ));
    }
    Ok(())
}

/// `cluda eta`.
pub fn run_eta(args: &EtaArgs) -> Result<()> {
    let inputs = all_inputs(&args.pedestal, &args.data)?;
    let meta = cluda::interpolation::files::metadata_path(&args.out);
    check_out(&args.out, "out", &inputs, args.overwrite)?;
    check_out(&meta, "out", &inputs, args.overwrite)?;
    let c = &args.cube;
    let axes = CubeAxes {
        kind: c.eta_kind.0,
        x: Edges::linspace("eta-bins", c.eta_range.0, c.eta_range.1, c.eta_bins)?,
        y: Edges::linspace("eta-bins", c.eta_range.0, c.eta_range.1, c.eta_bins)?,
        e: Edges::new("energy-edges", c.energy_edges.0.clone())?,
    };
    let frames = frame_shape(&args.pedestal)?;
    let mask = read_mask_for(args.mask.as_deref(), frames)?;
    let gain = read_gain_for(args.gain.as_deref(), frames)?;
    let unit = if gain.is_some() { "keV" } else { "ADU" };
    let mut sink = CubeSink::new(axes, !args.host_counts)?
        .with_mask(mask)
        .with_gain(gain);
    let totals = find_into(
        &args.finder,
        &args.pedestal,
        &args.data,
        args.carry_pedestal,
        &mut sink,
    )?;
    let on = if sink.counted_on_device() {
        "device"
    } else {
        "host"
    };
    let cube = sink.into_cube();
    write_cube(&args.out, &cube, unit, claim(args.overwrite))?;
    let t: &Tally = cube.tally();
    print_line(&format!(
        "frames={} {} {} counted_on={on} out={}",
        totals.frames,
        t.summary(),
        rate(&totals),
        args.out.display()
    ))?;
    failed(&totals, args.data.len())
}

/// `cluda image`.
pub fn run_image(args: &ImageArgs) -> Result<()> {
    if args.out.is_none() && args.photons.is_none() && args.out_dir.is_none() {
        return Err(Error::param(
            "out",
            "nothing to write: give --out (the image), --photons or --out-dir",
        ));
    }
    if args.photons.is_some() && args.data.len() > 1 {
        return Err(Error::param(
            "photons",
            "--photons names one file; with several --data inputs use --out-dir",
        ));
    }
    let inputs = all_inputs(&args.pedestal, &args.data)?;
    if let Some(out) = &args.out {
        ImageFormat::of(out)?;
        check_out(out, "out", &inputs, args.overwrite)?;
    }
    if let Some(p) = &args.photons {
        check_out(p, "photons", &inputs, args.overwrite)?;
        if args
            .out
            .as_ref()
            .is_some_and(|o| cluda::io::same_file(o, p))
        {
            return Err(Error::param(
                "photons",
                "--photons and --out name the same file",
            ));
        }
    }
    let photons: Vec<Option<PhotonDestination>> = match (&args.photons, &args.out_dir) {
        (Some(p), _) => vec![Some(PhotonDestination::File(p.clone()))],
        (None, Some(dir)) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::param("out-dir", format!("{}: {e}", dir.display())))?;
            let mut used = HashSet::new();
            args.data
                .iter()
                .map(|d| {
                    Some(PhotonDestination::File(output_name(
                        dir,
                        d,
                        "photons.npy",
                        &mut used,
                    )))
                })
                .collect()
        }
        (None, None) => vec![None; args.data.len()],
    };
    let png = match &args.plot {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::param("plot", format!("{}: {e}", dir.display())))?;
            let png = dir.join("image.png");
            check_out(&png, "plot", &inputs, args.overwrite)?;
            Some(png)
        }
        None => None,
    };
    let (axes, cube, _) = read_cube(&args.eta, args.eta_kind.map(|k| k.0))?;
    let maps = Arc::new(Interpolator::new(axes, &cube, args.maps)?);
    let (rows, cols) = frame_shape(&args.pedestal)?;
    let mask = read_mask_for(args.mask.as_deref(), (rows, cols))?;
    let mut sink = ImagingSink::new(
        rows,
        cols,
        maps,
        args.energy_window,
        mask,
        ImagingOutputs {
            subpixels: args.out.as_ref().map(|_| args.subpixels),
            photons,
            // --out-dir names are planned free; one that appears meanwhile gets a suffix.
            claim: match (args.overwrite, &args.out_dir) {
                (true, _) => Claim::Replace,
                (false, Some(_)) => Claim::NextFree,
                (false, None) => Claim::Refuse,
            },
        },
        !args.host_counts,
    )?
    .with_gain(read_gain_for(args.gain.as_deref(), (rows, cols))?)?;
    // `--threads` bounds the placement threads too (the CPU finder's band threads need the
    // cores; placing is a few per cent of finding).
    if let Some(t) = args.finder.options.threads {
        sink = sink.with_threads(t)?;
    }
    let totals = find_into(
        &args.finder,
        &args.pedestal,
        &args.data,
        args.carry_pedestal,
        &mut sink,
    )?;
    let on = if sink.counted_on_device() {
        "device"
    } else {
        "host"
    };
    let mut line = format!("frames={} {}", totals.frames, sink.tally().summary());
    if let (Some(out), Some(img)) = (&args.out, sink.image()) {
        write_image(out, img, claim(args.overwrite))?;
        line += &format!(" counted={}", img.total());
        if let Some(png) = &png {
            cluda::plot::subpixel_png(png, img, args.overwrite)?;
            eprintln!("wrote {}", png.display());
        }
    }
    line += &format!(" {} counted_on={on}", rate(&totals));
    if !sink.photon_files().is_empty() {
        let placed = if sink.placed_on_device() {
            "device"
        } else {
            "host"
        };
        line += &format!(" photons_placed_on={placed}");
    }
    if let Some(out) = &args.out {
        line += &format!(" out={}", out.display());
    }
    for p in sink.photon_files() {
        eprintln!("wrote {}", p.display());
    }
    print_line(&line)?;
    failed(&totals, args.data.len())
}

/// The claim of an output named on the command line: replaced with `--overwrite`, else a
/// file that appeared at its name during the run is an error, never replaced.
fn claim(overwrite: bool) -> Claim {
    if overwrite {
        Claim::Replace
    } else {
        Claim::Refuse
    }
}
