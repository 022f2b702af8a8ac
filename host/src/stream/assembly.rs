//! Frames streamed as several parts (one per UDP interface or module, each on its own ZMQ
//! endpoint), matched by frame number and placed into one frame: the bookkeeping, without any
//! socket (so it is tested on its own, with any part order and any loss).
//!
//! Each part's header says where it belongs, as slsReceiver fills it
//! (`DataStreamer::SendDataHeader`, slsReceiverSoftware/src/DataStreamer.cpp): `detshape` is
//! the receiver's ports `[x, y]` (for a MOENCH with `numinterfaces 2`, `[1, 2]`), `shape` the
//! part's pixels `[columns, rows]`, and `row`/`column` the port's place from the detector's UDP
//! header. The part goes where slsDetector's own client puts it
//! (`DetectorImpl::readFrameFromReceiver`, slsDetectorSoftware/src/DetectorImpl.cpp): rows
//! from `row x rows` and columns from `column x columns` of the whole frame, and with
//! `flipRows` its rows in reverse order.
//!
//! A frame is complete when every endpoint gave its part. Parts of one endpoint arrive in
//! order (one TCP connection each), so a frame whose part from endpoint E is still missing is
//! given up as soon as E has sent a later frame or ended the acquisition (that part was lost
//! before cluda); and, so that a stalled endpoint cannot hold memory, when more than
//! `window` frames wait, or the oldest waited `max_wait` while every endpoint it waits for
//! was silent that long (an endpoint whose parts keep coming is behind, not stalled). Frames
//! come out in frame-number
//! order, complete or given up (with the parts that were missing and why); a part for a frame
//! already out is counted as late. An endpoint's end-of-acquisition message (or a part of
//! another acquisition: a different `fileIndex`/`fname`) ends the acquisition on that
//! endpoint; what it sends next waits until every endpoint has ended, so parts of two
//! acquisitions never meet in one frame.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::header::ZmqHeader;

/// Where one endpoint's part goes in the whole frame, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// `row` of the header: the part's row in the grid of parts.
    pub row: u32,
    /// `column` of the header.
    pub column: u32,
    /// `shape` of the header, `[columns, rows]` of the part.
    pub shape: [u32; 2],
    /// `detshape` of the header, `[x, y]` parts of the whole frame.
    pub detshape: [u32; 2],
    /// `flipRows` of the header.
    pub flip: bool,
}

impl Place {
    /// The place a part header announces.
    pub fn of(h: &ZmqHeader) -> Self {
        Self {
            row: h.row,
            column: h.column,
            shape: h.shape,
            detshape: h.detshape,
            flip: h.flip_rows != 0,
        }
    }

    /// Rows and columns of the whole frame this part belongs to (`detshape` of 0 counts as 1).
    pub fn whole(&self) -> (usize, usize) {
        let (dx, dy) = (self.detshape[0].max(1), self.detshape[1].max(1));
        (
            dy as usize * self.shape[1] as usize,
            dx as usize * self.shape[0] as usize,
        )
    }

    fn describe(&self) -> String {
        format!(
            "row {} column {} shape [{}, {}] detshape [{}, {}] flipRows {}",
            self.row,
            self.column,
            self.shape[0],
            self.shape[1],
            self.detshape[0],
            self.detshape[1],
            u8::from(self.flip)
        )
    }
}

/// One part of a frame and where its pixels go.
#[derive(Debug)]
pub struct Piece<D> {
    /// The part's little-endian 16-bit pixels, row by row.
    pub data: D,
    /// First row of the whole frame it covers.
    pub row0: usize,
    /// First column of the whole frame it covers.
    pub col0: usize,
    /// Its rows.
    pub rows: usize,
    /// Its columns.
    pub cols: usize,
    /// Its rows go in reverse order.
    pub flip: bool,
}

/// Copies a piece into a whole frame of `cols` columns: each of its rows (the last first when
/// flipped) into its place, converting from little-endian bytes.
pub fn place<D: std::ops::Deref<Target = [u8]>>(dst: &mut [u16], cols: usize, piece: &Piece<D>) {
    let src: &[u8] = &piece.data;
    let width = piece.cols * 2;
    for (i, row) in src.chunks_exact(width).take(piece.rows).enumerate() {
        let r = piece.row0 + if piece.flip { piece.rows - 1 - i } else { i };
        let at = r * cols + piece.col0;
        let d = &mut dst[at..at + piece.cols];
        if cfg!(target_endian = "little") {
            bytemuck::cast_slice_mut::<u16, u8>(d).copy_from_slice(row);
        } else {
            for (v, b) in d.iter_mut().zip(row.chunks_exact(2)) {
                *v = u16::from_le_bytes([b[0], b[1]]);
            }
        }
    }
}

