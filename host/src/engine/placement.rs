//! Photons placed off the run's thread: an [`super::imaging::ImagingSink`] that places on the
//! host (a photon list, or an image the device does not count) copies each frame's packed
//! records into a batch and hands full batches to one worker thread, which places a batch's
//! clusters on a pool of threads, then counts them into the image and appends them to the
//! photon list in frame order. The run's thread only copies records (a frame of 3x3 clusters
//! is a few tens of kB), so placing (tens of ns per photon) neither slows a GPU finder's
//! pipeline nor adds to a CPU finder's time on its own thread.
//!
//! ```text
//!  run's thread              worker thread                      pool threads
//!  frame() -> batch --full--> split into pieces ---------------> place a piece
//!            ^                count pieces into the image  <---- (photons, sub-pixels, tally)
//!            +--empty batches-- append pieces to the list, in order
//! ```
//!
//! Everything the worker owns (the image being counted, the photon list being written to a
//! file or kept in memory, [`PhotonList`]) comes back when the input ends
//! ([`PlacementWorker::finish`]); an error of the worker (a photon file that cannot be
//! written, memory for kept rows that is not there) stops it and is returned by the next call.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rayon::prelude::*;

use crate::cluster::{ClusterSize, FrameClusters};
use crate::error::{Error, Result};
use crate::interpolation::files::PhotonWriter;
use crate::interpolation::{
    EnergyWindow, GainMap, Interpolator, Photon, PixelMask, PlacedRow, Placer, SubpixelImage, Tally,
};

/// Clusters per batch handed to the worker: large enough that splitting it over the pool
/// costs little against placing it, small enough that a few batches in flight are a few MB.
const BATCH_CLUSTERS: usize = 1 << 16;

/// Batches in flight (filled and not yet placed) before the run's thread waits.
const IN_FLIGHT: usize = 3;

/// What photons are placed with: the maps, and what flags a photon.
#[derive(Clone)]
pub struct PlacementRules {
    /// The maps.
    pub maps: Arc<Interpolator>,
    /// Photons outside it are flagged.
    pub window: Option<EnergyWindow>,
    /// Photons centred on a bad pixel are flagged.
    pub mask: Option<Arc<PixelMask>>,
    /// Pixel values are divided by it first (keV).
    pub gain: Option<Arc<GainMap>>,
}

impl PlacementRules {
    fn placer(&self) -> Placer<'_> {
        Placer {
            maps: &self.maps,
            window: self.window,
            mask: self.mask.as_deref(),
            gain: self.gain.as_deref(),
        }
    }
}

/// Where one input's photons go, row by row in frame order: the same rows either way.
pub enum PhotonList {
    /// Written to a structured `.npy` (finished by the caller).
    File(Box<PhotonWriter>),
    /// Kept in memory (e.g. handed to numpy by the Python package). It grows as rows come,
    /// fallibly ([`crate::memory::reserve`]): more rows than memory is an
    /// [`Error::TooLarge`], never an abort.
    Memory(Vec<Photon>),
}

impl PhotonList {
    /// Appends `rows`.
    ///
    /// # Errors
    /// The file's write error; [`Error::TooLarge`] when kept rows do not fit in memory.
    fn append(&mut self, rows: &[Photon]) -> Result<()> {
        match self {
            PhotonList::File(w) => w.write_pod(rows),
            PhotonList::Memory(v) => {
                crate::memory::reserve(v, rows.len(), || {
                    "the photon list kept in memory".to_string()
                })?;
                v.extend_from_slice(rows);
                Ok(())
            }
        }
    }
}

/// What one input's placement produced, handed back by [`PlacementWorker::finish`].
pub struct Placed {
    /// The image counted into (the one given to [`PlacementWorker::start`]).
    pub image: Option<SubpixelImage>,
    /// The photon list, every row appended (a file not yet finished).
    pub photons: Option<PhotonList>,
    /// What was placed and left out.
    pub tally: Tally,
}

/// Frames' packed records, or the rows the finder placed them at, in frame order, with their
/// frame numbers.
struct Batch {
    size: ClusterSize,
    words: Vec<u32>,
    /// The rows placed on the finder's device, one per cluster, when the frames came with
    /// them ([`FrameClusters::placed`]); `words` then stays empty.
    rows: Vec<PlacedRow>,
    /// `starts[i]..starts[i + 1]`: frame `i`'s clusters.
    starts: Vec<usize>,
    numbers: Vec<i64>,
    /// A copy of the image is asked for once this batch is counted.
    snapshot: bool,
}

