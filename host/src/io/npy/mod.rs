//! NumPy `.npy` files: reading and writing `uint16` frame stacks and `float32`/`float64`
//! matrices.
//!
//! Read: format versions 1.0, 2.0 and 3.0. The header dict must hold exactly the keys
//! `descr`, `fortran_order` and `shape`. Supported element types are `uint16` (`'<u2'`, and
//! big-endian `'>u2'`, which is byte-swapped on reading), `float32` (`'<f4'`/`'>f4'`) and
//! `float64` (`'<f8'`/`'>f8'`); arrays must be in C order. The data must be exactly as long
//! as the shape says: the declared size is checked against the file's length *before*
//! anything is allocated, so a corrupt header declaring 10^12 frames is an error, not an
//! allocation. Every failure is an [`Error::Format`] or [`Error::Io`] naming the file.
//!
//! Frame stacks are `frames x rows x cols` (3-D); a 2-D `rows x cols` array is one frame.
//! [`NpyFrames`] reads them a chunk of frames at a time, so files larger than memory can be
//! processed; [`NpyWriter`] writes them a chunk at a time. Written files are version 1.0
//! (2.0 only if the header would not fit), little-endian, C order, with the header padded to
//! a multiple of 64 bytes as NumPy does.
//!
//! Why a reader of its own rather than the `npyz` crate: reading a page-cached 2000 x 400 x
//! 400 `uint16` file (640 MB) into a `Vec<u16>` took 1.3-1.5 s here against 2.7-2.8 s with
//! `npyz` 0.9 (`NpyFile::into_vec`, element by element), on a shared 2-core machine. This
//! module also reads frame stacks in chunks ([`NpyFrames`]), checks the declared size against
//! the file's length before allocating, and words every error with the file and the faulty
//! header field, which `npyz` does not do out of the box.

use std::fs::File;
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use super::atomic::{AtomicFile, Claim};
use super::guarded_map::GuardedMap;
use super::write_behind::{DEFAULT_WRITE_THREADS, WriteBehind};
use crate::error::{Error, Result};
use crate::frames::Frames;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Largest header cluda reads (NumPy itself refuses headers above 10 000 bytes by default).
pub const MAX_HEADER_LEN: usize = 1 << 20;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An element type cluda reads and writes in `.npy` files: `u16`, `u32` (sub-pixel images),
/// `f32` or `f64`.
pub trait Element: bytemuck::Pod + sealed::Sealed {
    /// NumPy's kind letter (`u` unsigned, `f` float).
    const KIND: char;
    /// Bytes per element.
    const SIZE: usize;
    /// NumPy's name for the type, for messages.
    const NAME: &'static str;
    /// The value with its bytes reversed (for files of the other endianness).
    fn swap_bytes(self) -> Self;
    /// The little-endian descriptor written to files, e.g. `<u2`.
    fn descr() -> String {
        format!("<{}{}", Self::KIND, Self::SIZE)
    }
}

impl Element for u16 {
    const KIND: char = 'u';
    const SIZE: usize = 2;
    const NAME: &'static str = "uint16";
    fn swap_bytes(self) -> Self {
        u16::swap_bytes(self)
    }
}

impl Element for u32 {
    const KIND: char = 'u';
    const SIZE: usize = 4;
    const NAME: &'static str = "uint32";
    fn swap_bytes(self) -> Self {
        u32::swap_bytes(self)
    }
}

impl Element for f32 {
    const KIND: char = 'f';
    const SIZE: usize = 4;
    const NAME: &'static str = "float32";
    fn swap_bytes(self) -> Self {
        f32::from_bits(self.to_bits().swap_bytes())
    }
}

impl Element for f64 {
    const KIND: char = 'f';
    const SIZE: usize = 8;
    const NAME: &'static str = "float64";
    fn swap_bytes(self) -> Self {
        f64::from_bits(self.to_bits().swap_bytes())
    }
}

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

fn shape_text(shape: &[usize]) -> String {
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
    let mut file = super::checks::open_regular(path)?;
    let len = file_len(&file, path)?;
    read_header_from(&mut file, len, path)
}

