//! `cluda find`, and the find path it shares with `cluda demo`: the arguments turned into a
//! library run ([`cluda::engine::run`]), its report printed.

use std::collections::HashSet;
use std::path::PathBuf;

use cluda::engine::input::Input;
use cluda::engine::run::{
    DataInputs, FinderChoice, InputOutputs, InputPath, PlotOutput, RunOptions, RunReport, Session,
    check_not_a_plot, check_plot_dir, cluster_files, open_data_inputs, output_name, run,
};
use cluda::io::{AtomicFile, check_output, check_overwrite, input_files};
use cluda::{Error, FindOptions, FrameClusters, Result};

use super::args::{FindArgs, FinderArgs, FinderOptions};
use super::output::{note_unwritten, print_line};
use super::progress::frames_bar;
use super::signals;
use super::summary::Summary;

/// Runs `cluda find`: prints the summary line on stdout. Every input and output is checked
/// before any frame is read: inputs must be regular files (for a raw acquisition the master
/// and every data file), and no output may be one of them. Several data inputs, or
/// `--out-dir`, go to [`run_many`].
pub fn run_find(args: &FindArgs) -> Result<()> {
    let data = match args.data.as_slice() {
        [one] if args.out_dir.is_none() => one,
        _ => return run_many(args),
    };
    let mut inputs = input_files(&args.pedestal)?;
    inputs.extend(input_files(data)?);
    if let Some(dir) = &args.plot {
        check_plot_dir(dir, &inputs)?;
    }
    if let Some(out) = &args.out {
        check_output(out, "out", &inputs)?;
        if let Some(dir) = &args.plot {
            check_not_a_plot(out, dir)?;
        }
        check_overwrite(out, "out", args.overwrite)?;
        // Can a file be created there? (A temporary one, removed at once.)
        drop(AtomicFile::create(out)?);
    }
    let mut options = run_options(&args.finder);
    #[cfg(target_os = "linux")]
    if options.input == InputPath::Map {
        super::bus_error::install(data, args.out.as_deref());
    }
    options.cluster_file = args.out.clone();
    options.plots = args.plot.as_ref().map(|dir| PlotOutput {
        dir: dir.clone(),
        options: args.spectrum.options(),
    });
    let mut pedestal = Input::count_exactly(&args.pedestal, "pedestal", &signals::check)?;
    let mut data = Input::open(data, "data")?;
    let summary = find(
        &args.finder,
        &options,
        &mut pedestal,
        &mut data,
        &mut |_, _| Ok(()),
    )?;
    print_line(&summary.to_string())
}

