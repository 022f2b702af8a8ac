//! The CPU reference finder: exact semantics, SIMD across neighbouring pixels, one band of rows
//! per thread.
//!
//! Each frame is one pass over bands of rows (one band per thread; with one thread everything
//! runs on the calling thread). A band walks its rows top to bottom and, for row `y`:
//! 1. *prepares* row `y + r` (r = side / 2): corrected values `c` into a ring of `side`
//!    zero-padded rows, and for that row the running window maximum and window sum along the row
//!    (`hmax`, `hsum`: `side` values each) and the row's largest `|c|`;
//! 2. *classifies* row `y` [`LANES`] pixels at a time: the window maximum is the maximum of the
//!    `side` `hmax` values above and below (maxima do not depend on the order); the lanes are
//!    compared with their thresholds at once, giving bit masks; only pixels with
//!    `c >= -t` and `max <= t` need the window sum (see below), and only centres (rare) take the
//!    scalar path that writes their records;
//! 3. *updates* row `y`'s pedestal at once (branch-free select over the lanes): its `c` was
//!    computed when it was prepared, and the rows below it that still need the old state are
//!    prepared already, so the update is frame-synchronous as the definition requires.
//!
//! The window sum must be the row-major sum from the top-left, rounded at every addition. It is
//! computed exactly that way whenever it can change the outcome; elsewhere the separable sum
//! (sum of the `hsum` values) decides, with a rigorous error bound (see `sum_margin`). This
//! pays off from 3x3 on: 3 loads and adds per pixel instead of 9. The outcome is therefore bit-identical to the definition for every pixel.
//!
//! Zero padding is exact: an out-of-frame neighbour adds `+0` to a sum (no change) and a `0`
//! in a maximum can only matter when every in-frame value is negative, where the pixel is
//! classified "pedestal" either way because thresholds are never negative.
//!
//! With several bands, the rows a band reads from its neighbours (`r` above, `r` below) are
//! copies of their pedestal state before the frame, so every band updates its own rows in place
//! without waiting. Each band keeps its thread for the whole call, in step with the others frame
//! by frame (module `band_threads`; a fork-join per frame cost about a third of the time on 2
//! cores). Bands are concatenated in order, so results do not depend on the thread count.
//!
//! Modules, one job each: this one holds the public [`CpuFinder`] and splits a call into bands;
//! `band` runs one band through one frame (step 1 and the row loop), `classify` classifies a
//! row (steps 2 and 3), `record` writes the records of centres, `lanes` holds the operations on
//! [`LANES`] values (`x86`: their AVX-512 and AVX2 intrinsics), `dispatch` picks the build of
//! the band kernel for the CPU, and `band_threads` runs several bands in step on a thread pool.

use cluda_gpu::classify::threshold;

use crate::cluster::FrameClusters;
use crate::config::{FinderConfig, ThresholdMode};
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::frames::Frames;
use crate::pedestal::{Pedestal, PixelMaps, ReadyState};

use band::{Band, Setup};
use dispatch::band_pass;
use isa::Isa;
use lanes::Unit;

mod band;
mod band_threads;
mod classify;
mod dispatch;
mod isa;
mod lanes;
mod record;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod feed_tests;

pub use isa::LANES;

/// The CPU reference finder.
pub struct CpuFinder {
    config: FinderConfig,
    pedestal: Pedestal,
    /// Worker threads; `None` for one thread (everything runs on the calling thread).
    pool: Option<rayon::ThreadPool>,
    threads: usize,
}

/// The most worker threads a CPU finder takes: 4 x the available parallelism, at most 1024.
/// More threads than cores only adds switching; thousands of them look like a hang (a million
/// were started one by one until the process was stopped).
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_mul(4).min(1024)
}

impl CpuFinder {
    /// A finder using every available core.
    pub fn new(config: FinderConfig) -> Result<Self> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self::with_threads(config, threads)
    }

    /// A finder using exactly `threads` worker threads (1: single-threaded).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`threads`) outside 1 ..= [`max_threads`]; as
    /// [`FinderConfig::validate`] and [`Pedestal::new`].
    pub fn with_threads(config: FinderConfig, threads: usize) -> Result<Self> {
        config.validate()?;
        let max = max_threads();
        if threads == 0 || threads > max {
            return Err(Error::param(
                "threads",
                format!(
                    "must be between 1 and {max} (4 x the {} available cores, at most 1024), got {threads}",
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ),
            ));
        }
        let pool = if threads == 1 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("cluda-cpu-{i}"))
                    .build()
                    .map_err(|e| {
                        Error::param("threads", format!("cannot start {threads} threads: {e}"))
                    })?,
            )
        };
        let pedestal = Pedestal::new(
            config.rows,
            config.cols,
            config.pedestal_frames,
            config.precision,
        )?;
        Ok(Self {
            config,
            pedestal,
            pool,
            threads,
        })
    }

    /// Worker threads in use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The pedestal, borrowed.
    pub fn pedestal_ref(&self) -> &Pedestal {
        &self.pedestal
    }
}

impl ClusterFinder for CpuFinder {
    fn config(&self) -> &FinderConfig {
        &self.config
    }

    fn device(&self) -> String {
        "cpu".into()
    }

    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()> {
        let pedestal = &mut self.pedestal;
        match &self.pool {
            Some(pool) => pool.install(|| pedestal.push_frames(frames)),
            None => pedestal.push_frames_with(frames, false),
        }
    }

