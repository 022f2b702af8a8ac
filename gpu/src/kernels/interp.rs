//! The eta-interpolation kernels: a chunk's cluster records, as the finder left them on the
//! device, counted into an eta cube or placed into a sub-pixel image, with the arithmetic of
//! [`crate::eta`] (the host's, bit for bit). Counts are 64-bit integer atomics, so their sum
//! does not depend on the order threads run in; the tally is summed per warp first.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::args::{EtaCubeArgs, EtaImageArgs, NarrowArgs};
use crate::eta::{self, EtaKind};
use crate::kernels::prims::warp_sum;

/// Threads in the whole grid (a 1-D launch).
#[inline(always)]
fn grid_threads() -> usize {
    // SAFETY: reads special registers; no preconditions.
    unsafe {
        core::arch::nvptx::_grid_dim_x() as usize * core::arch::nvptx::_block_dim_x() as usize
    }
}

/// Adds `v` to the 64-bit counter at `p`.
///
/// # Safety
/// `p` points at a live, 8-byte aligned device `u64` that is only accessed atomically.
#[inline(always)]
unsafe fn add(p: *mut u64, v: u64) {
    // SAFETY: as the caller promises.
    unsafe { AtomicU64::from_ptr(p) }.fetch_add(v, Ordering::Relaxed);
}

/// A chunk's records: `(first record word, count)`, or `None` when it overflowed.
///
/// # Safety
/// `out` holds at least `frames + 1` words.
#[inline(always)]
unsafe fn records(out: *const u32, frames: u32, room: u32) -> Option<u32> {
    // SAFETY: as the caller promises.
    let total = unsafe { *out.add(frames as usize) };
    if total > room { None } else { Some(total) }
}

/// Binds what both eta kernels read of their chunk besides its records (`$args` has the chunk
/// fields, the first group of `interp_kernels!`): the cluster side, the words per record (the
/// centre, then `side * side` values), the eta kind, the edges of eta_x, eta_y and energy, and
/// the bins of eta_y and energy (the cube's last two dimensions), to the names given.
macro_rules! chunk_layout {
    ($args:ident => $side:ident, $rw:ident, $kind:ident, $xb:ident, $yb:ident, $eb:ident,
        $ny:ident, $ne:ident) => {
        let $side = $args.side as usize;
        let $rw = 1 + $side * $side;
        let $kind = EtaKind::from_u32($args.kind).unwrap_or(EtaKind::Eta2);
        // SAFETY: the edges' buffers hold `nx`, `ny`, `ne` values (the kernel's contract).
        let ($xb, $yb, $eb) = unsafe {
            (
                core::slice::from_raw_parts($args.xbins, $args.nx as usize),
                core::slice::from_raw_parts($args.ybins, $args.ny as usize),
                core::slice::from_raw_parts($args.ebins, $args.ne as usize),
            )
        };
        let ($ny, $ne) = ($args.ny as usize - 1, $args.ne as usize - 1);
    };
}

/// Per-thread tally, summed per warp and added once per warp (six counters, as
/// `EtaCubeArgs::tally`).
struct Tally([u32; 6]);

impl Tally {
    fn count(&mut self, flags: u8) {
        self.0[0] += 1;
        if flags == 0 {
            self.0[1] += 1;
        }
        if flags & eta::FLAG_ETA_OUTSIDE != 0 {
            self.0[2] += 1;
        }
        if flags & eta::FLAG_ENERGY_OUTSIDE != 0 {
            self.0[3] += 1;
        }
        if flags & eta::FLAG_MASKED != 0 {
            self.0[4] += 1;
        }
        if flags & eta::FLAG_WINDOW != 0 {
            self.0[5] += 1;
        }
    }

    /// Adds the warp's tally to `out` from its first lane.
    ///
    /// # Safety
    /// Every lane of the warp calls this; `out` holds six counters.
    unsafe fn flush(&self, out: *mut u64) {
        // SAFETY: thread index, no preconditions.
        let lane = unsafe { core::arch::nvptx::_thread_idx_x() } % 32;
        for i in 0..6 {
            // SAFETY: every lane of the warp is here (the caller's promise).
            let s = unsafe { warp_sum(self.0[i]) };
            if lane == 0 && s != 0 {
                // SAFETY: counter `i` of six.
                unsafe { add(out.add(i), s as u64) };
            }
        }
    }
}

