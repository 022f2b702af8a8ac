//! Frames in memory, owned or borrowed, as a [`FrameSource`]: the one in-memory source.
//!
//! A caller that owns its frames hands over a `Vec`; one that holds them in memory it does
//! not own (a numpy array, a memory map) lends a slice. Either way the engine copies each
//! chunk into its ring (page-locked slots on a GPU) on several threads at once: one core
//! copies at a fraction of the memory bus's speed, and the finder's thread then only
//! collects clusters.

use std::borrow::Cow;

use super::source::FrameSource;
use crate::error::{Error, Result};

/// Parts smaller than this are copied on one thread (a thread costs more than it saves).
const MIN_PART_BYTES: usize = 4 << 20;

/// `rows x cols` u16 frames in memory (owned or borrowed), numbered from 0, copied into the
/// engine's slots by up to [`FrameSource::read_threads`] threads (every core up to 16 unless
/// set).
#[derive(Clone, Debug)]
pub struct MemorySource<'a> {
    data: Cow<'a, [u16]>,
    rows: usize,
    cols: usize,
    /// Frames delivered so far.
    next: usize,
    threads: usize,
}

/// Checks that `samples` samples are a whole number of `rows x cols` frames (both at least
/// 1); returns the frame count.
///
/// # Errors
/// [`Error::Shape`] when `rows` or `cols` is 0 or `samples` is not a whole number of frames.
pub fn whole_frames(samples: usize, rows: usize, cols: usize) -> Result<usize> {
    let px = rows.checked_mul(cols).filter(|&p| p > 0).ok_or_else(|| {
        Error::shape(
            "frames",
            "rows >= 1 and cols >= 1",
            format!("{rows} x {cols}"),
        )
    })?;
    if !samples.is_multiple_of(px) {
        return Err(Error::shape(
            "frames",
            format!("a multiple of {px} samples ({rows} x {cols})"),
            format!("{samples} samples"),
        ));
    }
    Ok(samples / px)
}

impl<'a> MemorySource<'a> {
    /// `data` (a `Vec` handed over, or a slice lent) holds whole `rows x cols` frames, C
    /// order.
    ///
    /// # Errors
    /// [`Error::Shape`] when `rows` or `cols` is 0 or `data` is not a whole number of
    /// frames.
    pub fn new(data: impl Into<Cow<'a, [u16]>>, rows: usize, cols: usize) -> Result<Self> {
        let data = data.into();
        whole_frames(data.len(), rows, cols)?;
        Ok(Self {
            data,
            rows,
            cols,
            next: 0,
            threads: super::readahead::read_threads(),
        })
    }

    /// Frames in memory.
    pub fn len(&self) -> usize {
        self.data.len() / (self.rows * self.cols)
    }

    /// Whether it holds no frame.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Frames delivered so far.
    pub fn position(&self) -> usize {
        self.next
    }

    /// The next `k` frames' samples, and the frame numbers appended to `numbers`.
    fn take(&mut self, max_frames: usize, numbers: &mut Vec<u64>) -> &[u16] {
        let px = self.rows * self.cols;
        let k = max_frames.min(self.len() - self.next);
        let from = self.next * px;
        numbers.extend((self.next..self.next + k).map(|i| i as u64));
        self.next += k;
        &self.data[from..from + k * px]
    }
}

/// Copies `src` into `dst` (same length) on up to `threads` threads, each part at least
/// [`MIN_PART_BYTES`].
fn copy_parallel(dst: &mut [u16], src: &[u16], threads: usize) {
    let parts = threads
        .clamp(1, 64)
        .min((std::mem::size_of_val(src) / MIN_PART_BYTES).max(1));
    if parts == 1 {
        dst.copy_from_slice(src);
        return;
    }
    let per = src.len().div_ceil(parts);
    std::thread::scope(|s| {
        for (d, from) in dst.chunks_mut(per).zip(src.chunks(per)) {
            s.spawn(move || d.copy_from_slice(from));
        }
    });
}

impl FrameSource for MemorySource<'_> {
    fn rows(&self) -> usize {
        self.rows
    }

    fn cols(&self) -> usize {
        self.cols
    }

    fn remaining_hint(&self) -> u64 {
        (self.len() - self.next) as u64
    }

    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let before = numbers.len();
        let threads = self.threads;
        let src = self.take(dst.len() / (self.rows * self.cols), numbers);
        copy_parallel(&mut dst[..src.len()], src, threads);
        Ok(numbers.len() - before)
    }

    fn set_read_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 64);
    }

    fn read_threads(&self) -> usize {
        self.threads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame comes through `fill` once, in order, numbered from 0, whatever the slot
    /// size and thread count (parts of several MiB included).
    #[test]
    fn fills_every_frame_in_order() {
        let (rows, cols) = (64, 1024); // 128 KiB frames: 40 of them make 5 MiB
        let data: Vec<u16> = (0..40 * rows * cols)
            .map(|i| (i * 7 % 65521) as u16)
            .collect();
        for (slot, threads) in [(1, 1), (3, 4), (40, 16), (64, 3)] {
            let mut src = MemorySource::new(&data[..], rows, cols).expect("source");
            src.set_read_threads(threads);
            let (mut got, mut numbers) = (Vec::new(), Vec::new());
            let mut dst = vec![0u16; slot * rows * cols];
            loop {
                let k = src.fill(&mut dst, &mut numbers).expect("fill");
                if k == 0 {
                    break;
                }
                got.extend_from_slice(&dst[..k * rows * cols]);
            }
            assert!(got == data, "slot {slot}, threads {threads}");
            assert_eq!(numbers, (0..40).collect::<Vec<u64>>());
            assert_eq!(src.remaining_hint(), 0);
        }
        let mut src = MemorySource::new(data.clone(), rows, cols).expect("source");
        let (mut frames, mut numbers) = (Vec::new(), Vec::new());
        assert_eq!(
            src.read_frames(3, &mut frames, &mut numbers).expect("read"),
            3
        );
        assert!(frames[..] == data[..3 * rows * cols] && numbers == [0, 1, 2]);
    }

    /// Partial frames and empty frame shapes are refused by name.
    #[test]
    fn bad_shapes_are_refused() {
        let e = MemorySource::new(&[0u16; 7][..], 2, 3).expect_err("partial frame");
        assert!(e.to_string().contains("frames"), "{e}");
        let e = MemorySource::new(Vec::new(), 0, 3).expect_err("no pixels");
        assert!(e.to_string().contains("rows >= 1"), "{e}");
        assert!(MemorySource::new(&[][..], 2, 3).expect("empty").is_empty());
    }
}
