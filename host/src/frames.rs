//! Borrowed views of detector frames: a contiguous `u16` buffer with a shape, and the
//! frames' numbers.

use ndarray::{ArrayView2, ArrayView3};

use crate::error::{Error, Result};
use crate::frame_number::{FrameNumber, FrameNumbers};

/// A borrowed stack of frames, `frames x rows x cols` `u16` samples in C (row-major) order,
/// with the frames' numbers.
///
/// Every finder and pedestal entry point takes frames this way, built from a plain slice with
/// a shape ([`Frames::new`]) or from an ndarray view ([`Frames::from_array3`],
/// [`Frames::from_array2`]). The frames are numbered from 0 (their index) unless told
/// otherwise ([`Frames::numbered_from`], [`Frames::with_numbers`]); a finder names every frame
/// by its number ([`crate::FrameClusters::frame`], [`Error::ClusterLimit`]).
#[derive(Clone, Copy, Debug)]
pub struct Frames<'a> {
    data: &'a [u16],
    frames: usize,
    rows: usize,
    cols: usize,
    numbers: FrameNumbers<'a>,
}

impl<'a> Frames<'a> {
    /// Views `data` as `frames x rows x cols`; the length must match the shape exactly.
    ///
    /// # Errors
    /// [`Error::Shape`] when `rows` or `cols` is 0, the shape overflows `usize`, or `data` does
    /// not hold exactly `frames x rows x cols` samples.
    pub fn new(data: &'a [u16], frames: usize, rows: usize, cols: usize) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::shape(
                "frames",
                "rows >= 1 and cols >= 1",
                format!("{rows} x {cols}"),
            ));
        }
        let want = frames
            .checked_mul(rows)
            .and_then(|n| n.checked_mul(cols))
            .ok_or_else(|| {
                Error::shape(
                    "frames",
                    "a shape whose size fits in memory",
                    format!("{frames} x {rows} x {cols}"),
                )
            })?;
        if data.len() != want {
            return Err(Error::shape(
                "frames",
                format!("{want} samples ({frames} x {rows} x {cols})"),
                format!("{} samples", data.len()),
            ));
        }
        Ok(Self {
            data,
            frames,
            rows,
            cols,
            numbers: FrameNumbers::default(),
        })
    }

    /// The same frames numbered `first`, `first + 1`, ... (e.g. a stream's frames from
    /// `first` on).
    pub fn numbered_from(self, first: FrameNumber) -> Self {
        Self {
            numbers: FrameNumbers::From(first),
            ..self
        }
    }

    /// The same frames with `numbers` (e.g. a raw acquisition's header numbers, one per
    /// frame).
    ///
    /// # Errors
    /// [`Error::Shape`] when `numbers` lists other than one number per frame.
    pub fn with_numbers(self, numbers: FrameNumbers<'a>) -> Result<Self> {
        numbers.expect_frames(self.frames, "frame numbers")?;
        Ok(Self { numbers, ..self })
    }

    /// One frame of `rows x cols` samples.
    ///
    /// # Errors
    /// [`Error::Shape`] as for [`Frames::new`].
    pub fn single(data: &'a [u16], rows: usize, cols: usize) -> Result<Self> {
        Self::new(data, 1, rows, cols)
    }

    /// Views a 3-D array `frames x rows x cols`; it must be in standard (C-contiguous) layout.
    ///
    /// # Errors
    /// [`Error::Shape`] when the view is not in standard (C-contiguous) layout or has a zero
    /// dimension.
    pub fn from_array3(a: ArrayView3<'a, u16>) -> Result<Self> {
        let (f, r, c) = a.dim();
        let data = a.to_slice().ok_or_else(|| {
            Error::shape(
                "frames",
                "a C-contiguous (standard layout) array",
                "a strided or Fortran-order view",
            )
        })?;
        Self::new(data, f, r, c)
    }

    /// Views a 2-D array `rows x cols` as one frame; it must be C-contiguous.
    ///
    /// # Errors
    /// [`Error::Shape`] when the view is not in standard (C-contiguous) layout or has a zero
    /// dimension.
    pub fn from_array2(a: ArrayView2<'a, u16>) -> Result<Self> {
        let (r, c) = a.dim();
        let data = a.to_slice().ok_or_else(|| {
            Error::shape(
                "frame",
                "a C-contiguous (standard layout) array",
                "a strided or Fortran-order view",
            )
        })?;
        Self::new(data, 1, r, c)
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.frames
    }

    /// Whether there are no frames.
    pub fn is_empty(&self) -> bool {
        self.frames == 0
    }

    /// Rows per frame.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns per frame.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Samples per frame.
    pub fn pixels(&self) -> usize {
        self.rows * self.cols
    }

    /// All samples, frame after frame.
    pub fn as_slice(&self) -> &'a [u16] {
        self.data
    }

    /// Frame `i` as a row-major slice. Panics if `i >= len()` (an indexing bug, not user input).
    pub fn frame(&self, i: usize) -> &'a [u16] {
        let n = self.pixels();
        &self.data[i * n..(i + 1) * n]
    }

    /// The number of frame `i` (its index, unless the frames were numbered otherwise).
    /// Panics if `i >= len()` for listed numbers (an indexing bug, not user input).
    pub fn number(&self, i: usize) -> FrameNumber {
        match self.numbers {
            FrameNumbers::From(first) => first.after(i),
            FrameNumbers::Listed(numbers) => numbers[i],
        }
    }

    /// The frames' numbers.
    pub fn numbers(&self) -> FrameNumbers<'a> {
        self.numbers
    }

    /// Frames `start .. start + count` as a view of the same shape, with their numbers.
    /// Panics when out of range.
    pub fn range(&self, start: usize, count: usize) -> Frames<'a> {
        let n = self.pixels();
        Frames {
            data: &self.data[start * n..(start + count) * n],
            frames: count,
            rows: self.rows,
            cols: self.cols,
            numbers: match self.numbers {
                FrameNumbers::From(first) => FrameNumbers::From(first.after(start)),
                FrameNumbers::Listed(numbers) => {
                    FrameNumbers::Listed(&numbers[start..start + count])
                }
            },
        }
    }

    /// Checks that these frames are `rows x cols`; `what` names the input in the error.
    ///
    /// # Errors
    /// [`Error::Shape`] naming `what` when the frames are not `rows x cols`.
    pub fn expect_shape(&self, rows: usize, cols: usize, what: &str) -> Result<()> {
        if self.rows != rows || self.cols != cols {
            return Err(Error::shape(
                what,
                format!("{rows} x {cols} frames"),
                format!("{} x {} frames", self.rows, self.cols),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames are numbered by their index unless told otherwise; a range keeps its frames'
    /// numbers; a list of numbers must hold one per frame.
    #[test]
    fn frames_carry_their_numbers() {
        let data = [0u16; 4 * 6];
        let f = Frames::new(&data, 4, 2, 3).expect("frames");
        assert_eq!((f.number(0), f.number(3)), (FrameNumber(0), FrameNumber(3)));
        let f = f.numbered_from(FrameNumber(100));
        assert_eq!(f.range(2, 2).number(1), FrameNumber(103));
        let list = [5, 8, 9, 20].map(FrameNumber);
        let f = f
            .with_numbers(FrameNumbers::Listed(&list))
            .expect("numbered");
        assert_eq!(f.number(3), FrameNumber(20));
        let r = f.range(1, 2);
        assert_eq!(
            (r.len(), r.number(0), r.number(1)),
            (2, FrameNumber(8), FrameNumber(9))
        );
        assert_eq!(r.numbers(), FrameNumbers::Listed(&list[1..3]));
        let e = f
            .with_numbers(FrameNumbers::Listed(&list[..3]))
            .expect_err("three numbers for four frames");
        assert!(e.to_string().contains("frame numbers"), "{e}");
    }
}
