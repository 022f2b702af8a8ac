//! Per-pixel pedestal (dark level and noise) with the exact arithmetic of docs/semantics.md.
//!
//! The arithmetic itself lives in `cluda_gpu::pedestal`, shared with the GPU kernels; this
//! module owns the per-pixel arrays, the fill phase (the first N samples) and the maps users
//! look at.

use cluda_gpu::pedestal::{Ready, freeze_b1, freeze_raw, mean_offset, push_ready, std_dev};
use cluda_gpu::real::Real;
use ndarray::Array2;
use rayon::prelude::*;

use crate::config::{FinderConfig, Precision};
use crate::error::{Error, Result};
use crate::frames::Frames;

/// Per-pixel state of a ready pedestal in precision `R`, as structure-of-arrays (the layout
/// the GPU finder uploads as is).
#[derive(Debug, PartialEq)]
pub struct PixelMaps<R> {
    /// Baseline the sums are centred on (0 except for `F32`'s B1 rewrite).
    pub base: Vec<R>,
    /// Window sum of `x - base`.
    pub a: Vec<R>,
    /// Window sum of `(x - base)^2`.
    pub b: Vec<R>,
    /// Standard deviation at the moment the pedestal became ready (for frozen thresholds).
    pub frozen_std: Vec<R>,
    /// `1/N` in precision `R`, computed once.
    pub inv: R,
}

/// By hand for `clone_from`, which copies into the arrays already there (a derived one
/// allocates new ones: fresh pages to fault in).
impl<R: Clone> Clone for PixelMaps<R> {
    fn clone(&self) -> Self {
        Self {
            base: self.base.clone(),
            a: self.a.clone(),
            b: self.b.clone(),
            frozen_std: self.frozen_std.clone(),
            inv: self.inv.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.base.clone_from(&source.base);
        self.a.clone_from(&source.a);
        self.b.clone_from(&source.b);
        self.frozen_std.clone_from(&source.frozen_std);
        self.inv = source.inv.clone();
    }
}

impl<R: Real> PixelMaps<R> {
    fn from_ready(states: Vec<Ready<R>>, inv: R) -> Self {
        let frozen_std = states.iter().map(|s| std_dev(s.a, s.b, inv)).collect();
        Self {
            base: states.iter().map(|s| s.base).collect(),
            a: states.iter().map(|s| s.a).collect(),
            b: states.iter().map(|s| s.b).collect(),
            frozen_std,
            inv,
        }
    }

    /// Pushes sample `frame[p]` into pixel `p` for every `p` with `mask[p] != 0` (all pixels
    /// when `mask` is `None`), with rayon when `parallel`, else on the calling thread only.
    pub(crate) fn push_masked(&mut self, frame: &[u16], mask: Option<&[u8]>, parallel: bool) {
        let inv = self.inv;
        let chunk = 4096;
        let (a, b, base) = (&mut self.a, &mut self.b, &self.base);
        let work = |(ci, (a, b)): (usize, (&mut [R], &mut [R]))| {
            let o = ci * chunk;
            for i in 0..a.len() {
                if mask.is_none_or(|m| m[o + i] != 0) {
                    push_ready(&mut a[i], &mut b[i], base[o + i], frame[o + i], inv);
                }
            }
        };
        if parallel {
            a.par_chunks_mut(chunk)
                .zip(b.par_chunks_mut(chunk))
                .enumerate()
                .for_each(work);
        } else {
            a.chunks_mut(chunk)
                .zip(b.chunks_mut(chunk))
                .enumerate()
                .for_each(work);
        }
    }

    fn mean(&self, p: usize) -> f64 {
        self.base[p].to_f64() + mean_offset(self.a[p], self.inv).to_f64()
    }

