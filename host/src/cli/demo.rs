//! `cluda demo`: generated data, found in memory, with a spectrum of cluster sums.

use cluda::generate::{GenConfig, Generator};
use cluda::{Error, Result};

use super::args::DemoArgs;
use cluda::engine::run::{PlotOutput, check_plot_dir};

use super::find::{find, run_options};
use super::inputs::check_dims;
use super::output::print_line;
use super::summary::Spectrum;
use cluda::generate::Generated;

/// Runs `cluda demo`: the summary line, then the spectrum.
pub fn run(args: &DemoArgs) -> Result<()> {
    check_dims(args.rows, args.cols, args.frames.max(args.pedestal_frames))?;
    if args.pedestal_frames == 0 {
        return Err(Error::param(
            "pedestal-frames",
            "must be at least 1 (the pedestal needs dark frames)",
        ));
    }
    if let Some(dir) = &args.plot {
        check_plot_dir(dir, &[], args.overwrite)?;
    }
    let generator = Generator::with_cancel(
        GenConfig::new(args.rows, args.cols, args.seed),
        &super::signals::check,
    )?;
    let p = args.pedestal_frames;
    let mut dark = Generated::new(&generator, 0, p, false)
        .with_cancel(&super::signals::check)
        .input("pedestal");
    let mut data = Generated::new(&generator, p as u64, args.frames, true)
        .with_cancel(&super::signals::check)
        .input("data");
    // 20 bins of 50 ADU: single photons (~400 ADU) and the start of pile-up (~800 ADU).
    let mut spectrum = Spectrum::new(0, 50, 20);
    let mut options = run_options(&args.finder);
    options.plots = args.plot.as_ref().map(|dir| PlotOutput {
        dir: dir.clone(),
        options: args.spectrum.options(),
        overwrite: args.overwrite,
    });
    let summary = find(
        &args.finder,
        &options,
        &mut dark,
        &mut data,
        &mut |_, fc| {
            for c in fc.iter() {
                spectrum.add(c.sum());
            }
            Ok(())
        },
    )?;
    print_line(&summary.to_string())?;
    let title = format!(
        "spectrum of {} cluster sums (ADU), {} clusters:",
        args.finder.options.cluster, summary.clusters
    );
    print_line(spectrum.render(&title).trim_end())
}
