//! The arguments of the finder's launches: the frame geometry, the device buffers a frame's
//! kernels read and write (typed: [`DeviceBuf<T>`], and [`RealBuf`] in the real type chosen
//! at run time), and the argument structs of `cluda_gpu::args` filled from them with typed
//! pointers, one field from one source each (the unit tests check it).

use cluda_gpu::args::{ClassifyArgs, DevicePtr, PrepareArgs, RunArgs, StepArgs, StepNext};

use super::buffers::{DeviceBuf, DeviceState};
use super::reals::{DeviceReal, RealBuf};
use crate::cluster::ClusterSize;
use crate::error::Result;

/// Threads per block of the finder's kernels; also the pixels per tile.
pub(crate) const BLOCK: u32 = cluda_gpu::layout::BLOCK;
/// Words before the run kernels' progress flags (one arrival counter per count slot).
const RUN_WORK_HEAD: usize = cluda_gpu::layout::WORK_HEAD as usize;
/// Slots of per-tile counts the run kernels cycle through.
const RUN_COUNT_SLOTS: usize = cluda_gpu::layout::COUNT_SLOTS as usize;
/// Planes of corrected values the run kernels cycle through.
pub(crate) const RUN_PLANES: usize = cluda_gpu::layout::PLANES as usize;

/// Frame geometry shared by both kernels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Columns per frame.
    pub cols: u32,
    /// Pixels per frame.
    pub pixels: u32,
    /// Row stride of the padded plane of corrected values.
    pub stride: u32,
    /// Padding (window radius) of that plane.
    pub r: u32,
    /// Classify tiles per frame.
    pub tiles: u32,
}

impl Geometry {
    /// The geometry of `rows x cols` frames with `size` windows.
    pub fn new(rows: usize, cols: usize, size: ClusterSize) -> Self {
        let r = size.side() / 2;
        let pixels = (rows * cols) as u32;
        Self {
            cols: cols as u32,
            pixels,
            stride: (cols + 2 * r) as u32,
            r: r as u32,
            tiles: pixels.div_ceil(BLOCK),
        }
    }

    /// Elements of the padded plane.
    pub fn plane_len(&self, rows: usize) -> usize {
        (rows + 2 * self.r as usize) * self.stride as usize
    }

    /// Look-back words of one classify launch: the ticket, then one per tile.
    pub fn status_len(&self) -> usize {
        1 + self.tiles as usize
    }

    /// Words of the run kernels' work area: the arrival counters, one progress flag per
    /// tile, then the slots of one count per tile.
    pub fn run_work_len(&self) -> usize {
        self.run_flags_len() + RUN_COUNT_SLOTS * self.tiles as usize
    }

    /// Words at the start of the run kernels' work area that must be zero before every
    /// launch: the arrival counters and the progress flags.
    pub fn run_flags_len(&self) -> usize {
        RUN_WORK_HEAD + self.tiles as usize
    }
}

/// What a run launch needs besides the pedestal ([`FrameBuffers`]): its [`RUN_PLANES`]
/// padded planes, one after another, and its work area (counters and flags first, zeroed
/// before every launch).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunBuffers<'a> {
    pub planes: &'a RealBuf,
    pub work: &'a DeviceBuf<u32>,
}

/// The pedestal state and scratch a frame's kernels read and write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameBuffers<'a> {
    /// The pedestal: baselines, sums, frozen std.
    pub state: &'a DeviceState,
    /// The padded plane of corrected values.
    pub c_plane: &'a RealBuf,
    /// The thresholds.
    pub t: &'a RealBuf,
    /// The classify kernel's look-back words.
    pub status: &'a DeviceBuf<u64>,
}

/// [`FrameBuffers`] as the kernels of real type `R` take them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FramePtrs<R> {
    base: DevicePtr<R>,
    a: DevicePtr<R>,
    b: DevicePtr<R>,
    frozen_std: DevicePtr<R>,
    c_plane: DevicePtr<R>,
    t: DevicePtr<R>,
    status: DevicePtr<u64>,
}

impl FrameBuffers<'_> {
    /// The pointers, in the kernels' real type `R` (an internal error for buffers of the
    /// other one).
    pub fn ptrs<R: DeviceReal>(&self) -> Result<FramePtrs<R>> {
        Ok(FramePtrs {
            base: self.state.base.get::<R>()?.ptr(),
            a: self.state.a()?,
            b: self.state.b()?,
            frozen_std: self.state.frozen_std.get::<R>()?.ptr(),
            c_plane: self.c_plane.get::<R>()?.ptr(),
            t: self.t.get::<R>()?.ptr(),
            status: self.status.ptr(),
        })
    }
}

/// Where a classify launch puts the frame's clusters (see `Output` in the kernel).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Destination {
    /// The clusters already in the buffer (compact mode), or null.
    pub base_in: DevicePtr<u32>,
    /// Where the count (plus `*base_in`) goes.
    pub count_out: DevicePtr<u32>,
    /// First record of the buffer.
    pub records: DevicePtr<u32>,
    /// Records the buffer has room for.
    pub room: u32,
}

