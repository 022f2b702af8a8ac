//! Writes an acquisition in the slsDetector raw layout (master JSON plus data files), the way
//! the receiver does, so tests (and `cluda gen`) can make files that aare and
//! [`RawReader`](super::RawReader) open.
//!
//! Layout facts as in [`master`](super::master) and [`reader`](super::reader): records
//! `[112-byte header][image]`, a new data file `<base>_d0_f<k>_<N>.raw` every
//! "Max Frames Per File" frames, the master `<base>_master_<N>.json` with every key the
//! receiver writes for the format version claimed (see [`super::master_text`]; written by
//! [`RawWriter::finish`], when the frame count is known). Every file is
//! written under a temporary name and renamed into place by [`RawWriter::finish`] (data files
//! first, the master last); a writer dropped before that leaves nothing behind.
//!
//! [`RawWriter::ports`] writes a detector read out through several UDP interfaces as
//! slsReceiver does (see [`super::master`]): each frame split into N bands of rows, band `i`
//! in data files `<base>_d<i>_f<k>_<N>.raw` with headers of `row` `i`, `column` 0 and the
//! part's packets, and a master of "Geometry" 1 x N with one port's "Pixels" and "Image
//! Size" and "Number of UDP Interfaces" N.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::header::DetectorHeader;
use super::master::{DetectorType, FrameDiscardPolicy};
use super::master_text::{MasterFields, master_text};
use super::pixel_map::{MOENCH03_SIDE, PixelMap};
use super::roi::Roi;
use crate::error::{Error, Result};
use crate::io::atomic::AtomicFile;

/// What to write.
#[derive(Clone, Debug, PartialEq)]
pub struct RawWriterConfig {
    /// Rows per frame.
    pub rows: usize,
    /// Columns per frame.
    pub cols: usize,
    /// Detector type: `Moench03` (image order), `Moench03Old` (ADC order: images are put
    /// through the inverse MOENCH 03 map) or any other name (image order).
    pub detector: DetectorType,
    /// Frames per data file before the next one is started (0: one file).
    pub max_frames_per_file: u64,
    /// Master file format version (7.2 writes "Image Size in bytes", >= 8 "Image Size").
    pub version: f64,
    /// "Frame Padding".
    pub frame_padding: bool,
    /// "Frame Discard Policy".
    pub frame_discard_policy: FrameDiscardPolicy,
    /// Packets per frame marked as caught in each header written by
    /// [`RawWriter::write_frame`] (with several ports, per part: this over the ports,
    /// rounded up).
    pub packets_per_frame: u32,
}

impl RawWriterConfig {
    /// A MOENCH 03 acquisition as receiver software 8 writes it: 400 x 400, image order,
    /// 50 packets per frame, padded, "discardpartial".
    pub fn moench03() -> Self {
        Self {
            rows: MOENCH03_SIDE,
            cols: MOENCH03_SIDE,
            detector: DetectorType::Moench03,
            max_frames_per_file: 10_000,
            version: 7.2,
            frame_padding: true,
            frame_discard_policy: FrameDiscardPolicy::DiscardPartial,
            packets_per_frame: 50,
        }
    }
}

/// One port's data files being written.
#[derive(Debug, Default)]
struct PortFiles {
    file_no: u64,
    in_file: u64,
    out: Option<AtomicFile>,
    /// Finished data files, still under their temporary names until [`RawWriter::finish`].
    done: Vec<AtomicFile>,
    /// Records written.
    written: u64,
}

/// Writes frames into data files and, at the end, the master file.
#[derive(Debug)]
pub struct RawWriter {
    config: RawWriterConfig,
    dir: PathBuf,
    base: String,
    index: u64,
    map: Option<PixelMap>,
    /// Per port (one unless [`RawWriter::ports`]).
    ports: Vec<PortFiles>,
    scratch: Vec<u16>,
    /// The receiver ROI the data files hold (see [`RawWriter::roi`]).
    roi: Option<Roi>,
}

impl RawWriter {
    /// Starts an acquisition `<dir>/<base>_master_<index>.json`; `dir` must exist.
    pub fn create(
        dir: impl AsRef<Path>,
        base: &str,
        index: u64,
        config: RawWriterConfig,
    ) -> Result<Self> {
        crate::params::frame_pixels(config.rows, config.cols)?;
        let map = match config.detector {
            DetectorType::Moench03Old => {
                if (config.rows, config.cols) != (MOENCH03_SIDE, MOENCH03_SIDE) {
                    return Err(Error::param(
                        "rows/cols",
                        "ADC-ordered MOENCH 03 frames are 400 x 400",
                    ));
                }
                Some(PixelMap::moench03())
            }
            _ => None,
        };
        Ok(Self {
            config,
            dir: dir.as_ref().to_path_buf(),
            base: base.to_string(),
            index,
            map,
            ports: vec![PortFiles::default()],
            scratch: Vec::new(),
            roi: None,
        })
    }

