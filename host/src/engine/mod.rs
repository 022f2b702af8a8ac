//! The streaming engine behind `cluda find`, `cluda demo` and long library runs: a source
//! feeding a finder feeding a sink, all three overlapped, with bounded memory.
//!
//! ```text
//!  reader thread                 calling thread                    writer thread
//!  FrameSource::fill  --full-->  ClusterFinder::find_feed  --bytes-->  WriteBehind
//!        ^                 slots       |  visit(frame number, clusters)        |
//!        +--------free slots-----------+                          buffers back -+
//! ```
//!
//! A fixed ring of `slots` frame buffers circulates between the reader thread and the
//! finder: the reader fills a free slot with the next chunk of frames (straight from the
//! file into the slot: one copy on the host), the finder takes full slots in order and gives
//! each back once it no longer reads it (the CPU finder: after its clusters are visited). The slots are whatever the finder reads
//! fastest ([`ClusterFinder::frame_store`]): page-locked memory for the GPU finder, so uploads
//! run at DMA speed with no per-call registration; plain memory for the CPU finder. When the
//! finder is slower than the source, the reader waits for a free slot; when the source is
//! slower, the finder waits for a full one. Either way at most `slots` chunks exist.
//!
//! The finder pulls the full slots itself ([`ClusterFinder::find_feed`], the ring being a
//! [`FrameFeed`]): a GPU finder keeps its pipeline going from one slot to the next
//! (the next slot's uploads are queued while the previous one's clusters are collected) and
//! gives each slot back once the GPU no longer reads it, before its clusters are visited.
//!
//! The cluster sink is the caller's visitor; a cluster file written through
//! [`crate::io::write_behind::WriteBehind`] leaves the calling thread after a memcpy of each frame's
//! records, so writing overlaps finding too.

pub mod imaging;
pub mod input;
pub mod paths;
pub mod placement;
pub mod plan;
pub mod rows;
pub mod run;
pub mod sink;
pub mod slice_source;

use std::time::{Duration, Instant};

use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::finder::feed::{Chunk, FedChunk, FrameFeed, FrameStore};
use crate::io::{FrameSource, MappedFrames};
pub use slice_source::SliceSource;

/// How the engine reads ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Frames per chunk (per slot and per finder call).
    pub chunk: usize,
    /// Slots in the ring: chunks being read, waiting, or being found (at least 2, so that
    /// reading overlaps finding).
    pub slots: usize,
    /// Zero-copy input: when the source can map its file ([`FrameSource::map_rest`]), hand
    /// chunks of the map to the finder, page-locked in place on a GPU, instead of reading
    /// them into the ring. A map whose file shrinks during the run (another program truncated
    /// it) fails that input with an error naming the file, never a SIGBUS
    /// ([`crate::io::GuardedMap`]).
    pub map: bool,
}

impl EngineConfig {
    /// Largest ring the engine accepts, in bytes of frame memory.
    pub const MAX_RING_BYTES: usize = 16 << 30;

    /// Chunks of at most 256 frames and 96 MiB each, three slots: large enough that each
    /// finder call amortises its start and drain, small enough that allocating the ring
    /// (page-locked memory on a GPU costs about 1 s per GiB) stays a small part of a run.
    pub fn for_frames(rows: usize, cols: usize) -> Self {
        let frame_bytes = rows.saturating_mul(cols).saturating_mul(2).max(1);
        Self {
            chunk: ((96usize << 20) / frame_bytes).clamp(1, 256),
            slots: 3,
            map: false,
        }
    }

    /// The same, with chunks no larger than an input of `frames` frames needs (a short run
    /// allocates no more than it reads).
    pub fn capped(mut self, frames: u64) -> Self {
        self.chunk = self
            .chunk
            .min(usize::try_from(frames).unwrap_or(usize::MAX))
            .max(1);
        self
    }

    /// Checks the settings, naming the bad one.
    ///
    /// # Errors
    /// [`Error::Param`] for a zero chunk, fewer than 2 slots, or a ring larger than
    /// [`EngineConfig::MAX_RING_BYTES`] for `rows x cols` frames.
    pub fn validate(&self, rows: usize, cols: usize) -> Result<()> {
        if self.chunk == 0 {
            return Err(Error::param("chunk", "must be at least 1 frame"));
        }
        if !(2..=64).contains(&self.slots) {
            return Err(Error::param(
                "slots",
                format!("must be between 2 and 64, got {}", self.slots),
            ));
        }
        let bytes = rows
            .checked_mul(cols)
            .and_then(|p| p.checked_mul(2 * self.chunk))
            .and_then(|b| b.checked_mul(self.slots));
        match bytes {
            Some(b) if b <= Self::MAX_RING_BYTES => Ok(()),
            _ => Err(Error::param(
                "chunk",
                format!(
                    "{} slots of {} frames of {rows} x {cols} exceed the engine's {} GiB ring",
                    self.slots,
                    self.chunk,
                    Self::MAX_RING_BYTES >> 30
                ),
            )),
        }
    }
}

/// The slots of an engine's ring, allocated ahead of [`find_stream_with`]: page-locked memory
/// on a GPU takes a noticeable part of a short run's start-up, and can be allocated while
/// the pedestal is read.
pub struct RingSlots {
    stores: Vec<Box<dyn FrameStore>>,
    /// Samples per slot.
    samples: usize,
    /// Time the allocation took.
    alloc: Duration,
}

