//! Many frames per launch: the `cluda_run1_*` kernels find a whole group of uploaded frames
//! in one cooperative launch, each tile waiting per frame only for the tiles its windows read.
//!
//! Why: one launch per frame (`cluda_step_*`) pays a launch, a ramp-up and a drain per frame,
//! reloads and stores every pixel's pedestal state per frame, and orders records with a ticket
//! and a decoupled look-back that chain a frame's tiles one after another. Here the grid stays
//! resident: one block per tile of 256 pixels, and the host launches only when every block
//! fits on the device at once (`cuLaunchCooperativeKernel`), so no wait below can deadlock.
//! Thread `tid` of block `tile` owns pixel `tile * 256 + tid` for the whole launch and keeps
//! its pedestal state (sums, baseline, threshold, frozen std, raw sample) for the whole
//! launch: it loads it once and stores the sums once at the end. Where it keeps it between
//! uses is the kernel's `SHARED` parameter: in registers, or (the F64 9x9 kernel) in shared
//! memory, loaded before each use and stored after it, so that no register holds it across
//! the waits, the reduction and the records (measured on the H200: 9x9 F64 kernel 9.88 ->
//! 9.01 us/frame; F32 9x9 opt10 8.28 -> 8.58, so F32 keeps registers; see
//! bench-results/2026-12-02-h200-kernel/).
//!
//! - Prologue: every pixel prepares frame 0 (corrected value into plane 0, threshold); the
//!   tile publishes progress 1 (its plane of frame 0 is written).
//! - Iteration k first waits until every tile whose pixels this tile's windows reach (its
//!   *neighbours*: `r` rows and `r` pixels either way) has progress k+1, and until all tiles
//!   have counted their centres of frame k-2 (warp 0 polls, each lane ends with an acquire
//!   load of its flag, and the block's barrier hands that on). Then every pixel classifies
//!   frame k from plane `k % 5`, pushes its own sums when quiet, and stores its corrected
//!   value of frame k+1 into plane `(k+1) % 5` from the sums it has just updated and the
//!   raw sample it loaded one iteration ahead (iteration k loads frame k+2's, with all
//!   tiles' counts of frame k-2, so no load from device memory is on the path between
//!   frames). The block meets
//!   once (a reduction through shared memory) and the tile at once publishes progress k+2:
//!   everything on the path from one frame's planes to the next's comes before that, and
//!   everything else after it. The reduction gives this frame's centres per warp (each
//!   centre's place within its tile) and frame k-2's centres before this tile and in all;
//!   the tile stores its count of frame k with one arrival for frame k, each pixel computes
//!   its threshold for frame k+1, and the records of frame k-2 go to `running total +
//!   earlier tiles + place in tile`: the row-major order of centres, without a ticket or a
//!   look-back. Two extra iterations write the last two frames' records.
//! - Nothing is overwritten while someone may read it. A tile overwrites plane slot
//!   `(k+3) % 5` (frame k-2's) in iteration k+2, after its neighbours reached progress k+3,
//!   i.e. after they finished iteration k, records of frame k-2 included. It rewrites count
//!   slot `k % 4` in iteration k+4, after all tiles counted frame k+2, i.e. after they finished
//!   the loads of iteration k+2, which read frame k's counts. A slot's arrival counter cannot
//!   reach frame k's target early: no tile arrives for frame k+4 before all have for k+2.
//! - The grid barrier this replaced made every tile wait for the slowest one every frame;
//!   here a tile waits for a few neighbours, and for the slowest tile only two frames late.
//!
//! No pixel reads another pixel's pedestal sums, and every value a pixel reads from another
//! pixel (window values, tile counts) was published (release at GPU scope) before a flag the
//! reader has seen (then acquire), so the result is the CPU finder's, bit for bit and on
//! every run.

use core::arch::nvptx;

