//! `cluda._cluda`: the native half of the `cluda` Python package (pyo3 + numpy).
//!
//! Everything here is a thin layer over the `cluda` library: it checks and borrows numpy
//! arrays, releases the GIL for every call that does real work, and turns results into numpy
//! arrays without copying them again. The pure-Python package `cluda/` (beside `src/`) adds the
//! helpers that are plain numpy (cluster sums, spectra, streaming) and the docstrings users see.
//!
//! Input arrays: frames must be `uint16` (descriptors `float32`), any other dtype is a
//! `ValueError` (casting could change the values). A C-contiguous, aligned array is used in
//! place, never copied; any other layout (a strided slice, Fortran order, a broadcast view, an
//! unaligned buffer) is copied once into C order by numpy ([`c_aligned`]), so a slice of it is a
//! valid Rust slice and a copy too large for memory is numpy's `MemoryError`, never an abort.
//! `find_iter` over an array copies one chunk at a time, with the GIL held, and hands the copy
//! to its thread: the thread never reads the array itself (Python code may resize or free it
//! between chunks).

mod files;
mod imaging;
mod interp;
mod rows;
mod run;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::{
    Element, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods,
    PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::create_exception;
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyMemoryError, PyOSError,
    PyPermissionError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use cluda::engine::{EngineConfig, RingSlots, open_finder};
use cluda::finder::select::DeviceChoice;
use cluda::generate::{GenConfig, Generator};
use cluda::io::raw::RawReader;
use cluda::io::{ClusterFileReader, Existing, FrameSource, NpyFrames, write_cluster_frames};
use cluda::matcher::{Descriptor, MatchVersion};
use cluda::{
    ClusterSize, Error, FindOptions, FinderConfig, FrameClusters, Frames, Precision, ThresholdMode,
};

/// The finder's defaults, read from the library ([`FindOptions::DEFAULT`],
/// [`DeviceChoice::DEFAULT`]) so that they cannot drift: the signatures here use them, and
/// the module exports them (`DEFAULT_*`) for the Python package's signatures.
mod defaults {
    use super::{DeviceChoice, FindOptions};
    pub const CLUSTER_SIZE: usize = FindOptions::DEFAULT.size.side();
    pub const N_SIGMA: f64 = FindOptions::DEFAULT.n_sigma;
    pub const PRECISION: &str = FindOptions::DEFAULT.precision.name();
    pub const THRESHOLD: &str = FindOptions::DEFAULT.threshold.name();
    pub const DEVICE: &str = DeviceChoice::DEFAULT.name();
    pub const PEDESTAL_FRAMES: u32 = FindOptions::DEFAULT_PEDESTAL_FRAMES;
}

create_exception!(
    cluda,
    PedestalNotReadyError,
    PyRuntimeError,
    "Clusters were asked for before the pedestal held its N frames; push more pedestal frames."
);
create_exception!(
    cluda,
    ClusterLimitError,
    PyRuntimeError,
    "A frame held more clusters than a fixed result slot could take; nothing of the call was kept."
);
create_exception!(
    cluda,
    NoGpuError,
    PyRuntimeError,
    "No usable CUDA driver or device (device=\"gpu\", or a GPU matcher version)."
);
create_exception!(
    cluda,
    CudaError,
    PyRuntimeError,
    "A CUDA driver or cuBLAS call failed, or the driver rejected cluda's kernels."
);
create_exception!(
    cluda,
    GpuMemoryError,
    PyMemoryError,
    "The GPU (or the driver's pinned host memory) could not hold an allocation."
);
create_exception!(
    cluda,
    FileFormatError,
    PyOSError,
    "A file whose contents cluda cannot read (wrong dtype, truncated, corrupt counts)."
);

/// Turns a cluda error into the Python exception of its kind, with Rust's message unchanged.
pub(crate) fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::InvalidParameter { .. } | Error::Shape { .. } => PyValueError::new_err(msg),
        Error::PedestalNotReady { .. } => PedestalNotReadyError::new_err(msg),
        Error::ClusterLimit { .. } => ClusterLimitError::new_err(msg),
        Error::Io { ref source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            std::io::ErrorKind::IsADirectory => PyIsADirectoryError::new_err(msg),
            std::io::ErrorKind::AlreadyExists => PyFileExistsError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        Error::Format { .. } => FileFormatError::new_err(msg),
        Error::NoGpu(_) => NoGpuError::new_err(msg),
        Error::OutOfDeviceMemory { .. } => GpuMemoryError::new_err(msg),
        Error::TooLarge { .. } => PyMemoryError::new_err(msg),
        Error::Internal(_) | Error::Visitor(_) => PyRuntimeError::new_err(msg),
        // CUDA driver, PTX loading and cuBLAS failures, and anything added later.
        _ => CudaError::new_err(msg),
    }
}