impl RingSlots {
    /// The `config.slots` slots of `config.chunk` frames each that [`find_stream_with`] needs
    /// for `finder` ([`ClusterFinder::frame_store`]).
    ///
    /// # Errors
    /// As [`EngineConfig::validate`] and [`ClusterFinder::frame_store`].
    pub fn allocate(finder: &dyn ClusterFinder, config: EngineConfig) -> Result<Self> {
        let (rows, cols) = (finder.config().rows, finder.config().cols);
        config.validate(rows, cols)?;
        let start = Instant::now();
        let samples = config.chunk * rows * cols;
        let stores = (0..config.slots)
            .map(|_| finder.frame_store(samples))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            stores,
            samples,
            alloc: start.elapsed(),
        })
    }

    /// The time the allocation took.
    pub fn alloc_time(&self) -> Duration {
        self.alloc
    }
}

/// Where the time of a run went, for `--timing`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineStats {
    /// Frames found.
    pub frames: u64,
    /// Bytes of frames read by the source.
    pub read_bytes: u64,
    /// Time the reader thread spent filling slots.
    pub read_busy: Duration,
    /// Time the finder spent waiting for a full slot (the source was the slower side).
    pub waited_for_input: Duration,
    /// Time in the finder's calls, visitor included.
    pub find: Duration,
    /// Time in the visitor (the sink's share of `find`).
    pub visit: Duration,
    /// Time to allocate the ring's slots (page-locked memory on a GPU) in the engine; zero
    /// when they were allocated ahead ([`RingSlots`]).
    pub alloc: Duration,
    /// Wall time of the data phase: from the first chunk asked for to the last one found
    /// (the ring's allocation before it is [`EngineStats::alloc`]).
    pub wall: Duration,
}

/// What the reader thread sends the finder's side, in order.
enum Message {
    /// The next chunk of the current input, with its frame numbers.
    Chunk(FedChunk),
    /// The current input ended (all its frames were sent), after this much reading time
    /// and these bytes.
    End {
        /// Time spent filling its chunks.
        busy: Duration,
        /// Bytes of frames read.
        bytes: u64,
    },
    /// The current input failed with this error (the frames before it were sent); the reader
    /// goes on with the next input.
    Failed {
        /// What went wrong.
        error: Error,
        /// Time spent filling its chunks.
        busy: Duration,
        /// Bytes of frames read.
        bytes: u64,
    },
}

/// Finds the clusters of every frame `source` delivers with `finder`, reading ahead on a
/// thread of its own (see the module docs), and hands each frame's clusters with the
/// source's frame number to `visit` (the clusters' `frame` is that number too), in order.
///
/// The finder pulls the ring's slots through [`ClusterFinder::find_feed`], so a GPU finder
/// does not wait for the GPU between slots.
///
/// # Errors
/// The first error of the source, the finder or the visitor; the reader thread stops with
/// it. What stays consumed (pedestal updates kept) is what [`ClusterFinder::find_feed`]
/// says: before an error of the source, every frame it delivered (all found and visited);
/// with a visitor error at a frame, the frames up to and including it; with
/// [`Error::ClusterLimit`] (a GPU finder with `Overflow::Fail`; the error names the source's
/// frame number), the frames before the slot that holds the overflowing frame: the
/// pedestal is as it was before that slot, though the visitor may have seen frames of it.
pub fn find_stream(
    finder: &mut dyn ClusterFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    find_stream_with(finder, source, config, &mut None, visit)
}

/// As [`find_stream`], with the ring's slots allocated ahead ([`RingSlots::allocate`], e.g. on
/// the thread that opened the device while the pedestal was pushed) and kept for the next
/// run: `slots` is taken when it fits `config` (else the ring is allocated here;
/// [`EngineStats::alloc`] counts only that) and holds the ring again afterwards when every
/// slot came back.
///
/// # Errors
/// As [`find_stream`].
pub fn find_stream_with(
    finder: &mut dyn ClusterFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    let mut result = None;
    find_streams(
        finder,
        &mut [source],
        config,
        slots,
        &mut |_, _| Ok(()),
        &mut |_, n, fc| visit(n, fc),
        &mut |_, _, r| {
            result = Some(r);
            Ok(())
        },
    )?;
    result.unwrap_or_else(|| Err(Error::Internal("the engine ended no input".into())))
}

/// [`find_stream_with`] under the name the Python package's calls use: one finder running the
/// engine many times keeps its ring (page-locked slots cost about 0.3 s to allocate on an
/// H200) from one run to the next.
///
/// # Errors
/// As [`find_stream`].
pub fn find_stream_reusing(
    finder: &mut dyn ClusterFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    find_stream_with(finder, source, config, slots, visit)
}

