//! A generator-like frame source for long streaming runs, and the process's resident memory.
//!
//! [`PoolSource`] makes a pool of distinct MOENCH-like frames once (the generator) and hands
//! them out cyclically, as many as asked, numbered from 0: each chunk is copied into the
//! engine's slot in parallel (rayon), as a generator source fills it, but at memory speed, so
//! a run of a million frames measures the engine, not the generator.

use cluda::Result;
use cluda::generate::{GenConfig, Generator};
use cluda::io::FrameSource;
use rayon::prelude::*;

/// Frames of a pool, cycled (see the module docs).
pub struct PoolSource {
    pool: Vec<u16>,
    pool_frames: usize,
    rows: usize,
    cols: usize,
    total: u64,
    next: u64,
}

impl PoolSource {
    /// `total` frames of `rows x cols` from a pool of `pool_frames` frames with photons, made
    /// by the generator (seed `seed`) from frame `first` on.
    pub fn new(
        rows: usize,
        cols: usize,
        seed: u64,
        first: u64,
        pool_frames: usize,
        total: u64,
    ) -> Self {
        let g = Generator::new(GenConfig::new(rows, cols, seed)).expect("generator");
        Self {
            pool: g.frames(first, pool_frames, true),
            pool_frames,
            rows,
            cols,
            total,
            next: 0,
        }
    }

    /// Copies the next `k` frames into `dst` in parallel.
    fn copy_into(&self, dst: &mut [u16]) {
        let px = self.rows * self.cols;
        let next = self.next;
        dst.par_chunks_mut(px).enumerate().for_each(|(i, f)| {
            let j = ((next + i as u64) % self.pool_frames as u64) as usize;
            f.copy_from_slice(&self.pool[j * px..(j + 1) * px]);
        });
    }
}

impl FrameSource for PoolSource {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn remaining_hint(&self) -> u64 {
        self.total - self.next
    }

    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let k = (n as u64).min(self.total - self.next) as usize;
        let at = frames.len();
        frames.resize(at + k * self.rows * self.cols, 0);
        self.copy_into(&mut frames[at..]);
        numbers.extend(self.next..self.next + k as u64);
        self.next += k as u64;
        Ok(k)
    }

    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let px = self.rows * self.cols;
        let k = ((dst.len() / px) as u64).min(self.total - self.next) as usize;
        self.copy_into(&mut dst[..k * px]);
        numbers.extend(self.next..self.next + k as u64);
        self.next += k as u64;
        Ok(k)
    }
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