    fn std(&self, p: usize) -> f64 {
        std_dev(self.a[p], self.b[p], self.inv).to_f64()
    }
}

/// The ready state in the configured precision.
#[derive(Debug, PartialEq)]
pub enum ReadyState {
    /// `F64` state.
    F64(PixelMaps<f64>),
    /// `F32` (B1) or `F32Naive` state.
    F32(PixelMaps<f32>),
}

/// By hand for `clone_from` (see [`PixelMaps`]'s).
impl Clone for ReadyState {
    fn clone(&self) -> Self {
        match self {
            Self::F64(m) => Self::F64(m.clone()),
            Self::F32(m) => Self::F32(m.clone()),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        match (self, source) {
            (Self::F64(to), Self::F64(from)) => to.clone_from(from),
            (Self::F32(to), Self::F32(from)) => to.clone_from(from),
            (to, from) => *to = from.clone(),
        }
    }
}

/// Sums of the fill phase (the first N samples of every pixel).
#[derive(Clone, Debug, PartialEq)]
enum Fill {
    /// `F64`: raw sums in f64, aare's accumulation (exact: integers below 2^53).
    Raw64 { sum: Vec<f64>, sum2: Vec<f64> },
    /// `F32` (B1): exact integer sums, centred when the pedestal becomes ready.
    Exact { sum: Vec<u64>, sum2: Vec<u64> },
    /// `F32Naive`: raw sums in f32 (rounded every step: the naive scheme).
    Raw32 { sum: Vec<f32>, sum2: Vec<f32> },
}

/// A per-pixel running pedestal over a window of N frames.
#[derive(Debug, PartialEq)]
pub struct Pedestal {
    rows: usize,
    cols: usize,
    n: u32,
    precision: Precision,
    count: u32,
    fill: Option<Fill>,
    ready: Option<ReadyState>,
}

/// By hand for `clone_from`, which copies into the arrays already there: a stream resets its
/// finder to the same saved pedestal at every acquisition's start, and a fresh copy of a
/// 400 x 400 pedestal (5 MB of new pages) took about a millisecond of it.
impl Clone for Pedestal {
    fn clone(&self) -> Self {
        Self {
            rows: self.rows,
            cols: self.cols,
            n: self.n,
            precision: self.precision,
            count: self.count,
            fill: self.fill.clone(),
            ready: self.ready.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.rows = source.rows;
        self.cols = source.cols;
        self.n = source.n;
        self.precision = source.precision;
        self.count = source.count;
        self.fill.clone_from(&source.fill);
        // Option's clone_from copies into a Some already there.
        self.ready.clone_from(&source.ready);
    }
}

impl Pedestal {
    /// An empty pedestal for `rows x cols` frames with window `n` in `precision`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when `rows` or `cols` is 0 (`rows/cols`), the frame is too
    /// large, or `n` is 0 (`pedestal-frames`).
    pub fn new(rows: usize, cols: usize, n: u32, precision: Precision) -> Result<Self> {
        if rows == 0 || cols == 0 {
            return Err(Error::param(
                "rows/cols",
                format!("a pedestal needs at least one pixel, got {rows} x {cols}"),
            ));
        }
        if n == 0 {
            return Err(Error::param(
                "pedestal-frames",
                "the pedestal window needs at least one frame",
            ));
        }
        let p = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::param("rows/cols", "frame too large"))?;
        // Peak per pixel: the two fill sums, then (when the pedestal becomes ready) the
        // per-pixel state and the four maps built from it, all at once.
        let real = if precision == Precision::F64 { 8 } else { 4 };
        let per_pixel = 16 + 7 * real;
        let what = || {
            format!(
                "the pedestal state of {rows} x {cols} pixels ({})",
                precision.name()
            )
        };
        crate::memory::check(what, (p as u64).saturating_mul(per_pixel))?;
        let fill = match precision {
            Precision::F64 => Fill::Raw64 {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
            Precision::F32 => Fill::Exact {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
            Precision::F32Naive => Fill::Raw32 {
                sum: crate::memory::zeroed_vec(what, p)?,
                sum2: crate::memory::zeroed_vec(what, p)?,
            },
        };
        Ok(Self {
            rows,
            cols,
            n,
            precision,
            count: 0,
            fill: Some(fill),
            ready: None,
        })
    }

    /// The pedestal of the rectangle `roi` of the frames (detector pixels, both ends
    /// inclusive): every per-pixel sum and state cut down to it. Pixels are independent, so
    /// this is exactly the pedestal the frames cut down to `roi` would have given (a pedestal
    /// of the whole detector used with frames of a receiver ROI).
    ///
    /// # Errors
    /// [`Error::Shape`] when `roi` does not lie inside the frames.
    pub fn cropped(&self, roi: &crate::io::raw::Roi) -> Result<Self> {
        if !roi.fits(self.rows, self.cols) {
            return Err(Error::shape(
                "a receiver ROI to cut the pedestal down to",
                format!("an ROI inside frames of {} x {}", self.rows, self.cols),
                format!("ROI {roi} (xmin, xmax, ymin, ymax)"),
            ));
        }
        let cols = self.cols;
        fn maps<R: Copy>(m: &PixelMaps<R>, cols: usize, roi: &crate::io::raw::Roi) -> PixelMaps<R> {
            PixelMaps {
                base: cut_rows(&m.base, cols, roi),
                a: cut_rows(&m.a, cols, roi),
                b: cut_rows(&m.b, cols, roi),
                frozen_std: cut_rows(&m.frozen_std, cols, roi),
                inv: m.inv,
            }
        }
        let fill = self.fill.as_ref().map(|f| match f {
            Fill::Raw64 { sum, sum2 } => Fill::Raw64 {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
            Fill::Exact { sum, sum2 } => Fill::Exact {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
            Fill::Raw32 { sum, sum2 } => Fill::Raw32 {
                sum: cut_rows(sum, cols, roi),
                sum2: cut_rows(sum2, cols, roi),
            },
        });
        let ready = self.ready.as_ref().map(|r| match r {
            ReadyState::F64(m) => ReadyState::F64(maps(m, cols, roi)),
            ReadyState::F32(m) => ReadyState::F32(maps(m, cols, roi)),
        });
        Ok(Self {
            rows: roi.rows(),
            cols: roi.cols(),
            n: self.n,
            precision: self.precision,
            count: self.count,
            fill,
            ready,
        })
    }

    /// Rows per frame.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns per frame.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The window N.
    pub fn window(&self) -> u32 {
        self.n
    }

    /// The precision.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Frames pushed during the fill phase (saturates at N).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether every pixel holds N samples, so that clusters can be found.
    pub fn is_ready(&self) -> bool {
        self.ready.is_some()
    }

    /// The ready state, or [`Error::PedestalNotReady`].
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`] until `n` frames have been pushed.
    pub fn ready(&self) -> Result<&ReadyState> {
        self.ready.as_ref().ok_or(Error::PedestalNotReady {
            have: self.count,
            need: self.n,
        })
    }

    /// Mutable ready state (finders apply their frame-synchronous updates through it).
    pub(crate) fn ready_mut(&mut self) -> Result<&mut ReadyState> {
        let (have, need) = (self.count, self.n);
        self.ready
            .as_mut()
            .ok_or(Error::PedestalNotReady { have, need })
    }

    /// Pushes every pixel of every frame (dark frames: no photons expected).
    ///
    /// # Errors
    /// [`Error::Shape`] when the frames are not the pedestal's `rows x cols`; nothing is pushed.
    pub fn push_frames(&mut self, frames: Frames<'_>) -> Result<()> {
        self.push_frames_with(frames, true)
    }

    /// [`Pedestal::push_frames`], on the calling thread only unless `parallel` (a finder
    /// asked to use one thread must not start rayon's global pool). The result is the same
    /// either way.
    ///
    /// # Errors
    /// As [`Pedestal::push_frames`].
    pub fn push_frames_with(&mut self, frames: Frames<'_>, parallel: bool) -> Result<()> {
        frames.expect_shape(self.rows, self.cols, "pedestal frames")?;
        let mut i = 0;
        while i < frames.len() {
            match self.fill.as_mut() {
                // The fill phase: every frame the window still needs at once, each chunk of
                // pixels walking them in order (a pixel's sums are added in frame order, as
                // one frame at a time adds them), chunks in parallel.
                Some(fill) if self.ready.is_none() => {
                    let take = ((self.n - self.count) as usize).min(frames.len() - i);
                    fill.add_frames(frames, i..i + take, parallel);
                    self.count += take as u32;
                    i += take;
                    if self.count == self.n {
                        self.become_ready();
                    }
                }
                _ => {
                    self.push_frame_unchecked(frames.frame(i), parallel);
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// Pushes one `rows x cols` frame into every pixel.
    ///
    /// # Errors
    /// [`Error::Shape`] when `frame` does not hold `rows x cols` samples; nothing changes.
    pub fn push_frame(&mut self, frame: &[u16]) -> Result<()> {
        self.push_frames(Frames::single(frame, self.rows, self.cols)?)
    }

    fn push_frame_unchecked(&mut self, frame: &[u16], parallel: bool) {
        match &mut self.ready {
            Some(ReadyState::F64(m)) => return m.push_masked(frame, None, parallel),
            Some(ReadyState::F32(m)) => return m.push_masked(frame, None, parallel),
            None => {}
        }
        let Some(fill) = self.fill.as_mut() else {
            return;
        };
        match fill {
            Fill::Raw64 { sum, sum2 } => add_raw(sum, sum2, frame, |x| x as f64),
            Fill::Raw32 { sum, sum2 } => add_raw(sum, sum2, frame, |x| x as f32),
            Fill::Exact { sum, sum2 } => {
                for ((s, s2), &x) in sum.iter_mut().zip(sum2.iter_mut()).zip(frame) {
                    *s += x as u64;
                    *s2 += x as u64 * x as u64;
                }
            }
        }
        self.count += 1;
        if self.count == self.n {
            self.become_ready();
        }
    }

    fn become_ready(&mut self) {
        let Some(fill) = self.fill.take() else { return };
        let inv64 = 1.0 / self.n as f64;
        let inv32 = 1.0f32 / self.n as f32;
        self.ready = Some(match fill {
            Fill::Raw64 { sum, sum2 } => {
                let st = sum
                    .iter()
                    .zip(&sum2)
                    .map(|(&s, &s2)| freeze_raw(s, s2))
                    .collect();
                ReadyState::F64(PixelMaps::from_ready(st, inv64))
            }
            Fill::Raw32 { sum, sum2 } => {
                let st = sum
                    .iter()
                    .zip(&sum2)
                    .map(|(&s, &s2)| freeze_raw(s, s2))
                    .collect();
                ReadyState::F32(PixelMaps::from_ready(st, inv32))
            }
            Fill::Exact { sum, sum2 } => {
                let st = sum
                    .iter()
                    .zip(&sum2)
                    .map(|(&s, &s2)| freeze_b1(s, s2, self.n, inv64))
                    .collect();
                ReadyState::F32(PixelMaps::from_ready(st, inv32))
            }
        });
    }

    /// The mean (dark level) of every pixel, in ADU. Errors before the pedestal is ready.
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`] until the pedestal holds its `n` frames.
    pub fn mean_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.mean(p)),
            ReadyState::F32(m) => Box::new(move |p| m.mean(p)),
        })
    }

