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

mod feed;
mod iter;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use iter::FindIter;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cluda::engine::session::{RingPlan, Session};
use cluda::engine::sink::FnSink;
use cluda::engine::{EngineConfig, FedFinder};
use cluda::io::raw::RawReader;
use cluda::io::{FrameSource, MemorySource};
use cluda::{ClusterSize, Error, FrameClusters, Frames};

use crate::rows::RowBuf;
use crate::{frame_number, lock};

/// The state a finder shares with the thread of a running `find_iter`.
pub struct Shared {
    /// The finder, the pedestal it carries from call to call and the engine's ring (kept
    /// between runs on a GPU: page-locked memory takes about 1 s per GiB to allocate, more
    /// than a short run), as `cluda find` assembles its run ([`session`]).
    pub session: Mutex<Session>,
    /// Whether the finder runs on a GPU (the engine path pays off there).
    pub gpu: bool,
    /// Data frames found so far: the default number of the next call's first frame.
    pub found: AtomicI64,
    /// Seconds the last find call spent in Rust (f64 bits).
    pub last_find: AtomicI64,
    /// A `find_iter` thread holds the finder: other calls are refused instead of waiting
    /// for an iteration that may wait for them.
    pub iterating: AtomicBool,
}

impl Shared {
    pub fn new(session: Session, gpu: bool) -> Self {
        Self {
            session: Mutex::new(session),
            gpu,
            found: AtomicI64::new(0),
            last_find: AtomicI64::new(0),
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

/// Finds the clusters of every frame of `input` with the shared finder, numbering frame `i`
/// `first + i` (`first` defaults to the frames found so far; a raw acquisition's frames keep
/// their header numbers instead, [`Input::numbered`]), and hands them to `sink` as
/// `(stream index, frame number, clusters)`, frame by frame in order.
/// Returns the frames found. The finder's frame count moves on by the frames consumed, also
/// when the run fails part-way (a failure of the sink or of the input).
pub fn run(
    shared: &Shared,
    input: &mut Input,
    first: Option<i64>,
    via: Via,
    sink: &mut dyn FnMut(usize, i32, FrameClusters<'_>) -> Result<(), Error>,
) -> Result<u64, Error> {
    let mut session = lock(&shared.session);
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
    let in_place = match via {
        // Fewer frames than one slot gain nothing from reading ahead: one call on them.
        Via::Auto => !shared.gpu || input.hint() < session.engine().chunk as u64,
        Via::Engine => false,
        Via::Direct => true,
    };
    let result = match input.memory() {
        Some((data, rows, cols)) if in_place => {
            let n = data.len() / (rows * cols).max(1);
            Frames::new(data, n, rows, cols).and_then(|f| {
                session
                    .finder_mut()
                    .find_each(f, &mut |fc| visit(fc.frame.get() as usize, 0, fc))
            })
        }
        // The session's engine, as `cluda find` runs it (its ring, map and read threads as
        // [`session`] set them up).
        _ => input.with_source(|src| {
            // The engine names frames by their numbers (`fc.frame` too): the stream index is
            // counted here, frames coming in order.
            let mut index = 0usize;
            let mut sink = FnSink(|_, fc: &FrameClusters<'_>| {
                index += 1;
                visit(index - 1, fc.frame.get(), *fc)
            });
            session.find_into(src, &mut sink).map(|_| ())
        }),
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

/// The session of a new finder (`note`: why its device), set up as `cluda find` sets up its
/// run: a file is mapped where the finder reads a map fastest (the CPU finder: no reader
/// threads taking its cores), else read; a GPU finder allocates the engine's ring
/// (page-locked: about 0.3 s for 400x400 frames) and its pipeline's buffers at once and keeps
/// them, so that no find call pays for them; a CPU finder's plain ring is made for each run,
/// no larger than it needs.
pub fn session(finder: Box<dyn FedFinder + Send>, note: String) -> Result<Session, Error> {
    let (rows, cols) = (finder.config().rows, finder.config().cols);
    let engine = EngineConfig {
        map: finder.prefers_mapped_input(),
        ..EngineConfig::for_frames(rows, cols)
    };
    let ring = if finder.device().starts_with("gpu") {
        RingPlan::Kept
    } else {
        RingPlan::PerInput
    };
    Session::with_finder(finder, note, engine, ring)
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