impl Batch {
    fn new(size: ClusterSize) -> Self {
        Self {
            size,
            words: Vec::new(),
            rows: Vec::new(),
            starts: vec![0],
            numbers: Vec::new(),
            snapshot: false,
        }
    }

    fn clusters(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    fn clear(&mut self, size: ClusterSize) {
        self.size = size;
        self.words.clear();
        self.rows.clear();
        self.starts.clear();
        self.starts.push(0);
        self.numbers.clear();
        self.snapshot = false;
    }

    /// Whether the batch holds placed rows rather than records.
    fn placed(&self) -> bool {
        !self.rows.is_empty()
    }

    /// Adds a frame: its placed rows where it has them (nothing is left to place but the
    /// copy into the list), else its records.
    ///
    /// # Errors
    /// [`Error::Internal`] for a frame with rows in a batch of records, or the other way
    /// round (a finder places every frame of an input or none).
    fn push(&mut self, number: i64, clusters: &FrameClusters<'_>) -> Result<()> {
        self.size = clusters.size();
        match clusters.placed() {
            Some(rows) if self.words.is_empty() => self.rows.extend_from_slice(rows),
            None if !self.placed() => self.words.extend_from_slice(clusters.words()),
            _ if clusters.is_empty() => {}
            _ => {
                return Err(Error::Internal(format!(
                    "frame {}: placed rows and records mixed in one input",
                    clusters.frame
                )));
            }
        }
        let end = self.clusters() + clusters.len();
        self.starts.push(end);
        self.numbers.push(number);
        Ok(())
    }
}

/// One piece of a batch, placed on one pool thread: frames `frames` of the batch.
#[derive(Default)]
struct Piece {
    frames: std::ops::Range<usize>,
    photons: Vec<Photon>,
    indices: Vec<u32>,
    tally: Tally,
}

/// The worker's side: places batches and keeps the image and the photon list.
struct Worker {
    rules: PlacementRules,
    pool: rayon::ThreadPool,
    image: Option<SubpixelImage>,
    photons: Option<PhotonList>,
    tally: Tally,
    pieces: Vec<Piece>,
    /// Where a copy of the image asked for ([`PlacementWorker::snapshot`]) is left.
    snapshot: Snapshot,
}

/// The latest copy of the image being counted, left by the worker for the run's thread.
type Snapshot = Arc<Mutex<Option<SubpixelImage>>>;

impl Worker {
    fn run(mut self, full: Receiver<Batch>, empty: SyncSender<Batch>) -> Result<Placed> {
        for batch in full {
            self.place(&batch)?;
            if batch.snapshot
                && let Some(img) = &self.image
            {
                // Copied on this thread (a memcpy of the counts), off the run's.
                let copy = img.clone();
                if let Ok(mut s) = self.snapshot.lock() {
                    *s = Some(copy);
                }
            }
            // The run's thread may have ended: a batch not taken back is simply dropped.
            let _ = empty.try_send(batch);
        }
        if let Some(PhotonList::Memory(v)) = self.photons.as_mut() {
            // Only the rows are kept past the input (a shrinking reallocation does not copy
            // large blocks: they are remapped).
            v.shrink_to_fit();
        }
        Ok(Placed {
            image: self.image,
            photons: self.photons,
            tally: self.tally,
        })
    }

