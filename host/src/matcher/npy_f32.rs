//! A small `.npy` reader for `n x 128` little-endian `float32` descriptor arrays and a writer
//! for match results (private to the matcher until it is merged with the shared npy module).
//!
//! Read: NumPy format versions 1.0, 2.0 and 3.0; `descr` must be `'<f4'`, `fortran_order`
//! `False`, `shape` `(n, 128)`. Anything else is an [`Error::Format`] naming the file.
//!
//! Written by `--out` (see [`write_matches`]): one `(n, 2)` `'<f8'` C-order array, column 0 the
//! right index (exact in f64), column 1 the squared distance (the f32 value, widened).

use std::fs;
use std::io::Write;
use std::path::Path;

use super::{DIM, Descriptor, Match};
use crate::error::{Error, Result};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Reads an `n x 128` float32 `.npy` file.
pub fn read_descriptors(path: &Path) -> Result<Vec<Descriptor>> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    parse_descriptors(&bytes).map_err(|reason| Error::format(path, reason))
}

/// Parses the bytes of an `n x 128` float32 `.npy` file; the error is the reason in words.
fn parse_descriptors(bytes: &[u8]) -> std::result::Result<Vec<Descriptor>, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a NumPy .npy file (missing the \\x93NUMPY magic)".into());
    }
    let major = bytes[6];
    let (header_len, start): (usize, usize) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err("truncated .npy header".into());
            }
            (
                u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                12,
            )
        }
        v => return Err(format!("unsupported .npy format version {v}.{}", bytes[7])),
    };
    let end = start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or("truncated .npy header")?;
    let header =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| "the .npy header is not text")?;
    let descr = dict_value(header, "descr").ok_or("the .npy header has no 'descr'")?;
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    if descr != "<f4" {
        return Err(format!(
            "dtype '{descr}' is not supported: descriptors must be little-endian float32 ('<f4')"
        ));
    }
    let fortran =
        dict_value(header, "fortran_order").ok_or("the .npy header has no 'fortran_order'")?;
    if fortran.trim() != "False" {
        return Err(
            "Fortran-order arrays are not supported: save the descriptors in C order".into(),
        );
    }
    let shape = dict_value(header, "shape").ok_or("the .npy header has no 'shape'")?;
    let dims: Vec<usize> = shape
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad shape entry '{s}'"))
        })
        .collect::<std::result::Result<_, _>>()?;
    if dims.len() != 2 || dims[1] != DIM {
        return Err(format!(
            "shape {shape} is not (n, {DIM}): descriptors must be a 2-D n x {DIM} array"
        ));
    }
    let n = dims[0];
    let need = n.checked_mul(DIM * 4).ok_or("shape too large")?;
    let data = &bytes[end..];
    if data.len() < need {
        return Err(format!(
            "truncated data: shape ({n}, {DIM}) needs {need} bytes, the file holds {}",
            data.len()
        ));
    }
    Ok(data[..need]
        .chunks_exact(DIM * 4)
        .map(|row| {
            let mut d = [0.0f32; DIM];
            for (v, b) in d.iter_mut().zip(row.chunks_exact(4)) {
                *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            d
        })
        .collect())
}

/// The raw text of `key`'s value in a NumPy header dict (up to the next top-level comma).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pos = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[pos + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..i]),
            _ => {}
        }
    }
    Some(rest)
}

/// Writes matches as one `(n, 2)` float64 `.npy` array: `[index, distance]` per left row.
pub fn write_matches(path: &Path, matches: &[Match]) -> Result<()> {
    let dict = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, 2), }}",
        matches.len()
    );
    let mut header_len = dict.len() + 1;
    header_len += (64 - (10 + header_len) % 64) % 64;
    let mut out = Vec::with_capacity(10 + header_len + matches.len() * 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    let hl = u16::try_from(header_len).map_err(|_| Error::format(path, "header too long"))?;
    out.extend_from_slice(&hl.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    for m in matches {
        out.extend_from_slice(&f64::from(m.index).to_le_bytes());
        out.extend_from_slice(&f64::from(m.distance).to_le_bytes());
    }
    let mut f = fs::File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(&out).map_err(|e| Error::io(path, e))
}

/// Writes descriptors as an `n x 128` float32 `.npy` file (tests, tools).
pub fn write_descriptors(path: &Path, rows: &[Descriptor]) -> Result<()> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {DIM}), }}",
        rows.len()
    );
    let mut header_len = dict.len() + 1;
    header_len += (64 - (10 + header_len) % 64) % 64;
    let mut out = Vec::with_capacity(10 + header_len + rows.len() * DIM * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    let hl = u16::try_from(header_len).map_err(|_| Error::format(path, "header too long"))?;
    out.extend_from_slice(&hl.to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    for v in rows.as_flattened() {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fs::write(path, out).map_err(|e| Error::io(path, e))
}
