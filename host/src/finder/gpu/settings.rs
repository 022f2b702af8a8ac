//! How the GPU finder schedules its work: the pipeline knobs.
//!
//! None of these settings changes a result: one pedestal is updated in frame order on one
//! compute stream whatever the stream count, chunk size or step, so every configuration gives
//! the bytes of the CPU reference. They change only speed and memory.

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
    /// DMA from the caller's memory itself: used as is when this crate page-locked it (e.g.
    /// [`crate::finder::gpu::PinnedFrames`]: see [`InputMode::Auto`]), otherwise page-locked
    /// (registered) for the call; falls back to [`InputMode::Staged`] when the driver refuses
    /// to register it (e.g. a page of it is registered already).
    Registered,
    /// The default: DMA from the caller's memory when one range this crate page-locked
    /// covers it ([`crate::finder::gpu::PinnedFrames`],
    /// [`crate::finder::gpu::GpuFinder::lock_frames`], the engine's ring and mapped chunks),
    /// held locked by the call until its uploads are done; otherwise [`InputMode::Staged`]
    /// (memory page-locked by other means included: nothing would keep it locked for the
    /// call). Registering pageable memory on
    /// every call costs more than staging it: on the H200, 20,000 400x400 frames in a plain
    /// `Vec` took 24.8 us/frame registered per call against 11.3 staged on every core
    /// (bench-results/2026-12-02-h200-user-path-feed).
    Auto,
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
    /// windows read, and each pixel's pedestal state stays on chip for the group. Needs
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
    /// multi-stream pipelines; read them with `GpuFinder::kernel_times`).
    pub timing: bool,
}

impl Default for PipelineConfig {
    /// The fastest configuration measured (the last step of the ladder bench): one copy
    /// stream with chunks of 128 frames, two chunks in flight (the next is queued while one
    /// is collected), the caller's memory pinned for DMA, results compacted on the GPU and
    /// handed over zero-copy, uploads of 32 frames, each found by one cooperative launch.
    fn default() -> Self {
        Self {
            // One copy stream: upload groups land one after another, so each group's launch
            // starts as soon as its own frames are in (round-robin over several streams
            // shares the bandwidth among a chunk's groups, so they all land at its end).
            streams: 1,
            chunk: 128,
            depth: 2,
            cap: 2048,
            slot_bytes: DEFAULT_SLOT_BYTES,
            input: InputMode::Auto,
            collect: Collect::ZeroCopy,
            compact: true,
            upload_frames: 32,
            overflow: Overflow::Grow,
            launch: Launch::PerUpload,
            timing: false,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_valid() {
        PipelineConfig::default().validate().unwrap();
    }

    #[test]
    fn one_launch_per_upload_group_needs_compact_results() {
        let bad = PipelineConfig {
            compact: false,
            ..PipelineConfig::default()
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
