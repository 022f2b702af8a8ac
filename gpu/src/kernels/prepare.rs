//! Stage 1 of a frame: per-pixel corrected value and threshold from the pedestal state.
//!
//! Splitting a frame into "prepare" (reads the pedestal) and "classify + update" (reads only
//! the prepared values of neighbours, writes only its own pixel's pedestal) makes the pedestal
//! update frame-synchronous without any inter-block synchronisation.

use super::global_index_x;
use crate::classify::threshold;
use crate::pedestal::{corrected, mean_offset, std_dev};
use crate::real::Real;

#[inline(always)]
unsafe fn prepare<R: Real>(
    frame: *const u16,
    base: *const R,
    a: *const R,
    b: *const R,
    frozen_t: *const R,
    pixels: usize,
    inv: R,
    n_sigma: R,
    live: bool,
    c_out: *mut R,
    t_out: *mut R,
) {
    let i = global_index_x();
    if i >= pixels {
        return;
    }
    unsafe {
        let (ai, bi) = (*a.add(i), *b.add(i));
        let m = mean_offset(ai, inv);
        *c_out.add(i) = corrected(*frame.add(i), *base.add(i), m);
        *t_out.add(i) = if live {
            threshold(n_sigma, std_dev(ai, bi, inv))
        } else {
            *frozen_t.add(i)
        };
    }
}

macro_rules! prepare_kernel {
    ($name:ident, $t:ty) => {
        /// Corrected values and thresholds of one frame (see the module docs).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            frame: *const u16,
            base: *const $t,
            a: *const $t,
            b: *const $t,
            frozen_t: *const $t,
            pixels: u32,
            inv: $t,
            n_sigma: $t,
            live: u32,
            c_out: *mut $t,
            t_out: *mut $t,
        ) {
            unsafe {
                prepare::<$t>(
                    frame,
                    base,
                    a,
                    b,
                    frozen_t,
                    pixels as usize,
                    inv,
                    n_sigma,
                    live != 0,
                    c_out,
                    t_out,
                )
            }
        }
    };
}
prepare_kernel!(cluda_prepare_f64, f64);
prepare_kernel!(cluda_prepare_f32, f32);
