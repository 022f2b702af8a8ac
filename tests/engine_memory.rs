//! The streaming engine keeps memory flat: 150,000 small frames through
//! `engine::find_stream` with the CPU finder and a generator-like source, resident memory
//! after 15,000 frames against the end (a few seconds; the GPU's million-frame version is in
//! `long_runs.rs`). Its own test target, so no other test's allocations share the process.

use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterFinder, CpuFinder, FinderConfig, Frames};
use support::pool_source::PoolSource;
use support::rss::RssTrack;

#[test]
fn cpu_engine_streams_150k_frames_with_flat_memory() {
    let (rows, cols, dark) = (32, 48, 100usize);
    let total = 150_000u64;
    let g = Generator::new(GenConfig::new(rows, cols, 77)).expect("generator");
    let config = FinderConfig::new(rows, cols).pedestal_frames(dark as u32);
    let mut finder = CpuFinder::with_threads(config, 1).expect("finder");
    finder
        .push_pedestal(Frames::new(&g.frames(0, dark, false), dark, rows, cols).expect("dark"))
        .expect("pedestal");
    let mut source = PoolSource::new(rows, cols, 77, dark as u64, 500, total);
    let mut rss = RssTrack::new(total / 10, 5_000);
    let s = rss
        .stream(&mut finder, &mut source, (rows, cols))
        .expect("stream");
    assert_eq!(
        (s.stats.frames, s.seen, s.last),
        (total, total, Some(total - 1))
    );
    rss.check("cpu engine", total, s.clusters, 2.0);
}
