//! NumPy `.npz` archives of `float64` arrays: what `numpy.savez` writes and `numpy.load`
//! reads (a zip archive with one `.npy` entry per array, named `<key>.npy`). cluda writes
//! eta cubes this way, so that `aare.Interpolator(**np.load("eta.npz"))` takes them as they
//! are, and reads cubes made by cluda or by hand.
//!
//! The zip container is the `zip` crate's; the entries are this crate's `.npy` headers. An
//! archive is written under a temporary name ([`AtomicFile`]) and appears whole or not at all.

use std::io::{Cursor, Read};
use std::path::Path;

use super::atomic::{AtomicFile, Claim};
use super::npy::{self, Element};
use crate::error::{Error, Result};

/// Largest entry read (1 GiB), so that a corrupt archive cannot ask for more.
const MAX_ENTRY_BYTES: u64 = 1 << 30;

/// One `float64` array: its shape and its values in C order.
#[derive(Clone, Debug, PartialEq)]
pub struct F64Array {
    /// The shape.
    pub shape: Vec<usize>,
    /// The values, C order.
    pub values: Vec<f64>,
}

/// Writes `arrays` (key, shape, values in C order) to `path` as an uncompressed `.npz`
/// (as `numpy.savez`), replacing nothing until the archive is whole; a file at `path` by
/// then is treated as `claim` says.
///
/// # Errors
/// [`Error::Shape`] when an array's values do not fill its shape; [`Error::Io`] naming the
/// file when writing fails.
pub fn write_f64(path: &Path, arrays: &[(&str, &[usize], &[f64])], claim: Claim) -> Result<()> {
    let mut out = AtomicFile::create_claiming(path, claim)?;
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(false);
        for &(key, shape, values) in arrays {
            let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if n != Some(values.len()) {
                return Err(Error::shape(
                    format!("array `{key}` of {}", path.display()),
                    format!("{} values (shape {shape:?})", n.unwrap_or(usize::MAX)),
                    format!("{} values", values.len()),
                ));
            }
            zip.start_file(format!("{key}.npy"), options)
                .map_err(|e| zip_error(path, e))?;
            let mut bytes = npy::header_bytes(&f64::descr(), shape);
            for v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            std::io::Write::write_all(&mut zip, &bytes).map_err(|e| Error::io(path, e))?;
        }
        zip.finish().map_err(|e| zip_error(path, e))?;
    }
    out.commit().map(|_| ())
}

/// Reads every entry of the `.npz` at `path` as a `float64` array, by key (the entry name
/// without `.npy`), in archive order.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read; [`Error::Format`] naming the file and the key
/// for anything that is not a C-order `float64` (`<f8` or `>f8`) `.npy` entry, or an entry
/// larger than 1 GiB.
pub fn read_f64(path: &Path) -> Result<Vec<(String, F64Array)>> {
    let file = super::checks::open_regular(path)?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| Error::format(path, format!("not a NumPy .npz archive (a zip file): {e}")))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| zip_error(path, e))?;
        let name = entry.name().to_string();
        let key = name.strip_suffix(".npy").unwrap_or(&name).to_string();
        let size = entry.size();
        if size > MAX_ENTRY_BYTES {
            return Err(Error::format(
                path,
                format!("entry `{name}` holds {size} bytes, more than the 1 GiB cluda reads"),
            ));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(MAX_ENTRY_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(path, e))?;
        let entry_path = path.join(&name);
        let h = npy::read_header_from(&mut Cursor::new(&bytes), bytes.len() as u64, &entry_path)?;
        h.expect_dtype::<f64>(&entry_path)?;
        if h.fortran_order {
            return Err(Error::format(
                &entry_path,
                "Fortran-order array: cluda reads C-order arrays only",
            ));
        }
        let n = h
            .elements()
            .ok_or_else(|| Error::format(&entry_path, "shape too large"))?;
        let data = &bytes[h.data_offset as usize..];
        if data.len() as u64 != n as u64 * 8 {
            return Err(Error::format(
                &entry_path,
                format!(
                    "shape {} needs {} data bytes, the entry holds {}",
                    h.shape_text(),
                    n as u64 * 8,
                    data.len()
                ),
            ));
        }
        let swap = h.needs_swap();
        let values = data
            .chunks_exact(8)
            .map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                if swap {
                    a.reverse();
                }
                f64::from_le_bytes(a)
            })
            .collect();
        out.push((
            key,
            F64Array {
                shape: h.shape.clone(),
                values,
            },
        ));
    }
    Ok(out)
}

fn zip_error(path: &Path, e: zip::result::ZipError) -> Error {
    Error::format(path, format!(".npz archive: {e}"))
}
