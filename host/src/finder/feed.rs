//! Chunks of frames lent to a finder one after another: the pull side of the engine's ring,
//! behind `find_feed` (`crate::engine::feeding::FedFinder::find_feed`): the contract between
//! a finder and what feeds it.
//!
//! A feed hands out [`FedChunk`]s in frame order; the finder reads them (a GPU finder uploads
//! them while it finds earlier ones) and gives each back once nothing reads it any more. The
//! engine's feed is its ring of slots: a chunk given back goes straight to the reader thread,
//! which fills it with the next frames while the finder is still busy with later chunks.
//!
//! A chunk carries its frames' numbers (the source's, e.g. a raw file's frame numbers with
//! their gaps, or consecutive ones), and the finder hands them on: `FrameClusters::frame` and
//! a [`Error::ClusterLimit`] of `find_feed` name a frame by its chunk's number for it.
//!
//! Why not one `find_each` call per chunk: a GPU call ends by waiting for the GPU, so every
//! chunk boundary drained the pipeline (upload, kernels, download and collection ran one after
//! another at each boundary). Pulled chunks flow through one pipeline instead.

use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::frame_number::{FrameNumber, FrameNumbers};
use crate::frames::Frames;

/// Memory frames are read into and found from (a slot of the engine's ring).
pub trait FrameStore: Send {
    /// The samples, to read.
    fn samples(&self) -> &[u16];
    /// The samples, to fill.
    fn samples_mut(&mut self) -> &mut [u16];
}

impl FrameStore for Vec<u16> {
    fn samples(&self) -> &[u16] {
        self
    }
    fn samples_mut(&mut self) -> &mut [u16] {
        self
    }
}

/// Memory a feed lends that is not a store of its own (the engine: a piece of a mapped file,
/// page-locked in place or not): the chunk's samples while it is lent, and the feed's entry
/// it stands for once given back.
pub(crate) trait LentMemory: Send {
    /// The samples, to read.
    fn samples(&self) -> &[u16];
    /// The feed's entry back (a store or a token), the memory released first (e.g.
    /// unpinned).
    fn release(self: Box<Self>) -> Option<Box<dyn FrameStore>>;
}

/// Where a chunk's frames are.
pub(crate) enum Chunk {
    /// A store of the feed (a slot of the engine's ring, filled by its reader); it goes back
    /// to the feed afterwards.
    Slot(Box<dyn FrameStore>),
    /// Memory lent otherwise ([`LentMemory`]).
    Lent(Box<dyn LentMemory>),
}

impl Chunk {
    pub(crate) fn samples(&self) -> &[u16] {
        match self {
            Chunk::Slot(s) => s.samples(),
            Chunk::Lent(m) => m.samples(),
        }
    }

    /// The feed's entry back (lent memory is released here).
    pub(crate) fn into_store(self) -> Option<Box<dyn FrameStore>> {
        match self {
            Chunk::Slot(s) => Some(s),
            Chunk::Lent(m) => m.release(),
        }
    }
}

/// The numbers of a chunk's frames, owned by the chunk.
pub(crate) enum ChunkNumbers {
    /// Consecutive from the first frame's.
    From(FrameNumber),
    /// One per frame.
    Listed(Vec<FrameNumber>),
}

/// A chunk of whole frames lent to a finder by a [`FrameFeed`], with the frames' numbers:
/// memory the feed owns and does not touch until the finder gives the chunk back, so that a
/// GPU can read it by DMA in the meantime.
pub struct FedChunk {
    chunk: Chunk,
    frames: usize,
    len: usize,
    numbers: ChunkNumbers,
}

impl FedChunk {
    /// The first `frames` frames of `frame_len` samples each in `store` (any further samples
    /// are not part of the chunk), numbered `first`, `first + 1`, ... (e.g. their index in
    /// the stream; [`FedChunk::numbered`] gives them numbers of their own). A store from the
    /// finder's `frame_store` (`crate::engine::feeding::FedFinder::frame_store`) is read
    /// fastest (page-locked for a GPU).
    ///
    /// # Errors
    /// [`Error::Shape`] when `store` holds fewer than `frames x frame_len` samples.
    pub fn new(
        store: Box<dyn FrameStore>,
        frames: usize,
        frame_len: usize,
        first: FrameNumber,
    ) -> Result<Self> {
        Self::of(
            Chunk::Slot(store),
            frames,
            frame_len,
            ChunkNumbers::From(first),
        )
    }

