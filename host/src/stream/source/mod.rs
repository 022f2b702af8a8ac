//! One acquisition of a ZMQ stream as a [`FrameSource`](crate::io::FrameSource): frames are checked, counted and copied
//! into the engine's slots; everything wrong is counted and reported, and the stream goes on.
//!
//! The acquisition ends at the sender's end-of-acquisition header, at a frame that starts
//! another acquisition without one (a different `fileIndex` or `fname`: the end message was
//! lost) or that shows the sender restarted (`frameIndex` 0 again, or a frame number not above
//! the last), which is kept for the next acquisition, or when the caller's stop flag is set
//! (SIGINT), or when nothing came for `idle_end` (the end message was lost: a PUB drops it at
//! its high-water mark like any other message). `fill` returns a partial chunk when frames come slowly (after `max_wait` from the
//! chunk's first frame), so a slow detector's clusters are not held back.

mod events;
mod faults;
mod frame_source;
mod messages;
mod setup;

pub use events::{AcquisitionCounts, Ending, FaultKind, Reporter, StreamEvent};

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::inlet::Inlet;
use super::receiver::Message;
use super::sampling::StrideCheck;
use crate::io::raw::Roi;

/// Longest wait for more frames once an acquisition's first chunk has one (at most
/// `max_wait`): a short first chunk hands the acquisition's first frames to the finder within
/// about a millisecond of their arrival instead of after a whole chunk or `max_wait`.
pub const FIRST_WAIT: Duration = Duration::from_millis(1);

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
