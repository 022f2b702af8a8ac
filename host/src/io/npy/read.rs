//! Whole arrays read into memory, their size checked against the file before anything is
//! allocated.

use std::path::Path;

use super::checked::{open_checked, read_elements};
use super::element::Element;
use super::frames::NpyFrames;
use super::header::shape_text;
use crate::error::{Error, Result};
use crate::frames::Frames;

/// A whole array read from a `.npy` file: its shape and its elements in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray<T> {
    /// The shape (for frame stacks always `[frames, rows, cols]`).
    pub shape: Vec<usize>,
    /// The elements in C (row-major) order, in host byte order.
    pub data: Vec<T>,
}

impl NpyArray<u16> {
    /// The array as frames; it must be 3-D (`frames x rows x cols`).
    ///
    /// # Errors
    /// [`Error::Shape`] unless the array is 3-D (`frames x rows x cols`) with rows and columns.
    pub fn as_frames(&self) -> Result<Frames<'_>> {
        match self.shape[..] {
            [f, r, c] => Frames::new(&self.data, f, r, c),
            _ => Err(Error::shape(
                "npy array as frames",
                "a 3-D array",
                shape_text(&self.shape),
            )),
        }
    }
}

/// Reads a whole array of element type `T` and any dimensionality (C order).
///
/// # Errors
/// [`Error::Io`] or [`Error::Format`] as for [`read_header`](super::header::read_header), and [`Error::Format`] when the
/// element type is not `T`.
pub fn read_array<T: Element>(path: &Path) -> Result<NpyArray<T>> {
    read_whole(path, &[0, 1, 2, 3, 4, 5, 6, 7, 8], "an array")
}

/// Reads a whole array of `T` whose number of dimensions is one of `ndims` (`what` says
/// which, for errors).
fn read_whole<T: Element>(path: &Path, ndims: &[usize], what: &str) -> Result<NpyArray<T>> {
    let (mut file, h, n) = open_checked::<T>(path, ndims, what)?;
    let mut data = crate::memory::zeroed_vec::<T>(|| format!("reading {}", path.display()), n)?;
    read_elements(&mut file, &mut data, h.needs_swap(), path)?;
    Ok(NpyArray {
        shape: h.shape,
        data,
    })
}

/// Reads a 2-D `float32` array (e.g. `n x 128` descriptors); shape is `[rows, cols]`.
///
/// # Errors
/// [`Error::Io`] or [`Error::Format`] as for [`read_array`], and [`Error::Format`] unless the
/// array is a 2-D `float32` matrix.
pub fn read_f32_2d(path: &Path) -> Result<NpyArray<f32>> {
    read_whole(path, &[2], "a 2-D array (rows x cols)")
}

/// Reads a whole `uint16` frame stack (3-D, or 2-D as one frame); shape is always
/// `[frames, rows, cols]`. Use [`NpyFrames`] for files that should not be loaded whole.
///
/// # Errors
/// [`Error::Io`] or [`Error::Format`] as for [`read_array`], and [`Error::Format`] unless the
/// array is a 2-D or 3-D `uint16` stack.
pub fn read_u16_frames(path: &Path) -> Result<NpyArray<u16>> {
    let mut r = NpyFrames::open(path)?;
    let shape = vec![r.len(), r.rows(), r.cols()];
    let mut data = Vec::new();
    r.read_into(r.len(), &mut data)?;
    Ok(NpyArray { shape, data })
}