use super::frame::{BLOCK, Geometry, WARPS, window_stats};
use super::prepare::{corrected_value, threshold_value};
use super::prims::{
    ballot, ld_shared_u32, ld_shared_u64, shfl_idx, st_shared_u32, st_shared_u64, warp_sum,
};
use crate::args::RunArgs;
use crate::classify::{PixelClass, classify};
use crate::layout::RUN_SCRATCH_BYTES;
use crate::pedestal::push_ready;
use crate::real::Real;

/// Counts this block's arrival at `counter` (thread 0 only acts) after releasing, at GPU
/// scope, every write the block made before: the block must have met at `bar.sync` since its
/// last write that other blocks read (thread 0's own later writes are covered by its
/// release).
#[inline(always)]
unsafe fn arrive(counter: *mut u32, tid: u32) {
    if tid == 0 {
        // SAFETY: `counter` is a word of the work area (the caller's contract); a fence and an
        // atomic add.
        unsafe {
            core::arch::asm!(
                "fence.acq_rel.gpu;",
                "red.relaxed.gpu.global.add.u32 [{c}], 1;",
                c = in(reg64) counter,
            );
        }
    }
}

pub(crate) use crate::layout::{COUNT_SLOTS, LAG, PLANES, WORK_HEAD};

/// Scratch words per warp and frame parity: the reduction's three values.
const SCRATCH_PER_WARP: usize = crate::layout::RUN_SCRATCH_PER_WARP;

/// Everything one `run` launch reads and writes.
#[derive(Clone, Copy)]
pub(crate) struct Run<R> {
    /// `n` frames, one after another.
    pub frames: *const u16,
    pub n: u32,
    pub base: *const R,
    pub a: *mut R,
    pub b: *mut R,
    pub frozen_std: *const R,
    /// [`PLANES`] zero-padded planes of corrected values, `plane_len` elements apart.
    pub planes: *mut R,
    pub plane_len: u32,
    /// The work area: [`COUNT_SLOTS`] arrival counters (word `32 * s`), then from word
    /// [`WORK_HEAD`] one progress flag per tile (both zeroed by the host before the launch),
    /// then [`COUNT_SLOTS`] slots of one count per tile.
    pub work: *mut u32,
    pub g: Geometry<R>,
    pub r: u32,
    pub n_sigma: R,
    pub live: bool,
    /// Clusters already in the record buffer before this launch's first frame.
    pub base_in: *const u32,
    /// `count_out[k]` = clusters in the buffer after frame k (running total).
    pub count_out: *mut u32,
    pub records: *mut u32,
    /// Records the buffer has room for; records past it are counted but not written.
    pub room: u32,
}

impl<R: Real> Run<R> {
    #[inline(always)]
    fn plane(&self, k: u32) -> *mut R {
        self.planes
            .wrapping_add((k % PLANES) as usize * self.plane_len as usize)
    }

    /// Arrival counter of the count slot of frame `k`.
    #[inline(always)]
    fn arrivals(&self, k: u32) -> *mut u32 {
        self.work.wrapping_add(32 * (k % COUNT_SLOTS) as usize)
    }

    /// Progress flag of tile `t`: 1 + the last frame whose plane the tile has written.
    #[inline(always)]
    fn progress(&self, t: u32) -> *mut u32 {
        self.work.wrapping_add((WORK_HEAD + t) as usize)
    }

    /// The per-tile counts of frame `k`.
    #[inline(always)]
    fn counts(&self, k: u32) -> *mut u32 {
        let tiles = self.g.tiles as usize;
        self.work
            .wrapping_add(WORK_HEAD as usize + tiles + (k % COUNT_SLOTS) as usize * tiles)
    }

    #[inline(always)]
    fn frame(&self, k: u32) -> *const u16 {
        self.frames
            .wrapping_add(k as usize * self.g.pixels as usize)
    }
}

/// Waits until `*flag` has reached `target` (wrapping compare, so that a counter can run
/// through 2^32). Relaxed GPU-scope polls; [`wait_acquire`] adds the acquire.
#[inline(always)]
unsafe fn wait_until(flag: *const u32, target: u32) {
    loop {
        let v: u32;
        // SAFETY: `flag` is a word of the work area (the caller's contract); a relaxed load.
        unsafe {
            core::arch::asm!(
                "ld.relaxed.gpu.global.u32 {v}, [{c}];",
                v = out(reg32) v,
                c = in(reg64) flag,
            );
        }
        if v.wrapping_sub(target) as i32 >= 0 {
            break;
        }
    }
}