    /// The standard deviation (noise) of every pixel's current window, in ADU.
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`] until the pedestal holds its `n` frames.
    pub fn std_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.std(p)),
            ReadyState::F32(m) => Box::new(move |p| m.std(p)),
        })
    }

    /// The standard deviation frozen when the pedestal became ready (frozen thresholds use it).
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`] until the pedestal holds its `n` frames.
    pub fn frozen_std_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.frozen_std[p]),
            ReadyState::F32(m) => Box::new(move |p| m.frozen_std[p] as f64),
        })
    }

    fn map<'s>(
        &'s self,
        f: impl FnOnce(&'s ReadyState) -> Box<dyn Fn(usize) -> f64 + 's>,
    ) -> Result<Array2<f64>> {
        let get = f(self.ready()?);
        Ok(Array2::from_shape_fn((self.rows, self.cols), |(r, c)| {
            get(r * self.cols + c)
        }))
    }
}

impl Fill {
    /// Adds frames `range` of `frames` to the sums, frame after frame for every pixel; chunks
    /// of pixels on rayon's threads when `parallel`.
    fn add_frames(&mut self, frames: Frames<'_>, range: std::ops::Range<usize>, parallel: bool) {
        match self {
            Fill::Raw64 { sum, sum2 } => {
                add_frames(sum, sum2, frames, range, parallel, |s, s2, f| {
                    add_raw(s, s2, f, |x| x as f64)
                })
            }
            Fill::Raw32 { sum, sum2 } => {
                add_frames(sum, sum2, frames, range, parallel, |s, s2, f| {
                    add_raw(s, s2, f, |x| x as f32)
                })
            }
            Fill::Exact { sum, sum2 } => {
                add_frames(sum, sum2, frames, range, parallel, |s, s2, f| {
                    for ((s, s2), &x) in s.iter_mut().zip(s2.iter_mut()).zip(f) {
                        *s += x as u64;
                        *s2 += x as u64 * x as u64;
                    }
                })
            }
        }
    }
}

