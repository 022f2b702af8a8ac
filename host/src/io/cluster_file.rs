//! aare's cluster file: clusters of many frames, frame after frame, little-endian.
//!
//! Per frame: `i32 frame_number`, `u32 n_clusters`, then `n_clusters` packed records
//! `{u16 x, u16 y, i32 data[X*Y]}` (docs/file-formats.md). The file does not store the cluster
//! size, so readers are told it. Frames without clusters are written too (count 0), so the
//! file lists every frame that was processed.
//!
//! The writer produces the same bytes on every host: on little-endian machines it writes a
//! frame's record buffer as is, on big-endian machines word by word in little-endian order.
//! The reader checks every count against the bytes left in the file before allocating, so a
//! corrupt count is an error that names the file and byte offset, never a huge allocation.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::atomic::{AtomicFile, Claim};
use crate::cluster::{ClusterBatch, ClusterSize, FrameClusters};
use crate::error::{Error, Result};
use crate::io::write_behind::{DEFAULT_WRITE_THREADS, MAX_WRITE_THREADS, WriteBehind, WriteStats};

/// Bytes of a frame header (`i32 frame_number`, `u32 n_clusters`).
pub const FRAME_HEADER_BYTES: usize = 8;

/// Writes aare cluster files, one frame at a time (the clusters are never all in memory).
pub struct ClusterFileWriter<W: Write> {
    path: PathBuf,
    out: W,
    frames: u64,
    clusters: u64,
    scratch: Vec<u8>,
}

impl ClusterFileWriter<WriteBehind<AtomicFile>> {
    /// Starts the file at `path`: written to a temporary file beside it ([`AtomicFile`]) and
    /// renamed over `path` by [`ClusterFileWriter::commit`]; dropped without a commit, the
    /// temporary file is removed and `path` is as it was. The bytes are written by
    /// [`DEFAULT_WRITE_THREADS`] threads of their own ([`WriteBehind::positioned`]), in large
    /// writes at their offsets, so writing overlaps the caller's work.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when the temporary file or the writer threads cannot be
    /// created.
    pub fn create(path: &Path) -> Result<Self> {
        Self::create_with_threads(path, DEFAULT_WRITE_THREADS)
    }

    /// As [`ClusterFileWriter::create`], written by `threads` writer threads (the bytes are
    /// the same for every count; more threads help only where the file system writes one
    /// file in parallel).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `threads` outside 1 ..= [`MAX_WRITE_THREADS`]; as
    /// [`ClusterFileWriter::create`].
    pub fn create_with_threads(path: &Path, threads: usize) -> Result<Self> {
        Self::create_claiming(path, threads, Claim::Replace)
    }

    /// As [`ClusterFileWriter::create_with_threads`], the final name claimed on commit as
    /// `claim` says ([`Claim::Refuse`]: a file that appeared at `path` meanwhile is an error,
    /// never replaced; [`Claim::NextFree`]: the next free name is taken instead).
    ///
    /// # Errors
    /// As [`ClusterFileWriter::create_with_threads`].
    pub fn create_claiming(path: &Path, threads: usize, claim: Claim) -> Result<Self> {
        if !(1..=MAX_WRITE_THREADS).contains(&threads) {
            return Err(Error::param(
                "write-threads",
                format!("must be between 1 and {MAX_WRITE_THREADS}, got {threads}"),
            ));
        }
        let file = AtomicFile::create_claiming(path, claim)?;
        let out = WriteBehind::positioned(file, threads, 4).map_err(|e| Error::io(path, e))?;
        Ok(Self::new(out, path))
    }

    /// Writes what is left, flushes, syncs and renames the file into place (its name claimed
    /// as it was created to, [`Claim`]); returns the path taken and what the writer threads
    /// did.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when a write, the sync or the rename fails, or when the
    /// claim refuses the name (the temporary file is removed and the final name is
    /// untouched).
    pub fn commit(self) -> Result<(PathBuf, WriteStats)> {
        let (file, stats) = self.out.finish().map_err(|e| Error::io(&self.path, e))?;
        Ok((file.commit()?, stats))
    }

    /// As [`ClusterFileWriter::commit`], renamed to the first of `names` that does not exist
    /// by then (none is replaced; [`AtomicFile::commit_first`]).
    ///
    /// # Errors
    /// As [`ClusterFileWriter::commit`]; every one of `names` exists.
    pub fn commit_first(
        self,
        names: impl IntoIterator<Item = PathBuf>,
    ) -> Result<(PathBuf, WriteStats)> {
        let (file, stats) = self.out.finish().map_err(|e| Error::io(&self.path, e))?;
        Ok((file.commit_first(names)?, stats))
    }
}

