//! Many acquisitions by path, each to its own cluster file: `cluda.find_files` and the
//! finder a Dask worker keeps (`cluda.dask`), over the library's
//! [`Session`](cluda::engine::run::Session) as `cluda find --data A B C --out-dir D` runs
//! them: one device, one pedestal read once and applied afresh to each input (unless carried
//! on), the next input read while the current one is found, inputs opened, checked and their
//! outputs named by the library's one [`plan`] and byte-identical to single runs. An input that cannot be
//! opened or fails while found is reported in its own summary; the others still run.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyList;

use cluda::engine::input::Input;
use cluda::engine::plan::{Plan, Planned, plan};
use cluda::engine::run::{FinderChoice, InputOutputs, RunOptions, Session};
use cluda::finder::select::DeviceChoice;
use cluda::{ClusterSize, Error, FindOptions, ThresholdMode};

use crate::{Threads, defaults, lock, parse_precision, to_py};

/// What became of one input: the summary `find_files` returns for it, as a dict of its
/// fields, in their order (`IntoPyObject`).
#[derive(IntoPyObject)]
struct Outcome {
    input: PathBuf,
    output: Option<PathBuf>,
    frames: u64,
    clusters: u64,
    seconds: f64,
    /// Seconds the input's reader threads were busy (overlapped with finding).
    input_seconds: f64,
    device: Option<String>,
    /// The input's gap report, when it lost frames (a raw acquisition).
    warning: Option<String>,
    error: Option<String>,
}

impl Outcome {
    /// An input that failed: nothing written.
    fn failed(input: &Path, e: &Error) -> Self {
        Self {
            input: input.to_path_buf(),
            output: None,
            frames: 0,
            clusters: 0,
            seconds: 0.0,
            input_seconds: 0.0,
            device: None,
            warning: None,
            error: Some(e.to_string()),
        }
    }
}

/// The finder's options from the Python arguments (those of `find_files`, `FileSession`,
/// `eta_cube` and `image`), checked as a finder checks them, before anything is read.
pub(crate) fn finder_choice(
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
) -> PyResult<RunOptions> {
    let threads = threads.map(|t| t.0);
    if threads == Some(0) {
        return Err(to_py(Error::param("threads", "must be at least 1")));
    }
    let options = FindOptions {
        size: ClusterSize::from_side(cluster_size).map_err(to_py)?,
        n_sigma,
        threshold: threshold.parse::<ThresholdMode>().map_err(to_py)?,
        precision: parse_precision(precision)?,
    };
    // The same checks as a finder's, before the pedestal is read (its N is not known yet).
    options.config(1, 1, 1).validate().map_err(to_py)?;
    let device: DeviceChoice = device.parse().map_err(to_py)?;
    Ok(RunOptions::new(FinderChoice {
        options,
        device,
        threads,
    }))
}

/// How often a run asks Python whether a signal (Ctrl-C) came.
const SIGNAL_CHECK: Duration = Duration::from_millis(200);

/// A [`Cancel`](cluda::engine::input::Cancel) for a long run with the GIL released: at most
/// every [`SIGNAL_CHECK`] it takes the GIL and runs Python's signal handlers (on the main
/// thread; elsewhere there are none), and stops the run with [`Error::Interrupted`] when one
/// raised (KeyboardInterrupt), so that a campaign stops at a frame boundary, its unfinished
/// cluster file removed, instead of running on to its end.
pub(crate) struct PySignals {
    last: Mutex<Instant>,
}

impl PySignals {
    pub(crate) fn new() -> Self {
        Self {
            last: Mutex::new(Instant::now()),
        }
    }

    pub(crate) fn check(&self) -> Result<(), Error> {
        {
            let mut last = lock(&self.last);
            if last.elapsed() < SIGNAL_CHECK {
                return Ok(());
            }
            *last = Instant::now();
        }
        Python::with_gil(|py| py.check_signals()).map_err(|_| Error::Interrupted {
            signal: "SIGINT",
            number: 2,
        })
    }
}

/// Errors of a whole run as Python exceptions: an interrupted run is a `KeyboardInterrupt`
/// (the signal handler's exception, which the check swallowed), others as elsewhere.
pub(crate) fn run_error(e: Error) -> PyErr {
    match e {
        Error::Interrupted { .. } => PyKeyboardInterrupt::new_err(e.to_string()),
        e => to_py(e),
    }
}

/// Checks finder options as `find_files` and `FileSession` take them, raising what they
/// would (internal: `cluda.dask` checks them on the client, before any task).
#[pyfunction]
#[pyo3(signature = (cluster_size=defaults::CLUSTER_SIZE, n_sigma=defaults::N_SIGMA,
                    precision=defaults::PRECISION, threshold=defaults::THRESHOLD,
                    device=defaults::DEVICE, threads=None))]
pub fn check_options(
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
) -> PyResult<()> {
    finder_choice(cluster_size, n_sigma, precision, threshold, device, threads).map(drop)
}