    fn is_ready(&self) -> bool {
        self.pedestal.is_ready()
    }

    fn pedestal(&self) -> Result<Pedestal> {
        Ok(self.pedestal.clone())
    }

    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()> {
        pedestal.check_fits(&self.config)?;
        self.pedestal = pedestal;
        Ok(())
    }

    fn reset_pedestal(&mut self, pedestal: &Pedestal) -> Result<()> {
        pedestal.check_fits(&self.config)?;
        self.pedestal.clone_from(pedestal);
        Ok(())
    }

    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        self.find_with(frames, self.threads, visit)
    }
}

impl CpuFinder {
    /// Finds the clusters of every frame `feed` lends, one [`ClusterFinder::find_each`] per
    /// chunk (the frames named by their chunk's numbers), with one band thread fewer per
    /// thread the feed keeps busy producing chunks
    /// ([`crate::finder::feed::FrameFeed::producer_threads`], at least one band left): the
    /// engine's `find_feed` for this finder. The bands run in step frame by frame, so a band
    /// that shares its core with a reader thread holds back every other band for as long as
    /// the reader has the core; leaving the readers their cores costs a band's share
    /// instead.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`] (for each chunk), and the feed's errors.
    pub fn find_feed(
        &mut self,
        feed: &mut dyn crate::finder::feed::FrameFeed,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        let threads = self.threads.saturating_sub(feed.producer_threads()).max(1);
        let (rows, cols) = (self.config.rows, self.config.cols);
        crate::finder::feed::each_chunk(feed, rows, cols, visit, &mut |frames, visit| {
            self.find_with(frames, threads, visit)
        })
    }

    /// [`ClusterFinder::find_each`] with at most `threads` bands.
    fn find_with(
        &mut self,
        frames: Frames<'_>,
        threads: usize,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()> {
        frames.expect_shape(self.config.rows, self.config.cols, "data frames")?;
        let config = &self.config;
        let pool = self.pool.as_ref();
        match self.pedestal.ready_mut()? {
            ReadyState::F64(m) => run_sized(config, pool, threads, m, frames, visit),
            ReadyState::F32(m) => run_sized(config, pool, threads, m, frames, visit),
        }
    }
}

fn run_sized<R: Unit>(
    config: &FinderConfig,
    pool: Option<&rayon::ThreadPool>,
    threads: usize,
    maps: &mut PixelMaps<R>,
    frames: Frames<'_>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    match config.size.side() {
        3 => run::<R, 3>(config, pool, threads, maps, frames, visit),
        5 => run::<R, 5>(config, pool, threads, maps, frames, visit),
        7 => run::<R, 7>(config, pool, threads, maps, frames, visit),
        _ => run::<R, 9>(config, pool, threads, maps, frames, visit),
    }
}

/// One call over `frames` with at most `threads` bands (the pool's threads at most).
fn run<R: Unit, const S: usize>(
    config: &FinderConfig,
    pool: Option<&rayon::ThreadPool>,
    threads: usize,
    maps: &mut PixelMaps<R>,
    frames: Frames<'_>,
    visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
) -> Result<()> {
    let (rows, cols) = (config.rows, config.cols);
    let r = S / 2;
    let w = cols.div_ceil(LANES) * LANES;
    let setup = Setup {
        rows,
        cols,
        w,
        stride: w + 2 * r,
        n_sigma: R::from_f64(config.n_sigma),
        live: config.threshold == ThresholdMode::Live,
        base_zero: maps.base.iter().all(|b| b.to_f64().to_bits() == 0),
    };
    // Frozen thresholds do not change during the call: computed once.
    let frozen_t: Vec<R> = if setup.live {
        Vec::new()
    } else {
        maps.frozen_std
            .iter()
            .map(|&s| threshold(setup.n_sigma, s))
            .collect()
    };
    let threads = pool.map_or(1, |p| p.current_num_threads().min(threads));
    let (n_bands, band_rows) = band_split(rows, r, threads);
    let isa = Isa::detect();
    if let (Some(pool), true) = (pool, n_bands > 1) {
        let job = Job {
            isa,
            setup: &setup,
            frozen_t: &frozen_t,
            frames,
            size: config.size,
        };
        return band_threads::run_bands::<R, S>(pool, &job, n_bands, band_rows, maps, visit);
    }
    let band = &mut Band::new::<S>(0, rows, &setup);
    for i in 0..frames.len() {
        band_pass::<R, S>(isa, &setup, band, &frozen_t, frames.frame(i), maps);
        visit(FrameClusters::new(frames.number(i), config.size, &band.out))?;
    }
    Ok(())
}

/// Bands and rows per band for `threads` threads: every band but the last has at least `r`
/// rows, so a band's halo (`r` rows above and below) lies in its two neighbours.
fn band_split(rows: usize, r: usize, threads: usize) -> (usize, usize) {
    let n = threads.min(rows / r.max(1)).max(1);
    let band_rows = rows.div_ceil(n);
    (rows.div_ceil(band_rows), band_rows)
}

/// What every band of a call shares.
struct Job<'a, R> {
    isa: Isa,
    setup: &'a Setup<R>,
    frozen_t: &'a [R],
    frames: Frames<'a>,
    size: crate::cluster::ClusterSize,
}
