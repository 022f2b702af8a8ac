//! Runs of `[header][image]` records read in place: each record's header into a header
//! array, its image straight into its place in the caller's frame buffer, with vectored
//! positioned reads (`preadv`, one call per up to 512 records), so no frame is copied on the
//! host; runs are spread over several threads, as `.npy` chunks are.
//!
//! Hand-written rather than a crate: the standard library's vectored positioned read
//! (`FileExt::read_vectored_at`) is not stable, and no well-kept crate offers one over
//! `libc::preadv` with short-read handling; this module is that loop, and only that.

use std::fs::File;
use std::path::Path;

use super::header::HEADER_BYTES;
use super::pixel_map::PixelMap;
use crate::error::{Error, Result};

/// The bytes of one record header.
pub type HeaderBytes = [u8; HEADER_BYTES];

/// iovecs per `preadv` call: Linux's `UIO_MAXIOV` (`IOV_MAX`), 1024, two per record.
const MAX_IOV: usize = 1024;

/// Records mapped per batch for ADC-ordered frames (per-thread scratch of this many raw
/// frames: 5 MiB for MOENCH 03).
const MAP_BATCH: usize = 16;

/// Default for the least bytes a reading thread is given, so that small fills stay on one
/// thread (a thread's start costs about what reading 1 MiB from the page cache does).
pub const MIN_PART_BYTES: u64 = 4 << 20;

/// A contiguous run of records of one data file, to read.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'f> {
    /// The open data file.
    pub file: &'f File,
    /// Its path, for errors.
    pub path: &'f Path,
    /// Index (within the file) of the run's first record.
    pub first: u64,
    /// Records in the run.
    pub count: usize,
}

/// How records are laid out and read.
#[derive(Clone, Copy, Debug)]
pub struct Layout<'m> {
    /// Bytes of one record (header and image).
    pub record_bytes: u64,
    /// Samples of one image.
    pub pixels: usize,
    /// For ADC-ordered frames, the map into image order.
    pub map: Option<&'m PixelMap>,
    /// Threads to read with at most.
    pub threads: usize,
    /// Least bytes of records per thread (the last part excepted).
    pub min_part_bytes: u64,
}