    /// Places a batch on the pool, then counts and writes its pieces in order.
    fn place(&mut self, batch: &Batch) -> Result<()> {
        let frames = batch.numbers.len();
        if frames == 0 {
            return Ok(());
        }
        // Pieces of about equal clusters, cut at frame boundaries.
        let threads = self.pool.current_num_threads().max(1);
        let per_piece = batch.clusters().div_ceil(threads * 2).max(1);
        let mut bounds = vec![0usize];
        for f in 1..frames {
            if batch.starts[f] - batch.starts[*bounds.last().unwrap_or(&0)] >= per_piece {
                bounds.push(f);
            }
        }
        bounds.push(frames);
        let count = bounds.len() - 1;
        self.pieces.resize_with(count, Piece::default);
        for (p, w) in self.pieces.iter_mut().zip(bounds.windows(2)) {
            p.frames = w[0]..w[1];
        }
        let keep = self.photons.is_some();
        let image = self.image.as_ref();
        let placer = self.rules.placer();
        self.pool.install(|| {
            self.pieces[..count]
                .par_iter_mut()
                .for_each(|p| place_piece(&placer, batch, image, keep, p));
        });
        for p in &self.pieces[..count] {
            if let Some(img) = self.image.as_mut() {
                img.add_indices(&p.indices);
            }
            if let Some(list) = self.photons.as_mut() {
                list.append(&p.photons)?;
            }
            self.tally.add(&p.tally);
        }
        Ok(())
    }
}

/// Places piece `p`'s frames of `batch`: its photons (when `keep`), the sub-pixel index of
/// each placed one inside `image`, and its tally.
fn place_piece(
    placer: &Placer<'_>,
    batch: &Batch,
    image: Option<&SubpixelImage>,
    keep: bool,
    p: &mut Piece,
) {
    p.photons.clear();
    p.indices.clear();
    p.tally = Tally::default();
    let take = |ph: Photon, p: &mut Piece| {
        p.tally.count(ph.flags);
        if ph.flags == 0
            && let Some(i) = image.and_then(|img| img.index_of(ph.x, ph.y))
        {
            // Below the image's length, which fits u32 (at most 12800^2 sub-pixels).
            p.indices.push(i as u32);
        }
        if keep {
            p.photons.push(ph);
        }
    };
    if batch.placed() {
        for f in p.frames.clone() {
            for r in &batch.rows[batch.starts[f]..batch.starts[f + 1]] {
                let ph = Photon {
                    frame: batch.numbers[f],
                    x: r.x,
                    y: r.y,
                    energy: r.energy,
                    // The FLAG_* bits: below 16.
                    flags: r.flags as u8,
                };
                take(ph, p);
            }
        }
        return;
    }
    let w = batch.size.record_words();
    for f in p.frames.clone() {
        let words = &batch.words[batch.starts[f] * w..batch.starts[f + 1] * w];
        let clusters = FrameClusters::new(crate::FrameNumber(f as u64), batch.size, words);
        let side = batch.size.side();
        for c in clusters.iter() {
            take(placer.place(batch.numbers[f], &c, side), p);
        }
    }
}

/// The run's side of one input's placement: fills batches and hands them to the worker.
pub struct PlacementWorker {
    batch: Option<Batch>,
    full: Option<SyncSender<Batch>>,
    empty: Receiver<Batch>,
    handle: Option<JoinHandle<Result<Placed>>>,
    snapshot: Snapshot,
}

impl PlacementWorker {
    /// Starts a worker placing with `rules` on `threads` pool threads, counting placed photons
    /// into `image` and appending every photon to `photons`, for one input.
    ///
    /// # Errors
    /// [`Error::Internal`] when a thread cannot be started.
    pub fn start(
        rules: PlacementRules,
        threads: usize,
        image: Option<SubpixelImage>,
        photons: Option<PhotonList>,
    ) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("cluda-place-{i}"))
            .build()
            .map_err(|e| Error::Internal(format!("starting the placement threads: {e}")))?;
        let (full_tx, full_rx) = sync_channel::<Batch>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Batch>(IN_FLIGHT + 1);
        let worker = Worker {
            rules,
            pool,
            image,
            photons,
            tally: Tally::default(),
            pieces: Vec::new(),
            snapshot: Snapshot::default(),
        };
        let snapshot = worker.snapshot.clone();
        let handle = std::thread::Builder::new()
            .name("cluda-placement".into())
            .spawn(move || worker.run(full_rx, empty_tx))
            .map_err(|e| Error::Internal(format!("starting the placement thread: {e}")))?;
        Ok(Self {
            batch: None,
            full: Some(full_tx),
            empty: empty_rx,
            handle: Some(handle),
            snapshot,
        })
    }

    /// Asks for a copy of the image counted so far: the batch being filled is handed over
    /// now (full or not, so the copy counts every frame added until now), and the worker
    /// leaves the copy for [`PlacementWorker::take_snapshot`] once it has counted it. Meant
    /// for a live view every second or so, not per frame: each request cuts a batch short.
    ///
    /// # Errors
    /// The worker's error (it stopped).
    pub fn snapshot(&mut self) -> Result<()> {
        let mut batch = match self.batch.take() {
            Some(b) => b,
            None => match self.empty.try_recv() {
                Ok(mut b) => {
                    b.clear(b.size);
                    b
                }
                Err(_) => Batch::new(ClusterSize::S3),
            },
        };
        batch.snapshot = true;
        self.batch = Some(batch);
        self.hand_over()
    }

    /// The latest copy of the image asked for by [`PlacementWorker::snapshot`] and not taken
    /// yet; `None` while the worker has not reached the request (or counts no image).
    pub fn take_snapshot(&self) -> Option<SubpixelImage> {
        self.snapshot.lock().ok().and_then(|mut s| s.take())
    }

    /// Adds frame `number`'s clusters; hands the batch over when it is full.
    ///
    /// # Errors
    /// The worker's error (it stopped).
    pub fn frame(&mut self, number: i64, clusters: &FrameClusters<'_>) -> Result<()> {
        let batch = match self.batch.as_mut() {
            Some(b) => b,
            None => {
                let mut b = self
                    .empty
                    .try_recv()
                    .unwrap_or_else(|_| Batch::new(clusters.size()));
                b.clear(clusters.size());
                self.batch.insert(b)
            }
        };
        batch.push(number, clusters)?;
        if batch.clusters() >= BATCH_CLUSTERS {
            self.hand_over()?;
        }
        Ok(())
    }

    fn hand_over(&mut self) -> Result<()> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        let sent = match self.full.as_ref() {
            Some(tx) => tx.send(batch).is_ok(),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            // The worker stopped: its error says why.
            match self.join() {
                Err(e) => Err(e),
                Ok(_) => Err(Error::Internal("the placement thread stopped early".into())),
            }
        }
    }

    fn join(&mut self) -> Result<Placed> {
        self.full = None;
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::Internal("the placement thread panicked".into()))?,
            None => Err(Error::Internal(
                "the placement thread was joined twice".into(),
            )),
        }
    }

    /// Places what is left and hands back the image, the photon list and the tally.
    ///
    /// # Errors
    /// The worker's error.
    pub fn finish(mut self) -> Result<Placed> {
        self.hand_over()?;
        self.join()
    }
}

