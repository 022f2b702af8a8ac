//! Stage 1 of a frame: per-pixel corrected value and threshold from the pedestal state.
//!
//! Splitting a frame into "prepare" (reads the pedestal) and "classify + update" (reads only
//! the prepared values of neighbours, writes only its own pixel's pedestal) makes the pedestal
//! update frame-synchronous without any inter-block synchronisation.
//!
//! The corrected values go into a zero-padded plane (`r = X/2` zero rows and columns around the
//! frame, written once by the host and never touched here), exactly the plane of the CPU
//! finder: an out-of-frame neighbour adds `+0` to a window sum and stores 0 in a cluster, which
//! is the definition's "skipped" (see `host/src/finder/cpu.rs`).

use super::global_index_x;
use crate::classify::threshold;
use crate::pedestal::{corrected, mean_offset, std_dev};
use crate::real::Real;

/// The corrected value and threshold of pixel `i`, and the reset of the classify kernel's
/// look-back words (`status[0..n_status]`, which the next launch on the stream reads).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn prepare<R: Real>(
    frame: *const u16,
    base: *const R,
    a: *const R,
    b: *const R,
    frozen_std: *const R,
    cols: u32,
    pixels: u32,
    stride: u32,
    r: u32,
    inv: R,
    n_sigma: R,
    live: bool,
    c_plane: *mut R,
    t_out: *mut R,
    status: *mut u64,
    n_status: u32,
) {
    let i = global_index_x();
    unsafe {
        if i < n_status as usize {
            core::ptr::write_volatile(status.add(i), 0);
        }
        if i >= pixels as usize {
            return;
        }
        let iu = i as u32;
        let y = iu / cols;
        let x = iu - y * cols;
        let (ai, bi) = (*a.add(i), *b.add(i));
        let m = mean_offset(ai, inv);
        let at = ((y + r) * stride + x + r) as usize;
        *c_plane.add(at) = corrected(*frame.add(i), *base.add(i), m);
        // Same operations as the CPU: live thresholds from the current window, frozen ones
        // from the std frozen when the pedestal became ready, both `n_sigma * std`.
        let std = if live {
            std_dev(ai, bi, inv)
        } else {
            *frozen_std.add(i)
        };
        *t_out.add(i) = threshold(n_sigma, std);
    }
}

macro_rules! prepare_kernel {
    ($name:ident, $t:ty) => {
        /// Corrected values (zero-padded plane) and thresholds of one frame; resets the
        /// look-back words of the following classify launch (see the module docs).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            frame: *const u16,
            base: *const $t,
            a: *const $t,
            b: *const $t,
            frozen_std: *const $t,
            cols: u32,
            pixels: u32,
            stride: u32,
            r: u32,
            inv: $t,
            n_sigma: $t,
            live: u32,
            c_plane: *mut $t,
            t_out: *mut $t,
            status: *mut u64,
            n_status: u32,
        ) {
            unsafe {
                prepare::<$t>(
                    frame,
                    base,
                    a,
                    b,
                    frozen_std,
                    cols,
                    pixels,
                    stride,
                    r,
                    inv,
                    n_sigma,
                    live != 0,
                    c_plane,
                    t_out,
                    status,
                    n_status,
                )
            }
        }
    };
}
prepare_kernel!(cluda_prepare_f64, f64);
prepare_kernel!(cluda_prepare_f32, f32);
