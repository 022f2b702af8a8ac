//! What is left: frames still to deliver counted from the record headers alone, and the end
//! of the reading checked.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::PortReader;
use crate::error::{Error, Result};
use crate::io::raw::header::{DetectorHeader, HEADER_BYTES};
use crate::io::raw::records;
use crate::io::readahead;

impl PortReader {
    /// Frames still to be delivered, counted exactly from the record headers alone (112
    /// bytes per record, read with several threads, without read-ahead of the images): what
    /// reading to the end would deliver, for callers that must know the count before they
    /// read (a pedestal's window). Reads no image and changes nothing.
    ///
    /// # Errors
    /// As [`PortReader::next_frames`] when a data file cannot be read or shrank.
    pub fn count_deliverable(&self) -> Result<u64> {
        let record = self.master.frame_bytes();
        // (file, first record, records) still to be read.
        let mut runs: Vec<(usize, u64, u64)> = Vec::new();
        for (i, f) in self.files.iter().enumerate().skip(self.cur) {
            let first = if i == self.cur { self.frame_in_file } else { 0 };
            if f.frames > first {
                runs.push((i, first, f.frames - first));
            }
        }
        let total: u64 = runs.iter().map(|r| r.2).sum();
        if total == 0 {
            return Ok(0);
        }
        let min_records = (self.min_part_bytes >> 14).max(1);
        let parts = (self.threads as u64)
            .min(total.div_ceil(min_records))
            .max(1);
        let per = total.div_ceil(parts);
        // Each part: `per` consecutive records, as (file, first, count) pieces.
        let mut jobs: Vec<Vec<(usize, u64, u64)>> = vec![Vec::new()];
        let mut room = per;
        for &(i, mut first, mut count) in &runs {
            while count > 0 {
                if room == 0 {
                    jobs.push(Vec::new());
                    room = per;
                }
                let take = count.min(room);
                if let Some(j) = jobs.last_mut() {
                    j.push((i, first, take));
                }
                first += take;
                count -= take;
                room -= take;
            }
        }
        let (expected, deliver_all) = (self.expected_packets, self.deliver_incomplete);
        let count_job = |job: &[(usize, u64, u64)]| -> Result<u64> {
            let mut n = 0u64;
            let mut hb = [0u8; HEADER_BYTES];
            for &(i, first, count) in job {
                let path = &self.files[i].path;
                let file = File::open(path).map_err(|e| Error::io(path, e))?;
                readahead::random(&file);
                for index in first..first + count {
                    file.read_exact_at(&mut hb, index * record)
                        .map_err(|e| records::shrunk(path, index, e))?;
                    let h =
                        DetectorHeader::from_bytes(&hb).unwrap_or_else(bytemuck::Zeroable::zeroed);
                    n += u64::from(deliver_all || h.is_complete(expected));
                }
            }
            Ok(n)
        };
        if jobs.len() == 1 {
            return count_job(&jobs[0]);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|job| s.spawn(move || count_job(job)))
                .collect();
            let mut sum = 0u64;
            for h in handles {
                sum += h
                    .join()
                    .map_err(|_| Error::Internal("a raw header counter panicked".into()))??;
            }
            Ok(sum)
        })
    }

    /// Books the partial tails of the files not finished yet (what reading past the last
    /// record does); nothing is read but their tail headers.
    pub(crate) fn finish(&mut self) -> Result<()> {
        self.advance().map(|_| ())
    }

    /// The frame number and completeness (by `expected` packets) of every record not read
    /// yet, from the record headers alone, in order: what [`crate::io::raw::ports`] merges to count
    /// the whole frames still to come. Reads no image and changes nothing.
    ///
    /// # Errors
    /// As [`PortReader::next_frames`] when a data file cannot be read or shrank.
    pub(crate) fn remaining_numbers(&self, expected: Option<u32>) -> Result<Vec<(u64, bool)>> {
        let record = self.master.frame_bytes();
        let mut out = Vec::new();
        let mut hb = [0u8; HEADER_BYTES];
        for (i, f) in self.files.iter().enumerate().skip(self.cur) {
            let first = if i == self.cur { self.frame_in_file } else { 0 };
            if f.frames <= first {
                continue;
            }
            let file = File::open(&f.path).map_err(|e| Error::io(&f.path, e))?;
            readahead::random(&file);
            for index in first..f.frames {
                file.read_exact_at(&mut hb, index * record)
                    .map_err(|e| records::shrunk(&f.path, index, e))?;
                let h = DetectorHeader::from_bytes(&hb).unwrap_or_else(bytemuck::Zeroable::zeroed);
                out.push((h.frame_number, h.is_complete(expected)));
            }
        }
        Ok(out)
    }

    pub(crate) fn frames_left_on_disk(&self) -> u64 {
        let Some(f) = self.files.get(self.cur) else {
            return 0;
        };
        let later: u64 = self.files[self.cur + 1..].iter().map(|f| f.frames).sum();
        f.frames.saturating_sub(self.frame_in_file) + later
    }
}
