//! The Python finder's find paths: one run of the library's streaming engine
//! (`cluda::engine`, as `cluda find` runs it) over an array in memory, a memory-mapped `.npy`
//! file, a raw acquisition or a file by path, with every cluster written once into the
//! result's memory ([`RowBuf`]); and `find_iter`'s iterator, which runs the engine on a
//! thread of its own and hands over one result array per chunk.
//!
//! On a GPU the engine's reader threads copy (or read) the frames into page-locked slots
//! while the finder's pipeline runs on from one slot into the next (`find_feed`); the
//! calling thread only collects rows. On the CPU an array in memory is searched in place
//! (`find_each`, no copy): the CPU finder reads plain memory as fast as any copy of it.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cluda::engine::{EngineConfig, RingSlots, SliceSource, find_stream_reusing};
use cluda::io::FrameSource;
use cluda::io::raw::RawReader;
use cluda::{ClusterFinder, ClusterSize, Error, FrameClusters, Frames};

use crate::rows::{RowBuf, into_numpy};
use crate::{frame_number, lock, to_py};

/// The state a finder shares with the thread of a running `find_iter`.
pub struct Shared {
    pub finder: Mutex<Box<dyn ClusterFinder + Send>>,
    /// Whether the finder runs on a GPU (the engine path pays off there).
    pub gpu: bool,
    /// Data frames found so far: the default number of the next call's first frame.
    pub found: AtomicI64,
    /// Seconds the last find call spent in Rust (f64 bits).
    pub last_find: AtomicI64,
    /// The engine's ring, kept between runs (page-locked memory on a GPU takes about 1 s per
    /// GiB to allocate: more than a short run).
    pub ring: Mutex<Option<RingSlots>>,
    /// A `find_iter` thread holds the finder: other calls are refused instead of waiting
    /// for an iteration that may wait for them.
    pub iterating: AtomicBool,
}

impl Shared {
    pub fn new(finder: Box<dyn ClusterFinder + Send>, gpu: bool) -> Self {
        Self {
            finder: Mutex::new(finder),
            gpu,
            found: AtomicI64::new(0),
            last_find: AtomicI64::new(0),
            ring: Mutex::new(None),
            iterating: AtomicBool::new(false),
        }
    }

    /// Refuses a call while a `find_iter` runs on this finder.
    pub fn check_free(&self) -> PyResult<()> {
        if self.iterating.load(Ordering::Acquire) {
            return Err(PyRuntimeError::new_err(
                "this ClusterFinder is busy with a find_iter iteration: finish it (or delete \
                 the iterator) before calling the finder again",
            ));
        }
        Ok(())
    }

    pub fn last_find_seconds(&self) -> f64 {
        f64::from_bits(self.last_find.load(Ordering::Relaxed) as u64)
    }
}

/// How a run reads frames in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The engine on a GPU, in place on the CPU.
    Auto,
    /// The engine's ring (copied on several threads into page-locked slots on a GPU).
    Engine,
    /// One `find_each` over the memory as it is (a GPU stages it through its own buffer on
    /// the calling thread).
    Direct,
}

impl Via {
    pub fn parse(s: &str) -> PyResult<Self> {
        match s {
            "auto" => Ok(Via::Auto),
            "engine" => Ok(Via::Engine),
            "direct" => Ok(Via::Direct),
            _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "`{s}` is not one of auto, engine, direct"
            ))),
        }
    }
}

/// The frames of a run.
pub enum Input {
    /// A C-contiguous numpy array's memory (address and length in samples), borrowed: the
    /// caller keeps the array alive, and unchanged, for the run.
    Borrowed {
        ptr: usize,
        len: usize,
        rows: usize,
        cols: usize,
    },
    /// A copy of an array that was not C-contiguous, in C order.
    Owned {
        data: Vec<u16>,
        rows: usize,
        cols: usize,
    },
    /// A file read as `cluda find` reads it (a `.npy` file, also behind a memory map of it,
    /// or a raw acquisition by path: `numbered`, its frames keep their header numbers).
    Source {
        source: Box<dyn FrameSource + Send>,
        numbered: bool,
    },
    /// A raw acquisition, from where its reader stands; frames keep their header numbers.
    Raw(Arc<Mutex<RawReader>>),
}

