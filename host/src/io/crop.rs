//! A frame source cut down to a rectangle of its frames: a pedestal of the whole detector
//! used with raw data that holds a receiver ROI ([`Cropped`]).

use super::raw::{GapReport, Roi};
use super::source::FrameSource;
use crate::error::{Error, Result};

/// The frames of another source, each cut down to the rectangle `roi` (detector pixels, both
/// ends inclusive, as the receiver's ROI): what the receiver writes of a whole frame. Frame
/// numbers, counts and gap reports are the inner source's.
pub struct Cropped<'a> {
    inner: Box<dyn FrameSource + Send + 'a>,
    roi: Roi,
    /// Whole frames read before they are cut (one chunk's worth, kept between calls).
    whole: Vec<u16>,
}

impl<'a> Cropped<'a> {
    /// `inner`'s frames cut down to `roi`.
    ///
    /// # Errors
    /// [`Error::Shape`] when `roi` does not lie inside `inner`'s frames.
    pub fn new(inner: Box<dyn FrameSource + Send + 'a>, roi: Roi) -> Result<Self> {
        let (rows, cols) = (inner.rows(), inner.cols());
        if !roi.fits(rows, cols) {
            return Err(Error::shape(
                "a receiver ROI to cut frames down to",
                format!("an ROI inside frames of {rows} x {cols}"),
                format!("ROI {roi} (xmin, xmax, ymin, ymax)"),
            ));
        }
        Ok(Self {
            inner,
            roi,
            whole: Vec::new(),
        })
    }

    /// Cuts every whole frame of `self.whole` (its first `k`) into `dst`, one ROI frame after
    /// another.
    fn cut(&self, k: usize, dst: &mut [u16]) -> Result<()> {
        let whole = self.inner.rows() * self.inner.cols();
        let part = self.roi.rows() * self.roi.cols();
        for (src, out) in self
            .whole
            .chunks_exact(whole.max(1))
            .zip(dst.chunks_exact_mut(part.max(1)))
            .take(k)
        {
            self.roi.crop(src, self.inner.cols(), out)?;
        }
        Ok(())
    }
}

impl FrameSource for Cropped<'_> {
    fn rows(&self) -> usize {
        self.roi.rows()
    }

    fn cols(&self) -> usize {
        self.roi.cols()
    }

    fn remaining_hint(&self) -> u64 {
        self.inner.remaining_hint()
    }

    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let part = (self.rows() * self.cols()).max(1);
        let frames = dst.len() / part;
        let whole = frames * self.inner.rows() * self.inner.cols();
        if self.whole.len() != whole {
            self.whole = crate::memory::zeroed_vec(
                || {
                    format!(
                        "{frames} whole frames of {} x {} to cut down to the ROI",
                        self.inner.rows(),
                        self.inner.cols()
                    )
                },
                whole,
            )?;
        }
        let mut buf = std::mem::take(&mut self.whole);
        let k = self.inner.fill(&mut buf, numbers);
        self.whole = buf;
        let k = k?;
        self.cut(k, dst)?;
        Ok(k)
    }

    fn set_read_threads(&mut self, threads: usize) {
        self.inner.set_read_threads(threads);
    }

    fn read_threads(&self) -> usize {
        self.inner.read_threads()
    }

    fn count_remaining(&self) -> Result<u64> {
        self.inner.count_remaining()
    }

    fn report(&self) -> Option<String> {
        self.inner.report()
    }

    fn gaps(&self) -> Option<&GapReport> {
        self.inner.gaps()
    }

    fn origin(&self) -> (usize, usize) {
        let (r, c) = self.inner.origin();
        (r + self.roi.ymin, c + self.roi.xmin)
    }

    fn detector_shape(&self) -> (usize, usize) {
        self.inner.detector_shape()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemorySource;

    #[test]
    fn cuts_every_frame_and_keeps_numbers() {
        // Two frames of 3 rows x 4 columns.
        let data: Vec<u16> = (0..24).collect();
        let roi = Roi {
            xmin: 1,
            xmax: 2,
            ymin: 1,
            ymax: 2,
        };
        let src = MemorySource::new(data.clone(), 3, 4).unwrap();
        let mut c = Cropped::new(Box::new(src), roi).unwrap();
        assert_eq!((c.rows(), c.cols(), c.origin()), (2, 2, (1, 1)));
        let (mut frames, mut numbers) = (Vec::new(), Vec::new());
        assert_eq!(c.read_frames(1, &mut frames, &mut numbers).unwrap(), 1);
        assert_eq!(frames, [5, 6, 9, 10]);
        let mut dst = vec![0u16; 8];
        numbers.clear();
        assert_eq!(c.fill(&mut dst, &mut numbers).unwrap(), 1);
        assert_eq!(&dst[..4], [17, 18, 21, 22]);
        assert_eq!(numbers, [1]);
        let src = MemorySource::new(data, 3, 4).unwrap();
        let outside = Roi {
            xmin: 0,
            xmax: 4,
            ymin: 0,
            ymax: 0,
        };
        assert!(Cropped::new(Box::new(src), outside).is_err());
    }
}
