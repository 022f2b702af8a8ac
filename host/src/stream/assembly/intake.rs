//! An endpoint's messages taken in: parts matched to their frame, restarts, duplicates and late
//! parts counted.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::Assembler;
use super::messages::{Input, LayoutError, Notice, Output, PartFault};
use super::pending::{Pending, Slot};
use super::place::Place;
use crate::stream::header::ZmqHeader;

impl<D: std::ops::Deref<Target = [u8]>> Assembler<D> {
    /// An assembler for the endpoints `names` (in the order their parts are numbered), whole
    /// frames of `expected` (rows, columns) when known (a fixed pedestal's), at most `window`
    /// frames waiting for parts (at least 1), each at most `max_wait`.
    pub fn new(
        names: Vec<String>,
        expected: Option<(usize, usize)>,
        window: usize,
        max_wait: Duration,
    ) -> Self {
        let n = names.len();
        Self {
            names,
            expected,
            window: window.max(1),
            max_wait,
            key: None,
            ended: vec![false; n],
            seen: vec![None; n],
            zero: vec![None; n],
            held: (0..n).map(|_| None).collect(),
            heard: vec![None; n],
            places: vec![None; n],
            layout: false,
            pending: BTreeMap::new(),
            done: None,
            later: (0..n).map(|_| VecDeque::new()).collect(),
            out: VecDeque::new(),
            notices: Vec::new(),
            last_end: None,
        }
    }

    /// Endpoints.
    pub fn parts(&self) -> usize {
        self.names.len()
    }

    /// Frames waiting for parts now.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Gives up every frame waiting for parts now (each handed on as given up, reported
    /// incomplete by its consumer), for an acquisition that ends without them (a stop request,
    /// nothing heard for the idle time); returns the outputs waiting to be popped.
    pub fn give_up_waiting(&mut self) -> usize {
        while let Some((number, p)) = self.pending.pop_first() {
            self.done = Some(number);
            self.hand_on(number, p);
        }
        self.out.len()
    }

    /// When the last message of any endpoint was taken (`None`: none yet).
    pub fn last_heard(&self) -> Option<Instant> {
        self.heard.iter().flatten().max().copied()
    }

    /// The next frame or end, in order.
    pub fn pop(&mut self) -> Option<Output<D>> {
        self.out.pop_front()
    }

    /// Faults to count and report since the last call (late parts, malformed messages).
    pub fn take_notices(&mut self) -> Vec<Notice> {
        std::mem::take(&mut self.notices)
    }

    /// Counts a fault found outside the assembler (e.g. a part dropped whose header was
    /// unreadable).
    pub fn notice(&mut self, kind: PartFault, message: String) {
        self.notices.push(Notice { kind, message });
    }

    /// Counts a message of endpoint `e` that is not slsReceiver's.
    pub fn malformed(&mut self, e: usize, why: &str) {
        let message = format!("malformed message from {}: {why}; skipped", self.names[e]);
        self.notices.push(Notice {
            kind: PartFault::Malformed,
            message,
        });
    }

