//! The streaming engine behind `cluda find`, `cluda demo` and long library runs: a source
//! feeding a finder feeding a sink, all three overlapped, with bounded memory.
//!
//! ```text
//!  reader thread                 calling thread                    writer thread
//!  FrameSource::fill  --full-->  FedFinder::find_feed  --bytes-->  WriteBehind
//!        ^                 slots       |  visit(frame number, clusters)        |
//!        +--------free slots-----------+                          buffers back -+
//! ```
//!
//! A fixed ring of `slots` frame buffers circulates between the reader thread and the
//! finder: the reader fills a free slot with the next chunk of frames (straight from the
//! file into the slot: one copy on the host), the finder takes full slots in order and gives
//! each back once it no longer reads it (the CPU finder: after its clusters are visited).
//! How the engine feeds a finder is [`feeding::FedFinder`]'s: the slots are whatever the
//! finder reads fastest ([`FedFinder::frame_store`]): page-locked memory for the GPU
//! finder, so uploads run at DMA speed with no per-call registration; plain memory for the
//! CPU finder. When the finder is slower than the source, the reader waits for a free slot;
//! when the source is slower, the finder waits for a full one. Either way at most `slots`
//! chunks exist.
//!
//! The finder pulls the full slots itself ([`FedFinder::find_feed`], the ring being a
//! [`FrameFeed`]): a GPU finder keeps its pipeline going from one slot to the next
//! (the next slot's uploads are queued while the previous one's clusters are collected) and
//! gives each slot back once the GPU no longer reads it, before its clusters are visited.
//!
//! A run is assembled by a [`session::Session`] (a finder opened once, its pedestal, its ring
//! and settings; any [`FrameSource`] into any [`sink::Sink`]): `cluda find`, `cluda demo`,
//! the stream's acquisitions and the Python package all run through one.
//!
//! The cluster sink is the caller's visitor; a cluster file written through
//! [`crate::io::write_behind::WriteBehind`] leaves the calling thread after a memcpy of each frame's
//! records, so writing overlaps finding too.

pub mod feeding;
pub mod imaging;
pub mod input;
pub mod outputs;
pub mod paths;
pub mod placement;
pub mod plan;
pub mod report;
pub mod rows;
pub mod run;
pub mod session;
pub mod sink;
mod stats;

use std::time::{Duration, Instant};

use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::feed::{Chunk, ChunkNumbers, FedChunk, FrameFeed, FrameStore, LentMemory};
use crate::frame_number::FrameNumber;
use crate::io::{FrameSource, MappedFrames};
pub use feeding::{FedFinder, open_finder};
use sink::{FnSink, InputEvents, Sink, SinkEvents};
pub use stats::EngineStats;

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
    /// [`Error::InvalidParameter`] for a zero chunk, fewer than 2 slots, or a ring larger than
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

/// The slots of an engine's ring, allocated ahead of a run ([`find_stream_with`],
/// [`session::Session`]): page-locked memory on a GPU takes a noticeable part of a short
/// run's start-up, and can be allocated while the pedestal is read.
pub struct RingSlots {
    stores: Vec<Box<dyn FrameStore>>,
    /// Samples per slot.
    samples: usize,
    /// Time the allocation took.
    alloc: Duration,
}

