//! Frame stacks read a chunk of frames at a time, streamed or mapped ([`NpyFrames`]).

use std::fs::File;
use std::path::{Path, PathBuf};

use super::checked::{open_checked, read_elements, shrunk};
use crate::error::{Error, Result};
use crate::io::guarded_map::GuardedMap;

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
    /// [`Error::Io`] or [`Error::Format`] as for [`read_u16_frames`](super::read::read_u16_frames), from the header alone.
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
