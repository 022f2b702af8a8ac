//! Many frames per launch: the `cluda_run{T}_*` kernels find a whole group of uploaded frames
//! in one cooperative launch, with one grid-wide barrier per frame instead of one launch per
//! frame.
//!
//! Why: one launch per frame (`cluda_step_*`) pays a launch, a ramp-up and a drain per frame,
//! reloads and stores every pixel's pedestal state per frame, and orders records with a ticket
//! and a decoupled look-back that chain a frame's tiles one after another. Here the grid stays
//! resident (the host launches at most as many blocks as fit on the device at once, through
//! `cuLaunchCooperativeKernel`, so the barrier cannot deadlock). Thread `tid` of block `blk`
//! owns pixel `tile * 256 + tid` of the `T` tiles `blk, blk + grid, ..` for the whole launch
//! and keeps their pedestal state (sums, baseline, threshold, frozen std, raw sample) in
//! registers: it loads them once and stores the sums once at the end.
//!
//! - Prologue: every pixel prepares frame 0 (corrected value into plane 0, threshold).
//! - Iteration k: every pixel classifies frame k from plane `k % 4` (its neighbours' values),
//!   pushes its own sums when quiet, and prepares frame k+1 into plane `(k+1) % 4` from the
//!   sums it has just updated and the raw sample it loaded one iteration ahead. In the same
//!   round of loads it reads the tile counts of frame k-1 and, for a 3x3 centre of frame k-1,
//!   that record's values from plane `(k-1) % 4`. One block-wide reduction then gives the
//!   centres of this frame per warp (and so each centre's place within its tile) and the
//!   centres of frame k-1 before each of the block's tiles and in all. The block stores frame
//!   k's tile counts and arrives at the grid barrier; while the others arrive it writes the
//!   records of frame k-1 at `running total + earlier tiles + place in tile` (the row-major
//!   order of centres, the step kernel's order, without a ticket or look-back), then waits.
//! - Plane `(k-1) % 4` stays intact until this block's records of frame k-1 are written: the
//!   fastest other block may already be in iteration k+1, which writes plane `(k+2) % 4`, and
//!   nobody can start iteration k+2 (which writes plane `(k+3) % 4 = (k-1) % 4`) before this
//!   block arrives at the barrier that ends iteration k+1. Four planes, two slots of tile
//!   counts (those of frame k are read in iteration k+1 and rewritten in iteration k+2).
//!
//! No pixel reads another pixel's pedestal sums, and every value a pixel reads from another
//! pixel (window values, tile counts) was written before a barrier the reader has passed, so
//! the result is the CPU finder's, bit for bit and on every run.

use core::arch::nvptx;

use super::classify::{BLOCK, Geometry, GlobalWindow, ballot, window_stats, write_record};
use super::prepare::prepare_values;
use crate::classify::{PixelClass, classify};
use crate::pedestal::push_ready;
use crate::real::Real;

/// Warps per block.
const WARPS: u32 = BLOCK / 32;

/// A grid-wide barrier, first half: the block meets at `bar.sync` and thread 0 counts its
/// arrival at `counter` after releasing (at GPU scope) every write the block made before.
/// Every thread of every block must call it, then [`barrier_wait`]; in between a block may
/// do work that reads nothing other blocks write in this phase.
#[inline(always)]
unsafe fn barrier_arrive(counter: *mut u32, tid: u32) {
    unsafe {
        nvptx::_syncthreads();
        barrier_arrive_met(counter, tid);
    }
}

/// [`barrier_arrive`] for a block that has met at `bar.sync` since its last write that
/// other blocks read (thread 0's own later writes are covered by its release).
#[inline(always)]
unsafe fn barrier_arrive_met(counter: *mut u32, tid: u32) {
    if tid == 0 {
        unsafe {
            core::arch::asm!(
                "fence.acq_rel.gpu;",
                "red.relaxed.gpu.global.add.u32 [{c}], 1;",
                c = in(reg64) counter,
            );
        }
    }
}

/// The sum of `v` over the warp, in every lane (all 32 lanes must call; sm_80's `redux`).
#[inline(always)]
unsafe fn warp_add(v: u32) -> u32 {
    let s: u32;
    unsafe {
        core::arch::asm!(
            "redux.sync.add.u32 {s}, {v}, 0xffffffff;",
            s = out(reg32) s,
            v = in(reg32) v,
        );
    }
    s
}

