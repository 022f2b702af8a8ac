//! The module's free functions: `.npy` and cluster files, the generator, the matcher.

use std::path::PathBuf;

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;

use cluda::generate::{GenConfig, Generator};
use cluda::io::{ClusterFileReader, Existing, write_cluster_frames};
use cluda::matcher::{Descriptor, MatchVersion};
use cluda::{ClusterSize, Error, FrameClusters};

use crate::args::{c_aligned, checked_copy, typed_array};
use crate::results::{cluster_dtype, push_rows, rows_to_numpy};
use crate::to_py;

/// Reads a whole uint16 `.npy` frame stack: always 3-D (a 2-D file is one frame).
#[pyfunction]
pub(crate) fn read_npy_frames<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let arr = py
        .allow_threads(|| cluda::io::read_u16_frames(&path))
        .map_err(to_py)?;
    let shape = arr.shape.clone();
    Ok(PyArray1::from_vec(py, arr.data).reshape(shape)?.into_any())
}

/// Reads a cluster file; returns `(rows as words, frame numbers)` (internal).
#[pyfunction]
pub(crate) fn _read_cluster_file<'py>(
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
pub(crate) fn _write_cluster_file(
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
pub(crate) fn generate<'py>(
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
pub(crate) fn match_nearest<'py>(
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
pub(crate) fn _cluster_dtype(py: Python<'_>, cluster_size: usize) -> PyResult<Bound<'_, PyAny>> {
    let size = ClusterSize::from_side(cluster_size).map_err(to_py)?;
    cluster_dtype(py, size.cells())
}
