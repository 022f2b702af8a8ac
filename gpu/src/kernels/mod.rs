//! Kernel entry points (compiled for `nvptx64-nvidia-cuda` only).
//!
//! A data frame is found in two launches on one compute stream (see the host's
//! `finder::gpu::pipeline`): [`prepare`] turns the raw frame and the pedestal state into corrected
//! values `c` (in a zero-padded plane) and thresholds `t`; [`frame`] reads only `c` and `t`
//! of neighbours, writes the frame's cluster records in row-major order and updates the pedestal
//! of its own pixel. Because no kernel of frame k reads a neighbour's pedestal state after any
//! kernel of frame k wrote it, the update is frame-synchronous and race-free.
//!
//! The pipeline normally runs one launch per frame instead: `cluda_step_*` (in [`frame`])
//! classifies frame k exactly as `classify` does and then, per pixel, prepares frame k+1 from
//! the sums its own thread has just updated, into a second plane (planes, thresholds and
//! look-back words alternate between two sets). Only a chunk's first frame needs a `prepare`
//! launch of its own.
//!
//! The default pipeline (ladder step opt10) goes further: one cooperative launch of
//! `cluda_run1_*` ([`run`]) finds a whole upload group of frames, each tile waiting per frame
//! only for the tiles its windows read, with each pixel's pedestal state in registers.

pub mod frame;
pub mod matcher;
pub mod prepare;
pub mod run;

use core::arch::nvptx;

/// Global linear index of the calling thread in a 1-D launch.
#[inline(always)]
pub(crate) fn global_index_x() -> usize {
    unsafe {
        nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
            + nvptx::_thread_idx_x() as usize
    }
}
