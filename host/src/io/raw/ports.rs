//! Frames split over several ports (a MOENCH read out through two UDP interfaces: data files
//! `_d0_` and `_d1_`, each record one port's 400 x 200 part), put back together.
//!
//! Each port's files are read in step by a [`PortReader`] of their own (in batches, with its
//! parallel positioned reads), a few parts ahead. A whole frame is the smallest frame number
//! at the head of any port: every port whose next part has that number gives it, placed at
//! the port's origin ([`RawMaster::port_origin`]: by its data files, as aare places module
//! files; the stream side places the same parts by their headers' `row`/`column`, which
//! slsReceiver sets to the same place, and a header that disagrees is reported in
//! [`GapReport::misplaced`]). A port whose next part has a larger number (or that has ended)
//! lost its part of this frame: the frame is incomplete ([`PartLoss`] names the port) and,
//! like a frame with lost packets, skipped unless frames with losses are delivered (the
//! absent part's pixels are then 0xFFFF, the receiver's padding). A part with lost packets
//! makes its frame incomplete the same way, judged by the packets of one part. Frame
//! numbers absent in every port are missing frames; the merged numbers are booked as the
//! single-port reader books its own (gaps, numbers going backwards).

use super::master::RawMaster;
use super::port::PortReader;
use super::report::{FrameInfo, GapReport, IncompleteFrame, MisplacedParts, PartLoss};
use crate::error::{Error, Result};

/// Bytes of parts each port reads ahead per batch (at least one part, at most
/// [`MAX_BATCH`]).
const BATCH_BYTES: usize = 8 << 20;

/// Most parts a port reads per batch.
const MAX_BATCH: usize = 256;

/// What an absent part's pixels are in a delivered frame: the receiver's padding of lost
/// packets (all bits set).
const ABSENT: u16 = 0xFFFF;

/// One port: its reader and the parts it read ahead.
#[derive(Debug)]
struct PortQueue {
    reader: PortReader,
    /// Where its part goes in the whole frame: first row, first column.
    origin: (usize, usize),
    /// Its place in the "Geometry" grid (row, column), what its headers should say.
    grid: (usize, usize),
    /// Parts read ahead, image order, one after the other.
    parts: Vec<u16>,
    /// What each part read ahead was.
    infos: Vec<FrameInfo>,
    /// The next part to use.
    head: usize,
    /// Its reader has no record left.
    ended: bool,
}

impl PortQueue {
    /// The next part's info, reading a batch when none is left; `None` at the port's end.
    fn peek(&mut self, batch: usize) -> Result<Option<FrameInfo>> {
        if self.head == self.infos.len() && !self.ended {
            self.parts.clear();
            self.head = 0;
            self.infos = self.reader.next_frames(batch, &mut self.parts)?;
            self.ended = self.infos.is_empty();
        }
        Ok(self.infos.get(self.head).copied())
    }
}

/// Several ports' readers, merged into whole frames (see the module docs).
#[derive(Debug)]
pub(crate) struct PortSet {
    master: RawMaster,
    ports: Vec<PortQueue>,
    /// Packets per part, when known.
    expected: Option<u32>,
    deliver_incomplete: bool,
    /// Parts per batch read ahead.
    batch: usize,
    report: GapReport,
    /// Whole frames put together so far (distinct frame numbers, complete or not).
    assembled: u64,
}

impl PortSet {
    /// Opens every port's data files of `master` (of several ports); `allow_partial` as
    /// [`PortReader::from_master_with`].
    ///
    /// # Errors
    /// Those of [`PortReader::from_master_with`] for any port's files (naming its files).
    pub(crate) fn open(master: RawMaster, allow_partial: bool) -> Result<Self> {
        let n = master.ports();
        let mut ports = Vec::with_capacity(n);
        let mut expected = None;
        for p in 0..n {
            let (Some(pm), Some(origin)) = (master.port(p), master.port_origin(p)) else {
                return Err(Error::Internal(format!(
                    "raw reader: port {p} of {n} has no place"
                )));
            };
            expected = pm.expected_packets();
            let reader = PortReader::from_master_with(pm, allow_partial)?.deliver_incomplete(true);
            ports.push(PortQueue {
                reader,
                origin,
                grid: (p % master.ports_y, p / master.ports_y),
                parts: Vec::new(),
                infos: Vec::new(),
                head: 0,
                ended: false,
            });
        }
        let part_bytes = (master.port_rows * master.port_cols * 2).max(1);
        let mut set = Self {
            batch: (BATCH_BYTES / part_bytes).clamp(1, MAX_BATCH),
            report: GapReport {
                total_frames: master.total_frames,
                ..GapReport::default()
            },
            master,
            ports,
            expected,
            deliver_incomplete: false,
            assembled: 0,
        };
        set.sync();
        Ok(set)
    }