    /// A chunk of `frames` frames of `frame_len` samples in `chunk`, numbered by `numbers`.
    ///
    /// # Errors
    /// [`Error::Shape`] when `chunk` holds fewer than `frames x frame_len` samples, or
    /// `numbers` lists other than one number per frame.
    pub(crate) fn of(
        chunk: Chunk,
        frames: usize,
        frame_len: usize,
        numbers: ChunkNumbers,
    ) -> Result<Self> {
        let have = chunk.samples().len();
        let len = match frames.checked_mul(frame_len) {
            Some(len) if len <= have => len,
            _ => {
                return Err(Error::shape(
                    "chunk",
                    format!("{frames} frames of {frame_len} samples"),
                    format!("{have} samples"),
                ));
            }
        };
        if let ChunkNumbers::Listed(list) = &numbers {
            FrameNumbers::Listed(list).expect_frames(frames, "chunk frame numbers")?;
        }
        Ok(Self {
            chunk,
            frames,
            len,
            numbers,
        })
    }

    /// The chunk with its frames' own numbers instead (one per frame, e.g. a raw file's
    /// frame numbers, gaps and all), which the finder reports its frames by.
    ///
    /// # Errors
    /// [`Error::Shape`] when there is not exactly one number per frame.
    pub fn numbered(mut self, numbers: Vec<FrameNumber>) -> Result<Self> {
        FrameNumbers::Listed(&numbers).expect_frames(self.frames, "chunk frame numbers")?;
        self.numbers = ChunkNumbers::Listed(numbers);
        Ok(self)
    }

    /// Frames in the chunk.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The numbers of the chunk's frames.
    pub fn numbers(&self) -> FrameNumbers<'_> {
        match &self.numbers {
            ChunkNumbers::From(first) => FrameNumbers::From(*first),
            ChunkNumbers::Listed(list) => FrameNumbers::Listed(list),
        }
    }

    /// The chunk's frames as `rows x cols` [`Frames`], with their numbers.
    ///
    /// # Errors
    /// [`Error::Shape`] when the chunk is not whole `rows x cols` frames.
    pub fn view(&self, rows: usize, cols: usize) -> Result<Frames<'_>> {
        Frames::new(self.samples(), self.frames, rows, cols)?.with_numbers(self.numbers())
    }

    /// The chunk's samples: exactly its frames, C order.
    pub fn samples(&self) -> &[u16] {
        &self.chunk.samples()[..self.len]
    }

    /// The memory back, to fill again (`None` for lent memory with nothing to reuse, e.g. a
    /// piece of a mapped file).
    pub fn into_store(self) -> Option<Box<dyn FrameStore>> {
        self.chunk.into_store()
    }

    pub(crate) fn into_chunk(self) -> Chunk {
        self.chunk
    }
}

/// A `find_each` over one chunk's frames, handing each frame's clusters to the visitor.
pub(crate) type FindChunk<'a> =
    dyn FnMut(Frames<'_>, &mut dyn FnMut(FrameClusters<'_>) -> Result<()>) -> Result<()> + 'a;

/// `find_feed` one chunk at a time: `find` (a `find_each`) over every chunk of `feed` in
/// turn, as [`Frames`] with the chunk's numbers ([`FedChunk::view`]), each chunk given back
/// after its call (also when the call fails).
///
/// # Errors
/// The feed's, and the first error of `find`.
pub(crate) fn each_chunk(
    feed: &mut dyn FrameFeed,
    rows: usize,
    cols: usize,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    find: &mut FindChunk<'_>,
) -> Result<()> {
    while let Some(chunk) = feed.next_chunk()? {
        let result = chunk
            .view(rows, cols)
            .and_then(|frames| find(frames, visit));
        feed.give_back(chunk);
        result?;
    }
    Ok(())
}