/// A mutex that a panic elsewhere cannot make unusable from Python.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The `uint16` samples of a 2-D (one frame) or 3-D (`frames x rows x cols`) array, borrowed
/// read-only: the array itself when it is C-contiguous and aligned, else numpy's C-order copy
/// of it ([`c_aligned`]), which nothing else references.
struct FramesArg<'py> {
    data: PyReadonlyArrayDyn<'py, u16>,
    frames: usize,
    rows: usize,
    cols: usize,
}

impl FramesArg<'_> {
    /// The samples, in C order.
    fn slice(&self) -> PyResult<&[u16]> {
        Ok(self.data.as_slice()?)
    }

    fn frames(&self) -> PyResult<Frames<'_>> {
        Frames::new(self.slice()?, self.frames, self.rows, self.cols).map_err(to_py)
    }
}

/// `arr` as a C-contiguous, aligned array of `T`: `arr` itself when it is one, else a fresh
/// copy made by numpy (`arr.copy(order="C")`: numpy's own memory, aligned for `T`, referenced by
/// nothing but the result). rust-numpy's `as_slice` checks contiguity only; an unaligned array
/// (`np.frombuffer(buf, np.uint16, offset=1)`) would make a misaligned `&[T]`, which is
/// undefined behaviour, and reading a non-contiguous one element by element into a `Vec` would
/// abort the interpreter when it does not fit (a broadcast view of 10**6 frames).
///
/// # Errors
/// numpy's (`MemoryError` when the copy does not fit).
pub(crate) fn c_aligned<'py, T: Element>(
    arr: &Bound<'py, PyArrayDyn<T>>,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let aligned: bool = arr.getattr("flags")?.getattr("aligned")?.extract()?;
    if aligned && arr.is_c_contiguous() {
        return Ok(arr.clone());
    }
    let copy = arr.call_method1("copy", ("C",))?;
    Ok(copy.downcast_into::<PyArrayDyn<T>>()?)
}

/// The samples of a C-contiguous, aligned array (from [`c_aligned`]) copied into a `Vec`
/// whose allocation is checked: a `MemoryError` naming `what` when it does not fit, never an
/// abort.
pub(crate) fn checked_copy<T: Element + Copy>(src: &[T], what: &str) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(src.len()).map_err(|_| {
        PyMemoryError::new_err(format!(
            "{what}: a copy of {} bytes does not fit in memory",
            std::mem::size_of_val(src)
        ))
    })?;
    v.extend_from_slice(src);
    Ok(v)
}

/// A thread count from Python: a whole number (a Python or numpy int), never a `bool`
/// (`threads=True` is not "one thread"), so `threads=True` is a `TypeError` naming the
/// parameter.
pub(crate) struct Threads(pub usize);

impl<'py> FromPyObject<'py> for Threads {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        let is_bool = ob.is_instance_of::<pyo3::types::PyBool>()
            || ob
                .get_type()
                .name()
                .is_ok_and(|n| n == "bool" || n == "bool_");
        if is_bool {
            return Err(PyTypeError::new_err(format!(
                "threads must be a whole number of threads (or None for every core), got {}",
                ob.repr()
                    .map(|r| r.to_string())
                    .unwrap_or_else(|_| "a bool".into())
            )));
        }
        if let Ok(n) = ob.extract::<usize>() {
            return Ok(Threads(n));
        }
        let text = ob
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "an object".into());
        if ob.call_method0("__index__").is_ok() {
            // A whole number out of range: negative, or beyond any thread count.
            return Err(PyValueError::new_err(format!(
                "threads must be a whole number from 1 to 2**64 - 1, got {text}"
            )));
        }
        Err(PyTypeError::new_err(format!(
            "threads must be a whole number of threads (or None for every core), got {text}"
        )))
    }
}