/// Several inputs through one finder and one ring, one after another, the reader running
/// ahead across their boundaries (the next input is read while the current one is found).
/// For input `k`: `begin(finder, k)` before its first frame is asked for (e.g. to reset the
/// pedestal; an error there skips the input and is what `end` receives), `visit(k, number,
/// clusters)` for each frame in order, then `end(finder, k, result)` with the input's statistics or
/// the error that stopped it (the source's, the finder's or the visitor's). An error of one
/// input does not stop the others; an error returned by `begin`'s finder state (none) or by
/// `end` stops the run and is returned. `slots` as in [`find_stream_with`].
///
/// # Errors
/// [`Error::Shape`] when a source's frames are not the finder's shape (before anything
/// runs), [`EngineConfig::validate`]'s, allocation errors, and `end`'s.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn find_streams(
    finder: &mut dyn ClusterFinder,
    sources: &mut [&mut (dyn FrameSource + Send)],
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    begin: &mut dyn FnMut(&mut dyn ClusterFinder, usize) -> Result<()>,
    visit: &mut dyn FnMut(usize, u64, FrameClusters<'_>) -> Result<()>,
    end: &mut dyn FnMut(&mut dyn ClusterFinder, usize, Result<EngineStats>) -> Result<()>,
) -> Result<()> {
    let want = (finder.config().rows, finder.config().cols);
    for source in sources.iter() {
        let (rows, cols) = (source.rows(), source.cols());
        if (rows, cols) != want {
            return Err(Error::shape(
                "frames",
                format!("{} x {} frames (the finder's)", want.0, want.1),
                format!("{rows} x {cols} frames"),
            ));
        }
    }
    let (rows, cols) = want;
    config.validate(rows, cols)?;
    let pixels = rows * cols;
    let slot_len = config.chunk * pixels;
    let start = Instant::now();
    let mapped: Vec<Option<MappedFrames>> = sources
        .iter_mut()
        .map(|s| if config.map { s.map_rest() } else { None })
        .collect();
    let all_mapped = mapped.iter().all(Option::is_some);
    // Per input, the threads that fill slots while the finder runs (a mapped one reads
    // nothing).
    let producers: Vec<usize> = sources
        .iter()
        .zip(&mapped)
        .map(|(s, m)| if m.is_some() { 0 } else { s.read_threads() })
        .collect();
    let mut given = slots
        .take()
        .filter(|s| s.samples == slot_len && s.stores.len() == config.slots)
        .map_or_else(Vec::new, |s| s.stores);
    let mut entries = Vec::with_capacity(config.slots);
    for _ in 0..config.slots {
        entries.push(match given.pop() {
            Some(slot) => Some(slot),
            // Tokens only: every chunk is a piece of a map.
            None if all_mapped => None,
            None => Some(finder.frame_store(slot_len)?),
        });
    }
    drop(given);
    let alloc = start.elapsed();
    let (free_tx, free_rx) =
        std::sync::mpsc::sync_channel::<Option<Box<dyn FrameStore>>>(config.slots);
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Message>(config.slots + 1);
    for e in entries {
        // The channel holds every entry: this cannot block or fail.
        let _ = free_tx.send(e);
    }
    let pin = finder.host_pinner();
    // The input the finder's side gave up on (an error other than its reading): the reader
    // stops reading it at the next chunk instead of reading it to its end.
    let abandoned = std::sync::atomic::AtomicUsize::new(usize::MAX);
    let abandoned = &abandoned;
    // Read by the reader thread (the chunks) and here (a map's fault mark).
    let maps = &mapped;
    std::thread::scope(|scope| -> Result<()> {
        let reader = std::thread::Builder::new()
            .name("cluda-reader".into())
            .spawn_scoped(scope, move || {
                // An entry taken but not used (the end of an input) is kept for the next one.
                let mut spare = None;
                'inputs: for (index, (source, mapped)) in
                    sources.iter_mut().zip(maps).enumerate()
                {
                    let (mut busy, mut bytes) = (Duration::ZERO, 0u64);
                    let mut next_mapped = 0usize;
                    let msg = loop {
                        let entry = match spare.take() {
                            Some(e) => e,
                            None => match free_rx.recv() {
                                Ok(e) => e,
                                Err(_) => break 'inputs,
                            },
                        };
                        if abandoned.load(std::sync::atomic::Ordering::Relaxed) == index {
                            spare = Some(entry);
                            break Message::End { busy, bytes };
                        }
                        let t = Instant::now();
                        let mut numbers = Vec::with_capacity(config.chunk);
                        let got = match (entry, mapped) {
                            (entry, Some(m)) => {
                                let k = config.chunk.min(m.frames - next_mapped);
                                let from = m.offset + next_mapped * pixels * 2;
                                let range = from..from + k * pixels * 2;
                                let first = m.first_number + next_mapped as u64;
                                numbers.extend(first..first + k as u64);
                                next_mapped += k;
                                // A file that shrank since it was mapped (or whose map
                                // already read zeros for pages it lost): an error naming
                                // the file, before any of the chunk is used.
                                let len = m.file.metadata().map_or(u64::MAX, |md| md.len());
                                if k > 0 && (len < range.end as u64 || m.map.faulted()) {
                                    // Kept for the next input.
                                    spare = Some(entry);
                                    Err(Error::format(
                                        &m.path,
                                        format!(
                                            "the file shrank to {len} bytes while it was mapped: frames {first}..{} are gone{SHRANK_HINT}",
                                            first + k as u64
                                        ),
                                    ))
                                } else {
                                    let guard = match (k, &pin) {
                                        (0, _) => None,
                                        (_, None) => {
                                            m.map.prefault(range.start, range.len());
                                            None
                                        }
                                        (_, Some(pin)) => {
                                            pin(m.map[range.clone()].as_ptr(), range.len())
                                        }
                                    };
                                    Ok((
                                        k,
                                        Chunk::Mapped {
                                            _pin: guard,
                                            map: m.map.clone(),
                                            range,
                                            entry,
                                        },
                                    ))
                                }
                            }
                            (Some(mut store), None) => {
                                match source
                                    .fill(&mut store.samples_mut()[..slot_len], &mut numbers)
                                {
                                    Ok(k) => Ok((k, Chunk::Slot(store))),
                                    Err(e) => {
                                        // Kept for the next input.
                                        spare = Some(Some(store));
                                        Err(e)
                                    }
                                }
                            }
                            (None, None) => Err(Error::Internal(
                                "a ring token for an input that is not mapped".into(),
                            )),
                        };
                        busy += t.elapsed();
                        match got {
                            Ok((0, chunk)) => {
                                spare = Some(chunk.into_store());
                                break Message::End { busy, bytes };
                            }
                            Ok((k, chunk)) => {
                                bytes += (k * pixels * 2) as u64;
                                // A source that numbers no frames leaves them their index
                                // in the stream.
                                let fed = FedChunk::of(chunk, k, pixels).and_then(|c| {
                                    if numbers.is_empty() { Ok(c) } else { c.numbered(numbers) }
                                });
                                let msg = match fed {
                                    Ok(fed) => Message::Chunk(fed),
                                    Err(error) => break Message::Failed { error, busy, bytes },
                                };
                                if full_tx.send(msg).is_err() {
                                    break 'inputs;
                                }
                            }
                            Err(error) => break Message::Failed { error, busy, bytes },
                        }
                    };
                    if full_tx.send(msg).is_err() {
                        break;
                    }
                }
                (spare, free_rx)
            })
            .map_err(|e| Error::io("<reader thread>", e))?;
        let mut stopped = Ok(());
        for (k, &producers) in producers.iter().enumerate() {
            let t = Instant::now();
            let mut stats = EngineStats::default();
            let mut ring = Ring {
                full: &full_rx,
                free: &free_tx,
                waited: Duration::ZERO,
                ended: None,
                producers,
            };
            // A mapped input's frames are read (by the finder, from the map) before their
            // clusters are visited: a read that found the file's pages gone (zeros in their
            // place) has marked the map by then, and no frame's clusters from then on are
            // handed on.
            let map = mapped[k].as_ref();
            let faulted = |n: u64| match map {
                Some(m) if m.map.faulted() => Err(map_fault(m, n)),
                _ => Ok(()),
            };
            let mut last = 0u64;
            let result = begin(&mut *finder, k)
                .and_then(|()| {
                    consume(
                        finder,
                        &mut ring,
                        &mut |n, fc| {
                            last = n;
                            faulted(n)?;
                            visit(k, n, fc)
                        },
                        &mut stats,
                    )
                })
                .and_then(|()| faulted(last));
            if result.is_err() {
                abandoned.store(k, std::sync::atomic::Ordering::Relaxed);
            }
            // Whatever of the input the finder did not take is given back unread.
            let (busy, bytes, read) = ring.drain();
            let result = result.and(read);
            stats.read_busy = busy;
            stats.read_bytes = bytes;
            stats.wall = t.elapsed();
            if k == 0 {
                stats.alloc = alloc;
            }
            if let Err(e) = end(&mut *finder, k, result.map(|()| stats)) {
                stopped = Err(e);
                break;
            }
        }
        // Let a reader blocked on either channel see the end (entries already given back stay
        // in the free channel's buffer).
        drop(full_rx);
        drop(free_tx);
        let (spare, free_rx) = reader
            .join()
            .map_err(|_| Error::Internal("the reader thread panicked".into()))?;
        // Every entry back in the ring: keep it for the next run.
        let mut back: Vec<Box<dyn FrameStore>> = spare.flatten().into_iter().collect();
        back.extend(free_rx.try_iter().flatten());
        if back.len() == config.slots {
            *slots = Some(RingSlots {
                stores: back,
                samples: slot_len,
                alloc: Duration::ZERO,
            });
        }
        stopped
    })
}