impl EtaCubeArgs {
    /// Counts every record of the chunk into the cube.
    ///
    /// # Safety
    /// The struct's documented buffers are live and as large as it says.
    pub unsafe fn run(self) {
        let mut tally = Tally([0; 6]);
        // SAFETY: `out` holds the chunk's counts.
        if let Some(total) = unsafe { records(self.out, self.frames, self.room) } {
            chunk_layout!(self => side, rw, kind, xb, yb, eb, ny, ne);
            let mut r = super::global_index_x();
            while r < total as usize {
                // SAFETY: record `r` of `total`, `rw` words from `records_at`.
                let data = unsafe {
                    core::slice::from_raw_parts(
                        self.out.add(self.records_at as usize + r * rw + 1) as *const i32,
                        side * side,
                    )
                };
                let at = eta::locate(kind, data, side, xb, yb, eb);
                tally.count(at.flags);
                if let Some((ix, iy, ie)) = at.bins {
                    // SAFETY: a bin of the cube.
                    unsafe { add(self.counts.add(eta::cube_index(ix, iy, ie, ny, ne)), 1) };
                }
                r += grid_threads();
            }
        }
        // SAFETY: every lane reaches this (the loop above has no early exit).
        unsafe { tally.flush(self.tally) };
    }
}

impl EtaImageArgs {
    /// Places every record of the chunk: writes its row to `photons`, counts it into the
    /// image when its flags are 0, and tallies it (each where its pointer is not null).
    ///
    /// # Safety
    /// The struct's documented buffers are live and as large as it says.
    pub unsafe fn run(self) {
        let mut tally = Tally([0; 6]);
        // SAFETY: `out` holds the chunk's counts.
        if let Some(total) = unsafe { records(self.out, self.frames, self.room) } {
            chunk_layout!(self => side, rw, kind, xb, yb, eb, ny, ne);
            let (h, w) = (self.height as usize, self.width as usize);
            let mut r = super::global_index_x();
            while r < total as usize {
                let base = self.records_at as usize + r * rw;
                // SAFETY: record `r` of `total`, `rw` words from `records_at`.
                let (xy, data) = unsafe {
                    (
                        *self.out.add(base),
                        core::slice::from_raw_parts(
                            self.out.add(base + 1) as *const i32,
                            side * side,
                        ),
                    )
                };
                let (cx, cy) = ((xy & 0xffff) as u16, (xy >> 16) as u16);
                let at = eta::locate(kind, data, side, xb, yb, eb);
                let mut flags = at.flags;
                if !self.mask.is_null()
                    && (cx as u32) < self.mask_cols
                    && (cy as u32) < self.mask_rows
                {
                    // SAFETY: a pixel of the `mask_rows x mask_cols` mask.
                    let bad = unsafe {
                        *self
                            .mask
                            .add(cy as usize * self.mask_cols as usize + cx as usize)
                    };
                    if bad != 0 {
                        flags |= eta::FLAG_MASKED;
                    }
                }
                let energy = at.energy;
                if self.use_window != 0 && !(self.window_lo <= energy && energy <= self.window_hi) {
                    flags |= eta::FLAG_WINDOW;
                }
                tally.count(flags);
                let placed = match (at.bins, flags) {
                    (Some((ix, iy, ie)), 0) => {
                        let i = eta::cube_index(ix, iy, ie, ny, ne);
                        // SAFETY: a bin of the maps.
                        let (u, v) = unsafe { (*self.ietax.add(i), *self.ietay.add(i)) };
                        Some(eta::place(kind, cx, cy, at.corner, u, v))
                    }
                    _ => None,
                };
                if let Some((x, y)) = placed
                    && !self.image.is_null()
                    && let (Some(row), Some(col)) = (
                        eta::subpixel(y, self.subpixels, h),
                        eta::subpixel(x, self.subpixels, w),
                    )
                {
                    // SAFETY: a sub-pixel of the `h x w` image.
                    unsafe { add(self.image.add(row * w + col), 1) };
                }
                if !self.photons.is_null() {
                    // A flagged photon holds its pixel's centre, as the host's placement.
                    let (x, y) = placed.unwrap_or((cx as f64 + 0.5, cy as f64 + 0.5));
                    let row = eta::PlacedRow {
                        x,
                        y,
                        energy,
                        flags: flags as u32,
                        pad: 0,
                    };
                    // SAFETY: row `r` of the `room >= total` rows `photons` holds.
                    unsafe { *self.photons.add(r) = row };
                }
                r += grid_threads();
            }
        }
        if !self.tally.is_null() {
            // SAFETY: every lane reaches this (the loop above has no early exit, and the
            // condition is the same for the whole grid).
            unsafe { tally.flush(self.tally) };
        }
    }
}

impl NarrowArgs {
    /// Narrows every count to `u32`, saturating.
    ///
    /// # Safety
    /// The struct's documented buffers are live and as large as it says.
    pub unsafe fn run(self) {
        let mut i = super::global_index_x();
        while i < self.len as usize {
            // SAFETY: count `i` of `len`, in both buffers.
            unsafe { *self.narrow.add(i) = (*self.counts.add(i)).min(u32::MAX as u64) as u32 };
            i += grid_threads();
        }
    }
}

crate::interp_kernels!(super::struct_entries;);
