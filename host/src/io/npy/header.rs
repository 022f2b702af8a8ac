//! The `.npy` header: its magic, versions and dict, read and checked against the file.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::dict::parse_dict;
use super::element::Element;
use crate::error::{Error, Result};

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header cluda reads (NumPy itself refuses headers above 10 000 bytes by default).
pub const MAX_HEADER_LEN: usize = 1 << 20;

/// A parsed `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// Format version (major, minor).
    pub version: (u8, u8),
    /// The `descr` string as written, e.g. `<u2`.
    pub descr: String,
    /// Whether the data is in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Byte offset of the data from the start of the file.
    pub data_offset: u64,
}

impl NpyHeader {
    /// Elements the shape declares, or `None` if that overflows.
    pub fn elements(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    /// The shape as NumPy prints it, e.g. `(2, 3)` or `(5,)`.
    pub fn shape_text(&self) -> String {
        shape_text(&self.shape)
    }

    /// Whether the data's byte order is big-endian (`>`), and so must be swapped on this host.
    pub(crate) fn needs_swap(&self) -> bool {
        let big = match self.descr.as_bytes().first() {
            Some(b'>') => true,
            Some(b'=') => cfg!(target_endian = "big"),
            _ => false,
        };
        big != cfg!(target_endian = "big")
    }

    /// Checks that the descriptor is `T` in a byte order cluda reads.
    pub(crate) fn expect_dtype<T: Element>(&self, path: &Path) -> Result<()> {
        let d = self.descr.as_bytes();
        let ok = d.len() >= 2
            && matches!(d[0], b'<' | b'>' | b'=')
            && d[1] as char == T::KIND
            && self.descr[2..] == T::SIZE.to_string();
        if ok {
            return Ok(());
        }
        Err(Error::format(
            path,
            format!(
                "dtype '{}' is not supported here: expected {} ('{}', or '>{}{}' big-endian)",
                self.descr,
                T::NAME,
                T::descr(),
                T::KIND,
                T::SIZE
            ),
        ))
    }
}

pub(super) fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Reads and parses the header of the `.npy` file at `path` (nothing else is read).
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or read; [`Error::Format`] naming the file
/// when it is not a `.npy` file cluda reads (magic, version, header dict, element type, order,
/// shape, or a length that does not match the shape).
pub fn read_header(path: &Path) -> Result<NpyHeader> {
    let mut file = crate::io::checks::open_regular(path)?;
    let len = file_len(&file, path)?;
    read_header_from(&mut file, len, path)
}

pub(super) fn file_len(file: &File, path: &Path) -> Result<u64> {
    Ok(file.metadata().map_err(|e| Error::io(path, e))?.len())
}

/// Reads the header from the start of `file` (of `len` bytes; a file, or an entry of an
/// `.npz` archive), naming `path` in errors.
pub(crate) fn read_header_from<R: Read>(file: &mut R, len: u64, path: &Path) -> Result<NpyHeader> {
    let fmt = |reason: String| Error::format(path, reason);
    let mut pre = [0u8; 8];
    let got = read_up_to(file, &mut pre, path)?;
    if got < 6 || &pre[..6] != MAGIC {
        let mut reason =
            "not a NumPy .npy file: it does not start with the \\x93NUMPY magic string".to_string();
        // A raw data file given where its master file belongs: say which file to give.
        if let Some(hint) = crate::io::raw::data_file_hint(path) {
            reason = format!("{reason}; {hint}");
        }
        return Err(fmt(reason));
    }
    if got < 8 {
        return Err(fmt(
            "truncated .npy header: the file ends inside the version bytes".into(),
        ));
    }
    let version = (pre[6], pre[7]);
    let len_bytes = match version.0 {
        1 => 2,
        2 | 3 => 4,
        _ => {
            return Err(fmt(format!(
                "unsupported .npy format version {}.{} (cluda reads 1.0, 2.0 and 3.0)",
                version.0, version.1
            )));
        }
    };
    let mut lb = [0u8; 4];
    if read_up_to(file, &mut lb[..len_bytes], path)? < len_bytes {
        return Err(fmt(
            "truncated .npy header: the file ends inside the header length".into(),
        ));
    }
    let header_len = u32::from_le_bytes(lb) as usize;
    let start = 8 + len_bytes as u64;
    if header_len > MAX_HEADER_LEN {
        return Err(fmt(format!(
            "bad .npy header: it declares a {header_len}-byte header, more than the {MAX_HEADER_LEN} bytes cluda accepts"
        )));
    }
    if start + header_len as u64 > len {
        return Err(fmt(format!(
            "truncated .npy header: it declares {header_len} header bytes but the file has only {} after the header length",
            len.saturating_sub(start)
        )));
    }
    let mut raw = vec![0u8; header_len];
    file.read_exact(&mut raw).map_err(|e| Error::io(path, e))?;
    // Versions 1 and 2 are latin-1 (only ASCII matters to the dict), version 3 is UTF-8.
    let text: String = if version.0 == 3 {
        String::from_utf8(raw).map_err(|_| fmt("bad .npy header: not valid UTF-8".into()))?
    } else {
        raw.iter().map(|&b| b as char).collect()
    };
    let dict = parse_dict(&text).map_err(|r| fmt(format!("bad .npy header: {r}")))?;
    Ok(NpyHeader {
        version,
        descr: dict.descr,
        fortran_order: dict.fortran_order,
        shape: dict.shape,
        data_offset: start + header_len as u64,
    })
}

/// Fills as much of `buf` as the file holds; returns the bytes read.
fn read_up_to<R: Read>(file: &mut R, buf: &mut [u8], path: &Path) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(n)
}