impl Drop for PlacementWorker {
    /// An unfinished worker (its input failed) is stopped and what it held dropped: the
    /// photon list's temporary file is removed.
    fn drop(&mut self) {
        self.full = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Every core of the machine (at least 1).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Cores kept for placing beside a CPU finder on a machine with `cores` cores: one in ten,
/// none below 8 cores.
///
/// Placing costs about 70 ns of one core per photon (`benches/interp_step.rs`, 3x3, on a
/// 16-core GPU host), the CPU finder about 870 ns of core time per 3x3 cluster there (16
/// cores, 20,000 frames in about 0.1 s each 2,000): placing is about 8 % of finding, less for
/// larger clusters. The CPU finder's band threads step through the frames together, so placing
/// gets cores of its own rather than a share of theirs ([`crate::engine::sink::reserve_cores`]).
/// Below 8 cores one core less would cost the finder more than sharing does: placing then
/// runs beside it on one thread ([`threads_for`]).
pub fn cores_beside_cpu_finder(cores: usize) -> usize {
    if cores >= 8 { cores.div_ceil(10) } else { 0 }
}

/// Placement threads when the caller chose none: beside a CPU finder (`cpu_finder`) the cores
/// kept for placing ([`cores_beside_cpu_finder`]), at least one; beside a GPU finder, whose
/// host threads mostly wait, every core.
pub fn threads_for(cpu_finder: bool) -> usize {
    let cores = default_threads();
    if cpu_finder {
        cores_beside_cpu_finder(cores).max(1)
    } else {
        cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FrameNumber;
    use crate::cluster::pack_xy;
    use crate::interpolation::{CubeAxes, EtaKind, MapKind};

    /// Frames of 3x3 clusters on 40 x 40 pixels, values from a small generator (some eta
    /// outside the edges, some energies outside the window).
    fn frames() -> Vec<Vec<u32>> {
        let mut seed = 12345u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as i64
        };
        (0..7)
            .map(|f| {
                let mut words = Vec::new();
                for i in 0..(f * 13 % 40) {
                    words.push(pack_xy((i * 7 % 38 + 1) as u16, (i * 3 % 38 + 1) as u16));
                    for _ in 0..9 {
                        words.push((next() % 300 - 20) as i32 as u32);
                    }
                }
                words
            })
            .collect()
    }

    /// What a worker made of the frames, each handed with the rows the host placer gives them
    /// (as a finder's device hands them) or as records to place.
    fn run(rules: &PlacementRules, with_rows: bool) -> Placed {
        let image = SubpixelImage::new(40, 40, 4).unwrap();
        let mut w = PlacementWorker::start(
            rules.clone(),
            3,
            Some(image),
            Some(PhotonList::Memory(vec![])),
        )
        .unwrap();
        let placer = rules.placer();
        for (f, words) in frames().iter().enumerate() {
            let fc = FrameClusters::new(FrameNumber(100 + f as u64), ClusterSize::S3, words);
            let rows: Vec<PlacedRow> = fc
                .iter()
                .map(|c| {
                    let p = placer.place(0, &c, 3);
                    PlacedRow {
                        x: p.x,
                        y: p.y,
                        energy: p.energy,
                        flags: u32::from(p.flags),
                        pad: 0,
                    }
                })
                .collect();
            if with_rows {
                w.frame(100 + f as i64, &fc.with_placed(&rows).unwrap())
                    .unwrap();
            } else {
                w.frame(100 + f as i64, &fc).unwrap();
            }
        }
        w.finish().unwrap()
    }

    #[test]
    fn rows_placed_on_a_device_give_what_placing_on_the_host_gives() {
        let axes = CubeAxes::default_for(EtaKind::Eta2);
        let cube: Vec<f64> = (0..axes.bins().unwrap()).map(|i| (i % 5) as f64).collect();
        let rules = PlacementRules {
            maps: Arc::new(Interpolator::new(axes, &cube, MapKind::Cumulative).unwrap()),
            window: Some(EnergyWindow::new(50.0, 900.0).unwrap()),
            mask: None,
            gain: None,
        };
        let (host, device) = (run(&rules, false), run(&rules, true));
        let rows = |p: &Placed| match &p.photons {
            Some(PhotonList::Memory(v)) => v.clone(),
            _ => panic!("no rows kept"),
        };
        let (h, d) = (rows(&host), rows(&device));
        assert!(h.len() > 100, "{} photons", h.len());
        assert!(h.iter().any(|p| p.flags == 0) && h.iter().any(|p| p.flags != 0));
        assert_eq!(h, d, "the photon lists");
        let first = h[0].frame;
        assert_eq!(first, 101, "named by their frames' numbers");
        assert_eq!(host.tally, device.tally);
        assert!(host.image == device.image, "the images");
        assert!(host.image.as_ref().is_some_and(|i| i.total() > 0));
    }

    #[test]
    fn rows_that_do_not_match_the_clusters_are_refused() {
        let words = frames().swap_remove(3);
        let fc = FrameClusters::new(FrameNumber(3), ClusterSize::S3, &words);
        assert!(fc.len() > 1);
        let rows = vec![PlacedRow::default(); fc.len() - 1];
        assert!(fc.with_placed(&rows).is_err(), "one row per cluster");
        let mut batch = Batch::new(ClusterSize::S3);
        batch.push(3, &fc).unwrap();
        let rows = vec![PlacedRow::default(); fc.len()];
        let placed = fc.with_placed(&rows).unwrap();
        assert!(
            batch.push(4, &placed).is_err(),
            "rows after records in one input"
        );
    }

    #[test]
    fn placing_keeps_one_core_in_ten_from_eight_cores_on() {
        for (cores, kept) in [
            (1, 0),
            (2, 0),
            (7, 0),
            (8, 1),
            (10, 1),
            (11, 2),
            (16, 2),
            (64, 7),
        ] {
            assert_eq!(cores_beside_cpu_finder(cores), kept, "{cores} cores");
        }
        assert!(threads_for(true) >= 1);
        assert_eq!(threads_for(false), default_threads());
    }
}
