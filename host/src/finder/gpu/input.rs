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

use super::buffers::{Registration, is_pinned};
use super::settings::InputMode;
use crate::error::{Error, Result};
use crate::finder::feed::{FedChunk, FrameFeed};
use crate::frames::Frames;

/// Where uploads read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The caller's memory (pageable, already pinned, or registered for the call).
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
    /// [`Input::piece`] gave them) are reported by: their index in the call, or their
    /// chunk's numbers ([`FedChunk::number`]). Asked while the piece's frames are held.
    fn numbers(&self, next: usize, n: usize, out: &mut Vec<usize>);
}

/// How to read caller memory under `mode`: straight from it (already page-locked, or locked
/// now with the returned registration, or pageable with [`InputMode::Pageable`]), or through
/// the staging buffer.
pub(crate) fn source_for(
    ctx: &Arc<CudaContext>,
    mode: InputMode,
    data: &[u16],
) -> (Source, Option<Registration>) {
    match mode {
        InputMode::Pageable => (Source::Direct, None),
        InputMode::Staged => (Source::Staged, None),
        InputMode::Auto => {
            let p = data.as_ptr() as *const u8;
            if is_pinned(p, std::mem::size_of_val(data)) {
                (Source::Direct, None)
            } else {
                (Source::Staged, None)
            }
        }
        InputMode::Registered => {
            let p = data.as_ptr() as *const u8;
            let bytes = std::mem::size_of_val(data);
            if is_pinned(p, bytes) {
                (Source::Direct, None)
            } else if let Some(r) = Registration::new(ctx, p, bytes) {
                (Source::Direct, Some(r))
            } else {
                (Source::Staged, None)
            }
        }
    }
}

/// The 4 KiB pages holding `data` (those a registration locks).
fn pages_of(data: &[u16]) -> std::ops::Range<usize> {
    let start = data.as_ptr() as usize;
    let end = start + std::mem::size_of_val(data);
    (start & !4095)..end.div_ceil(4096) * 4096
}

/// The frames of one call, borrowed for it.
pub(crate) struct CallInput<'a> {
    pub data: &'a [u16],
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

    fn numbers(&self, next: usize, n: usize, out: &mut Vec<usize>) {
        out.clear();
        out.extend(next..next + n);
    }
}

/// A feed's chunk while the pipeline holds it.
struct Held {
    chunk: FedChunk,
    /// Stream index of its first frame.
    first: usize,
    part: usize,
    src: Source,
    /// Dropped (unlocking the memory) before the chunk goes back.
    registration: Option<Registration>,
    /// The pages it covers.
    pages: std::ops::Range<usize>,
}

impl Held {
    fn end(&self) -> usize {
        self.first + self.chunk.frames()
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
                    let pages = pages_of(chunk.samples());
                    // Memory that shares a page with a chunk this input registered counts
                    // as page-locked only while that one is held: stage it instead.
                    let shares = self.held.iter().any(|h| {
                        h.registration.is_some()
                            && h.pages.start < pages.end
                            && pages.start < h.pages.end
                    });
                    let (src, registration) = if shares {
                        (Source::Staged, None)
                    } else {
                        source_for(&self.ctx, self.mode, chunk.samples())
                    };
                    self.held.push_back(Held {
                        chunk,
                        first: self.taken,
                        part: self.parts,
                        src,
                        registration,
                        pages,
                    });
                    self.taken += frames;
                    self.parts += 1;
                    return true;
                }
            }
        }
        false
    }

    /// Ends the stream: the chunks still held go back to the feed when the GPU is known to
    /// be done with them (`gpu_idle`: the context synchronised), else they are dropped; then
    /// the feed's error, if any.
    pub fn finish(mut self, gpu_idle: bool) -> Result<()> {
        while let Some(h) = self.held.pop_front() {
            drop(h.registration);
            if gpu_idle {
                self.feed.give_back(h.chunk);
            }
        }
        self.error.take().map_or(Ok(()), Err)
    }
}

impl Input for FeedInput<'_> {
    fn piece(&mut self, next: usize, max: usize) -> Result<Option<Piece>> {
        if next >= self.taken && !self.take() {
            return Ok(None);
        }
        let h = self
            .held
            .iter()
            .find(|h| (h.first..h.end()).contains(&next))
            .ok_or_else(|| {
                Error::Internal(format!("frame {next} of the stream is not held any more"))
            })?;
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
                drop(h.registration);
                self.feed.give_back(h.chunk);
            }
        }
    }

    fn numbers(&self, next: usize, n: usize, out: &mut Vec<usize>) {
        out.clear();
        // A piece lies within one chunk; frames no longer held (never asked for) keep their
        // stream index.
        let held = self
            .held
            .iter()
            .find(|h| (h.first..h.end()).contains(&next));
        out.extend((next..next + n).map(|i| match held {
            Some(h) if i < h.end() => h.chunk.number(i - h.first, h.first),
            _ => i,
        }));
    }
}