/// What the errors of a mapped input that shrank add: how to avoid the map.
const SHRANK_HINT: &str = "; nothing of this input is kept (another program truncated it: \
                           --input read reads a file that may change instead of mapping it)";

/// The error of a mapped input whose map read zeros where the file lost pages (another
/// program truncated it while it was read: [`crate::io::GuardedMap::faulted`]), found when
/// frame `number`'s clusters were about to be handed on.
fn map_fault(m: &MappedFrames, number: u64) -> Error {
    Error::format(
        &m.path,
        format!(
            "the file shrank while it was mapped: a read of it found pages gone, by frame {number}{SHRANK_HINT}"
        ),
    )
}

/// The finder's side of one input of [`find_streams`]: full slots lent to the finder through
/// `ring`, clusters out, slots back as soon as the finder no longer reads them.
fn consume(
    finder: &mut dyn ClusterFinder,
    ring: &mut Ring<'_>,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
    stats: &mut EngineStats,
) -> Result<()> {
    let (mut visiting, mut frames) = (Duration::ZERO, 0u64);
    let t = Instant::now();
    // The ring's chunks carry the source's frame numbers: the finder names every frame (and
    // a frame that overflowed) by them.
    let result = finder.find_feed(ring, &mut |fc| {
        let v = Instant::now();
        frames += 1;
        let r = visit(fc.frame as u64, fc);
        visiting += v.elapsed();
        r
    });
    stats.waited_for_input += ring.waited;
    stats.find += t.elapsed().saturating_sub(ring.waited);
    stats.visit += visiting;
    stats.frames += frames;
    result
}