/// Chunks of frames, lent in frame order (see the module docs).
///
/// The contract the finder keeps: every chunk it takes is given back exactly once (also when
/// the call fails), and nothing reads a chunk after it is given back. A chunk that is not
/// given back (a CUDA failure that leaves the GPU in an unknown state) is dropped instead.
pub trait FrameFeed {
    /// The next chunk, waiting for it; `None` at the end of the input.
    ///
    /// # Errors
    /// The input's error (e.g. [`Error::Io`] naming the file); the finder then finishes the
    /// frames it already holds and returns it.
    fn next_chunk(&mut self) -> Result<Option<FedChunk>>;

    /// Takes back a chunk that the finder no longer reads.
    fn give_back(&mut self, chunk: FedChunk);

    /// Threads that keep producing chunks (reading or generating frames) while the finder
    /// runs: cores they take from a finder that computes on the host, which leaves them those
    /// cores ([`crate::CpuFinder`]'s `find_feed`). 0 (the default) for chunks that are in
    /// memory already or mapped.
    fn producer_threads(&self) -> usize {
        0
    }
}

/// A feed over frames already in memory, numbered by their index, cut into chunks of at
/// most `chunk` frames, each copied into a store of the finder's choice (page-locked for a
/// GPU finder) and reused: `stores` of them circulate. For callers whose frames arrive in
/// pieces and for tests.
pub struct ChunkedFeed<'a> {
    data: &'a [u16],
    frame_len: usize,
    chunk: usize,
    next: usize,
    free: Vec<Box<dyn FrameStore>>,
    /// Chunks handed out and not given back.
    out: usize,
    /// Most chunks ever out at once.
    most_out: usize,
}

impl<'a> ChunkedFeed<'a> {
    /// `data` (whole frames of `frame_len` samples) in chunks of `chunk` frames through the
    /// given stores (each at least `chunk x frame_len` samples).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a zero chunk or frame length, no store, or a store too
    /// small; [`Error::Shape`] when `data` is not a whole number of frames.
    pub fn new(
        data: &'a [u16],
        frame_len: usize,
        chunk: usize,
        stores: Vec<Box<dyn FrameStore>>,
    ) -> Result<Self> {
        if chunk == 0 || frame_len == 0 {
            return Err(Error::param("chunk", "chunks and frames must not be empty"));
        }
        if stores.is_empty() {
            return Err(Error::param("stores", "a feed needs at least one store"));
        }
        let need = chunk.saturating_mul(frame_len);
        if let Some(s) = stores.iter().find(|s| s.samples().len() < need) {
            return Err(Error::param(
                "stores",
                format!(
                    "a store of {} samples, chunks need {need}",
                    s.samples().len()
                ),
            ));
        }
        if !data.len().is_multiple_of(frame_len) {
            return Err(Error::shape(
                "frames",
                format!("a multiple of {frame_len} samples"),
                format!("{} samples", data.len()),
            ));
        }
        Ok(Self {
            data,
            frame_len,
            chunk,
            next: 0,
            free: stores,
            out: 0,
            most_out: 0,
        })
    }

    /// Chunks handed out and not given back yet.
    pub fn outstanding(&self) -> usize {
        self.out
    }

    /// The most chunks that were out at once.
    pub fn most_outstanding(&self) -> usize {
        self.most_out
    }
}

impl FrameFeed for ChunkedFeed<'_> {
    fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
        let frames = self.data.len() / self.frame_len;
        let k = self.chunk.min(frames - self.next);
        if k == 0 {
            return Ok(None);
        }
        let mut store = self.free.pop().ok_or_else(|| {
            Error::param(
                "stores",
                format!(
                    "all {} stores are lent; the finder must give chunks back",
                    self.out
                ),
            )
        })?;
        let len = k * self.frame_len;
        let from = self.next * self.frame_len;
        store.samples_mut()[..len].copy_from_slice(&self.data[from..from + len]);
        let first = FrameNumber(self.next as u64);
        self.next += k;
        self.out += 1;
        self.most_out = self.most_out.max(self.out);
        FedChunk::new(store, k, self.frame_len, first).map(Some)
    }

    fn give_back(&mut self, chunk: FedChunk) {
        self.out = self.out.saturating_sub(1);
        if let Some(s) = chunk.into_store() {
            self.free.push(s);
        }
    }
}