impl RingSlots {
    /// The `config.slots` slots of `config.chunk` frames each that [`find_stream_with`] needs
    /// for `finder` ([`FedFinder::frame_store`]).
    ///
    /// # Errors
    /// As [`EngineConfig::validate`] and [`FedFinder::frame_store`].
    pub fn allocate(finder: &dyn FedFinder, config: EngineConfig) -> Result<Self> {
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
/// The finder pulls the ring's slots through [`FedFinder::find_feed`], so a GPU finder
/// does not wait for the GPU between slots.
///
/// # Errors
/// The first error of the source, the finder or the visitor; the reader thread stops with
/// it. What stays consumed (pedestal updates kept) is what [`FedFinder::find_feed`]
/// says: before an error of the source, every frame it delivered (all found and visited);
/// with a visitor error at a frame, the frames up to and including it; with
/// [`Error::ClusterLimit`] (a GPU finder with `Overflow::Fail`; the error names the source's
/// frame number), the frames before the slot that holds the overflowing frame: the
/// pedestal is as it was before that slot, though the visitor may have seen frames of it.
pub fn find_stream(
    finder: &mut dyn FedFinder,
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
/// slot came back: page-locked slots cost about 0.3 s to allocate on an H200. A finder that
/// runs the engine many times (the stream's acquisitions, the Python package's calls) is
/// better held by a [`session::Session`], which keeps its ring, its pedestal and its
/// settings; this and [`find_stream`] are the bare engine loop under it.
///
/// # Errors
/// As [`find_stream`].
pub fn find_stream_with(
    finder: &mut dyn FedFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    find_stream_into(
        finder,
        source,
        config,
        slots,
        &mut FnSink(|_, fc: &FrameClusters<'_>| visit(fc.frame.get(), *fc)),
    )
}

/// One input into `sink`, driven as every run drives a sink ([`SinkEvents`]: begin, its
/// frames, then end, or abandon when anything failed), through a ring kept in `slots` as in
/// [`find_stream_with`]: what [`session::Session::find_into`] runs.
///
/// # Errors
/// As [`find_stream`], and the sink's (after [`Sink::abandon`]).
fn find_stream_into(
    finder: &mut dyn FedFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    sink: &mut dyn Sink,
) -> Result<EngineStats> {
    let mut result = None;
    find_streams(
        finder,
        &mut [source],
        config,
        slots,
        &mut SinkEvents {
            sink,
            done: |_, r| {
                result = Some(r);
                Ok(())
            },
        },
    )?;
    result.unwrap_or_else(|| Err(Error::Internal("the engine ended no input".into())))
}

/// Several inputs through one finder and one ring, one after another, the reader running
/// ahead across their boundaries (the next input is read while the current one is found).
/// For input `k`, `events` hears [`InputEvents::begin`] before its first frame is asked for
/// (e.g. to reset the pedestal; an error there skips the input and is what `end` receives),
/// [`InputEvents::frame`] for each frame in order, then [`InputEvents::end`] with the
/// input's statistics or the error that stopped it (the source's, the finder's or the
/// events'). An error of one input does not stop the others; an error returned by `end`
/// stops the run and is returned. `slots` as in [`find_stream_with`]. What
/// [`session::Session::find_all`] runs.
///
/// # Errors
/// [`Error::Shape`] when a source's frames are not the finder's shape (before anything
/// runs), [`EngineConfig::validate`]'s, allocation errors, and `end`'s.
fn find_streams(
    finder: &mut dyn FedFinder,
    sources: &mut [&mut (dyn FrameSource + Send)],
    config: EngineConfig,
    slots: &mut Option<RingSlots>,
    events: &mut dyn InputEvents,
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
                                        Chunk::Lent(Box::new(MappedChunk {
                                            pin: guard,
                                            map: m.map.clone(),
                                            range,
                                            entry,
                                        })),
                                        ChunkNumbers::From(FrameNumber(first)),
                                    ))
                                }
                            }
                            (Some(mut store), None) => {
                                match source
                                    .fill(&mut store.samples_mut()[..slot_len], &mut numbers)
                                {
                                    // The source numbers every frame it delivers.
                                    Ok(k) => Ok((
                                        k,
                                        Chunk::Slot(store),
                                        ChunkNumbers::Listed(
                                            numbers.iter().map(|&n| FrameNumber(n)).collect(),
                                        ),
                                    )),
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
                            Ok((0, chunk, _)) => {
                                spare = Some(chunk.into_store());
                                break Message::End { busy, bytes };
                            }
                            Ok((k, chunk, numbers)) => {
                                bytes += (k * pixels * 2) as u64;
                                // A source that does not number each frame it delivers
                                // fails its input here, naming the count.
                                let msg = match FedChunk::of(chunk, k, pixels, numbers) {
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
            let result = events
                .begin(&mut *finder, k)
                .and_then(|()| {
                    consume(
                        finder,
                        &mut ring,
                        &mut |n, fc| {
                            last = n;
                            faulted(n)?;
                            events.frame(k, fc)
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
            if let Err(e) = events.end(&mut *finder, k, result.map(|()| stats)) {
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

/// A piece of a mapped file lent to the finder, page-locked while the guard lives (or not
/// at all), with the ring's entry it stands for (a slot or a token), which goes back to the
/// reader.
struct MappedChunk {
    /// The page lock: released before the map can go.
    pin: Option<Box<dyn Send>>,
    map: std::sync::Arc<crate::io::GuardedMap>,
    range: std::ops::Range<usize>,
    entry: Option<Box<dyn FrameStore>>,
}

impl LentMemory for MappedChunk {
    fn samples(&self) -> &[u16] {
        bytemuck::cast_slice(&self.map[self.range.clone()])
    }

    fn release(self: Box<Self>) -> Option<Box<dyn FrameStore>> {
        let MappedChunk {
            pin, map, entry, ..
        } = *self;
        // Unlocked before the map (maybe its last reference) goes.
        drop(pin);
        drop(map);
        entry
    }
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
    finder: &mut dyn FedFinder,
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
        let r = visit(fc.frame.get(), fc);
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
mod tests;

#[cfg(test)]
mod session_tests;