/// Loads the word at shared-window address `a`.
#[inline(always)]
unsafe fn ld_shared(a: u64) -> u32 {
    let v: u32;
    unsafe { core::arch::asm!("ld.shared.u32 {v}, [{a}];", v = out(reg32) v, a = in(reg64) a) };
    v
}

/// Stores `v` at shared-window address `a`.
#[inline(always)]
unsafe fn st_shared(a: u64, v: u32) {
    unsafe { core::arch::asm!("st.shared.u32 [{a}], {v};", a = in(reg64) a, v = in(reg32) v) };
}

/// A grid-wide barrier, second half: returns once `target` arrivals in all are counted at
/// `counter` (the n-th barrier of a launch of G blocks waits for `n * G`; the counter starts
/// at 0, zeroed by the host). Thread 0 then acquires the other blocks' writes (which also
/// drops stale lines from this SM's L1 before anyone reads window values again) and the block
/// meets again, so every thread sees every write made before every block's arrival.
/// `NS` > 0 sleeps that many nanoseconds between polls.
#[inline(always)]
unsafe fn barrier_wait<const NS: u32>(counter: *mut u32, target: u32, tid: u32) {
    unsafe {
        if tid == 0 {
            loop {
                let v: u32;
                core::arch::asm!(
                    "ld.relaxed.gpu.global.u32 {v}, [{c}];",
                    v = out(reg32) v,
                    c = in(reg64) counter,
                );
                // Wrapping compare, so that a counter can run through 2^32 arrivals.
                if v.wrapping_sub(target) as i32 >= 0 {
                    break;
                }
                if NS > 0 {
                    core::arch::asm!("nanosleep.u32 {t};", t = in(reg32) NS);
                }
            }
            core::arch::asm!("fence.acq_rel.gpu;");
        }
        nvptx::_syncthreads();
    }
}

/// Both halves of the grid barrier at once.
#[inline(always)]
unsafe fn grid_barrier(counter: *mut u32, target: u32, tid: u32) {
    unsafe {
        barrier_arrive(counter, tid);
        barrier_wait::<0>(counter, target, tid);
    }
}

/// Planes of corrected values a launch cycles through (frame k in plane `k % PLANES`).
pub const PLANES: u32 = 4;

/// Scratch words per warp and frame parity: the reduction's `2 * T + 1` values (`T` <= 4).
const SCRATCH_PER_WARP: usize = 9;

/// Words at the start of the work area before the two slots of tile counts: the barrier
/// counter, alone on its 128-byte line.
pub const WORK_HEAD: u32 = 32;

/// Everything one `run` launch reads and writes.
#[derive(Clone, Copy)]
pub(crate) struct RunArgs<R> {
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
    /// Barrier counter at word 0 (zeroed by the host before the launch), then from word
    /// [`WORK_HEAD`] two slots of one count per tile.
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

impl<R: Real> RunArgs<R> {
    #[inline(always)]
    fn plane(&self, k: u32) -> *mut R {
        self.planes
            .wrapping_add((k % PLANES) as usize * self.plane_len as usize)
    }

    #[inline(always)]
    fn counts(&self, k: u32) -> *mut u32 {
        self.work
            .wrapping_add(WORK_HEAD as usize + (k % 2) as usize * self.g.tiles as usize)
    }