    /// The master (all ports).
    pub(crate) fn master(&self) -> &RawMaster {
        &self.master
    }

    /// Deliver frames with lost packets or parts too.
    pub(crate) fn set_deliver_incomplete(&mut self, yes: bool) {
        self.deliver_incomplete = yes;
    }

    /// Overrides the packets per part used to judge completeness.
    pub(crate) fn set_expected_packets(&mut self, packets: Option<u32>) {
        self.expected = packets;
    }

    /// The merged report, with every port's file findings.
    pub(crate) fn report(&self) -> &GapReport {
        &self.report
    }

    /// Threads each port's batches are read with.
    pub(crate) fn read_threads(&self) -> usize {
        self.ports.first().map_or(1, |q| q.reader.read_threads())
    }

    /// Sets the threads each port's batches are read with.
    pub(crate) fn set_read_threads(&mut self, threads: usize) {
        for q in &mut self.ports {
            q.reader.set_read_threads(threads);
        }
    }

    /// Sets the least bytes of records per reading thread, for every port.
    pub(crate) fn set_min_part_bytes(&mut self, bytes: u64) {
        for q in &mut self.ports {
            q.reader.set_min_part_bytes(bytes);
        }
    }

    /// Copies the ports' file findings (truncated, short and absent files) into the merged
    /// report, and the frames on disk: the whole frames put together so far and the most parts
    /// any port has left (exact once every port is read: the distinct frame numbers on disk,
    /// which exceed every port's own count when the ports lost different frames).
    fn sync(&mut self) {
        let left = self.frames_left_on_disk();
        let r = &mut self.report;
        r.truncated.clear();
        r.short_files.clear();
        r.absent_files.clear();
        for q in &self.ports {
            let pr = q.reader.report();
            r.truncated.extend(pr.truncated.iter().cloned());
            r.short_files.extend(pr.short_files.iter().cloned());
            r.absent_files.extend(pr.absent_files.iter().cloned());
        }
        r.frames_on_disk = self.assembled + left;
    }

    /// Reads the next whole frame (complete or not) into `out` (the whole frame's pixels)
    /// and books it; `None` at the end of every port.
    fn assemble(&mut self, out: &mut [u16]) -> Result<Option<FrameInfo>> {
        let batch = self.batch;
        let mut next: Option<u64> = None;
        for q in &mut self.ports {
            if let Some(info) = q.peek(batch)? {
                next = Some(next.map_or(info.frame_number, |m| m.min(info.frame_number)));
            }
        }
        let Some(number) = next else {
            self.sync();
            return Ok(None);
        };
        let cols = self.master.cols;
        let (rows_p, cols_p) = (self.master.port_rows, self.master.port_cols);
        let px = rows_p * cols_p;
        let mut losses = Vec::new();
        let mut first: Option<FrameInfo> = None;
        let (mut caught, mut mask) = (0u32, 0u32);
        for (p, q) in self.ports.iter_mut().enumerate() {
            let (r0, c0) = q.origin;
            let here = q.infos.get(q.head).filter(|i| i.frame_number == number);
            let Some(info) = here.copied() else {
                for r in 0..rows_p {
                    let at = (r0 + r) * cols + c0;
                    out[at..at + cols_p].fill(ABSENT);
                }
                losses.push(PartLoss {
                    port: p,
                    packets_caught: None,
                    expected: self.expected,
                });
                continue;
            };
            let part = &q.parts[q.head * px..(q.head + 1) * px];
            for (r, row) in part.chunks_exact(cols_p).enumerate() {
                let at = (r0 + r) * cols + c0;
                out[at..at + cols_p].copy_from_slice(row);
            }
            q.head += 1;
            let h = &info.header;
            caught = caught.saturating_add(h.packet_number);
            mask = mask.saturating_add(h.mask_count());
            if !h.is_complete(self.expected) {
                losses.push(PartLoss {
                    port: p,
                    packets_caught: Some(h.packet_number),
                    expected: self.expected,
                });
            }
            let said = (h.row, h.column);
            if (usize::from(said.0), usize::from(said.1)) != q.grid {
                match self.report.misplaced.iter_mut().find(|m| m.port == p) {
                    Some(m) => m.count += 1,
                    None => self.report.misplaced.push(MisplacedParts {
                        port: p,
                        first_frame_number: number,
                        header_place: said,
                        file_place: q.grid,
                        count: 1,
                    }),
                }
            }
            first.get_or_insert(info);
        }
        let Some(base) = first else {
            return Err(Error::Internal(format!(
                "raw reader: frame {number} has no part in any port"
            )));
        };
        let mut header = base.header;
        header.packet_number = caught;
        let info = FrameInfo {
            frame_number: number,
            complete: losses.is_empty(),
            header,
            ..base
        };
        self.report.book_number(number);
        self.assembled += 1;
        if !losses.is_empty() {
            let present =
                self.ports.len() - losses.iter().filter(|l| l.packets_caught.is_none()).count();
            self.report.incomplete.push(IncompleteFrame {
                frame_number: number,
                packets_caught: caught,
                mask_count: mask,
                expected: self
                    .expected
                    .map(|e| e.saturating_mul(u32::try_from(present).unwrap_or(u32::MAX))),
                delivered: self.deliver_incomplete,
                parts: losses,
            });
        }
        Ok(Some(info))
    }

