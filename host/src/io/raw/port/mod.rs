//! Streaming reader of one port's data files of an slsDetector acquisition (all of it for
//! single-port data), frame by frame; [`super::RawReader`] reads through one of these per
//! port ([`super::ports`] puts several ports' parts together).
//!
//! Facts (aare 2026.9.30 `src/RawSubFile.cpp`, `src/RawFile.cpp`, `src/RawSubFile.test.cpp`):
//! a data file is a plain sequence of records `[112-byte header][image]`; the files
//! `<base>_d<M>_f0_<N>.raw`, `_f1_`, ... (`<M>` the port, [`RawMaster::module`]) are read in order until one does not exist, each
//! holding `file length / record length` frames. aare silently drops a partial record at the
//! end of a file and never looks at frame numbers or packet masks; this reader refuses a data
//! file that is not a whole number of records (the sign of a record size that does not match
//! the master file, whose frames would be garbage; with partial records allowed it
//! reads a file cut off mid-record up to its last whole record and reports the rest), and
//! reports gaps in the header's frame numbers (frames the receiver never wrote, e.g. with
//! "discardpartial"), frames whose packet mask shows lost packets and frame numbers that go
//! backwards. A frame keeps its own number: nothing is shifted. With a receiver ROI the
//! frames are the ROI's (see [`super::roi`]).
//!
//! Reading: batches ([`PortReader::next_frames`], and [`crate::io::FrameSource::fill`] for the
//! streaming engine) read runs of records with vectored positioned reads on several threads
//! (see [`super::records`]): each image lands straight in its place in the caller's buffer,
//! each header in a small array; the headers are then booked in order, exactly as a
//! one-record-at-a-time read books them, and frames that are not delivered are compacted
//! away. [`PortReader::next_frame_into`] (and the iterator) read one record at a time.
//! Every data file is opened with sequential read-ahead advice, and each batch asks the
//! kernel for the next one while it reads (see [`crate::io::readahead`]).
//!
//! Memory: per batch, one 112-byte header per record; for ADC-ordered MOENCH data, a few
//! raw frames of scratch per reading thread. Batch reads reserve only for frames present on
//! disk.

mod batch;
mod remaining;
mod sequential;

use std::fs::File;
use std::path::{Path, PathBuf};

use super::header::HEADER_BYTES;
use super::master::{DetectorType, RawMaster};
use super::pixel_map::PixelMap;
use super::records::{self, HeaderBytes};
use super::report::{FrameInfo, GapReport, RawFrame, TruncatedTail};
use crate::error::{Error, Result};
use crate::io::readahead;

#[derive(Debug)]
struct DataFile {
    path: PathBuf,
    frames: u64,
    tail: u64,
    /// The open file, once a record of it was read.
    handle: Option<File>,
}

impl DataFile {
    /// The open file (opened, with sequential read-ahead advice, on first use).
    fn open(&mut self) -> Result<&File> {
        if self.handle.is_none() {
            let f = File::open(&self.path).map_err(|e| Error::io(&self.path, e))?;
            readahead::sequential(&f);
            self.handle = Some(f);
        }
        self.handle
            .as_ref()
            .ok_or_else(|| Error::Internal("raw data file handle vanished".into()))
    }
}

/// Streams the frames of one port's data files in image order, reporting gaps (see the
/// module docs).
#[derive(Debug)]
pub(crate) struct PortReader {
    master: RawMaster,
    files: Vec<DataFile>,
    map: Option<PixelMap>,
    expected_packets: Option<u32>,
    deliver_incomplete: bool,
    /// Current file, and the next record in it.
    cur: usize,
    frame_in_file: u64,
    /// One raw frame, for ADC-ordered frames read one at a time.
    scratch: Vec<u16>,
    /// Per reading thread, raw frames of a batch of ADC-ordered frames.
    batch_scratch: Vec<Vec<u16>>,
    /// The headers of the batch being read.
    headers: Vec<HeaderBytes>,
    /// Threads a batch is read with.
    threads: usize,
    /// Least bytes of records per reading thread.
    min_part_bytes: u64,
    report: GapReport,
}

