//! Kernel entry points (compiled for `nvptx64-nvidia-cuda` only).

pub mod matcher;
pub mod prepare;

use core::arch::nvptx;

/// Global linear index of the calling thread in a 1-D launch.
#[inline(always)]
pub(crate) fn global_index_x() -> usize {
    unsafe {
        nvptx::_block_idx_x() as usize * nvptx::_block_dim_x() as usize
            + nvptx::_thread_idx_x() as usize
    }
}