/// Runs the opened inputs of `planned` through `session`, each writing its cluster file;
/// returns one outcome per input (failed ones as their error), in order.
fn run_inputs(
    session: &mut Session,
    planned: Vec<Planned>,
    carry: bool,
    signals: &PySignals,
) -> Result<Vec<Outcome>, Error> {
    let paths: Vec<PathBuf> = planned.iter().map(|p| p.path.clone()).collect();
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(paths.len());
    // For each input run: its place in `paths`.
    let (mut opened, mut places, mut names) = (Vec::new(), Vec::new(), Vec::new());
    for (k, p) in planned.into_iter().enumerate() {
        match p.input {
            Ok(input) => {
                outcomes.push(None);
                opened.push(input);
                places.push(k);
                names.push(p.cluster_file);
            }
            Err(e) => outcomes.push(Some(Outcome::failed(&paths[k], &e))),
        }
    }
    session.find_all(
        &mut opened,
        // `..default()`: no plots (a field only when cluda's `plot` feature is on).
        #[allow(clippy::needless_update)]
        &mut |j| {
            Ok(InputOutputs {
                cluster_file: names[j].clone(),
                // Planned free; a name that appeared since gets the next suffix.
                claim: cluda::io::Claim::NextFree,
                ..InputOutputs::default()
            })
        },
        carry,
        &|| signals.check(),
        &mut cluda::engine::sink::FnSink(|_, _: &cluda::FrameClusters<'_>| Ok(())),
        &mut |j, report| {
            let k = places[j];
            if let Err(e @ Error::Interrupted { .. }) = report {
                return Err(e);
            }
            outcomes[k] = Some(match report {
                Ok(r) => Outcome {
                    input: paths[k].clone(),
                    frames: r.frames,
                    clusters: r.clusters,
                    seconds: r.seconds(),
                    input_seconds: r.input_seconds(),
                    device: Some(r.device.clone()),
                    output: r.cluster_file,
                    warning: None,
                    error: None,
                },
                Err(e) => Outcome::failed(&paths[k], &e),
            });
            Ok(())
        },
    )?;
    // Gap reports are per input; the session's copies are dropped (it may live long).
    drop(session.take_warnings());
    for (input, &k) in opened.iter().zip(&places) {
        if let Some(o) = outcomes[k].as_mut() {
            o.warning = input.gap_warning();
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.ok_or_else(|| Error::Internal("an input was not reported".into())))
        .collect()
}

/// The inputs of `find_files` planned against the pedestal `ped` (opened from `pedestal`):
/// each opened and checked against the pedestal's frame shape, its cluster file named in
/// `out_dir`; a pedestal of the whole detector is cut down to the data's receiver ROI.
fn plan_in(
    ped: &mut Input,
    pedestal: &Path,
    inputs: &[PathBuf],
    out_dir: &Path,
) -> Result<Vec<Planned>, Error> {
    let shape = (ped.frames.rows(), ped.frames.cols());
    let mut fitted = plan(pedestal, shape, inputs, Some(out_dir), "out_dir")?;
    fitted.fit(ped)?;
    let Plan {
        inputs: planned, ..
    } = fitted;
    Ok(planned)
}

/// `cluda.find_files` (internal: the Python function documents it): every input of `inputs`
/// found after the pedestal `pedestal`, each to its cluster file in `out_dir`; a list of
/// per-input summaries.
#[pyfunction]
#[pyo3(signature = (inputs, pedestal, out_dir, cluster_size=defaults::CLUSTER_SIZE,
                    n_sigma=defaults::N_SIGMA, precision=defaults::PRECISION,
                    threshold=defaults::THRESHOLD, device=defaults::DEVICE, threads=None,
                    carry_pedestal=false))]
#[allow(clippy::too_many_arguments)]
pub fn find_files<'py>(
    py: Python<'py>,
    inputs: Vec<PathBuf>,
    pedestal: PathBuf,
    out_dir: PathBuf,
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
    carry_pedestal: bool,
) -> PyResult<Bound<'py, PyList>> {
    let options = finder_choice(cluster_size, n_sigma, precision, threshold, device, threads)?;
    let signals = PySignals::new();
    let outcomes = py
        .allow_threads(|| -> Result<Vec<Outcome>, Error> {
            let mut ped = Input::count_exactly(&pedestal, "pedestal", &|| signals.check())?;
            let planned = plan_in(&mut ped, &pedestal, &inputs, &out_dir)?;
            let longest = planned
                .iter()
                .filter_map(|p| p.input.as_ref().ok().map(|d| d.len))
                .max()
                .unwrap_or(0);
            let mut session = Session::open(&options, &mut ped, longest, &|| signals.check())?;
            let outcomes = run_inputs(&mut session, planned, carry_pedestal, &signals);
            let _release = session.close();
            outcomes
        })
        .map_err(run_error)?;
    summaries(py, outcomes)
}