fn file_len(file: &File, path: &Path) -> Result<u64> {
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
        if let Some(hint) = super::raw::data_file_hint(path) {
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

/// The three values of a header dict.
struct Dict {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// A value of the header dict's tiny Python-literal grammar.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
    /// A `[...]` list: only a structured `descr` is one; the key decides the message.
    List,
}

/// Parses `{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_dict(text: &str) -> std::result::Result<Dict, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        let value = p.value()?;
        let dup = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            ("descr", Value::List) => {
                return Err("'descr' lists (structured dtypes) are not supported".into());
            }
            ("descr", _) => {
                return Err(
                    "'descr' must be a string (structured dtypes are not supported)".into(),
                );
            }
            ("fortran_order", _) => return Err("'fortran_order' must be True or False".into()),
            ("shape", Value::List) => {
                return Err("'shape' must be a tuple of integers, not a list".into());
            }
            ("shape", _) => return Err("'shape' must be a tuple of integers".into()),
            (other, _) => return Err(format!("unexpected key '{other}' in the header dict")),
        };
        if dup {
            return Err(format!("key '{key}' appears twice"));
        }
        p.ws();
        if p.eat(b',') {
            continue;
        }
        p.expect(b'}')?;
        break;
    }
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected text after the dict at byte {}", p.i));
    }
    let missing = |k| format!("the header dict has no '{k}' key");
    Ok(Dict {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", c as char)))
        }
    }

    fn unexpected(&self, what: &str) -> String {
        match self.s.get(self.i) {
            Some(&c) => format!("expected {what} at byte {}, found '{}'", self.i, c as char),
            None => format!("expected {what} at byte {}, found the end", self.i),
        }
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        self.ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(self.unexpected("a quoted string")),
        };
        let start = self.i + 1;
        let end = self.s[start..]
            .iter()
            .position(|&c| c == q || c == b'\\')
            .map(|k| start + k)
            .ok_or_else(|| format!("unterminated string at byte {}", self.i))?;
        if self.s[end] == b'\\' {
            return Err(format!("escape sequences are not supported (byte {end})"));
        }
        self.i = end + 1;
        Ok(String::from_utf8_lossy(&self.s[start..end]).into_owned())
    }

    fn value(&mut self) -> std::result::Result<Value, String> {
        self.ws();
        let rest = &self.s[self.i..];
        if rest.starts_with(b"True") {
            self.i += 4;
            Ok(Value::Bool(true))
        } else if rest.starts_with(b"False") {
            self.i += 5;
            Ok(Value::Bool(false))
        } else if rest.starts_with(b"(") {
            self.i += 1;
            let mut dims = Vec::new();
            loop {
                if self.eat(b')') {
                    break;
                }
                dims.push(self.int()?);
                if self.eat(b',') {
                    continue;
                }
                self.expect(b')')?;
                break;
            }
            Ok(Value::Tuple(dims))
        } else if rest.starts_with(b"'") || rest.starts_with(b"\"") {
            Ok(Value::Str(self.string()?))
        } else if rest.starts_with(b"[") {
            self.skip_list()?;
            Ok(Value::List)
        } else {
            Err(self.unexpected("a string, True, False or a tuple"))
        }
    }

    /// Skips a bracketed list (nested brackets included; strings are not interpreted).
    fn skip_list(&mut self) -> std::result::Result<(), String> {
        let start = self.i;
        let mut depth = 0usize;
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                b'[' => depth += 1,
                b']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        }
        Err(format!("unterminated list at byte {start}"))
    }

    fn int(&mut self) -> std::result::Result<usize, String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.unexpected("a non-negative integer"));
        }
        let digits = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        let v = digits
            .parse::<usize>()
            .map_err(|_| format!("dimension {digits} is too large"))?;
        // Python 2 wrote long integers as `3L`.
        if self.s.get(self.i) == Some(&b'L') {
            self.i += 1;
        }
        Ok(v)
    }
}

