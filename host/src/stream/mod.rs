//! Live cluster finding on a detector's ZMQ stream, and publishing frames the way the detector's
//! receiver does (feature `stream`).
//!
//! A MOENCH's frames reach users through slsReceiver, which publishes each frame on a ZMQ PUB
//! socket as a JSON header and the pixels, and ends each acquisition with a header alone
//! (`"data": 0`). [`header`] reads and writes that header (slsDetectorPackage's "ZMQ: Json
//! Header Format"; aare's `ZmqHeader`), [`receiver`] subscribes to the stream with a thread
//! of its own and a bounded queue, [`source`] turns one acquisition into a
//! [`crate::io::FrameSource`] that counts and reports every fault (missing frame numbers,
//! incomplete frames, headers that disagree with their data, malformed messages, restarts,
//! frames dropped when cluda does not keep up), [`acquisition`] runs the streaming engine
//! acquisition after acquisition (pedestal, finder, one aare cluster file each, summary), and
//! [`publisher`]/[`mod@replay`] send frames from files as slsReceiver does (`cluda replay`).
//!
//! The ZMQ implementation is libzmq through the `zmq` crate (built from source and linked
//! statically by `zmq-sys`, so no system library is needed): the same library slsReceiver and
//! aare use, so the wire behaviour (high-water marks, reconnection, multipart atomicity) is the
//! detector's.

pub mod acquisition;
pub mod assembly;
pub mod header;
pub mod inlet;
#[cfg(feature = "plot")]
pub mod live_plots;
pub mod parts;
pub mod publisher;
pub mod receiver;
pub mod replay;
pub mod sampling;
pub mod source;

pub use acquisition::{
    AcquisitionKind, AcquisitionSummary, AcquisitionTiming, Callbacks, ImageUpdate, LiveImage,
    PedestalPlan, StreamImaging, StreamSettings, StreamTotals, check_out_dir, run,
};
pub use header::ZmqHeader;
pub use inlet::Inlet;
pub use publisher::Publisher;
pub use receiver::{ConnectionEvent, FullQueue, ReceiverConfig, ZmqReceiver};
pub use replay::{ReplaySettings, ReplayStats, replay};
pub use sampling::Sampling;
pub use source::{AcquisitionCounts, Ending, FaultKind, Reporter, StreamEvent};
