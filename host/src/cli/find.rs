//! `cluda find`, and the find path it shares with `cluda demo`: the arguments turned into a
//! library run ([`cluda::engine::run`]), its report printed.

use cluda::engine::input::Input;
use cluda::engine::run::{FinderChoice, InputPath, PlotOutput, RunOptions, check_plot_dir, run};
use cluda::io::{AtomicFile, check_output, input_files};
use cluda::{FindOptions, FrameClusters, Result};

use super::args::{FindArgs, FinderArgs, FinderOptions};
use super::output::{note_unwritten, print_line};
use super::progress::frames_bar;
use super::signals;
use super::summary::Summary;

/// Runs `cluda find`: prints the summary line on stdout. Every input and output is checked
/// before any frame is read: inputs must be regular files (for a raw acquisition the master
/// and every data file), and no output may be one of them.
pub fn run_find(args: &FindArgs) -> Result<()> {
    let mut inputs = input_files(&args.pedestal)?;
    inputs.extend(input_files(&args.data)?);
    if let Some(out) = &args.out {
        check_output(out, "out", &inputs)?;
        // Can a file be created there? (A temporary one, removed at once.)
        drop(AtomicFile::create(out)?);
    }
    if let Some(dir) = &args.plot {
        check_plot_dir(dir, &inputs)?;
    }
    let mut options = run_options(&args.finder);
    options.cluster_file = args.out.clone();
    options.plots = args.plot.as_ref().map(|dir| PlotOutput {
        dir: dir.clone(),
        options: args.spectrum.options(),
    });
    let mut pedestal = Input::count_exactly(&args.pedestal, "pedestal", &signals::check)?;
    let mut data = Input::open(&args.data, "data")?;
    let summary = find(
        &args.finder,
        &options,
        &mut pedestal,
        &mut data,
        &mut |_, _| Ok(()),
    )?;
    print_line(&summary.to_string())
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
    options.input = if args.input == "map" {
        InputPath::Map
    } else {
        InputPath::Read
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
    Ok(Summary {
        frames: report.frames,
        clusters: report.clusters,
        seconds: report.seconds(),
        device: report
            .device
            .split_whitespace()
            .next()
            .unwrap_or("?")
            .to_string(),
        precision: args.options.precision.name(),
    })
}
