//! What the pipeline keeps per chunk in flight: its slot of buffers and events, the job that
//! names its frames, why collecting it stopped; and the per-frame scratch the kernels share.

use cudarc::driver::CudaEvent;

use super::super::buffers::{DeviceBuf, PinnedBuf};
use super::super::input::Source;
use super::super::reals::RealBuf;
use crate::error::Error;
use crate::interpolation::PlacedRow;

/// Per-frame scratch on the device, two of each so that one launch can classify frame k from
/// one set while it prepares frame k+1 into the other: the zero-padded plane of corrected
/// values, the thresholds and the classify kernel's look-back words.
pub(super) struct Work {
    pub(super) c_plane: [RealBuf; 2],
    pub(super) t: [RealBuf; 2],
    pub(super) status: [DeviceBuf<u64>; 2],
    /// The run kernels' planes (zero padding written once, like the two above).
    pub(super) run_planes: RealBuf,
    /// The run kernels' arrival counters, progress flags and per-tile counts.
    pub(super) run_work: DeviceBuf<u32>,
}

/// The buffers of one chunk in flight.
pub(super) struct Slot {
    /// Frames this slot holds.
    pub(super) frames: usize,
    /// The numbers the frames of the chunk in the slot are reported by ([`Input::numbers`](super::super::input::Input::numbers)).
    pub(super) numbers: Vec<crate::FrameNumber>,
    pub(super) dev_in: DeviceBuf<u16>,
    pub(super) pin_in: Option<PinnedBuf<u16>>,
    pub(super) dev_out: DeviceBuf<u32>,
    pub(super) pin_out: PinnedBuf<u32>,
    /// Pedestal sums at the start of the chunk.
    pub(super) ckpt: RealBuf,
    /// Where each record's placed row goes on the device, and comes down to (while rows are
    /// placed: [`Pipeline::place_rows`](super::Pipeline::place_rows)), a row per record of room.
    pub(super) rows: Option<(DeviceBuf<PlacedRow>, PinnedBuf<PlacedRow>)>,
    /// Recorded after the chunk's rows were placed.
    pub(super) placed: CudaEvent,
    pub(super) up: Vec<CudaEvent>,
    pub(super) done: Vec<CudaEvent>,
    pub(super) dl: Vec<CudaEvent>,
    pub(super) t0: Vec<CudaEvent>,
    pub(super) tm: Vec<CudaEvent>,
    pub(super) t1: Vec<CudaEvent>,
}

/// GPU time of one frame's kernels (event timing; only with `timing`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KernelTime {
    /// The prepare kernel, microseconds.
    pub prepare_us: f32,
    /// The classify kernel, microseconds.
    pub classify_us: f32,
}

impl KernelTime {
    /// Both kernels, microseconds.
    pub fn total_us(&self) -> f32 {
        self.prepare_us + self.classify_us
    }
}

/// A chunk: frames `start .. start + n` of the call (or stream), read from `host`, in slot
/// `slot` (which holds the numbers they are reported by).
#[derive(Clone, Copy, Debug)]
pub(super) struct Job {
    pub(super) start: usize,
    pub(super) n: usize,
    pub(super) slot: usize,
    /// The chunk's first frame in host memory, held by the input until the chunk's results
    /// are collected.
    pub(super) host: *const u16,
    pub(super) src: Source,
    /// Part of the input it belongs to, and whether it starts it (see [`Input`](super::super::input::Input)).
    pub(super) part: usize,
    pub(super) opens: bool,
}

/// Why collecting a chunk stopped early.
pub(super) enum Stop {
    /// Frame `frame` of the chunk found `found` clusters with room for `limit`; a cap of
    /// `need_cap` holds the whole chunk.
    Overflow {
        frame: usize,
        found: usize,
        limit: usize,
        need_cap: usize,
    },
    /// The visitor failed at frame `frame` of the chunk.
    Visitor(usize, Error),
    /// A CUDA failure.
    Error(Error),
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Error(e)
    }
}
