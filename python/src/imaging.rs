//! Eta cubes and sub-pixel images from files, as `cluda eta` and `cluda image` make them:
//! the library's session over the inputs by path ([`cluda::engine::paths::find_paths`]) into
//! its eta-interpolation sinks, so that a Python user gets the command's results, at the
//! command's speed, on the GPU counted on the device. Photon lists (`cluda image --photons`'s
//! rows) can be kept in memory instead of files ([`PhotonDestination::Memory`]) and come back
//! as numpy arrays that own the rows (no copy).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use cluda::engine::imaging::{
    CubeSink, ImagingOutputs, ImagingSink, PhotonDestination, check_pixel_map, frame_shape,
    read_gain_for, read_mask_for,
};
use cluda::engine::paths::{PathsReport, find_paths};
use cluda::engine::run::RunOptions;
use cluda::engine::sink::Sink;
use cluda::interpolation::files::read_cube;
use cluda::interpolation::{
    CubeAxes, Edges, EnergyWindow, EtaKind, GainMap, Interpolator, MapKind, Photon, PixelMask,
    Tally,
};
use cluda::io::atomic::Claim;
use cluda::{Error, Result};

use crate::files::{PySignals, finder_choice, run_error};
use crate::{Threads, defaults, to_py};

/// A per-pixel map (`mask`, `gain`) from Python: the path of a `.npy` (read as `--mask` and
/// `--gain` read it), or a 2-D array (the package hands over C-contiguous `bool` masks and
/// `float64` gains).
#[derive(FromPyObject)]
pub enum PixelMapArg<'py, T: numpy::Element> {
    /// A `.npy` file.
    Path(PathBuf),
    /// An array, `rows x cols`.
    Array(PyReadonlyArray2<'py, T>),
}

/// The array's shape, refused unless it is the frames' ([`check_pixel_map`]), and its values
/// row-major.
fn array_values<T: numpy::Element + Copy>(
    option: &'static str,
    a: &PyReadonlyArray2<'_, T>,
    frames: (usize, usize),
) -> Result<((usize, usize), Vec<T>)> {
    let shape = (a.shape()[0], a.shape()[1]);
    check_pixel_map(option, &format!("the {option} array"), shape, frames)?;
    Ok((shape, a.as_array().iter().copied().collect()))
}

/// The per-pixel map `arg` (option `option`: a file read by `read`, or an array made into
/// one by `build`), checked against the frames' shape `frames`.
fn pixel_map_of<T: numpy::Element + Copy, M>(
    option: &'static str,
    arg: Option<PixelMapArg<'_, T>>,
    frames: (usize, usize),
    read: impl FnOnce(Option<&Path>, (usize, usize)) -> Result<Option<Arc<M>>>,
    build: impl FnOnce(usize, usize, Vec<T>) -> Result<M>,
) -> Result<Option<Arc<M>>> {
    match arg {
        None => Ok(None),
        Some(PixelMapArg::Path(p)) => read(Some(&p), frames),
        Some(PixelMapArg::Array(a)) => {
            let ((rows, cols), values) = array_values(option, &a, frames)?;
            Ok(Some(Arc::new(build(rows, cols, values)?)))
        }
    }
}

/// The bad-pixel mask `mask`, checked against the frames' shape `frames`.
fn mask_of(
    mask: Option<PixelMapArg<'_, bool>>,
    frames: (usize, usize),
) -> Result<Option<Arc<PixelMask>>> {
    pixel_map_of("mask", mask, frames, read_mask_for, PixelMask::new)
}

/// The gain map `gain` (ADU per keV), checked against the frames' shape `frames`.
fn gain_of(
    gain: Option<PixelMapArg<'_, f64>>,
    frames: (usize, usize),
) -> Result<Option<Arc<GainMap>>> {
    pixel_map_of("gain", gain, frames, read_gain_for, GainMap::new)
}

