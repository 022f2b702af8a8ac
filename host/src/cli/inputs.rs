//! Generated frames as a [`cluda::io::FrameSource`] (files are opened by
//! [`cluda::engine::input::Input`]), and the checks of frame dimensions given on the command
//! line.

use cluda::engine::input::Input;
use cluda::generate::Generator;
use cluda::io::FrameSource;
use cluda::{Error, Result};
use rayon::prelude::*;

use super::signals;

/// Frames `first .. first + count` of a generator, made a chunk at a time in parallel and
/// numbered from 0: on threads of its own once [`FrameSource::set_read_threads`] gave their
/// number (a run gives what the finder asks for, [`cluda::ClusterFinder::read_threads`]:
/// every core up to 16 for the GPU, 2 for the CPU finder, which leaves them their cores),
/// else on rayon's global pool. The streaming engine's reader thread then runs ahead of the
/// finder by up to the ring's slots, and its busy time is the generator's.
pub struct Generated<'g> {
    generator: &'g Generator,
    first: u64,
    count: usize,
    next: usize,
    photons: bool,
    /// The generator's own threads; `None`: rayon's global pool.
    pool: Option<rayon::ThreadPool>,
}

impl<'g> Generated<'g> {
    /// Frames `first .. first + count`; `photons: false` gives dark (pedestal) frames.
    pub fn new(generator: &'g Generator, first: u64, count: usize, photons: bool) -> Self {
        Self {
            generator,
            first,
            count,
            next: 0,
            photons,
            pool: None,
        }
    }

    /// Frames `first .. first + n` into `dst` (whole frames), in parallel on the generator's
    /// threads.
    /// A termination signal stops it within a frame's 2^20 pixels.
    fn make(&self, first: u64, dst: &mut [u16]) -> Result<()> {
        let pixels = (self.rows() * self.cols()).max(1);
        let (generator, photons) = (self.generator, self.photons);
        let mut work = move || {
            dst.par_chunks_mut(pixels)
                .enumerate()
                .try_for_each(|(i, f)| {
                    generator.frame_into_with_cancel(first + i as u64, photons, f, &signals::check)
                })
        };
        match &self.pool {
            Some(pool) => pool.install(work),
            None => work(),
        }
    }

    /// As an [`Input`] called `generated <what> frames`.
    pub fn input(self, what: &str) -> Input<'g> {
        Input {
            describe: format!("generated {what} frames"),
            len: self.count as u64,
            frames: Box::new(self),
        }
    }
}

impl FrameSource for Generated<'_> {
    fn rows(&self) -> usize {
        self.generator.config().rows
    }
    fn cols(&self) -> usize {
        self.generator.config().cols
    }
    fn remaining_hint(&self) -> u64 {
        (self.count - self.next) as u64
    }
    fn read_frames(
        &mut self,
        max_frames: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let n = max_frames.min(self.count - self.next);
        let pixels = self.rows() * self.cols();
        let start = frames.len();
        frames.resize(start + n * pixels, 0);
        self.make(self.first + self.next as u64, &mut frames[start..])?;
        numbers.extend((self.next..self.next + n).map(|i| i as u64));
        self.next += n;
        Ok(n)
    }
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let pixels = (self.rows() * self.cols()).max(1);
        let n = (dst.len() / pixels).min(self.count - self.next);
        self.make(self.first + self.next as u64, &mut dst[..n * pixels])?;
        numbers.extend((self.next..self.next + n).map(|i| i as u64));
        self.next += n;
        Ok(n)
    }

    /// Generates on `threads` threads of its own from now on (rayon's global pool if they
    /// cannot be started).
    fn set_read_threads(&mut self, threads: usize) {
        self.pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("cluda-gen-{i}"))
            .build()
            .ok();
    }

    fn read_threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
    }
}

/// Checks frame dimensions given on the command line: 1 ..= 65536 (cluster coordinates are
/// u16), and a frame stack of `frames` of them must be addressable.
pub fn check_dims(rows: usize, cols: usize, frames: usize) -> Result<()> {
    for (name, v) in [("rows", rows), ("cols", cols)] {
        if v == 0 || v > 65536 {
            return Err(Error::param(
                if name == "rows" { "rows" } else { "cols" },
                format!("must be between 1 and 65536, got {v}"),
            ));
        }
    }
    rows.checked_mul(cols)
        .and_then(|p| p.checked_mul(frames))
        .and_then(|n| n.checked_mul(2))
        .ok_or_else(|| {
            Error::param(
                "frames",
                format!("{frames} frames of {rows} x {cols} are too many to address"),
            )
        })?;
    Ok(())
}
