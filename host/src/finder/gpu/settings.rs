//! How the GPU finder schedules its work: the pipeline knobs and the ladder of DESIGN.md.
//!
//! None of these settings changes a result: one pedestal is updated in frame order on one
//! compute stream whatever the stream count, chunk size or step, so every configuration gives
//! the bytes of the CPU reference. They change only speed and memory.

use std::str::FromStr;

use crate::config::Precision;
use crate::error::{Error, Result};

/// Default bound on the pinned host memory of one slot (the reference capped each at 128 MiB).
pub const DEFAULT_SLOT_BYTES: usize = 128 << 20;

/// Where uploads read the caller's frames from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputMode {
    /// Straight from the caller's (pageable) memory: the driver stages every copy.
    Pageable,
    /// A bulk host memcpy of the chunk into a pinned staging buffer, then DMA from there.
    Staged,
    /// DMA from the caller's memory itself: used as is when it is already pinned (e.g.
    /// [`crate::finder::gpu::PinnedFrames`]), otherwise page-locked (registered) for the call; falls
    /// back to [`InputMode::Staged`] when the driver refuses to register it.
    Registered,
}

/// How results reach the visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collect {
    /// Copied from the pinned result buffer into an owned host buffer first.
    Owned,
    /// Handed to the visitor as views borrowed from the pinned result buffer (zero-copy).
    ZeroCopy,
}

/// How the frames of an upload group are launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Launch {
    /// One launch per frame (`cluda_step_*`: classify frame k, prepare frame k+1).
    #[default]
    PerFrame,
    /// One cooperative launch per upload group (`cluda_run1_*`): the grid stays resident,
    /// one block per 256-pixel tile, each tile waits per frame only for the tiles its
    /// windows read, and each pixel's pedestal state stays in registers for the group. Needs
    /// `compact` (the records of a frame follow the running total of the frames before it).
    /// Frames with more tiles than the device holds blocks at once (on an H200 660 tiles,
    /// about 169,000 pixels; a 400x400 MOENCH frame has 625) go one launch per frame
    /// instead, with the same results.
    PerUpload,
}

/// What a call does when a frame holds more clusters than there is room for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Overflow {
    /// Grow the result buffers and reprocess the chunk from the pedestal checkpoint taken at
    /// its start: every cluster is delivered.
    Grow,
    /// Fail with [`Error::ClusterLimit`] (how many were found, what limit was hit) and put the
    /// pedestal back to its state before the call.
    Fail,
}

/// The pipeline settings of the GPU finder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Copy streams: uploads and downloads of consecutive frame groups go round-robin over
    /// them; all kernels run on one more stream, in frame order.
    pub streams: usize,
    /// Frames per chunk: the unit of submission and collection. Rounded down to a multiple of
    /// `streams` and bounded so that one slot's pinned memory stays within `slot_bytes`.
    pub chunk: usize,
    /// Chunks in flight: 1 collects each chunk before submitting the next; 2 submits chunk
    /// i+1 before collecting chunk i (overlap of host work with GPU work).
    pub depth: usize,
    /// Clusters per frame that fit in a fixed result slot, or with `compact` the average per
    /// frame the chunk's result buffer has room for. A throughput knob: never a truncation.
    pub cap: usize,
    /// Bound on the pinned host memory of one slot, in bytes.
    pub slot_bytes: usize,
    /// Where uploads read from.
    pub input: InputMode,
    /// How results reach the visitor.
    pub collect: Collect,
    /// Compact results on the GPU: the download carries only the clusters found (a per-frame
    /// count prefix, then the records, still in row-major order) instead of cap-sized slots.
    pub compact: bool,
    /// Frames per upload copy (1: one copy per frame).
    pub upload_frames: usize,
    /// What to do when a frame holds more clusters than there is room for.
    pub overflow: Overflow,
    /// One launch per frame or one per upload group.
    pub launch: Launch,
    /// Record CUDA events around every frame's kernels (diagnosis only: it slows
    /// multi-stream pipelines; read them with `GpuFinder::kernel_times_us`).
    pub timing: bool,
}

impl Default for PipelineConfig {
    /// The fastest step of the ladder ([`LadderStep::Opt10`]).
    fn default() -> Self {
        LadderStep::Opt10.config()
    }
}

impl PipelineConfig {
    /// Checks the settings, naming the first bad one.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("streams", self.streams),
            ("chunk", self.chunk),
            ("depth", self.depth),
            ("cap", self.cap),
            ("slot-bytes", self.slot_bytes),
            ("upload-frames", self.upload_frames),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(Error::param(name, "must be at least 1"));
            }
        }
        if self.depth > 2 {
            return Err(Error::param(
                "depth",
                format!("1 or 2 chunks in flight, got {}", self.depth),
            ));
        }
        if self.launch == Launch::PerUpload && !self.compact {
            return Err(Error::param(
                "launch",
                "one launch per upload group needs compact results",
            ));
        }
        if self.cap > u32::MAX as usize / 2 {
            return Err(Error::param("cap", format!("{} is too large", self.cap)));
        }
        Ok(())
    }
}

