//! The pipeline's plain copies: host frames into a staging buffer, pedestal sums on the
//! device, results down into pinned memory.

use cudarc::driver::CudaStream;

use super::super::buffers::{DeviceBuf, PinnedBuf};
use super::super::reals::RealBuf;
use crate::error::{CudaContextExt, Result};

/// Copies `src` into `dst` (the same length) on rayon's threads in pieces of 4 MiB: one core
/// copies at about a quarter of what the memory bus and an upload can take.
pub(super) fn copy_parallel(dst: &mut [u16], src: &[u16]) {
    use rayon::prelude::*;
    const PIECE: usize = 2 << 20;
    if src.len() <= PIECE {
        dst.copy_from_slice(src);
        return;
    }
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Device-to-device copy of all of the pedestal sums `src` into `dst`, queued on `stream`.
pub(super) fn copy_dtod(dst: &RealBuf, src: &RealBuf, stream: &CudaStream) -> Result<()> {
    dst.copy_from_async(src, stream, "the pedestal")
}

/// Queues a download of elements `from .. from + len` of `src` into the same elements of
/// `dst`.
pub(super) fn dtoh<T: bytemuck::Pod>(
    dst: &PinnedBuf<T>,
    src: &DeviceBuf<T>,
    from: usize,
    len: usize,
    stream: &CudaStream,
) -> Result<()> {
    assert!(from + len <= dst.len());
    // SAFETY: the destination range lies inside the pinned buffer, which outlives the copy
    // (the owner synchronises before freeing or reading it).
    unsafe { src.download_async(from, dst.ptr_at(from), len, stream) }.cuda("downloading results")
}