/// What every launch of one finder shares: the frame geometry, the constants in the real
/// type `R`, and the threshold mode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Constants<R> {
    pub g: Geometry,
    pub inv: R,
    pub n_sigma: R,
    /// 1: live thresholds, 0: frozen ones.
    pub live: u32,
}

/// The prepare arguments of the frame at `frame` with the pedestal and scratch of `buf`.
pub(crate) fn prepare_args<R: Copy>(
    k: &Constants<R>,
    frame: DevicePtr<u16>,
    buf: &FramePtrs<R>,
) -> PrepareArgs<R> {
    let g = &k.g;
    PrepareArgs {
        frame,
        base: buf.base,
        a: buf.a,
        b: buf.b,
        frozen_std: buf.frozen_std,
        cols: g.cols,
        pixels: g.pixels,
        stride: g.stride,
        r: g.r,
        inv: k.inv,
        n_sigma: k.n_sigma,
        live: k.live,
        c_plane: buf.c_plane,
        t_out: buf.t,
        status: buf.status,
        n_status: g.status_len() as u32,
    }
}

/// `$args { the pedestal sums of `$buf`, the geometry and `inv` of `$k`, the destination
/// `$dst`, $rest }`: the fields a classify launch and a run launch share (a struct literal's
/// order is not its layout's).
macro_rules! frame_args {
    ($args:ident, $k:expr, $buf:expr, $dst:expr, { $($rest:tt)* }) => {{
        let (k, buf, dst) = ($k, $buf, $dst);
        $args {
            base: buf.base,
            a: buf.a,
            b: buf.b,
            cols: k.g.cols,
            pixels: k.g.pixels,
            stride: k.g.stride,
            tiles: k.g.tiles,
            inv: k.inv,
            base_in: dst.base_in,
            count_out: dst.count_out,
            records: dst.records,
            room: dst.room,
            $($rest)*
        }
    }};
}

/// The classify arguments of the frame at `frame`: its pedestal state, plane and thresholds,
/// the geometry, and where its records go.
pub(crate) fn classify_args<R: Copy>(
    k: &Constants<R>,
    frame: DevicePtr<u16>,
    buf: &FramePtrs<R>,
    dst: &Destination,
) -> ClassifyArgs<R> {
    frame_args!(ClassifyArgs, k, buf, dst, {
        frame,
        c: buf.c_plane,
        t: buf.t,
        status: buf.status,
    })
}

/// The step arguments: classify `c`'s frame, then prepare the frame at `next_frame` (null:
/// none) into `next`'s plane, thresholds and look-back words (its pedestal is `c`'s).
pub(crate) fn step_args<R: Copy>(
    k: &Constants<R>,
    c: ClassifyArgs<R>,
    next_frame: DevicePtr<u16>,
    next: &FramePtrs<R>,
) -> StepArgs<R> {
    StepArgs::join(
        c,
        StepNext {
            next_frame,
            frozen_std: next.frozen_std,
            r: k.g.r,
            n_sigma: k.n_sigma,
            live: k.live,
            c_next: next.c_plane,
            t_next: next.t,
            status_next: next.status,
        },
    )
}

/// What a run launch reads and writes besides a frame launch's, as the run kernels of real
/// type `R` take it: its frames, and its [`RunBuffers`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunPtrs<R> {
    /// The first frame, and how many.
    frames: DevicePtr<u16>,
    n: u32,
    planes: DevicePtr<R>,
    /// Values per plane.
    plane_len: u32,
    work: DevicePtr<u32>,
}

impl RunBuffers<'_> {
    /// The pointers of a launch over `n` frames from `frames`, in the kernels' real type `R`.
    pub fn ptrs<R: DeviceReal>(&self, (frames, n): (DevicePtr<u16>, u32)) -> Result<RunPtrs<R>> {
        Ok(RunPtrs {
            frames,
            n,
            planes: self.planes.get::<R>()?.ptr(),
            plane_len: (self.planes.len() / RUN_PLANES) as u32,
            work: self.work.ptr(),
        })
    }
}

/// The run arguments of `run`'s frames.
pub(crate) fn run_args<R: Copy>(
    k: &Constants<R>,
    buf: &FramePtrs<R>,
    run: &RunPtrs<R>,
    dst: &Destination,
) -> RunArgs<R> {
    frame_args!(RunArgs, k, buf, dst, {
        frames: run.frames,
        n: run.n,
        frozen_std: buf.frozen_std,
        planes: run.planes,
        plane_len: run.plane_len,
        work: run.work,
        r: k.g.r,
        n_sigma: k.n_sigma,
        live: k.live,
    })
}

/// A frame of a launch: the frame on the device (null: none, for the frame a step launch
/// prepares after the last), with the pedestal and scratch its kernels read and write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameAt<'a> {
    pub frame: DevicePtr<u16>,
    pub buf: FrameBuffers<'a>,
}

#[cfg(test)]
mod tests {
    use cluda_gpu::args::KernelArgs;

    use super::*;

    fn ptr<T>(addr: u64) -> DevicePtr<T> {
        DevicePtr::new(addr)
    }