/// Checks that `obj` is a numpy array of dtype `T` (named `dtype` in the error) and returns it
/// typed; `what` names the argument.
fn typed_array<'py, T: Element>(
    obj: &Bound<'py, PyAny>,
    what: &str,
    dtype: &str,
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let untyped = obj.downcast::<PyUntypedArray>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a numpy array of {dtype}, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "an object".into())
        ))
    })?;
    let want = numpy::dtype::<T>(obj.py());
    if !untyped.dtype().is_equiv_to(&want) {
        return Err(PyValueError::new_err(format!(
            "{what} must have dtype {dtype} (native byte order), got {}; convert explicitly, e.g. \
             arr.astype(np.{dtype}), if the values fit",
            untyped.dtype()
        )));
    }
    Ok(untyped.downcast::<PyArrayDyn<T>>()?.clone())
}

/// A frames argument's array and its shape `(frames, rows, cols)`: a 2-D (one frame) or 3-D
/// uint16 array, nothing read or copied.
pub(crate) fn frames_shape<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(Bound<'py, PyArrayDyn<u16>>, usize, usize, usize)> {
    let arr = typed_array::<u16>(obj, what, "uint16")?;
    let shape = arr.shape().to_vec();
    let (frames, rows, cols) = match shape[..] {
        [r, c] => (1, r, c),
        [f, r, c] => (f, r, c),
        _ => {
            return Err(PyValueError::new_err(format!(
                "{what} must be a 2-D (rows x cols) or 3-D (frames x rows x cols) array, got {} \
                 dimensions (shape {shape:?})",
                shape.len()
            )));
        }
    };
    Ok((arr, frames, rows, cols))
}

/// Reads a frames argument: a 2-D (one frame) or 3-D uint16 array, borrowed in place or
/// copied once into C order by numpy ([`c_aligned`]).
fn frames_arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<FramesArg<'py>> {
    let (arr, frames, rows, cols) = frames_shape(obj, what)?;
    // In place, or one copy into C order by numpy (documented in the package).
    let data = c_aligned(&arr)?.readonly();
    Ok(FramesArg {
        data,
        frames,
        rows,
        cols,
    })
}

/// The `.npy` file behind a memory map (`file`: its path and data offset, from the Python
/// side), opened to be read as `cluda find` reads it, when its header matches the array's
/// `(frames, rows, cols)` and offset; `None` otherwise (the array's memory is used instead).
fn file_input(
    py: Python<'_>,
    (path, offset): (PathBuf, u64),
    shape: (usize, usize, usize),
) -> Option<run::Input> {
    let f = py.allow_threads(|| -> Option<NpyFrames> {
        let h = cluda::io::npy::read_header(&path).ok()?;
        let f = NpyFrames::open(&path).ok()?;
        (h.data_offset == offset && (f.len(), f.rows(), f.cols()) == shape).then_some(f)
    })?;
    Some(run::Input::Source {
        source: Box::new(f),
        numbered: false,
    })
}

/// The numpy dtype of result rows for clusters of `cells` values.
pub(crate) fn cluster_dtype<'py>(py: Python<'py>, cells: usize) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let fields = PyList::new(
        py,
        [
            ("frame", "<i4").into_pyobject(py)?.into_any(),
            ("x", "<u2").into_pyobject(py)?.into_any(),
            ("y", "<u2").into_pyobject(py)?.into_any(),
            ("data", "<i4", (cells,)).into_pyobject(py)?.into_any(),
        ],
    )?;
    np.getattr("dtype")?.call1((fields,))
}

/// Appends one frame's records as result rows `[frame, x | y << 16, data...]` (u32 words).
fn push_rows(out: &mut Vec<u32>, frame: i32, fc: &FrameClusters<'_>) {
    let w = fc.size().record_words();
    out.reserve(fc.len() * (w + 1));
    for rec in fc.words().chunks_exact(w) {
        out.push(frame as u32);
        out.extend_from_slice(rec);
    }
}

/// Wraps result rows (u32 words, `2 + cells` per cluster) as a structured numpy array, moving
/// the buffer into numpy (no copy).
fn rows_to_numpy<'py>(
    py: Python<'py>,
    words: Vec<u32>,
    size: ClusterSize,
) -> PyResult<Bound<'py, PyAny>> {
    let arr = PyArray1::from_vec(py, words);
    arr.call_method1("view", (cluster_dtype(py, size.cells())?,))
}

pub(crate) fn frame_number(first: i64, i: usize) -> Result<i32, Error> {
    i64::try_from(i)
        .ok()
        .and_then(|i| first.checked_add(i))
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            Error::param(
                "first_frame",
                format!("frame number {first} + {i} does not fit in the result's int32"),
            )
        })
}