    /// Writes the acquisition as a receiver with `rx_roi` set writes it: the master names
    /// the ROI ("Receiver Roi" below format 8, "Receiver Rois" from 8) and keeps the
    /// detector's "Pixels" and "Image Size" (the config's rows and columns); each frame given
    /// to [`RawWriter::write_frame`] is the ROI's (`roi.rows() x roi.cols()`), as the data
    /// files hold it. Set it before the first frame.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the ROI does not lie inside the detector, frames were
    /// written already, or the frames are ADC-ordered (whose rectangles are no image's).
    pub fn roi(mut self, roi: Option<Roi>) -> Result<Self> {
        if self.written() > 0 {
            return Err(Error::param(
                "roi",
                "the ROI must be set before the first frame is written",
            ));
        }
        if let Some(r) = roi {
            if !r.fits(self.config.rows, self.config.cols) {
                return Err(Error::param(
                    "roi",
                    format!(
                        "{r} (xmin, xmax, ymin, ymax; inclusive) does not lie inside the {} x {} \
                         detector with min <= max",
                        self.config.rows, self.config.cols
                    ),
                ));
            }
            if self.map.is_some() {
                return Err(Error::param(
                    "roi",
                    "ADC-ordered MOENCH 03 frames cannot be written with a receiver ROI",
                ));
            }
            if self.ports.len() > 1 {
                return Err(Error::param(
                    "roi",
                    "a receiver ROI is written for single-port data only (cluda reads no ROI \
                     of several ports)",
                ));
            }
        }
        self.roi = roi;
        Ok(self)
    }

    /// Writes the acquisition as a receiver of a detector read out through `n` UDP
    /// interfaces writes it (`numinterfaces n`; see the module docs): each frame's rows split
    /// into `n` equal bands, one set of data files per port. 1 is single-port data. Set it
    /// before the first frame.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`interfaces`) for 0 or more than 16 ports, rows that do
    /// not split into `n` equal bands, frames written already, a receiver ROI, or ADC-ordered
    /// frames.
    pub fn ports(mut self, n: usize) -> Result<Self> {
        let bad = |why: String| Err(Error::param("interfaces", why));
        if !(1..=16).contains(&n) {
            return bad(format!("must be 1 ..= 16, got {n}"));
        }
        if self.written() > 0 {
            return bad("the ports must be set before the first frame is written".into());
        }
        if n > 1 {
            if !self.config.rows.is_multiple_of(n) {
                return bad(format!(
                    "{} rows do not split into {n} ports of equal rows",
                    self.config.rows
                ));
            }
            if self.roi.is_some() {
                return bad("a receiver ROI is written for single-port data only".into());
            }
            if self.map.is_some() {
                return bad("ADC-ordered MOENCH 03 frames are single-port data".into());
            }
        }
        self.ports = (0..n).map(|_| PortFiles::default()).collect();
        Ok(self)
    }

    /// Rows of one port's part of a frame.
    fn port_rows(&self) -> usize {
        self.config.rows / self.ports.len().max(1)
    }

    /// Rows and columns of each frame in the data files (the ROI's when one is set).
    fn stored_shape(&self) -> (usize, usize) {
        self.roi.map_or((self.config.rows, self.config.cols), |r| {
            (r.rows(), r.cols())
        })
    }

    /// Path of data file `file` (of port 0).
    pub fn data_path(&self, file: u64) -> PathBuf {
        self.port_data_path(0, file)
    }

    /// Path of data file `file` of port `port`.
    pub fn port_data_path(&self, port: usize, file: u64) -> PathBuf {
        self.dir.join(super::naming::data_file_name(
            &self.base, port, file, self.index,
        ))
    }

    /// Path of the master file.
    pub fn master_path(&self) -> PathBuf {
        self.dir
            .join(super::naming::master_file_name(&self.base, self.index))
    }

    /// Frames written so far (with several ports, the records of the port with most).
    pub fn written(&self) -> u64 {
        self.ports.iter().map(|p| p.written).max().unwrap_or(0)
    }

    /// Packets marked caught in each port's part of a complete frame.
    pub fn packets_per_part(&self) -> u32 {
        let n = u32::try_from(self.ports.len()).unwrap_or(u32::MAX).max(1);
        self.config.packets_per_frame.div_ceil(n)
    }

    /// Writes one complete frame (`rows * cols` samples, image order; the ROI's shape when
    /// one is set) with frame number `frame_number`.
    pub fn write_frame(&mut self, frame_number: u64, image: &[u16]) -> Result<()> {
        let h = DetectorHeader::complete(frame_number, self.packets_per_part());
        self.write_frame_with_header(&h, image)
    }

