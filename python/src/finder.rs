//! `ClusterFinder`: a finder kept between calls, fed arrays or files.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use numpy::{PyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use cluda::engine::open_finder;
use cluda::finder::select::DeviceChoice;
use cluda::io::{FrameSource, NpyFrames};
use cluda::{ClusterSize, Error, FinderConfig, ThresholdMode};

use crate::args::{Threads, file_input, frames_arg, frames_shape, lock, parse_precision};
use crate::raw_file::PyRawFile;
use crate::results::map_to_numpy;
use crate::rows;
use crate::run;
use crate::{defaults, to_py};

/// The cluster finder (see the Python class `cluda.ClusterFinder` for the documentation).
#[pyclass(subclass, module = "cluda._cluda", name = "ClusterFinder")]
pub(crate) struct PyClusterFinder {
    /// The finder and its counters, shared with a running `find_iter`'s thread.
    shared: Arc<run::Shared>,
    config: FinderConfig,
    device: String,
    note: String,
}

impl PyClusterFinder {
    /// The frames of a find call: a `RawFile` (from where it stands), a memory map of a whole
    /// `.npy` file on a GPU (`file`: its path and data offset, from the Python side; read from
    /// the file as `cluda find` reads it once it is seen to match), else the array's memory
    /// (borrowed when C-contiguous and aligned, else numpy's copy of it). The second value
    /// keeps the borrowed memory readable, and borrowed, for the call.
    fn input_of<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        file: Option<(PathBuf, u64)>,
        via: run::Via,
    ) -> PyResult<(run::Input, Option<PyReadonlyArrayDyn<'py, u16>>)> {
        if let Ok(raw) = frames.downcast::<PyRawFile>() {
            return Ok((run::Input::Raw(raw.borrow().reader.clone()), None));
        }
        // On a GPU the file is read as `cluda find` reads it (several threads, straight into
        // the page-locked ring); a CPU finder reads the map's memory in place, with no copy.
        if let (Some(file), run::Via::Auto, true) = (file, via, self.shared.gpu) {
            let (arr, n, rows, cols) = frames_shape(frames, "frames")?;
            if arr.is_c_contiguous()
                && let Some(input) = file_input(py, file, (n, rows, cols))
            {
                return Ok((input, None));
            }
        }
        let arg = frames_arg(frames, "frames")?;
        let (rows, cols) = (arg.rows, arg.cols);
        let s = arg.slice()?;
        let input = run::Input::Borrowed {
            ptr: s.as_ptr() as usize,
            len: s.len(),
            rows,
            cols,
        };
        Ok((input, Some(arg.data)))
    }

    /// Rows (or, with `keep` false, the cluster count) of one run over `input`.
    fn find_input(
        &self,
        py: Python<'_>,
        mut input: run::Input,
        first_frame: Option<i64>,
        via: run::Via,
        keep: bool,
    ) -> PyResult<PyObject> {
        self.shared.check_free()?;
        let (shared, size) = (&*self.shared, self.config.size);
        let (rows, clusters) = py
            .allow_threads(|| run::find_rows(shared, &mut input, first_frame, via, size, keep))
            .map_err(to_py)?;
        drop(input);
        if keep {
            Ok(rows::into_numpy(rows, py)?.unbind())
        } else {
            Ok(clusters.into_pyobject(py)?.into_any().unbind())
        }
    }
}

