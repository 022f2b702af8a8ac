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
//!
//! `find_iter`'s thread never reads a Python array: Python code runs between chunks (it may
//! write into the array, resize it or free it), so each chunk of an array is copied while the
//! GIL is held, from the array as it is then, and the copy is handed to the thread
//! ([`FindIter::over_array`]). Only inputs the thread owns (a file it reads, a raw
//! acquisition) are read by the thread itself ([`FindIter::over_source`]).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use numpy::{PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cluda::engine::{EngineConfig, FedFinder, RingSlots, find_stream_with};
use cluda::io::raw::RawReader;
use cluda::io::{FrameSource, MemorySource};
use cluda::{ClusterSize, Error, FrameClusters, Frames};

use crate::rows::{RowBuf, into_numpy};
use crate::{frame_number, lock, to_py};

/// The state a finder shares with the thread of a running `find_iter`.
pub struct Shared {
    pub finder: Mutex<Box<dyn FedFinder + Send>>,
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
    pub fn new(finder: Box<dyn FedFinder + Send>, gpu: bool) -> Self {
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
    /// A C-contiguous, aligned numpy array's memory (address and length in samples),
    /// borrowed: the caller holds a read-only borrow of the array (rust-numpy's
    /// `PyReadonlyArray`) across the whole run, which keeps it alive and refuses a writable
    /// borrow of it from Rust code meanwhile. Only a call that runs to its end while the
    /// borrow is held (`find`) uses it, never `find_iter`'s thread.
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
            // SAFETY: `ptr`/`len` came from the `as_slice` of a C-contiguous, aligned array
            // (`c_aligned`) whose read-only borrow the caller holds for the whole run (see
            // `Input::Borrowed`), so the memory is live, aligned and initialised. Writes into
            // it by Python code on another thread during the call are outside what rust-numpy's
            // borrow can prevent; they are documented as not allowed (as for any numpy call
            // that releases the GIL).
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
            return f(&mut MemorySource::new(data, rows, cols)?);
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
            cluda::FrameNumber(number).to_file("frames", "the raw acquisition's headers")?
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
                .and_then(|f| finder.find_each(f, &mut |fc| visit(fc.frame.get() as usize, 0, fc)))
        }
        _ => {
            // A GPU finder keeps its (page-locked) ring between runs, whatever their length;
            // a CPU finder's plain ring is made for each run, no larger than it needs.
            let config = if shared.gpu {
                full
            } else {
                full.capped(input.hint())
            };
            // A file is mapped where the finder reads a map fastest (the CPU finder: no
            // reader threads taking its cores), as `cluda find` does; a source that cannot be
            // mapped is read as before.
            let config = EngineConfig {
                map: finder.prefers_mapped_input(),
                ..config
            };
            let threads = finder.read_threads();
            input.with_source(|src| {
                src.set_read_threads(threads);
                let (mut kept, mut own) = (lock(&shared.ring), None);
                let ring = if shared.gpu { &mut *kept } else { &mut own };
                // The engine names frames by their numbers (`fc.frame` too): the stream index
                // is counted here, frames coming in order.
                let mut index = 0usize;
                find_stream_with(finder.as_mut(), src, config, ring, &mut |n, fc| {
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

/// Chunks of an array copied ahead of the one being found (the thread finds chunk `k + 1`
/// while the caller uses chunk `k`'s rows).
const FED_AHEAD: usize = 2;

/// What an iteration needs to start.
struct Pending {
    shared: Arc<Shared>,
    what: Feed,
    chunk: usize,
    size: ClusterSize,
}

/// Where an iteration's frames come from.
enum Feed {
    /// An input the thread owns and reads itself (a file, a raw acquisition).
    Source(Input),
    /// A Python array, copied a chunk at a time by `__next__`.
    Array(ArrayFeed),
}

/// A Python array fed to the iteration's thread a chunk at a time: each chunk is taken from
/// the array as it is when it is copied (sliced anew, under the GIL), never through a pointer
/// kept from before Python code ran.
struct ArrayFeed {
    array: Py<PyAny>,
    /// `(rows, cols)` the array had at the start: every chunk must have them.
    shape: (usize, usize),
    /// Frames per chunk.
    chunk: usize,
    /// The next frame to copy.
    next: usize,
    /// Chunks copied and sent, and chunks whose rows were handed out.
    fed: usize,
    taken: usize,
    /// Whether the last chunk was sent (the array has no frame left).
    ended: bool,
    /// To the thread: a chunk's samples and whether it is the last.
    tx: Option<SyncSender<(Vec<u16>, bool)>>,
}

impl ArrayFeed {
    /// Copies and sends chunks until [`FED_AHEAD`] wait beyond the one asked for, or the
    /// array ends. Called with the GIL held; the array is looked up anew each time (its
    /// length may have changed: fewer frames end the iteration early, another frame shape
    /// is an error).
    fn feed(&mut self, py: Python<'_>) -> PyResult<()> {
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
#[allow(clippy::too_many_arguments)]
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