    /// Writes one frame with the given header (to make partial frames, odd numbers, ...).
    /// With several ports each port's part gets this header with `row` set to the port and
    /// `column` 0 (see [`RawWriter::write_part`] to write one port's part alone).
    pub fn write_frame_with_header(
        &mut self,
        header: &DetectorHeader,
        image: &[u16],
    ) -> Result<()> {
        let (rows, cols) = self.stored_shape();
        let px = rows * cols;
        if image.len() != px {
            return Err(Error::shape(
                "raw writer frame",
                format!("{px} samples"),
                format!("{} samples", image.len()),
            ));
        }
        if self.ports.len() == 1 {
            return self.write_record(0, header, image);
        }
        let band = self.port_rows() * cols;
        for (port, part) in image.chunks_exact(band).enumerate() {
            let h = Self::port_header(header, port);
            self.write_record(port, &h, part)?;
        }
        Ok(())
    }

    /// `header` as port `port` of a stack of ports writes it: `row` the port, `column` 0.
    fn port_header(header: &DetectorHeader, port: usize) -> DetectorHeader {
        let mut h = *header;
        h.row = u16::try_from(port).unwrap_or(u16::MAX);
        h.column = 0;
        h
    }

    /// Writes port `port`'s part of one frame alone (`rows / ports * cols` samples), with
    /// `header`'s `row` set to the port and `column` 0: to make acquisitions where one port
    /// lost a frame or packets another has.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`port`) for a port the writer does not have;
    /// [`Error::Shape`] for a part of the wrong size; the file's write errors.
    pub fn write_part(&mut self, port: usize, header: &DetectorHeader, part: &[u16]) -> Result<()> {
        if port >= self.ports.len() {
            return Err(Error::param(
                "port",
                format!("{port}: the writer has {} port(s)", self.ports.len()),
            ));
        }
        let px = self.port_rows() * self.stored_shape().1;
        if part.len() != px {
            return Err(Error::shape(
                "raw writer part",
                format!("{px} samples"),
                format!("{} samples", part.len()),
            ));
        }
        let h = Self::port_header(header, port);
        self.write_record(port, &h, part)
    }

    /// Appends one record (`header`, then `image`'s samples as stored) to port `port`'s
    /// current data file, starting the next file when this one is full.
    fn write_record(&mut self, port: usize, header: &DetectorHeader, image: &[u16]) -> Result<()> {
        let px = image.len();
        let max = self.config.max_frames_per_file;
        let full = {
            let pf = &self.ports[port];
            pf.out.is_some() && max > 0 && pf.in_file >= max
        };
        if full {
            self.close_file(port)?;
            let pf = &mut self.ports[port];
            pf.file_no += 1;
            pf.in_file = 0;
        }
        if self.ports[port].out.is_none() {
            let p = self.port_data_path(port, self.ports[port].file_no);
            self.ports[port].out = Some(AtomicFile::create(&p)?);
        }
        let pixels: &[u16] = match &self.map {
            Some(map) => {
                self.scratch.resize(px, 0);
                map.to_raw(image, &mut self.scratch);
                &self.scratch
            }
            None => image,
        };
        let mut bytes = Vec::with_capacity(px * 2);
        for v in pixels {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let p = self.port_data_path(port, self.ports[port].file_no);
        let pf = &mut self.ports[port];
        let Some(out) = pf.out.as_mut() else {
            return Ok(());
        };
        out.write_all(&header.to_bytes())
            .and_then(|_| out.write_all(&bytes))
            .map_err(|e| Error::io(&p, e))?;
        pf.in_file += 1;
        pf.written += 1;
        Ok(())
    }

    fn close_file(&mut self, port: usize) -> Result<()> {
        let p = self.port_data_path(port, self.ports[port].file_no);
        let pf = &mut self.ports[port];
        if let Some(mut out) = pf.out.take() {
            out.flush().map_err(|e| Error::io(&p, e))?;
            pf.done.push(out);
        }
        Ok(())
    }

    /// Flushes the data files and writes the master file; "Total Frames" is `total_frames`
    /// (the frames asked for; `None`: the frames written), "Frames in File" the frames
    /// written. Returns the master file's path.
    pub fn finish(mut self, total_frames: Option<u64>) -> Result<PathBuf> {
        for port in 0..self.ports.len() {
            self.close_file(port)?;
        }
        let written = self.written();
        let c = &self.config;
        let path = self.master_path();
        let unix_seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let text = master_text(&MasterFields {
            version: c.version,
            detector: &c.detector,
            rows: c.rows,
            cols: c.cols,
            roi: self.roi,
            max_frames_per_file: c.max_frames_per_file,
            frame_discard_policy: c.frame_discard_policy,
            frame_padding: c.frame_padding,
            ports: self.ports.len(),
            total_frames: total_frames.unwrap_or(written),
            frames_in_file: written,
            unix_seconds,
        });
        // The data files first, the master (which makes the acquisition readable) last; an
        // error on the way removes every temporary file not yet renamed.
        for port in &mut self.ports {
            for f in std::mem::take(&mut port.done) {
                f.commit()?;
            }
        }
        let mut master = AtomicFile::create(&path)?;
        master
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(&path, e))?;
        master.commit()
    }
}