/// The engine's ring as a [`FrameFeed`] of one input: full slots from the reader, given back
/// to it, up to the input's end marker.
struct Ring<'a> {
    full: &'a std::sync::mpsc::Receiver<Message>,
    free: &'a std::sync::mpsc::SyncSender<Option<Box<dyn FrameStore>>>,
    /// Time spent waiting for the reader.
    waited: Duration,
    /// The input's end marker once received: its reading time and bytes, and its error.
    ended: Option<(Duration, u64, Option<Error>)>,
    /// Threads the reader fills slots with for this input (0 for a mapped one).
    producers: usize,
}

impl Ring<'_> {
    /// The next message of this input; `None` after its end marker (or when the reader
    /// stopped).
    fn receive(&mut self) -> Option<Message> {
        if self.ended.is_some() {
            return None;
        }
        let t = Instant::now();
        let msg = self.full.recv();
        self.waited += t.elapsed();
        match msg {
            Ok(Message::End { busy, bytes }) => {
                self.ended = Some((busy, bytes, None));
                Some(Message::End { busy, bytes })
            }
            Ok(msg) => Some(msg),
            Err(_) => {
                self.ended = Some((Duration::ZERO, 0, None));
                None
            }
        }
    }

    /// Gives back every chunk of the input the finder did not take, up to its end marker;
    /// the input's read time, bytes and error (a reading error the finder did not see).
    fn drain(&mut self) -> (Duration, u64, Result<()>) {
        loop {
            match self.receive() {
                Some(Message::Chunk(c)) => {
                    let _ = self.free.send(c.into_chunk().into_store());
                }
                Some(Message::Failed { error, busy, bytes }) => {
                    self.ended = Some((busy, bytes, Some(error)));
                }
                Some(Message::End { .. }) | None => break,
            }
        }
        match self.ended.take() {
            Some((busy, bytes, error)) => (busy, bytes, error.map_or(Ok(()), Err)),
            None => (Duration::ZERO, 0, Ok(())),
        }
    }
}

