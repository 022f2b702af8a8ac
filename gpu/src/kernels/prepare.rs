//! Stage 1 of a frame: per-pixel corrected value and threshold from the pedestal state.
//!
//! Splitting a frame into "prepare" (reads the pedestal) and "classify + update" (reads only
//! the prepared values of neighbours, writes only its own pixel's pedestal) makes the pedestal
//! update frame-synchronous without any inter-block synchronisation.
//!
//! The corrected values go into a zero-padded plane (`r = X/2` zero rows and columns around the
//! frame, written once by the host and never touched here), exactly the plane of the CPU
//! finder: an out-of-frame neighbour adds `+0` to a window sum and stores 0 in a cluster, which
//! is the definition's "skipped" (see `host/src/finder/cpu/`).

use super::global_index_x;
use crate::args::PrepareArgs;
use crate::classify::threshold;
use crate::pedestal::{corrected, mean_offset, std_dev};
use crate::real::Real;

/// What `prepare` needs besides the pedestal sums: the frame, the outputs and the constants.
#[derive(Clone, Copy)]
pub(crate) struct Prepare<R> {
    pub frame: *const u16,
    pub base: *const R,
    pub frozen_std: *const R,
    pub cols: u32,
    pub pixels: u32,
    pub stride: u32,
    pub r: u32,
    pub inv: R,
    pub n_sigma: R,
    pub live: bool,
    pub c_plane: *mut R,
    pub t_out: *mut R,
    pub status: *mut u64,
    pub n_status: u32,
}

/// The corrected value of raw sample `x` and the threshold of a pixel with baseline `base`
/// and sums `a`, `b` (`frozen_std` is read only for frozen thresholds): the operations of
/// the CPU finder, in its order.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_values<R: Real>(
    x: u16,
    base: R,
    a: R,
    b: R,
    frozen_std: impl FnOnce() -> R,
    inv: R,
    n_sigma: R,
    live: bool,
) -> (R, R) {
    (
        corrected_value(x, base, a, inv),
        threshold_value(a, b, frozen_std, inv, n_sigma, live),
    )
}

/// The corrected value half of [`prepare_values`] (kernels that publish it before they
/// compute the threshold).
#[inline(always)]
pub(crate) fn corrected_value<R: Real>(x: u16, base: R, a: R, inv: R) -> R {
    corrected(x, base, mean_offset(a, inv))
}

/// The threshold half of [`prepare_values`]: live thresholds from the current window, frozen
/// ones from the std frozen when the pedestal became ready, both `n_sigma * std`.
#[inline(always)]
pub(crate) fn threshold_value<R: Real>(
    a: R,
    b: R,
    frozen_std: impl FnOnce() -> R,
    inv: R,
    n_sigma: R,
    live: bool,
) -> R {
    let std = if live {
        std_dev(a, b, inv)
    } else {
        frozen_std()
    };
    threshold(n_sigma, std)
}

/// The corrected value and threshold of pixel `i < pixels` from its sums `a`, `b`.
#[inline(always)]
pub(crate) unsafe fn prepare_pixel<R: Real>(p: &Prepare<R>, i: usize, ai: R, bi: R) {
    // SAFETY: `i < pixels` and the planes and maps cover the frame (the caller's contract).
    unsafe {
        let iu = i as u32;
        let y = iu / p.cols;
        let x = iu - y * p.cols;
        let at = ((y + p.r) * p.stride + x + p.r) as usize;
        let (c, t) = prepare_values(
            *p.frame.add(i),
            *p.base.add(i),
            ai,
            bi,
            || *p.frozen_std.add(i),
            p.inv,
            p.n_sigma,
            p.live,
        );
        *p.c_plane.add(at) = c;
        *p.t_out.add(i) = t;
    }
}

/// The corrected value and threshold of pixel `i`, and the reset of the classify kernel's
/// look-back words (`status[0..n_status]`, which the next launch on the stream reads).
#[inline(always)]
unsafe fn prepare<R: Real>(p: &Prepare<R>, a: *const R, b: *const R) {
    let i = global_index_x();
    // SAFETY: the launch's contract: `status` holds `n_status` words and the maps and planes
    // cover `pixels` pixels; each index is checked against its bound below.
    unsafe {
        if i < p.n_status as usize {
            core::ptr::write_volatile(p.status.add(i), 0);
        }
        if i >= p.pixels as usize {
            return;
        }
        prepare_pixel(p, i, *a.add(i), *b.add(i));
    }
}

/// A prepare kernel.
#[inline(always)]
unsafe fn prepare_entry<R: Real>(k: PrepareArgs<R>) {
    let p = Prepare {
        frame: k.frame,
        base: k.base,
        frozen_std: k.frozen_std,
        cols: k.cols,
        pixels: k.pixels,
        stride: k.stride,
        r: k.r,
        inv: k.inv,
        n_sigma: k.n_sigma,
        live: k.live != 0,
        c_plane: k.c_plane,
        t_out: k.t_out,
        status: k.status,
        n_status: k.n_status,
    };
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { prepare::<R>(&p, k.a, k.b) }
}

crate::finder_kernels! { prepare; super::entry; prepare_fields;
    /// Corrected values (zero-padded plane) and thresholds of one frame; resets the
    /// look-back words of the following classify launch (see the module docs).
    PrepareArgs => prepare_entry [];
}