    fn sample<R>(inv: R, n_sigma: R) -> (Constants<R>, FramePtrs<R>, Destination) {
        let g = Geometry {
            cols: 11,
            pixels: 12,
            stride: 13,
            r: 14,
            tiles: 15,
        };
        let k = Constants {
            g,
            inv,
            n_sigma,
            live: 1,
        };
        let buf = FramePtrs {
            base: ptr(2),
            a: ptr(3),
            b: ptr(4),
            frozen_std: ptr(99),
            c_plane: ptr(5),
            t: ptr(6),
            status: ptr(7),
        };
        let dst = Destination {
            base_in: ptr(8),
            count_out: ptr(9),
            records: ptr(10),
            room: 16,
        };
        (k, buf, dst)
    }

    /// Every field of the classify and step arguments comes from its own source value.
    #[test]
    fn arguments_take_each_value_once() {
        let (k, buf, dst) = sample(0.5f64, 3.0);
        let c = classify_args(&k, ptr(1), &buf, &dst);
        let next = FramePtrs {
            c_plane: ptr(50),
            t: ptr(60),
            status: ptr(70),
            ..buf
        };
        let s = step_args(&k, c, ptr(40), &next);
        assert_eq!(c.frame.addr() as usize, 1);
        assert_eq!(
            [
                c.base.addr() as usize,
                c.a.addr() as usize,
                c.b.addr() as usize
            ],
            [2, 3, 4]
        );
        assert_eq!(
            [
                c.c.addr() as usize,
                c.t.addr() as usize,
                c.status.addr() as usize
            ],
            [5, 6, 7]
        );
        assert_eq!(
            [c.cols, c.pixels, c.stride, c.tiles, c.room],
            [11, 12, 13, 15, 16]
        );
        assert_eq!(
            [
                c.base_in.addr() as usize,
                c.count_out.addr() as usize,
                c.records.addr() as usize
            ],
            [8, 9, 10]
        );
        assert_eq!(c.inv, 0.5);
        assert_eq!(
            (s.next_frame.addr() as usize, s.frozen_std.addr() as usize),
            (40, 99)
        );
        assert_eq!(
            [
                s.c_next.addr() as usize,
                s.t_next.addr() as usize,
                s.status_next.addr() as usize
            ],
            [50, 60, 70]
        );
        assert_eq!((s.r, s.n_sigma, s.live), (14, 3.0, 1));
        let (k, buf, _) = sample(0.25f32, 5.0f32);
        let p = prepare_args(&Constants { live: 0, ..k }, ptr(1), &buf);
        assert_eq!(
            (p.n_status, p.r, p.inv, p.n_sigma, p.live),
            (16, 14, 0.25, 5.0, 0)
        );
    }

    /// Every field of the run arguments comes from its own source value.
    #[test]
    fn run_arguments_take_each_value_once() {
        let (k, buf, dst) = sample(0.5f32, 3.0);
        let run = RunPtrs {
            frames: ptr(1),
            n: 23,
            planes: ptr(20),
            plane_len: 21,
            work: ptr(22),
        };
        let a = run_args(&k, &buf, &run, &dst);
        assert_eq!((a.frames.addr(), a.n), (1, 23));
        assert_eq!(
            [a.base.addr(), a.a.addr(), a.b.addr(), a.frozen_std.addr()],
            [2, 3, 4, 99]
        );
        assert_eq!((a.planes.addr(), a.plane_len, a.work.addr()), (20, 21, 22));
        assert_eq!(
            [a.cols, a.pixels, a.stride, a.tiles, a.r, a.live, a.room],
            [11, 12, 13, 15, 14, 1, 16]
        );
        assert_eq!((a.inv, a.n_sigma), (0.5, 3.0));
        assert_eq!(
            [a.base_in.addr(), a.count_out.addr(), a.records.addr()],
            [8, 9, 10]
        );
    }

    /// A step launch's leading parameters are a classify launch's, in the same places.
    #[test]
    fn step_arguments_start_with_the_classify_arguments() {
        let n = ClassifyArgs::<f64>::PARAMS;
        assert_eq!(
            StepArgs::<f64>::layout()[..n],
            ClassifyArgs::<f64>::layout()[..]
        );
        assert_eq!(
            StepArgs::<f32>::layout()[..n],
            ClassifyArgs::<f32>::layout()[..]
        );
        assert_eq!(StepArgs::<f64>::NAMES[..n], ClassifyArgs::<f64>::NAMES[..]);
    }

    /// The parameter array of a launch points at the struct's fields, in order.
    #[test]
    fn params_point_at_the_fields() {
        let (k, buf, dst) = sample(0.5f32, 3.0);
        let mut c = classify_args(&k, ptr(1), &buf, &dst);
        let base = &raw const c as usize;
        let layout = ClassifyArgs::<f32>::layout();
        let p = c.params();
        assert_eq!(p.len(), layout.len());
        for (ptr, (offset, _)) in p.iter().zip(layout) {
            assert_eq!(*ptr as usize - base, offset);
        }
    }
}