/// As [`wait_until`], then one acquire load of `flag` at GPU scope: with the block's barrier
/// after it, every later read of the block comes after the writes the flag's writer released
/// (and the acquire drops stale lines from this SM's L1), with no fence. On the H200 a fence
/// after the polls cost more than 0.3 us per frame on the path every frame waits through
/// (bench-results/2026-12-02-h200-waits).
#[inline(always)]
unsafe fn wait_acquire(flag: *const u32, target: u32) {
    // SAFETY: as `wait_until`; an acquire load of the same word.
    unsafe {
        wait_until(flag, target);
        core::arch::asm!(
            "ld.acquire.gpu.global.u32 {v}, [{c}];",
            v = out(reg32) _,
            c = in(reg64) flag,
        );
    }
}

/// Publishes this block's progress (thread 0 only; the block has met at `bar.sync` since
/// its last write that other blocks read): releases every such write at GPU scope, then sets
/// the tile's progress flag to `frames`.
#[inline(always)]
unsafe fn publish(progress: *mut u32, frames: u32) {
    // SAFETY: `progress` is this tile's flag in the work area (the caller's contract).
    unsafe {
        core::arch::asm!(
            "fence.acq_rel.gpu;",
            "st.relaxed.gpu.global.u32 [{p}], {f};",
            p = in(reg64) progress,
            f = in(reg32) frames,
        );
    }
}

/// State of one pixel a thread owns for the whole launch (in registers, or between uses in
/// shared memory: [`StateSlots`]).
#[derive(Clone, Copy)]
struct Pixel<R> {
    p: u32,
    inside: bool,
    a: R,
    b: R,
    base: R,
    t: R,
    fstd: R,
    /// Raw sample of the frame being classified.
    raw: u16,
}

/// A centre whose record is still to be written: whether the pixel was a centre of that
/// frame, and its place among its tile's centres.
#[derive(Clone, Copy, Default)]
struct Pending {
    centre: bool,
    place: u32,
}

/// Stores the corrected value of `px` for raw sample `x` into `plane` (what other tiles wait
/// for) and keeps `x` for the pedestal update.
#[inline(always)]
unsafe fn store_corrected<R: Real>(args: &Run<R>, px: &mut Pixel<R>, x: u16, plane: *mut R) {
    let g = &args.g;
    let y = px.p / g.cols;
    let col = px.p - y * g.cols;
    let c = corrected_value(x, px.base, px.a, g.inv);
    // SAFETY: `px.p` is a pixel of the frame and `plane` a padded plane of the launch's
    // geometry, so the index lies inside the plane.
    unsafe { *plane.add(((y + args.r) * g.stride + col + args.r) as usize) = c };
    px.raw = x;
}

/// The threshold of `px` from its current state (only this thread reads it, so it is
/// computed after the corrected value is published).
#[inline(always)]
fn update_threshold<R: Real>(args: &Run<R>, px: &mut Pixel<R>) {
    let fstd = px.fstd;
    px.t = threshold_value(px.a, px.b, || fstd, args.g.inv, args.n_sigma, args.live);
}

/// Counts of one frame's tiles (slot `counts`) summed by this thread over `u = tid,
/// tid + 256, ..`: in all, and before tile `tile`. Loads four words per round before adding,
/// so the loads overlap.
#[inline(always)]
unsafe fn partial_counts(counts: *const u32, tiles: u32, tid: u32, tile: u32) -> (u32, u32) {
    let (mut all, mut before) = (0u32, 0u32);
    let mut u = tid;
    while u < tiles {
        let mut c = [0u32; 4];
        for (i, ci) in c.iter_mut().enumerate() {
            let v = u + i as u32 * BLOCK;
            if v < tiles {
                // SAFETY: `v < tiles`, and `counts` holds one count per tile (the caller's contract).
                *ci = unsafe { *counts.add(v as usize) };
            }
        }
        for (i, ci) in c.iter().enumerate() {
            let v = u + i as u32 * BLOCK;
            all = all.wrapping_add(*ci);
            if v < tile {
                before = before.wrapping_add(*ci);
            }
        }
        u += 4 * BLOCK;
    }
    (all, before)
}

