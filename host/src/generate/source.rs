//! Generator frames as a [`FrameSource`]: what `cluda demo` finds and `cluda gen` writes,
//! made a chunk at a time in parallel straight into the engine's slots.

use rayon::prelude::*;

use super::Generator;
use crate::engine::input::{Cancel, Input, never_cancel};
use crate::error::Result;
use crate::io::FrameSource;

/// Frames `first .. first + count` of a generator, made a chunk at a time in parallel and
/// numbered from 0: on threads of its own once [`FrameSource::set_read_threads`] gave their
/// number (a run gives what the finder asks for, [`crate::engine::FedFinder::read_threads`]:
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
    /// Asked within every frame's 2^20 pixels: its error stops the making.
    cancel: Cancel<'g>,
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
            cancel: &never_cancel,
        }
    }

    /// Asks `cancel` within every frame's 2^20 pixels while making frames (e.g. the command
    /// line's termination signals): its error stops the making and is the source's error.
    pub fn with_cancel(mut self, cancel: Cancel<'g>) -> Self {
        self.cancel = cancel;
        self
    }

    /// Frames `first .. first + n` into `dst` (whole frames), in parallel on the generator's
    /// threads.
    /// The cancel check stops it within a frame's 2^20 pixels.
    fn make(&self, first: u64, dst: &mut [u16]) -> Result<()> {
        let pixels = (self.rows() * self.cols()).max(1);
        let (generator, photons, cancel) = (self.generator, self.photons, self.cancel);
        let mut work = move || {
            dst.par_chunks_mut(pixels)
                .enumerate()
                .try_for_each(|(i, f)| {
                    generator.frame_into_with_cancel(first + i as u64, photons, f, cancel)
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
