//! `find_iter`'s iterator: the engine on a thread of its own, one result array per chunk.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cluda::{ClusterSize, Error};

use super::feed::{ArrayFeed, FED_AHEAD, Feed, Pending};
use super::{Input, Shared, Via, find_rows, run};
use crate::rows::{RowBuf, into_numpy};
use crate::{lock, to_py};

/// Clears [`Shared::iterating`] when the iteration's thread ends, however it ends.
struct Iterating(Arc<Shared>);

impl Drop for Iterating {
    fn drop(&mut self) {
        self.0.iterating.store(false, Ordering::Release);
    }
}

/// Chunks ready ahead of the Python consumer: one waits while the next is filled.
const AHEAD: usize = 1;

/// A running iteration.
struct Running {
    rx: Option<Receiver<Result<RowBuf, Error>>>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// The array being fed, for an iteration over an array.
    feed: Option<ArrayFeed>,
}

impl Running {
    /// Stops the thread (at its next frame) and waits for it.
    fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        // No more chunks: a thread waiting for one ends.
        if let Some(f) = self.feed.as_mut() {
            f.tx = None;
        }
        self.rx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.finish();
    }
}

enum IterState {
    Pending(Box<Pending>),
    Running(Running),
    Done,
}

/// `ClusterFinder.find_iter`'s iterator over an array, a memory map or a raw acquisition:
/// the engine runs on a thread of its own (started at the first `next`) and hands over each
/// chunk's rows as they are complete; one chunk waits ready while the next is found.
#[pyclass(module = "cluda._cluda", name = "_FindIter")]
pub struct FindIter {
    state: Mutex<IterState>,
}

impl FindIter {
    /// An iteration over an input the thread owns and reads itself (a `.npy` file, a raw
    /// acquisition). An [`Input::Borrowed`] is refused at the first `next` (the thread may
    /// not read memory Python owns).
    pub fn over_source(shared: Arc<Shared>, input: Input, chunk: usize, size: ClusterSize) -> Self {
        Self::pending(shared, Feed::Source(input), chunk, size)
    }

    /// An iteration over a Python array of `shape` (rows, cols) frames, copied a chunk at a
    /// time by `__next__` with the GIL held ([`ArrayFeed`]).
    pub fn over_array(
        shared: Arc<Shared>,
        array: Py<PyAny>,
        shape: (usize, usize),
        chunk: usize,
        size: ClusterSize,
    ) -> Self {
        let feed = ArrayFeed {
            array,
            shape,
            chunk,
            next: 0,
            fed: 0,
            taken: 0,
            ended: false,
            tx: None,
        };
        Self::pending(shared, Feed::Array(feed), chunk, size)
    }

    fn pending(shared: Arc<Shared>, what: Feed, chunk: usize, size: ClusterSize) -> Self {
        Self {
            state: Mutex::new(IterState::Pending(Box::new(Pending {
                shared,
                what,
                chunk,
                size,
            }))),
        }
    }
}

/// The iteration's thread over an input it owns: runs the engine, sends each chunk's rows
/// when its last frame is found, then the last (partial) chunk, or the error.
fn iterate(
    shared: Arc<Shared>,
    mut input: Input,
    chunk: usize,
    size: ClusterSize,
    tx: SyncSender<Result<RowBuf, Error>>,
    stop: Arc<AtomicBool>,
) {
    let clear = Iterating(shared.clone());
    let spare_cores = shared.gpu;
    let mut rows = RowBuf::new(size, 0, spare_cores);
    let mut sent = 0usize;
    let closed = || Error::Internal("the find_iter iterator was closed".into());
    let send = |rows: &mut RowBuf, sent: &mut usize| -> Result<(), Error> {
        // The next chunk's map is made about as large as this one's.
        let hint = rows.bytes() + rows.bytes() / 8;
        let mut full = std::mem::replace(rows, RowBuf::new(size, hint, spare_cores));
        full.trim();
        tx.send(Ok(full)).map_err(|_| closed())?;
        *sent += 1;
        Ok(())
    };
    let result = if matches!(input, Input::Borrowed { .. }) {
        Err(Error::Internal(
            "find_iter's thread was handed memory it does not own".into(),
        ))
    } else {
        run(
            &shared,
            &mut input,
            None,
            Via::Auto,
            &mut |index, number, fc| {
                if stop.load(Ordering::Acquire) {
                    return Err(closed());
                }
                while index >= (sent + 1) * chunk {
                    send(&mut rows, &mut sent)?;
                }
                rows.push_frame(number, &fc)
            },
        )
    };
    // The finder is free again (`run` returned): say so before the last chunk goes, so a
    // caller that takes it may call the finder at once.
    drop(clear);
    let end = result.and_then(|frames| {
        while sent < (frames as usize).div_ceil(chunk) {
            send(&mut rows, &mut sent)?;
        }
        Ok(())
    });
    if let Err(e) = end {
        // Nobody listens any more when the iterator was closed.
        let _ = tx.send(Err(e));
    }
}

