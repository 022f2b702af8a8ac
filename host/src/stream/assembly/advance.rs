//! Frames handed on in frame-number order, complete or given up, and acquisitions ended on
//! every endpoint.

use std::collections::VecDeque;
use std::time::Instant;

use super::Assembler;
use super::messages::{Assembled, Input, LayoutError, Notice, Output, PartFault};
use super::pending::{Pending, Slot};
use super::place::{Piece, Place};
use crate::stream::header::ZmqHeader;

impl<D: std::ops::Deref<Target = [u8]>> Assembler<D> {
    /// Hands on frames in order while the oldest is complete or can be given up.
    pub(super) fn advance(&mut self, now: Instant) {
        self.advance_by(now, false);
    }

    /// [`Self::advance`], giving up frames that waited `max_wait` too when `by_time`.
    pub(super) fn advance_by(&mut self, now: Instant, by_time: bool) {
        loop {
            let waiting = self.pending.len();
            let Some(entry) = self.pending.first_entry() else {
                break;
            };
            let number = *entry.key();
            let p = entry.get();
            let complete = p.slots.iter().all(|s| matches!(s, Slot::Here(..)));
            let hopeless = p.slots.iter().enumerate().all(|(e, s)| {
                !matches!(s, Slot::Waiting)
                    || self.ended[e]
                    || self.seen[e].is_some_and(|x| x > number)
            });
            // Waited long, and every endpoint it waits for has been silent as long (one whose
            // parts keep coming is behind, not stalled: the window bounds how far).
            let stalled = by_time
                && now.saturating_duration_since(p.since) >= self.max_wait
                && p.slots.iter().enumerate().all(|(e, s)| {
                    !matches!(s, Slot::Waiting)
                        || self.heard[e]
                            .is_none_or(|t| now.saturating_duration_since(t) >= self.max_wait)
                });
            let overdue = waiting > self.window || stalled;
            if !(complete || hopeless || overdue) {
                break;
            }
            let p = entry.remove();
            self.done = Some(number);
            self.hand_on(number, p);
        }
    }

    pub(super) fn hand_on(&mut self, number: u64, p: Pending<D>) {
        let Pending {
            slots,
            first,
            header,
            ..
        } = p;
        let mut header = header;
        if header.frame_index.is_none()
            && let Some((index, fname)) = &self.key
        {
            // Only drops of it came: the acquisition's name as known now.
            header.file_index = *index;
            header.fname.clone_from(fname);
        }
        let (rows, cols) = Place::of(&header).whole();
        // A receiver of several ports sends each part with its own extent as its "whole" ROI
        // (slsReceiver's `DataStreamer::SetPortROI`, e.g. [0, 399, 0, 199] for each half of
        // a MOENCH on two interfaces): no ROI is set, the whole frame is the frame's ROI.
        let part = [
            0,
            i64::from(header.shape[0]) - 1,
            0,
            i64::from(header.shape[1]) - 1,
        ];
        let roi = match header.rx_roi {
            Some(r) if r == part => Some([0, cols as i64 - 1, 0, rows as i64 - 1]),
            r => r,
        };
        let mut whole = header;
        whole.rx_roi = roi;
        whole.shape = [cols as u32, rows as u32];
        whole.size = (rows as u64) * (cols as u64) * 2;
        whole.detshape = [1, 1];
        whole.row = 0;
        whole.column = 0;
        whole.flip_rows = 0;
        let mut trouble: Vec<(PartFault, String)> = Vec::new();
        let mut pieces = Vec::with_capacity(slots.len());
        let mut incomplete = false;
        let mut packets = Some(0u32);
        for (e, s) in slots.into_iter().enumerate() {
            let who = format!("part {} of {} ({})", e + 1, self.names.len(), self.names[e]);
            match s {
                Slot::Here(h, d) => {
                    incomplete |= h.complete_image == Some(0);
                    packets = match (packets, h.packet_number) {
                        (Some(a), Some(b)) if b != 0 => a.checked_add(b),
                        _ => None,
                    };
                    let (r, c) = (h.shape[1] as usize, h.shape[0] as usize);
                    pieces.push(Piece {
                        data: d,
                        row0: h.row as usize * r,
                        col0: h.column as usize * c,
                        rows: r,
                        cols: c,
                        flip: h.flip_rows != 0,
                    });
                }
                Slot::Waiting => {
                    trouble.push((PartFault::Incomplete, format!("{who} never arrived")))
                }
                Slot::Dropped => trouble.push((
                    PartFault::Dropped,
                    format!("{who} was dropped by cluda: its queue was full"),
                )),
                Slot::Bad(why) => trouble.push((PartFault::Mismatch, format!("{who}: {why}"))),
            }
        }
        let fault = if trouble.is_empty() {
            None
        } else {
            // The gravest kind names the frame's fault: a wrong part, then cluda's drop.
            let kind = [
                PartFault::Mismatch,
                PartFault::Dropped,
                PartFault::Incomplete,
            ]
            .into_iter()
            .find(|k| trouble.iter().any(|(t, _)| t == k))
            .unwrap_or(PartFault::Incomplete);
            let text: Vec<String> = trouble.into_iter().map(|(_, s)| s).collect();
            pieces.clear();
            Some((kind, format!("frame {number}: {}", text.join("; "))))
        };
        if incomplete {
            whole.complete_image = Some(0);
        }
        whole.packet_number = Some(packets.unwrap_or(0));
        self.out.push_back(Output::Frame(Assembled {
            header: whole,
            pieces,
            fault,
            arrived: first,
        }));
    }

    /// Endpoint `e` has waited too long for the others to end: every endpoint is taken as
    /// ended, reported.
    pub(super) fn force_end(&mut self, e: usize) {
        let open: Vec<&str> = self
            .ended
            .iter()
            .enumerate()
            .filter(|(_, x)| !**x)
            .map(|(i, _)| self.names[i].as_str())
            .collect();
        let message = format!(
            "{} is {} messages into the next acquisition while {} did not end this one (no end-of-acquisition message): this acquisition is ended",
            self.names[e],
            self.later[e].len(),
            open.join(", ")
        );
        self.notices.push(Notice {
            kind: PartFault::Malformed,
            message,
        });
        self.ended.iter_mut().for_each(|x| *x = true);
    }

    /// When every endpoint has ended: gives up what waits, hands on the end, and starts the
    /// next acquisition with what the endpoints sent for it meanwhile.
    pub(super) fn next_acquisition(&mut self, now: Instant) -> Result<(), LayoutError> {
        while self.ended.iter().all(|x| *x) {
            self.advance(now);
            while let Some((number, p)) = self.pending.pop_first() {
                self.hand_on(number, p);
            }
            let end = self
                .last_end
                .take()
                .unwrap_or_else(ZmqHeader::end_of_acquisition);
            self.out.push_back(Output::End(end));
            self.key = None;
            self.done = None;
            self.layout = false;
            self.ended.iter_mut().for_each(|x| *x = false);
            self.seen.iter_mut().for_each(|x| *x = None);
            self.zero.iter_mut().for_each(|x| *x = None);
            for e in 0..self.held.len() {
                if let Some((again, _)) = self.held[e].take() {
                    self.duplicate(e, again);
                }
            }
            self.places.iter_mut().for_each(|x| *x = None);
            let later: Vec<VecDeque<Input<D>>> =
                self.later.iter_mut().map(std::mem::take).collect();
            for (e, inputs) in later.into_iter().enumerate() {
                for input in inputs {
                    self.push(e, input, now)?;
                }
            }
        }
        Ok(())
    }
}
