//! The inputs of a many-input run by path (`cluda find --data A B C --out-dir D`, the Python
//! package's `find_files` and `plan_outputs`), planned in one place: each opened and checked
//! against the pedestal's frame shape, and given its outputs by the one naming rule
//! ([`output_name`]), so that every caller opens, checks and names them alike.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::input::{Input, place_mismatch, shape_mismatch};
use crate::error::{Error, Result};
use crate::io::{AtomicFile, check_output, check_overwrite, input_files};

/// Checks everything one run (`cluda find --out F --plot D`) writes before any frame is
/// read: the inputs must be regular files (a raw acquisition's master and every data file),
/// the plot directory `plot` is created and none of its plots may be an input, and the
/// cluster file `out` may be none of the inputs nor of the plots, must not exist unless
/// `overwrite`, and must be creatable (a temporary file is made and removed at once); plot
/// files already in `plot` are refused unless `overwrite`. (The final renames refuse a name
/// that appears after these checks too, [`crate::io::Claim`].)
///
/// # Errors
/// [`Error::InvalidParameter`] naming the option (`out`, `plot`) and the file;
/// [`Error::Io`] for an input that is not there.
pub fn check_outputs(
    pedestal: &Path,
    data: &Path,
    out: Option<&Path>,
    plot: Option<&Path>,
    overwrite: bool,
) -> Result<()> {
    let mut inputs = input_files(pedestal)?;
    inputs.extend(input_files(data)?);
    #[cfg(feature = "plot")]
    if let Some(dir) = plot {
        super::run::check_plot_dir(dir, &inputs, overwrite)?;
    }
    #[cfg(not(feature = "plot"))]
    if plot.is_some() {
        return Err(Error::param(
            "plot",
            "cluda was built without the `plot` feature",
        ));
    }
    if let Some(out) = out {
        check_output(out, "out", &inputs)?;
        #[cfg(feature = "plot")]
        if let Some(dir) = plot {
            super::run::check_not_a_plot(out, dir)?;
        }
        check_overwrite(out, "out", overwrite)?;
        drop(AtomicFile::create(out)?);
    }
    Ok(())
}

/// One data input of a [`Plan`]: its path, and the input opened with its cluster file (none
/// without an output directory), or the error that keeps it out of the run.
pub struct Planned {
    /// The input's path, as given.
    pub path: PathBuf,
    /// The input, opened and of the pedestal's frame shape, or why not.
    pub input: Result<Input<'static>>,
    /// Its cluster file in the output directory (`None` for a failed input, or without one).
    pub cluster_file: Option<PathBuf>,
}

/// The data inputs of a many-input run, planned ([`plan`]).
pub struct Plan {
    /// Every file the pedestal and the data inputs consist of: no output may be one of them.
    pub files: Vec<PathBuf>,
    /// Each data input, in the order given.
    pub inputs: Vec<Planned>,
}

/// Opens every input of `data` and checks it against the pedestal's frame `shape`
/// ([`open_data_inputs`]; `pedestal` is the pedestal's path), and, with `out_dir`, names each
/// opened input's cluster file there ([`cluster_files`]; `option` names the directory in
/// errors). One failed input does not stop the others: it is kept with its error.
///
/// # Errors
/// The pedestal's files cannot be listed; `out_dir` cannot be created or written, or a name
/// in it is one of the inputs.
pub fn plan(
    pedestal: &Path,
    shape: (usize, usize),
    data: &[PathBuf],
    out_dir: Option<&Path>,
    option: &'static str,
) -> Result<Plan> {
    let DataInputs { files, inputs } = open_data_inputs(pedestal, shape, data)?;
    let mut names = match out_dir {
        Some(dir) => {
            let ok = data
                .iter()
                .zip(&inputs)
                .filter(|(_, d)| d.is_ok())
                .map(|(p, _)| p.as_path());
            cluster_files(dir, ok, &files, option)?
        }
        None => Vec::new(),
    }
    .into_iter();
    let inputs = data
        .iter()
        .zip(inputs)
        .map(|(path, input)| Planned {
            path: path.clone(),
            cluster_file: input.as_ref().ok().and_then(|_| names.next()),
            input,
        })
        .collect();
    Ok(Plan { files, inputs })
}

impl Plan {
    /// Fits `pedestal` to the opened data inputs ([`Input::fit_to`]: a pedestal of the whole
    /// detector is cut down to the receiver ROI every data input holds), then turns every
    /// opened input whose frames are still not of the pedestal's shape into its error
    /// ([`shape_mismatch`]); the note for a person when the pedestal was cut down.
    ///
    /// # Errors
    /// As [`Input::fit_to`].
    pub fn fit(&mut self, pedestal: &mut Input<'_>) -> Result<Option<String>> {
        let opened: Vec<&Input<'_>> = self
            .inputs
            .iter()
            .filter_map(|p| p.input.as_ref().ok())
            .collect();
        let note = pedestal.fit_to(&opened)?;
        let shape = (pedestal.frames.rows(), pedestal.frames.cols());
        self.refuse_other_shapes(shape, &pedestal.describe);
        for p in &mut self.inputs {
            let bad = p
                .input
                .as_ref()
                .ok()
                .and_then(|d| place_mismatch(d, pedestal));
            if let Some(e) = bad {
                p.input = Err(e);
                p.cluster_file = None;
            }
        }
        Ok(note)
    }

