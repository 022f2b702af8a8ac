//! Generated frames as a [`cluda::io::FrameSource`] (files are opened by
//! [`cluda::engine::input::Input`]), and the checks of frame dimensions given on the command
//! line.

use cluda::engine::input::Input;
use cluda::generate::Generator;
use cluda::io::FrameSource;
use cluda::{Error, Result};
use rayon::prelude::*;

/// Frames `first .. first + count` of a generator, made a chunk at a time in parallel and
/// numbered from 0.
pub struct Generated<'g> {
    generator: &'g Generator,
    first: u64,
    count: usize,
    next: usize,
    photons: bool,
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
        let first = self.first + self.next as u64;
        let (generator, photons) = (self.generator, self.photons);
        frames[start..]
            .par_chunks_mut(pixels.max(1))
            .enumerate()
            .for_each(|(i, f)| generator.frame_into(first + i as u64, photons, f));
        numbers.extend((self.next..self.next + n).map(|i| i as u64));
        self.next += n;
        Ok(n)
    }
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let pixels = (self.rows() * self.cols()).max(1);
        let n = (dst.len() / pixels).min(self.count - self.next);
        let first = self.first + self.next as u64;
        let (generator, photons) = (self.generator, self.photons);
        dst[..n * pixels]
            .par_chunks_mut(pixels)
            .enumerate()
            .for_each(|(i, f)| generator.frame_into(first + i as u64, photons, f));
        numbers.extend((self.next..self.next + n).map(|i| i as u64));
        self.next += n;
        Ok(n)
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
