//! A session over data inputs given by path, into a sink: the pedestal read once, every data
//! input opened and shape-checked by the one plan ([`super::plan`]), found one after another
//! (each from the pedestal afresh unless carried on), each frame's clusters handed to the
//! caller's [`Sink`]. What `cluda eta` and `cluda image` run; the binary only prints.

use std::path::{Path, PathBuf};

use super::input::{Cancel, Input};
use super::plan::{Plan, plan};
use super::run::{InputOutputs, RunOptions, RunReport, Session};
use super::sink::{Renumbered, Sink, reserve_cores};
use crate::error::{Error, Result};

/// What a run over paths did.
#[derive(Debug, Default)]
pub struct PathsReport {
    /// Data frames found, over every input that ended whole.
    pub frames: u64,
    /// Clusters found in them.
    pub clusters: u64,
    /// Seconds finding (and handing clusters on), summed over the inputs.
    pub seconds: f64,
    /// The finder's device, as it describes itself.
    pub device: String,
    /// Why that device.
    pub device_note: String,
    /// What a person should know about the inputs (a pedestal cut down to the data's
    /// receiver ROI, [`super::plan::Plan::fit`]).
    pub notes: Vec<String>,
    /// The inputs that could not be opened or failed, with why.
    pub failed: Vec<(PathBuf, Error)>,
    /// Gap reports of inputs that lost frames.
    pub warnings: Vec<String>,
    /// Each input's report that ended whole (its timing lines, for `--timing`).
    pub reports: Vec<RunReport>,
}

/// Reads the pedestal at `pedestal`, then finds every input of `data` through one session
/// into `sink` (each from the pedestal afresh unless `carry`), `cancel` asked between chunks;
/// `planned` is told how many data frames the opened inputs hold (e.g. for a progress bar).
/// An input that cannot be opened or fails is recorded in [`PathsReport::failed`] and the
/// others still run; the sink is told ([`Sink::abandon`]). The sink's input numbers are the
/// inputs' indices in `data` (an input that could not be opened never begins).
///
/// # Errors
/// The pedestal's and the device's errors, no data input that could be opened, and
/// `cancel`'s ([`Error::Interrupted`]).
pub fn find_paths(
    options: &RunOptions,
    pedestal: &Path,
    data: &[PathBuf],
    carry: bool,
    cancel: Cancel<'_>,
    planned: &mut dyn FnMut(u64),
    sink: &mut dyn Sink,
) -> Result<PathsReport> {
    let mut pedestal_in = Input::count_exactly(pedestal, "pedestal", cancel)?;
    let shape = (pedestal_in.frames.rows(), pedestal_in.frames.cols());
    let mut fitted = plan(pedestal, shape, data, None, "out-dir")?;
    let mut report = PathsReport::default();
    report.notes.extend(fitted.fit(&mut pedestal_in)?);
    let Plan { inputs, .. } = fitted;
    let (mut paths, mut opened, mut numbers) = (Vec::new(), Vec::new(), Vec::new());
    for (k, p) in inputs.into_iter().enumerate() {
        match p.input {
            Ok(i) => {
                paths.push(p.path);
                opened.push(i);
                numbers.push(k);
            }
            Err(e) => report.failed.push((p.path, e)),
        }
    }
    if opened.is_empty() {
        return Err(Error::param("data", "no data input could be opened"));
    }
    for d in &opened {
        if let Some(roi) = d.roi() {
            report.notes.push(format!(
                "{} holds the receiver ROI {roi} (xmin, xmax, ymin, ymax): its clusters are \
                 placed in the ROI's own coordinates (pixel column 0, row 0 is detector column \
                 {}, row {}), as are the pedestal and any mask or gain map",
                d.describe, roi.xmin, roi.ymin
            ));
        }
    }
    planned(opened.iter().map(|d| d.len).sum());
    let longest = opened.iter().map(|d| d.len).max().unwrap_or(0);
    // A CPU finder leaves the cores the sink keeps busy (placing photons) to it.
    let mut options = options.clone();
    options.finder.threads = reserve_cores(options.finder.threads, &*sink);
    let mut session = Session::open(&options, &mut pedestal_in, longest, cancel)?;
    report.device_note = session.device_note().to_string();
    session.find_all(
        &mut opened,
        &mut |_| Ok(InputOutputs::default()),
        carry,
        cancel,
        &mut Renumbered { sink, numbers },
        &mut |k, r| match r {
            Ok(r) => {
                report.frames += r.frames;
                report.clusters += r.clusters;
                report.seconds += r.seconds();
                report.device.clone_from(&r.device);
                report.reports.push(r);
                Ok(())
            }
            Err(e @ Error::Interrupted { .. }) => Err(e),
            Err(e) => {
                report.failed.push((paths[k].clone(), e));
                Ok(())
            }
        },
    )?;
    report.warnings = session.take_warnings();
    session.close();
    Ok(report)
}
