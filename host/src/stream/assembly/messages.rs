//! What goes into the assembler (an endpoint's part or end) and what comes out (frames,
//! complete or given up; notices of faulty parts; layout errors).

use std::time::Instant;

use super::place::Piece;
use crate::stream::header::ZmqHeader;

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

/// A part-layout error: the parts do not tile the frame. Stops the stream (the set-up is
/// wrong, every frame would be).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError(pub String);
