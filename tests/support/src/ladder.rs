//! The steps of the GPU ladder, each a configuration of the one GPU finder (opt1 .. opt10).
//!
//! The ladder bench measures every step; the GPU tests check that every step gives the CPU
//! finder's bytes; both use this one definition.
//! None of the settings changes a result, only speed and memory. Opt10 is the library's
//! default pipeline ([`PipelineConfig::default`]); a test checks that they stay equal.
use std::str::FromStr;

use cluda::Precision;
use cluda::finder::gpu::{
    Collect, DEFAULT_SLOT_BYTES, InputMode, Launch, Overflow, PipelineConfig,
};

/// A step of the GPU ladder.
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
    /// `FinderConfig`; see [`LadderStep::precision`]).
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
        // The ladder hands opt4 and later steps page-locked frames (`PinnedFrames`), which
        // `Auto` (the library's default) reads in place, as `Registered` would.
        let opt4 = PipelineConfig {
            input: InputMode::Auto,
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
            // launch starts as soon as its own frames are in (round-robin over four streams
            // shares the bandwidth among a chunk's groups, so they all land at the chunk's
            // end and the first launch waits for the whole chunk).
            Self::Opt10 => PipelineConfig {
                launch: Launch::PerUpload,
                streams: 1,
                ..opt9
            },
        }
    }
}

impl FromStr for LadderStep {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|step| step.name() == s)
            .ok_or_else(|| format!("step `{s}` is not one of opt1 .. opt10"))
    }
}