    /// Takes what endpoint `e` delivered at `now`.
    ///
    /// # Errors
    /// [`LayoutError`] when the first parts of an acquisition do not tile one frame (or not
    /// the expected one), naming the endpoint and its header's fields.
    pub fn push(&mut self, e: usize, input: Input<D>, now: Instant) -> Result<(), LayoutError> {
        self.heard[e] = Some(now);
        if self.ended[e] {
            // It belongs to the next acquisition.
            self.later[e].push_back(input);
            if self.later[e].len() > self.window {
                self.force_end(e);
                self.next_acquisition(now)?;
            }
            return Ok(());
        }
        // A held part of frame 0: the next part from this endpoint tells what it was.
        if let Some((again, held)) = self.held[e].take() {
            let restarted = match &input {
                Input::Part(h, ..) => {
                    let number = h.number();
                    h.frame_index.is_some_and(|i| i > 0)
                        && number > again
                        && self.seen[e].is_some_and(|s| number <= s)
                        && self.key == Some((h.file_index, h.fname.clone()))
                }
                _ => false,
            };
            if restarted {
                let message = format!(
                    "{}: the sender restarted mid-acquisition: frame {again} (frameIndex 0) came again after frame {}, and frame {} after it; the acquisition is ended there, the next one starts with frame {again}",
                    self.names[e],
                    self.seen[e].unwrap_or(0),
                    match &input {
                        Input::Part(h, ..) => h.number(),
                        _ => 0,
                    }
                );
                self.notices.push(Notice {
                    kind: PartFault::Restart,
                    message,
                });
                self.ended[e] = true;
                self.later[e].push_back(held);
                self.later[e].push_back(input);
                self.next_acquisition(now)?;
                return Ok(());
            }
            self.duplicate(e, again);
        }
        match input {
            Input::End(h) => {
                self.ended[e] = true;
                self.last_end = Some(h);
                self.next_acquisition(now)?;
            }
            Input::Dropped(number) => {
                if self.is_done(number) || self.seen[e].is_some_and(|s| number <= s) {
                    return Ok(());
                }
                self.seen[e] = Some(number);
                self.slot(number, e, (now, now), None, Slot::Dropped);
                self.advance(now);
            }
            Input::Part(h, data, arrived) => {
                let key = (h.file_index, h.fname.clone());
                let number = h.number();
                let moved = match &self.key {
                    Some(k) if *k != key => Some(format!(
                        "{}: frame {number} belongs to another acquisition (fileIndex {}, fname {:?}) but this one (fileIndex {}, fname {:?}) had no end-of-acquisition message from it; it is ended there",
                        self.names[e], key.0, key.1, k.0, k.1
                    )),
                    // frameIndex 0 with a number not above this endpoint's last: the sender
                    // restarted.
                    // A part of frame 0 again (the same number as this endpoint's frameIndex 0
                    // part) is held below instead: a duplicate unless the numbers start again.
                    Some(_)
                        if h.frame_index == Some(0)
                            && self.zero[e] != Some(number)
                            && self.seen[e].is_some_and(|s| number <= s) =>
                    {
                        Some(format!(
                            "{}: the sender restarted mid-acquisition: frame {number} (frameIndex 0) after frame {}; the acquisition is ended there, the next one starts with frame {number}",
                            self.names[e],
                            self.seen[e].unwrap_or(0)
                        ))
                    }
                    _ => None,
                };
                if let Some(message) = moved {
                    // This endpoint moved on to another acquisition without an end message.
                    self.notices.push(Notice {
                        kind: PartFault::Restart,
                        message,
                    });
                    self.ended[e] = true;
                    self.later[e].push_back(Input::Part(h, data, arrived));
                    self.next_acquisition(now)?;
                    return Ok(());
                }
                if self.key.is_none() {
                    self.key = Some(key);
                }
                if self.is_done(number) || self.seen[e].is_some_and(|s| number <= s) {
                    if h.frame_index == Some(0) && self.zero[e] == Some(number) {
                        // Frame 0's part again: a duplicate, or a restart whose frame numbers
                        // start again at the same number; the next part tells.
                        self.held[e] = Some((number, Input::Part(h, data, arrived)));
                        return Ok(());
                    }
                    self.late(e, number);
                    return Ok(());
                }
                self.seen[e] = Some(number);
                if h.frame_index == Some(0) {
                    self.zero[e] = Some(number);
                }
                let place = Place::of(&h);
                if self.places[e].is_none() {
                    self.places[e] = Some(place);
                    if !self.layout && self.places.iter().all(Option::is_some) {
                        self.check_layout()?;
                        self.layout = true;
                    }
                }
                let slot = match (data, self.places[e]) {
                    (Err(why), _) => Slot::Bad(why),
                    (Ok(_), Some(p)) if p != place => Slot::Bad(format!(
                        "its header says {}, the acquisition's first part from this endpoint said {}",
                        place.describe(),
                        p.describe()
                    )),
                    (Ok(d), _) => {
                        let (r, c) = (h.shape[1] as usize, h.shape[0] as usize);
                        match h.check_frame(d.len(), r, c) {
                            Ok(()) => Slot::Here(Box::new(h.clone()), d),
                            Err(
                                crate::stream::header::HeaderFault::Mismatch(w)
                                | crate::stream::header::HeaderFault::Malformed(w),
                            ) => Slot::Bad(w),
                        }
                    }
                };
                self.slot(number, e, (arrived, now), Some(h), slot);
                self.advance(now);
            }
        }
        Ok(())
    }

    /// Gives up frames that waited too long: call it when nothing is left to take (the
    /// endpoints are silent), never while parts wait in a queue (a consumer that was busy is
    /// not a stalled endpoint).
    pub fn poll(&mut self, now: Instant) {
        self.advance_by(now, true);
    }

    fn is_done(&self, number: u64) -> bool {
        self.done.is_some_and(|d| number <= d)
    }

    /// Counts endpoint `e`'s part of frame `number` (its `frameIndex` 0) that came again.
    pub(super) fn duplicate(&mut self, e: usize, number: u64) {
        let message = format!(
            "frame {number}: its part from {} (frameIndex 0) came again while the frame numbers went on: a duplicate, discarded (not a restart)",
            self.names[e]
        );
        self.notice(PartFault::Duplicate, message);
    }

    fn late(&mut self, e: usize, number: u64) {
        let message = format!(
            "frame {number}: its part from {} came after the frame was handed on (whole or given up); discarded",
            self.names[e]
        );
        self.notice(PartFault::Late, message);
    }

    fn slot(
        &mut self,
        number: u64,
        e: usize,
        (arrived, now): (Instant, Instant),
        h: Option<ZmqHeader>,
        s: Slot<D>,
    ) {
        let n = self.names.len();
        let key = self.key.clone();
        let known = self.places.iter().flatten().next().copied();
        let p = self.pending.entry(number).or_insert_with(|| {
            // Until a part of it comes: the acquisition's name and a part's place, and no
            // frameIndex (which would read as a restart).
            let mut header = ZmqHeader::frame(0, 0, number);
            header.frame_index = None;
            if let Some((index, fname)) = key {
                header.file_index = index;
                header.fname = fname;
            }
            if let Some(place) = known {
                header.shape = place.shape;
                header.detshape = place.detshape;
            }
            Pending {
                slots: (0..n).map(|_| Slot::Waiting).collect(),
                first: arrived,
                since: now,
                header,
            }
        });
        if let Some(h) = h
            && p.slots
                .iter()
                .all(|s| !matches!(s, Slot::Here(..) | Slot::Bad(_)))
        {
            p.header = h;
        }
        p.slots[e] = s;
    }
}
