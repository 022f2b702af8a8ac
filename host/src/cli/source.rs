//! Where frames come from: a `.npy` file read in chunks, or the generator.

use cluda::generate::Generator;
use cluda::io::NpyFrames;
use cluda::{Error, Result};
use rayon::prelude::*;

/// A stack of frames read a chunk at a time, so no source has to fit in memory.
pub trait FrameSource {
    /// What the frames are, for messages (e.g. `data file d.npy`).
    fn describe(&self) -> String;
    /// Total frames.
    fn len(&self) -> usize;
    /// Rows per frame.
    fn rows(&self) -> usize;
    /// Columns per frame.
    fn cols(&self) -> usize;
    /// Reads the next `min(max_frames, remaining)` frames into `buf` (resized to hold them);
    /// returns how many, 0 at the end.
    fn read_into(&mut self, max_frames: usize, buf: &mut Vec<u16>) -> Result<usize>;
}

/// Frames of a `.npy` file.
pub struct NpySource {
    what: &'static str,
    frames: NpyFrames,
}

impl NpySource {
    /// Opens `path` (checking its header); `what` says which input it is (`pedestal`, `data`).
    pub fn open(path: &std::path::Path, what: &'static str) -> Result<Self> {
        Ok(Self {
            what,
            frames: NpyFrames::open(path)?,
        })
    }
}

impl FrameSource for NpySource {
    fn describe(&self) -> String {
        format!("{} file {}", self.what, self.frames.path().display())
    }
    fn len(&self) -> usize {
        self.frames.len()
    }
    fn rows(&self) -> usize {
        self.frames.rows()
    }
    fn cols(&self) -> usize {
        self.frames.cols()
    }
    fn read_into(&mut self, max_frames: usize, buf: &mut Vec<u16>) -> Result<usize> {
        self.frames.read_into(max_frames, buf)
    }
}

/// Frames `first .. first + count` of a generator, made a chunk at a time in parallel.
pub struct Generated<'g> {
    what: &'static str,
    generator: &'g Generator,
    first: u64,
    count: usize,
    next: usize,
    photons: bool,
}

impl<'g> Generated<'g> {
    /// Frames `first .. first + count`; `photons: false` gives dark (pedestal) frames.
    pub fn new(
        what: &'static str,
        generator: &'g Generator,
        first: u64,
        count: usize,
        photons: bool,
    ) -> Self {
        Self {
            what,
            generator,
            first,
            count,
            next: 0,
            photons,
        }
    }
}

impl FrameSource for Generated<'_> {
    fn describe(&self) -> String {
        format!("generated {} frames", self.what)
    }
    fn len(&self) -> usize {
        self.count
    }
    fn rows(&self) -> usize {
        self.generator.config().rows
    }
    fn cols(&self) -> usize {
        self.generator.config().cols
    }
    fn read_into(&mut self, max_frames: usize, buf: &mut Vec<u16>) -> Result<usize> {
        let n = max_frames.min(self.count - self.next);
        let pixels = self.rows() * self.cols();
        buf.clear();
        buf.resize(n * pixels, 0);
        let first = self.first + self.next as u64;
        let (generator, photons) = (self.generator, self.photons);
        buf.par_chunks_mut(pixels.max(1))
            .enumerate()
            .for_each(|(i, f)| generator.frame_into(first + i as u64, photons, f));
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

/// Frames per chunk for `rows x cols` frames: at most 256, and at most 128 MiB of samples.
pub fn chunk_frames(rows: usize, cols: usize) -> usize {
    let frame_bytes = (rows * cols * 2).max(1);
    ((128 << 20) / frame_bytes).clamp(1, 256)
}
