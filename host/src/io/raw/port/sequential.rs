//! Records read one at a time, file after file: each header booked (gaps, lost packets,
//! numbers going backwards), partial tails reported.

use std::os::unix::fs::FileExt;

use super::PortReader;
use crate::error::{Error, Result};
use crate::io::raw::header::{DetectorHeader, HEADER_BYTES};
use crate::io::raw::records;
use crate::io::raw::report::{FrameInfo, IncompleteFrame};

impl PortReader {
    /// Moves to the next file with a whole record left, booking each finished file's partial
    /// tail; false at the end of the data.
    pub(super) fn advance(&mut self) -> Result<bool> {
        while self.cur < self.files.len() && self.frame_in_file >= self.files[self.cur].frames {
            self.finish_file()?;
            self.files[self.cur].handle = None;
            self.cur += 1;
            self.frame_in_file = 0;
        }
        Ok(self.cur < self.files.len())
    }

    /// Reads the next record (complete or not) and books it in the report.
    pub(super) fn read_record(&mut self, out: &mut [u16]) -> Result<Option<FrameInfo>> {
        if !self.advance()? {
            return Ok(None);
        }
        let index = self.frame_in_file;
        let record = self.master.frame_bytes();
        self.files[self.cur].open()?;
        let f = &self.files[self.cur];
        let (Some(h), path) = (f.handle.as_ref(), &f.path) else {
            return Err(Error::Internal("raw data file not open".into()));
        };
        let at = index * record;
        let mut hb = [0u8; HEADER_BYTES];
        h.read_exact_at(&mut hb, at)
            .map_err(|e| records::shrunk(path, index, e))?;
        let header = DetectorHeader::from_bytes(&hb).unwrap_or_else(bytemuck::Zeroable::zeroed);
        let at = at + HEADER_BYTES as u64;
        match &self.map {
            None => {
                h.read_exact_at(bytemuck::cast_slice_mut(out), at)
                    .map_err(|e| records::shrunk(path, index, e))?;
                records::from_le(out);
            }
            Some(map) => {
                if self.scratch.len() != out.len() {
                    self.scratch = vec![0u16; out.len()];
                }
                h.read_exact_at(bytemuck::cast_slice_mut(&mut self.scratch), at)
                    .map_err(|e| records::shrunk(path, index, e))?;
                records::from_le(&mut self.scratch);
                map.to_image(&self.scratch, out);
            }
        }
        self.frame_in_file += 1;
        let complete = header.is_complete(self.expected_packets);
        let info = FrameInfo {
            frame_number: header.frame_number,
            file: self.cur as u64,
            frame_in_file: index,
            complete,
            header,
        };
        self.book(&info);
        Ok(Some(info))
    }

    pub(super) fn book(&mut self, info: &FrameInfo) {
        let n = info.frame_number;
        let r = &mut self.report;
        r.book_number(n);
        if !info.complete {
            r.incomplete.push(IncompleteFrame {
                frame_number: n,
                packets_caught: info.header.packet_number,
                mask_count: info.header.mask_count(),
                expected: self.expected_packets,
                delivered: self.deliver_incomplete,
                parts: Vec::new(),
            });
        }
    }

    /// At the end of a file: read the header of a partial last record, if it has one.
    fn finish_file(&mut self) -> Result<()> {
        let record = self.master.frame_bytes();
        let f = &mut self.files[self.cur];
        if f.tail < HEADER_BYTES as u64 {
            return Ok(());
        }
        let at = f.frames * record;
        let h = f.open()?;
        let mut hb = [0u8; HEADER_BYTES];
        if h.read_exact_at(&mut hb, at).is_ok() {
            self.set_tail_number(&hb);
        }
        Ok(())
    }

    fn set_tail_number(&mut self, hb: &[u8; HEADER_BYTES]) {
        let path = &self.files[self.cur].path;
        if let (Some(h), Some(t)) = (
            DetectorHeader::from_bytes(hb),
            self.report.truncated.iter_mut().find(|t| &t.path == path),
        ) {
            t.frame_number = Some(h.frame_number);
        }
    }
}
