//! One acquisition of a ZMQ stream as a [`FrameSource`]: frames are checked, counted and copied
//! into the engine's slots; everything wrong is counted and reported, and the stream goes on.
//!
//! The acquisition ends at the sender's end-of-acquisition header, at a frame that starts
//! another acquisition without one (a different `fileIndex` or `fname`: the end message was
//! lost) or that shows the sender restarted (`frameIndex` 0 again, or a frame number not above
//! the last), which is kept for the next acquisition, or when the caller's stop flag is set
//! (SIGINT), or when nothing came for `idle_end` (the end message was lost: a PUB drops it at
//! its high-water mark like any other message). `fill` returns a partial chunk when frames come slowly (after `max_wait` from the
//! chunk's first frame), so a slow detector's clusters are not held back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::assembly::{PartFault, Piece};
use super::header::HeaderFault;
use super::inlet::Inlet;
use super::receiver::{ConnectionEvent, Message};
use super::sampling::{GapOutcome, Sampling, StrideCheck};
use crate::error::Result;
use crate::io::FrameSource;
use crate::io::raw::Roi;

/// Kinds of trouble in a stream, each counted per acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Frame numbers that never arrived (a gap in the sequence).
    Missing,
    /// Frames with lost packets (`completeImage` 0 or too few `packetNumber`); skipped.
    Incomplete,
    /// Frames whose header disagrees with its data part or with the acquisition (shape, size,
    /// bitmode); skipped.
    Mismatch,
    /// Messages that are not slsReceiver's: unreadable JSON, missing or extra parts.
    Malformed,
    /// Frames cluda dropped because its queue was full (it did not keep up).
    Dropped,
    /// The sender restarted, or started another acquisition, without ending this one.
    Restart,
    /// Parts of frames that came after their frame was handed on (whole or given up), and
    /// were discarded (frames in parts only).
    Late,
    /// Parts of frame 0 that came again from an endpoint while the frame numbers went on
    /// (frames in parts), or a whole frame sent again right after itself (one endpoint):
    /// duplicates, discarded (not restarts).
    Duplicate,
}

impl FaultKind {
    /// The name used in reports and the summary line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Incomplete => "incomplete",
            Self::Mismatch => "mismatched",
            Self::Malformed => "malformed",
            Self::Dropped => "dropped",
            Self::Restart => "restart",
            Self::Late => "late",
            Self::Duplicate => "duplicate",
        }
    }
}

/// Something a person should hear about while the stream runs.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A fault, with the frame number(s) concerned when known.
    Fault {
        /// What kind.
        kind: FaultKind,
        /// The message, naming the frame numbers.
        message: String,
    },
    /// cluda is falling behind: frames are waiting in its queue, or were dropped.
    Behind {
        /// Frames in the queue.
        depth: usize,
        /// Its capacity.
        capacity: usize,
        /// Frames dropped so far in this acquisition.
        dropped: u64,
    },
    /// Further reports of a kind are left out in this acquisition (the summary counts them).
    Suppressed(FaultKind),
    /// An acquisition's cluster file could not be written as planned (a name the file system
    /// refuses, a full disk, a directory gone): what happened and what was done instead (a
    /// fallback name, or the acquisition's clusters lost); the stream goes on.
    Output(String),
    /// The connection to the sender was dropped or refused by libzmq (e.g. a message above
    /// the largest size accepted): what happened; libzmq reconnects by itself.
    Connection(String),
    /// Something a person should know that is no fault: e.g. the stride of a sampled stream,
    /// inferred from its frame numbers (see [`super::sampling`]).
    Note(String),
}

impl From<ConnectionEvent> for StreamEvent {
    /// A fault of the connection is [`StreamEvent::Connection`]; a sender gone away cleanly
    /// after an acquisition's end is a [`StreamEvent::Note`].
    fn from(event: ConnectionEvent) -> Self {
        match event {
            ConnectionEvent::Fault(message) => Self::Connection(message),
            ConnectionEvent::Note(message) => Self::Note(message),
        }
    }
}

/// Where stream events go (the command line prints them on stderr).
pub type Reporter = Arc<dyn Fn(&StreamEvent) + Send + Sync>;

/// How an acquisition ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ending {
    /// Not yet.
    #[default]
    Open,
    /// The sender's end-of-acquisition header.
    EndMessage,
    /// A frame of another acquisition (`fileIndex`/`fname` changed) came first.
    NextAcquisition,
    /// The sender restarted (frame index 0 again, or frame numbers going back).
    Restart,
    /// The caller's stop flag (SIGINT).
    Stopped,
    /// Nothing came for the idle time and no end message (it was lost).
    Idle,
}

