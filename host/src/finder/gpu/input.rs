//! Where the pipeline's frames come from: one borrowed slice (a `find_each` call) or the
//! chunks of a [`FrameFeed`] (`find_feed`), as host ranges the pipeline's jobs upload from.
//!
//! The pipeline asks for the frames from a stream index on ([`Input::piece`]) and says when
//! frames before an index are no longer read from the host ([`Input::release`]); a feed's
//! chunks are taken as the pipeline reaches them and given back when released, so a chunk
//! is held from its first job's submission to its last job's collection (and no longer).

use std::collections::VecDeque;
use std::sync::Arc;

use cudarc::driver::CudaContext;

use super::buffers::{Lease, lease, locked_in_part, register};
use super::settings::InputMode;
use crate::error::{Error, Result};
use crate::finder::feed::{FedChunk, FrameFeed};
use crate::frames::Frames;

/// Where uploads read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The caller's memory: pageable ([`InputMode::Pageable`]), or page-locked under a hold
    /// the input keeps while the uploads may read it.
    Direct,
    /// The slot's pinned staging buffer, filled by a host memcpy.
    Staged,
}

/// Frames `next .. next + n` of the stream: contiguous host memory within one part of the
/// input (the call's frames, or one chunk of a feed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    /// The first frame's samples. Valid until the pipeline releases the frames.
    pub host: *const u16,
    pub n: usize,
    pub src: Source,
    /// Which part of the input (the call: 0; a feed: its chunk's sequence number).
    pub part: usize,
    /// The piece starts its part (its pedestal is the part's restore point).
    pub opens: bool,
}

/// Frames for the pipeline (see the module docs).
pub(crate) trait Input {
    /// Up to `max` frames from stream index `next` on, within one part; `None` at the end.
    /// `next` is never before the last release, and is at most the end of the frames
    /// handed out so far.
    fn piece(&mut self, next: usize, max: usize) -> Result<Option<Piece>>;

    /// Frames before `end` are no longer read from the host (their uploads completed).
    fn release(&mut self, end: usize);

    /// Replaces `out` with the numbers the frames of the piece at `next` (`n` frames, as
    /// [`Input::piece`] gave them) are reported by: the call's frames' numbers
    /// ([`Frames::number`]), or their chunk's ([`FedChunk::numbers`]). Asked while the piece's
    /// frames are held.
    ///
    /// # Errors
    /// [`Error::Internal`] when the piece's frames are not held (a scheduling bug).
    fn numbers(&self, next: usize, n: usize, out: &mut Vec<crate::FrameNumber>) -> Result<()>;
}

/// Replaces `out` with numbers `from .. from + n` of `numbers`.
///
/// # Errors
/// [`Error::Internal`] when `numbers` does not hold them all.
fn numbers_into(
    numbers: crate::FrameNumbers<'_>,
    from: usize,
    n: usize,
    out: &mut Vec<crate::FrameNumber>,
) -> Result<()> {
    out.clear();
    for k in from..from + n {
        out.push(
            numbers
                .get(k)
                .ok_or_else(|| Error::Internal(format!("frame {k} of a piece has no number")))?,
        );
    }
    Ok(())
}

/// How to read caller memory under `mode`, with the hold that keeps it page-locked while
/// uploads read it by DMA (drop it only once the GPU is done with them): straight from it
/// when a range this crate page-locked covers all of it ([`lease`]: [`super::PinnedFrames`],
/// [`super::GpuFinder::lock_frames`], the engine's ring and mapped chunks), or when it is
/// registered now with [`InputMode::Registered`]; straight from pageable memory with
/// [`InputMode::Pageable`] (the driver copies it before the call returns; not when a range of
/// ours covers part of it); else through the staging buffer. Memory that only answers as page-locked (locked by someone else, or its
/// ends covered by neighbours' registrations) is not read by DMA: nothing here would keep it
/// locked until its uploads ran.
pub(crate) fn source_for(
    ctx: &Arc<CudaContext>,
    mode: InputMode,
    data: &[u16],
) -> (Source, Option<Lease>) {
    if mode == InputMode::Staged {
        return (Source::Staged, None);
    }
    let (p, bytes) = (data.as_ptr() as *const u8, std::mem::size_of_val(data));
    if let Some(held) = lease(ctx, p, bytes) {
        return (Source::Direct, Some(held));
    }
    match mode {
        // Unless locked in part by a range of ours (the driver might then read it by DMA
        // later, under a lock nothing here keeps): staged instead.
        InputMode::Pageable if locked_in_part(ctx, p, bytes) => (Source::Staged, None),
        InputMode::Pageable => (Source::Direct, None),
        InputMode::Registered => match register(ctx, p, bytes) {
            Some(held) => (Source::Direct, Some(held)),
            None => (Source::Staged, None),
        },
        InputMode::Auto | InputMode::Staged => (Source::Staged, None),
    }
}

/// The frames of one call, borrowed for it.
pub(crate) struct CallInput<'a> {
    pub data: &'a [u16],
    /// The frames' numbers.
    pub numbers: crate::FrameNumbers<'a>,
    /// Samples per frame.
    pub frame_len: usize,
    pub src: Source,
}

