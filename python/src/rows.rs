//! Result rows handed to numpy: the library's [`RowBuf`] (rows written once, by Rust, into
//! one growing anonymous map, see `cluda::engine::rows`) becomes the memory of the returned
//! structured array (`cluster_dtype`), owned by a small Python object that is the array's
//! base: no copy.

use memmap2::MmapMut;
use numpy::PyArray1;
use numpy::ndarray::ArrayView1;
use pyo3::prelude::*;

pub use cluda::engine::rows::RowBuf;

/// The rows as a numpy structured array (`cluster_dtype`) that owns their memory (trim the
/// buffer first, see [`RowBuf::trim`], without the GIL).
pub fn into_numpy(rows: RowBuf, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let dtype = crate::cluster_dtype(py, rows.size().cells())?;
    let arr = match rows.into_map() {
        Some((map, words)) => {
            // SAFETY: the map's first `words` u32 are the rows (page-aligned, so aligned);
            // it is moved into the owner below, which keeps it mapped (moving a map does not
            // move its memory) for as long as the array (its base) lives.
            let view = unsafe { ArrayView1::from_shape_ptr(words, map.as_ptr().cast::<u32>()) };
            let owner = Bound::new(py, RowMemory { _map: map })?;
            // SAFETY: see above; the owner never remaps or drops the map before it is
            // dropped itself.
            unsafe { PyArray1::borrow_from_array(&view, owner.into_any()) }.into_any()
        }
        None => PyArray1::<u32>::zeros(py, 0, false).into_any(),
    };
    arr.call_method1("view", (dtype,))
}

/// The owner of a result array's memory (the array's `base`); not used from Python.
#[pyclass(module = "cluda._cluda", name = "_RowMemory", frozen)]
pub struct RowMemory {
    _map: MmapMut,
}