pub(crate) fn parse_precision(s: &str) -> PyResult<Precision> {
    let s = match s {
        "f32naive" | "f32_naive" => "f32-naive",
        s => s,
    };
    s.parse().map_err(to_py)
}

/// The cluster finder (see the Python class `cluda.ClusterFinder` for the documentation).
#[pyclass(subclass, module = "cluda._cluda", name = "ClusterFinder")]
struct PyClusterFinder {
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
        let (finder, note, ring) = py
            .allow_threads(move || -> Result<_, Error> {
                let (mut finder, note) = open_finder(cfg, choice, threads)?;
                // A GPU finder allocates at once, as `cluda find` does at start-up, the
                // engine's ring (page-locked: about 0.3 s for 400x400 frames) and its
                // pipeline's buffers, so that no find call pays for them.
                let ring = if finder.device().starts_with("gpu") {
                    let (rows, cols) = (finder.config().rows, finder.config().cols);
                    let engine = EngineConfig::for_frames(rows, cols);
                    finder.reserve(engine.chunk)?;
                    Some(RingSlots::allocate(finder.as_ref(), engine)?)
                } else {
                    None
                };
                Ok((finder, note, ring))
            })
            .map_err(to_py)?;
        let device = finder.device();
        let gpu = device.starts_with("gpu");
        let shared = run::Shared::new(finder, gpu);
        *lock(&shared.ring) = ring;
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
        Ok(py.allow_threads(|| lock(&self.shared.finder).is_ready()))
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
        py.allow_threads(|| lock(&self.shared.finder).push_pedestal(frames))
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
            .allow_threads(|| lock(&self.shared.finder).pedestal()?.mean_map())
            .map_err(to_py)?;
        map_to_numpy(py, map)
    }

    /// The noise (standard deviation of the current window) of every pixel, float64.
    fn pedestal_std<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        self.shared.check_free()?;
        let map = py
            .allow_threads(|| lock(&self.shared.finder).pedestal()?.std_map())
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

/// An slsDetector raw acquisition (see the Python docs of `cluda.RawFile`).
#[pyclass(subclass, module = "cluda._cluda", name = "RawFile")]
struct PyRawFile {
    /// Shared with a `find_iter` thread that reads the acquisition.
    reader: Arc<Mutex<RawReader>>,
    path: PathBuf,
    rows: usize,
    cols: usize,
    total_frames: u64,
    frames_on_disk: u64,
}

impl PyRawFile {
    /// The reader, unless a find call or a `find_iter` iteration reads the acquisition now
    /// (waiting for an iteration that waits for this thread would never end).
    fn reader(&self) -> PyResult<MutexGuard<'_, RawReader>> {
        match self.reader.try_lock() {
            Ok(r) => Ok(r),
            Err(std::sync::TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "this RawFile is being read by a ClusterFinder (a find call or a find_iter \
                 iteration); finish that first",
            )),
        }
    }
}

#[pymethods]
impl PyRawFile {
    #[new]
    fn new(py: Python<'_>, master_path: PathBuf) -> PyResult<Self> {
        let p = master_path.clone();
        let reader = py.allow_threads(|| RawReader::open(&p)).map_err(to_py)?;
        Ok(Self {
            rows: reader.rows(),
            cols: reader.cols(),
            total_frames: reader.master().total_frames,
            frames_on_disk: reader.frames_on_disk(),
            reader: Arc::new(Mutex::new(reader)),
            path: master_path,
        })
    }

    /// Rows per frame.
    #[getter]
    fn rows(&self) -> usize {
        self.rows
    }

    /// Columns per frame.
    #[getter]
    fn cols(&self) -> usize {
        self.cols
    }

    /// Frames the master file says were acquired.
    #[getter]
    fn total_frames(&self) -> u64 {
        self.total_frames
    }

    /// Frame records present in the data files.
    #[getter]
    fn frames_on_disk(&self) -> u64 {
        self.frames_on_disk
    }

