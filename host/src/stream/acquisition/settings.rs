//! What to do with the stream: where each acquisition's pedestal comes from, the
//! finder's options, the outputs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::FindOptions;
use crate::finder::select::DeviceChoice;
use crate::pedestal::Pedestal;

/// Where each acquisition's pedestal comes from.
#[derive(Clone, Debug)]
pub enum PedestalPlan {
    /// A pedestal filled beforehand (e.g. from a file of dark frames): every acquisition
    /// starts from it.
    Fixed(Pedestal),
    /// The first K acquisitions are dark: all their frames fill the pedestal (and further
    /// acquisitions are taken as dark until it holds N frames); every later acquisition starts
    /// from it.
    DarkAcquisitions(u32),
    /// The first N frames of every acquisition (N = the finder's pedestal window).
    FirstFrames,
}

/// What to do with the stream.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// Cluster size, threshold and precision (the frame shape is taken from the stream; with
    /// [`PedestalPlan::Fixed`] from the pedestal).
    pub finder: FindOptions,
    /// The pedestal window N of [`PedestalPlan::DarkAcquisitions`] and
    /// [`PedestalPlan::FirstFrames`] (a fixed pedestal has its own).
    pub pedestal_frames: u32,
    /// The device to find clusters on.
    pub device: DeviceChoice,
    /// CPU worker threads (all cores when `None`).
    pub threads: Option<usize>,
    /// Where the pedestal comes from.
    pub pedestal: PedestalPlan,
    /// Directory for the cluster files.
    pub out_dir: PathBuf,
    /// Stop after this many acquisitions (dark ones included); `None`: until stopped.
    pub acquisitions: Option<u64>,
    /// Frames per finder call.
    pub chunk: usize,
    /// Longest wait for more frames before a partial chunk goes to the finder.
    pub max_wait: Duration,
    /// End an acquisition when nothing came for this long without its end message (lost:
    /// a PUB drops it at its high-water mark like any frame); zero: wait for it forever.
    pub idle_end: Duration,
    /// An artificial delay per frame in the sink, to test what happens when cluda cannot keep
    /// up; zero normally.
    pub slow_sink: Duration,
    /// How frame numbers advance: every frame, every Nth (slsReceiver's `rx_zmqfreq`), or a
    /// stride inferred from each acquisition's first gaps (see [`crate::stream::sampling`]).
    pub sampling: crate::stream::sampling::Sampling,
    /// Eta interpolation of every data acquisition: a sub-pixel image beside its cluster file
    /// (`<name>.image.npy`), and/or one eta cube of every data acquisition (a live flat field).
    pub imaging: Option<StreamImaging>,
}

/// What `cluda stream --eta/--eta-out` makes of each data acquisition (see
/// [`crate::engine::imaging`]; on a GPU counted on the device).
#[derive(Clone, Debug)]
pub struct StreamImaging {
    /// Place photons through these maps into a sub-pixel image per acquisition, with this
    /// many sub-pixels per pixel.
    pub image: Option<(std::sync::Arc<crate::interpolation::Interpolator>, u32)>,
    /// Count every data acquisition's clusters into one eta cube with these axes, written to
    /// this file (and its `.json`) when the stream ends.
    pub cube: Option<(crate::interpolation::CubeAxes, PathBuf)>,
}

impl StreamSettings {
    /// Defaults for `finder` writing into `out_dir`: the device chosen automatically,
    /// pedestals from each acquisition's first 1000 frames, chunks of 64 frames (a ring of
    /// three, 61 MB of 400 x 400 frames, allocated before the first acquisition and kept
    /// while the frame shape stays: page-locked memory on a GPU takes about 1 s per GiB),
    /// partial chunks after 10 ms, acquisitions ended after 10 s without a message.
    pub fn new(finder: FindOptions, out_dir: &Path) -> Self {
        Self {
            finder,
            pedestal_frames: FindOptions::DEFAULT_PEDESTAL_FRAMES,
            device: DeviceChoice::Auto,
            threads: None,
            pedestal: PedestalPlan::FirstFrames,
            out_dir: out_dir.to_path_buf(),
            acquisitions: None,
            chunk: 64,
            max_wait: Duration::from_millis(10),
            idle_end: Duration::from_secs(10),
            slow_sink: Duration::ZERO,
            sampling: crate::stream::sampling::Sampling::Infer,
            imaging: None,
        }
    }
}