impl Ending {
    /// The name used in the summary line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::EndMessage => "end",
            Self::NextAcquisition => "next-acquisition",
            Self::Restart => "restart",
            Self::Stopped => "interrupted",
            Self::Idle => "idle",
        }
    }
}

/// What one acquisition delivered and what went wrong in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AcquisitionCounts {
    /// Frames delivered (pedestal and data).
    pub frames: u64,
    /// Frames missing from the sequence: frame numbers that never arrived, or, in a sampled
    /// stream, frames of the every-Nth sequence that never arrived (see
    /// [`super::sampling`]).
    pub missing: u64,
    /// Frame numbers a sampled stream skipped by design (`rx_zmqfreq`): not losses.
    pub sampled: u64,
    /// The stride of the frame numbers, when known (1: every frame; N: every Nth frame is
    /// streamed).
    pub stride: Option<u64>,
    /// Frames skipped for lost packets.
    pub incomplete: u64,
    /// Frames skipped for a header that disagrees with the data.
    pub mismatched: u64,
    /// Messages that were not slsReceiver's.
    pub malformed: u64,
    /// Frames cluda dropped (queue full).
    pub dropped: u64,
    /// Restarts of the sender seen (0 or 1: a restart ends the acquisition).
    pub restarts: u64,
    /// Parts that came after their frame was handed on (frames in parts only).
    pub late: u64,
    /// Parts of frame 0 that came again while the frame numbers went on (frames in parts),
    /// or whole frames sent again right after themselves (one endpoint): discarded
    /// duplicates, not restarts.
    pub duplicates: u64,
    /// Most frames waiting in the queue at once.
    pub peak_queue: usize,
    /// How the acquisition ended.
    pub ending: Ending,
    /// When its first frame arrived.
    pub first_arrival: Option<Instant>,
    /// When its last frame was delivered.
    pub last_delivery: Option<Instant>,
}

/// Reports per kind before further ones are suppressed, per acquisition.
const REPORTS_PER_KIND: u32 = 20;

/// Longest wait for more frames once an acquisition's first chunk has one (at most
/// `max_wait`): a short first chunk hands the acquisition's first frames to the finder within
/// about a millisecond of their arrival instead of after a whole chunk or `max_wait`.
pub const FIRST_WAIT: Duration = Duration::from_millis(1);

/// Interval between "falling behind" reports.
const BEHIND_EVERY: Duration = Duration::from_secs(2);

/// One acquisition of the stream: frames of `rows x cols`, checked and counted.
pub struct Acquisition<'r> {
    receiver: &'r mut Inlet,
    pending: &'r mut Option<Message>,
    rows: usize,
    cols: usize,
    stop: Arc<AtomicBool>,
    report: Reporter,
    /// Longest wait for more frames once a chunk has one.
    pub max_wait: Duration,
    /// End the acquisition when no message came for this long (zero: never).
    pub idle_end: Duration,
    last_message: Instant,
    /// After a stop request: the messages still to take before the acquisition ends (the
    /// frames that waited for parts, given up, and what was ready before them).
    draining: Option<usize>,
    /// The frames waiting for parts were given up for the idle time already.
    idle_given_up: bool,
    /// Counts so far.
    pub counts: AcquisitionCounts,
    /// The largest frame number delivered: frames above it are reported and skipped (a
    /// cluster file holds `i32` frame numbers); `u64::MAX` by default.
    pub max_frame_number: u64,
    /// `(fileIndex, fname)` of its first frame.
    key: Option<(u64, String)>,
    last: Option<u64>,
    reported: std::collections::HashMap<FaultKind, u32>,
    last_behind: Option<Instant>,
    arrivals: Arc<Mutex<VecDeque<(u64, Instant)>>>,
    /// How the frame numbers are expected to advance.
    strides: StrideCheck,
    /// The receiver ROI the frames are cut down to before they are delivered (`None`: the
    /// whole frames as sent).
    crop: Option<Roi>,
}