/// Input `input`'s photon rows as a 1-D `uint8` array of 33-byte rows that owns them (no
/// copy); the package views it as its photon-list dtype.
fn photon_bytes(py: Python<'_>, rows: Vec<Photon>) -> PyResult<Bound<'_, PyArray1<u8>>> {
    // Photon is packed (align 1, 33 bytes): its vector is a byte vector of 33 x the length.
    let bytes = bytemuck::allocation::try_cast_vec::<Photon, u8>(rows)
        .map_err(|(e, _)| to_py(Error::Internal(format!("photon rows as bytes: {e}"))))?;
    Ok(PyArray1::from_vec(py, bytes))
}

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
                    carry_pedestal=false, mask=None, gain=None))]
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
    mask: Option<PixelMapArg<'py, bool>>,
    gain: Option<PixelMapArg<'py, f64>>,
) -> PyResult<(
    Bound<'py, PyAny>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyDict>,
)> {
    let options = finder_choice(cluster_size, n_sigma, precision, threshold, device, threads)?;
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
    let (mask, gain) = if mask.is_some() || gain.is_some() {
        let frames = frame_shape(&pedestal).map_err(to_py)?;
        (
            mask_of(mask, frames).map_err(to_py)?,
            gain_of(gain, frames).map_err(to_py)?,
        )
    } else {
        (None, None)
    };
    let mut sink = CubeSink::new(axes, true)
        .map_err(to_py)?
        .with_mask(mask)
        .with_gain(gain);
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
/// every input's photons placed through the cube at `eta` (`None` when `subpixels` is), and
/// with `photons` each input's photon rows as bytes (`None` for an input that did not end
/// whole), as `(image, photons, summary)`.
#[pyfunction]
#[pyo3(signature = (inputs, pedestal, eta, subpixels=Some(4), maps="cumulative",
                    cluster_size=defaults::CLUSTER_SIZE, n_sigma=defaults::N_SIGMA,
                    precision=defaults::PRECISION, threshold=defaults::THRESHOLD,
                    device=defaults::DEVICE, threads=None, carry_pedestal=false, mask=None,
                    gain=None, energy_window=None, photons=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn image<'py>(
    py: Python<'py>,
    inputs: Vec<PathBuf>,
    pedestal: PathBuf,
    eta: PathBuf,
    subpixels: Option<u32>,
    maps: &str,
    cluster_size: usize,
    n_sigma: f64,
    precision: &str,
    threshold: &str,
    device: &str,
    threads: Option<Threads>,
    carry_pedestal: bool,
    mask: Option<PixelMapArg<'py, bool>>,
    gain: Option<PixelMapArg<'py, f64>>,
    energy_window: Option<(f64, f64)>,
    photons: bool,
) -> PyResult<(
    Option<Bound<'py, PyAny>>,
    Option<Vec<Option<Bound<'py, PyArray1<u8>>>>>,
    Bound<'py, PyDict>,
)> {
    if subpixels.is_none() && !photons {
        return Err(to_py(Error::param(
            "subpixels",
            "nothing to make: give subpixels (the image) or photons=True (the photon lists)",
        )));
    }
    let options = finder_choice(cluster_size, n_sigma, precision, threshold, device, threads)?;
    let window = energy_window
        .map(|(lo, hi)| {
            EnergyWindow::new(lo, hi).map_err(|_| {
                Error::param(
                    "energy_window",
                    format!("({lo}, {hi}) is not a window: give (lo, hi), lo <= hi, no NaN"),
                )
            })
        })
        .transpose()
        .map_err(to_py)?;
    let map: MapKind = maps.parse().map_err(to_py)?;
    let (axes, cube, _) = read_cube(&eta, None).map_err(to_py)?;
    let interp = Arc::new(Interpolator::new(axes, &cube, map).map_err(to_py)?);
    let (rows, cols) = frame_shape(&pedestal).map_err(to_py)?;
    let mask = mask_of(mask, (rows, cols)).map_err(to_py)?;
    let gain = gain_of(gain, (rows, cols)).map_err(to_py)?;
    let destinations = if photons {
        vec![Some(PhotonDestination::Memory); inputs.len()]
    } else {
        Vec::new()
    };
    let mut sink = ImagingSink::new(
        rows,
        cols,
        interp,
        window,
        mask,
        ImagingOutputs {
            subpixels,
            photons: destinations,
            claim: Claim::Refuse,
        },
        true,
    )
    .and_then(|s| s.with_gain(gain))
    .map_err(to_py)?;
    let report = run(py, &options, &pedestal, &inputs, carry_pedestal, &mut sink)?;
    let s = summary(py, &report, sink.tally(), sink.counted_on_device())?;
    let img = match sink.image() {
        Some(img) => {
            let (h, w) = img.shape();
            Some(
                PyArray1::from_slice(py, img.counts())
                    .reshape([h, w])?
                    .into_any(),
            )
        }
        None => None,
    };
    let lists = if photons {
        let mut v = Vec::with_capacity(inputs.len());
        for k in 0..inputs.len() {
            v.push(
                sink.take_photons(k)
                    .map(|rows| photon_bytes(py, rows))
                    .transpose()?,
            );
        }
        Some(v)
    } else {
        None
    };
    Ok((img, lists, s))
}