/// Why a frame, or a part, was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartFault {
    /// A part never arrived (lost before cluda).
    Incomplete,
    /// A part was dropped by cluda (its queue was full).
    Dropped,
    /// A part disagrees with its header, the layout or the frame.
    Mismatch,
    /// A part came for a frame already handed on (complete or given up).
    Late,
    /// A message that is not slsReceiver's.
    Malformed,
    /// An endpoint moved on to another acquisition (or restarted) without its end message.
    Restart,
    /// A part of frame 0 (`frameIndex` 0) that came again from the same endpoint while the
    /// acquisition's frame numbers went on: a duplicate, discarded (not a restart).
    Duplicate,
}

/// Something to count and report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// What kind.
    pub kind: PartFault,
    /// The report, naming the frame and the endpoint.
    pub message: String,
}

/// A frame handed on: whole, or given up.
#[derive(Debug)]
pub struct Assembled<D> {
    /// The whole frame's header: the first part's, with the whole `shape`, `size`,
    /// `completeImage` (0 when any part says 0) and `packetNumber` (the parts' sum).
    pub header: ZmqHeader,
    /// The parts, in endpoint order (empty when given up).
    pub pieces: Vec<Piece<D>>,
    /// Why it was given up (the frame is then not used).
    pub fault: Option<(PartFault, String)>,
    /// When its first part arrived.
    pub arrived: Instant,
}

/// What comes out, in order.
#[derive(Debug)]
pub enum Output<D> {
    /// A frame (whole or given up).
    Frame(Assembled<D>),
    /// Every endpoint ended the acquisition: its end header (the last endpoint's).
    End(ZmqHeader),
}

/// What an endpoint delivered.
#[derive(Debug)]
pub enum Input<D> {
    /// A data part: its header, its pixels (or why the message is not a usable part: no data
    /// part, extra parts) and its arrival.
    Part(ZmqHeader, Result<D, String>, Instant),
    /// The end-of-acquisition header.
    End(ZmqHeader),
    /// A part the receiving thread dropped (cluda's queue was full), by frame number.
    Dropped(u64),
}

/// What one endpoint's part of a waiting frame is.
#[derive(Debug)]
enum Slot<D> {
    Waiting,
    Here(Box<ZmqHeader>, D),
    Dropped,
    Bad(String),
}

#[derive(Debug)]
struct Pending<D> {
    slots: Vec<Slot<D>>,
    /// When its first part arrived (for the lag).
    first: Instant,
    /// When the assembler took its first part (for the wait).
    since: Instant,
    /// The first header of it that came (for a frame given up).
    header: ZmqHeader,
}

/// A part-layout error: the parts do not tile the frame. Stops the stream (the set-up is
/// wrong, every frame would be).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError(pub String);