/// Writes the records of the warp's centres (`dest < room`; `u32::MAX` for none) one after
/// another, all 32 lanes on each: its position, then its window's corrected values from
/// plane `c`, row-major, rounded half away from zero (the words of `write_record`, which
/// one lane alone would take `S * S` roundings in a row for). All 32 lanes must call.
#[inline(always)]
unsafe fn write_records_warp<R: Real, const S: usize>(
    c: *const R,
    g: &Geometry<R>,
    p: u32,
    dest: u32,
    args: &Run<R>,
    lane: u32,
) {
    // SAFETY: as `window_stats` for the reads; records are written only below `args.room`
    // (the ballot), and every lane of the warp runs this (the caller's contract).
    unsafe {
        let mut todo = ballot(dest < args.room);
        while todo != 0 {
            let src = todo.trailing_zeros();
            todo &= todo - 1;
            let (d, q) = (shfl_idx(dest, src), shfl_idx(p, src));
            let y = q / g.cols;
            let x = q - y * g.cols;
            let first = y as usize * g.stride as usize + x as usize;
            let out = args.records.add(d as usize * (1 + S * S));
            let mut w = lane as usize;
            while w <= S * S {
                *out.add(w) = if w == 0 {
                    x | y << 16
                } else {
                    let (dy, dx) = ((w - 1) / S, (w - 1) % S);
                    (*c.add(first + dy * g.stride as usize + dx)).round_half_away() as u32
                };
                w += 32;
            }
        }
    }
}

/// Where a thread keeps its pixel's state between uses when the kernel's `SHARED` is set:
/// one 8-byte slot per value and thread in shared memory, `(slot * BLOCK + tid) * 8` bytes
/// after the reduction's scratch (consecutive threads, consecutive slots: no bank conflicts
/// beyond the two wavefronts of a warp's 8-byte access).
#[derive(Clone, Copy)]
struct StateSlots {
    at: u64,
}

/// Values of the shared state of a `SHARED` run kernel: `a`, `b`, baseline, frozen std,
/// threshold.
const STATE_SLOTS: u64 = 5;

/// Bytes of a run kernel's shared array: the reduction's scratch, then (with `SHARED`) the state.
pub(crate) const fn run_shared_bytes(shared: bool) -> usize {
    if shared {
        (STATE_OFFSET + STATE_SLOTS * BLOCK as u64 * 8) as usize
    } else {
        RUN_SCRATCH_BYTES
    }
}

/// Bytes of the reduction's scratch before the state (rounded up to keep the state aligned).
const STATE_OFFSET: u64 = 256;
const _: () = assert!(RUN_SCRATCH_BYTES as u64 <= STATE_OFFSET);

const SLOT_A: u64 = 0;
const SLOT_B: u64 = 1;
const SLOT_BASE: u64 = 2;
const SLOT_FSTD: u64 = 3;
const SLOT_T: u64 = 4;

impl StateSlots {
    /// The slots of thread `tid` in the shared array at window address `scratch`.
    #[inline(always)]
    fn new(scratch: u64, tid: u32) -> Self {
        Self {
            at: scratch + STATE_OFFSET + tid as u64 * 8,
        }
    }

    #[inline(always)]
    fn addr(self, slot: u64) -> u64 {
        self.at + slot * BLOCK as u64 * 8
    }

