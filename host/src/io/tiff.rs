//! Uncompressed 32-bit grayscale TIFF images (baseline TIFF 6.0, little-endian, one strip):
//! what ImageJ/Fiji and most image tools open. Written by hand because it is a few dozen bytes
//! of header and no TIFF crate in the dependency set writes `u32` grayscale without pulling in
//! a decoder stack; images that would need BigTIFF (4 GiB and more) are refused.

use std::io::Write;
use std::path::Path;

use super::atomic::{AtomicFile, Claim};
use crate::error::{Error, Result};

/// Writes a `height x width` image of `u32` values (row-major) to `path`, a file there by
/// the commit treated as `claim` says.
///
/// # Errors
/// [`Error::Shape`] when `data` does not hold `height * width` values;
/// [`Error::InvalidParameter`] (`out`) for an image of 4 GiB or more (BigTIFF); [`Error::Io`]
/// naming the file when writing fails.
pub fn write_u32(
    path: &Path,
    height: usize,
    width: usize,
    data: &[u32],
    claim: Claim,
) -> Result<()> {
    if height.checked_mul(width) != Some(data.len()) {
        return Err(Error::shape(
            format!("image written to {}", path.display()),
            format!("{height} x {width} values"),
            format!("{} values", data.len()),
        ));
    }
    const IFD_ENTRIES: u16 = 10;
    let header = 8u64;
    let ifd = 2 + 12 * IFD_ENTRIES as u64 + 4;
    let data_offset = header + ifd;
    let bytes = data.len() as u64 * 4;
    if data_offset + bytes > u32::MAX as u64
        || height > u32::MAX as usize
        || width > u32::MAX as usize
    {
        return Err(Error::param(
            "out",
            format!(
                "{}: a {height} x {width} 32-bit image needs BigTIFF (4 GiB or more); write .npy instead",
                path.display()
            ),
        ));
    }
    let mut b = Vec::with_capacity(data_offset as usize);
    b.extend_from_slice(b"II");
    b.extend_from_slice(&42u16.to_le_bytes());
    b.extend_from_slice(&(header as u32).to_le_bytes());
    b.extend_from_slice(&IFD_ENTRIES.to_le_bytes());
    // (tag, type, count, value): type 3 SHORT, 4 LONG; entries in increasing tag order.
    let mut entry = |tag: u16, ty: u16, value: u32| {
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        if ty == 3 {
            b.extend_from_slice(&(value as u16).to_le_bytes());
            b.extend_from_slice(&[0, 0]);
        } else {
            b.extend_from_slice(&value.to_le_bytes());
        }
    };
    entry(256, 4, width as u32); // ImageWidth
    entry(257, 4, height as u32); // ImageLength
    entry(258, 3, 32); // BitsPerSample
    entry(259, 3, 1); // Compression: none
    entry(262, 3, 1); // PhotometricInterpretation: black is zero
    entry(273, 4, data_offset as u32); // StripOffsets
    entry(277, 3, 1); // SamplesPerPixel
    entry(278, 4, height as u32); // RowsPerStrip
    entry(279, 4, bytes as u32); // StripByteCounts
    entry(339, 3, 1); // SampleFormat: unsigned integer
    b.extend_from_slice(&0u32.to_le_bytes()); // no next IFD
    debug_assert_eq!(b.len() as u64, data_offset);
    let mut out = AtomicFile::create_claiming(path, claim)?;
    out.write_all(&b).map_err(|e| Error::io(path, e))?;
    let mut chunk = Vec::with_capacity(1 << 20);
    for piece in data.chunks(1 << 18) {
        chunk.clear();
        for v in piece {
            chunk.extend_from_slice(&v.to_le_bytes());
        }
        out.write_all(&chunk).map_err(|e| Error::io(path, e))?;
    }
    out.commit().map(|_| ())
}
