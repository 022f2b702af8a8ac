//! `RawFile`: an slsDetector raw acquisition read frame by frame, with its gap report.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use cluda::Error;
use cluda::io::raw::RawReader;

use crate::to_py;

/// An slsDetector raw acquisition (see the Python docs of `cluda.RawFile`).
#[pyclass(subclass, module = "cluda._cluda", name = "RawFile")]
pub(crate) struct PyRawFile {
    /// Shared with a `find_iter` thread that reads the acquisition.
    pub(crate) reader: Arc<Mutex<RawReader>>,
    /// The master file's path.
    #[pyo3(get)]
    path: PathBuf,
    /// Rows per frame.
    #[pyo3(get)]
    rows: usize,
    /// Columns per frame.
    #[pyo3(get)]
    cols: usize,
    /// Frames the master file says were acquired.
    #[pyo3(get)]
    total_frames: u64,
    /// Frame records present in the data files.
    #[pyo3(get)]
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
