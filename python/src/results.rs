//! Results handed to Python: cluster records as a structured numpy array, maps, frame numbers.

use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyList;

use cluda::{ClusterSize, Error, FrameClusters};

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
pub(crate) fn push_rows(out: &mut Vec<u32>, frame: i32, fc: &FrameClusters<'_>) {
    let w = fc.size().record_words();
    out.reserve(fc.len() * (w + 1));
    for rec in fc.words().chunks_exact(w) {
        out.push(frame as u32);
        out.extend_from_slice(rec);
    }
}

/// Wraps result rows (u32 words, `2 + cells` per cluster) as a structured numpy array, moving
/// the buffer into numpy (no copy).
pub(crate) fn rows_to_numpy<'py>(
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

/// A `rows x cols` map as a float64 numpy array. Goes through a `Vec` (one copy of a small
/// map) because the `numpy` crate and cluda may be built on different ndarray versions.
pub(crate) fn map_to_numpy<'py>(
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
