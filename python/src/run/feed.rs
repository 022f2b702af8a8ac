//! What an iteration needs to start, and an array's chunks copied ahead (with the GIL held)
//! for the iteration's thread.

use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use numpy::{PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;

use cluda::ClusterSize;

use super::{Input, Shared};

/// Chunks of an array copied ahead of the one being found (the thread finds chunk `k + 1`
/// while the caller uses chunk `k`'s rows).
pub(super) const FED_AHEAD: usize = 2;

/// What an iteration needs to start.
pub(super) struct Pending {
    pub(super) shared: Arc<Shared>,
    pub(super) what: Feed,
    pub(super) chunk: usize,
    pub(super) size: ClusterSize,
}

/// Where an iteration's frames come from.
pub(super) enum Feed {
    /// An input the thread owns and reads itself (a file, a raw acquisition).
    Source(Input),
    /// A Python array, copied a chunk at a time by `__next__`.
    Array(ArrayFeed),
}

/// A Python array fed to the iteration's thread a chunk at a time: each chunk is taken from
/// the array as it is when it is copied (sliced anew, under the GIL), never through a pointer
/// kept from before Python code ran.
pub(super) struct ArrayFeed {
    pub(super) array: Py<PyAny>,
    /// `(rows, cols)` the array had at the start: every chunk must have them.
    pub(super) shape: (usize, usize),
    /// Frames per chunk.
    pub(super) chunk: usize,
    /// The next frame to copy.
    pub(super) next: usize,
    /// Chunks copied and sent, and chunks whose rows were handed out.
    pub(super) fed: usize,
    pub(super) taken: usize,
    /// Whether the last chunk was sent (the array has no frame left).
    pub(super) ended: bool,
    /// To the thread: a chunk's samples and whether it is the last.
    pub(super) tx: Option<SyncSender<(Vec<u16>, bool)>>,
}

impl ArrayFeed {
    /// Copies and sends chunks until [`FED_AHEAD`] wait beyond the one asked for, or the
    /// array ends. Called with the GIL held; the array is looked up anew each time (its
    /// length may have changed: fewer frames end the iteration early, another frame shape
    /// is an error).
    pub(super) fn feed(&mut self, py: Python<'_>) -> PyResult<()> {
        let chunk = self.chunk;
        while !self.ended && self.fed < self.taken + FED_AHEAD {
            let array = self.array.bind(py);
            let (arr, n, rows, cols) = crate::frames_shape(array, "frames")?;
            if arr.ndim() != 3 || (rows, cols) != self.shape {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "frames changed shape during find_iter: {} x {} frames at the start, now \
                     shape {:?}",
                    self.shape.0,
                    self.shape.1,
                    arr.shape()
                )));
            }
            let end = n.min(self.next.saturating_add(chunk));
            let last = end >= n;
            let data = if self.next < end {
                let slice = pyo3::types::PySlice::new(py, self.next as isize, end as isize, 1);
                let part = array.get_item(slice)?;
                let (part, ..) = crate::frames_shape(&part, "frames")?;
                let part = crate::c_aligned(&part)?;
                let ro = part.readonly();
                crate::checked_copy(ro.as_slice()?, "find_iter's chunk of frames")?
            } else {
                Vec::new()
            };
            if data.is_empty() {
                // The array ended on a chunk boundary (or shrank, or has no frame): nothing
                // more to find.
                self.ended = true;
                self.tx = None;
                break;
            }
            let Some(tx) = self.tx.as_ref() else { break };
            // Never blocks: at most FED_AHEAD chunks are in flight and the channel holds as
            // many.
            if tx.send((data, last)).is_err() {
                // The thread ended (its error waits on the rows channel).
                self.ended = true;
                self.tx = None;
                break;
            }
            self.fed += 1;
            self.next = end;
            if last {
                self.ended = true;
                self.tx = None;
            }
        }
        Ok(())
    }
}