/// Consecutive records of one file and where they go.
type Piece<'a, 'f> = (Segment<'f>, &'a mut [HeaderBytes], &'a mut [u16]);

/// Reads the records of `segments` (in order) as `layout` says, each thread given
/// consecutive records: record `i`'s header into `headers[i]` and its image (converted from
/// little-endian, put into image order by the map when given) into `images[i * pixels ..]`.
/// `headers` and `images` hold exactly the segments' records. `scratch` keeps one buffer
/// per thread for ADC-ordered frames from call to call (so their pages are not faulted in
/// again for every batch).
///
/// # Errors
/// [`Error::Format`] naming the file and record when a file ends before a record it was
/// sized for (it shrank while being read); [`Error::Io`] when a read fails.
pub fn read_segments(
    segments: &[Segment<'_>],
    layout: Layout<'_>,
    scratch: &mut Vec<Vec<u16>>,
    headers: &mut [HeaderBytes],
    images: &mut [u16],
) -> Result<()> {
    let Layout {
        record_bytes,
        pixels,
        map,
        threads,
        min_part_bytes,
    } = layout;
    let total: usize = segments.iter().map(|s| s.count).sum();
    debug_assert_eq!(headers.len(), total);
    debug_assert_eq!(images.len(), total * pixels);
    if total == 0 {
        return Ok(());
    }
    let bytes = total as u64 * record_bytes;
    let parts = (threads.clamp(1, 64) as u64)
        .min(bytes.div_ceil(min_part_bytes.max(1)).max(1))
        .min(total as u64) as usize;
    let per = total.div_ceil(parts);
    // Each part: `per` consecutive records, split at file boundaries.
    let mut jobs: Vec<Vec<Piece<'_, '_>>> = Vec::new();
    let (mut hs, mut is) = (headers, images);
    let mut room = 0usize;
    for s in segments {
        let mut seg = *s;
        while seg.count > 0 {
            if room == 0 {
                jobs.push(Vec::new());
                room = per;
            }
            let take = seg.count.min(room);
            let (h, hrest) = std::mem::take(&mut hs).split_at_mut(take);
            let (i, irest) = std::mem::take(&mut is).split_at_mut(take * pixels);
            (hs, is) = (hrest, irest);
            let piece = Segment { count: take, ..seg };
            if let Some(job) = jobs.last_mut() {
                job.push((piece, h, i));
            }
            seg.first += take as u64;
            seg.count -= take;
            room -= take;
        }
    }
    if scratch.len() < jobs.len() {
        scratch.resize_with(jobs.len(), Vec::new);
    }
    let run_job = |(job, scratch): (Vec<Piece<'_, '_>>, &mut Vec<u16>)| -> Result<()> {
        for (seg, h, i) in job {
            read_run(seg, record_bytes, pixels, map, scratch, h, i)?;
        }
        Ok(())
    };
    if jobs.len() == 1 {
        return jobs
            .into_iter()
            .zip(scratch.iter_mut())
            .try_for_each(run_job);
    }
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = jobs
            .into_iter()
            .zip(scratch.iter_mut())
            .map(|work| s.spawn(move || run_job(work)))
            .collect();
        let mut first_err = None;
        for h in handles {
            let r = h
                .join()
                .map_err(|_| Error::Internal("a raw reader thread panicked".into()))
                .and_then(|r| r);
            if let (Err(e), None) = (r, &first_err) {
                first_err = Some(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    })
}

/// Reads one run: images straight into `images` (image order already), or through `scratch`
/// and `map` (ADC order).
fn read_run(
    seg: Segment<'_>,
    record_bytes: u64,
    pixels: usize,
    map: Option<&PixelMap>,
    scratch: &mut Vec<u16>,
    headers: &mut [HeaderBytes],
    images: &mut [u16],
) -> Result<()> {
    let batch = match map {
        None => MAX_IOV / 2,
        Some(_) => MAP_BATCH,
    };
    let mut done = 0usize;
    while done < seg.count {
        let n = batch.min(seg.count - done);
        let first = seg.first + done as u64;
        let hs = &mut headers[done..done + n];
        let is = &mut images[done * pixels..(done + n) * pixels];
        match map {
            None => {
                read_records(seg, first, record_bytes, hs, is, pixels)?;
                from_le(is);
            }
            Some(map) => {
                scratch.resize(n * pixels, 0);
                read_records(seg, first, record_bytes, hs, scratch, pixels)?;
                from_le(scratch);
                for (raw, out) in scratch
                    .chunks_exact(pixels)
                    .zip(is.chunks_exact_mut(pixels))
                {
                    map.to_image(raw, out);
                }
            }
        }
        done += n;
    }
    Ok(())
}

/// Converts little-endian samples read from a file to native order (no-op on little-endian).
pub fn from_le(v: &mut [u16]) {
    if cfg!(target_endian = "big") {
        for x in v {
            *x = u16::from_le(*x);
        }
    }
}

/// The error for a file that ends before record `index` (it was sized when opened).
pub fn shrunk(path: &Path, index: u64, e: impl std::fmt::Display) -> Error {
    Error::format(
        path,
        format!("reading record {index}: {e} (did the file shrink while being read?)"),
    )
}

/// Reads records `first .. first + headers.len()` of `seg.file` (consecutive on disk) with
/// as few `preadv` calls as the iovec limit allows.
#[cfg(target_os = "linux")]
fn read_records(
    seg: Segment<'_>,
    first: u64,
    record_bytes: u64,
    headers: &mut [HeaderBytes],
    images: &mut [u16],
    pixels: usize,
) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(headers.len() * 2);
    for (h, img) in headers.iter_mut().zip(images.chunks_exact_mut(pixels)) {
        iov.push(libc::iovec {
            iov_base: h.as_mut_ptr().cast(),
            iov_len: HEADER_BYTES,
        });
        iov.push(libc::iovec {
            iov_base: img.as_mut_ptr().cast(),
            iov_len: pixels * 2,
        });
    }
    let mut offset = first * record_bytes;
    let mut at = 0usize;
    while at < iov.len() {
        let count = (iov.len() - at).min(MAX_IOV);
        let pos = libc::off_t::try_from(offset)
            .map_err(|_| Error::format(seg.path, format!("offset {offset} out of range")))?;
        // SAFETY: every iovec points into `headers` or `images`, which are borrowed mutably
        // for this whole function and not otherwise touched while the call runs; the lengths
        // are those of the slices; `count` iovecs from `at` lie inside `iov`.
        let got = unsafe {
            libc::preadv(
                seg.file.as_raw_fd(),
                iov[at..].as_ptr(),
                count as libc::c_int,
                pos,
            )
        };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io(seg.path, e));
        }
        let mut got = got as usize;
        if got == 0 {
            let record = first + (at / 2) as u64;
            return Err(shrunk(seg.path, record, "failed to fill whole buffer"));
        }
        offset += got as u64;
        // Skip the iovecs filled, and shorten a partly filled one.
        while got > 0 {
            let v = &mut iov[at];
            if got >= v.iov_len {
                got -= v.iov_len;
                at += 1;
            } else {
                // SAFETY: `got < iov_len`, so the new base stays inside the same buffer.
                v.iov_base = unsafe { v.iov_base.cast::<u8>().add(got) }.cast();
                v.iov_len -= got;
                got = 0;
            }
        }
    }
    Ok(())
}

/// As the Linux version, with one positioned read per header and image.
#[cfg(not(target_os = "linux"))]
fn read_records(
    seg: Segment<'_>,
    first: u64,
    record_bytes: u64,
    headers: &mut [HeaderBytes],
    images: &mut [u16],
    pixels: usize,
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    for (k, (h, img)) in headers
        .iter_mut()
        .zip(images.chunks_exact_mut(pixels))
        .enumerate()
    {
        let index = first + k as u64;
        let at = index * record_bytes;
        seg.file
            .read_exact_at(h, at)
            .and_then(|()| {
                seg.file
                    .read_exact_at(bytemuck::cast_slice_mut(img), at + HEADER_BYTES as u64)
            })
            .map_err(|e| shrunk(seg.path, index, e))?;
    }
    Ok(())
}
