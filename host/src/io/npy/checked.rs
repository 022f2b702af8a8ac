//! A `.npy` file opened with its header checked against the file (dtype, order, dimensions,
//! the data's length), and its elements read in host byte order.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::element::Element;
use super::header::{NpyHeader, file_len, read_header_from};
use crate::error::{Error, Result};

/// Opens `path`, parses its header and checks dtype `T`, C order, the dimensionality
/// (`dims`, described by `what`) and that the data is exactly as long as the shape says.
/// Returns the open file (positioned at the data), the header and the element count.
pub(super) fn open_checked<T: Element>(
    path: &Path,
    dims: &[usize],
    what: &str,
) -> Result<(File, NpyHeader, usize)> {
    let mut file = crate::io::checks::open_regular(path)?;
    let len = file_len(&file, path)?;
    let h = read_header_from(&mut file, len, path)?;
    h.expect_dtype::<T>(path)?;
    if h.fortran_order {
        return Err(Error::format(
            path,
            "Fortran-order array: cluda reads C-order arrays only (save it with np.ascontiguousarray)",
        ));
    }
    if !dims.contains(&h.shape.len()) {
        return Err(Error::format(
            path,
            format!(
                "expected {what}, got a {}-D array of shape {}",
                h.shape.len(),
                h.shape_text()
            ),
        ));
    }
    let too_large = || {
        Error::format(
            path,
            format!(
                "shape {} is too large to address on this machine",
                h.shape_text()
            ),
        )
    };
    let elements = h.elements().ok_or_else(too_large)?;
    let bytes = elements.checked_mul(T::SIZE).ok_or_else(too_large)? as u64;
    let have = len - h.data_offset;
    if have < bytes {
        return Err(Error::format(
            path,
            format!(
                "truncated data: shape {} of {} needs {bytes} bytes after the {}-byte header, the file holds {have}",
                h.shape_text(),
                T::NAME,
                h.data_offset
            ),
        ));
    }
    if have > bytes {
        return Err(Error::format(
            path,
            format!(
                "{} bytes after the data that shape {} of {} declares: not a valid .npy file",
                have - bytes,
                h.shape_text(),
                T::NAME
            ),
        ));
    }
    Ok((file, h, elements))
}

/// A read of frames `a .. b` of `path` that hit the end of the file becomes an
/// [`Error::Format`] naming the file and the frames (the bare "failed to fill whole buffer"
/// said neither); other errors pass unchanged.
pub(super) fn shrunk(e: Error, path: &Path, a: usize, b: usize) -> Error {
    match e {
        Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
            let len = std::fs::metadata(path).map_or_else(|_| "?".into(), |m| m.len().to_string());
            Error::format(
                path,
                format!(
                    "frames {a}..{b} are not all there: the file ends at byte {len}, before them (it is shorter than its header says; did it shrink while being read?)"
                ),
            )
        }
        e => e,
    }
}

/// Reads `out.len()` elements from `file` and converts them to host byte order.
pub(super) fn read_elements<T: Element>(
    file: &mut File,
    out: &mut [T],
    swap: bool,
    path: &Path,
) -> Result<()> {
    file.read_exact(bytemuck::cast_slice_mut(out))
        .map_err(|e| Error::io(path, e))?;
    if swap {
        for v in out.iter_mut() {
            *v = v.swap_bytes();
        }
    }
    Ok(())
}
