//! A generator-like frame source: a pool of distinct frames handed out cyclically.
//!
//! [`PoolSource`] hands out the frames of a pool over and over, as many as asked, numbered
//! from 0, so a run of a million frames (or an endless replay) measures the engine or the
//! stream, not the generator. Shared by the long-run tests (`tests/engine_memory.rs`,
//! `tests/long_runs.rs`) and the stream bench (`benches/stream/`), so all of them cycle
//! frames the same way.

use std::sync::Arc;

use cluda::Result;
use cluda::generate::{GenConfig, Generator};
use cluda::io::FrameSource;
use rayon::prelude::*;

/// Frames of a pool, cycled (see the module docs).
pub struct PoolSource {
    /// Whole frames, shared (a bench replays the same pool many times, from other threads).
    pool: Arc<Vec<u16>>,
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
        Self::from_pool(
            Arc::new(g.frames(first, pool_frames, true)),
            rows,
            cols,
            total,
        )
    }

    /// `total` frames of `rows x cols` cycling `pool`, which holds whole frames (at least
    /// one).
    ///
    /// # Panics
    /// When `pool` holds no whole frame.
    pub fn from_pool(pool: Arc<Vec<u16>>, rows: usize, cols: usize, total: u64) -> Self {
        let pool_frames = pool.len() / (rows * cols).max(1);
        assert!(
            pool_frames > 0,
            "a pool of at least one {rows} x {cols} frame"
        );
        Self {
            pool,
            pool_frames,
            rows,
            cols,
            total,
            next: 0,
        }
    }

    /// The pool's frame that stream frame `n` is.
    fn pool_frame(&self, n: u64) -> &[u16] {
        let px = self.rows * self.cols;
        let j = (n % self.pool_frames as u64) as usize;
        &self.pool[j * px..(j + 1) * px]
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

    /// Appends the next frames on the calling thread: a replay's publisher reads this way,
    /// and must not take the rayon pool from the finder it feeds in the same process.
    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let k = (n as u64).min(self.total - self.next) as usize;
        for i in 0..k as u64 {
            frames.extend_from_slice(self.pool_frame(self.next + i));
            numbers.push(self.next + i);
        }
        self.next += k as u64;
        Ok(k)
    }

    /// Copies the next frames into the engine's slot in parallel (rayon), as a generator
    /// source fills it, but at memory speed.
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let px = self.rows * self.cols;
        let k = ((dst.len() / px) as u64).min(self.total - self.next) as usize;
        let next = self.next;
        let this = &*self;
        dst[..k * px]
            .par_chunks_mut(px)
            .enumerate()
            .for_each(|(i, f)| f.copy_from_slice(this.pool_frame(next + i as u64)));
        numbers.extend(self.next..self.next + k as u64);
        self.next += k as u64;
        Ok(k)
    }
}
