//! Long runs with flat memory (ignored by default; run with `--ignored`, in release):
//! 200,000 generated 400x400 frames through the CPU finder's streaming API, and 1,000,000 on
//! a CUDA GPU through the zero-copy collection path with pinned input, and 1,000,000 on a
//! CUDA GPU through the streaming engine (`engine::find_stream`, as `cluda find` runs: a
//! reader thread filling page-locked slots from a generator-like source), whose resident
//! memory after 100,000 frames and at the end must agree within 8 MiB. A pool of distinct
//! frames is generated once and cycled; resident memory (RSS, /proc/self/statm) is sampled
//! after every call and must stay flat after warm-up. Each test prints one summary line:
//! `frames=... clusters=... seconds=... rss_warm_mib=... rss_peak_mib=... rss_final_mib=...`.
//!
//! `CLUDA_LONG_FRAMES=N` shortens (or lengthens) a run, e.g. for a quick smoke test.

use std::time::Instant;

use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterFinder, CpuFinder, FinderConfig, FrameClusters, Frames, Precision};
use rayon::prelude::*;
use support::rss::rss_mib;

const ROWS: usize = 400;
const COLS: usize = 400;
const DARK: usize = 1000;
const POOL: usize = 2000;
/// Growth of resident memory after warm-up that still counts as flat.
const SLACK_MIB: f64 = 16.0;

/// `count` frames from frame `first` of a MOENCH-like generator, made in parallel.
fn generate(g: &Generator, first: u64, count: usize, photons: bool, out: &mut [u16]) {
    assert_eq!(out.len(), count * ROWS * COLS);
    out.par_chunks_mut(ROWS * COLS)
        .enumerate()
        .for_each(|(i, f)| g.frame_into(first + i as u64, photons, f));
}

/// `finder` with its pedestal window filled: the first `DARK` frames of `g`, without photons
/// (freed once pushed).
fn with_dark<F: ClusterFinder>(mut finder: F, g: &Generator) -> F {
    let mut dark = vec![0u16; DARK * ROWS * COLS];
    generate(g, 0, DARK, false, &mut dark);
    finder
        .push_pedestal(Frames::new(&dark, DARK, ROWS, COLS).unwrap())
        .unwrap();
    finder
}