/// The iteration's thread over an array: finds each chunk copied for it (`chunks`, in order;
/// the frame numbers go on from one to the next as `frames_found` does) and sends its rows,
/// or the error; ends after the last chunk or when no more come.
fn iterate_copies(
    shared: Arc<Shared>,
    chunks: Receiver<(Vec<u16>, bool)>,
    (rows, cols): (usize, usize),
    size: ClusterSize,
    tx: SyncSender<Result<RowBuf, Error>>,
    stop: Arc<AtomicBool>,
) {
    let mut clear = Some(Iterating(shared.clone()));
    for (data, last) in chunks {
        if stop.load(Ordering::Acquire) {
            break;
        }
        let mut input = Input::Owned { data, rows, cols };
        let found = find_rows(&shared, &mut input, None, Via::Auto, size, true);
        drop(input);
        if last || found.is_err() {
            // The finder is free again: say so before the last rows go, so a caller that
            // takes them may call the finder at once.
            clear = None;
        }
        let failed = found.is_err();
        if tx.send(found.map(|(rows, _)| rows)).is_err() || failed || last {
            break;
        }
    }
    drop(clear);
}

#[pymethods]
impl FindIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let rx = {
            let mut state = lock(&self.state);
            if let IterState::Pending(p) = &*state {
                p.shared.check_free()?;
                let IterState::Pending(p) = std::mem::replace(&mut *state, IterState::Done) else {
                    return Ok(None);
                };
                let Pending {
                    shared,
                    what,
                    chunk,
                    size,
                } = *p;
                shared.iterating.store(true, Ordering::Release);
                let (tx, rx) = std::sync::mpsc::sync_channel(AHEAD);
                let stop = Arc::new(AtomicBool::new(false));
                let s = stop.clone();
                let sh = shared.clone();
                let (thread, feed) = match what {
                    Feed::Source(input) => {
                        let t = std::thread::Builder::new()
                            .name("cluda-find-iter".into())
                            .spawn(move || iterate(sh, input, chunk, size, tx, s));
                        (t, None)
                    }
                    Feed::Array(mut feed) => {
                        let (chunks_tx, chunks_rx) = std::sync::mpsc::sync_channel(FED_AHEAD);
                        feed.tx = Some(chunks_tx);
                        let shape = feed.shape;
                        let t = std::thread::Builder::new()
                            .name("cluda-find-iter".into())
                            .spawn(move || iterate_copies(sh, chunks_rx, shape, size, tx, s));
                        (t, Some(feed))
                    }
                };
                let thread = match thread {
                    Ok(t) => t,
                    Err(e) => {
                        shared.iterating.store(false, Ordering::Release);
                        return Err(to_py(Error::io("<find_iter thread>", e)));
                    }
                };
                *state = IterState::Running(Running {
                    rx: Some(rx),
                    thread: Some(thread),
                    stop,
                    feed,
                });
            }
            match &mut *state {
                IterState::Running(r) => {
                    if let Some(f) = r.feed.as_mut() {
                        let fed = f.feed(py);
                        if let Err(e) = fed {
                            // The iteration ends with this error (its thread stopped).
                            let old = std::mem::replace(&mut *state, IterState::Done);
                            drop(state);
                            py.allow_threads(move || drop(old));
                            return Err(e);
                        }
                        if f.ended && f.taken == f.fed {
                            // Every chunk's rows were handed out.
                            let old = std::mem::replace(&mut *state, IterState::Done);
                            drop(state);
                            py.allow_threads(move || drop(old));
                            return Ok(None);
                        }
                    }
                    match r.rx.take() {
                        Some(rx) => rx,
                        None => {
                            return Err(PyRuntimeError::new_err(
                                "this find_iter iterator is being advanced on another thread",
                            ));
                        }
                    }
                }
                _ => return Ok(None),
            }
        };
        // Waits for the next chunk without the GIL (the thread never takes it).
        let (rx, msg) = py.allow_threads(move || {
            let msg = rx.recv();
            (rx, msg)
        });
        let mut state = lock(&self.state);
        match msg {
            Ok(Ok(rows)) => {
                if let IterState::Running(r) = &mut *state {
                    r.rx = Some(rx);
                    if let Some(f) = r.feed.as_mut() {
                        f.taken += 1;
                    }
                }
                drop(state);
                into_numpy(rows, py).map(|a| Some(a.unbind()))
            }
            done => {
                // The thread ended (its last message was sent): wait for it, let go of the
                // array.
                let old = std::mem::replace(&mut *state, IterState::Done);
                drop(state);
                py.allow_threads(move || drop(old));
                match done {
                    Ok(Err(e)) => Err(to_py(e)),
                    _ => Ok(None),
                }
            }
        }
    }

    /// Stops the iteration now: the engine stops at its next frame; the finder keeps the
    /// frames it searched ahead (`frames_found` says how many).
    fn close(&self, py: Python<'_>) {
        let old = std::mem::replace(&mut *lock(&self.state), IterState::Done);
        py.allow_threads(move || drop(old));
    }
}

impl Drop for FindIter {
    fn drop(&mut self) {
        // Stop and join the thread.
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *state = IterState::Done;
    }
}
