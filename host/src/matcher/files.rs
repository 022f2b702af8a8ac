//! The matcher's files, on top of the shared [`crate::io::npy`] reader and writer: `n x 128`
//! float32 descriptor arrays in, `(n, 2)` float64 match arrays out.
//!
//! Read ([`read_descriptors`]): any `.npy` file [`crate::io::npy`] reads (format versions 1.0,
//! 2.0 and 3.0, C order, either byte order) whose dtype is `float32` and whose shape is
//! `(n, 128)`. Anything else is an [`Error::Format`] (or [`Error::Io`]) naming the file.
//!
//! Written by `--out` ([`write_matches`]): one `(n, 2)` `'<f8'` C-order array, column 0 the
//! right index (exact in f64), column 1 the squared distance (the f32 value, widened).

use std::path::Path;

use super::types::{DIM, Descriptor, Match};
use crate::error::{Error, Result};
use crate::io::{Claim, npy};

/// Reads an `n x 128` float32 `.npy` file.
///
/// The shape is checked from the header first, so a file of the wrong shape is reported as
/// such (with its dtype) before its data length is looked at; dtype, order and length are then
/// checked by [`npy::read_f32_2d`].
///
/// # Errors
/// [`Error::Io`] or [`Error::Format`] as for [`crate::io::npy::read_f32_2d`], and
/// [`Error::Format`] unless the matrix has 128 columns.
pub fn read_descriptors(path: &Path) -> Result<Vec<Descriptor>> {
    let header = npy::read_header(path)?;
    if !matches!(header.shape[..], [_, DIM]) {
        return Err(Error::format(
            path,
            format!(
                "shape {} (dtype '{}') is not (n, {DIM}): descriptors must be a 2-D n x {DIM} float32 ('<f4') array",
                header.shape_text(),
                header.descr
            ),
        ));
    }
    // The file's array and the descriptor rows copied from it live at once.
    let bytes = (header.shape[0] as u64).saturating_mul(DIM as u64 * 4 * 2);
    crate::memory::check(
        || {
            format!(
                "reading {} descriptors from {}",
                header.shape[0],
                path.display()
            )
        },
        bytes,
    )?;
    let array = npy::read_f32_2d(path)?;
    if array.shape[..] != [header.shape[0], DIM] {
        // Only if the file was replaced between reading its header and its data.
        return Err(Error::format(
            path,
            "the file changed while it was being read",
        ));
    }
    let (rows, _) = array.data.as_chunks::<DIM>();
    Ok(rows.to_vec())
}

/// Writes matches as one `(n, 2)` float64 `.npy` array: `[index, distance]` per left row.
///
/// # Errors
/// [`Error::Io`] when the file cannot be written.
pub fn write_matches(path: &Path, matches: &[Match]) -> Result<()> {
    write_matches_claiming(path, matches, Claim::Replace)
}

/// As [`write_matches`], the final name claimed as `claim` says (`cluda match --out`:
/// [`Claim::Refuse`] unless `--overwrite`, so a file that appeared at `path` while the
/// matches were computed is an error naming it, never replaced).
///
/// # Errors
/// As [`write_matches`]; the claim's refusal.
pub fn write_matches_claiming(path: &Path, matches: &[Match], claim: Claim) -> Result<()> {
    let data: Vec<f64> = matches
        .iter()
        .flat_map(|m| [f64::from(m.index), f64::from(m.distance)])
        .collect();
    npy::write_array_claiming(path, &[matches.len(), 2], &data, claim)
}

/// Writes descriptors as an `n x 128` float32 `.npy` file (tests, tools).
///
/// # Errors
/// [`Error::Io`] when the file cannot be written.
pub fn write_descriptors(path: &Path, rows: &[Descriptor]) -> Result<()> {
    npy::write_f32_2d(path, rows.len(), DIM, rows.as_flattened())
}
