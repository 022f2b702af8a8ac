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

/// A prepare launch's arguments with `live` as a `bool` (tested once, where the launch's
/// arguments are read).
#[derive(Clone, Copy)]
pub(crate) struct Prepare<R> {
    pub k: PrepareArgs<R>,
    pub live: bool,
}

impl<R> Prepare<R> {
    /// `k`, with its `live` tested.
    #[inline(always)]
    pub(crate) fn new(k: PrepareArgs<R>) -> Self {
        Self {
            live: k.live != 0,
            k,
        }
    }
}

/// The corrected value of raw sample `x` of a pixel with baseline `base` and sum `a`: the
/// operations of the CPU finder, in its order (computed apart from the threshold, which some
/// kernels compute only after they publish it).
#[inline(always)]
pub(crate) fn corrected_value<R: Real>(x: u16, base: R, a: R, inv: R) -> R {
    corrected(x, base, mean_offset(a, inv))
}

/// The threshold of a pixel with sums `a`, `b` (`frozen_std` is read only for frozen
/// thresholds), as the CPU finder computes it: live thresholds from the current window, frozen
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

/// The corrected value and threshold of pixel `i < pixels` of `p`'s frame from its sums `ai`,
/// `bi` (not read through `p.a`, `p.b`: the step kernels pass the sums they just updated).
#[inline(always)]
pub(crate) unsafe fn prepare_pixel<R: Real>(p: &Prepare<R>, i: usize, ai: R, bi: R) {
    let (live, p) = (p.live, &p.k);
    // SAFETY: `i < pixels` and the planes and maps cover the frame (the caller's contract).
    unsafe {
        let iu = i as u32;
        let y = iu / p.cols;
        let x = iu - y * p.cols;
        let at = ((y + p.r) * p.stride + x + p.r) as usize;
        let c = corrected_value(*p.frame.add(i), *p.base.add(i), ai, p.inv);
        let t = threshold_value(ai, bi, || *p.frozen_std.add(i), p.inv, p.n_sigma, live);
        *p.c_plane.add(at) = c;
        *p.t_out.add(i) = t;
    }
}

/// The corrected value and threshold of pixel `i`, and the reset of the classify kernel's
/// look-back words (`status[0..n_status]`, which the next launch on the stream reads).
#[inline(always)]
unsafe fn prepare<R: Real>(p: &Prepare<R>) {
    let i = global_index_x();
    // SAFETY: the launch's contract: `status` holds `n_status` words and the maps and planes
    // cover `pixels` pixels; each index is checked against its bound below.
    unsafe {
        let k = &p.k;
        if i < k.n_status as usize {
            core::ptr::write_volatile(k.status.add(i), 0);
        }
        if i >= k.pixels as usize {
            return;
        }
        prepare_pixel(p, i, *k.a.add(i), *k.b.add(i));
    }
}

/// A prepare kernel (no scratch array).
#[inline(always)]
unsafe fn prepare_entry<R: Real>(k: PrepareArgs<R>, _scratch: ()) {
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { prepare::<R>(&Prepare::new(k)) }
}

crate::finder_kernels! { prepare; super::entry; prepare;
    /// Corrected values (zero-padded plane) and thresholds of one frame; resets the
    /// look-back words of the following classify launch (see the module docs).
    PrepareArgs => prepare_entry [];
}