    /// The master file's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Reads up to `n` frames: `(frame_numbers uint64 (k,), frames uint16 (k, rows, cols))`.
    fn read_n<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyTuple>> {
        let mut guard = self.reader()?;
        let reader: &mut RawReader = &mut guard;
        let (numbers, data) = py
            .allow_threads(|| -> Result<(Vec<u64>, Vec<u16>), Error> {
                let mut data = Vec::new();
                let infos = reader.next_frames(n, &mut data)?;
                Ok((infos.iter().map(|i| i.frame_number).collect(), data))
            })
            .map_err(to_py)?;
        let k = numbers.len();
        let frames = PyArray1::from_vec(py, data).reshape([k, self.rows, self.cols])?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, numbers).into_any(),
                frames.into_any(),
            ],
        )
    }

    /// The gap report so far, as a dict (complete once every frame was read).
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let reader = self.reader()?;
        let r = reader.report();
        let d = PyDict::new(py);
        d.set_item("frames_delivered", r.frames_delivered)?;
        d.set_item("frames_on_disk", r.frames_on_disk)?;
        d.set_item("total_frames", r.total_frames)?;
        d.set_item("first_frame_number", r.first_frame_number)?;
        d.set_item("last_frame_number", r.last_frame_number)?;
        d.set_item(
            "missing",
            r.missing
                .iter()
                .map(|m| (m.first, m.count))
                .collect::<Vec<_>>(),
        )?;
        d.set_item("missing_count", r.missing_count())?;
        let incomplete = PyList::empty(py);
        for f in &r.incomplete {
            let e = PyDict::new(py);
            e.set_item("frame_number", f.frame_number)?;
            e.set_item("packets_caught", f.packets_caught)?;
            e.set_item("mask_count", f.mask_count)?;
            e.set_item("expected", f.expected)?;
            e.set_item("delivered", f.delivered)?;
            incomplete.append(e)?;
        }
        d.set_item("incomplete", incomplete)?;
        d.set_item(
            "out_of_order",
            r.out_of_order
                .iter()
                .map(|o| (o.after, o.got))
                .collect::<Vec<_>>(),
        )?;
        let truncated = PyList::empty(py);
        for t in &r.truncated {
            let e = PyDict::new(py);
            e.set_item("path", &t.path)?;
            e.set_item("frame_in_file", t.frame_in_file)?;
            e.set_item("bytes_present", t.bytes_present)?;
            e.set_item("record_bytes", t.record_bytes)?;
            e.set_item("frame_number", t.frame_number)?;
            truncated.append(e)?;
        }
        d.set_item("truncated", truncated)?;
        d.set_item("short_files", r.short_files.clone())?;
        d.set_item("clean", r.is_clean())?;
        d.set_item("summary", r.summary())?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "cluda.RawFile({:?}, rows={}, cols={}, total_frames={})",
            self.path.display().to_string(),
            self.rows,
            self.cols,
            self.total_frames
        )
    }
}

/// Reads a whole uint16 `.npy` frame stack: always 3-D (a 2-D file is one frame).
#[pyfunction]
fn read_npy_frames<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let arr = py
        .allow_threads(|| cluda::io::read_u16_frames(&path))
        .map_err(to_py)?;
    let shape = arr.shape.clone();
    Ok(PyArray1::from_vec(py, arr.data).reshape(shape)?.into_any())
}

/// Reads a cluster file; returns `(rows as words, frame numbers)` (internal).
#[pyfunction]
fn _read_cluster_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    cluster_size: usize,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray1<i32>>)> {
    let size = ClusterSize::from_side(cluster_size).map_err(to_py)?;
    let (words, numbers) = py
        .allow_threads(|| -> Result<(Vec<u32>, Vec<i32>), Error> {
            let mut r = ClusterFileReader::open(&path, size)?;
            let (mut out, mut numbers, mut buf) = (Vec::new(), Vec::new(), Vec::new());
            while let Some(n) = r.next_frame(&mut buf)? {
                push_rows(
                    &mut out,
                    n,
                    &FrameClusters::new(cluda::FrameNumber(0), size, &buf),
                );
                numbers.push(n);
            }
            Ok((out, numbers))
        })
        .map_err(to_py)?;
    Ok((
        rows_to_numpy(py, words, size)?,
        PyArray1::from_vec(py, numbers),
    ))
}

