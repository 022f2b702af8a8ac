//! The contract every cluster finder keeps ([`ClusterFinder`]), and the default chunk-by-chunk
//! [`ClusterFinder::find_feed`] built on it.

use std::sync::Arc;

use super::feed::{FrameFeed, FrameStore};
use crate::cluster::{ClusterBatch, FrameClusters};
use crate::config::FinderConfig;
use crate::error::Result;
use crate::frames::Frames;
use crate::interpolation::{Accumulate, Accumulated, AccumulationPeek, PlaceRows};
use crate::io::readahead::read_threads;
use crate::pedestal::Pedestal;

/// Read threads for a finder that computes on the host's own cores (the CPU finder): 2. It
/// is about 20 times slower than reading, so two threads keep it fed, and every further one
/// takes a core its band threads need (on the H200's 16 cores, 16 read threads slowed the
/// 3x3 CPU run from 99 to 145 us/frame).
pub const HOST_FINDER_READ_THREADS: usize = 2;

/// Page-locks `bytes` bytes at a pointer until the returned guard is dropped; `None` when the
/// driver refuses (e.g. a page of them is locked already: a GPU finder then stages that
/// memory). The memory must stay mapped while the guard lives.
pub type HostPinner =
    std::sync::Arc<dyn Fn(*const u8, usize) -> Option<Box<dyn Send>> + Send + Sync>;

/// A `find_each` over one chunk's frames, handing each frame's clusters to the visitor.
pub(crate) type FindChunk<'a> =
    dyn FnMut(Frames<'_>, &mut dyn FnMut(FrameClusters<'_>) -> Result<()>) -> Result<()> + 'a;

/// The default [`ClusterFinder::find_feed`]: `find` (a `find_each`) over every chunk of
/// `feed` in turn, its frames named by their chunk's numbers ([`super::feed::FedChunk::number`]), each
/// chunk given back after its call (also when the call fails).
pub(crate) fn each_chunk(
    feed: &mut dyn FrameFeed,
    rows: usize,
    cols: usize,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    find: &mut FindChunk<'_>,
) -> Result<()> {
    let mut first = crate::FrameNumber(0);
    while let Some(chunk) = feed.next_chunk()? {
        let n = chunk.frames();
        let result = Frames::new(chunk.samples(), n, rows, cols)
            .and_then(|frames| {
                find(frames, &mut |fc| {
                    let number = chunk.number(fc.frame.get() as usize, first);
                    visit(FrameClusters::new(number, fc.size(), fc.words()))
                })
            })
            .map_err(|e| match e {
                // The call named the frame by its index in the chunk.
                crate::Error::ClusterLimit {
                    frame,
                    found,
                    limit,
                } => crate::Error::ClusterLimit {
                    frame: chunk.number(frame.get() as usize, first),
                    found,
                    limit,
                },
                e => e,
            });
        feed.give_back(chunk);
        result?;
        first = first.after(n);
    }
    Ok(())
}

/// What every cluster finder (CPU or GPU) offers, so callers switch devices without changing
/// code.
///
/// Frames are processed in order; each frame uses the pedestal left by the previous one, and
/// the quiet pixels of a frame all update the pedestal after it (docs/semantics.md). Results are
/// identical for every device, thread count and pipeline configuration.
pub trait ClusterFinder {
    /// The parameters that determine the results.
    fn config(&self) -> &FinderConfig;

    /// A short description of where the work runs (e.g. `cpu` or `gpu`).
    fn device(&self) -> String;

    /// Pushes dark frames into the pedestal (all pixels of every frame).
    ///
    /// # Errors
    /// [`crate::Error::Shape`] when the frames are not the configured `rows x cols`; a GPU
    /// finder also returns CUDA errors ([`crate::Error::Cuda`],
    /// [`crate::Error::OutOfDeviceMemory`]).
    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()>;

    /// Whether the pedestal holds N frames, so clusters can be found.
    fn is_ready(&self) -> bool;

    /// A copy of the current pedestal (a GPU finder downloads its device state).
    ///
    /// # Errors
    /// A GPU finder returns [`crate::Error::Cuda`] when the download fails.
    fn pedestal(&self) -> Result<Pedestal>;

    /// Replaces the pedestal (one saved earlier, or filled elsewhere); it must match the
    /// configuration (shape, window, precision), else nothing changes.
    ///
    /// # Errors
    /// [`crate::Error::Shape`] or [`crate::Error::InvalidParameter`] when the pedestal does not
    /// match the configuration (shape, window, precision); CUDA errors on a GPU finder.
    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()>;

