//! The streaming engine behind `cluda find`, `cluda demo` and long library runs: a source
//! feeding a finder feeding a sink, all three overlapped, with bounded memory.
//!
//! ```text
//!  reader thread                 calling thread                    writer thread
//!  FrameSource::fill  --full-->  ClusterFinder::find_each  --bytes-->  WriteBehind
//!        ^                 slots       |  visit(frame number, clusters)        |
//!        +--------free slots-----------+                          buffers back -+
//! ```
//!
//! A fixed ring of `slots` frame buffers circulates between the reader thread and the
//! finder: the reader fills a free slot with the next chunk of frames (straight from the
//! file into the slot: one copy on the host), the finder takes full slots in order and gives
//! each back once its clusters have been visited. The slots are whatever the finder reads
//! fastest ([`ClusterFinder::frame_store`]): page-locked memory for the GPU finder, so uploads
//! run at DMA speed with no per-call registration; plain memory for the CPU finder. When the
//! finder is slower than the source, the reader waits for a free slot; when the source is
//! slower, the finder waits for a full one. Either way at most `slots` chunks exist.
//!
//! The cluster sink is the caller's visitor; a cluster file written through
//! [`write_behind::WriteBehind`] leaves the calling thread after a memcpy of each frame's
//! records, so writing overlaps finding too.

pub mod write_behind;

use std::time::{Duration, Instant};

use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::frames::Frames;
use crate::io::FrameSource;

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

/// Threads that read one chunk of a file at once: one per core, at most 16 (copying from the
/// page cache is bound by memory bandwidth, which one core cannot use up).
pub fn read_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 16)
}

/// Read threads for a finder that computes on the host's own cores (the CPU finder): 2. It
/// is about 20 times slower than reading, so two threads keep it fed, and every further one
/// takes a core its band threads need (on the H200's 16 cores, 16 read threads slowed the
/// 3x3 CPU run from 99 to 145 us/frame).
pub const HOST_FINDER_READ_THREADS: usize = 2;

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
    /// them into the ring.
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

/// Where a chunk's frames are.
enum Chunk {
    /// A slot of the ring, filled by the reader; it goes back to the reader afterwards.
    Slot(Box<dyn FrameStore>),
    /// A piece of a mapped file, page-locked while the guard lives (or not at all).
    Mapped {
        /// Dropped first (fields drop in order): unlocked before the map can go.
        _pin: Option<Box<dyn Send>>,
        map: std::sync::Arc<memmap2::Mmap>,
        range: std::ops::Range<usize>,
    },
}

impl Chunk {
    fn samples(&self) -> &[u16] {
        match self {
            Chunk::Slot(s) => s.samples(),
            Chunk::Mapped { map, range, .. } => bytemuck::cast_slice(&map[range.clone()]),
        }
    }
}

/// A chunk on its way from the reader to the finder.
struct Filled {
    chunk: Chunk,
    frames: usize,
    numbers: Vec<u64>,
}

/// Finds the clusters of every frame `source` delivers with `finder`, reading ahead on a
/// thread of its own (see the module docs), and hands each frame's clusters with the
/// source's frame number to `visit`, in order.
///
/// # Errors
/// The first error of the source, the finder or the visitor; the reader thread stops with
/// it. Frames before the failing chunk stay consumed (their pedestal updates are kept), as
/// with [`ClusterFinder::find_each`].
pub fn find_stream(
    finder: &mut dyn ClusterFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    find_stream_with(finder, source, config, None, visit)
}

