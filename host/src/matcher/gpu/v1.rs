//! V1: the full `n x m` distance matrix (`cluda_match_v1_distances`, 128 x 128 tiles), then one
//! warp per row takes its minimum (`cluda_match_v1_rowmin`).
//!
//! The matrix takes `4 n m` bytes of device memory, so V1 checks the free memory first and
//! refuses, with a clear error, sizes that would not fit.

use cluda_gpu::args::{MatchV1DistancesArgs, MatchV1RowminArgs};

use super::{DeviceResult, GpuMatcher, Sides, grid_dim, launch, launch_rows};
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Error, Result};

/// Bytes kept free beside V1's buffers (allocator granularity, cuBLAS workspace, other users).
const HEADROOM: u64 = 256 << 20;

impl GpuMatcher {
    /// Refuses `n x m` problems whose distance matrix (plus inputs and outputs) would not fit
    /// in the device memory that is free now, or whose grid would be too large.
    pub(super) fn v1_check_memory(&self, n: usize, m: usize) -> Result<()> {
        let need =
            (n as u64 * m as u64 * 4).saturating_add((n as u64 + m as u64) * 512 + n as u64 * 8);
        let (free, _total) = self
            .device
            .context()
            .mem_get_info()
            .cuda("querying free device memory")?;
        // Scratch kept by this matcher is reused or released for the matrix: count it as free.
        let free = free as u64 + self.workspace.iter().map(|b| b.bytes() as u64).sum::<u64>();
        if need.saturating_add(HEADROOM) > free {
            return Err(Error::param(
                "version",
                format!(
                    "v1 materialises the {n} x {m} distance matrix: it needs {:.2} GiB of device memory but only {:.2} GiB are free; use v2 or v3, which never store the matrix",
                    need as f64 / (1u64 << 30) as f64,
                    free as f64 / (1u64 << 30) as f64
                ),
            ));
        }
        if n.div_ceil(128) > 65_535 {
            return Err(Error::shape(
                "v1 grid (left rows / 128)",
                "at most 65535 blocks",
                format!("{}", n.div_ceil(128)),
            ));
        }
        Ok(())
    }

    /// V1 on uploaded descriptors (`n`, `m` >= 1, memory already checked).
    pub(super) fn v1(&mut self, p: Sides<'_>) -> Result<DeviceResult> {
        let Sides(lhs, n, rhs, m) = p;
        // Every element of the matrix is written by the distance kernel before it is read.
        let dist_mat = self.take_scratch(n * m, "v1's distance matrix")?;
        let s = &self.stream;
        let idx = DeviceBuf::zeroed_on_stream(s, n, "v1's indices")?;
        let dist = DeviceBuf::zeroed_on_stream(s, n, "v1's distances")?;
        let (n32, m32) = (n as u32, m as u32);
        let grid = (
            grid_dim(m.div_ceil(128), "right tiles")?,
            grid_dim(n.div_ceil(128), "left tiles")?,
        );
        {
            let a = MatchV1DistancesArgs {
                lhs: lhs.ptr(),
                n: n32,
                rhs: rhs.ptr(),
                m: m32,
                dist: dist_mat.ptr(),
            };
            // SAFETY: lhs n x 128, rhs m x 128, dist_mat n x m, as the kernel indexes them.
            unsafe { launch(s, &self.k.v1_distances, grid, a) }
                .cuda("launching v1's distance kernel")?;
        }
        {
            let a = MatchV1RowminArgs {
                dist: dist_mat.ptr(),
                n: n32,
                m: m32,
                out_idx: idx.ptr(),
                out_dist: dist.ptr(),
            };
            // SAFETY: dist_mat n x m, idx and dist n.
            unsafe { launch_rows(s, &self.k.v1_rowmin, n, a, "v1's row-minimum kernel") }?;
        }
        self.give_back(dist_mat);
        Ok(DeviceResult { idx, dist })
    }
}