impl PortReader {
    /// Opens the data files of a parsed master of one port (a single-port master as parsed,
    /// or [`RawMaster::port`]); no frame is read yet.
    ///
    /// # Errors
    /// Besides a master the reader cannot read: [`Error::Format`] naming the data file when
    /// one is not a whole number of records of the size the master file implies (112-byte
    /// header plus the frame as stored, see [`RawMaster::frame_bytes`]): files written with
    /// another record size (a receiver ROI the master does not describe, another
    /// detector's files) would otherwise be read as garbage. A file cut off while being
    /// written is refused too, unless `allow_partial`: then it is read up to its last whole
    /// record and the partial one is listed in the report ([`GapReport::truncated`]).
    pub(crate) fn from_master_with(master: RawMaster, allow_partial: bool) -> Result<Self> {
        if let DetectorType::Other(name) = &master.detector_type {
            return Err(Error::format(
                &master.path,
                format!(
                    "\"Detector Type\" {name:?} is not one cluda reads (MOENCH 03, or the \
                     generic 16-bit frames `cluda gen --raw` writes): its samples may carry \
                     gain bits or another pixel order, so they cannot be read as plain 16-bit \
                     frames"
                ),
            ));
        }
        let record = master.frame_bytes();
        let mut files = Vec::new();
        loop {
            let path = master.data_path(files.len() as u64);
            let len = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => m.len(),
                Ok(_) => return Err(Error::format(&path, "data file is not a regular file")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => return Err(Error::io(&path, e)),
            };
            if !allow_partial && len % record != 0 {
                return Err(record_size_error(&master, &path, len));
            }
            files.push(DataFile {
                path,
                frames: len / record,
                tail: len % record,
                handle: None,
            });
        }
        if files.is_empty() {
            return Err(Error::format(
                &master.path,
                format!(
                    "no data file: expected {} beside the master file",
                    master.data_path(0).display()
                ),
            ));
        }
        let mut report = GapReport {
            total_frames: master.total_frames,
            ..GapReport::default()
        };
        let max = master.max_frames_per_file;
        if max > 0 {
            // Files the frame count needs beyond the first absent one (at most 1000 looked at).
            let needed = master
                .total_frames
                .div_ceil(max)
                .min(files.len() as u64 + 1000);
            report.absent_files = (files.len() as u64..needed)
                .map(|i| master.data_path(i))
                .filter(|p| std::fs::metadata(p).is_err())
                .collect();
        }
        let last = files.len() - 1;
        for (i, f) in files.iter().enumerate() {
            if max > 0 && f.frames > max {
                return Err(Error::format(
                    &f.path,
                    format!(
                        "holds {} frames ({} bytes per record), more than the master's \"Max Frames \
                         Per File\" {max}: file sizes disagree with the master file",
                        f.frames, record
                    ),
                ));
            }
            if max > 0 && i < last && f.frames < max {
                report.short_files.push((f.path.clone(), f.frames));
            }
            if f.tail > 0 {
                report.truncated.push(TruncatedTail {
                    path: f.path.clone(),
                    frame_in_file: f.frames,
                    bytes_present: f.tail,
                    record_bytes: record,
                    frame_number: None,
                });
            }
            report.frames_on_disk += f.frames;
        }
        // "Total Frames": 0 (and no "Frames in File") says no frame was taken: data files that
        // hold frames disagree with it like any other count they exceed.
        let limit = master.total_frames.max(master.frames_in_file.unwrap_or(0));
        if report.frames_on_disk > limit {
            return Err(Error::format(
                &master.path,
                format!(
                    "the data files hold {} frames, more than the {limit} the master file says \
                     were taken (\"Total Frames\" / \"Frames in File\"): file sizes disagree with \
                     the master file",
                    report.frames_on_disk
                ),
            ));
        }
        let map = (master.detector_type == DetectorType::Moench03Old).then(PixelMap::moench03);
        let expected_packets = master.expected_packets();
        Ok(Self {
            master,
            files,
            map,
            expected_packets,
            deliver_incomplete: false,
            cur: 0,
            frame_in_file: 0,
            scratch: Vec::new(),
            batch_scratch: Vec::new(),
            headers: Vec::new(),
            threads: crate::io::readahead::read_threads(),
            min_part_bytes: records::MIN_PART_BYTES,
            report,
        })
    }

    /// Deliver frames with lost packets too (default: skip them, since their padding would
    /// look like signal; either way they are listed in the report).
    pub fn deliver_incomplete(mut self, yes: bool) -> Self {
        self.deliver_incomplete = yes;
        self
    }

    /// Overrides the packets per frame used to judge completeness (`None`: judge by the mask's
    /// consistency alone).
    pub fn expected_packets(mut self, packets: Option<u32>) -> Self {
        self.expected_packets = packets;
        self
    }

    /// The parsed master file.
    pub fn master(&self) -> &RawMaster {
        &self.master
    }

    /// What was found so far (complete once the reader returned `None`).
    pub fn report(&self) -> &GapReport {
        &self.report
    }