/// As [`find_stream`], with the ring's slots allocated ahead ([`RingSlots::allocate`], e.g. on
/// the thread that opened the device while the pedestal was pushed); `None`, or slots that do
/// not fit `config`, and they are allocated here ([`EngineStats::alloc`] counts only that).
///
/// # Errors
/// As [`find_stream`].
pub fn find_stream_with(
    finder: &mut dyn ClusterFinder,
    source: &mut (dyn FrameSource + Send),
    config: EngineConfig,
    slots: Option<RingSlots>,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
) -> Result<EngineStats> {
    let (rows, cols) = (source.rows(), source.cols());
    let want = (finder.config().rows, finder.config().cols);
    if (rows, cols) != want {
        return Err(Error::shape(
            "frames",
            format!("{} x {} frames (the finder's)", want.0, want.1),
            format!("{rows} x {cols} frames"),
        ));
    }
    config.validate(rows, cols)?;
    let pixels = rows * cols;
    let slot_len = config.chunk * pixels;
    let start = Instant::now();
    let mapped = if config.map { source.map_rest() } else { None };
    let mut given = slots
        .filter(|s| s.samples == slot_len)
        .map_or_else(Vec::new, |s| s.stores);
    let mut stores = Vec::with_capacity(config.slots);
    for _ in 0..config.slots {
        stores.push(match (&mapped, given.pop()) {
            // Tokens only: the chunks are pieces of the map.
            (Some(_), _) => None,
            (None, Some(slot)) => Some(slot),
            (None, None) => Some(finder.frame_store(slot_len)?),
        });
    }
    drop(given);
    let mut stats = EngineStats {
        alloc: start.elapsed(),
        ..EngineStats::default()
    };
    // The data phase starts once the ring is there (its allocation is set-up, like opening
    // the device, and is reported on its own).
    let start = Instant::now();
    let (free_tx, free_rx) =
        std::sync::mpsc::sync_channel::<Option<Box<dyn FrameStore>>>(config.slots);
    let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Result<Filled>>(config.slots);
    for s in stores {
        // The channel holds every slot: this cannot block or fail.
        let _ = free_tx.send(s);
    }
    let pin = mapped.as_ref().and_then(|_| finder.host_pinner());
    let read = std::thread::scope(|scope| -> Result<(Duration, u64)> {
        let reader = std::thread::Builder::new()
            .name("cluda-reader".into())
            .spawn_scoped(scope, move || {
                let (mut busy, mut bytes) = (Duration::ZERO, 0u64);
                let mut next_mapped = 0usize;
                while let Ok(store) = free_rx.recv() {
                    let t = Instant::now();
                    let mut numbers = Vec::with_capacity(config.chunk);
                    let got = match (store, &mapped) {
                        (Some(mut store), _) => source
                            .fill(&mut store.samples_mut()[..slot_len], &mut numbers)
                            .map(|k| (k, Chunk::Slot(store))),
                        (None, Some(m)) => {
                            let k = config.chunk.min(m.frames - next_mapped);
                            let from = m.offset + next_mapped * pixels * 2;
                            let range = from..from + k * pixels * 2;
                            let first = m.first_number + next_mapped as u64;
                            numbers.extend(first..first + k as u64);
                            next_mapped += k;
                            let guard = match (k, &pin) {
                                (0, _) | (_, None) => None,
                                (_, Some(pin)) => pin(m.map[range.clone()].as_ptr(), range.len()),
                            };
                            Ok((
                                k,
                                Chunk::Mapped {
                                    _pin: guard,
                                    map: m.map.clone(),
                                    range,
                                },
                            ))
                        }
                        (None, None) => Ok((0, Chunk::Slot(Box::new(Vec::new())))),
                    };
                    busy += t.elapsed();
                    let msg = match got {
                        Ok((0, _)) => break,
                        Ok((k, chunk)) => {
                            bytes += (k * pixels * 2) as u64;
                            Ok(Filled {
                                chunk,
                                frames: k,
                                numbers,
                            })
                        }
                        Err(e) => Err(e),
                    };
                    let failed = msg.is_err();
                    if full_tx.send(msg).is_err() || failed {
                        break;
                    }
                }
                (busy, bytes)
            })
            .map_err(|e| Error::io("<reader thread>", e))?;
        let result = consume(finder, &full_rx, &free_tx, pixels, visit, &mut stats);
        // Let a reader blocked on either channel see the end.
        drop(full_rx);
        drop(free_tx);
        let read = reader
            .join()
            .map_err(|_| Error::param("reader", "the reader thread panicked"))?;
        result.map(|()| read)
    })?;
    stats.read_busy = read.0;
    stats.read_bytes = read.1;
    stats.wall = start.elapsed();
    Ok(stats)
}

/// The finder's side of [`find_stream`]: full slots in, clusters out, slots back.
fn consume(
    finder: &mut dyn ClusterFinder,
    full: &std::sync::mpsc::Receiver<Result<Filled>>,
    free: &std::sync::mpsc::SyncSender<Option<Box<dyn FrameStore>>>,
    pixels: usize,
    visit: &mut dyn FnMut(u64, FrameClusters<'_>) -> Result<()>,
    stats: &mut EngineStats,
) -> Result<()> {
    let (rows, cols) = (finder.config().rows, finder.config().cols);
    loop {
        let t = Instant::now();
        let Ok(msg) = full.recv() else {
            return Ok(());
        };
        stats.waited_for_input += t.elapsed();
        let filled = msg?;
        let k = filled.frames;
        let samples = &filled.chunk.samples()[..k * pixels];
        let t = Instant::now();
        let mut visiting = Duration::ZERO;
        let numbers = &filled.numbers;
        finder.find_each(Frames::new(samples, k, rows, cols)?, &mut |fc| {
            let v = Instant::now();
            let number = numbers.get(fc.frame).copied().unwrap_or(fc.frame as u64);
            let r = visit(number, fc);
            visiting += v.elapsed();
            r
        })?;
        stats.find += t.elapsed();
        stats.visit += visiting;
        stats.frames += k as u64;
        // The reader may have stopped (end of input): the slot is simply dropped then. A
        // mapped chunk is unpinned here; its token lets the reader map the next one.
        let back = match filled.chunk {
            Chunk::Slot(s) => Some(s),
            Chunk::Mapped { .. } => None,
        };
        let _ = free.send(back);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSize;
    use crate::config::FinderConfig;
    use crate::finder::CpuFinder;
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

    /// The engine delivers exactly what one `find_each` over all frames delivers, for chunk
    /// sizes that do and do not divide the frame count, with the source's frame numbers.
    #[test]
    fn streams_the_same_clusters_as_one_call() {
        let (rows, cols) = (24, 40);
        let g = Generator::new(GenConfig::new(rows, cols, 5)).expect("generator");
        let dark = g.frames(0, 50, false);
        let data = g.frames(50, 23, true);
        let mut want = Vec::new();
        finder(rows, cols, &dark)
            .find_each(
                Frames::new(&data, 23, rows, cols).expect("frames"),
                &mut |fc| {
                    want.push((fc.frame as u64, fc.words().to_vec()));
                    Ok(())
                },
            )
            .expect("find");
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
        let mut want = Vec::new();
        finder(rows, cols, &dark)
            .find_each(
                Frames::new(&data, 19, rows, cols).expect("frames"),
                &mut |fc| {
                    want.push(fc.words().to_vec());
                    Ok(())
                },
            )
            .expect("find");
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
            find_stream_with(&mut f, &mut src, cfg, Some(slots), &mut |_, fc| {
                got.push(fc.words().to_vec());
                Ok(())
            })
            .expect("stream");
            assert!(got == want, "slots of {ahead_chunk} frames");
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
        let mut want = Vec::new();
        finder(rows, cols, &dark)
            .find_each(
                Frames::new(&data, 17, rows, cols).expect("frames"),
                &mut |fc| {
                    want.push((fc.frame as u64, fc.words().to_vec()));
                    Ok(())
                },
            )
            .expect("find");
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
}
