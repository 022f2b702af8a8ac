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

mod args;
mod files;
mod finder;
mod functions;
mod imaging;
mod interp;
mod raw_file;
mod results;
mod rows;
mod run;

pub(crate) use args::{Threads, c_aligned, checked_copy, frames_shape, lock, parse_precision};
use cluda::finder::select::DeviceChoice;
use cluda::{Error, FindOptions};
use finder::PyClusterFinder;
use functions::{
    _cluster_dtype, _read_cluster_file, _write_cluster_file, generate, match_nearest,
    read_npy_frames,
};
use pyo3::create_exception;
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyMemoryError, PyOSError,
    PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use raw_file::PyRawFile;
pub(crate) use results::{cluster_dtype, frame_number};

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
