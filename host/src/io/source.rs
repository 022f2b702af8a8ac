//! One interface for every frame input (raw acquisitions, `.npy` files, memory), so the
//! command line streams frames in batches without caring where they come from.

use std::path::{Path, PathBuf};

use super::checks::check_regular;
use super::npy::{MappedFrames, NpyFrames};
use super::raw::{GapReport, RawMaster, RawReader};
use crate::error::{Error, Result};

/// A stream of `rows x cols` u16 frames read in batches.
///
/// An implementation gives [`FrameSource::read_frames`] or [`FrameSource::fill`], or both:
/// each is provided in terms of the other (one of them must be given, or a read never ends).
pub trait FrameSource {
    /// Rows per frame.
    fn rows(&self) -> usize;

    /// Columns per frame.
    fn cols(&self) -> usize;

    /// Frames that can still be delivered at most (for progress bars and reservations).
    fn remaining_hint(&self) -> u64;

    /// Appends up to `n` frames (C order) to `frames` and their frame numbers to `numbers`;
    /// returns how many were appended, 0 at the end. The default grows `frames` by `n`
    /// frames (at most [`FrameSource::remaining_hint`]), fills them through
    /// [`FrameSource::fill`] and cuts off what it left.
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Format`] naming the file when the input cannot be read or is
    /// malformed; [`Error::InvalidParameter`] (`frames`) when `n` frames do not fit in memory.
    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let pixels = self.rows() * self.cols();
        let n = n.min(usize::try_from(self.remaining_hint()).unwrap_or(usize::MAX));
        let start = frames.len();
        let end = n
            .checked_mul(pixels)
            .and_then(|len| len.checked_add(start))
            .ok_or_else(|| {
                Error::param("frames", format!("{n} frames of {pixels} pixels overflow"))
            })?;
        frames.resize(end, 0);
        let k = self.fill(&mut frames[start..], numbers);
        frames.truncate(start + *k.as_ref().unwrap_or(&0) * pixels);
        k
    }

    /// Fills `dst` (whole frames) with the next frames and appends their frame numbers to
    /// `numbers`; returns how many frames it filled, 0 at the end. The streaming engine
    /// reads through this, straight into its (possibly page-locked) slots; sources that can
    /// read in place give it, the default reads through [`FrameSource::read_frames`] and
    /// copies.
    ///
    /// # Errors
    /// As [`FrameSource::read_frames`].
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let pixels = (self.rows() * self.cols()).max(1);
        let mut scratch = Vec::new();
        let k = self.read_frames(dst.len() / pixels, &mut scratch, numbers)?;
        dst[..scratch.len()].copy_from_slice(&scratch);
        Ok(k)
    }

    /// Every frame not read yet, as one read-only memory map of the file, when the source can
    /// give one (a `.npy` in host byte order); the source is then at its end. The engine's
    /// zero-copy input hands chunks of the map to the finder, which page-locks them in place
    /// (the GPU then reads the page cache directly) instead of copying them. `None` (the
    /// default) when the source cannot; it is then unchanged.
    fn map_rest(&mut self) -> Option<MappedFrames> {
        None
    }

    /// How many threads a source that reads in parallel (a `.npy` file: positioned reads of
    /// disjoint parts of each chunk) may use from now on; sources that read on one thread
    /// ignore it. The engine's callers set what the finder asks for
    /// ([`crate::engine::FedFinder::read_threads`]).
    fn set_read_threads(&mut self, _threads: usize) {}

    /// The threads this source reads with (1 for sources that read on one thread).
    fn read_threads(&self) -> usize {
        1
    }

    /// Frames still to be delivered, exactly (a raw acquisition may deliver fewer than its
    /// files hold: records with lost packets are skipped). The default is
    /// [`FrameSource::remaining_hint`], exact for sources that cannot skip frames; a raw
    /// acquisition reads its record headers (no image) to count.
    ///
    /// # Errors
    /// As [`FrameSource::read_frames`].
    fn count_remaining(&self) -> Result<u64> {
        Ok(self.remaining_hint())
    }

    /// What went wrong in the input so far (missing or partial frames), for a person; `None`
    /// when the source cannot lose frames.
    fn report(&self) -> Option<String> {
        None
    }

    /// The typed gap report behind [`FrameSource::report`], so callers can tell a clean
    /// input from a lossy one; `None` when the source cannot lose frames.
    fn gaps(&self) -> Option<&GapReport> {
        None
    }

    /// Where the frames lie on the detector: `(row, column)` of the detector pixel that is
    /// pixel (0, 0) of every frame. `(0, 0)` (the default) for frames of the whole detector;
    /// a raw acquisition with a receiver ROI gives the ROI's first row and column
    /// (`ymin`, `xmin`), and the clusters found in it are moved there
    /// ([`crate::cluster::FrameClusters::shifted_into`]) so that they carry detector
    /// coordinates.
    fn origin(&self) -> (usize, usize) {
        (0, 0)
    }

    /// Rows and columns of the whole detector the frames come from: the frames' own shape
    /// (the default), or a raw acquisition's detector when its files hold a receiver ROI.
    fn detector_shape(&self) -> (usize, usize) {
        (self.rows(), self.cols())
    }
}

impl FrameSource for RawReader {
    fn rows(&self) -> usize {
        RawReader::rows(self)
    }

    fn cols(&self) -> usize {
        RawReader::cols(self)
    }

    fn remaining_hint(&self) -> u64 {
        let r = self.report();
        r.frames_on_disk.saturating_sub(
            r.frames_delivered + r.incomplete.iter().filter(|f| !f.delivered).count() as u64,
        )
    }

    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let infos = self.next_frames(n, frames)?;
        numbers.extend(infos.iter().map(|i| i.frame_number));
        Ok(infos.len())
    }

    /// Reads in place (see [`RawReader::next_frames`]); at the end of the data, books the
    /// partial tails of the remaining files as [`RawReader::next_frames`] does.
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let pixels = self.master().pixels().max(1);
        let cap = dst.len() / pixels;
        let k = self.fill_batch(dst, |i| numbers.push(i.frame_number))?;
        if k < cap {
            self.finish()?;
        }
        Ok(k)
    }

    fn set_read_threads(&mut self, threads: usize) {
        RawReader::set_read_threads(self, threads);
    }

    fn read_threads(&self) -> usize {
        RawReader::read_threads(self)
    }

    fn count_remaining(&self) -> Result<u64> {
        self.count_deliverable()
    }

    fn report(&self) -> Option<String> {
        Some(RawReader::report(self).summary())
    }

    fn gaps(&self) -> Option<&GapReport> {
        Some(RawReader::report(self))
    }

    fn origin(&self) -> (usize, usize) {
        self.master().roi.map_or((0, 0), |r| (r.ymin, r.xmin))
    }

    fn detector_shape(&self) -> (usize, usize) {
        let m = self.master();
        match m.roi {
            Some(_) => (m.detector_rows, m.detector_cols),
            None => (m.rows, m.cols),
        }
    }
}

/// The frames of a `.npy` file, numbered from 0, read in place by several threads (or mapped).
impl FrameSource for NpyFrames {
    fn rows(&self) -> usize {
        NpyFrames::rows(self)
    }
    fn cols(&self) -> usize {
        NpyFrames::cols(self)
    }
    fn remaining_hint(&self) -> u64 {
        self.remaining() as u64
    }
    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let first = self.position() as u64;
        let k = if frames.is_empty() {
            // The usual case (the caller reuses one buffer): read straight into it.
            self.read_into(n, frames)?
        } else {
            let chunk = self.read_chunk(n)?;
            frames.extend_from_slice(&chunk);
            chunk.len() / (NpyFrames::rows(self) * NpyFrames::cols(self))
        };
        numbers.extend(first..first + k as u64);
        Ok(k)
    }
    fn map_rest(&mut self) -> Option<MappedFrames> {
        NpyFrames::map_rest(self)
    }
    fn set_read_threads(&mut self, threads: usize) {
        NpyFrames::set_read_threads(self, threads);
    }
    fn read_threads(&self) -> usize {
        NpyFrames::read_threads(self)
    }
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let first = self.position() as u64;
        let k = NpyFrames::fill(self, dst, self.read_threads())?;
        numbers.extend(first..first + k as u64);
        Ok(k)
    }
}

/// Whether `path` names a raw master file (`*_master_<N>.json`).
pub fn is_raw_master(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".json"))
        .and_then(|s| s.rfind("_master_").map(|p| &s[p + 8..]))
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// Opens a raw acquisition by its master file; any other path is an
/// [`Error::Format`] saying so (use [`open_frames_or`] to handle other formats).
///
/// # Errors
/// [`Error::Format`] when `path` is not a raw master file; [`Error::Io`] or
/// [`Error::Format`] naming the file when the master file or its data files cannot be read.
pub fn open_frames(path: &Path) -> Result<Box<dyn FrameSource + Send>> {
    open_frames_or(path, |p| {
        let mut reason =
            "not a raw master file (<base>_master_<N>.json); cluda reads .npy or raw master files"
                .to_string();
        if let Some(hint) = super::raw::data_file_hint(p) {
            reason = format!("{reason}; {hint}");
        }
        Err(Error::format(p, reason))
    })
}

/// Opens a raw acquisition by its master file, or hands any other path to `other` (e.g. the
/// `.npy` reader).
///
/// # Errors
/// As [`open_frames`] for raw master files; otherwise whatever `other` returns.
pub fn open_frames_or(
    path: &Path,
    other: impl FnOnce(&Path) -> Result<Box<dyn FrameSource + Send>>,
) -> Result<Box<dyn FrameSource + Send>> {
    if is_raw_master(path) {
        Ok(Box::new(RawReader::open(path)?))
    } else {
        other(path)
    }
}

/// The files an input consists of: a raw master file and every data file it names that
/// exists (every port's; each checked to be a regular file), or the file itself (checked
/// likewise).
pub fn input_files(path: &Path) -> Result<Vec<PathBuf>> {
    check_regular(path)?;
    let mut files = vec![path.to_path_buf()];
    if is_raw_master(path) {
        let master = RawMaster::open(path)?;
        for port in 0..master.ports() {
            for i in 0.. {
                let p = master.port_data_path(master.module + port, i);
                match std::fs::metadata(&p) {
                    Ok(_) => {
                        check_regular(&p)?;
                        files.push(p);
                    }
                    Err(_) => break,
                }
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of 2 x 3 pixels in memory, numbered from 0; given to the tests below as a
    /// source with only `fill` or only `read_frames`.
    struct Stack {
        data: Vec<u16>,
        next: usize,
    }

    impl Stack {
        const PIXELS: usize = 6;

        fn new(frames: usize) -> Self {
            let data = (0..frames * Self::PIXELS).map(|v| v as u16).collect();
            Self { data, next: 0 }
        }

        /// The next `n` frames at most, their numbers appended to `numbers`.
        fn take(&mut self, n: usize, numbers: &mut Vec<u64>) -> &[u16] {
            let k = n.min(self.data.len() / Self::PIXELS - self.next);
            numbers.extend((self.next..self.next + k).map(|i| i as u64));
            self.next += k;
            &self.data[(self.next - k) * Self::PIXELS..self.next * Self::PIXELS]
        }
    }

    /// Gives only `fill`.
    struct FillOnly(Stack);

    /// Gives only `read_frames`.
    struct ReadOnly(Stack);

    impl FrameSource for FillOnly {
        fn rows(&self) -> usize {
            2
        }
        fn cols(&self) -> usize {
            3
        }
        fn remaining_hint(&self) -> u64 {
            (self.0.data.len() / Stack::PIXELS - self.0.next) as u64
        }
        fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
            let src = self.0.take(dst.len() / Stack::PIXELS, numbers);
            dst[..src.len()].copy_from_slice(src);
            Ok(src.len() / Stack::PIXELS)
        }
    }

    impl FrameSource for ReadOnly {
        fn rows(&self) -> usize {
            2
        }
        fn cols(&self) -> usize {
            3
        }
        fn remaining_hint(&self) -> u64 {
            u64::MAX
        }
        fn read_frames(
            &mut self,
            n: usize,
            frames: &mut Vec<u16>,
            numbers: &mut Vec<u64>,
        ) -> Result<usize> {
            let src = self.0.take(n, numbers);
            frames.extend_from_slice(src);
            Ok(src.len() / Stack::PIXELS)
        }
    }

    /// Each default reads through the other: `read_frames` appends whole frames after what
    /// the caller has, never past the end; `fill` fills whole frames of the slot; both number
    /// the frames and give 0 at the end.
    #[test]
    fn the_defaults_read_through_each_other() {
        let data = Stack::new(5).data;
        let mut src = FillOnly(Stack::new(5));
        let (mut frames, mut numbers) = (vec![9], Vec::new());
        assert_eq!(
            src.read_frames(2, &mut frames, &mut numbers).expect("read"),
            2
        );
        assert_eq!(
            src.read_frames(9, &mut frames, &mut numbers).expect("read"),
            3
        );
        assert_eq!(
            src.read_frames(9, &mut frames, &mut numbers).expect("read"),
            0
        );
        assert!(frames[0] == 9 && frames[1..] == data[..]);
        assert_eq!(numbers, [0, 1, 2, 3, 4]);
        let mut src = ReadOnly(Stack::new(5));
        let (mut slot, mut numbers) = (vec![0u16; 13], Vec::new());
        assert_eq!(src.fill(&mut slot, &mut numbers).expect("fill"), 2);
        assert!(slot[..12] == data[..12] && slot[12] == 0);
        assert_eq!(src.fill(&mut slot, &mut numbers).expect("fill"), 2);
        assert_eq!(src.fill(&mut slot, &mut numbers).expect("fill"), 1);
        assert!(slot[..6] == data[24..]);
        assert_eq!(src.fill(&mut slot, &mut numbers).expect("fill"), 0);
        assert_eq!(numbers, [0, 1, 2, 3, 4]);
        // The default reads no more than the source has left, however many are asked for.
        let mut src = FillOnly(Stack::new(1));
        let n = src.read_frames(usize::MAX, &mut frames, &mut numbers);
        assert_eq!(n.expect("read"), 1);
    }
}
