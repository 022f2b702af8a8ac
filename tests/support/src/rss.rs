//! The process's resident memory (RSS), sampled along a long stream to show it stays flat.
//!
//! Shared by the long-run tests (`tests/engine_memory.rs`, `tests/long_runs.rs`).

use cluda::engine::{EngineConfig, EngineStats, FedFinder, find_stream};
use cluda::io::FrameSource;

/// What [`RssTrack::stream`] saw of a stream.
pub struct Streamed {
    /// The engine's statistics.
    pub stats: EngineStats,
    /// Frames visited.
    pub seen: u64,
    /// Clusters found in them.
    pub clusters: u64,
    /// The last frame number visited.
    pub last: Option<u64>,
}

/// Resident memory of this process in MiB (Linux: /proc/self/statm).
pub fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("resident pages in /proc/self/statm");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64;
    pages * page / (1024.0 * 1024.0)
}

/// Resident memory sampled along a stream: at frame `warm` (the baseline), the peak after
/// it, and at the end.
pub struct RssTrack {
    warm_at: u64,
    every: u64,
    /// RSS at the baseline frame.
    pub warm: Option<f64>,
    /// Highest RSS sampled after the baseline.
    pub peak: f64,
}

impl RssTrack {
    /// Baseline after `warm_at` frames, then a sample every `every` frames.
    pub fn new(warm_at: u64, every: u64) -> Self {
        Self {
            warm_at,
            every: every.max(1),
            warm: None,
            peak: 0.0,
        }
    }

    /// Called once per frame with the frames seen so far.
    pub fn frame(&mut self, seen: u64) {
        if seen == self.warm_at || (seen > self.warm_at && seen.is_multiple_of(self.every)) {
            let now = rss_mib();
            self.warm.get_or_insert(now);
            self.peak = self.peak.max(now);
        }
    }

    /// Streams all of `source` through `finder` with the engine sized for `rows x cols`
    /// frames, checking that the frames arrive in order and sampling resident memory after
    /// each ([`RssTrack::frame`]).
    pub fn stream(
        &mut self,
        finder: &mut dyn FedFinder,
        source: &mut (dyn FrameSource + Send),
        (rows, cols): (usize, usize),
    ) -> cluda::Result<Streamed> {
        let (mut seen, mut clusters, mut last) = (0u64, 0u64, None);
        let stats = find_stream(
            finder,
            source,
            EngineConfig::for_frames(rows, cols),
            &mut |number, fc| {
                assert_eq!(number, seen, "frames arrive in order");
                seen += 1;
                clusters += fc.len() as u64;
                self.frame(seen);
                last = Some(number);
                Ok(())
            },
        )?;
        Ok(Streamed {
            stats,
            seen,
            clusters,
            last,
        })
    }

    /// Prints `what frames=... rss_warm_mib=... rss_peak_mib=... rss_final_mib=...` and
    /// asserts that the RSS at the end and at its peak stayed within `slack_mib` of the
    /// baseline.
    pub fn check(&self, what: &str, frames: u64, clusters: u64, slack_mib: f64) {
        let fin = rss_mib();
        let warm = self.warm.expect("the run reached its baseline frame");
        let peak = self.peak.max(fin);
        println!(
            "{what} frames={frames} clusters={clusters} rss_warm_mib={warm:.1} rss_peak_mib={peak:.1} rss_final_mib={fin:.1}"
        );
        assert!(clusters > 0, "{what}: no clusters");
        assert!(
            fin <= warm + slack_mib && peak <= warm + slack_mib,
            "{what}: resident memory grew from {warm:.1} MiB at frame {} to {fin:.1} MiB at the end (peak {peak:.1}); allowed {slack_mib} MiB",
            self.warm_at
        );
    }
}