impl Input {
    /// The frames in memory, when they are.
    fn memory(&self) -> Option<(&[u16], usize, usize)> {
        match self {
            // SAFETY: the caller of the run keeps the array alive and unchanged (see
            // `Input::Borrowed`); `ptr`/`len` came from its C-contiguous data.
            Input::Borrowed {
                ptr,
                len,
                rows,
                cols,
            } => Some((
                unsafe { std::slice::from_raw_parts(*ptr as *const u16, *len) },
                *rows,
                *cols,
            )),
            Input::Owned { data, rows, cols } => Some((data, *rows, *cols)),
            _ => None,
        }
    }

    /// Whether its frames keep the numbers their source gives them (a raw acquisition's
    /// header frame numbers, as `cluda find` writes them) instead of `first + index`.
    pub fn numbered(&self) -> bool {
        matches!(self, Input::Raw(_) | Input::Source { numbered: true, .. })
    }

    /// Frames it delivers at most.
    fn hint(&self) -> u64 {
        match self {
            Input::Source { source, .. } => source.remaining_hint(),
            Input::Raw(r) => FrameSource::remaining_hint(&*lock(r)),
            _ => self
                .memory()
                .map_or(0, |(d, r, c)| (d.len() / (r * c).max(1)) as u64),
        }
    }

    /// Runs `f` with the input as a frame source.
    fn with_source<T>(
        &mut self,
        f: impl FnOnce(&mut (dyn FrameSource + Send)) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if let Some((data, rows, cols)) = self.memory() {
            return f(&mut SliceSource::new(data, rows, cols)?);
        }
        match self {
            Input::Source { source, .. } => f(source.as_mut()),
            Input::Raw(r) => f(&mut *lock(r)),
            _ => Err(Error::Internal("an input with no source".into())),
        }
    }
}

/// Where a run's clusters go: `(stream index, frame number, clusters)` per frame, in order.
pub type Sink<'a> = dyn FnMut(usize, i32, FrameClusters<'_>) -> Result<(), Error> + 'a;

/// Finds the clusters of every frame of `input` with the shared finder, numbering frame `i`
/// `first + i` (`first` defaults to the frames found so far; a raw acquisition's frames keep
/// their header numbers instead, [`Input::numbered`]), and hands them to `sink`.
/// Returns the frames found. The finder's frame count moves on by the frames consumed, also
/// when the run fails part-way (a failure of the sink or of the input).
pub fn run(
    shared: &Shared,
    input: &mut Input,
    first: Option<i64>,
    via: Via,
    sink: &mut Sink<'_>,
) -> Result<u64, Error> {
    let mut finder = lock(&shared.finder);
    let found = shared.found.load(Ordering::Acquire);
    let numbered = input.numbered();
    if numbered && first.is_some() {
        return Err(Error::param(
            "first_frame",
            "a raw acquisition's frames keep their header frame numbers; pass no first_frame",
        ));
    }
    let first = first.unwrap_or(found);
    if !numbered {
        // Check the numbering before any frame is consumed.
        frame_number(first, input.hint().saturating_sub(1) as usize)?;
    }
    let start = Instant::now();
    let mut frames = 0u64;
    let mut visit = |index: usize, number: u64, fc: FrameClusters<'_>| -> Result<(), Error> {
        frames += 1;
        let number = if numbered {
            i32::try_from(number).map_err(|_| {
                Error::param(
                    "frames",
                    format!("header frame number {number} does not fit in the result's int32"),
                )
            })?
        } else {
            frame_number(first, index)?
        };
        sink(index, number, fc)
    };
    let (rows, cols) = (finder.config().rows, finder.config().cols);
    let full = EngineConfig::for_frames(rows, cols);
    let in_place = match via {
        // Fewer frames than one slot gain nothing from reading ahead: one call on them.
        Via::Auto => !shared.gpu || input.hint() < full.chunk as u64,
        Via::Engine => false,
        Via::Direct => true,
    };
    let result = match input.memory() {
        Some((data, rows, cols)) if in_place => {
            let n = data.len() / (rows * cols).max(1);
            Frames::new(data, n, rows, cols)
                .and_then(|f| finder.find_each(f, &mut |fc| visit(fc.frame, 0, fc)))
        }
        _ => {
            // A GPU finder keeps its (page-locked) ring between runs, whatever their length;
            // a CPU finder's plain ring is made for each run, no larger than it needs.
            let config = if shared.gpu {
                full
            } else {
                full.capped(input.hint())
            };
            let threads = finder.read_threads();
            input.with_source(|src| {
                src.set_read_threads(threads);
                let (mut kept, mut own) = (lock(&shared.ring), None);
                let ring = if shared.gpu { &mut *kept } else { &mut own };
                // The engine names frames by their numbers (`fc.frame` too): the stream index
                // is counted here, frames coming in order.
                let mut index = 0usize;
                find_stream_reusing(finder.as_mut(), src, config, ring, &mut |n, fc| {
                    index += 1;
                    visit(index - 1, n, fc)
                })
                .map(|_| ())
            })
        }
    };
    // A call that consumed no frame (refused, or failed at once) leaves the count alone.
    if frames > 0 || result.is_ok() {
        let base = if numbered { found } else { first };
        shared.found.store(base + frames as i64, Ordering::Release);
    }
    shared.last_find.store(
        start.elapsed().as_secs_f64().to_bits() as i64,
        Ordering::Relaxed,
    );
    result.map(|()| frames)
}