    #[inline(always)]
    fn frame(&self, k: u32) -> *const u16 {
        self.frames
            .wrapping_add(k as usize * self.g.pixels as usize)
    }
}

/// One pixel a thread owns for the whole launch, with its state in registers.
#[derive(Clone, Copy)]
struct Pixel<R> {
    p: u32,
    tile: u32,
    inside: bool,
    a: R,
    b: R,
    base: R,
    t: R,
    fstd: R,
    /// Raw sample of the frame being classified.
    raw: u16,
    /// Centre of the previous frame, and its place among its tile's centres.
    was_centre: bool,
    place: u32,
}

/// Corrected value and threshold of `px` for raw sample `x`, the value stored into `plane`.
#[inline(always)]
unsafe fn prepare_into<R: Real>(args: &RunArgs<R>, px: &mut Pixel<R>, x: u16, plane: *mut R) {
    let g = &args.g;
    let y = px.p / g.cols;
    let col = px.p - y * g.cols;
    let fstd = px.fstd;
    let (c, t) = prepare_values(
        x,
        px.base,
        px.a,
        px.b,
        || fstd,
        g.inv,
        args.n_sigma,
        args.live,
    );
    unsafe { *plane.add(((y + args.r) * g.stride + col + args.r) as usize) = c };
    px.t = t;
    px.raw = x;
}

/// Counts of frame `k-1`'s tiles (slot `counts`) summed by this thread over `u = tid,
/// tid + 256, ..`: in all, and before each of the block's tiles. Loads four words per round
/// before adding, so the loads overlap.
#[inline(always)]
unsafe fn partial_counts<R, const T: usize>(
    counts: *const u32,
    tiles: u32,
    tid: u32,
    px: &[Pixel<R>; T],
) -> (u32, [u32; T]) {
    let (mut all, mut before) = (0u32, [0u32; T]);
    let mut u = tid;
    while u < tiles {
        let mut c = [0u32; 4];
        for (i, ci) in c.iter_mut().enumerate() {
            let v = u + i as u32 * BLOCK;
            if v < tiles {
                *ci = unsafe { *counts.add(v as usize) };
            }
        }
        for (i, ci) in c.iter().enumerate() {
            let v = u + i as u32 * BLOCK;
            all = all.wrapping_add(*ci);
            for j in 0..T {
                if v < px[j].tile {
                    before[j] = before[j].wrapping_add(*ci);
                }
            }
        }
        u += 4 * BLOCK;
    }
    (all, before)
}

/// Values a 3x3 record keeps in registers from the round of loads to the write.
const KEPT: usize = 9;

/// The `run` kernel body for window side `S` and `T` tiles per block (see the module docs);
/// `scratch` is the shared-window address of `2 * WARPS * SCRATCH_PER_WARP` words.
#[inline(always)]
pub(crate) unsafe fn run_frames<R: Real, const S: usize, const T: usize>(
    args: &RunArgs<R>,
    scratch: u64,
) {
    unsafe {
        let tid = nvptx::_thread_idx_x() as u32;
        let (block, grid) = (nvptx::_block_idx_x() as u32, nvptx::_grid_dim_x() as u32);
        let (warp, lane) = (tid / 32, tid % 32);
        let g = args.g;
        let counter = args.work;
        if args.n == 0 {
            return;
        }
        // Load the state and prepare frame 0.
        let mut px = [Pixel {
            p: 0,
            tile: 0,
            inside: false,
            a: R::ZERO,
            b: R::ZERO,
            base: R::ZERO,
            t: R::ZERO,
            fstd: R::ZERO,
            raw: 0,
            was_centre: false,
            place: 0,
        }; T];
        let plane0 = args.plane(0);
        let frame0 = args.frame(0);
        for (j, q) in px.iter_mut().enumerate() {
            q.tile = block + j as u32 * grid;
            q.p = q.tile * BLOCK + tid;
            q.inside = q.tile < g.tiles && q.p < g.pixels;
            if q.inside {
                let i = q.p as usize;
                q.a = *args.a.add(i);
                q.b = *args.b.add(i);
                q.base = *args.base.add(i);
                if !args.live {
                    q.fstd = *args.frozen_std.add(i);
                }
                prepare_into(args, q, *frame0.add(i), plane0);
            }
        }
        let mut barriers = 1u32;
        grid_barrier(counter, grid, tid);
        let side = R::from_u16(S as u16);
        let mut run = if args.base_in.is_null() {
            0
        } else {
            *args.base_in
        };
        // Iteration k classifies frame k (k < n) and writes the records of frame k-1 (k > 0).
        for k in 0..=args.n {
            let classify_now = k < args.n;
            let win = GlobalWindow(args.plane(k) as *const R);
            let next = k + 1 < args.n;
            let frame_next = args.frame(k + 1);
            // The round of loads: raw samples of frame k+1, earlier counts and records of
            // frame k-1, then the windows of frame k.
            let mut raw_next = [0u16; T];
            // A 3x3 record's values join the round of loads; larger ones load when written.
            let mut rec = [[0u32; KEPT]; T];
            let prev = args.plane(k.wrapping_sub(1)) as *const R;
            for j in 0..T {
                if px[j].inside && next {
                    raw_next[j] = *frame_next.add(px[j].p as usize);
                }
                if S * S <= KEPT && k > 0 && px[j].was_centre {
                    let p = px[j].p;
                    let y = p / g.cols;
                    let first = y as usize * g.stride as usize + (p - y * g.cols) as usize;
                    for dy in 0..S {
                        let row = prev.add(first + dy * g.stride as usize);
                        for dx in 0..S {
                            rec[j][dy * S + dx] = (*row.add(dx)).round_half_away() as u32;
                        }
                    }
                }
            }
            let (all, before) = if k > 0 {
                partial_counts(args.counts(k - 1), g.tiles, tid, &px)
            } else {
                (0, [0; T])
            };
            let mut centre = [false; T];
            if classify_now {
                for j in 0..T {
                    let q = &mut px[j];
                    if q.inside {
                        let (cp, total, max) = window_stats::<R, S, _>(&win, &g, q.p);
                        match classify(cp, q.t, total, max, side) {
                            PixelClass::Pedestal => {
                                push_ready(&mut q.a, &mut q.b, q.base, q.raw, g.inv)
                            }
                            PixelClass::Centre => centre[j] = true,
                            PixelClass::Negative | PixelClass::Nothing => {}
                        }
                    }
                }
                if next {
                    let plane = args.plane(k + 1);
                    for j in 0..T {
                        if px[j].inside {
                            prepare_into(args, &mut px[j], raw_next[j], plane);
                        }
                    }
                }
            }
            // One reduction: per warp and tile the centres of frame k, and per thread the
            // counts of frame k-1 before each tile and in all.
            // Warp sums first (one `redux` each); lane 0 of every warp puts them in shared
            // memory; after the block meets, lane l of every warp reads warp l's and one more
            // `redux` per value sums them (and those of the warps before its own).
            let word = |w: u32, i: usize| {
                scratch
                    + 4 * ((k % 2) as u64 * (WARPS as u64 * SCRATCH_PER_WARP as u64)
                        + w as u64 * SCRATCH_PER_WARP as u64
                        + i as u64)
            };
            let mut mask = [0u32; T];
            for j in 0..T {
                mask[j] = ballot(centre[j]);
            }
            let all = warp_add(all);
            let mut before_w = [0u32; T];
            for j in 0..T {
                before_w[j] = warp_add(before[j]);
            }
            if lane == 0 {
                st_shared(word(warp, 0), all);
                for j in 0..T {
                    st_shared(word(warp, 1 + j), mask[j].count_ones());
                    st_shared(word(warp, 1 + T + j), before_w[j]);
                }
            }
            nvptx::_syncthreads();
            let from = lane < WARPS;
            let total_prev = warp_add(if from { ld_shared(word(lane, 0)) } else { 0 });
            let mut tile_count = [0u32; T];
            let mut woff = [0u32; T];
            let mut earlier = [0u32; T];
            for j in 0..T {
                let n = if from {
                    ld_shared(word(lane, 1 + j))
                } else {
                    0
                };
                tile_count[j] = warp_add(n);
                woff[j] = warp_add(if lane < warp { n } else { 0 });
                earlier[j] = warp_add(if from {
                    ld_shared(word(lane, 1 + T + j))
                } else {
                    0
                });
            }
            // Where this thread's records of frame k-1 go (u32::MAX: none).
            let mut dest = [u32::MAX; T];
            for j in 0..T {
                if k > 0 && px[j].was_centre {
                    dest[j] = run.wrapping_add(earlier[j]).wrapping_add(px[j].place);
                }
            }
            let prev_pixel = px.map(|q| q.p);
            if classify_now {
                // Frame k's counts and places, then the arrival: everything other blocks
                // read after the barrier (planes, counts) is written by now.
                let counts = args.counts(k);
                for j in 0..T {
                    let below = (1u32 << lane) - 1;
                    px[j].was_centre = centre[j];
                    px[j].place = woff[j] + (mask[j] & below).count_ones();
                    if tid == 0 && px[j].tile < g.tiles {
                        *counts.add(px[j].tile as usize) = tile_count[j];
                    }
                }
                barriers += 1;
                // The block met at the reduction after its last plane store, and thread 0
                // stored the counts itself: the arrival needs no second meeting.
                barrier_arrive_met(counter, tid);
            }
            // While the other blocks arrive: the records of frame k-1.
            if k > 0 {
                for j in 0..T {
                    if dest[j] < args.room {
                        let p = prev_pixel[j];
                        let out = args.records.add(dest[j] as usize * (1 + S * S));
                        if S * S <= KEPT {
                            let y = p / g.cols;
                            *out = (p - y * g.cols) | y << 16;
                            for i in 0..S * S {
                                *out.add(1 + i) = rec[j][i];
                            }
                        } else {
                            write_record::<R, S>(prev, &g, p, out);
                        }
                    }
                }
                if block == 0 && tid == 0 {
                    *args.count_out.add(k as usize - 1) = run.wrapping_add(total_prev);
                }
                run = run.wrapping_add(total_prev);
            }
            if !classify_now {
                break;
            }
            barrier_wait::<0>(counter, barriers.wrapping_mul(grid), tid);
        }
        for q in &px {
            if q.inside {
                *args.a.add(q.p as usize) = q.a;
                *args.b.add(q.p as usize) = q.b;
            }
        }
    }
}

macro_rules! run_kernel {
    ($name:ident, $t:ty, $s:literal, $tiles:literal) => {
        /// Finds `n` consecutive frames in one cooperative launch with a
        #[doc = concat!(stringify!($s), "x", stringify!($s))]
        /// window in
        #[doc = stringify!($t)]
        /// , each block owning
        #[doc = stringify!($tiles)]
        /// tile(s): one grid barrier per frame, records in row-major order after a running
        /// total (see the module docs). The grid must fit on the device at once and cover
        /// every tile.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            frames: *const u16,
            n: u32,
            base: *const $t,
            a: *mut $t,
            b: *mut $t,
            frozen_std: *const $t,
            planes: *mut $t,
            plane_len: u32,
            work: *mut u32,
            cols: u32,
            pixels: u32,
            stride: u32,
            tiles: u32,
            r: u32,
            inv: $t,
            n_sigma: $t,
            live: u32,
            base_in: *const u32,
            count_out: *mut u32,
            records: *mut u32,
            room: u32,
        ) {
            let scratch: u64;
            unsafe {
                core::arch::asm!(
                    concat!(".shared .align 16 .b8 ", stringify!($name), "_scratch[576];"),
                    concat!("mov.u64 {p}, ", stringify!($name), "_scratch;"),
                    p = out(reg64) scratch,
                );
                let args = RunArgs {
                    frames,
                    n,
                    base,
                    a,
                    b,
                    frozen_std,
                    planes,
                    plane_len,
                    work,
                    g: Geometry { cols, pixels, stride, tiles, inv },
                    r,
                    n_sigma,
                    live: live != 0,
                    base_in,
                    count_out,
                    records,
                    room,
                };
                run_frames::<$t, $s, $tiles>(&args, scratch)
            }
        }
    };
}
macro_rules! run_kernels {
    ($($name:ident $t:ty, $s:literal, $tiles:literal;)*) => {
        $(run_kernel!($name, $t, $s, $tiles);)*
    };
}
run_kernels! {
    cluda_run1_f64_3 f64, 3, 1;
    cluda_run1_f64_5 f64, 5, 1;
    cluda_run1_f64_7 f64, 7, 1;
    cluda_run1_f64_9 f64, 9, 1;
    cluda_run1_f32_3 f32, 3, 1;
    cluda_run1_f32_5 f32, 5, 1;
    cluda_run1_f32_7 f32, 7, 1;
    cluda_run1_f32_9 f32, 9, 1;
}

macro_rules! barrier_probe {
    ($name:ident, $ns:literal) => {
        /// Diagnostic: `n` grid barriers and nothing else (a cooperative launch; tests time
        /// it to see what one barrier costs), polling with a
        #[doc = concat!(stringify!($ns), " ns")]
        /// back-off.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(counter: *mut u32, n: u32) {
            unsafe {
                let tid = nvptx::_thread_idx_x() as u32;
                let grid = nvptx::_grid_dim_x() as u32;
                for i in 1..=n {
                    barrier_arrive(counter, tid);
                    barrier_wait::<$ns>(counter, i.wrapping_mul(grid), tid);
                }
            }
        }
    };
}
barrier_probe!(cluda_barrier_probe_0, 0);
barrier_probe!(cluda_barrier_probe_100, 100);
