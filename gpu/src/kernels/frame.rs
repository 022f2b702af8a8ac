//! Stage 2 of a frame: classify every pixel, write the frame's clusters in row-major order of
//! their centres, and push the raw value of every quiet pixel into its own pedestal.
//!
//! Reads only the corrected values `c` of neighbours and the pixel's own threshold, both made
//! by `prepare` from the state left by the previous frame; writes only the pixel's own pedestal
//! sums. So every pixel of frame k sees the state of frame k-1 (frame-synchronous, race-free).
//!
//! Order and compaction: block `tile` owns pixels `tile*256 .. tile*256+256` in row-major
//! (linear) order, so tile order is row-major order. A block counts its centres (warp ballots),
//! then finds how many centres all earlier tiles hold by a decoupled look-back over per-tile
//! status words (flag and value in one 64-bit word, published with single volatile stores;
//! the whole block reads 256 predecessors at a time, see [`look_back_block`]), and
//! each centre writes its record at `base + earlier + rank`. Tiles are numbered by a ticket
//! (an atomic counter) in the order blocks start, so a tile only ever waits for tiles that are
//! already running: no deadlock whatever order the hardware schedules blocks in. The result is
//! the same bytes in the same places on every run: deterministic.
//!
//! Window reads are plain global loads through L1: a warp reads 32 consecutive `c` of each
//! window row (one or two 128-byte lines, then L1 hits for the other X-1 columns), the `c` plane
//! sits in L2, and the window sum must be one sequential chain per pixel in row-major window
//! order (the order is part of the result), so no neighbour can share a partial sum. A
//! shared-memory copy of the tile's rows would only replace L1 hits by shared-memory hits after
//! an extra staging pass and a barrier; it measured slower.

use core::arch::nvptx;
use core::sync::atomic::{AtomicU32, Ordering};

use super::prepare::{Prepare, prepare_pixel};
use super::prims::{ballot, nanosleep, warp_sum};
use crate::args::{ClassifyArgs, PrepareArgs, StepArgs};
use crate::classify::{PixelClass, classify};
use crate::layout::CLASSIFY_SCRATCH_BYTES;
use crate::lookback::{AGGREGATE, FLAGS, INCLUSIVE};
use crate::pedestal::push_ready;
use crate::real::Real;

pub(crate) use crate::layout::{BLOCK, WARPS};

/// Publishes tile `tile`'s own count `sum` in `status[tile]` (inclusive for tile 0, whose
/// count is its prefix); thread 0 only.
#[inline(always)]
unsafe fn publish(status: *mut u64, tile: u32, sum: u32) {
    let flag = if tile == 0 { INCLUSIVE } else { AGGREGATE };
    // SAFETY: `tile` is a tile of this launch, and `status` has a word per tile (the caller's
    // contract).
    unsafe { core::ptr::write_volatile(status.add(tile as usize), flag | sum as u64) };
}

/// Decoupled look-back by the whole block (every thread must call; `tile`'s aggregate
/// `sum` already published by [`publish`]): returns the clusters of all earlier tiles and
/// publishes the inclusive count. Thread `i` reads tile `end - 1 - i` (nearest first), so one
/// round covers `BLOCK` predecessors: a 400x400 frame (625 tiles) needs at most 3 rounds,
/// where the former one-warp window (32 tiles) walked up to 20 dependent L2 round trips. A
/// thread spins only on its own word until it is published (with a back-off), so a round is
/// one load per thread when the predecessors are done. Tiles before tile 0 read as
/// "inclusive 0". `scratch` holds 16 words at `[16..32)`.
#[inline(always)]
unsafe fn look_back_block(
    status: *mut u64,
    tile: u32,
    sum: u32,
    tid: u32,
    scratch: *mut u32,
) -> u32 {
    if tile == 0 {
        return 0;
    }
    let (warp, lane) = (tid / 32, tid % 32);
    let mut earlier = 0u32;
    let mut end = tile as i64;
    // SAFETY: the caller's contract: `status` has a word per tile before `tile`, published or
    // to be published by running tiles (ticket order), and `scratch` is the block's scratch.
    unsafe {
        loop {
            let j = end - 1 - tid as i64;
            let mut w = INCLUSIVE;
            if j >= 0 {
                let at = status.add(j as usize);
                w = core::ptr::read_volatile(at);
                while w & FLAGS == 0 {
                    nanosleep(32);
                    w = core::ptr::read_volatile(at);
                }
            }
            // Lanes up to the nearest inclusive tile (the lowest such lane) count; past it,
            // nothing of this warp or the following (older) ones.
            let inclusive = ballot(w & FLAGS == INCLUSIVE);
            let upto = if inclusive != 0 {
                inclusive.trailing_zeros()
            } else {
                31
            };
            let part = if lane <= upto { w as u32 } else { 0 };
            let s = warp_sum(part);
            if lane == 0 {
                *scratch.add(16 + warp as usize) = s;
                *scratch.add(24 + warp as usize) = (inclusive != 0) as u32;
            }
            nvptx::_syncthreads();
            let mut done = false;
            for k in 0..WARPS as usize {
                earlier = earlier.wrapping_add(*scratch.add(16 + k));
                if *scratch.add(24 + k) != 0 {
                    done = true;
                    break;
                }
            }
            nvptx::_syncthreads();
            if done {
                break;
            }
            end -= BLOCK as i64;
        }
        if tid == 0 {
            core::ptr::write_volatile(
                status.add(tile as usize),
                INCLUSIVE | earlier.wrapping_add(sum) as u64,
            );
        }
    }
    earlier
}