/// `cluda find --data A B C ... [--out-dir D]`: one process, one device, one pedestal, the
/// inputs found one after another (the next read while the current one is found), each from
/// the pedestal afresh unless `--carry-pedestal`. An input that cannot be opened or fails
/// while read is reported by name and the others still run; a summary line per input, then
/// one for the whole run; the command fails when any input did.
fn run_many(args: &FindArgs) -> Result<()> {
    if args.out.is_some() {
        return Err(Error::param(
            "out",
            "--out names one file; with several --data inputs use --out-dir",
        ));
    }
    let mut pedestal = Input::count_exactly(&args.pedestal, "pedestal", &signals::check)?;
    let shape = (pedestal.frames.rows(), pedestal.frames.cols());
    let DataInputs { files, inputs } = open_data_inputs(&args.pedestal, shape, &args.data)?;
    let mut failed = 0usize;
    let mut opened: Vec<(PathBuf, Input<'static>)> = Vec::new();
    for (path, input) in args.data.iter().zip(inputs) {
        match input {
            Ok(input) => opened.push((path.clone(), input)),
            Err(e) => {
                failed += 1;
                eprintln!("error: {e}");
                print_line(&format!("input={} failed", path.display()))?;
            }
        }
    }
    let names: Vec<Option<PathBuf>> = match &args.out_dir {
        Some(dir) => cluster_files(
            dir,
            opened.iter().map(|(p, _)| p.as_path()),
            &files,
            "out-dir",
        )?
        .into_iter()
        .map(Some)
        .collect(),
        None => vec![None; opened.len()],
    };
    let mut plot_dirs = Vec::new();
    if let Some(dir) = &args.plot {
        let mut used = HashSet::new();
        for (path, _) in &opened {
            let sub = output_name(dir, path, "", &mut used);
            check_plot_dir(&sub, &files)?;
            plot_dirs.push(Some(sub));
        }
    } else {
        plot_dirs.resize(opened.len(), None);
    }
    let options = run_options(&args.finder);
    let (paths, mut data): (Vec<PathBuf>, Vec<Input<'static>>) = opened.into_iter().unzip();
    let longest = data.iter().map(|d| d.len).max().unwrap_or(0);
    let mut session = Session::open(&options, &mut pedestal, longest, &signals::check)?;
    eprintln!("note: {}", session.device_note());
    let precision = args.finder.options.precision.name();
    let bar = frames_bar(data.iter().map(|d| d.len).sum(), "finding");
    let mut total = Summary {
        frames: 0,
        clusters: 0,
        seconds: 0.0,
        input_seconds: 0.0,
        device: String::new(),
        precision,
    };
    let spectrum = args.spectrum.options();
    session.find_all(
        &mut data,
        &mut |k| {
            Ok(InputOutputs {
                cluster_file: names[k].clone(),
                plots: plot_dirs[k].clone().map(|dir| PlotOutput {
                    dir,
                    options: spectrum.clone(),
                }),
            })
        },
        args.carry_pedestal,
        &signals::check,
        &mut |_, _, _| {
            bar.inc(1);
            Ok(())
        },
        &mut |k, report| {
            let input = paths[k].display();
            match report {
                Ok(r) => {
                    let summary = summary_of(&r, precision);
                    total.frames += summary.frames;
                    total.clusters += summary.clusters;
                    total.seconds += summary.seconds;
                    total.input_seconds += summary.input_seconds;
                    total.device = summary.device.clone();
                    if args.finder.timing {
                        for line in r.timing.lines() {
                            eprintln!("{line}");
                        }
                    }
                    for p in &r.plots {
                        eprintln!("wrote {}", p.display());
                    }
                    let out = r
                        .cluster_file
                        .map(|p| format!(" out={}", p.display()))
                        .unwrap_or_default();
                    bar.suspend(|| print_line(&format!("input={input}{out} {summary}")))
                }
                Err(e @ Error::Interrupted { .. }) => Err(e),
                Err(e) => {
                    failed += 1;
                    bar.suspend(|| {
                        eprintln!("error: {input}: {e}");
                        if let Some(p) = &names[k] {
                            eprintln!(
                                "note: {} was not written (its unfinished temporary file was removed)",
                                p.display()
                            );
                        }
                        print_line(&format!("input={input} failed"))
                    })
                }
            }
        },
    )?;
    bar.finish_and_clear();
    for w in session.take_warnings() {
        eprintln!("warning: {w}");
    }
    let release = session.close();
    if args.finder.timing {
        eprintln!(
            "timing: releasing the device {:.3} s",
            release.as_secs_f64()
        );
    }
    let inputs_n = args.data.len();
    print_line(&format!("inputs={inputs_n} failed={failed} {total}"))?;
    if failed > 0 {
        return Err(Error::param(
            "data",
            format!("{failed} of {inputs_n} inputs failed (named above); the others were written"),
        ));
    }
    Ok(())
}

/// The summary line of one run's report.
fn summary_of(report: &RunReport, precision: &'static str) -> Summary {
    Summary {
        frames: report.frames,
        clusters: report.clusters,
        seconds: report.seconds(),
        input_seconds: report.input_seconds(),
        device: report
            .device
            .split_whitespace()
            .next()
            .unwrap_or("?")
            .to_string(),
        precision,
    }
}

/// The library's finder options from the command line's.
pub fn find_options(o: &FinderOptions) -> FindOptions {
    FindOptions {
        size: o.cluster,
        n_sigma: o.nsigma,
        threshold: o.threshold,
        precision: o.precision,
    }
}

/// The run `args` ask for, writing nothing yet.
pub fn run_options(args: &FinderArgs) -> RunOptions {
    let mut options = RunOptions::new(FinderChoice {
        options: find_options(&args.options),
        device: args.options.device,
        threads: args.options.threads,
    });
    options.input = match args.input.as_str() {
        "map" => InputPath::Map,
        "read" => InputPath::Read,
        _ => InputPath::Auto,
    };
    options.read_threads = args.read_threads;
    options
}

/// Runs `options` over the inputs with a progress bar, the signal check and `visit`; prints
/// the device note, input warnings, `--timing` lines and the files written on stderr; returns
/// the summary line.
pub fn find(
    args: &FinderArgs,
    options: &RunOptions,
    pedestal: &mut Input<'_>,
    data: &mut Input<'_>,
    visit: &mut dyn FnMut(u64, &FrameClusters<'_>) -> Result<()>,
) -> Result<Summary> {
    let bar = frames_bar(data.len, "finding");
    let result = run(options, pedestal, data, &signals::check, &mut |n, fc| {
        bar.inc(1);
        visit(n, fc)
    });
    bar.finish_and_clear();
    let report = match &options.cluster_file {
        Some(path) => note_unwritten(path, result)?,
        None => result?,
    };
    eprintln!("note: {}", report.device_note);
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if args.timing {
        for line in report.timing.lines() {
            eprintln!("{line}");
        }
    }
    for p in &report.plots {
        eprintln!("wrote {}", p.display());
    }
    Ok(summary_of(&report, args.options.precision.name()))
}