impl<'r> Acquisition<'r> {
    /// The acquisition whose first message is in `pending` (or comes next), of `rows x cols`
    /// frames.
    pub(crate) fn new(
        receiver: &'r mut Inlet,
        pending: &'r mut Option<Message>,
        (rows, cols): (usize, usize),
        stop: Arc<AtomicBool>,
        report: Reporter,
    ) -> Self {
        Self {
            receiver,
            pending,
            rows,
            cols,
            stop,
            report,
            max_wait: Duration::from_millis(10),
            idle_end: Duration::ZERO,
            last_message: Instant::now(),
            draining: None,
            idle_given_up: false,
            counts: AcquisitionCounts::default(),
            max_frame_number: u64::MAX,
            key: None,
            last: None,
            reported: Default::default(),
            last_behind: None,
            arrivals: Arc::new(Mutex::new(VecDeque::new())),
            strides: StrideCheck::new(Sampling::Infer),
            crop: None,
        }
    }

    /// Delivers every frame cut down to `roi` (detector pixels, both ends inclusive; the
    /// frames sent are still checked whole): what the receiver writes to its raw files with
    /// `rx_roi`. The frames are then of the ROI's shape and lie at its corner
    /// ([`FrameSource::origin`]). Before the first frame.
    ///
    /// # Errors
    /// [`Error::Shape`] when `roi` does not lie inside the acquisition's frames.
    pub fn crop_to(&mut self, roi: Roi) -> Result<()> {
        if !roi.fits(self.rows, self.cols) {
            return Err(crate::Error::shape(
                "the receiver ROI (rx_roi) to cut the stream's frames down to",
                format!("an ROI inside frames of {} x {}", self.rows, self.cols),
                format!("ROI {roi} (xmin, xmax, ymin, ymax)"),
            ));
        }
        self.crop = Some(roi);
        Ok(())
    }

    /// Sets how the frame numbers are expected to advance (default: a stride inferred, see
    /// [`super::sampling`]); `stated`: an inferred stride an earlier acquisition of the stream
    /// stated already (not stated again). Before the first frame.
    pub fn set_sampling(&mut self, sampling: Sampling, stated: Option<u64>) {
        self.strides = StrideCheck::new(sampling).already_stated(stated);
    }

    /// The stride this acquisition inferred, when it inferred one above 1.
    pub fn inferred_stride(&self) -> Option<u64> {
        self.strides.inferred_stride()
    }

    /// Judges the gaps still held back by the stride inference (the acquisition ended):
    /// counts them and reports the missing ones. Called once the acquisition has ended; a
    /// second call does nothing.
    pub fn finish_gaps(&mut self) {
        let outcome = self.strides.finish();
        self.book_gaps(outcome);
    }

    /// Counts and reports what gaps came to.
    fn book_gaps(&mut self, outcome: GapOutcome) {
        if let Some(note) = outcome.note {
            (self.report)(&StreamEvent::Note(note));
        }
        self.counts.sampled += outcome.sampled;
        for (n, message) in outcome.missing {
            self.fault(FaultKind::Missing, n, message);
        }
        self.counts.stride = self.strides.stride();
    }

    /// Arrival times of the frames delivered and not yet claimed, by frame number: the
    /// visitor takes them in order to measure the lag.
    pub fn arrivals(&self) -> Arc<Mutex<VecDeque<(u64, Instant)>>> {
        Arc::clone(&self.arrivals)
    }

    /// Whether the acquisition has ended.
    pub fn ended(&self) -> bool {
        self.counts.ending != Ending::Open
    }

    fn fault(&mut self, kind: FaultKind, n: u64, message: String) {
        match kind {
            FaultKind::Missing => self.counts.missing += n,
            FaultKind::Incomplete => self.counts.incomplete += n,
            FaultKind::Mismatch => self.counts.mismatched += n,
            FaultKind::Malformed => self.counts.malformed += n,
            FaultKind::Dropped => self.counts.dropped += n,
            FaultKind::Restart => self.counts.restarts += n,
            FaultKind::Late => self.counts.late += n,
            FaultKind::Duplicate => self.counts.duplicates += n,
        }
        let seen = self.reported.entry(kind).or_insert(0);
        *seen += 1;
        if *seen <= REPORTS_PER_KIND {
            (self.report)(&StreamEvent::Fault { kind, message });
        } else if *seen == REPORTS_PER_KIND + 1 {
            (self.report)(&StreamEvent::Suppressed(kind));
        }
    }

