//! Messages taken one by one: checked against the acquisition (its key, frame numbers,
//! shape, sampling) and turned into frames to find clusters in.

use std::time::{Duration, Instant};

use super::Acquisition;
use super::events::{Ending, FaultKind};
use super::faults::fault_kind;
use crate::error::Result;
use crate::stream::assembly::Piece;
use crate::stream::header::{HeaderFault, ZmqHeader};
use crate::stream::receiver::Message;

impl<'r> Acquisition<'r> {
    /// The next message: the pending one, or one from the queue within `timeout`.
    pub(super) fn next(&mut self, timeout: Duration) -> Result<Option<Message>> {
        if let Some(m) = self.pending.take() {
            return Ok(Some(m));
        }
        for event in self.receiver.take_events() {
            (self.report)(&event.into());
        }
        let m = self.receiver.next(timeout);
        for n in self.receiver.take_notices() {
            self.fault(fault_kind(n.kind), 1, n.message);
        }
        m
    }

    /// Handles one message; returns the frame (header, data part, arrival) when it is one to
    /// find clusters in.
    pub(super) fn handle(&mut self, msg: Message) -> Option<(u64, Pixels, Instant)> {
        let header = match msg.header() {
            Ok(h) => h,
            Err(HeaderFault::Malformed(why) | HeaderFault::Mismatch(why)) => {
                let after = self
                    .last
                    .map_or(String::new(), |l| format!(" (after frame {l})"));
                self.fault(
                    FaultKind::Malformed,
                    1,
                    format!("malformed message{after}: {why}; skipped"),
                );
                return None;
            }
        };
        let (extra_parts, arrived) = (msg.extra_parts, msg.arrived);
        if !header.is_data() {
            let parts = &msg.parts;
            if parts.len() > 1 {
                self.fault(
                    FaultKind::Malformed,
                    1,
                    format!(
                        "an end-of-acquisition header came with {} more parts; they were ignored",
                        parts.len() - 1 + extra_parts
                    ),
                );
            }
            let last = self.last;
            self.account_drops(last, None);
            self.counts.ending = Ending::EndMessage;
            return None;
        }
        let number = header.number();
        if number > self.max_frame_number {
            self.fault(
                FaultKind::Malformed,
                1,
                format!(
                    "frame {number}: its frame number is above {}, the largest the output holds; skipped",
                    self.max_frame_number
                ),
            );
            return None;
        }
        // Does the frame belong to this acquisition?
        let key = (header.file_index, header.fname.clone());
        if let (Some(k), Some(last)) = (&self.key, self.last) {
            let ending = if *k != key {
                Some((
                    Ending::NextAcquisition,
                    format!(
                        "frame {number} belongs to another acquisition (fileIndex {}, fname {:?}) but this one (fileIndex {}, fname {:?}) had no end-of-acquisition message; ending it after frame {last}",
                        key.0, key.1, k.0, k.1
                    ),
                ))
            } else if number == last {
                // The frame just handed on, sent again (its frame number cannot start a new
                // run of numbers that the last frame ended): a duplicate, not a restart.
                self.fault(
                    FaultKind::Duplicate,
                    1,
                    format!(
                        "frame {number} (frameIndex {}) came again right after itself: a duplicate, discarded (not a restart)",
                        header.frame_index.map_or("?".into(), |i| i.to_string())
                    ),
                );
                return None;
            } else if number <= last || header.frame_index == Some(0) {
                Some((
                    Ending::Restart,
                    format!(
                        "the sender restarted mid-acquisition: frame {number} (frameIndex {}) after frame {last}; ending this acquisition, the next one starts with frame {number}",
                        header.frame_index.map_or("?".into(), |i| i.to_string())
                    ),
                ))
            } else {
                None
            };
            if let Some((ending, message)) = ending {
                self.fault(FaultKind::Restart, 1, message);
                let last = self.last;
                self.account_drops(last, None);
                self.counts.ending = ending;
                *self.pending = Some(msg);
                return None;
            }
        }
        if self.key.is_none() {
            self.key = Some(key);
        }
        // Gaps: frames between the last one and this that never came, less those cluda
        // dropped itself; in a sampled stream, less the frames never meant to be sent.
        let last = self.last;
        let dropped_inside = self.account_drops(last, Some(number));
        if let Some(last) = last
            && number > last
        {
            let outcome = self.strides.gap(last, number, dropped_inside);
            self.book_gaps(outcome);
        }
        self.last = Some(number);
        if self.counts.first_arrival.is_none() {
            self.counts.first_arrival = Some(arrived);
        }
        let Message {
            mut parts,
            assembled,
            ..
        } = msg;
        if let Some(a) = assembled {
            if let Some((kind, why)) = a.fault {
                self.fault(fault_kind(kind), 1, format!("{why}; skipped"));
                return None;
            }
            let bytes: usize = a.pieces.iter().map(|p| p.data.len()).sum();
            if !self.whole_frame(&header, number, bytes) {
                return None;
            }
            return Some((number, Pixels::Parts(a.pieces), arrived));
        }
        if parts.len() < 2 {
            self.fault(
                FaultKind::Malformed,
                1,
                format!("frame {number}: its header came without the data part; skipped"),
            );
            return None;
        }
        if extra_parts > 0 {
            self.fault(
                FaultKind::Malformed,
                1,
                format!("frame {number}: {extra_parts} more part(s) after the data part; skipped"),
            );
            return None;
        }
        if !self.whole_frame(&header, number, parts[1].len()) {
            return None;
        }
        let data = parts.pop()?;
        Some((number, Pixels::Whole(data), arrived))
    }

    /// Whether frame `number`, `bytes` bytes of pixels under `header`, is one to find clusters
    /// in: its header agrees with its data and does not say it is incomplete. A frame that is
    /// not is counted and reported as skipped.
    fn whole_frame(&mut self, header: &ZmqHeader, number: u64, bytes: usize) -> bool {
        if let Err(HeaderFault::Mismatch(why) | HeaderFault::Malformed(why)) =
            header.check_frame(bytes, self.rows, self.cols)
        {
            self.fault(
                FaultKind::Mismatch,
                1,
                format!("frame {number}: {why}; skipped"),
            );
            return false;
        }
        if let Some(why) = header.incomplete() {
            self.fault(
                FaultKind::Incomplete,
                1,
                format!("frame {number} is incomplete: {why}; skipped"),
            );
            return false;
        }
        true
    }
}

/// A frame's pixels as they came: one message, or parts to place.
pub(super) enum Pixels {
    Whole(zmq::Message),
    Parts(Vec<Piece<zmq::Message>>),
}

impl Pixels {
    /// Copies the frame into `dst` (its `cols` columns a row).
    pub(super) fn copy_to(&self, dst: &mut [u16], cols: usize) {
        match self {
            Self::Whole(data) => copy_frame(dst, data),
            Self::Parts(pieces) => {
                for p in pieces {
                    crate::stream::assembly::place(dst, cols, p);
                }
            }
        }
    }
}

/// Copies a frame's little-endian bytes into its samples.
fn copy_frame(dst: &mut [u16], src: &[u8]) {
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice_mut::<u16, u8>(dst).copy_from_slice(src);
    } else {
        for (d, s) in dst.iter_mut().zip(src.chunks_exact(2)) {
            *d = u16::from_le_bytes([s[0], s[1]]);
        }
    }
}