    /// Loads value `slot`.
    #[inline(always)]
    unsafe fn get<R: Real>(self, slot: u64) -> R {
        // SAFETY: `slot` is one of this thread's slots in the shared state area (the caller's
        // contract), aligned for `R`.
        unsafe {
            if size_of::<R>() == 8 {
                let v = ld_shared_u64(self.addr(slot));
                core::mem::transmute_copy::<u64, R>(&v)
            } else {
                let v = ld_shared_u32(self.addr(slot));
                core::mem::transmute_copy::<u32, R>(&v)
            }
        }
    }

    /// Stores `v` as value `slot`.
    #[inline(always)]
    unsafe fn set<R: Real>(self, slot: u64, v: R) {
        // SAFETY: as `get`.
        unsafe {
            if size_of::<R>() == 8 {
                st_shared_u64(self.addr(slot), core::mem::transmute_copy::<R, u64>(&v));
            } else {
                st_shared_u32(self.addr(slot), core::mem::transmute_copy::<R, u32>(&v));
            }
        }
    }
}

/// The `run` kernel body for window side `S` (see the module docs); `scratch` is the
/// shared-window address of [`run_shared_bytes`]`(SHARED)` bytes; with `SHARED` the pixel's
/// state lives there between uses ([`StateSlots`]). Block `b` owns tile `b`;
/// the grid must be exactly one block per tile, all resident at once.
#[inline(always)]
pub(crate) unsafe fn run_frames<R: Real, const S: usize, const SHARED: bool>(
    args: &Run<R>,
    scratch: u64,
) {
    // SAFETY: the launch's contract (the run kernel docs): one block per tile, all resident,
    // the work area's counters and flags zeroed, every pointer covering the geometry and `n`
    // frames, and `scratch` the block's shared scratch.
    unsafe {
        let tid = nvptx::_thread_idx_x() as u32;
        let tile = nvptx::_block_idx_x() as u32;
        let (warp, lane) = (tid / 32, tid % 32);
        let g = args.g;
        let slots = StateSlots::new(scratch, tid);
        if args.n == 0 || tile >= g.tiles {
            return;
        }
        // The tiles whose pixels this tile's windows read, and which read this tile's.
        let reach = args.r * g.cols + args.r;
        let first_tile = (tile * BLOCK).saturating_sub(reach) / BLOCK;
        let last_tile = ((tile * BLOCK + BLOCK - 1 + reach) / BLOCK).min(g.tiles - 1);
        // Load the state and prepare frame 0.
        let p = tile * BLOCK + tid;
        // The raw sample of the frame after the one being classified, loaded one iteration
        // ahead so that its load from device memory is off the path between frames.
        let mut raw_ahead = 0u16;
        let mut px = Pixel {
            p,
            inside: p < g.pixels,
            a: R::ZERO,
            b: R::ZERO,
            base: R::ZERO,
            t: R::ZERO,
            fstd: R::ZERO,
            raw: 0,
        };
        if px.inside {
            let i = p as usize;
            px.a = *args.a.add(i);
            px.b = *args.b.add(i);
            px.base = *args.base.add(i);
            if !args.live {
                px.fstd = *args.frozen_std.add(i);
            }
            store_corrected(args, &mut px, *args.frame(0).add(i), args.plane(0));
            if args.n > 1 {
                raw_ahead = *args.frame(1).add(i);
            }
            update_threshold(args, &mut px);
            if SHARED {
                slots.set(SLOT_A, px.a);
                slots.set(SLOT_B, px.b);
                slots.set(SLOT_BASE, px.base);
                slots.set(SLOT_FSTD, px.fstd);
                slots.set(SLOT_T, px.t);
            }
        }
        nvptx::_syncthreads();
        if tid == 0 {
            publish(args.progress(tile), 1);
        }
        let side = R::from_u16(S as u16);
        let mut run = if args.base_in.is_null() {
            0
        } else {
            *args.base_in
        };
        // Centres of frames k-1 and k-2, whose records are still to be written.
        const { assert!(LAG == 2) };
        let (mut pend1, mut pend2) = (Pending::default(), Pending::default());
        // Iteration k classifies frame k (k < n) and writes the records of frame k-2 (k >= 2).
        for k in 0..args.n + LAG {
            let classify_now = k < args.n;
            let write_now = k >= LAG;
            let next = k + 1 < args.n;
            let old = k.wrapping_sub(LAG);
            // Wait: for the planes of frame k of every tile this tile's windows read, and for
            // every tile's counts of frame k-2. Warp 0 polls, one flag per lane (several per
            // lane for frames so wide that more than 32 tiles are in reach), and acquires
            // what each flag published; the barrier hands that on to the whole block.
            if warp == 0 {
                if classify_now {
                    let mut t = first_tile + lane;
                    while t <= last_tile {
                        wait_acquire(args.progress(t), k + 1);
                        t += 32;
                    }
                }
                if write_now && lane == 31 {
                    wait_acquire(
                        args.arrivals(old),
                        (old / COUNT_SLOTS + 1).wrapping_mul(g.tiles),
                    );
                }
            }
            nvptx::_syncthreads();
            // The round of loads: raw sample of frame k+2 (frame k+1's was loaded in the
            // last round), counts of frame k-2, then the window of frame k.
            let raw_next = raw_ahead;
            if px.inside && k + 2 < args.n {
                raw_ahead = *args.frame(k + 2).add(p as usize);
            }
            let older = args.plane(old) as *const R;
            let (all, before) = if write_now {
                partial_counts(args.counts(old), g.tiles, tid, tile)
            } else {
                (0, 0)
            };
            let mut centre = false;
            if classify_now && px.inside {
                if SHARED {
                    px.t = slots.get(SLOT_T);
                }
                let (cp, total, max) = window_stats::<R, S>(args.plane(k) as *const R, &g, p);
                match classify(cp, px.t, total, max, side) {
                    PixelClass::Pedestal => {
                        if SHARED {
                            px.a = slots.get(SLOT_A);
                            px.b = slots.get(SLOT_B);
                            px.base = slots.get(SLOT_BASE);
                        }
                        push_ready(&mut px.a, &mut px.b, px.base, px.raw, g.inv);
                        if SHARED {
                            slots.set(SLOT_A, px.a);
                            slots.set(SLOT_B, px.b);
                        }
                    }
                    PixelClass::Centre => centre = true,
                    PixelClass::Negative | PixelClass::Nothing => {}
                }
                if next {
                    if SHARED {
                        px.a = slots.get(SLOT_A);
                        px.base = slots.get(SLOT_BASE);
                    }
                    store_corrected(args, &mut px, raw_next, args.plane(k + 1));
                }
            }
            // One reduction: per warp the centres of frame k, and per thread the counts of
            // frame k-2 before this tile and in all. Warp sums first (one `redux` each); lane
            // 0 of every warp puts them in shared memory; after the block meets, lane l of
            // every warp reads warp l's and one more `redux` per value sums them (and those of
            // the warps before its own).
            let word = |w: u32, i: usize| {
                scratch
                    + 4 * ((k % 2) as u64 * (WARPS as u64 * SCRATCH_PER_WARP as u64)
                        + w as u64 * SCRATCH_PER_WARP as u64
                        + i as u64)
            };
            let mask = ballot(centre);
            let all = warp_sum(all);
            let before = warp_sum(before);
            if lane == 0 {
                st_shared_u32(word(warp, 0), all);
                st_shared_u32(word(warp, 1), mask.count_ones());
                st_shared_u32(word(warp, 2), before);
            }
            nvptx::_syncthreads();
            // Publish: every plane store of this block came before the meeting.
            if tid == 0 && classify_now {
                publish(args.progress(tile), k + 2);
            }
            let from = lane < WARPS;
            let total_old = warp_sum(if from {
                ld_shared_u32(word(lane, 0))
            } else {
                0
            });
            let n_warp = if from {
                ld_shared_u32(word(lane, 1))
            } else {
                0
            };
            let tile_count = warp_sum(n_warp);
            let woff = warp_sum(if lane < warp { n_warp } else { 0 });
            let earlier = warp_sum(if from {
                ld_shared_u32(word(lane, 2))
            } else {
                0
            });
            // Where this thread's record of frame k-2 goes (u32::MAX: none).
            let dest = if write_now && pend2.centre {
                run.wrapping_add(earlier).wrapping_add(pend2.place)
            } else {
                u32::MAX
            };
            pend2 = pend1;
            pend1 = Pending {
                centre,
                place: woff + (mask & ((1u32 << lane) - 1)).count_ones(),
            };
            // Frame k's count and its arrival, then the threshold of frame k+1.
            if tid == 0 && classify_now {
                *args.counts(k).add(tile as usize) = tile_count;
                arrive(args.arrivals(k), tid);
            }
            if classify_now && next && px.inside {
                if SHARED {
                    px.a = slots.get(SLOT_A);
                    px.b = slots.get(SLOT_B);
                    px.fstd = slots.get(SLOT_FSTD);
                }
                update_threshold(args, &mut px);
                if SHARED {
                    slots.set(SLOT_T, px.t);
                }
            }
            // The records of frame k-2.
            if write_now {
                write_records_warp::<R, S>(older, &g, p, dest, args, lane);
                if tile == 0 && tid == 0 {
                    *args.count_out.add(old as usize) = run.wrapping_add(total_old);
                }
                run = run.wrapping_add(total_old);
            }
        }
        if px.inside {
            if SHARED {
                px.a = slots.get(SLOT_A);
                px.b = slots.get(SLOT_B);
            }
            *args.a.add(p as usize) = px.a;
            *args.b.add(p as usize) = px.b;
        }
    }
}