    /// Accounts for frames dropped by the receiving thread before the messages taken so far;
    /// returns how many of them lie strictly between frame numbers `after` and `before`.
    fn account_drops(&mut self, after: Option<u64>, before: Option<u64>) -> u64 {
        let (ranges, unnumbered) = self.receiver.take_drops();
        let mut inside = 0;
        for (a, b) in ranges {
            let n = b - a + 1;
            let lo = after.map_or(a, |x| a.max(x.saturating_add(1)));
            let hi = before.map_or(b, |y| b.min(y.saturating_sub(1)));
            if lo <= hi {
                inside += hi - lo + 1;
            }
            let which = if a == b {
                format!("frame {a}")
            } else {
                format!("frames {a}-{b}")
            };
            self.fault(
                FaultKind::Dropped,
                n,
                format!(
                    "{which} dropped: cluda's queue of {} frames was full (it is not keeping up)",
                    self.receiver.config().queue_frames
                ),
            );
        }
        if unnumbered > 0 {
            self.fault(
                FaultKind::Dropped,
                unnumbered,
                format!("{unnumbered} frames with unreadable headers dropped: the queue was full"),
            );
        }
        inside
    }

    fn behind(&mut self) {
        let depth = self.receiver.depth();
        self.counts.peak_queue = self.counts.peak_queue.max(depth);
        let capacity = self.receiver.config().queue_frames;
        let worried = depth * 2 > capacity || self.counts.dropped > 0;
        if worried && self.last_behind.is_none_or(|t| t.elapsed() >= BEHIND_EVERY) {
            self.last_behind = Some(Instant::now());
            (self.report)(&StreamEvent::Behind {
                depth,
                capacity,
                dropped: self.counts.dropped,
            });
        }
    }