    /// As [`ClusterFinder::set_pedestal`] with a copy of `pedestal`, into the finder's own
    /// arrays where it can: a stream starts every acquisition from the same saved pedestal, and
    /// a fresh copy (5 MB of new pages at 400 x 400) took about a millisecond of each start.
    ///
    /// # Errors
    /// As [`ClusterFinder::set_pedestal`].
    fn reset_pedestal(&mut self, pedestal: &Pedestal) -> Result<()> {
        self.set_pedestal(pedestal.clone())
    }

    /// Finds the clusters of every frame and hands each frame's clusters, borrowed, to `visit`
    /// in frame order, allocating nothing per frame. If `visit` fails, the frames before the
    /// failing one stay consumed (their pedestal updates are kept) and its error is returned
    /// as [`crate::Error::Visitor`] or as is.
    ///
    /// # Errors
    /// * [`crate::Error::PedestalNotReady`] before the pedestal holds N frames;
    /// * [`crate::Error::Shape`] when the frames are not `rows x cols`;
    /// * [`crate::Error::ClusterLimit`] when a frame holds more clusters than a fixed cap (GPU);
    /// * [`crate::Error::Visitor`] or the visitor's own error when `visit` fails;
    /// * CUDA errors ([`crate::Error::Cuda`], [`crate::Error::OutOfDeviceMemory`]) on a GPU
    ///   finder.
    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()>;

    /// Finds the clusters of every frame `feed` lends, chunk after chunk, and hands each
    /// frame's clusters to `visit` in order, each named by its chunk's number for it
    /// ([`FrameClusters::frame`] is [`crate::finder::feed::FedChunk::number`]: the frame's own
    /// number, or its index in the stream, counted from 0 at the first chunk's first frame,
    /// when the chunk has no numbers). Every chunk
    /// taken is given back once the finder no longer reads it; the chunks the finder holds
    /// at once are few (a GPU finder: those its pipeline has in flight, at most its depth).
    ///
    /// The same results as one [`ClusterFinder::find_each`] over all the frames, whatever
    /// the chunk sizes. The default calls [`ClusterFinder::find_each`] per chunk (right for
    /// the CPU finder, whose calls end when their work does); the GPU finder overrides it so
    /// that its pipeline runs on from one chunk into the next, uploading the next chunk while
    /// it collects the previous one, with no wait for the GPU in between.
    ///
    /// What a failure leaves: the frames before it stay consumed (their pedestal updates
    /// are kept), and
    /// * an error of the feed: every frame lent before it was found and visited, then the
    ///   error is returned (a GPU finder finishes the chunks it holds first);
    /// * a visitor error at a frame: that frame and those before it stay consumed, as with
    ///   [`ClusterFinder::find_each`];
    /// * [`crate::Error::ClusterLimit`] (a GPU finder with `Overflow::Fail`): the pedestal is
    ///   as it was before the *chunk* that holds the overflowing frame (its `frame` is the
    ///   frame's number, as above); the visitor may have seen that chunk's earlier frames.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`] (for each chunk), and the feed's errors.
    fn find_feed(
        &mut self,
        feed: &mut dyn FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        let (rows, cols) = (self.config().rows, self.config().cols);
        each_chunk(feed, rows, cols, visit, &mut |frames, visit| {
            self.find_each(frames, visit)
        })
    }

    /// Memory for `samples` frame samples that this finder reads fastest: page-locked for a
    /// GPU finder (uploads run at DMA speed), plain memory otherwise. The streaming engine
    /// ([`crate::engine`]) reads frames straight into it.
    ///
    /// # Errors
    /// [`crate::Error::TooLarge`] when the memory is not available.
    fn frame_store(&self, samples: usize) -> Result<Box<dyn FrameStore>> {
        // Zeroed by the allocator: pages are touched only when frames are read into them; an
        // error, not an abort, when the memory (or the address space) is not there.
        let store: Vec<u16> = crate::memory::zeroed_vec(
            || format!("a ring slot of {samples} frame samples"),
            samples,
        )?;
        Ok(Box::new(store))
    }

    /// A function that page-locks host memory for this finder, when it reads page-locked
    /// memory faster (a GPU finder: its uploads then read that memory directly); `None` when
    /// it does not need it. The engine's zero-copy input locks each chunk of a mapped file
    /// with it, on its reader thread, and drops the guard (unlocking) before the memory goes.
    fn host_pinner(&self) -> Option<HostPinner> {
        None
    }