/// Parameters of one classify launch that are not per-pixel arrays.
#[derive(Clone, Copy)]
pub(crate) struct Geometry<R> {
    pub cols: u32,
    pub pixels: u32,
    pub stride: u32,
    pub tiles: u32,
    pub inv: R,
}

/// Where the frame's clusters go: records at `records + (base + i) * words` for cluster
/// `i < room - base`, with `base = *base_in` (0 when null); `*count_out = base + found`.
#[derive(Clone, Copy)]
pub(crate) struct Output {
    pub status: *mut u64,
    pub base_in: *const u32,
    pub count_out: *mut u32,
    pub records: *mut u32,
    pub room: u32,
}

/// The classify kernel body for window side `S`; `scratch` is 32 words of shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn classify_frame<R: Real, const S: usize>(
    frame: *const u16,
    base: *const R,
    a: *mut R,
    b: *mut R,
    c: *const R,
    t: *const R,
    g: Geometry<R>,
    out: Output,
    scratch: *mut u32,
    next: Option<Prepare<R>>,
) {
    // SAFETY: the launch's contract (the classify/step kernel docs): every pointer covers the
    // frame's geometry, `scratch` is the block's 128-byte scratch, and every thread of the block
    // runs this (the barriers and warp votes below).
    unsafe {
        let tid = nvptx::_thread_idx_x() as u32;
        let (warp, lane) = (tid / 32, tid % 32);
        // scratch: [0..8) per-warp counts, [8] tile, [16..32) the look-back's.
        if tid == 0 {
            let ticket = AtomicU32::from_ptr(out.status as *mut u32);
            *scratch.add(8) = ticket.fetch_add(1, Ordering::Relaxed);
        }
        nvptx::_syncthreads();
        let tile = *scratch.add(8);
        let p = tile * BLOCK + tid;
        let centre = p < g.pixels && classify_pixel::<R, S>(c, frame, base, a, b, t, &g, p);
        let mask = ballot(centre);
        let rank = (mask & ((1u32 << lane) - 1)).count_ones();
        if lane == 0 {
            *scratch.add(warp as usize) = mask.count_ones();
        }
        nvptx::_syncthreads();
        // Every thread: the tile's count and its warp's offset within the tile.
        let (mut sum, mut woff) = (0u32, 0u32);
        for w in 0..WARPS {
            let n = *scratch.add(w as usize);
            if w < warp {
                woff += n;
            }
            sum += n;
        }
        let status = out.status.add(1);
        if tid == 0 {
            publish(status, tile, sum);
        }
        if let Some(n) = &next {
            // The next frame's prepare for this pixel, from the sums just updated (only this
            // thread writes them), while earlier tiles publish their counts.
            if p < n.k.n_status {
                core::ptr::write_volatile(n.k.status.add(p as usize), 0);
            }
            if p < g.pixels {
                let pi = p as usize;
                prepare_pixel(n, pi, *a.add(pi), *b.add(pi));
            }
        }
        let earlier = look_back_block(status, tile, sum, tid, scratch);
        let base0 = if out.base_in.is_null() {
            0
        } else {
            *out.base_in
        };
        if tid == 0 && tile + 1 == g.tiles {
            *out.count_out = base0 + earlier + sum;
        }
        if centre {
            let idx = base0 + earlier + woff + rank;
            if idx < out.room {
                write_record::<R, S>(c, &g, p, out.records.add(idx as usize * (1 + S * S)));
            }
        }
    }
}

/// Classifies in-frame pixel `p` from its window in plane `c` and its threshold, and pushes its
/// raw value into its own pedestal when it is quiet; returns whether `p` is a cluster centre.
/// The same sum and max loop as the CPU finder: row-major from the window's top-left, the
/// max starting at the top-left value.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn classify_pixel<R: Real, const S: usize>(
    c: *const R,
    frame: *const u16,
    base: *const R,
    a: *mut R,
    b: *mut R,
    t: *const R,
    g: &Geometry<R>,
    p: u32,
) -> bool {
    // SAFETY: `p` is a pixel of the frame and the pointers cover its geometry (the caller's
    // contract), so every index below is in bounds.
    unsafe {
        let (cp, total, max) = window_stats::<R, S>(c, g, p);
        let side = R::from_u16(S as u16);
        let pi = p as usize;
        match classify(cp, *t.add(pi), total, max, side) {
            PixelClass::Pedestal => {
                push_ready(
                    &mut *a.add(pi),
                    &mut *b.add(pi),
                    *base.add(pi),
                    *frame.add(pi),
                    g.inv,
                );
                false
            }
            PixelClass::Centre => true,
            PixelClass::Negative | PixelClass::Nothing => false,
        }
    }
}

