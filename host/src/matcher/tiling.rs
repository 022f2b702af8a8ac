//! V3's (and V4's) tile shape and V4's screening kernel, settings of [`super::GpuMatcher`] (their
//! own module so that the matcher and the version code both read them without importing each
//! other).

use crate::error::{Error, Result};

/// How V4 computes its TF32 screen (`GpuMatcher::set_v4_kernel`); every choice gives the same
/// result, V2's bit for bit. The fused kernels, slower today than cuBLAS, exist only with the
/// feature `experimental`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum V4Kernel {
    /// cuBLAS TF32 GEMM tiles (shaped by [`V3Tiling`]) folded by `cluda_match_v4_fold`.
    #[default]
    Cublas,
    #[cfg(feature = "experimental")]
    /// `cluda_match_v4_fused` twice (row bounds, then candidates): `mma.sync` in the kernel,
    /// no matrix in memory, the GEMM work done twice.
    FusedTwoPass,
    #[cfg(feature = "experimental")]
    /// `cluda_match_v4_fused1` once (running bounds and per-split candidate lists) and
    /// `cluda_match_v4_merge`.
    FusedOnePass,
}

/// V3's tile shape: `rows` left descriptors x `cols` right descriptors per SGEMM (the tile
/// buffer holds `rows * cols` floats, reused for every tile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct V3Tiling {
    /// Left descriptors per tile (>= 1).
    pub rows: usize,
    /// Right descriptors per tile (a multiple of 4, >= 4).
    pub cols: usize,
    /// Two tile buffers and two streams: the fold of tile k runs (on a high-priority stream)
    /// while SGEMM computes tile k + 1 (cudarc's event tracking orders the buffer reuse).
    pub overlap: bool,
}

impl Default for V3Tiling {
    /// 4096 x 16384 (256 MiB per tile buffer, two buffers), overlapped: GEMMs large enough for
    /// cuBLAS to run at full speed and rows long enough for the fold to stream (the fastest
    /// bounded shape of a sweep over tile shapes; see `docs/matcher.md`).
    fn default() -> Self {
        V3Tiling {
            rows: 4096,
            cols: 16384,
            overlap: true,
        }
    }
}

impl V3Tiling {
    /// Checks the shape (see the field docs).
    pub fn check(&self) -> Result<()> {
        if self.rows == 0 || self.rows > i32::MAX as usize {
            return Err(Error::param(
                "v3 tile rows",
                format!("{} is not in 1..=2^31-1", self.rows),
            ));
        }
        if self.cols < 4 || !self.cols.is_multiple_of(4) || self.cols > i32::MAX as usize {
            return Err(Error::param(
                "v3 tile cols",
                format!("{} is not a positive multiple of 4 below 2^31", self.cols),
            ));
        }
        if self.rows.saturating_mul(self.cols) > (1usize << 32) {
            return Err(Error::param(
                "v3 tiling",
                "the tile must hold at most 2^32 floats",
            ));
        }
        Ok(())
    }
}