    /// Whether this finder reads a file's frames fastest from a memory map of the file (the
    /// engine's zero-copy input, [`crate::engine::EngineConfig::map`]) rather than copied into
    /// its ring by reader threads. True by default: a finder that computes on the host reads
    /// the mapped page cache as fast as its own memory, and no reader thread takes a core
    /// from its band threads (which run in step frame by frame, so one of them sharing its
    /// core with a reader holds back every band). The GPU finder says false: its uploads
    /// from page-locked ring slots are faster than from registered page-cache pages.
    fn prefers_mapped_input(&self) -> bool {
        true
    }

    /// Threads a source should read frames with for this finder (see
    /// [`crate::io::FrameSource::set_read_threads`]): few for a finder that computes on the
    /// host's cores ([`HOST_FINDER_READ_THREADS`], the default), every core
    /// up to 16 ([`crate::io::readahead::read_threads`]) for one that computes elsewhere (a GPU).
    fn read_threads(&self) -> usize {
        HOST_FINDER_READ_THREADS.min(read_threads())
    }

    /// Allocates ahead what calls of up to `frames` frames need, so that the first call
    /// allocates nothing (a GPU finder: device buffers and page-locked result memory; `cluda
    /// find` does it on the thread that opens the device, while the pedestal is read).
    /// Processes no frame; the default does nothing.
    ///
    /// # Errors
    /// A GPU finder returns CUDA errors ([`crate::Error::Cuda`],
    /// [`crate::Error::OutOfDeviceMemory`]).
    fn reserve(&mut self, _frames: usize) -> Result<()> {
        Ok(())
    }

    /// Asks the finder to accumulate `what` (an eta cube or a sub-pixel image) from every
    /// cluster it finds from now on, on its device, in its output stage: the clusters then
    /// need no pass on the host. `false` when it cannot (the CPU finder; a GPU pipeline
    /// without compacted results): the caller computes the same counts from the clusters it
    /// is handed. One accumulation at a time: while one is under way (until
    /// [`ClusterFinder::take_accumulated`]) a second is declined too, so that two sinks of
    /// one run (a live image and a live eta cube) never take each other's counts.
    ///
    /// # Errors
    /// A GPU finder's device errors (allocating the counts, uploading the maps).
    fn accumulate(&mut self, what: &Accumulate) -> Result<bool> {
        let _ = what;
        Ok(false)
    }

    /// What was accumulated since [`ClusterFinder::accumulate`] accepted, which stops
    /// accumulating; `None` when nothing was asked for.
    ///
    /// # Errors
    /// A GPU finder's device errors (the download of the counts).
    fn take_accumulated(&mut self) -> Result<Option<Accumulated>> {
        Ok(None)
    }

    /// A copy of what was accumulated so far since [`ClusterFinder::accumulate`] accepted,
    /// without stopping the accumulation (e.g. to refresh a live image while a stream runs);
    /// `None` when nothing is under way or the finder cannot read its counts mid-way (the
    /// default). A GPU finder narrows and downloads the counts on its compute stream, after
    /// every chunk whose clusters were handed out.
    ///
    /// # Errors
    /// A GPU finder's device errors (the download of the counts).
    fn peek_accumulated(&mut self) -> Result<Option<Accumulated>> {
        Ok(None)
    }

    /// A request that the finder answers with [`ClusterFinder::peek_accumulated`] between two
    /// chunks of its find calls whenever it was asked ([`AccumulationPeek::ask`], e.g. from
    /// the visitor the find call holds the finder for), for the accumulation under way; `None`
    /// when nothing is under way or the finder cannot (the default). Ended by
    /// [`ClusterFinder::take_accumulated`].
    fn accumulation_peek(&mut self) -> Option<Arc<AccumulationPeek>> {
        None
    }

    /// Asks the finder to place every cluster it finds from now on through `rules` on its
    /// device, and hand each frame's rows with its clusters ([`FrameClusters::placed`]: one
    /// row per cluster, in their order, what [`crate::interpolation::Placer`] computes for
    /// them, bit for bit), so that the host places nothing. `Some` starts, `None` stops
    /// (the rows of a frame handed out before stay valid for its visit). `false` when it
    /// cannot (the default; a GPU pipeline without compacted results): the frames come
    /// without rows and the caller places them.
    ///
    /// # Errors
    /// A GPU finder's device errors (uploading the maps).
    fn place_rows(&mut self, rules: Option<&PlaceRows>) -> Result<bool> {
        let _ = rules;
        Ok(false)
    }

    /// Finds the clusters of every frame and returns them as one owned batch.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`].
    fn find(&mut self, frames: Frames<'_>) -> Result<ClusterBatch> {
        let mut batch = ClusterBatch::new(self.config().size);
        self.find_each(frames, &mut |fc| {
            batch.push_frame(fc.words());
            Ok(())
        })?;
        Ok(batch)
    }
}