/// Writes result rows (u32 words, `2 + cells` per row) as a cluster file, one record per entry
/// of `frames` in that order (internal: `cluda.write_cluster_file` checks the arguments).
/// Every argument is checked before the file is touched, and the file is written through the
/// library's atomic path ([`cluda::io::write_cluster_frames`]): a temporary file renamed into
/// place when complete, so an error or a full disk leaves the old file as it was. An existing
/// file is refused (`FileExistsError`) unless `overwrite` or `append` (which needs a cluster
/// file), also one that appears while the file is written (the rename refuses it).
#[pyfunction]
#[pyo3(signature = (path, rows, frames, cluster_size, append, overwrite=false))]
fn _write_cluster_file(
    py: Python<'_>,
    path: PathBuf,
    rows: &Bound<'_, PyAny>,
    frames: &Bound<'_, PyAny>,
    cluster_size: usize,
    append: bool,
    overwrite: bool,
) -> PyResult<()> {
    let size = ClusterSize::from_side(cluster_size).map_err(to_py)?;
    // Aligned and C-contiguous (numpy copies an array that is not), so the slices are valid.
    let rows = c_aligned(&typed_array::<u32>(rows, "clusters", "uint32")?)?.readonly();
    let frames = c_aligned(&typed_array::<i32>(frames, "frames", "int32")?)?.readonly();
    let (rows, frames) = (rows.as_slice()?, frames.as_slice()?);
    let w = size.record_words();
    if rows.len() % (w + 1) != 0 {
        return Err(PyValueError::new_err(format!(
            "clusters: {} words are not whole {size} rows",
            rows.len()
        )));
    }
    let existing = match (append, overwrite) {
        (true, _) => Existing::Append,
        (false, true) => Existing::Overwrite,
        (false, false) => Existing::Refuse,
    };
    py.allow_threads(|| -> Result<(), Error> {
        // Group the rows by frame first: a row out of order is an error before any write.
        let mut rest = rows.chunks_exact(w + 1).enumerate().peekable();
        let mut grouped: Vec<(i32, Vec<u32>)> = Vec::new();
        grouped
            .try_reserve_exact(frames.len())
            .map_err(|_| Error::TooLarge {
                what: format!("the index of {} frames to write", frames.len()),
                bytes: (frames.len() as u64).saturating_mul(32),
                available: 0,
            })?;
        for &f in frames {
            let mut words = Vec::new();
            while let Some((_, row)) = rest.next_if(|(_, row)| row[0] as i32 == f) {
                words.extend_from_slice(&row[1..]);
            }
            grouped.push((f, words));
        }
        if let Some((i, row)) = rest.next() {
            return Err(Error::param(
                "clusters",
                format!(
                    "row {i} belongs to frame {}, which is not next in `frames`: rows must be \
                     grouped by frame in the order of `frames`",
                    row[0] as i32
                ),
            ));
        }
        let views: Vec<(i32, &[u32])> = grouped.iter().map(|(f, w)| (*f, w.as_slice())).collect();
        write_cluster_frames(&path, size, &views, existing)
    })
    .map_err(to_py)
}

/// Frames `first .. first + count` of the deterministic MOENCH-like generator.
#[pyfunction]
#[pyo3(signature = (count, first=0, photons=true, shape=(400, 400), seed=1))]
fn generate<'py>(
    py: Python<'py>,
    count: usize,
    first: u64,
    photons: bool,
    shape: (usize, usize),
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, cols) = shape;
    if rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(count))
        .is_none()
    {
        return Err(PyMemoryError::new_err(format!(
            "{count} frames of {rows} x {cols} do not fit in memory"
        )));
    }
    let data = py
        .allow_threads(|| -> Result<Vec<u16>, Error> {
            let g = Generator::new(GenConfig::new(rows, cols, seed))?;
            g.try_frames(first, count, photons)
        })
        .map_err(to_py)?;
    Ok(PyArray1::from_vec(py, data)
        .reshape([count, rows, cols])?
        .into_any())
}

/// `match_nearest`'s result: the indices and the squared distances.
type Matches<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<f32>>);