/// Calls `add(sum chunk, sum2 chunk, frame's samples of that chunk)` for every chunk of 4096
/// pixels and every frame of `range`, frames in order within a chunk; chunks in parallel when
/// `parallel`.
fn add_frames<T: Send>(
    sum: &mut [T],
    sum2: &mut [T],
    frames: Frames<'_>,
    range: std::ops::Range<usize>,
    parallel: bool,
    add: impl Fn(&mut [T], &mut [T], &[u16]) + Sync,
) {
    const CHUNK: usize = 4096;
    let work = |(ci, (s, s2)): (usize, (&mut [T], &mut [T]))| {
        let o = ci * CHUNK;
        for f in range.clone() {
            add(s, s2, &frames.frame(f)[o..o + s.len()]);
        }
    };
    if parallel {
        sum.par_chunks_mut(CHUNK)
            .zip(sum2.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(work);
    } else {
        sum.chunks_mut(CHUNK)
            .zip(sum2.chunks_mut(CHUNK))
            .enumerate()
            .for_each(work);
    }
}

fn add_raw<R: Real>(sum: &mut [R], sum2: &mut [R], frame: &[u16], conv: impl Fn(u16) -> R) {
    for ((s, s2), &x) in sum.iter_mut().zip(sum2.iter_mut()).zip(frame) {
        let v = conv(x);
        *s = *s + v;
        *s2 = *s2 + v * v;
    }
}

impl Pedestal {
    /// Checks that this pedestal fits `config` (shape, window N, precision), so a finder with
    /// that configuration can adopt it.
    ///
    /// # Errors
    /// [`Error::Shape`] naming both the wanted and the given shape, window and precision.
    pub fn check_fits(&self, config: &FinderConfig) -> Result<()> {
        let want = (
            config.rows,
            config.cols,
            config.pedestal_frames,
            config.precision,
        );
        let got = (self.rows(), self.cols(), self.window(), self.precision());
        if want == got {
            return Ok(());
        }
        let show = |(r, c, n, p): (usize, usize, u32, Precision)| {
            format!("{r} x {c}, N = {n}, {}", p.name())
        };
        Err(Error::shape("pedestal", show(want), show(got)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `clone_from` (which reuses the arrays) gives what `clone` gives, whatever the target
    /// held before: another precision, another fill state, another shape.
    #[test]
    fn clone_from_equals_clone() {
        let frames = |rows: usize, cols: usize, k: usize| -> Vec<u16> {
            (0..rows * cols * k)
                .map(|i| 1000 + (i * 7919 % 97) as u16)
                .collect()
        };
        let make = |rows, cols, n, precision, k| {
            let mut p = Pedestal::new(rows, cols, n, precision).unwrap();
            let f = frames(rows, cols, k);
            p.push_frames(Frames::new(&f, k, rows, cols).unwrap())
                .unwrap();
            p
        };
        let sources = [
            make(4, 5, 3, Precision::F64, 5),
            make(4, 5, 3, Precision::F32, 5),
            make(4, 5, 3, Precision::F32Naive, 5),
            make(4, 5, 8, Precision::F64, 3),
            make(2, 3, 2, Precision::F64, 2),
        ];
        for source in &sources {
            for target in &sources {
                let mut t = target.clone();
                t.clone_from(source);
                assert_eq!(&t, source);
                // A target that moved on since (pushed into) is reset too.
                let mut moved = source.clone();
                let f = frames(source.rows, source.cols, 1);
                moved.push_frame(&f).unwrap();
                moved.clone_from(source);
                assert_eq!(&moved, source);
            }
        }
    }

    fn filled(precision: Precision, n: u32, samples: &[u16]) -> Pedestal {
        let mut p = Pedestal::new(1, 1, n, precision).unwrap();
        for &x in samples {
            p.push_frame(&[x]).unwrap();
        }
        p
    }

    /// Frames pushed as one batch (the fill phase in parallel, by pixel chunks) and one at a
    /// time on the calling thread give the same pedestal, bit for bit, in every precision,
    /// with windows shorter and longer than the batch and batches that cross into the window.
    #[test]
    fn batched_parallel_fill_equals_frame_by_frame() {
        let (rows, cols) = (37, 301); // 11137 pixels: chunks of 4096 and a partial one
        let g = crate::generate::Generator::new(crate::generate::GenConfig::new(rows, cols, 3))
            .unwrap();
        let data = g.frames(0, 40, false);
        let all = Frames::new(&data, 40, rows, cols).unwrap();
        for precision in [Precision::F64, Precision::F32, Precision::F32Naive] {
            for n in [1u32, 7, 25, 40, 60] {
                let mut one = Pedestal::new(rows, cols, n, precision).unwrap();
                for i in 0..40 {
                    one.push_frames_with(all.range(i, 1), false).unwrap();
                }
                for split in [40, 13, 3] {
                    let mut batched = Pedestal::new(rows, cols, n, precision).unwrap();
                    let mut at = 0;
                    while at < 40 {
                        let k = split.min(40 - at);
                        batched.push_frames(all.range(at, k)).unwrap();
                        at += k;
                    }
                    assert!(batched == one, "{precision:?} n {n} batches of {split}");
                }
            }
        }
    }

    #[test]
    fn not_ready_until_n_frames() {
        let p = filled(Precision::F64, 3, &[1, 2]);
        assert!(matches!(
            p.mean_map(),
            Err(Error::PedestalNotReady { have: 2, need: 3 })
        ));
        let p = filled(Precision::F64, 3, &[1, 2, 3]);
        assert_eq!(p.mean_map().unwrap()[(0, 0)], 6.0 * (1.0 / 3.0));
    }

    #[test]
    fn f64_fill_and_window_follow_the_formulas() {
        let xs = [4600u16, 4650, 4580, 4610, 4700, 4590];
        let p = filled(Precision::F64, 4, &xs);
        let inv = 1.0 / 4.0;
        let (mut s, mut s2) = (0.0f64, 0.0f64);
        for &x in &xs[..4] {
            s += x as f64;
            s2 += x as f64 * x as f64;
        }
        for &x in &xs[4..] {
            let x = x as f64;
            s += x - s * inv;
            s2 += x * x - s2 * inv;
        }
        let mean = s * inv;
        let var = (-mean).mul_add(mean, s2 * inv).max(0.0);
        assert_eq!(p.mean_map().unwrap()[(0, 0)], mean);
        assert_eq!(p.std_map().unwrap()[(0, 0)], var.sqrt());
    }

    #[test]
    fn b1_mean_and_std_close_to_f64_naive_is_not() {
        // A quiet MOENCH-like pixel: baseline ~4600, noise ~45 ADU.
        let mut x: u32 = 12345;
        let xs: Vec<u16> = (0..3000)
            .map(|_| {
                x = x.wrapping_mul(1664525).wrapping_add(1013904223);
                (4600 + (x >> 16) % 90) as u16 - 45
            })
            .collect();
        let p64 = filled(Precision::F64, 1000, &xs);
        let p32 = filled(Precision::F32, 1000, &xs);
        let pn = filled(Precision::F32Naive, 1000, &xs);
        let s64 = p64.std_map().unwrap()[(0, 0)];
        let s32 = p32.std_map().unwrap()[(0, 0)];
        let sn = pn.std_map().unwrap()[(0, 0)];
        assert!((s32 - s64).abs() / s64 < 1e-4, "B1 std {s32} vs f64 {s64}");
        assert!(
            (sn - s64).abs() / s64 > 1e-2,
            "naive std {sn} should be far from {s64}"
        );
    }

    #[test]
    fn wrong_shape_is_an_error_and_changes_nothing() {
        let mut p = Pedestal::new(2, 2, 2, Precision::F64).unwrap();
        let before = p.clone();
        assert!(matches!(p.push_frame(&[1, 2, 3]), Err(Error::Shape { .. })));
        assert_eq!(p, before);
    }
}

/// The samples of `roi` (rows of `cols` samples, both ends inclusive) out of per-pixel
/// values `v` of whole frames, row by row.
fn cut_rows<T: Copy>(v: &[T], cols: usize, roi: &crate::io::raw::Roi) -> Vec<T> {
    (roi.ymin..=roi.ymax)
        .flat_map(|y| v[y * cols + roi.xmin..=y * cols + roi.xmax].iter().copied())
        .collect()
}

#[cfg(test)]
mod cropped_tests {
    use super::*;
    use crate::io::raw::Roi;

    /// A pedestal of whole frames cut down to an ROI is the pedestal of the frames cut down,
    /// while filling and once ready, in every precision.
    #[test]
    fn cutting_the_state_is_the_state_of_the_cut_frames() {
        let (rows, cols, n) = (5usize, 7usize, 4u32);
        let roi = Roi {
            xmin: 2,
            xmax: 5,
            ymin: 1,
            ymax: 3,
        };
        let frame = |k: usize| -> Vec<u16> {
            (0..rows * cols)
                .map(|p| (4600 + (p * 37 + k * 101) % 91) as u16)
                .collect()
        };
        for precision in [Precision::F64, Precision::F32, Precision::F32Naive] {
            let mut whole = Pedestal::new(rows, cols, n, precision).unwrap();
            let mut cut = Pedestal::new(roi.rows(), roi.cols(), n, precision).unwrap();
            for k in 0..6 {
                let f = frame(k);
                let mut c = vec![0u16; roi.rows() * roi.cols()];
                roi.crop(&f, cols, &mut c).unwrap();
                whole.push_frame(&f).unwrap();
                cut.push_frame(&c).unwrap();
                assert_eq!(whole.cropped(&roi).unwrap(), cut, "{precision:?} frame {k}");
            }
        }
        let outside = Roi {
            xmin: 0,
            xmax: cols,
            ymin: 0,
            ymax: 0,
        };
        assert!(
            Pedestal::new(rows, cols, n, Precision::F64)
                .unwrap()
                .cropped(&outside)
                .is_err()
        );
    }
}