/// Matches parts of `n` endpoints into frames (see the module's documentation).
pub struct Assembler<D> {
    names: Vec<String>,
    expected: Option<(usize, usize)>,
    window: usize,
    max_wait: Duration,
    key: Option<(u64, String)>,
    ended: Vec<bool>,
    seen: Vec<Option<u64>>,
    /// The frame number of each endpoint's `frameIndex` 0 part in this acquisition.
    zero: Vec<Option<u64>>,
    /// A part of frame 0 that came again from an endpoint (its frame number), held until that
    /// endpoint's next part says what it is: a restart when the next part goes on from it
    /// (frame numbers that really start again), a duplicate otherwise.
    held: Vec<Option<(u64, Input<D>)>>,
    /// When each endpoint's last message was taken.
    heard: Vec<Option<Instant>>,
    places: Vec<Option<Place>>,
    layout: bool,
    pending: BTreeMap<u64, Pending<D>>,
    done: Option<u64>,
    later: Vec<VecDeque<Input<D>>>,
    out: VecDeque<Output<D>>,
    notices: Vec<Notice>,
    last_end: Option<ZmqHeader>,
}

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
                                super::header::HeaderFault::Mismatch(w)
                                | super::header::HeaderFault::Malformed(w),
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
    fn duplicate(&mut self, e: usize, number: u64) {
        let message = format!(
            "frame {number}: its part from {} (frameIndex 0) came again while the frame numbers went on: a duplicate, discarded (not a restart)",
            self.names[e]
        );
        self.notices.push(Notice {
            kind: PartFault::Duplicate,
            message,
        });
    }

    fn late(&mut self, e: usize, number: u64) {
        let message = format!(
            "frame {number}: its part from {} came after the frame was handed on (whole or given up); discarded",
            self.names[e]
        );
        self.notices.push(Notice {
            kind: PartFault::Late,
            message,
        });
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

    /// Checks that the acquisition's first parts tile one frame: the same `detshape` and
    /// `shape` everywhere, `detshape` cells as many as endpoints, each cell once, and the whole
    /// frame the expected one.
    fn check_layout(&self) -> Result<(), LayoutError> {
        let places: Vec<Place> = self.places.iter().flatten().copied().collect();
        let Some(first) = places.first() else {
            return Ok(());
        };
        let n = places.len();
        let err = |i: usize, why: String| {
            LayoutError(format!(
                "the parts do not tile one frame: {} (header: {}): {why}",
                self.names[i],
                places[i].describe()
            ))
        };
        for (i, p) in places.iter().enumerate() {
            if p.detshape != first.detshape {
                return Err(err(
                    i,
                    format!(
                        "detshape differs from {}'s [{}, {}]",
                        self.names[0], first.detshape[0], first.detshape[1]
                    ),
                ));
            }
            if p.shape != first.shape {
                return Err(err(
                    i,
                    format!(
                        "shape differs from {}'s [{}, {}] (parts of one frame must be alike)",
                        self.names[0], first.shape[0], first.shape[1]
                    ),
                ));
            }
            if p.shape[0] == 0 || p.shape[1] == 0 {
                return Err(err(i, "an empty part".into()));
            }
        }
        let (dx, dy) = (first.detshape[0].max(1), first.detshape[1].max(1));
        if (dx as usize) * (dy as usize) != n {
            return Err(err(
                0,
                format!(
                    "detshape [{dx}, {dy}] has {} parts, but {n} endpoints were given",
                    dx * dy
                ),
            ));
        }
        for (i, p) in places.iter().enumerate() {
            if p.column >= dx || p.row >= dy {
                return Err(err(i, format!("row/column outside detshape [{dx}, {dy}]")));
            }
            if let Some(j) = places[..i]
                .iter()
                .position(|q| (q.row, q.column) == (p.row, p.column))
            {
                return Err(err(
                    i,
                    format!("the same place as {}'s part (they overlap)", self.names[j]),
                ));
            }
        }
        let whole = first.whole();
        if let Some(x) = self.expected
            && x != whole
        {
            return Err(err(
                0,
                format!(
                    "the parts make {} x {} frames, the pedestal's are {} x {}",
                    whole.0, whole.1, x.0, x.1
                ),
            ));
        }
        Ok(())
    }

    /// Hands on frames in order while the oldest is complete or can be given up.
    fn advance(&mut self, now: Instant) {
        self.advance_by(now, false);
    }

    /// [`Self::advance`], giving up frames that waited `max_wait` too when `by_time`.
    fn advance_by(&mut self, now: Instant, by_time: bool) {
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

    fn hand_on(&mut self, number: u64, p: Pending<D>) {
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
    fn force_end(&mut self, e: usize) {
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
    fn next_acquisition(&mut self, now: Instant) -> Result<(), LayoutError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Part headers of a `dy x dx` grid of `r x c` parts of frame `number` (flipped as `flip`).
    fn part(
        number: u64,
        e: usize,
        (dy, dx): (u32, u32),
        (r, c): (u32, u32),
        flip: bool,
    ) -> ZmqHeader {
        let mut h = ZmqHeader::frame(r, c, number);
        h.frame_index = Some(number);
        h.detshape = [dx, dy];
        h.row = e as u32 / dx;
        h.column = e as u32 % dx;
        h.flip_rows = i64::from(flip);
        h.fname = "run".into();
        h
    }

    /// The bytes of part `e` of a whole frame `whole` (rows x cols), cut as the parts' headers
    /// say (a flipped part holds its rows last first).
    fn cut(whole: &[u16], cols: usize, h: &ZmqHeader) -> Vec<u8> {
        let (r, c) = (h.shape[1] as usize, h.shape[0] as usize);
        let mut out = Vec::with_capacity(r * c * 2);
        for i in 0..r {
            let src = if h.flip_rows != 0 { r - 1 - i } else { i };
            let row = h.row as usize * r + src;
            for x in 0..c {
                out.extend_from_slice(&whole[row * cols + h.column as usize * c + x].to_le_bytes());
            }
        }
        out
    }

    fn frame_of(number: u64, len: usize) -> Vec<u16> {
        (0..len)
            .map(|i| (number as usize * 7919 + i * 31) as u16)
            .collect()
    }

    proptest! {
        /// Any interleaving of the endpoints' in-order streams, any lost parts: every frame
        /// with all its parts comes out whole and equal to the frame cut up; every other frame
        /// some part of which came comes out given up, naming exactly the lost parts; in
        /// frame-number order; then one end.
        #[test]
        fn parts_in_any_order_with_any_loss(
            grid in prop_oneof![Just((2u32, 1u32)), Just((1, 2)), Just((2, 2)), Just((4, 1))],
            flip in any::<bool>(),
            frames in 1u64..12,
            lost in proptest::collection::vec(any::<bool>(), 48),
            order in proptest::collection::vec(0usize..4, 200),
        ) {
            let (dy, dx) = grid;
            let n = (dy * dx) as usize;
            let (r, c) = (3u32, 5u32);
            let (rows, cols) = ((dy * r) as usize, (dx * c) as usize);
            let names: Vec<String> = (0..n).map(|e| format!("ep{e}")).collect();
            let mut a: Assembler<Vec<u8>> =
                Assembler::new(names, Some((rows, cols)), 10_000, Duration::from_secs(3600));
            let is_lost = |f: u64, e: usize| lost[(f as usize * n + e) % lost.len()];
            // Each endpoint's stream: its parts in frame order, then its end.
            let mut streams: Vec<VecDeque<Input<Vec<u8>>>> = (0..n)
                .map(|e| {
                    let mut q: VecDeque<Input<Vec<u8>>> = (0..frames)
                        .filter(|&f| !is_lost(f, e))
                        .map(|f| {
                            // Odd endpoints flip their rows when asked (like Eiger's halves).
                            let h = part(f, e, (dy, dx), (r, c), flip && e % 2 == 1);
                            let d = cut(&frame_of(f, rows * cols), cols, &h);
                            Input::Part(h, Ok(d), Instant::now())
                        })
                        .collect();
                    q.push_back(Input::End(ZmqHeader::end_of_acquisition()));
                    q
                })
                .collect();
            let now = Instant::now();
            let mut k = 0;
            let mut outs = Vec::new();
            while streams.iter().any(|q| !q.is_empty()) {
                let mut e = order[k % order.len()] % n;
                k += 1;
                while streams[e].is_empty() {
                    e = (e + 1) % n;
                }
                let input = streams[e].pop_front().expect("not empty");
                a.push(e, input, now).expect("the layout is right");
                while let Some(o) = a.pop() {
                    outs.push(o);
                }
            }
            prop_assert!(a.take_notices().is_empty());
            let mut last = None;
            let mut ends = 0;
            let mut seen = Vec::new();
            for o in outs {
                match o {
                    Output::End(_) => ends += 1,
                    Output::Frame(f) => {
                        prop_assert_eq!(ends, 0);
                        let number = f.header.number();
                        prop_assert!(last.is_none_or(|l| number > l));
                        last = Some(number);
                        seen.push(number);
                        let missing: Vec<usize> = (0..n).filter(|&e| is_lost(number, e)).collect();
                        if missing.is_empty() {
                            prop_assert!(f.fault.is_none());
                            prop_assert_eq!(f.header.rows_cols(), (rows, cols));
                            let mut whole = vec![0u16; rows * cols];
                            for p in &f.pieces {
                                place(&mut whole, cols, p);
                            }
                            prop_assert_eq!(whole, frame_of(number, rows * cols));
                        } else {
                            let (kind, why) = f.fault.expect("given up");
                            prop_assert_eq!(kind, PartFault::Incomplete);
                            prop_assert!(f.pieces.is_empty());
                            for e in 0..n {
                                let named = why.contains(&format!("(ep{e}) never arrived"));
                                prop_assert_eq!(named, missing.contains(&e), "{}", why);
                            }
                        }
                    }
                }
            }
            prop_assert_eq!(ends, 1);
            // Every frame some part of which came, once.
            let want: Vec<u64> = (0..frames).filter(|&f| (0..n).any(|e| !is_lost(f, e))).collect();
            prop_assert_eq!(seen, want);
        }
    }

    /// Feeds `(endpoint, frame number)` parts of a 2 x 1 grid (`frameIndex` = the number) and
    /// then both ends; returns the frames handed on (number, whole), the ends, the notices.
    fn feed(parts: &[(usize, u64)]) -> (Vec<(u64, bool)>, usize, Vec<Notice>) {
        let (r, c) = (2u32, 3u32);
        let (rows, cols) = (4usize, 3usize);
        let names = vec!["ep0".to_string(), "ep1".to_string()];
        let mut a: Assembler<Vec<u8>> =
            Assembler::new(names, Some((rows, cols)), 10_000, Duration::from_secs(3600));
        let now = Instant::now();
        for &(e, f) in parts {
            let h = part(f, e, (2, 1), (r, c), false);
            let d = cut(&frame_of(f, rows * cols), cols, &h);
            a.push(e, Input::Part(h, Ok(d), now), now).expect("layout");
        }
        for e in 0..2 {
            a.push(e, Input::End(ZmqHeader::end_of_acquisition()), now)
                .expect("layout");
        }
        let (mut frames, mut ends) = (Vec::new(), 0);
        while let Some(o) = a.pop() {
            match o {
                Output::End(_) => ends += 1,
                Output::Frame(f) => frames.push((f.header.number(), f.fault.is_none())),
            }
        }
        (frames, ends, a.take_notices())
    }

    /// A receiver of two ports sends each part with its own extent as `rx_roi` (no ROI set):
    /// the whole frame carries the whole frame's extent, never a part's (which would read as
    /// a receiver ROI); a real ROI is handed on as it came.
    #[test]
    fn a_part_extent_as_rx_roi_is_no_roi() {
        let (r, c) = (2u32, 3u32);
        let (rows, cols) = (4usize, 3usize);
        for (sent, want) in [
            (Some([0, 2, 0, 1]), Some([0, 2, 0, 3])),
            (Some([0, 1, 0, 1]), Some([0, 1, 0, 1])),
            (None, None),
        ] {
            let names = vec!["ep0".to_string(), "ep1".to_string()];
            let mut a: Assembler<Vec<u8>> =
                Assembler::new(names, Some((rows, cols)), 10_000, Duration::from_secs(3600));
            let now = Instant::now();
            for e in 0..2 {
                let mut h = part(0, e, (2, 1), (r, c), false);
                h.rx_roi = sent;
                let d = cut(&frame_of(0, rows * cols), cols, &h);
                a.push(e, Input::Part(h, Ok(d), now), now).expect("layout");
            }
            match a.pop() {
                Some(Output::Frame(f)) => assert_eq!(f.header.rx_roi, want, "{sent:?}"),
                _ => panic!("no frame for {sent:?}"),
            }
        }
    }

    /// Issue 32 item 8: a part of frame 0 that one endpoint sends again mid-acquisition is a
    /// duplicate (counted, discarded), not a restart: no frame is lost. Frame numbers that
    /// really start again (frame 0 again, then frame 1 again) are still a restart.
    #[test]
    fn a_repeated_part_of_frame_0_is_a_duplicate_not_a_restart() {
        let mut parts = Vec::new();
        for f in 0..10 {
            parts.push((0, f));
            if f == 1 {
                parts.push((0, 0));
            }
            parts.push((1, f));
        }
        let (frames, ends, notices) = feed(&parts);
        assert_eq!(frames, (0..10).map(|f| (f, true)).collect::<Vec<_>>());
        assert_eq!(ends, 1);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].kind, PartFault::Duplicate);
        assert!(
            notices[0].message.contains("frame 0: its part from ep0"),
            "{}",
            notices[0].message
        );

        // The repeat as the endpoint's last part before its end: a duplicate too.
        let mut parts: Vec<(usize, u64)> = (0..4).flat_map(|f| [(0, f), (1, f)]).collect();
        parts.push((1, 0));
        let (frames, ends, notices) = feed(&parts);
        assert_eq!(frames.len(), 4);
        assert_eq!(ends, 1);
        let kinds: Vec<PartFault> = notices.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, [PartFault::Duplicate]);

        // A real restart, the frame numbers starting again at the same number: frames 0..6,
        // then 0..4 again; two acquisitions, every frame whole.
        let parts: Vec<(usize, u64)> = (0..6).chain(0..4).flat_map(|f| [(0, f), (1, f)]).collect();
        let (frames, ends, notices) = feed(&parts);
        let want: Vec<(u64, bool)> = (0..6).chain(0..4).map(|f| (f, true)).collect();
        assert_eq!(frames, want);
        assert_eq!(ends, 2);
        assert!(
            notices.iter().all(|n| n.kind == PartFault::Restart) && !notices.is_empty(),
            "{notices:?}"
        );
        assert!(
            notices[0].message.contains("restarted mid-acquisition"),
            "{}",
            notices[0].message
        );
    }

    /// One endpoint's item of the two-acquisition oracle: a part present, dropped by cluda,
    /// or lost before it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Fate {
        Here,
        Dropped,
        Lost,
    }

    proptest! {
        /// Two acquisitions, each endpoint's stream in order (parts, parts dropped by cluda,
        /// parts lost; its end message, sometimes lost when its next item is a part of the
        /// second), interleaved at random: the first acquisition's frames, its end, the
        /// second's frames, its end, never mixed; each frame whole (equal to the frame cut up)
        /// or given up with the gravest reason (dropped before lost).
        #[test]
        fn two_acquisitions_interleaved_with_drops_and_losses(
            grid in prop_oneof![Just((2u32, 1u32)), Just((2, 2))],
            frames in (1u64..8, 1u64..8),
            fates in proptest::collection::vec(0u8..6, 64),
            end_lost in proptest::collection::vec(any::<bool>(), 4),
            order in proptest::collection::vec(0usize..4, 300),
        ) {
            let (dy, dx) = grid;
            let n = (dy * dx) as usize;
            let (r, c) = (2u32, 3u32);
            let (rows, cols) = ((dy * r) as usize, (dx * c) as usize);
            let names: Vec<String> = (0..n).map(|e| format!("ep{e}")).collect();
            let mut a: Assembler<Vec<u8>> =
                Assembler::new(names, None, 10_000, Duration::from_secs(3600));
            let fate = |acq: u64, f: u64, e: usize| match fates
                [((acq * 16 + f) as usize * n + e) % fates.len()]
            {
                0 => Fate::Lost,
                1 => Fate::Dropped,
                _ => Fate::Here,
            };
            let content = |acq: u64, f: u64| frame_of(acq * 100 + f, rows * cols);
            let counts = [frames.0, frames.1];
            let mut restarts = 0;
            let mut streams: Vec<VecDeque<Input<Vec<u8>>>> = (0..n)
                .map(|e| {
                    let mut q = VecDeque::new();
                    for acq in 0..2u64 {
                        for f in 0..counts[acq as usize] {
                            match fate(acq, f, e) {
                                Fate::Lost => {}
                                Fate::Dropped => q.push_back(Input::Dropped(f)),
                                Fate::Here => {
                                    let mut h = part(f, e, (dy, dx), (r, c), false);
                                    h.file_index = acq;
                                    h.frame_index = Some(f);
                                    let d = cut(&content(acq, f), cols, &h);
                                    q.push_back(Input::Part(h, Ok(d), Instant::now()));
                                }
                            }
                        }
                        // A lost end of the first acquisition, only when this endpoint's
                        // next item is a part of the second (which says it moved on).
                        let next_is_part = (0..counts[1])
                            .map(|f| fate(1, f, e))
                            .find(|x| *x != Fate::Lost)
                            == Some(Fate::Here);
                        // (and it sent a part of the first: a first acquisition of which
                        // nothing came cannot be told from the second).
                        let sent_one = (0..counts[0]).any(|f| fate(0, f, e) == Fate::Here);
                        if acq == 1 || !(end_lost[e] && next_is_part && sent_one) {
                            q.push_back(Input::End(ZmqHeader::end_of_acquisition()));
                        } else {
                            restarts += 1;
                        }
                    }
                    q
                })
                .collect();
            let now = Instant::now();
            let mut k = 0;
            let mut outs = Vec::new();
            while streams.iter().any(|q| !q.is_empty()) {
                let mut e = order[k % order.len()] % n;
                k += 1;
                while streams[e].is_empty() {
                    e = (e + 1) % n;
                }
                let input = streams[e].pop_front().expect("not empty");
                a.push(e, input, now).expect("the layout is right");
                while let Some(o) = a.pop() {
                    outs.push(o);
                }
            }
            let notices = a.take_notices();
            prop_assert_eq!(notices.len(), restarts, "{:?}", notices);
            prop_assert!(notices.iter().all(|x| x.kind == PartFault::Restart));
            let mut acq = 0u64;
            let mut last: Option<u64> = None;
            let mut seen: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
            for o in outs {
                match o {
                    Output::End(_) => {
                        acq += 1;
                        last = None;
                    }
                    Output::Frame(f) => {
                        prop_assert!(acq < 2);
                        let number = f.header.number();
                        prop_assert!(last.is_none_or(|l| number > l));
                        last = Some(number);
                        if f.header.frame_index.is_some() {
                            // A frame of which only drops came has no header to say.
                            prop_assert_eq!(f.header.file_index, acq);
                        }
                        seen[acq as usize].push(number);
                        let fs: Vec<Fate> = (0..n).map(|e| fate(acq, number, e)).collect();
                        if fs.iter().all(|x| *x == Fate::Here) {
                            prop_assert!(f.fault.is_none());
                            let mut whole = vec![0u16; rows * cols];
                            for p in &f.pieces {
                                place(&mut whole, cols, p);
                            }
                            prop_assert_eq!(whole, content(acq, number));
                        } else {
                            let (kind, _) = f.fault.expect("given up");
                            let want = if fs.contains(&Fate::Dropped) {
                                PartFault::Dropped
                            } else {
                                PartFault::Incomplete
                            };
                            prop_assert_eq!(kind, want);
                        }
                    }
                }
            }
            prop_assert_eq!(acq, 2);
            for (i, got) in seen.iter().enumerate() {
                let want: Vec<u64> = (0..counts[i])
                    .filter(|&f| (0..n).any(|e| fate(i as u64, f, e) != Fate::Lost))
                    .collect();
                prop_assert_eq!(got, &want);
            }
        }
    }

    #[test]
    fn a_late_part_is_counted_and_a_bad_layout_named() {
        let now = Instant::now();
        let names = vec!["a".to_string(), "b".to_string()];
        let mut x: Assembler<Vec<u8>> =
            Assembler::new(names.clone(), None, 100, Duration::from_secs(60));
        let h = |f, e| part(f, e, (2, 1), (2, 2), false);
        let d = || Ok(vec![0u8; 8]);
        x.push(0, Input::Part(h(10, 0), d(), now), now).expect("ok");
        x.push(1, Input::Part(h(11, 1), d(), now), now).expect("ok");
        // Frame 10 is given up (b is past it); b's part of it is then late.
        x.push(1, Input::Part(h(10, 1), d(), now), now).expect("ok");
        let notes = x.take_notices();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].kind, PartFault::Late);
        assert!(notes[0].message.contains("frame 10"), "{notes:?}");
        match x.pop() {
            Some(Output::Frame(f)) => {
                let (kind, why) = f.fault.expect("given up");
                assert_eq!(kind, PartFault::Incomplete);
                assert!(why.contains("part 2 of 2 (b) never arrived"), "{why}");
            }
            o => panic!("{o:?}"),
        }
        // Frame 11 waits for a's part; time gives it up.
        assert!(x.pop().is_none());
        x.poll(now + Duration::from_secs(61));
        assert!(matches!(x.pop(), Some(Output::Frame(f)) if f.fault.is_some()));

        // Two parts claiming the same place.
        let mut y: Assembler<Vec<u8>> =
            Assembler::new(names.clone(), None, 100, Duration::from_secs(60));
        y.push(0, Input::Part(h(0, 0), d(), now), now).expect("ok");
        let e = y
            .push(1, Input::Part(h(0, 0), d(), now), now)
            .expect_err("overlap");
        assert!(e.0.contains("b (header: row 0 column 0"), "{}", e.0);
        // Parts that make another frame than the pedestal's.
        let mut z: Assembler<Vec<u8>> =
            Assembler::new(names, Some((4, 4)), 100, Duration::from_secs(60));
        z.push(0, Input::Part(h(0, 0), d(), now), now).expect("ok");
        let e = z
            .push(1, Input::Part(h(0, 1), d(), now), now)
            .expect_err("wrong shape");
        assert!(
            e.0.contains("4 x 2 frames, the pedestal's are 4 x 4"),
            "{}",
            e.0
        );
    }
}