/// Opens `path`, parses its header and checks dtype `T`, C order, the dimensionality
/// (`dims`, described by `what`) and that the data is exactly as long as the shape says.
/// Returns the open file (positioned at the data), the header and the element count.
fn open_checked<T: Element>(
    path: &Path,
    dims: &[usize],
    what: &str,
) -> Result<(File, NpyHeader, usize)> {
    let mut file = super::checks::open_regular(path)?;
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
fn shrunk(e: Error, path: &Path, a: usize, b: usize) -> Error {
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
fn read_elements<T: Element>(
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
/// [`Error::Io`] or [`Error::Format`] as for [`read_header`], and [`Error::Format`] when the
/// element type is not `T`.
pub fn read_array<T: Element>(path: &Path) -> Result<NpyArray<T>> {
    let (mut file, h, n) = open_checked::<T>(path, &[0, 1, 2, 3, 4, 5, 6, 7, 8], "an array")?;
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
    let (mut file, h, n) = open_checked::<f32>(path, &[2], "a 2-D array (rows x cols)")?;
    let mut data = crate::memory::zeroed_vec::<f32>(|| format!("reading {}", path.display()), n)?;
    read_elements(&mut file, &mut data, h.needs_swap(), path)?;
    Ok(NpyArray {
        shape: h.shape,
        data,
    })
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

/// Frames in a read-only memory map of their file (see [`crate::io::FrameSource::map_rest`]).
#[derive(Clone, Debug)]
pub struct MappedFrames {
    /// The file's map, guarded: a read of it beyond the file's end (another program truncated
    /// the file) reads zeros and sets [`GuardedMap::faulted`] instead of raising SIGBUS.
    pub map: std::sync::Arc<GuardedMap>,
    /// The file itself: its length is checked before each piece of the map is used (a file
    /// that shrank is caught there as an error, before a read of the map finds it).
    pub file: std::sync::Arc<std::fs::File>,
    /// The file's path, for errors.
    pub path: std::path::PathBuf,
    /// Byte offset of the first frame in the map (a multiple of 2).
    pub offset: usize,
    /// Frames from there.
    pub frames: usize,
    /// Frame number of the first of them.
    pub first_number: u64,
}

/// A `uint16` frame stack in a `.npy` file, read a chunk of frames at a time.
///
/// Opening checks everything (dtype, order, dimensionality, exact data length); afterwards
/// only an operating-system failure (or the file changing underneath) can make a read fail.
#[derive(Debug)]
pub struct NpyFrames {
    path: PathBuf,
    file: File,
    frames: usize,
    rows: usize,
    cols: usize,
    next: usize,
    swap: bool,
    /// Where the samples start in the file.
    data_offset: u64,
    /// Threads [`crate::io::FrameSource::fill`] reads with.
    threads: usize,
}

impl NpyFrames {
    /// Opens `path` and checks its header: `uint16`, C order, 3-D or 2-D (one frame).
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Format`] as for [`read_u16_frames`], from the header alone.
    pub fn open(path: &Path) -> Result<Self> {
        let (file, h, _) = open_checked::<u16>(
            path,
            &[2, 3],
            "a 3-D array (frames x rows x cols) or a 2-D array (one frame)",
        )?;
        let (frames, rows, cols) = match h.shape[..] {
            [r, c] => (1, r, c),
            [f, r, c] => (f, r, c),
            _ => return Err(Error::format(path, "expected a 2-D or 3-D array")),
        };
        if rows == 0 || cols == 0 {
            return Err(Error::format(
                path,
                format!(
                    "frames of shape {} x {} have no pixels (shape {})",
                    rows,
                    cols,
                    h.shape_text()
                ),
            ));
        }
        crate::io::readahead::sequential(&file);
        Ok(Self {
            path: path.to_path_buf(),
            file,
            frames,
            rows,
            cols,
            next: 0,
            swap: h.needs_swap(),
            data_offset: h.data_offset,
            threads: crate::io::readahead::read_threads(),
        })
    }

    /// Threads [`crate::io::FrameSource::fill`] reads with (1 ..= 64; default
    /// [`crate::io::readahead::read_threads`]).
    pub fn read_threads(&self) -> usize {
        self.threads
    }

    /// Sets the threads [`crate::io::FrameSource::fill`] reads with (clamped to 1 ..= 64).
    pub fn set_read_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 64);
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Frames in the file.
    pub fn len(&self) -> usize {
        self.frames
    }

    /// Whether the file holds no frames.
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

    /// Frames read so far.
    pub fn position(&self) -> usize {
        self.next
    }

    /// Frames not read yet.
    pub fn remaining(&self) -> usize {
        self.frames - self.next
    }

    /// Reads the next `min(max_frames, remaining())` frames into `buf` (resized to hold exactly
    /// them, reusing its allocation) and returns how many were read; 0 at the end.
    ///
    /// # Errors
    /// [`Error::Io`] when a read fails, [`Error::Format`] when the file is shorter than its
    /// header said (it changed after [`NpyFrames::open`]).
    pub fn read_into(&mut self, max_frames: usize, buf: &mut Vec<u16>) -> Result<usize> {
        let n = max_frames.min(self.remaining());
        buf.clear();
        let len = n * self.rows * self.cols;
        if buf.capacity() < len {
            let what = || {
                format!(
                    "{n} frames of {} x {} from {}",
                    self.rows,
                    self.cols,
                    self.path.display()
                )
            };
            let bytes = len as u64 * 2;
            crate::memory::check(what, bytes)?;
            buf.try_reserve_exact(len).map_err(|_| Error::TooLarge {
                what: what(),
                bytes,
                available: crate::memory::available_bytes().unwrap_or(0),
            })?;
        }
        buf.resize(len, 0);
        let first = self.next;
        read_elements(&mut self.file, buf, self.swap, &self.path)
            .map_err(|e| shrunk(e, &self.path, first, first + n))?;
        self.next += n;
        Ok(n)
    }

    /// Fills `dst` with the next `min(dst.len() / frame, remaining())` whole frames, read in
    /// place by up to `threads` threads at once (positioned reads of disjoint parts of the
    /// file, so a page-cached file is copied at the speed of several cores), and returns how
    /// many it read; 0 at the end. Then asks the kernel for the next chunk of the same size
    /// (`posix_fadvise(WILLNEED)`), so that a file not in the page cache is read from disk
    /// while this chunk is consumed.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when a read fails or the file is shorter than its header
    /// says.
    pub fn fill(&mut self, dst: &mut [u16], threads: usize) -> Result<usize> {
        use std::os::unix::fs::FileExt;
        let pixels = self.rows * self.cols;
        let n = (dst.len() / pixels).min(self.remaining());
        if n == 0 {
            return Ok(0);
        }
        let dst = &mut dst[..n * pixels];
        let offset = self.data_offset + (self.next * pixels * 2) as u64;
        // Parts of at least 4 MiB, so that small reads stay on one thread.
        let parts = threads.clamp(1, 64).min(dst.len().div_ceil(2 << 20).max(1));
        let per = dst.len().div_ceil(parts);
        let (file, path, swap) = (&self.file, &self.path, self.swap);
        std::thread::scope(|s| -> Result<()> {
            let mut jobs = Vec::new();
            let first = self.next;
            for (i, part) in dst.chunks_mut(per).enumerate() {
                let at = offset + (i * per * 2) as u64;
                // The frames this part (partly) holds, for the message of a short file.
                let (a, b) = (
                    first + i * per / pixels,
                    first + ((i + 1) * per).min(n * pixels).div_ceil(pixels),
                );
                jobs.push(s.spawn(move || -> Result<()> {
                    file.read_exact_at(bytemuck::cast_slice_mut(part), at)
                        .map_err(|e| shrunk(Error::io(path, e), path, a, b))?;
                    if swap {
                        for v in part.iter_mut() {
                            *v = v.swap_bytes();
                        }
                    }
                    Ok(())
                }));
            }
            for j in jobs {
                j.join()
                    .map_err(|_| Error::format(path, "a reader thread panicked"))??;
            }
            Ok(())
        })?;
        self.next += n;
        // Keep the sequential reads of `read_into` in step with the frames consumed here.
        let end = self.data_offset + (self.next * pixels * 2) as u64;
        // The disk reads the next chunk of the same size while this one is consumed.
        let ahead = self.remaining().min(n) * pixels * 2;
        crate::io::readahead::will_need(&self.file, end, ahead as u64);
        std::io::Seek::seek(&mut self.file, std::io::SeekFrom::Start(end))
            .map_err(|e| Error::io(&self.path, e))?;
        Ok(n)
    }

    /// Every frame not read yet as a read-only memory map of the file (see
    /// [`crate::io::FrameSource::map_rest`]); `None`, with nothing consumed, when the file's
    /// byte order is not the host's or it cannot be mapped.
    ///
    /// The map shows the file as it is: a file changed by another program while it is mapped
    /// changes the frames read (as a file changed during a read would). A file that shrinks
    /// never ends the process with SIGBUS: the map is a [`GuardedMap`], whose reads beyond the
    /// file's new end read zeros and set [`GuardedMap::faulted`]; the engine checks the file's
    /// length before each chunk and the mark before it hands on each frame's clusters, and
    /// either makes an error naming the file. A caller reading the map itself must check
    /// [`GuardedMap::faulted`] after reading and before trusting what it read. `None` too
    /// where maps cannot be guarded (see [`GuardedMap::new`]).
    pub fn map_rest(&mut self) -> Option<MappedFrames> {
        if self.swap || self.remaining() == 0 {
            return None;
        }
        let pixels = self.rows * self.cols;
        let offset = usize::try_from(self.data_offset).ok()? + self.next * pixels * 2;
        let map = GuardedMap::new(&self.file)?;
        let frames = self.remaining();
        if map.len() < offset + frames * pixels * 2 || !offset.is_multiple_of(2) {
            return None;
        }
        let file = self.file.try_clone().ok()?;
        let first_number = self.next as u64;
        self.next = self.frames;
        Some(MappedFrames {
            map: std::sync::Arc::new(map),
            file: std::sync::Arc::new(file),
            path: self.path.clone(),
            offset,
            frames,
            first_number,
        })
    }

    /// Reads the next `min(max_frames, remaining())` frames into a new vector.
    ///
    /// # Errors
    /// As [`NpyFrames::read_into`].
    pub fn read_chunk(&mut self, max_frames: usize) -> Result<Vec<u16>> {
        let mut buf = Vec::new();
        self.read_into(max_frames, &mut buf)?;
        Ok(buf)
    }
}

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

/// A row of a structured `.npy` (a record array): its NumPy `descr` (a `[...]` list of
/// little-endian fields) and its bytes in that layout.
pub trait Record: Copy {
    /// NumPy's descriptor of a row, e.g. `[('frame', '<i8'), ('x', '<f8')]`.
    const DESCR: &'static str;
    /// Appends the row's little-endian bytes (exactly the descriptor's item size) to `out`.
    fn extend_le(&self, out: &mut Vec<u8>);
}

/// Writes rows of a [`Record`] to a 1-D structured `.npy` a batch at a time (the row count
/// goes into the header at the end: the header leaves room for it), under a temporary name
/// until [`RecordWriter::finish`]. The rows are written by threads of their own
/// ([`WriteBehind::positioned`], as a cluster file is), so a caller that appends hundreds of
/// MB of photons spends a copy into a buffer on them, not the file system's write.
pub struct RecordWriter<R: Record> {
    path: PathBuf,
    out: WriteBehind<AtomicFile>,
    rows: usize,
    header_len: usize,
    scratch: Vec<u8>,
    _row: PhantomData<R>,
}

impl<R: Record> RecordWriter<R> {
    /// Starts `path`.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be created.
    pub fn create(path: &Path, claim: Claim) -> Result<Self> {
        let mut file = AtomicFile::create_claiming(path, claim)?;
        let header = header_bytes(R::DESCR, &[0]);
        file.write_all(&header).map_err(|e| Error::io(path, e))?;
        let out = WriteBehind::positioned(file, DEFAULT_WRITE_THREADS, 4)
            .map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            out,
            rows: 0,
            header_len: header.len(),
            scratch: Vec::new(),
            _row: PhantomData,
        })
    }

    /// Appends rows.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails.
    pub fn write(&mut self, rows: &[R]) -> Result<()> {
        self.scratch.clear();
        for r in rows {
            r.extend_le(&mut self.scratch);
        }
        self.write_bytes(rows.len())
    }

    /// Appends rows whose in-memory layout is already the file's (a packed, little-endian
    /// `Pod` type on a little-endian machine): no copy.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails.
    pub fn write_pod(&mut self, rows: &[R]) -> Result<()>
    where
        R: bytemuck::Pod,
    {
        if cfg!(target_endian = "little") {
            self.out
                .write_all(bytemuck::cast_slice(rows))
                .map_err(|e| Error::io(&self.path, e))?;
            self.rows += rows.len();
            Ok(())
        } else {
            self.write(rows)
        }
    }

    fn write_bytes(&mut self, rows: usize) -> Result<()> {
        self.out
            .write_all(&self.scratch)
            .map_err(|e| Error::io(&self.path, e))?;
        self.rows += rows;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Writes the row count into the header and renames the file into place; its path.
    ///
    /// # Errors
    /// [`Error::Io`] when writing or renaming fails.
    pub fn finish(self) -> Result<PathBuf> {
        use std::io::{Seek, SeekFrom};
        let header = header_bytes(R::DESCR, &[self.rows]);
        if header.len() != self.header_len {
            return Err(Error::Internal("a record header changed length".into()));
        }
        let io = |e| Error::io(&self.path, e);
        let (mut file, _) = self.out.finish().map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header).map_err(io)?;
        file.commit()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_padded_like_numpy() {
        let h = header_bytes("<u2", &[2, 3, 4]);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3, 4), }"));
        assert!(text.ends_with(" \n"));
    }

    #[test]
    fn dict_grammar() {
        let d = parse_dict("{\"descr\":\"<u2\",\"fortran_order\":False,\"shape\":(5L,)}").unwrap();
        assert_eq!(
            (d.descr.as_str(), d.fortran_order, d.shape),
            ("<u2", false, vec![5])
        );
        let d = parse_dict("{'shape': (), 'fortran_order': True, 'descr': '>f4'}  \n").unwrap();
        assert_eq!(
            (d.descr.as_str(), d.fortran_order, d.shape),
            (">f4", true, vec![])
        );
        for bad in [
            "",
            "{",
            "{'descr': '<u2'}",
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1, -2)}",
            "{'descr': '<u2', 'fortran_order': false, 'shape': (1,)}",
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (1,)}",
            "{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (1,)}",
            "{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1,)} x",
        ] {
            assert!(parse_dict(bad).is_err(), "{bad}");
        }
    }
}