/// Finds `total` frames through `find(found, visit)`, which finds the frames after the `found`
/// so far (visiting each frame's clusters with `visit`) and returns how many it found: the
/// clusters are counted and resident memory sampled ([`Rss`], warm after `warm_after` frames),
/// then the run is reported and its memory checked.
fn flat_memory(
    total: u64,
    warm_after: u64,
    mut find: impl FnMut(u64, &mut dyn FnMut(FrameClusters<'_>) -> cluda::Result<()>) -> usize,
) {
    let mut rss = Rss::new(warm_after);
    let (mut frames, mut clusters) = (0u64, 0u64);
    let start = Instant::now();
    while frames < total {
        let k = find(frames, &mut |fc| {
            clusters += fc.len() as u64;
            Ok(())
        });
        frames += k as u64;
        rss.sample(frames);
    }
    rss.finish(frames, clusters, start.elapsed().as_secs_f64());
}

fn frames_wanted(default: u64) -> u64 {
    std::env::var("CLUDA_LONG_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// RSS samples after warm-up.
struct Rss {
    warm_after: u64,
    warm: Option<f64>,
    peak: f64,
}

impl Rss {
    fn new(warm_after: u64) -> Self {
        Self {
            warm_after,
            warm: None,
            peak: 0.0,
        }
    }

    /// Samples after `frames` frames: the first sample at or past warm-up is the baseline.
    fn sample(&mut self, frames: u64) {
        if frames < self.warm_after {
            return;
        }
        let now = rss_mib();
        self.warm.get_or_insert(now);
        self.peak = self.peak.max(now);
    }

    /// Prints the summary line and asserts the memory stayed flat.
    fn finish(&self, frames: u64, clusters: u64, seconds: f64) {
        let fin = rss_mib();
        let warm = self.warm.expect("the run reached warm-up");
        println!(
            "frames={frames} clusters={clusters} seconds={seconds:.1} rss_warm_mib={warm:.1} rss_peak_mib={:.1} rss_final_mib={fin:.1}",
            self.peak.max(fin)
        );
        assert!(clusters > 0);
        assert!(
            fin <= warm + SLACK_MIB,
            "resident memory grew from {warm:.1} MiB after warm-up to {fin:.1} MiB"
        );
        assert!(
            self.peak <= warm + 2.0 * SLACK_MIB,
            "resident memory peaked at {:.1} MiB after {warm:.1} MiB at warm-up",
            self.peak
        );
    }
}

#[test]
#[ignore = "long: ~2 minutes on 2 cores in release"]
fn cpu_streams_200k_frames_with_flat_memory() {
    let total = frames_wanted(200_000);
    let g = Generator::new(GenConfig::new(ROWS, COLS, 2026)).unwrap();
    let mut pool = vec![0u16; POOL * ROWS * COLS];
    generate(&g, DARK as u64, POOL, true, &mut pool);

    let config = FinderConfig::new(ROWS, COLS).pedestal_frames(DARK as u32);
    let mut finder = with_dark(CpuFinder::new(config).unwrap(), &g);

    const CHUNK: usize = 250;
    flat_memory(total, 10_000, |frames, visit| {
        let at = (frames % POOL as u64) as usize;
        let k = CHUNK.min(POOL - at).min((total - frames) as usize);
        let chunk = &pool[at * ROWS * COLS..(at + k) * ROWS * COLS];
        let chunk = Frames::new(chunk, k, ROWS, COLS).unwrap();
        finder.find_each(chunk, visit).unwrap();
        k
    });
}

#[test]
#[ignore = "needs a CUDA GPU; long"]
fn gpu_zero_copy_1m_frames_with_flat_memory() {
    use cluda::cuda::Device;
    use cluda::finder::gpu::{Collect, GpuFinder, PinnedFrames};
    use support::ladder::LadderStep;

    let total = frames_wanted(1_000_000);
    let device = Device::open(0).unwrap();
    let step = LadderStep::Opt10;
    let pipeline = step.config();
    assert_eq!(pipeline.collect, Collect::ZeroCopy);
    let g = Generator::new(GenConfig::new(ROWS, COLS, 2026)).unwrap();
    let mut pinned = PinnedFrames::new(&device, POOL, ROWS, COLS).unwrap();
    generate(&g, DARK as u64, POOL, true, pinned.as_mut_slice());

    let config = FinderConfig::new(ROWS, COLS)
        .pedestal_frames(DARK as u32)
        .precision(step.precision());
    assert_eq!(step.precision(), Precision::F32);
    let mut finder = with_dark(GpuFinder::on_device(device, config, pipeline).unwrap(), &g);
    finder.reserve(POOL).unwrap();

    let pool = pinned.frames().unwrap();
    flat_memory(total, 50_000, |frames, visit| {
        let k = POOL.min((total - frames) as usize);
        finder.find_each(pool.range(0, k), visit).unwrap();
        k
    });
}

#[test]
#[ignore = "needs a CUDA GPU; long"]
fn gpu_engine_1m_frames_with_flat_memory() {
    use cluda::finder::gpu::GpuFinder;
    use support::pool_source::PoolSource;
    use support::rss::{RssTrack, Streamed};

    let total = frames_wanted(1_000_000);
    let g = Generator::new(GenConfig::new(ROWS, COLS, 2026)).unwrap();
    // The finder `cluda find --device gpu` opens: F64, the default pipeline (opt10).
    let config = FinderConfig::new(ROWS, COLS).pedestal_frames(DARK as u32);
    let mut finder = with_dark(GpuFinder::new(config).unwrap(), &g);
    let mut source = PoolSource::new(ROWS, COLS, 2026, DARK as u64, POOL, total);
    let mut rss = RssTrack::new((total / 10).min(100_000), 50_000);
    let start = Instant::now();
    let Streamed {
        stats,
        seen,
        clusters,
        ..
    } = rss.stream(&mut finder, &mut source, (ROWS, COLS)).unwrap();
    assert_eq!((stats.frames, seen), (total, total));
    println!(
        "seconds={:.1} us_per_frame={:.2}",
        start.elapsed().as_secs_f64(),
        stats.wall.as_secs_f64() * 1e6 / total as f64
    );
    rss.check("gpu engine", total, clusters, 8.0);
}