/// Pixel `p`'s own corrected value (from plane `c`), its window's sum and its window's maximum. The sum is the
/// definition's: row-major from the window's top-left. The maximum takes one `max`
/// instruction per value ([`Real::max_cmp`]); it is only compared, so it decides exactly as
/// the CPU finder's.
#[inline(always)]
pub(crate) unsafe fn window_stats<R: Real, const S: usize>(
    c: *const R,
    g: &Geometry<R>,
    p: u32,
) -> (R, R, R) {
    // SAFETY: `p` is a pixel of the frame and `c` its padded plane (the caller's contract):
    // every window element read lies inside the plane.
    unsafe {
        let stride = g.stride as usize;
        let y = p / g.cols;
        let x = p - y * g.cols;
        // Top-left of the window in the padded plane.
        let first = y as usize * stride + x as usize;
        let mut max = *c.add(first);
        let mut total = R::ZERO;
        for dy in 0..S {
            let row = first + dy * stride;
            for dx in 0..S {
                let v = *c.add(row + dx);
                total = total + v;
                max = max.max_cmp(v);
            }
        }
        let r = S / 2;
        (*c.add(first + r * stride + r), total, max)
    }
}

/// Writes the record of centre `p` (its position, then its window's corrected values from
/// plane `c`, row-major, rounded half away from zero) at `rec`.
#[inline(always)]
pub(crate) unsafe fn write_record<R: Real, const S: usize>(
    c: *const R,
    g: &Geometry<R>,
    p: u32,
    rec: *mut u32,
) {
    // SAFETY: as in `window_stats`; `rec` has room for one record (the caller's contract).
    unsafe {
        let stride = g.stride as usize;
        let y = p / g.cols;
        let x = p - y * g.cols;
        let first = y as usize * stride + x as usize;
        *rec = x | y << 16;
        let mut k = 1;
        for dy in 0..S {
            let row = c.add(first + dy * stride);
            for dx in 0..S {
                *rec.add(k) = (*row.add(dx)).round_half_away() as u32;
                k += 1;
            }
        }
    }
}

/// A classify kernel (no next frame).
#[inline(always)]
unsafe fn classify_entry<R: Real, const S: usize>(k: ClassifyArgs<R>, scratch: u64) {
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { classify_then::<R, S>(k, scratch, None) }
}

/// A step kernel: classify this frame, then prepare the next (`next_frame`, if not null) into
/// the other plane.
#[inline(always)]
unsafe fn step_entry<R: Real, const S: usize>(k: StepArgs<R>, scratch: u64) {
    let (k, n) = k.split();
    let next = (!n.next_frame.is_null()).then_some(Prepare::new(PrepareArgs {
        frame: n.next_frame,
        base: k.base,
        a: k.a.cast_const(),
        b: k.b.cast_const(),
        frozen_std: n.frozen_std,
        cols: k.cols,
        pixels: k.pixels,
        stride: k.stride,
        r: n.r,
        inv: k.inv,
        n_sigma: n.n_sigma,
        live: n.live,
        c_plane: n.c_next,
        t_out: n.t_next,
        status: n.status_next,
        n_status: k.tiles + 1,
    }));
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { classify_then::<R, S>(k, scratch, next) }
}

/// A classify or step kernel's body: [`classify_frame`] with the launch's arguments, then
/// `next` prepared (the step kernels).
#[inline(always)]
unsafe fn classify_then<R: Real, const S: usize>(
    k: ClassifyArgs<R>,
    scratch: u64,
    next: Option<Prepare<R>>,
) {
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe {
        classify_frame::<R, S>(
            k.frame,
            k.base,
            k.a,
            k.b,
            k.c,
            k.t,
            Geometry {
                cols: k.cols,
                pixels: k.pixels,
                stride: k.stride,
                tiles: k.tiles,
                inv: k.inv,
            },
            Output {
                status: k.status,
                base_in: k.base_in,
                count_out: k.count_out,
                records: k.records,
                room: k.room,
            },
            scratch as *mut u32,
            next,
        )
    }
}

crate::finder_kernels! { classify; super::entry; classify;
    /// Classifies one frame with a window of side `S` (the name's last number): records in
    /// row-major order, pedestal update of quiet pixels (see the module docs).
    ClassifyArgs => classify_entry [generic CLASSIFY_SCRATCH_BYTES];
}

crate::finder_kernels! { step; super::entry; step;
    /// One launch per frame: classifies this frame as the `cluda_classify_` kernel of the
    /// same type and size does, then prepares the next frame (`next_frame`, if not null)
    /// into the other plane (`c_next`, `t_next`, look-back words `status_next` reset).
    /// Each pixel's next prepare reads only its own sums, which only its own thread has
    /// just updated, so the update stays frame-synchronous (see the module docs).
    StepArgs => step_entry [generic CLASSIFY_SCRATCH_BYTES];
}
