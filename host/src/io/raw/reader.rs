//! Streaming reader of an slsDetector acquisition: every data file, frame by frame, whole
//! frames in image order.
//!
//! Facts (aare 2026.9.30 `src/RawSubFile.cpp`, `src/RawFile.cpp`, `src/RawSubFile.test.cpp`):
//! a data file is a plain sequence of records `[112-byte header][image]`; the files
//! `<base>_d0_f0_<N>.raw`, `_f1_`, ... are read in order until one does not exist, each
//! holding `file length / record length` frames. aare silently drops a partial record at the
//! end of a file and never looks at frame numbers or packet masks; this reader refuses a data
//! file that is not a whole number of records (the sign of a record size that does not match
//! the master file, whose frames would be garbage; [`RawReader::open_allowing_partial_records`]
//! reads a file cut off mid-record up to its last whole record and reports the rest), and
//! reports gaps in the header's frame numbers (frames the receiver never wrote, e.g. with
//! "discardpartial"), frames whose packet mask shows lost packets and frame numbers that go
//! backwards. A frame keeps its own number: nothing is shifted. With a receiver ROI the
//! frames are the ROI's (see [`super::roi`]).
//!
//! Single-port data (master "Geometry" 1 x 1) is read by one `port` reader: batches
//! ([`RawReader::next_frames`], and [`crate::io::FrameSource::fill`] for the streaming engine)
//! read runs of records with vectored positioned reads on several threads (see
//! [`super::records`]), each image straight into its place in the caller's buffer.
//! Frames split over several ports (a MOENCH read out through two UDP interfaces: "Geometry"
//! 1 x 2, files `_d0_` and `_d1_`) are read by one such reader per port, in step, and put
//! together by frame number (`ports`); a part lost in one port makes its frame
//! incomplete, reported with the port.

use std::path::Path;

use super::master::RawMaster;
use super::port::PortReader;
use super::ports::PortSet;
use crate::error::Result;

pub use super::report::{
    FrameInfo, GapReport, IncompleteFrame, MisplacedParts, MissingFrames, OutOfOrder, PartLoss,
    RawFrame, TruncatedTail,
};

/// Streams the frames of an acquisition in image order, reporting gaps (see the module docs).
#[derive(Debug)]
pub struct RawReader {
    inner: Inner,
}

/// Single-port data, or several ports put together.
#[derive(Debug)]
enum Inner {
    One(PortReader),
    Ports(PortSet),
}

