//! Live cluster finding, acquisition after acquisition: the stream's source and policy (which
//! acquisition is dark, which pedestal each starts from, where its clusters go, its summary);
//! the finding itself is the engine's session's, as for `cluda find`.
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
//! 3. every further frame through the streaming engine ([`crate::engine::session::Session`],
//!    one per frame shape, [`Session::find_into`](crate::engine::session::Session::find_into):
//!    the acquisition is its source, the cluster file, the live image and the cube its sinks),
//!    with the frame's `frameNumber` as its number in the file;
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