#[pymethods]
impl PyClusterFinder {
    #[new]
    #[pyo3(signature = (shape, cluster_size=defaults::CLUSTER_SIZE, n_sigma=defaults::N_SIGMA,
                        precision=defaults::PRECISION, threshold=defaults::THRESHOLD,
                        device=defaults::DEVICE, pedestal_frames=defaults::PEDESTAL_FRAMES,
                        threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        shape: (usize, usize),
        cluster_size: usize,
        n_sigma: f64,
        precision: &str,
        threshold: &str,
        device: &str,
        pedestal_frames: u32,
        threads: Option<Threads>,
    ) -> PyResult<Self> {
        let threads = threads.map(|t| t.0);
        let config = FinderConfig::new(shape.0, shape.1)
            .size(ClusterSize::from_side(cluster_size).map_err(to_py)?)
            .n_sigma(n_sigma)
            .pedestal_frames(pedestal_frames)
            .threshold(threshold.parse::<ThresholdMode>().map_err(to_py)?)
            .precision(parse_precision(precision)?);
        config.validate().map_err(to_py)?;
        let choice: DeviceChoice = device.parse().map_err(to_py)?;
        let cfg = config.clone();
        let session = py
            .allow_threads(move || -> Result<_, Error> {
                let (finder, note) = open_finder(cfg, choice, threads)?;
                // Set up as `cluda find` sets up its run (a GPU's ring and buffers at once).
                run::session(finder, note)
            })
            .map_err(to_py)?;
        let device = session.device();
        let note = session.device_note().to_string();
        let gpu = device.starts_with("gpu");
        let shared = run::Shared::new(session, gpu);
        Ok(Self {
            shared: Arc::new(shared),
            device,
            config,
            note,
        })
    }

    /// `"cpu"` or `"gpu"`: where this finder runs.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    /// A sentence saying which device was chosen and why.
    #[getter]
    fn device_note(&self) -> String {
        self.note.clone()
    }

    /// `(rows, cols)` of every frame.
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.config.rows, self.config.cols)
    }

    /// The cluster window side (3, 5, 7 or 9).
    #[getter]
    fn cluster_size(&self) -> usize {
        self.config.size.side()
    }

    /// The threshold in standard deviations.
    #[getter]
    fn n_sigma(&self) -> f64 {
        self.config.n_sigma
    }

    /// `"f64"`, `"f32"` or `"f32-naive"`.
    #[getter]
    fn precision(&self) -> &'static str {
        self.config.precision.name()
    }

    /// `"live"` or `"frozen"`.
    #[getter]
    fn threshold(&self) -> &'static str {
        self.config.threshold.name()
    }

    /// The pedestal window N.
    #[getter]
    fn pedestal_frames(&self) -> u32 {
        self.config.pedestal_frames
    }

    /// Whether the pedestal holds its N frames, so clusters can be found.
    #[getter]
    fn is_ready(&self, py: Python<'_>) -> PyResult<bool> {
        self.shared.check_free()?;
        Ok(py.allow_threads(|| lock(&self.shared.session).finder().is_ready()))
    }

    /// Data frames found so far (the number the next `find` call's first frame gets).
    #[getter]
    fn frames_found(&self) -> i64 {
        self.shared.found.load(Ordering::Acquire)
    }

    /// Seconds the last find call spent in Rust (finding and writing the rows), without the
    /// Python side: `bench/overhead.py` compares it with the call's wall time.
    #[getter]
    fn last_find_seconds(&self) -> f64 {
        self.shared.last_find_seconds()
    }

    /// Pushes dark frames (2-D or 3-D uint16) into the pedestal.
    fn push_pedestal(&self, py: Python<'_>, frames: &Bound<'_, PyAny>) -> PyResult<()> {
        self.shared.check_free()?;
        let arg = frames_arg(frames, "frames")?;
        let frames = arg.frames()?;
        py.allow_threads(|| lock(&self.shared.session).finder_mut().push_pedestal(frames))
            .map_err(to_py)
    }

    /// Finds the clusters of every frame of an array (in memory or a memory map of a whole
    /// `.npy` file: `file` is its path and data offset) or of a `RawFile`; returns the rows
    /// (internal: the Python class documents it). `via` ("auto", "engine", "direct") and
    /// `keep` (false: only count the clusters) are for benchmarks.
    #[pyo3(signature = (frames, first_frame=None, file=None, via="auto", keep=true))]
    fn find(
        &self,
        py: Python<'_>,
        frames: &Bound<'_, PyAny>,
        first_frame: Option<i64>,
        file: Option<(PathBuf, u64)>,
        via: &str,
        keep: bool,
    ) -> PyResult<PyObject> {
        self.shared.check_free()?;
        let via = run::Via::parse(via)?;
        let (input, borrowed) = self.input_of(py, frames, file, via)?;
        let out = self.find_input(py, input, first_frame, via, keep);
        drop(borrowed);
        out
    }

    /// Finds the clusters of every frame of a `.npy` file or a raw acquisition (by its
    /// master file), read as `cluda find` reads it; returns the rows (internal).
    #[pyo3(signature = (path, first_frame=None, keep=true))]
    fn find_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        first_frame: Option<i64>,
        keep: bool,
    ) -> PyResult<PyObject> {
        self.shared.check_free()?;
        let source = py
            .allow_threads(|| {
                cluda::io::open_frames_or(&path, |p| {
                    Ok(Box::new(NpyFrames::open(p)?) as Box<dyn FrameSource + Send>)
                })
            })
            .map_err(to_py)?;
        let input = run::Input::Source {
            source,
            numbered: cluda::io::is_raw_master(&path),
        };
        self.find_input(py, input, first_frame, run::Via::Auto, keep)
    }

    /// The iterator of `find_iter` over an array, a memory map (`file` as for `find`) or a
    /// `RawFile` (internal).
    #[pyo3(signature = (frames, chunk, file=None))]
    fn find_chunks(
        &self,
        py: Python<'_>,
        frames: &Bound<'_, PyAny>,
        chunk: usize,
        file: Option<(PathBuf, u64)>,
    ) -> PyResult<run::FindIter> {
        self.shared.check_free()?;
        if chunk == 0 {
            return Err(PyValueError::new_err("chunk must be at least 1, got 0"));
        }
        let (shared, size) = (self.shared.clone(), self.config.size);
        if let Ok(raw) = frames.downcast::<PyRawFile>() {
            let input = run::Input::Raw(raw.borrow().reader.clone());
            return Ok(run::FindIter::over_source(shared, input, chunk, size));
        }
        let (arr, n, rows, cols) = frames_shape(frames, "frames")?;
        // A memory map of a whole `.npy` file is read from the file (on the CPU too): the
        // thread then owns what it reads, and a file that shrinks is an error naming it, not
        // a SIGBUS in the map.
        if let Some(file) = file
            && arr.is_c_contiguous()
            && let Some(input) = file_input(py, file, (n, rows, cols))
        {
            return Ok(run::FindIter::over_source(shared, input, chunk, size));
        }
        // An array: copied a chunk at a time while the GIL is held (never whole, never read
        // by the thread itself).
        Ok(run::FindIter::over_array(
            shared,
            frames.clone().unbind(),
            (rows, cols),
            chunk,
            size,
        ))
    }

    /// The mean (dark level) of every pixel, `rows x cols` float64.
    fn pedestal_mean<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.shared.check_free()?;
        let map = py
            .allow_threads(|| lock(&self.shared.session).finder().pedestal()?.mean_map())
            .map_err(to_py)?;
        map_to_numpy(py, map)
    }

    /// The noise (standard deviation of the current window) of every pixel, float64.
    fn pedestal_std<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.shared.check_free()?;
        let map = py
            .allow_threads(|| lock(&self.shared.session).finder().pedestal()?.std_map())
            .map_err(to_py)?;
        map_to_numpy(py, map)
    }

    fn __repr__(&self) -> String {
        format!(
            "cluda.ClusterFinder(shape=({}, {}), cluster_size={}, n_sigma={}, precision={:?}, \
             threshold={:?}, device={:?}, pedestal_frames={})",
            self.config.rows,
            self.config.cols,
            self.config.size.side(),
            self.config.n_sigma,
            self.config.precision.name(),
            self.config.threshold.name(),
            self.device,
            self.config.pedestal_frames
        )
    }
}
