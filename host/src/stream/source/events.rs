//! What an acquisition reports: the kinds of faults, the events handed to the caller's
//! reporter, how it ended, and its counts.

use std::sync::Arc;
use std::time::Instant;

use crate::stream::receiver::ConnectionEvent;

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
    /// inferred from its frame numbers (see [`crate::stream::sampling`]).
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
    /// [`crate::stream::sampling`]).
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