/// Nearest right descriptor of every left one: `(index uint32, squared distance float32)`.
#[pyfunction]
#[pyo3(signature = (lhs, rhs, version="cpu"))]
fn match_nearest<'py>(
    py: Python<'py>,
    lhs: &Bound<'py, PyAny>,
    rhs: &Bound<'py, PyAny>,
    version: &str,
) -> PyResult<Matches<'py>> {
    let version: MatchVersion = version.parse().map_err(to_py)?;
    let descriptors = |obj: &Bound<'py, PyAny>, what: &str| -> PyResult<Vec<f32>> {
        let a = typed_array::<f32>(obj, what, "float32")?;
        let shape = a.shape().to_vec();
        if shape.len() != 2 || shape[1] != cluda::matcher::DIM {
            return Err(PyValueError::new_err(format!(
                "{what} must be a 2-D (n, {}) array of descriptors, got shape {shape:?}",
                cluda::matcher::DIM
            )));
        }
        // Copied into an aligned buffer of descriptors (a numpy array need not be aligned:
        // numpy copies an unaligned or strided one first, `c_aligned`), the allocation checked.
        let a = c_aligned(&a)?;
        let ro = a.readonly();
        checked_copy(ro.as_slice()?, what)
    };
    let (l, r) = (descriptors(lhs, "lhs")?, descriptors(rhs, "rhs")?);
    let matches = py
        .allow_threads(|| {
            let l: &[Descriptor] = bytemuck::cast_slice(&l);
            let r: &[Descriptor] = bytemuck::cast_slice(&r);
            cluda::matcher::match_nearest(l, r, version)
        })
        .map_err(to_py)?;
    Ok((
        PyArray1::from_iter(py, matches.iter().map(|m| m.index)),
        PyArray1::from_iter(py, matches.iter().map(|m| m.distance)),
    ))
}

/// The numpy dtype of result rows for `cluster_size` clusters (internal).
#[pyfunction]
fn _cluster_dtype(py: Python<'_>, cluster_size: usize) -> PyResult<Bound<'_, PyAny>> {
    let size = ClusterSize::from_side(cluster_size).map_err(to_py)?;
    cluster_dtype(py, size.cells())
}

#[pymodule]
fn _cluda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyClusterFinder>()?;
    m.add_class::<PyRawFile>()?;
    m.add_class::<run::FindIter>()?;
    m.add_class::<rows::RowMemory>()?;
    m.add_class::<files::FileSession>()?;
    m.add_class::<interp::PyInterpolator>()?;
    m.add_function(wrap_pyfunction!(interp::_etas, m)?)?;
    m.add_function(wrap_pyfunction!(files::find_files, m)?)?;
    m.add_function(wrap_pyfunction!(imaging::eta_cube, m)?)?;
    m.add_function(wrap_pyfunction!(imaging::image, m)?)?;
    m.add_function(wrap_pyfunction!(files::plan_outputs, m)?)?;
    m.add_function(wrap_pyfunction!(files::check_options, m)?)?;
    m.add_function(wrap_pyfunction!(read_npy_frames, m)?)?;
    m.add_function(wrap_pyfunction!(_read_cluster_file, m)?)?;
    m.add_function(wrap_pyfunction!(_write_cluster_file, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(match_nearest, m)?)?;
    m.add_function(wrap_pyfunction!(_cluster_dtype, m)?)?;
    m.add(
        "PedestalNotReadyError",
        py.get_type::<PedestalNotReadyError>(),
    )?;
    m.add("ClusterLimitError", py.get_type::<ClusterLimitError>())?;
    m.add("NoGpuError", py.get_type::<NoGpuError>())?;
    m.add("CudaError", py.get_type::<CudaError>())?;
    m.add("GpuMemoryError", py.get_type::<GpuMemoryError>())?;
    m.add("FileFormatError", py.get_type::<FileFormatError>())?;
    m.add("DEFAULT_CLUSTER_SIZE", defaults::CLUSTER_SIZE)?;
    m.add("DEFAULT_N_SIGMA", defaults::N_SIGMA)?;
    m.add("DEFAULT_PRECISION", defaults::PRECISION)?;
    m.add("DEFAULT_THRESHOLD", defaults::THRESHOLD)?;
    m.add("DEFAULT_DEVICE", defaults::DEVICE)?;
    m.add("DEFAULT_PEDESTAL_FRAMES", defaults::PEDESTAL_FRAMES)?;
    Ok(())
}

/// A `rows x cols` map as a float64 numpy array. Goes through a `Vec` (one copy of a small
/// map) because the `numpy` crate and cluda may be built on different ndarray versions.
fn map_to_numpy<'py>(
    py: Python<'py>,
    map: cluda::ndarray::Array2<f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let (rows, cols) = map.dim();
    let (data, offset) = map.into_raw_vec_and_offset();
    if offset.unwrap_or(0) != 0 || data.len() != rows * cols {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "internal: a pedestal map is not a plain rows x cols array",
        ));
    }
    PyArray1::from_vec(py, data).reshape([rows, cols])
}