    /// Reads the next frame to deliver into `out`; `None` at the end.
    ///
    /// # Errors
    /// [`Error::Shape`] for an `out` that is not one whole frame; the ports' read errors.
    pub(crate) fn next_frame_into(&mut self, out: &mut [u16]) -> Result<Option<FrameInfo>> {
        self.master.check_frame_buffer(out.len())?;
        loop {
            let Some(info) = self.assemble(out)? else {
                return Ok(None);
            };
            if info.complete || self.deliver_incomplete {
                self.report.frames_delivered += 1;
                self.sync();
                return Ok(Some(info));
            }
        }
    }

    /// Appends up to `n` frames to `out`; fewer only at the end of the data.
    pub(crate) fn next_frames(&mut self, n: usize, out: &mut Vec<u16>) -> Result<Vec<FrameInfo>> {
        let px = self.master.pixels();
        let mut infos = Vec::new();
        while infos.len() < n {
            let start = out.len();
            out.resize(start + px, 0);
            match self.next_frame_into(&mut out[start..])? {
                Some(info) => infos.push(info),
                None => {
                    out.truncate(start);
                    break;
                }
            }
        }
        Ok(infos)
    }

    /// Fills `dst` (whole frames) with the next frames, handing each one's info to `each`;
    /// returns how many it filled (fewer than fit only at the end).
    pub(crate) fn fill_batch(
        &mut self,
        dst: &mut [u16],
        mut each: impl FnMut(FrameInfo),
    ) -> Result<usize> {
        let px = self.master.pixels();
        if px == 0 {
            return Ok(0);
        }
        let mut filled = 0;
        for slot in dst.chunks_exact_mut(px) {
            match self.next_frame_into(slot)? {
                Some(info) => {
                    each(info);
                    filled += 1;
                }
                None => break,
            }
        }
        Ok(filled)
    }

    /// Frames still to be delivered, exactly: every port's remaining headers (and the parts
    /// read ahead) merged as [`PortSet::next_frame_into`] merges them. Reads no image.
    ///
    /// # Errors
    /// A port's read errors.
    pub(crate) fn count_deliverable(&self) -> Result<u64> {
        let mut lists = Vec::with_capacity(self.ports.len());
        for q in &self.ports {
            let mut list: Vec<(u64, bool)> = q.infos[q.head.min(q.infos.len())..]
                .iter()
                .map(|i| (i.frame_number, i.header.is_complete(self.expected)))
                .collect();
            list.extend(q.reader.remaining_numbers(self.expected)?);
            lists.push(list);
        }
        let mut at = vec![0usize; lists.len()];
        let mut n = 0u64;
        loop {
            let next = lists
                .iter()
                .zip(&at)
                .filter_map(|(l, &i)| l.get(i).map(|e| e.0))
                .min();
            let Some(number) = next else {
                return Ok(n);
            };
            let mut complete = true;
            for (l, i) in lists.iter().zip(at.iter_mut()) {
                match l.get(*i) {
                    Some(&(f, ok)) if f == number => {
                        complete &= ok;
                        *i += 1;
                    }
                    _ => complete = false,
                }
            }
            n += u64::from(complete || self.deliver_incomplete);
        }
    }

    /// Frames left on disk at most in the port holding the most (an estimate of the whole
    /// frames to come: exact when no port lost a part another has).
    pub(crate) fn frames_left_on_disk(&self) -> u64 {
        self.ports
            .iter()
            .map(|q| {
                let ahead = q.infos.len().saturating_sub(q.head) as u64;
                ahead + q.reader.frames_left_on_disk()
            })
            .max()
            .unwrap_or(0)
    }

    /// Books the tails of every port's files (the end of the data).
    pub(crate) fn finish(&mut self) -> Result<()> {
        for q in &mut self.ports {
            q.reader.finish()?;
        }
        self.sync();
        Ok(())
    }
}
