//! Eta cubes and sub-pixel images from files, as `cluda eta` and `cluda image` make them:
//! the library's session over the inputs by path ([`cluda::engine::paths::find_paths`]) into
//! its eta-interpolation sinks, so that a Python user gets the command's results, at the
//! command's speed, on the GPU counted on the device.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use cluda::engine::imaging::{CubeSink, ImagingOutputs, ImagingSink};
use cluda::engine::paths::{PathsReport, find_paths};
use cluda::engine::run::RunOptions;
use cluda::engine::sink::Sink;
use cluda::interpolation::files::read_cube;
use cluda::interpolation::{CubeAxes, Edges, EtaKind, Interpolator, MapKind, Tally};
use cluda::io::atomic::Claim;
use cluda::{Error, Result};

use crate::files::{PySignals, finder_choice, run_error};
use crate::{Threads, defaults, to_py};

/// The summary of a run as a dict: frames, clusters, what was placed or left out, the device
/// and where it counted, and the inputs that failed.
fn summary<'py>(
    py: Python<'py>,
    r: &PathsReport,
    tally: &Tally,
    on_device: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("frames", r.frames)?;
    d.set_item("clusters", tally.clusters)?;
    d.set_item("inside", tally.inside)?;
    d.set_item("eta_outside", tally.eta_outside)?;
    d.set_item("energy_outside", tally.energy_outside)?;
    d.set_item("masked", tally.masked)?;
    d.set_item("outside_window", tally.window)?;
    d.set_item("seconds", r.seconds)?;
    d.set_item("device", &r.device)?;
    d.set_item("counted_on", if on_device { "device" } else { "host" })?;
    let failed: Vec<(String, String)> = r
        .failed
        .iter()
        .map(|(p, e)| (p.display().to_string(), e.to_string()))
        .collect();
    d.set_item("failed", failed)?;
    d.set_item("warnings", r.warnings.clone())?;
    Ok(d)
}

/// The session over `inputs` into `sink` ([`find_paths`]), with the GIL released and Ctrl-C
/// stopping it at a frame boundary.
fn run(
    py: Python<'_>,
    options: &RunOptions,
    pedestal: &Path,
    inputs: &[PathBuf],
    carry: bool,
    sink: &mut (dyn Sink + Send),
) -> PyResult<PathsReport> {
    let signals = PySignals::new();
    py.allow_threads(|| {
        find_paths(
            options,
            pedestal,
            inputs,
            carry,
            &|| signals.check(),
            &mut |_| {},
            sink,
        )
    })
    .map_err(run_error)
}

/// The eta kind named `name`.
fn kind(name: &str) -> PyResult<EtaKind> {
    EtaKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            to_py(Error::param(
                "eta",
                format!("`{name}` is not one of eta2, full-eta2, eta3, cross-eta3"),
            ))
        })
}

/// `cluda.eta_cube` (internal: the Python function documents it): the eta cube of every
/// input's clusters, as `(etacube, xbins, ybins, ebins, summary)`.
#[pyfunction]
#[pyo3(signature = (inputs, pedestal, eta="eta2", eta_bins=201, eta_range=(-0.1, 1.1),
                    energy_edges=vec![0.0, f64::INFINITY], cluster_size=defaults::CLUSTER_SIZE,
                    n_sigma=defaults::N_SIGMA, precision=defaults::PRECISION,
                    threshold=defaults::THRESHOLD, device=defaults::DEVICE, threads=None,
                    carry_pedestal=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn eta_cube<'py>(
    py: Python<'py>,
    inputs: Vec<PathBuf>,
    pedestal: PathBuf,
    eta: &str,
    eta_bins: usize,
    eta_range: (f64, f64),
    energy_edges: Vec<f64>,
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
    carry_pedestal: bool,
) -> PyResult<(
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyDict>,
)> {
    let options = finder_choice(
        cluster_size,
        n_sigma,
        precision,
        threshold,
        device,
        threads.map(|t| t.0),
    )?;
    let axes = (|| -> Result<CubeAxes> {
        Ok(CubeAxes {
            kind: EtaKind::Eta2,
            x: Edges::linspace("eta_bins", eta_range.0, eta_range.1, eta_bins)?,
            y: Edges::linspace("eta_bins", eta_range.0, eta_range.1, eta_bins)?,
            e: Edges::new("energy_edges", energy_edges)?,
        })
    })()
    .map_err(to_py)?;
    let axes = CubeAxes {
        kind: kind(eta)?,
        ..axes
    };
    let mut sink = CubeSink::new(axes, true).map_err(to_py)?;
    let report = run(py, &options, &pedestal, &inputs, carry_pedestal, &mut sink)?;
    let on_device = sink.counted_on_device();
    let cube = sink.into_cube();
    let s = summary(py, &report, cube.tally(), on_device)?;
    let a = cube.axes();
    let shape = a.shape();
    let values = PyArray1::from_vec(py, cube.to_f64()).reshape(shape)?;
    let edges = |e: &Edges| PyArray1::from_slice(py, e.as_slice());
    Ok((values.into_any(), edges(&a.x), edges(&a.y), edges(&a.e), s))
}

/// `cluda.image` (internal: the Python function documents it): the sub-pixel image of
/// every input's photons placed through the cube at `eta`, as `(image, summary)`.
#[pyfunction]
#[pyo3(signature = (inputs, pedestal, eta, subpixels=4, maps="cumulative",
                    cluster_size=defaults::CLUSTER_SIZE, n_sigma=defaults::N_SIGMA,
                    precision=defaults::PRECISION, threshold=defaults::THRESHOLD,
                    device=defaults::DEVICE, threads=None, carry_pedestal=false))]
#[allow(clippy::too_many_arguments)]
pub fn image<'py>(
    py: Python<'py>,
    inputs: Vec<PathBuf>,
    pedestal: PathBuf,
    eta: PathBuf,
    subpixels: u32,
    maps: &str,
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
    carry_pedestal: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyDict>)> {
    let options = finder_choice(
        cluster_size,
        n_sigma,
        precision,
        threshold,
        device,
        threads.map(|t| t.0),
    )?;
    let map: MapKind = maps.parse().map_err(to_py)?;
    let (axes, cube, _) = read_cube(&eta, None).map_err(to_py)?;
    let interp = Arc::new(Interpolator::new(axes, &cube, map).map_err(to_py)?);
    let (rows, cols) = {
        let p = cluda::engine::input::Input::open(&pedestal, "pedestal").map_err(to_py)?;
        (p.frames.rows(), p.frames.cols())
    };
    let mut sink = ImagingSink::new(
        rows,
        cols,
        interp,
        None,
        None,
        ImagingOutputs {
            subpixels: Some(subpixels),
            photons: Vec::new(),
            claim: Claim::Refuse,
        },
        true,
    )
    .map_err(to_py)?;
    let report = run(py, &options, &pedestal, &inputs, carry_pedestal, &mut sink)?;
    let s = summary(py, &report, sink.tally(), sink.counted_on_device())?;
    let img = sink
        .image()
        .ok_or_else(|| to_py(Error::Internal("no image was made".into())))?;
    let (h, w) = img.shape();
    let a = PyArray1::from_slice(py, img.counts()).reshape([h, w])?;
    Ok((a.into_any(), s))
}