impl<W: Write> ClusterFileWriter<W> {
    /// Writes to `out`; `path` names it in errors.
    pub fn new(out: W, path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            out,
            frames: 0,
            clusters: 0,
            scratch: Vec::new(),
        }
    }

    /// Appends one frame's clusters under `frame_number`.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails; [`Error::Format`] when the frame holds more clusters
    /// than the format's `i32` count can say.
    pub fn write_frame(&mut self, frame_number: i32, clusters: &FrameClusters<'_>) -> Result<()> {
        let n = u32::try_from(clusters.len()).map_err(|_| {
            Error::format(
                &self.path,
                format!(
                    "frame {frame_number} has {} clusters, more than a cluster file's u32 count holds",
                    clusters.len()
                ),
            )
        })?;
        let mut head = [0u8; FRAME_HEADER_BYTES];
        head[..4].copy_from_slice(&frame_number.to_le_bytes());
        head[4..].copy_from_slice(&n.to_le_bytes());
        let io = |e| Error::io(&self.path, e);
        self.out.write_all(&head).map_err(io)?;
        // Each record word is `x | y << 16` or an i32 value: its little-endian bytes are
        // exactly aare's `u16 x, u16 y` / `i32` fields.
        if cfg!(target_endian = "little") {
            self.out.write_all(clusters.as_bytes()).map_err(io)?;
        } else {
            self.scratch.clear();
            for w in clusters.words() {
                self.scratch.extend_from_slice(&w.to_le_bytes());
            }
            self.out.write_all(&self.scratch).map_err(io)?;
        }
        self.frames += 1;
        self.clusters += n as u64;
        Ok(())
    }

    /// Appends every frame of `batch`, numbering frame `i` as `first_frame_number + i`.
    ///
    /// # Errors
    /// As [`ClusterFileWriter::write_frame`], and [`Error::Format`] naming the file when a frame
    /// number would overflow `i32`.
    pub fn write_batch(&mut self, first_frame_number: i32, batch: &ClusterBatch) -> Result<()> {
        for fc in batch.iter_frames() {
            let number = i32::try_from(fc.frame.get())
                .ok()
                .and_then(|i| first_frame_number.checked_add(i))
                .ok_or_else(|| {
                    Error::format(
                        &self.path,
                        format!(
                            "frame number {first_frame_number} + {} does not fit in the file's i32",
                            fc.frame
                        ),
                    )
                })?;
            self.write_frame(number, &fc)?;
        }
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Clusters written so far.
    pub fn clusters(&self) -> u64 {
        self.clusters
    }

    /// Flushes and returns the underlying writer (for a file from
    /// [`ClusterFileWriter::create`] use [`ClusterFileWriter::commit`], or nothing is kept).
    ///
    /// # Errors
    /// [`Error::Io`] when flushing fails.
    pub fn finish(mut self) -> Result<W> {
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.out)
    }
}

/// Writes a whole batch to `path`, frame `i` numbered `first_frame_number + i`.
///
/// # Errors
/// As [`ClusterFileWriter::create`], [`ClusterFileWriter::write_batch`] and
/// [`ClusterFileWriter::finish`].
pub fn write_cluster_file(
    path: &Path,
    first_frame_number: i32,
    batch: &ClusterBatch,
) -> Result<()> {
    let mut w = ClusterFileWriter::create(path)?;
    w.write_batch(first_frame_number, batch)?;
    w.commit()?;
    Ok(())
}

/// Whether `path` holds a whole cluster file of `size` clusters: every frame's header and
/// records parse and end exactly at the file's end (an empty file is one of no frames).
/// Reads the whole file once, without keeping it.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or read.
pub fn is_cluster_file(path: &Path, size: ClusterSize) -> Result<bool> {
    let mut r = ClusterFileReader::open(path, size)?;
    let mut words = Vec::new();
    loop {
        match r.next_frame(&mut words) {
            Ok(Some(_)) => {}
            Ok(None) => return Ok(true),
            Err(Error::Format { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
}

/// How [`write_cluster_frames`] treats a file already at its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Replace it, if it is a cluster file of the size written (anything else is refused:
    /// it may be another program's data).
    ReplaceClusterFile,
    /// Replace it, whatever it holds.
    Overwrite,
    /// Refuse it, whatever it holds: an error naming the file, also when it appears while
    /// the file is written (the final name is claimed by a rename that refuses an existing
    /// name, [`Claim::Refuse`]). What Python's `write_cluster_file` does by default.
    Refuse,
    /// Keep its frames and add the new ones after them (it must be a cluster file of the
    /// size written).
    Append,
}

/// Writes `frames` (frame number, its records' words) as a cluster file of `size` at `path`
/// through the same atomic path as `cluda find --out` ([`ClusterFileWriter::create`]: a
/// temporary file renamed into place when complete), so a failure (a full disk, an error in
/// the arguments) leaves `path` as it was and no partial file. With [`Existing::Append`] the
/// existing frames are copied into the temporary file first.
///
/// # Errors
/// [`Error::InvalidParameter`] (`path`) for an existing file that is not a cluster file of
/// `size` (unless [`Existing::Overwrite`]) or that is not a regular file; [`Error::Io`] of
/// kind [`std::io::ErrorKind::AlreadyExists`] for any existing file with
/// [`Existing::Refuse`], also one that appears while the file is written; [`Error::Format`]
/// for a frame whose words are not whole records; as [`ClusterFileWriter::create`],
/// [`ClusterFileWriter::write_frame`] and [`ClusterFileWriter::commit`].
pub fn write_cluster_frames(
    path: &Path,
    size: ClusterSize,
    frames: &[(i32, &[u32])],
    existing: Existing,
) -> Result<()> {
    let w = size.record_words();
    if let Some((n, words)) = frames.iter().find(|(_, words)| words.len() % w != 0) {
        return Err(Error::format(
            path,
            format!(
                "frame {n}: {} words are not whole {size} records",
                words.len()
            ),
        ));
    }
    let exists = std::fs::symlink_metadata(path).is_ok();
    if exists && existing == Existing::Refuse {
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists; it is not replaced unless you allow it (overwrite=True; append=True \
                 adds to a cluster file)",
            ),
        ));
    }
    if exists {
        super::checks::check_regular(path)?;
        if existing != Existing::Overwrite && !is_cluster_file(path, size)? {
            return Err(Error::param(
                "path",
                format!(
                    "{} exists and is not a {size} cluster file; it is not replaced unless you allow it (overwrite=True)",
                    path.display()
                ),
            ));
        }
    }
    let claim = match existing {
        Existing::Refuse => Claim::Refuse,
        _ => Claim::Replace,
    };
    let mut writer = ClusterFileWriter::create_claiming(path, DEFAULT_WRITE_THREADS, claim)?;
    if exists && existing == Existing::Append {
        let mut old = super::checks::open_regular(path)?;
        std::io::copy(&mut old, &mut writer.out).map_err(|e| Error::io(path, e))?;
    }
    for (n, words) in frames {
        writer.write_frame(*n, &FrameClusters::new(crate::FrameNumber(0), size, words))?;
    }
    writer.commit()?;
    Ok(())
}

