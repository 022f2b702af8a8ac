//! Writing `.npy` files: the header NumPy writes, arrays at once, frame stacks a chunk at a
//! time ([`NpyWriter`]).
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use super::element::Element;
use super::header::{MAGIC, shape_text};
use crate::error::{Error, Result};
use crate::frames::Frames;
use crate::io::atomic::{AtomicFile, Claim};

/// The bytes of the header NumPy's `np.save` writes for a C-order array: version 1.0 (2.0
/// when the header would not fit a u16 length), spare spaces so the first axis can grow to 21
/// digits in place, then spaces and a newline up to a multiple of 64 bytes (a full 64 when
/// already aligned, as NumPy does). A structured `descr` (a `[...]` list of fields) is written
/// as the list itself, as NumPy writes it; any other as a quoted string.
pub fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let descr = if descr.starts_with('[') {
        descr.to_string()
    } else {
        format!("'{descr}'")
    };
    let mut dict = format!(
        "{{'descr': {descr}, 'fortran_order': False, 'shape': {}, }}",
        shape_text(shape)
    );
    if let Some(first) = shape.first() {
        dict += &" ".repeat(21usize.saturating_sub(first.to_string().len()));
    }
    let padded = |pre: usize| {
        let hlen = dict.len() + 1;
        hlen + 64 - (pre + hlen) % 64
    };
    let v1 = padded(10) <= u16::MAX as usize;
    let (pre, header_len) = if v1 {
        (10, padded(10))
    } else {
        (12, padded(12))
    };
    let mut out = Vec::with_capacity(pre + header_len);
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(pre + header_len - 1, b' ');
    out.push(b'\n');
    out
}

/// Writes a C-order array of `T` with `shape` a chunk at a time: [`NpyWriter::create`]
/// writes the header, [`NpyWriter::write`] appends elements, [`NpyWriter::finish`] checks
/// that exactly the declared number of elements was written and flushes.
pub struct NpyWriter<T: Element> {
    path: PathBuf,
    out: AtomicFile,
    expected: usize,
    written: usize,
    scratch: Vec<u8>,
    _t: PhantomData<T>,
}

impl<T: Element> NpyWriter<T> {
    /// Starts `path` and writes the header for `shape`: the file is written under a
    /// temporary name ([`AtomicFile`]) and appears under `path` only when
    /// [`NpyWriter::finish`] succeeds, so no `.npy` whose header promises data it lacks is
    /// ever left under the final name.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be created or its header written.
    pub fn create(path: &Path, shape: &[usize]) -> Result<Self> {
        let expected = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|n| n.checked_mul(T::SIZE).map(|_| n))
            .ok_or_else(|| {
                Error::format(
                    path,
                    format!("shape {} is too large to write", shape_text(shape)),
                )
            })?;
        let mut out = AtomicFile::create(path)?;
        out.write_all(&header_bytes(&T::descr(), shape))
            .map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            out,
            expected,
            written: 0,
            scratch: Vec::new(),
            _t: PhantomData,
        })
    }

    /// Sets what [`NpyWriter::finish`]'s rename does when `path` exists by then (default:
    /// replace it, [`Claim::Replace`]).
    pub fn set_claim(&mut self, claim: Claim) {
        self.out.set_claim(claim);
    }

    /// Appends elements (in C order); more than the shape declares is an error.
    ///
    /// # Errors
    /// [`Error::Format`] naming the file when more elements are written than the header
    /// declares (nothing is written); [`Error::Io`] when writing fails.
    pub fn write(&mut self, data: &[T]) -> Result<()> {
        if data.len() > self.expected - self.written {
            return Err(Error::format(
                &self.path,
                format!(
                    "writing {} more elements than the {} the header declares",
                    data.len() - (self.expected - self.written),
                    self.expected
                ),
            ));
        }
        let bytes: &[u8] = if cfg!(target_endian = "little") {
            bytemuck::cast_slice(data)
        } else {
            self.scratch.clear();
            for &v in data {
                self.scratch
                    .extend_from_slice(bytemuck::bytes_of(&v.swap_bytes()));
            }
            &self.scratch
        };
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.path, e))?;
        self.written += data.len();
        Ok(())
    }

    /// Checks the element count, flushes and syncs the file and renames it into place.
    ///
    /// # Errors
    /// [`Error::Format`] naming the file when fewer elements were written than the header
    /// declares; [`Error::Io`] when flushing, syncing or renaming fails.
    pub fn finish(self) -> Result<()> {
        if self.written != self.expected {
            return Err(Error::format(
                &self.path,
                format!(
                    "only {} of the {} elements the header declares were written",
                    self.written, self.expected
                ),
            ));
        }
        self.out.commit().map(|_| ())
    }
}

/// Writes a whole C-order array; `data.len()` must equal the shape's element count.
///
/// # Errors
/// [`Error::Shape`] when `data` does not hold the shape's elements; [`Error::Io`] when the
/// file cannot be written.
pub fn write_array<T: Element>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    write_array_claiming(path, shape, data, Claim::Replace)
}

/// As [`write_array`], the final name claimed as `claim` says ([`Claim::Refuse`]: a file at
/// `path` by the time of the rename is an error naming it, never replaced).
///
/// # Errors
/// As [`write_array`]; the claim's refusal.
pub fn write_array_claiming<T: Element>(
    path: &Path,
    shape: &[usize],
    data: &[T],
    claim: Claim,
) -> Result<()> {
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if n != Some(data.len()) {
        return Err(Error::shape(
            format!("array written to {}", path.display()),
            format!(
                "{} elements (shape {})",
                n.unwrap_or(usize::MAX),
                shape_text(shape)
            ),
            format!("{} elements", data.len()),
        ));
    }
    let mut w = NpyWriter::<T>::create(path, shape)?;
    w.set_claim(claim);
    w.write(data)?;
    w.finish()
}

/// Writes `frames x rows x cols` `uint16` samples (C order) as a 3-D array.
///
/// # Errors
/// As [`write_array`].
pub fn write_u16_3d(
    path: &Path,
    frames: usize,
    rows: usize,
    cols: usize,
    data: &[u16],
) -> Result<()> {
    write_array(path, &[frames, rows, cols], data)
}

/// Writes frames as a 3-D `uint16` array.
///
/// # Errors
/// As [`write_array`].
pub fn write_frames(path: &Path, frames: Frames<'_>) -> Result<()> {
    write_u16_3d(
        path,
        frames.len(),
        frames.rows(),
        frames.cols(),
        frames.as_slice(),
    )
}

/// Writes a `rows x cols` `float32` matrix (C order).
///
/// # Errors
/// As [`write_array`].
pub fn write_f32_2d(path: &Path, rows: usize, cols: usize, data: &[f32]) -> Result<()> {
    write_array(path, &[rows, cols], data)
}

/// Writes a `rows x cols` `float64` matrix (C order).
///
/// # Errors
/// As [`write_array`].
pub fn write_f64_2d(path: &Path, rows: usize, cols: usize, data: &[f64]) -> Result<()> {
    write_array(path, &[rows, cols], data)
}
