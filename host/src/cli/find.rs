//! `cluda find`, and the find path it shares with `cluda demo`: the arguments turned into a
//! library run ([`cluda::engine::run`]), its report printed.

use std::path::PathBuf;

use cluda::engine::input::Input;
use cluda::engine::plan::{Plan, check_outputs, plan, plot_dirs};
use cluda::engine::run::{
    FinderChoice, InputOutputs, PlotOutput, RunOptions, RunReport, Session, run,
};
use cluda::engine::sink::FnSink;
use cluda::io::Claim;
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
    let (out, plot) = (args.out.as_deref(), args.plot.as_deref());
    check_outputs(&args.pedestal, data, out, plot, args.overwrite)?;
    if out.is_none() {
        note_not_kept("--out FILE");
    }
    let mut options = run_options(&args.finder);
    options.cluster_file = args.out.clone();
    // Checked above; the rename refuses a name that appeared since, unless --overwrite.
    options.claim = if args.overwrite {
        Claim::Replace
    } else {
        Claim::Refuse
    };
    options.plots = args.plot.as_ref().map(|dir| PlotOutput {
        dir: dir.clone(),
        options: args.spectrum.options(),
        overwrite: args.overwrite,
    });
    let mut pedestal = Input::count_exactly(&args.pedestal, "pedestal", &signals::check)?;
    let mut data = Input::open(data, "data")?;
    if let Some(n) = pedestal.fit_to(&[&data])? {
        eprintln!("note: {n}");
    }
    let summary = find(
        &args.finder,
        &options,
        &mut pedestal,
        &mut data,
        &mut |_, _| Ok(()),
    )?;
    print_line(&summary.to_string())
}

/// Says on stderr that no cluster file is written (the run still counts the clusters and may
/// draw plots), naming `option`, the option that would keep them.
fn note_not_kept(option: &str) {
    eprintln!("note: no {option} given: the clusters are counted, not kept");
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
    let out_dir = args.out_dir.as_deref();
    let mut planned = plan(&args.pedestal, shape, &args.data, out_dir, "out-dir")?;
    if let Some(n) = planned.fit(&mut pedestal)? {
        eprintln!("note: {n}");
    }
    let Plan { files, inputs } = planned;
    if out_dir.is_none() {
        note_not_kept("--out-dir DIR");
    }
    let mut failed = 0usize;
    let (mut paths, mut data, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for p in inputs {
        match p.input {
            Ok(input) => {
                paths.push(p.path);
                data.push(input);
                names.push(p.cluster_file);
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e}");
                print_line(&format!("input={} failed", p.path.display()))?;
            }
        }
    }
    let plot_dirs: Vec<Option<PathBuf>> = match &args.plot {
        Some(dir) => plot_dirs(
            dir,
            paths.iter().map(PathBuf::as_path),
            &files,
            args.overwrite,
        )?
        .into_iter()
        .map(Some)
        .collect(),
        None => vec![None; paths.len()],
    };
    let options = run_options(&args.finder);
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
                // Planned free; a name that appeared since gets the next suffix.
                claim: Claim::NextFree,
                plots: plot_dirs[k].clone().map(|dir| PlotOutput {
                    dir,
                    options: spectrum.clone(),
                    overwrite: args.overwrite,
                }),
            })
        },
        args.carry_pedestal,
        &signals::check,
        &mut FnSink(|_, _: &FrameClusters<'_>| {
            bar.inc(1);
            Ok(())
        }),
        &mut |k, report| {
            let input = paths[k].display();
            match report {
                Ok(r) => {
                    let summary = Summary::of(&r, precision);
                    total.add(&summary);
                    print_timing_and_plots(&r, args.finder.timing);
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
    options.input = args.input;
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
    print_timing_and_plots(&report, args.timing);
    Ok(Summary::of(&report, args.options.precision.name()))
}

/// A run's `--timing` lines (when asked for) and the plots it wrote, on stderr.
fn print_timing_and_plots(report: &RunReport, timing: bool) {
    if timing {
        for line in report.timing.lines() {
            eprintln!("{line}");
        }
    }
    for p in &report.plots {
        eprintln!("wrote {}", p.display());
    }
}