/// The cluster file each input of `inputs` would get in `out_dir` from `find_files`, or why
/// it cannot run (opened and checked against the pedestal's frame shape as `find_files`
/// does): a list of `(output, error)`, one of them `None` (internal: `cluda.dask` names the
/// outputs on the client, so that its workers write what `cluda find --out-dir` writes).
#[pyfunction]
pub fn plan_outputs(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    pedestal: PathBuf,
    out_dir: PathBuf,
) -> PyResult<Vec<(Option<PathBuf>, Option<String>)>> {
    py.allow_threads(|| -> Result<_, Error> {
        let mut ped = Input::open(&pedestal, "pedestal")?;
        Ok(plan_in(&mut ped, &pedestal, &inputs, &out_dir)?
            .into_iter()
            .map(|p| (p.cluster_file, p.input.err().map(|e| e.to_string())))
            .collect())
    })
    .map_err(to_py)
}

fn summaries<'py>(py: Python<'py>, outcomes: Vec<Outcome>) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for o in outcomes {
        list.append(o)?;
    }
    Ok(list)
}

/// A finder opened with its pedestal for any number of inputs by path, kept between calls (a
/// Dask worker keeps one: see `cluda.dask`). Calls from several threads are serialised.
#[pyclass(module = "cluda._cluda", name = "FileSession", frozen)]
pub struct FileSession {
    /// `None` once closed; with whether an input ran since the pedestal was read or put
    /// back (its pedestal is then where that input left it).
    session: Mutex<Option<(Session, bool)>>,
    /// The pedestal's path.
    #[pyo3(get)]
    pedestal: PathBuf,
    /// `(rows, cols)` of every frame.
    #[pyo3(get)]
    shape: (usize, usize),
    /// The finder's device, as it describes itself.
    #[pyo3(get)]
    device: String,
    /// Why that device (e.g. "no GPU found, using the CPU").
    #[pyo3(get, name = "device_note")]
    note: String,
}

#[pymethods]
impl FileSession {
    /// Opens the device and reads every frame of `pedestal` (its window N is their count);
    /// the frame ring is sized for inputs of `longest` frames (default: any length).
    #[new]
    #[pyo3(signature = (pedestal, cluster_size=defaults::CLUSTER_SIZE, n_sigma=defaults::N_SIGMA,
                        precision=defaults::PRECISION, threshold=defaults::THRESHOLD,
                        device=defaults::DEVICE, threads=None, longest=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        pedestal: PathBuf,
        cluster_size: usize,
        n_sigma: f64,
        precision: &str,
        threshold: &str,
        device: &str,
        threads: Option<Threads>,
        longest: Option<u64>,
    ) -> PyResult<Self> {
        let options = finder_choice(cluster_size, n_sigma, precision, threshold, device, threads)?;
        let signals = PySignals::new();
        let (session, shape) = py
            .allow_threads(|| -> Result<_, Error> {
                let mut ped = Input::count_exactly(&pedestal, "pedestal", &|| signals.check())?;
                let shape = (ped.frames.rows(), ped.frames.cols());
                let session =
                    Session::open(&options, &mut ped, longest.unwrap_or(u64::MAX), &|| {
                        signals.check()
                    })?;
                Ok((session, shape))
            })
            .map_err(run_error)?;
        Ok(Self {
            device: session.device(),
            note: session.device_note().to_string(),
            session: Mutex::new(Some((session, false))),
            pedestal,
            shape,
        })
    }

    /// Finds every input of `inputs` (paths), input `k` writing the cluster file
    /// `outputs[k]` (`None`: none), each from the pedestal as read (with `carry_pedestal`,
    /// from where the input before it left it, the first one from where the call before
    /// left it); one summary dict per input, as `find_files`.
    #[pyo3(signature = (inputs, outputs, carry_pedestal=false))]
    fn find<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<PathBuf>,
        outputs: Vec<Option<PathBuf>>,
        carry_pedestal: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        if inputs.len() != outputs.len() {
            return Err(to_py(Error::param(
                "outputs",
                format!(
                    "{} outputs for {} inputs: give one (or None) per input",
                    outputs.len(),
                    inputs.len()
                ),
            )));
        }
        let signals = PySignals::new();
        let outcomes = py
            .allow_threads(|| -> Result<Vec<Outcome>, Error> {
                let mut guard = lock(&self.session);
                let (session, used) = guard
                    .as_mut()
                    .ok_or_else(|| Error::Internal("this FileSession was closed".into()))?;
                let mut fitted = plan(&self.pedestal, self.shape, &inputs, None, "outputs")?;
                // The pedestal was read when the session opened: data of another shape (a
                // receiver ROI of it included) are refused.
                fitted.refuse_other_shapes(self.shape, "the session's pedestal");
                let Plan {
                    inputs: mut planned,
                    ..
                } = fitted;
                for (p, output) in planned.iter_mut().zip(outputs) {
                    p.cluster_file = p.input.as_ref().ok().and(output);
                }
                // Each call's first input starts from the pedestal as read, as every other
                // input does (unless carried on from the call before).
                if *used && !carry_pedestal {
                    session.restart_pedestal()?;
                }
                *used = true;
                run_inputs(session, planned, carry_pedestal, &signals)
            })
            .map_err(run_error)?;
        summaries(py, outcomes)
    }

    /// Releases the device (its memory, the context); later calls raise `RuntimeError`.
    fn close(&self, py: Python<'_>) {
        let session = lock(&self.session).take();
        py.allow_threads(|| {
            if let Some((s, _)) = session {
                s.close();
            }
        });
    }
}