    /// Reads the next frame into `out` (`rows * cols` samples, image order). `Ok(None)` at the
    /// end of the data. Frames with lost packets are skipped unless
    /// [`PortReader::deliver_incomplete`] was set.
    pub fn next_frame_into(&mut self, out: &mut [u16]) -> Result<Option<FrameInfo>> {
        self.master.check_frame_buffer(out.len())?;
        loop {
            let Some(info) = self.read_record(out)? else {
                return Ok(None);
            };
            if info.complete || self.deliver_incomplete {
                self.report.frames_delivered += 1;
                return Ok(Some(info));
            }
        }
    }

    /// Appends up to `n` frames to `out` (image order); returns what each was. Fewer than `n`
    /// only at the end of the data. Reserves no more than the frames left on disk. Reads
    /// runs of records in place on [`PortReader::read_threads`] threads (see the module docs);
    /// frames, infos and report are those of `n` calls of [`PortReader::next_frame_into`].
    pub fn next_frames(&mut self, n: usize, out: &mut Vec<u16>) -> Result<Vec<FrameInfo>> {
        let px = self.master.pixels();
        let want = (n as u64).min(self.frames_left_on_disk()) as usize;
        out.reserve(want * px);
        let mut infos = Vec::with_capacity(want);
        let start = out.len();
        out.resize(start + want * px, 0);
        let filled = self.fill_batch(&mut out[start..], |i| infos.push(i))?;
        out.truncate(start + filled * px);
        if filled < n {
            // The end: book the partial tails of the remaining files.
            self.advance()?;
        }
        Ok(infos)
    }

    /// [`PortReader::next_frames`] one record at a time through
    /// [`PortReader::next_frame_into`]: the simple path, kept as the oracle of the tests that
    /// check the batch path against it.
    #[doc(hidden)]
    pub fn next_frames_one_by_one(
        &mut self,
        n: usize,
        out: &mut Vec<u16>,
    ) -> Result<Vec<FrameInfo>> {
        let px = self.master.pixels();
        let left = self.frames_left_on_disk();
        let want = (n as u64).min(left) as usize;
        out.reserve(want * px);
        let mut infos = Vec::with_capacity(want);
        let start = out.len();
        out.resize(start + want * px, 0);
        let mut filled = 0;
        while filled < want {
            let slot = &mut out[start + filled * px..start + (filled + 1) * px];
            match self.next_frame_into(slot)? {
                Some(info) => {
                    infos.push(info);
                    filled += 1;
                }
                None => break,
            }
        }
        out.truncate(start + filled * px);
        if filled < n {
            // The end: book the partial tails of the remaining files.
            self.advance()?;
        }
        Ok(infos)
    }

    /// Threads a batch is read with (1 ..= 64; default [`crate::io::readahead::read_threads`]).
    pub fn read_threads(&self) -> usize {
        self.threads
    }

    /// Sets the threads a batch is read with (clamped to 1 ..= 64).
    pub fn set_read_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 64);
    }

    /// Sets the least bytes of records each reading thread is given (default 4 MiB; header
    /// counting: 1 record per 16 KiB of it): tests set 1 to spread tiny files over threads.
    #[doc(hidden)]
    pub fn set_min_part_bytes(&mut self, bytes: u64) {
        self.min_part_bytes = bytes.max(1);
    }
}

/// The error for data file `path` of `len` bytes, not a whole number of `master`'s records.
fn record_size_error(master: &RawMaster, path: &Path, len: u64) -> Error {
    let record = master.frame_bytes();
    let shape = match master.roi {
        Some(roi) => format!(
            "{} x {} pixels of the receiver ROI {roi} of a {} x {} detector",
            master.rows, master.cols, master.detector_rows, master.detector_cols
        ),
        None => format!(
            "{} x {} pixels, as \"Pixels\" says and no receiver ROI is named",
            master.rows, master.cols
        ),
    };
    Error::format(
        path,
        format!(
            "{len} bytes is not a whole number of {record}-byte records ({HEADER_BYTES}-byte \
             header + {shape}, 2 bytes each, per master file {}): {} whole records and {} bytes \
             over. The data files do not match the master file (written with another record \
             size: a receiver ROI the master does not name, another detector's files) or this \
             one was cut off while being written; nothing is read rather than frames misread",
            master.path.display(),
            len / record,
            len % record
        ),
    )
}

impl Iterator for PortReader {
    type Item = Result<RawFrame>;

    /// The next frame with a fresh buffer (convenient; [`PortReader::next_frames`] reuses one).
    fn next(&mut self) -> Option<Self::Item> {
        if self.frames_left_on_disk() == 0 {
            // The end: book the partial tails of the remaining files.
            return self.advance().err().map(Err);
        }
        let mut image = vec![0u16; self.master.pixels()];
        match self.next_frame_into(&mut image) {
            Ok(Some(info)) => Some(Ok(RawFrame { info, image })),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