    /// The next message: the pending one, or one from the queue within `timeout`.
    fn next(&mut self, timeout: Duration) -> Result<Option<Message>> {
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
    fn handle(&mut self, msg: Message) -> Option<(u64, Pixels, Instant)> {
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
            if let Err(HeaderFault::Mismatch(why) | HeaderFault::Malformed(why)) =
                header.check_frame(bytes, self.rows, self.cols)
            {
                self.fault(
                    FaultKind::Mismatch,
                    1,
                    format!("frame {number}: {why}; skipped"),
                );
                return None;
            }
            if let Some(why) = header.incomplete() {
                self.fault(
                    FaultKind::Incomplete,
                    1,
                    format!("frame {number} is incomplete: {why}; skipped"),
                );
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
        if let Err(HeaderFault::Mismatch(why) | HeaderFault::Malformed(why)) =
            header.check_frame(parts[1].len(), self.rows, self.cols)
        {
            self.fault(
                FaultKind::Mismatch,
                1,
                format!("frame {number}: {why}; skipped"),
            );
            return None;
        }
        if let Some(why) = header.incomplete() {
            self.fault(
                FaultKind::Incomplete,
                1,
                format!("frame {number} is incomplete: {why}; skipped"),
            );
            return None;
        }
        let data = parts.pop()?;
        Some((number, Pixels::Whole(data), arrived))
    }
}

/// A frame's pixels as they came: one message, or parts to place.
enum Pixels {
    Whole(zmq::Message),
    Parts(Vec<Piece<zmq::Message>>),
}

impl Pixels {
    /// Copies the frame into `dst` (its `cols` columns a row).
    fn copy_to(&self, dst: &mut [u16], cols: usize) {
        match self {
            Self::Whole(data) => copy_frame(dst, data),
            Self::Parts(pieces) => {
                for p in pieces {
                    super::assembly::place(dst, cols, p);
                }
            }
        }
    }
}

/// The counter a part's fault goes to.
fn fault_kind(k: PartFault) -> FaultKind {
    match k {
        PartFault::Incomplete => FaultKind::Incomplete,
        PartFault::Dropped => FaultKind::Dropped,
        PartFault::Mismatch => FaultKind::Mismatch,
        PartFault::Late => FaultKind::Late,
        PartFault::Malformed => FaultKind::Malformed,
        PartFault::Restart => FaultKind::Restart,
        PartFault::Duplicate => FaultKind::Duplicate,
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

impl FrameSource for Acquisition<'_> {
    fn rows(&self) -> usize {
        self.crop.map_or(self.rows, |r| r.rows())
    }

    fn cols(&self) -> usize {
        self.crop.map_or(self.cols, |r| r.cols())
    }

    fn origin(&self) -> (usize, usize) {
        self.crop.map_or((0, 0), |r| (r.ymin, r.xmin))
    }

    fn detector_shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn remaining_hint(&self) -> u64 {
        u64::MAX
    }

    fn read_frames(
        &mut self,
        n: usize,
        frames: &mut Vec<u16>,
        numbers: &mut Vec<u64>,
    ) -> Result<usize> {
        let px = self.rows() * self.cols();
        let start = frames.len();
        frames.resize(start + n * px, 0);
        let k = self.fill(&mut frames[start..], numbers)?;
        frames.truncate(start + k * px);
        Ok(k)
    }

    /// Waits for the chunk's first frame (as long as it takes, checking the stop flag), then
    /// takes frames until the chunk is full or `max_wait` has passed since the first
    /// ([`FIRST_WAIT`] for the acquisition's first chunk); copies them into `dst` in parallel.
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let px = self.rows() * self.cols();
        let cap = dst.len() / px.max(1);
        let mut got: Vec<(u64, Pixels, Instant)> = Vec::with_capacity(cap);
        let mut deadline: Option<Instant> = None;
        while got.len() < cap && !self.ended() {
            let stopping = self.stop.load(Ordering::SeqCst);
            if stopping {
                // A stop request finishes the acquisition: the frames waiting for parts are
                // given up (reported incomplete) and taken with what was ready before them,
                // then it ends; nothing more is read from the sockets.
                let left = match self.draining {
                    Some(left) => left,
                    None => self.receiver.give_up_waiting() + usize::from(self.pending.is_some()),
                };
                if left == 0 {
                    self.counts.ending = Ending::Stopped;
                    break;
                }
                self.draining = Some(left - 1);
            }
            let timeout = match deadline {
                _ if stopping => Duration::ZERO,
                None => Duration::from_millis(50),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    d - now
                }
            };
            let Some(msg) = self.next(timeout)? else {
                if stopping {
                    self.counts.ending = Ending::Stopped;
                    break;
                }
                // Quiet since the last message of any endpoint (frames waiting for parts do
                // not keep the acquisition open: they are given up first, reported).
                let heard = self.receiver.last_heard().unwrap_or(self.last_message);
                if !self.idle_end.is_zero() && heard.elapsed() >= self.idle_end && got.is_empty() {
                    if !self.idle_given_up {
                        self.idle_given_up = true;
                        if self.receiver.give_up_waiting() > 0 {
                            continue;
                        }
                    }
                    let after = self
                        .last
                        .map_or(String::new(), |l| format!(" after frame {l}"));
                    self.fault(
                        FaultKind::Malformed,
                        1,
                        format!(
                            "no end-of-acquisition message and nothing for {:.1} s: the acquisition is ended{after} (its end message was lost)",
                            self.idle_end.as_secs_f64()
                        ),
                    );
                    let last = self.last;
                    self.account_drops(last, None);
                    self.counts.ending = Ending::Idle;
                    break;
                }
                continue;
            };
            self.last_message = Instant::now();
            self.behind();
            if let Some(frame) = self.handle(msg) {
                if deadline.is_none() {
                    let wait = if self.counts.frames == 0 {
                        self.max_wait.min(FIRST_WAIT)
                    } else {
                        self.max_wait
                    };
                    deadline = Some(Instant::now() + wait);
                }
                got.push(frame);
            }
        }
        use rayon::prelude::*;
        let dst = &mut dst[..got.len() * px];
        let (cols, whole) = (self.cols, self.rows * self.cols);
        match self.crop {
            None if got.len() > 1 => dst
                .par_chunks_mut(px)
                .zip(got.par_iter())
                .for_each(|(d, (_, data, _))| data.copy_to(d, cols)),
            None => {
                if let Some((_, data, _)) = got.first() {
                    data.copy_to(dst, cols);
                }
            }
            // Each frame whole into a scratch frame of its thread, then its ROI into place.
            Some(roi) => dst
                .par_chunks_mut(px)
                .zip(got.par_iter())
                .try_for_each_init(
                    || vec![0u16; whole],
                    |scratch, (d, (_, data, _))| {
                        data.copy_to(scratch, cols);
                        roi.crop(scratch, cols, d)
                    },
                )?,
        }
        if let Ok(mut a) = self.arrivals.lock() {
            a.extend(got.iter().map(|(n, _, t)| (*n, *t)));
        }
        numbers.extend(got.iter().map(|(n, _, _)| *n));
        self.counts.frames += got.len() as u64;
        if !got.is_empty() {
            self.counts.last_delivery = Some(Instant::now());
        }
        Ok(got.len())
    }

    fn report(&self) -> Option<String> {
        let c = &self.counts;
        Some(format!(
            "{} missing, {} sampled, {} incomplete, {} mismatched, {} malformed, {} dropped, {} late parts",
            c.missing, c.sampled, c.incomplete, c.mismatched, c.malformed, c.dropped, c.late
        ))
    }
}
