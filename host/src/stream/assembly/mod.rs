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

mod advance;
mod intake;
mod layout;
mod messages;
mod pending;
mod place;
#[cfg(test)]
mod tests;

pub use messages::{Assembled, Input, LayoutError, Notice, Output, PartFault};
pub use place::{Piece, Place, place};

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use super::header::ZmqHeader;
use pending::Pending;

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