/// A run kernel whose pixel state stays in registers or, with `SHARED`, in shared memory.
#[inline(always)]
unsafe fn run_kernel<R: Real, const S: usize, const SHARED: bool>(k: RunArgs<R>, scratch: u64) {
    let args = Run {
        frames: k.frames,
        n: k.n,
        base: k.base,
        a: k.a,
        b: k.b,
        frozen_std: k.frozen_std,
        planes: k.planes,
        plane_len: k.plane_len,
        work: k.work,
        g: Geometry {
            cols: k.cols,
            pixels: k.pixels,
            stride: k.stride,
            tiles: k.tiles,
            inv: k.inv,
        },
        r: k.r,
        n_sigma: k.n_sigma,
        live: k.live != 0,
        base_in: k.base_in,
        count_out: k.count_out,
        records: k.records,
        room: k.room,
    };
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { run_frames::<R, S, SHARED>(&args, scratch) }
}

/// A run kernel with the pixel state in registers.
#[inline(always)]
unsafe fn run_entry<R: Real, const S: usize>(k: RunArgs<R>, scratch: u64) {
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { run_kernel::<R, S, false>(k, scratch) }
}

/// A run kernel with the pixel state in shared memory between uses.
#[inline(always)]
unsafe fn run_entry_shared<R: Real, const S: usize>(k: RunArgs<R>, scratch: u64) {
    // SAFETY: the kernel's contract (its arguments as its docs require), passed on.
    unsafe { run_kernel::<R, S, true>(k, scratch) }
}

const REGISTER_STATE_BYTES: usize = run_shared_bytes(false);
const SHARED_STATE_BYTES: usize = run_shared_bytes(true);

crate::finder_kernels! { run; super::entry; run;
    /// Finds `n` consecutive frames in one cooperative launch with a window of side `S` (the
    /// name's last number), one block per tile of 256 pixels: per frame each tile waits only
    /// for the tiles its windows read; records in row-major order after a running total (see
    /// the module docs). The grid must be one block per tile and fit on the device at once;
    /// the work area's counters and flags must be zeroed.
    RunArgs => run_entry [window REGISTER_STATE_BYTES];
}

crate::finder_kernels! { run_shared; super::entry; run;
    /// As the other `cluda_run1_*` kernels, with each pixel's pedestal state in shared memory
    /// between its uses (the module docs say why this one).
    RunArgs => run_entry_shared [window SHARED_STATE_BYTES];
}