impl FrameFeed for Ring<'_> {
    fn next_chunk(&mut self) -> Result<Option<FedChunk>> {
        match self.receive() {
            Some(Message::Chunk(chunk)) => Ok(Some(chunk)),
            Some(Message::Failed { error, busy, bytes }) => {
                // The finder gets the error; the marker records that it was seen.
                self.ended = Some((busy, bytes, None));
                Err(error)
            }
            Some(Message::End { .. }) | None => Ok(None),
        }
    }

    fn producer_threads(&self) -> usize {
        self.producers
    }

    fn give_back(&mut self, chunk: FedChunk) {
        // The reader may have stopped (end of input): the slot is simply dropped then. A
        // mapped chunk is unpinned here; its entry lets the reader map the next one.
        let _ = self.free.send(chunk.into_chunk().into_store());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSize;
    use crate::config::FinderConfig;
    use crate::finder::CpuFinder;
    use crate::frames::Frames;
    use crate::generate::{GenConfig, Generator};
    use crate::io::MemorySource;

    fn finder(rows: usize, cols: usize, dark: &[u16]) -> CpuFinder {
        let config = FinderConfig::new(rows, cols)
            .size(ClusterSize::S3)
            .pedestal_frames(50);
        let mut f = CpuFinder::new(config).expect("finder");
        f.push_pedestal(Frames::new(dark, 50, rows, cols).expect("dark"))
            .expect("pedestal");
        f
    }

    /// What one `find_each` over the first `n` frames of `data` gives: each frame's index
    /// (its number) and its clusters' words.
    fn one_call(
        rows: usize,
        cols: usize,
        dark: &[u16],
        data: &[u16],
        n: usize,
    ) -> Vec<(u64, Vec<u32>)> {
        let mut want = Vec::new();
        finder(rows, cols, dark)
            .find_each(
                Frames::new(&data[..n * rows * cols], n, rows, cols).expect("frames"),
                &mut |fc| {
                    want.push((fc.frame as u64, fc.words().to_vec()));
                    Ok(())
                },
            )
            .expect("one call");
        want
    }

    /// The engine delivers exactly what one `find_each` over all frames delivers, for chunk
    /// sizes that do and do not divide the frame count, with the source's frame numbers.
    #[test]
    fn streams_the_same_clusters_as_one_call() {
        let (rows, cols) = (24, 40);
        let g = Generator::new(GenConfig::new(rows, cols, 5)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data = g.frames(50, 23, true);
        let want = one_call(rows, cols, &dark, &data, 23);
        for (chunk, slots) in [(1, 2), (4, 3), (23, 2), (64, 5)] {
            let mut f = finder(rows, cols, &dark);
            let mut src = MemorySource::new(data.clone(), rows, cols).expect("source");
            let mut got = Vec::new();
            let stats = find_stream(
                &mut f,
                &mut src,
                EngineConfig {
                    chunk,
                    slots,
                    map: false,
                },
                &mut |n, fc| {
                    got.push((n, fc.words().to_vec()));
                    Ok(())
                },
            )
            .expect("stream");
            assert_eq!(stats.frames, 23);
            assert_eq!(stats.read_bytes, (23 * rows * cols * 2) as u64);
            assert!(got == want, "chunk {chunk}, slots {slots}");
        }
    }

    /// Slots allocated ahead are used (no allocation in the engine); slots of another size
    /// are replaced; either way the clusters are those of one call.
    #[test]
    fn slots_allocated_ahead_give_the_same_clusters() {
        let (rows, cols) = (24, 40);
        let g = Generator::new(GenConfig::new(rows, cols, 6)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data = g.frames(50, 19, true);
        let want: Vec<Vec<u32>> = one_call(rows, cols, &dark, &data, 19)
            .into_iter()
            .map(|(_, words)| words)
            .collect();
        let cfg = EngineConfig {
            chunk: 4,
            slots: 3,
            map: false,
        };
        for ahead_chunk in [4, 7] {
            let mut f = finder(rows, cols, &dark);
            let ahead = EngineConfig {
                chunk: ahead_chunk,
                ..cfg
            };
            let slots = RingSlots::allocate(&f, ahead).expect("slots");
            let mut src = MemorySource::new(data.clone(), rows, cols).expect("source");
            let mut got = Vec::new();
            let mut slots = Some(slots);
            find_stream_with(&mut f, &mut src, cfg, &mut slots, &mut |_, fc| {
                got.push(fc.words().to_vec());
                Ok(())
            })
            .expect("stream");
            assert!(got == want, "slots of {ahead_chunk} frames");
            // The ring is kept for the next run (one of the run's size).
            let kept = slots.expect("the ring is kept");
            assert_eq!(kept.samples, cfg.chunk * rows * cols);
            assert_eq!(kept.stores.len(), cfg.slots);
        }
    }

    /// A visitor's error stops the run and comes back unchanged; the reader thread ends.
    #[test]
    fn a_visitor_error_stops_the_run() {
        let (rows, cols) = (16, 16);
        let g = Generator::new(GenConfig::new(rows, cols, 9)).expect("generator");
        let dark = g.frames(0, 50, false);
        let mut f = finder(rows, cols, &dark);
        let mut src = MemorySource::new(g.frames(50, 40, true), rows, cols).expect("source");
        let mut seen = 0;
        let e = find_stream(
            &mut f,
            &mut src,
            EngineConfig {
                chunk: 3,
                slots: 2,
                map: false,
            },
            &mut |n, _| {
                seen += 1;
                if n == 7 {
                    return Err(Error::param("visitor", "stop at frame 7"));
                }
                Ok(())
            },
        )
        .expect_err("the visitor fails");
        assert!(e.to_string().contains("stop at frame 7"), "{e}");
        assert_eq!(seen, 8);
    }

    /// Frames in memory numbered 100, 102, 104, ... (gaps, as a raw file with lost frames
    /// has), at most 3 per read (slots filled in part).
    struct Offset(MemorySource);

    impl FrameSource for Offset {
        fn rows(&self) -> usize {
            self.0.rows()
        }
        fn cols(&self) -> usize {
            self.0.cols()
        }
        fn remaining_hint(&self) -> u64 {
            self.0.remaining_hint()
        }
        fn read_frames(
            &mut self,
            n: usize,
            frames: &mut Vec<u16>,
            numbers: &mut Vec<u64>,
        ) -> Result<usize> {
            let from = numbers.len();
            let k = self.0.read_frames(n.min(3), frames, numbers)?;
            numbers[from..].iter_mut().for_each(|x| *x = 100 + 2 * *x);
            Ok(k)
        }
    }

    /// A finder that holds two chunks at a time (as a GPU pipeline does) and reports an
    /// overflow at stream index `at`, after visiting the frames before it; it names frames by
    /// their chunks' numbers, as the finders do.
    struct Overflowing {
        inner: CpuFinder,
        at: usize,
    }

    impl ClusterFinder for Overflowing {
        fn config(&self) -> &crate::config::FinderConfig {
            self.inner.config()
        }
        fn device(&self) -> String {
            "test".into()
        }
        fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()> {
            self.inner.push_pedestal(frames)
        }
        fn is_ready(&self) -> bool {
            self.inner.is_ready()
        }
        fn pedestal(&self) -> Result<crate::Pedestal> {
            self.inner.pedestal()
        }
        fn set_pedestal(&mut self, p: crate::Pedestal) -> Result<()> {
            self.inner.set_pedestal(p)
        }
        fn find_each(
            &mut self,
            frames: Frames<'_>,
            visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
        ) -> Result<()> {
            self.inner.find_each(frames, visit)
        }
        fn find_feed(
            &mut self,
            feed: &mut dyn FrameFeed,
            visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
        ) -> Result<()> {
            let mut held: std::collections::VecDeque<FedChunk> = Default::default();
            let mut index = 0;
            while let Some(chunk) = feed.next_chunk()? {
                held.push_back(chunk);
                if held.len() == 2 {
                    let c = held.pop_front().expect("held");
                    let numbers: Vec<usize> = (0..c.frames()).map(|k| c.number(k, index)).collect();
                    feed.give_back(c);
                    for number in numbers {
                        if index == self.at {
                            while let Some(c) = held.pop_front() {
                                feed.give_back(c);
                            }
                            return Err(Error::ClusterLimit {
                                frame: number,
                                found: 9,
                                limit: 1,
                            });
                        }
                        visit(FrameClusters::new(number, ClusterSize::S3, &[]))?;
                        index += 1;
                    }
                }
            }
            held.into_iter().for_each(|c| feed.give_back(c));
            Ok(())
        }
    }

    /// The engine's chunks carry the source's frame numbers: a finder holding several slots
    /// names an overflowing frame, and hands the visitor each frame, by the source's number,
    /// through chunks filled in part.
    #[test]
    fn an_overflow_is_named_by_the_source_frame_number() {
        let (rows, cols) = (16, 16);
        let g = Generator::new(GenConfig::new(rows, cols, 9)).expect("generator");
        let dark = g.frames(0, 50, false);
        for at in [0, 2, 3, 7] {
            let mut f = Overflowing {
                inner: finder(rows, cols, &dark),
                at,
            };
            let data = g.frames(50, 12, true);
            let mut src = Offset(MemorySource::new(data, rows, cols).expect("source"));
            let mut seen = Vec::new();
            let cfg = EngineConfig {
                chunk: 5,
                slots: 3,
                map: false,
            };
            let e = find_stream(&mut f, &mut src, cfg, &mut |n, _| {
                seen.push(n);
                Ok(())
            })
            .expect_err("overflow");
            match e {
                Error::ClusterLimit { frame, .. } => assert_eq!(frame, 100 + 2 * at, "{e}"),
                e => panic!("expected ClusterLimit, got {e}"),
            }
            assert!(
                seen.iter().copied().eq((0..at as u64).map(|i| 100 + 2 * i)),
                "{seen:?}"
            );
        }
    }

    /// Absurd settings and a frame shape the finder was not made for are refused by name.
    #[test]
    fn bad_settings_are_refused() {
        let (rows, cols) = (16, 16);
        let g = Generator::new(GenConfig::new(rows, cols, 9)).expect("generator");
        let dark = g.frames(0, 50, false);
        let mut f = finder(rows, cols, &dark);
        let cases = [
            (
                EngineConfig {
                    chunk: 0,
                    slots: 2,
                    map: false,
                },
                "chunk",
            ),
            (
                EngineConfig {
                    chunk: 1,
                    slots: 1,
                    map: false,
                },
                "slots",
            ),
            (
                EngineConfig {
                    chunk: usize::MAX / 4,
                    slots: 2,
                    map: false,
                },
                "chunk",
            ),
        ];
        for (cfg, name) in cases {
            let mut src = MemorySource::new(g.frames(50, 2, true), rows, cols).expect("src");
            let e = find_stream(&mut f, &mut src, cfg, &mut |_, _| Ok(())).expect_err(name);
            assert!(e.to_string().contains(name), "{e}");
        }
        let mut other = MemorySource::new(vec![0; 2 * 8 * 16], 8, 16).expect("src");
        let e = find_stream(
            &mut f,
            &mut other,
            EngineConfig {
                chunk: 1,
                slots: 2,
                map: false,
            },
            &mut |_, _| Ok(()),
        )
        .expect_err("shape");
        assert!(e.to_string().contains("8 x 16"), "{e}");
    }

    /// A `.npy` file through the engine, read in place and mapped, gives what one call over
    /// its frames gives, with its frame numbers, for chunks that do and do not divide it.
    #[test]
    fn a_npy_file_read_or_mapped_gives_the_same_clusters() {
        let (rows, cols) = (20, 36);
        let g = Generator::new(GenConfig::new(rows, cols, 11)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data = g.frames(50, 17, true);
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("d.npy");
        crate::io::npy::write_u16_3d(&path, 17, rows, cols, &data).expect("write");
        let want = one_call(rows, cols, &dark, &data, 17);
        for map in [false, true] {
            for chunk in [1, 5, 17, 40] {
                let mut f = finder(rows, cols, &dark);
                let mut src = crate::io::NpyFrames::open(&path).expect("open");
                let mut got = Vec::new();
                let cfg = EngineConfig {
                    chunk,
                    slots: 2,
                    map,
                };
                find_stream(&mut f, &mut src, cfg, &mut |n, fc| {
                    got.push((n, fc.words().to_vec()));
                    Ok(())
                })
                .expect("stream");
                assert!(got == want, "map {map}, chunk {chunk}");
                assert_eq!(src.remaining(), 0);
            }
        }
    }

    /// A source that fails with an I/O error after `ok` frames.
    struct FailsAfter {
        inner: MemorySource,
        ok: usize,
        read: usize,
    }

    impl FrameSource for FailsAfter {
        fn rows(&self) -> usize {
            self.inner.rows()
        }
        fn cols(&self) -> usize {
            self.inner.cols()
        }
        fn remaining_hint(&self) -> u64 {
            self.inner.remaining_hint()
        }
        fn read_frames(
            &mut self,
            n: usize,
            frames: &mut Vec<u16>,
            numbers: &mut Vec<u64>,
        ) -> Result<usize> {
            if self.read >= self.ok {
                return Err(Error::format("bad.npy", "truncated at frame 5"));
            }
            let k = self
                .inner
                .read_frames(n.min(self.ok - self.read), frames, numbers)?;
            self.read += k;
            Ok(k)
        }
    }

    /// Several inputs through one ring: each input's clusters are those of a run over it
    /// alone when `begin` resets the pedestal; a failing input in the middle ends with its
    /// error after the frames before it, and the inputs after it still run; the ring is kept.
    #[test]
    fn several_inputs_each_as_if_alone_and_a_failure_stays_with_its_input() {
        let (rows, cols) = (20, 28);
        let g = Generator::new(GenConfig::new(rows, cols, 13)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data: Vec<Vec<u16>> = (0..4)
            .map(|i| g.frames(50 + 30 * i, 11 + i as usize, true))
            .collect();
        let alone = |d: &[u16], n: usize| one_call(rows, cols, &dark, d, n);
        for (chunk, slots) in [(1, 2), (4, 3), (16, 2)] {
            let mut f = finder(rows, cols, &dark);
            let start = f.pedestal().expect("pedestal");
            let mut sources: Vec<Box<dyn FrameSource + Send>> = data
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let src = MemorySource::new(d.clone(), rows, cols).expect("source");
                    if i == 1 {
                        Box::new(FailsAfter {
                            inner: src,
                            ok: 5,
                            read: 0,
                        }) as Box<dyn FrameSource + Send>
                    } else {
                        Box::new(src)
                    }
                })
                .collect();
            let mut refs: Vec<&mut (dyn FrameSource + Send)> = Vec::new();
            for s in sources.iter_mut() {
                refs.push(&mut **s);
            }
            let cfg = EngineConfig {
                chunk,
                slots,
                map: false,
            };
            let mut ring = None;
            let mut got: Vec<Vec<(u64, Vec<u32>)>> = vec![Vec::new(); 4];
            let mut ended: Vec<Option<std::result::Result<u64, String>>> = vec![None; 4];
            find_streams(
                &mut f,
                &mut refs,
                cfg,
                &mut ring,
                &mut |f, _| f.set_pedestal(start.clone()),
                &mut |k, n, fc| {
                    got[k].push((n, fc.words().to_vec()));
                    Ok(())
                },
                &mut |_, k, r| {
                    ended[k] = Some(r.map(|s| s.frames).map_err(|e| e.to_string()));
                    Ok(())
                },
            )
            .expect("run");
            for k in [0, 2, 3] {
                assert_eq!(
                    ended[k],
                    Some(Ok(data[k].len() as u64 / (rows * cols) as u64))
                );
                assert!(
                    got[k] == alone(&data[k], data[k].len() / (rows * cols)),
                    "input {k}, chunk {chunk}"
                );
            }
            match &ended[1] {
                Some(Err(e)) => assert!(e.contains("truncated at frame 5"), "{e}"),
                other => panic!("input 1 should fail, got {other:?}"),
            }
            let first5 = alone(&data[1][..5 * rows * cols], 5);
            assert!(
                got[1] == first5,
                "the failing input's frames before the error, chunk {chunk}"
            );
            assert!(ring.is_some(), "the ring is kept");
        }
    }

    #[test]
    fn a_kept_ring_is_reused_between_runs() {
        let (rows, cols) = (24, 40);
        let g = Generator::new(GenConfig::new(rows, cols, 8)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data = g.frames(50, 30, true);
        let want = one_call(rows, cols, &dark, &data, 30);
        let cfg = EngineConfig {
            chunk: 4,
            slots: 3,
            map: false,
        };
        let px = rows * cols;
        let mut f = finder(rows, cols, &dark);
        let mut ring = None;
        let mut got = Vec::new();
        let mut first_ptrs = Vec::new();
        // Frames 0..10, then 10..30, through one kept ring.
        for (from, to) in [(0, 10), (10, 30)] {
            let mut src = SliceSource::new(&data[from * px..to * px], rows, cols).expect("src");
            find_stream_reusing(&mut f, &mut src, cfg, &mut ring, &mut |n, fc| {
                got.push((n + from as u64, fc.words().to_vec()));
                Ok(())
            })
            .expect("stream");
            let slots = ring.as_ref().expect("the ring came back");
            assert_eq!(slots.stores.len(), 3);
            let mut ptrs: Vec<usize> = slots
                .stores
                .iter()
                .map(|s| s.samples().as_ptr() as usize)
                .collect();
            ptrs.sort_unstable();
            if first_ptrs.is_empty() {
                first_ptrs = ptrs;
            } else {
                assert_eq!(ptrs, first_ptrs, "the same slots, not new ones");
            }
        }
        assert!(got == want);
        // A visitor error: the ring may be lost; the next run still works.
        let mut f = finder(rows, cols, &dark);
        let mut src = SliceSource::new(&data, rows, cols).expect("src");
        let e = find_stream_reusing(&mut f, &mut src, cfg, &mut ring, &mut |_, fc| {
            if fc.frame == 5 {
                Err(Error::param("visitor", "stop"))
            } else {
                Ok(())
            }
        });
        assert!(e.is_err());
        let mut f = finder(rows, cols, &dark);
        let mut src = SliceSource::new(&data, rows, cols).expect("src");
        let mut again = Vec::new();
        find_stream_reusing(&mut f, &mut src, cfg, &mut ring, &mut |n, fc| {
            again.push((n, fc.words().to_vec()));
            Ok(())
        })
        .expect("stream after an error");
        assert!(again == want);
        assert!(ring.is_some());
    }
}