impl RawReader {
    /// Opens the acquisition of master file `path` (`<base>_master_<N>.json`): parses the
    /// master and looks at the sizes of its data files (every port's); no frame is read yet.
    ///
    /// # Errors
    /// As [`RawReader::from_master`], and those of [`RawMaster::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_master(RawMaster::open(path)?)
    }

    /// Opens the data files of a parsed master.
    ///
    /// # Errors
    /// Besides a master the reader cannot read: [`crate::Error::Format`] naming the data file
    /// when one is not a whole number of records of the size the master file implies (112-byte
    /// header plus the frame, or the port's part of it, as stored, see
    /// [`RawMaster::frame_bytes`]): files written with another record size (a receiver ROI
    /// the master does not describe, another detector's files) would otherwise be read as
    /// garbage. A file cut off while being written is refused too;
    /// [`RawReader::open_allowing_partial_records`] reads its whole records and reports the
    /// rest. With several ports, a port without any data file is an error naming the file.
    pub fn from_master(master: RawMaster) -> Result<Self> {
        Self::from_master_with(master, false)
    }

    /// Opens the acquisition of master file `path` as [`RawReader::open`] does, except that
    /// data files that end inside a record are read up to their last whole record and the
    /// partial one is listed in the report ([`GapReport::truncated`]) instead of refused:
    /// for salvaging an acquisition whose writing was cut off, when the record size is known
    /// to be right.
    pub fn open_allowing_partial_records(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_master_with(RawMaster::open(path)?, true)
    }

    /// [`RawReader::from_master`], with data files ending inside a record allowed (reported)
    /// when `allow_partial` is set.
    fn from_master_with(master: RawMaster, allow_partial: bool) -> Result<Self> {
        let inner = if master.ports() > 1 {
            Inner::Ports(PortSet::open(master, allow_partial)?)
        } else {
            Inner::One(PortReader::from_master_with(master, allow_partial)?)
        };
        Ok(Self { inner })
    }

    /// Deliver frames with lost packets (or, with several ports, lost parts) too (default:
    /// skip them, since their padding would look like signal; either way they are listed in
    /// the report).
    pub fn deliver_incomplete(self, yes: bool) -> Self {
        self.configured(
            |r| r.deliver_incomplete(yes),
            |p| p.set_deliver_incomplete(yes),
        )
    }

    /// Overrides the packets per frame used to judge completeness (`None`: judge by the mask's
    /// consistency alone); with several ports, the packets of each port's part.
    pub fn expected_packets(self, packets: Option<u32>) -> Self {
        self.configured(
            |r| r.expected_packets(packets),
            |p| p.set_expected_packets(packets),
        )
    }

    /// This reader with its one port's reader rebuilt by `one`, or its ports set by `ports`.
    fn configured(
        self,
        one: impl FnOnce(PortReader) -> PortReader,
        ports: impl FnOnce(&mut PortSet),
    ) -> Self {
        let inner = match self.inner {
            Inner::One(r) => Inner::One(one(r)),
            Inner::Ports(mut p) => {
                ports(&mut p);
                Inner::Ports(p)
            }
        };
        Self { inner }
    }

    /// The parsed master file.
    pub fn master(&self) -> &RawMaster {
        match &self.inner {
            Inner::One(r) => r.master(),
            Inner::Ports(p) => p.master(),
        }
    }

    /// Rows per (whole) frame.
    pub fn rows(&self) -> usize {
        self.master().rows
    }

    /// Columns per (whole) frame.
    pub fn cols(&self) -> usize {
        self.master().cols
    }

    /// Complete frame records on disk (an upper bound on the frames delivered); with several
    /// ports, the records of the port holding the most.
    pub fn frames_on_disk(&self) -> u64 {
        self.report().frames_on_disk
    }

    /// What was found so far (complete once the reader returned `None`).
    pub fn report(&self) -> &GapReport {
        match &self.inner {
            Inner::One(r) => r.report(),
            Inner::Ports(p) => p.report(),
        }
    }

    /// Reads the next frame into `out` (`rows * cols` samples, image order). `Ok(None)` at the
    /// end of the data. Frames with lost packets (or parts) are skipped unless
    /// [`RawReader::deliver_incomplete`] was set.
    pub fn next_frame_into(&mut self, out: &mut [u16]) -> Result<Option<FrameInfo>> {
        match &mut self.inner {
            Inner::One(r) => r.next_frame_into(out),
            Inner::Ports(p) => p.next_frame_into(out),
        }
    }

    /// Appends up to `n` frames to `out` (image order); returns what each was. Fewer than `n`
    /// only at the end of the data. Reserves no more than the frames left on disk. Reads
    /// runs of records in place on [`RawReader::read_threads`] threads (see the module docs);
    /// frames, infos and report are those of `n` calls of [`RawReader::next_frame_into`].
    pub fn next_frames(&mut self, n: usize, out: &mut Vec<u16>) -> Result<Vec<FrameInfo>> {
        match &mut self.inner {
            Inner::One(r) => r.next_frames(n, out),
            Inner::Ports(p) => p.next_frames(n, out),
        }
    }

    /// [`RawReader::next_frames`] one record at a time through
    /// [`RawReader::next_frame_into`]: the simple path, kept as the oracle of the tests that
    /// check the batch path against it.
    #[doc(hidden)]
    pub fn next_frames_one_by_one(
        &mut self,
        n: usize,
        out: &mut Vec<u16>,
    ) -> Result<Vec<FrameInfo>> {
        match &mut self.inner {
            Inner::One(r) => r.next_frames_one_by_one(n, out),
            Inner::Ports(p) => p.next_frames(n, out),
        }
    }

    /// Threads a batch is read with (1 ..= 64; default [`crate::io::readahead::read_threads`]).
    pub fn read_threads(&self) -> usize {
        match &self.inner {
            Inner::One(r) => r.read_threads(),
            Inner::Ports(p) => p.read_threads(),
        }
    }

    /// Sets the threads a batch is read with (clamped to 1 ..= 64; each port's).
    pub fn set_read_threads(&mut self, threads: usize) {
        match &mut self.inner {
            Inner::One(r) => r.set_read_threads(threads),
            Inner::Ports(p) => p.set_read_threads(threads),
        }
    }

    /// Sets the least bytes of records each reading thread is given (default 4 MiB; header
    /// counting: 1 record per 16 KiB of it): tests set 1 to spread tiny files over threads.
    #[doc(hidden)]
    pub fn set_min_part_bytes(&mut self, bytes: u64) {
        match &mut self.inner {
            Inner::One(r) => r.set_min_part_bytes(bytes),
            Inner::Ports(p) => p.set_min_part_bytes(bytes),
        }
    }

    /// Fills `dst` (whole frames) with the next frames to deliver, handing each one's info
    /// to `each` in order; returns how many it filled (fewer than fit only at the end of the
    /// data).
    pub(crate) fn fill_batch(
        &mut self,
        dst: &mut [u16],
        each: impl FnMut(FrameInfo),
    ) -> Result<usize> {
        match &mut self.inner {
            Inner::One(r) => r.fill_batch(dst, each),
            Inner::Ports(p) => p.fill_batch(dst, each),
        }
    }

    /// Frames still to be delivered, counted exactly from the record headers alone (112
    /// bytes per record, without reading images; with several ports, every port's headers
    /// merged as the frames would be): what reading to the end would deliver, for callers
    /// that must know the count before they read (a pedestal's window). Changes nothing.
    ///
    /// # Errors
    /// As [`RawReader::next_frames`] when a data file cannot be read or shrank.
    pub fn count_deliverable(&self) -> Result<u64> {
        match &self.inner {
            Inner::One(r) => r.count_deliverable(),
            Inner::Ports(p) => p.count_deliverable(),
        }
    }

    /// Books the partial tails of the files not finished yet (what reading past the last
    /// record does); nothing is read but their tail headers.
    pub(crate) fn finish(&mut self) -> Result<()> {
        match &mut self.inner {
            Inner::One(r) => r.finish(),
            Inner::Ports(p) => p.finish(),
        }
    }
}

impl Iterator for RawReader {
    type Item = Result<RawFrame>;

    /// The next frame with a fresh buffer (convenient; [`RawReader::next_frames`] reuses one).
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::One(r) => r.next(),
            Inner::Ports(p) => {
                if p.frames_left_on_disk() == 0 {
                    return p.finish().err().map(Err);
                }
                let mut image = vec![0u16; p.master().pixels()];
                match p.next_frame_into(&mut image) {
                    Ok(Some(info)) => Some(Ok(RawFrame { info, image })),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                }
            }
        }
    }
}
