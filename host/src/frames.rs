//! Borrowed views of detector frames: a contiguous `u16` buffer with a shape.

use ndarray::{ArrayView2, ArrayView3};

use crate::error::{Error, Result};

/// A borrowed stack of frames, `frames x rows x cols` `u16` samples in C (row-major) order.
///
/// Every finder and pedestal entry point takes frames this way, built from a plain slice with
/// a shape ([`Frames::new`]) or from an ndarray view ([`Frames::from_array3`],
/// [`Frames::from_array2`]).
#[derive(Clone, Copy, Debug)]
pub struct Frames<'a> {
    data: &'a [u16],
    frames: usize,
    rows: usize,
    cols: usize,
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
        })
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

    /// Frames `start .. start + count` as a view of the same shape. Panics when out of range.
    pub fn range(&self, start: usize, count: usize) -> Frames<'a> {
        let n = self.pixels();
        Frames {
            data: &self.data[start * n..(start + count) * n],
            frames: count,
            rows: self.rows,
            cols: self.cols,
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
