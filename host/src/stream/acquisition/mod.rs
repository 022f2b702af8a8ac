//! Live cluster finding, acquisition after acquisition: the pedestal of each, the finder, the
//! cluster file it is written to, and its summary.
//!
//! Per acquisition of the stream ([`run()`]):
//!
//! 1. wait for its first frame; its header gives the frame shape (the finder is opened for
//!    it, or reopened when the shape changed), `fname` and `fileIndex` name the file;
//! 2. the pedestal: a dark acquisition ([`PedestalPlan::DarkAcquisitions`]: every frame of the
//!    first K acquisitions goes into it, and no file is written for them), a file
//!    ([`PedestalPlan::Fixed`]), or the acquisition's own first N frames
//!    ([`PedestalPlan::FirstFrames`]). With the first two, every data acquisition starts
//!    from that same pedestal, so its clusters are those `cluda find` gives with it;
//! 3. every further frame through the streaming engine ([`crate::engine::find_stream_into`]: the
//!    acquisition is its source, the cluster file its sink), with the frame's `frameNumber`
//!    as its number in the file;
//! 4. the file is committed (renamed into place) and the summary handed to the caller.

mod commits;
mod inbox;
mod live;
mod naming;
mod run;
mod settings;
mod summary;

pub use live::{Callbacks, ImageUpdate, LiveImage};
pub use naming::{MAX_PREFIX, check_out_dir, file_name};
pub use run::run;
pub use settings::{PedestalPlan, StreamImaging, StreamSettings};
pub use summary::{AcquisitionKind, AcquisitionSummary, AcquisitionTiming, StreamTotals};