/// The steps of the GPU ladder (DESIGN.md, "The GPU pipeline and its ladder"), each a
/// configuration of the one GPU finder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LadderStep {
    /// One stream, one frame at a time: copy in, kernels, copy out, synchronise.
    Opt1,
    /// Four streams, frames round-robin, a bulk memcpy of each round into pinned staging,
    /// a synchronisation barrier per round.
    Opt2,
    /// Continuous queueing of a whole chunk without per-round barriers; one fixed-size
    /// result block per frame; input from pageable memory.
    Opt3,
    /// Opt3 with the caller's input pinned (registered) so uploads run at DMA speed.
    Opt4,
    /// Chunks: chunk i+1 is submitted before chunk i is collected.
    Opt5,
    /// Opt5 with zero-copy collection (views into the pinned result buffer).
    Opt6,
    /// Opt6 with the F32 (B1) pedestal (the precision is part of the finder's
    /// [`crate::FinderConfig`]; see [`LadderStep::precision`]).
    Opt7,
    /// Opt7 with results compacted on the GPU: the download carries only clusters found.
    Opt8,
    /// Opt8 with many frames per upload copy.
    Opt9,
    /// Opt9 with one launch per upload group instead of one per frame: the grid stays
    /// resident and each tile waits per frame only for the tiles its windows read; uploads
    /// on one copy stream, in order.
    Opt10,
}

impl LadderStep {
    /// Every step, in ladder order.
    pub const ALL: [LadderStep; 10] = [
        Self::Opt1,
        Self::Opt2,
        Self::Opt3,
        Self::Opt4,
        Self::Opt5,
        Self::Opt6,
        Self::Opt7,
        Self::Opt8,
        Self::Opt9,
        Self::Opt10,
    ];

    /// The step's name (`opt1` .. `opt10`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Opt1 => "opt1",
            Self::Opt2 => "opt2",
            Self::Opt3 => "opt3",
            Self::Opt4 => "opt4",
            Self::Opt5 => "opt5",
            Self::Opt6 => "opt6",
            Self::Opt7 => "opt7",
            Self::Opt8 => "opt8",
            Self::Opt9 => "opt9",
            Self::Opt10 => "opt10",
        }
    }

    /// The precision the ladder measures this step with: `F32` from opt7 on, `F64` before.
    /// (Results of every step equal the CPU's at whatever precision the finder is given.)
    pub fn precision(self) -> Precision {
        match self {
            Self::Opt7 | Self::Opt8 | Self::Opt9 | Self::Opt10 => Precision::F32,
            _ => Precision::F64,
        }
    }

    /// The pipeline settings of this step.
    pub fn config(self) -> PipelineConfig {
        let base = PipelineConfig {
            streams: 1,
            chunk: 1,
            depth: 1,
            cap: 2048,
            slot_bytes: DEFAULT_SLOT_BYTES,
            input: InputMode::Pageable,
            collect: Collect::Owned,
            compact: false,
            upload_frames: 1,
            overflow: Overflow::Grow,
            launch: Launch::PerFrame,
            timing: false,
        };
        let opt2 = PipelineConfig {
            streams: 4,
            chunk: 4,
            input: InputMode::Staged,
            ..base.clone()
        };
        let opt3 = PipelineConfig {
            chunk: 1 << 20, // the whole call, bounded by `slot_bytes`
            input: InputMode::Pageable,
            ..opt2.clone()
        };
        let opt4 = PipelineConfig {
            input: InputMode::Registered,
            ..opt3.clone()
        };
        let opt5 = PipelineConfig {
            chunk: 128,
            depth: 2,
            ..opt4.clone()
        };
        let opt6 = PipelineConfig {
            collect: Collect::ZeroCopy,
            ..opt5.clone()
        };
        let opt8 = PipelineConfig {
            compact: true,
            ..opt6.clone()
        };
        let opt9 = PipelineConfig {
            upload_frames: opt8.chunk / opt8.streams,
            ..opt8.clone()
        };
        match self {
            Self::Opt1 => base,
            Self::Opt2 => opt2,
            Self::Opt3 => opt3,
            Self::Opt4 => opt4,
            Self::Opt5 => opt5,
            Self::Opt6 | Self::Opt7 => opt6,
            Self::Opt8 => opt8,
            Self::Opt9 => opt9,
            // One copy stream: the upload groups land one after another, so each group's
            // launch starts as soon as its own frames are in. Round-robin over four streams
            // shares the bandwidth among a chunk's groups, so they all land at the chunk's
            // end and the first launch waits for the whole chunk (H200, 3x3 f64, same run:
            // 6.58 us/frame with four streams, 6.12 with one).
            Self::Opt10 => PipelineConfig {
                launch: Launch::PerUpload,
                streams: 1,
                ..opt9
            },
        }
    }
}

impl FromStr for LadderStep {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|step| step.name() == s)
            .ok_or_else(|| Error::param("step", format!("`{s}` is not one of opt1 .. opt10")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_is_valid_and_named() {
        for step in LadderStep::ALL {
            step.config().validate().unwrap();
            assert_eq!(step.name().parse::<LadderStep>().unwrap(), step);
        }
        assert!("opt11".parse::<LadderStep>().is_err());
        assert_eq!(PipelineConfig::default(), LadderStep::Opt10.config());
    }

    #[test]
    fn one_launch_per_upload_group_needs_compact_results() {
        let bad = PipelineConfig {
            compact: false,
            ..LadderStep::Opt10.config()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("launch") && e.contains("compact"), "{e}");
        let per_frame = PipelineConfig {
            launch: Launch::PerFrame,
            ..bad
        };
        per_frame.validate().unwrap();
    }
}