impl Input for CallInput<'_> {
    fn piece(&mut self, next: usize, max: usize) -> Result<Option<Piece>> {
        let total = self.data.len() / self.frame_len;
        if next >= total {
            return Ok(None);
        }
        Ok(Some(Piece {
            host: self.data[next * self.frame_len..].as_ptr(),
            n: max.min(total - next),
            src: self.src,
            part: 0,
            opens: next == 0,
        }))
    }

    fn release(&mut self, _end: usize) {}

    fn numbers(&self, next: usize, n: usize, out: &mut Vec<crate::FrameNumber>) -> Result<()> {
        numbers_into(self.numbers, next, n, out)
    }
}

/// A feed's chunk while the pipeline holds it.
struct Held {
    /// The hold that keeps the chunk page-locked while its uploads may read it (see
    /// [`source_for`]). Declared before `chunk` (fields drop in order), and dropped first by
    /// [`Held::into_chunk`]: released before the chunk's memory can go.
    lock: Option<Lease>,
    chunk: FedChunk,
    /// Stream index of its first frame.
    first: usize,
    part: usize,
    src: Source,
}

impl Held {
    fn end(&self) -> usize {
        self.first + self.chunk.frames()
    }

    /// The chunk, its hold released first.
    fn into_chunk(self) -> FedChunk {
        let Held { lock, chunk, .. } = self;
        drop(lock);
        chunk
    }
}

/// The chunks of a feed, taken as the pipeline reaches them.
pub(crate) struct FeedInput<'a> {
    feed: &'a mut dyn FrameFeed,
    ctx: Arc<CudaContext>,
    mode: InputMode,
    rows: usize,
    cols: usize,
    held: VecDeque<Held>,
    /// Frames taken from the feed so far.
    taken: usize,
    parts: usize,
    /// The feed ended (or failed: `error`).
    done: bool,
    /// The feed's (or a chunk's) error, returned once the frames before it are finished.
    error: Option<Error>,
}

impl<'a> FeedInput<'a> {
    pub fn new(
        feed: &'a mut dyn FrameFeed,
        ctx: Arc<CudaContext>,
        mode: InputMode,
        rows: usize,
        cols: usize,
    ) -> Self {
        Self {
            feed,
            ctx,
            mode,
            rows,
            cols,
            held: VecDeque::new(),
            taken: 0,
            parts: 0,
            done: false,
            error: None,
        }
    }

    /// Takes the next chunk with frames; `false` at the end of the feed or at its error.
    fn take(&mut self) -> bool {
        while !self.done {
            match self.feed.next_chunk() {
                Ok(None) => self.done = true,
                Err(e) => {
                    self.error = Some(e);
                    self.done = true;
                }
                Ok(Some(chunk)) if chunk.frames() == 0 => self.feed.give_back(chunk),
                Ok(Some(chunk)) => {
                    let frames = chunk.frames();
                    if let Err(e) = Frames::new(chunk.samples(), frames, self.rows, self.cols)
                        .and_then(|f| f.expect_shape(self.rows, self.cols, "data frames"))
                    {
                        self.feed.give_back(chunk);
                        self.error = Some(e);
                        self.done = true;
                        break;
                    }
                    // A neighbour's hold on a page this chunk shares does not count: only
                    // a range that covers the whole chunk does, and the lease keeps it
                    // locked for as long as the chunk is held.
                    let (src, lock) = source_for(&self.ctx, self.mode, chunk.samples());
                    self.held.push_back(Held {
                        lock,
                        chunk,
                        first: self.taken,
                        part: self.parts,
                        src,
                    });
                    self.taken += frames;
                    self.parts += 1;
                    return true;
                }
            }
        }
        false
    }

    /// Ends the stream once the GPU is done with every chunk (the caller synchronised the
    /// context: see [`super::pipeline::UntilIdle`]): the chunks still held go back to the
    /// feed; then the feed's error, if any.
    pub fn finish(mut self) -> Result<()> {
        while let Some(h) = self.held.pop_front() {
            self.feed.give_back(h.into_chunk());
        }
        self.error.take().map_or(Ok(()), Err)
    }
}

impl FeedInput<'_> {
    /// The held chunk with the stream's frame `next`.
    ///
    /// # Errors
    /// [`Error::Internal`] when no held chunk has it (a scheduling bug).
    fn holding(&self, next: usize) -> Result<&Held> {
        self.held
            .iter()
            .find(|h| (h.first..h.end()).contains(&next))
            .ok_or_else(|| {
                Error::Internal(format!("frame {next} of the stream is not held any more"))
            })
    }
}

impl Input for FeedInput<'_> {
    fn piece(&mut self, next: usize, max: usize) -> Result<Option<Piece>> {
        if next >= self.taken && !self.take() {
            return Ok(None);
        }
        let h = self.holding(next)?;
        let frame_len = self.rows * self.cols;
        Ok(Some(Piece {
            host: h.chunk.samples()[(next - h.first) * frame_len..].as_ptr(),
            n: max.min(h.end() - next),
            src: h.src,
            part: h.part,
            opens: next == h.first,
        }))
    }

    fn release(&mut self, end: usize) {
        while self.held.front().is_some_and(|h| h.end() <= end) {
            if let Some(h) = self.held.pop_front() {
                self.feed.give_back(h.into_chunk());
            }
        }
    }

    fn numbers(&self, next: usize, n: usize, out: &mut Vec<crate::FrameNumber>) -> Result<()> {
        // A piece lies within one chunk.
        let h = self.holding(next)?;
        numbers_into(h.chunk.numbers(), next - h.first, n, out)
    }
}