/// Reads an aare cluster file frame by frame.
pub struct ClusterFileReader<R: Read> {
    path: PathBuf,
    input: R,
    size: ClusterSize,
    offset: u64,
    len: u64,
}

impl ClusterFileReader<BufReader<File>> {
    /// Opens `path`, whose clusters are `size` (the file does not say).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be opened.
    pub fn open(path: &Path, size: ClusterSize) -> Result<Self> {
        let file = super::checks::open_regular(path)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(Self::new(
            BufReader::with_capacity(1 << 20, file),
            len,
            path,
            size,
        ))
    }
}

impl<R: Read> ClusterFileReader<R> {
    /// Reads `len` bytes of cluster file from `input`; `path` names it in errors.
    pub fn new(input: R, len: u64, path: &Path, size: ClusterSize) -> Self {
        Self {
            path: path.to_path_buf(),
            input,
            size,
            offset: 0,
            len,
        }
    }

    /// The cluster size the records are read as.
    pub fn size(&self) -> ClusterSize {
        self.size
    }

    /// Reads the next frame's records into `words` (replacing its contents) and returns its
    /// frame number, or `None` at the end of the file.
    ///
    /// # Errors
    /// [`Error::Io`] when a read fails; [`Error::Format`] naming the file when a frame is cut
    /// short or declares a negative or impossible cluster count.
    pub fn next_frame(&mut self, words: &mut Vec<u32>) -> Result<Option<i32>> {
        words.clear();
        let left = self.len - self.offset;
        if left == 0 {
            return Ok(None);
        }
        if left < FRAME_HEADER_BYTES as u64 {
            return Err(Error::format(
                &self.path,
                format!(
                    "truncated cluster file: a frame header at byte {} needs {FRAME_HEADER_BYTES} bytes, only {left} remain",
                    self.offset
                ),
            ));
        }
        let mut head = [0u8; FRAME_HEADER_BYTES];
        self.read(&mut head)?;
        let number = i32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let need = count as u64 * self.size.record_bytes() as u64;
        let left = self.len - self.offset;
        if need > left {
            return Err(Error::format(
                &self.path,
                format!(
                    "truncated cluster file (or not {} clusters): frame {number} at byte {} declares {count} clusters ({need} bytes), only {left} bytes remain",
                    self.size,
                    self.offset - FRAME_HEADER_BYTES as u64
                ),
            ));
        }
        words.resize(count as usize * self.size.record_words(), 0);
        self.read(bytemuck::cast_slice_mut(words))?;
        if cfg!(target_endian = "big") {
            for w in words.iter_mut() {
                *w = u32::from_le(*w);
            }
        }
        Ok(Some(number))
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input
            .read_exact(buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.offset += buf.len() as u64;
        Ok(())
    }
}

/// Reads a whole cluster file of `size` clusters: the frame numbers and the clusters (frame
/// `i` of the batch is the file's `i`-th frame).
///
/// # Errors
/// As [`ClusterFileReader::open`] and [`ClusterFileReader::next_frame`].
pub fn read_cluster_file(path: &Path, size: ClusterSize) -> Result<(Vec<i32>, ClusterBatch)> {
    let mut r = ClusterFileReader::open(path, size)?;
    let mut numbers = Vec::new();
    let mut batch = ClusterBatch::new(size);
    let mut words = Vec::new();
    while let Some(n) = r.next_frame(&mut words)? {
        numbers.push(n);
        batch.push_frame(&words);
    }
    Ok((numbers, batch))
}