/// One run into one result array's rows (or, with `keep` false, only counting clusters).
pub fn find_rows(
    shared: &Shared,
    input: &mut Input,
    first: Option<i64>,
    via: Via,
    size: ClusterSize,
    keep: bool,
) -> Result<(RowBuf, u64), Error> {
    let mut rows = RowBuf::new(size, 0, shared.gpu);
    let mut clusters = 0u64;
    run(shared, input, first, via, &mut |_, number, fc| {
        clusters += fc.len() as u64;
        if keep {
            rows.push_frame(number, &fc)?;
        }
        Ok(())
    })?;
    rows.trim();
    Ok((rows, clusters))
}

/// Clears [`Shared::iterating`] when the iteration's thread ends, however it ends.
struct Iterating(Arc<Shared>);

impl Drop for Iterating {
    fn drop(&mut self) {
        self.0.iterating.store(false, Ordering::Release);
    }
}

/// Chunks ready ahead of the Python consumer: one waits while the next is filled.
const AHEAD: usize = 1;

/// What an iteration needs to start.
struct Pending {
    shared: Arc<Shared>,
    input: Input,
    chunk: usize,
    size: ClusterSize,
}

/// A running iteration.
struct Running {
    rx: Option<Receiver<Result<RowBuf, Error>>>,
    thread: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Running {
    /// Stops the thread (at its next frame) and waits for it.
    fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
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
    /// The array whose memory the thread reads (kept alive until the iteration ends).
    keep: Mutex<Option<Py<PyAny>>>,
}

impl FindIter {
    pub fn new(
        shared: Arc<Shared>,
        input: Input,
        chunk: usize,
        size: ClusterSize,
        keep: Option<Py<PyAny>>,
    ) -> Self {
        Self {
            state: Mutex::new(IterState::Pending(Box::new(Pending {
                shared,
                input,
                chunk,
                size,
            }))),
            keep: Mutex::new(keep),
        }
    }
}

/// The iteration's thread: runs the engine, sends each chunk's rows when its last frame is
/// found, then the last (partial) chunk, or the error.
fn iterate(p: Pending, tx: SyncSender<Result<RowBuf, Error>>, stop: Arc<AtomicBool>) {
    let Pending {
        shared,
        mut input,
        chunk,
        size,
    } = p;
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
    let result = run(
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
    );
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
                let shared = p.shared.clone();
                shared.iterating.store(true, Ordering::Release);
                let (tx, rx) = std::sync::mpsc::sync_channel(AHEAD);
                let stop = Arc::new(AtomicBool::new(false));
                let s = stop.clone();
                let thread = std::thread::Builder::new()
                    .name("cluda-find-iter".into())
                    .spawn(move || iterate(*p, tx, s));
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
                });
            }
            match &mut *state {
                IterState::Running(r) => match r.rx.take() {
                    Some(rx) => rx,
                    None => {
                        return Err(PyRuntimeError::new_err(
                            "this find_iter iterator is being advanced on another thread",
                        ));
                    }
                },
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
                *lock(&self.keep) = None;
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
        *lock(&self.keep) = None;
    }
}

impl Drop for FindIter {
    fn drop(&mut self) {
        // Stop and join the thread before the array it reads can go (`keep` drops after).
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *state = IterState::Done;
    }
}