    /// Turns every opened input whose frames are not of `shape` (the pedestal's, called
    /// `pedestal` in the error) into its error ([`shape_mismatch`]), its cluster file
    /// dropped: for callers that do not fit the pedestal ([`Plan::fit`]).
    pub fn refuse_other_shapes(&mut self, shape: (usize, usize), pedestal: &str) {
        for p in &mut self.inputs {
            let bad = p
                .input
                .as_ref()
                .ok()
                .filter(|d| (d.frames.rows(), d.frames.cols()) != shape)
                .map(|d| shape_mismatch(d, pedestal, shape));
            if let Some(e) = bad {
                p.input = Err(e);
                p.cluster_file = None;
            }
        }
    }
}

/// The plot directory of each input of `data` in `dir` ([`output_name`] without an
/// extension), each checked as [`super::run::check_plot_dir`] checks one (created, none of
/// `files` among its plots, no plot file there unless `overwrite`).
///
/// # Errors
/// As [`super::run::check_plot_dir`].
#[cfg(feature = "plot")]
pub fn plot_dirs<'p>(
    dir: &Path,
    data: impl IntoIterator<Item = &'p Path>,
    files: &[PathBuf],
    overwrite: bool,
) -> Result<Vec<PathBuf>> {
    let mut used = HashSet::new();
    data.into_iter()
        .map(|path| {
            let sub = output_name(dir, path, "", &mut used);
            super::run::check_plot_dir(&sub, files, overwrite)?;
            Ok(sub)
        })
        .collect()
}

/// The data inputs of a many-input run ([`super::run::Session::find_all`]) opened by path, as `cluda find
/// --data A B C` and the Python package's `find_files` open them.
pub struct DataInputs {
    /// Every file the pedestal and the data inputs consist of (a raw acquisition's master and
    /// data files): no output may be one of them ([`cluster_files`]).
    pub files: Vec<PathBuf>,
    /// Each data input in the order given: opened and of the pedestal's frame shape, or the
    /// error that keeps it out of the run (the others still run).
    pub inputs: Vec<Result<Input<'static>>>,
}

/// Opens every path of `data` ([`Input::open`]) and checks it has `shape` (the pedestal's
/// frame shape, rows x cols); `pedestal` is the pedestal's path, whose files join
/// [`DataInputs::files`]. An input that fails is kept as its error, so that one bad input
/// does not stop the others.
///
/// # Errors
/// The pedestal's files cannot be listed ([`input_files`]): it is not a regular file.
pub fn open_data_inputs(
    pedestal: &Path,
    shape: (usize, usize),
    data: &[PathBuf],
) -> Result<DataInputs> {
    let mut files = input_files(pedestal)?;
    let inputs = data
        .iter()
        .map(|path| {
            files.extend(input_files(path)?);
            let input = Input::open(path, "data")?;
            let got = (input.frames.rows(), input.frames.cols());
            // A receiver ROI of a detector of the pedestal's shape is kept for
            // [`Plan::fit`], which cuts the pedestal down to it or refuses it.
            if got != shape && input.frames.detector_shape() != shape {
                return Err(shape_mismatch(&input, "the pedestal", shape));
            }
            Ok(input)
        })
        .collect();
    Ok(DataInputs { files, inputs })
}

/// The cluster file of each input of `data`, in order, in the directory `dir` (created when
/// missing), named by [`output_name`] with the extension `clust`: never an existing file,
/// never one of `files` (the run's inputs), never twice the same name. A temporary file is
/// created there and removed at once, so that a directory that takes no file fails before
/// any work. `option` names the directory's parameter in errors (`out-dir`, `out_dir`).
///
/// # Errors
/// [`Error::InvalidParameter`] (`option`) when `dir` cannot be created or an output would be
/// an input; [`Error::Io`] when no file can be created in it.
pub fn cluster_files<'p>(
    dir: &Path,
    data: impl IntoIterator<Item = &'p Path>,
    files: &[PathBuf],
    option: &'static str,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::param(option, format!("cannot create {}: {e}", dir.display())))?;
    let mut used = HashSet::new();
    let mut names = Vec::new();
    for path in data {
        let out = output_name(dir, path, "clust", &mut used);
        check_output(&out, option, files)?;
        names.push(out);
    }
    if let Some(first) = names.first() {
        drop(AtomicFile::create(first)?);
    }
    Ok(names)
}

/// A file (or, with an empty `ext`, a directory) in `dir` named after the input `path`
/// (`d.npy` -> `d.<ext>`, `run_master_0.json` -> `run_master_0.<ext>`) that neither exists
/// nor was handed out before (`used`): `d_2.<ext>`, `d_3.<ext>`, ... otherwise. The one
/// naming rule of `cluda find --out-dir` and the Python package's `find_files`, so that
/// their outputs have the same names.
pub fn output_name(dir: &Path, path: &Path, ext: &str, used: &mut HashSet<PathBuf>) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "input".to_string());
    let with = |name: String| match ext {
        "" => dir.join(name),
        e => dir.join(format!("{name}.{e}")),
    };
    let mut candidate = with(stem.clone());
    let mut k = 2;
    // A dangling symlink is a name taken too (`symlink_metadata`, not `exists`).
    while used.contains(&candidate)
        || (!ext.is_empty() && std::fs::symlink_metadata(&candidate).is_ok())
    {
        candidate = with(format!("{stem}_{k}"));
        k += 1;
    }
    used.insert(candidate.clone());
    candidate
}
