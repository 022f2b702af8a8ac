//! Arguments taken from Python: frame arrays borrowed or copied into C order, thread counts,
//! file inputs, precisions; and the mutex a panic cannot poison.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use numpy::{
    Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use cluda::io::NpyFrames;
use cluda::{Frames, Precision};

use crate::run;
use crate::to_py;

/// A mutex that a panic elsewhere cannot make unusable from Python.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The `uint16` samples of a 2-D (one frame) or 3-D (`frames x rows x cols`) array, borrowed
/// read-only: the array itself when it is C-contiguous and aligned, else numpy's C-order copy
/// of it ([`c_aligned`]), which nothing else references.
pub(crate) struct FramesArg<'py> {
    pub(crate) data: PyReadonlyArrayDyn<'py, u16>,
    frames: usize,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
}

impl FramesArg<'_> {
    /// The samples, in C order.
    pub(crate) fn slice(&self) -> PyResult<&[u16]> {
        Ok(self.data.as_slice()?)
    }

    pub(crate) fn frames(&self) -> PyResult<Frames<'_>> {
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
pub(crate) fn typed_array<'py, T: Element>(
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
pub(crate) fn frames_arg<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<FramesArg<'py>> {
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
pub(crate) fn file_input(
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

/// The precision named `s` (`f64`, `f32`, `f32-naive`; also `f32naive` and `f32_naive`).
pub(crate) fn parse_precision(s: &str) -> PyResult<Precision> {
    let s = match s {
        "f32naive" | "f32_naive" => "f32-naive",
        s => s,
    };
    s.parse().map_err(to_py)
}
