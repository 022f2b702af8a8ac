//! Frames pushed into a pedestal: the fill phase's sums (several frames at once, by chunks of
//! pixels on every core), the switch to the ready state, and the ready updates.

use cluda_gpu::pedestal::{freeze_b1, freeze_raw};
use cluda_gpu::real::Real;

use super::state::{PixelMaps, ReadyState};
use super::{Fill, Pedestal};
use crate::error::Result;
use crate::frames::Frames;

impl Pedestal {
    /// Pushes every pixel of every frame (dark frames: no photons expected).
    ///
    /// # Errors
    /// [`Error::Shape`](crate::error::Error::Shape) when the frames are not the pedestal's `rows x cols`; nothing is pushed.
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
    /// [`Error::Shape`](crate::error::Error::Shape) when `frame` does not hold `rows x cols` samples; nothing changes.
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
            Fill::Raw64 { sum, sum2 } => ReadyState::F64(PixelMaps::from_ready(
                freeze_each(&sum, &sum2, freeze_raw),
                inv64,
            )),
            Fill::Raw32 { sum, sum2 } => ReadyState::F32(PixelMaps::from_ready(
                freeze_each(&sum, &sum2, freeze_raw),
                inv32,
            )),
            Fill::Exact { sum, sum2 } => {
                let st = freeze_each(&sum, &sum2, |s, s2| freeze_b1(s, s2, self.n, inv64));
                ReadyState::F32(PixelMaps::from_ready(st, inv32))
            }
        });
    }
}

/// Every pixel's ready state, `freeze(sum, sum2)` of its sums.
fn freeze_each<S: Copy, T>(sum: &[S], sum2: &[S], freeze: impl Fn(S, S) -> T) -> Vec<T> {
    sum.iter()
        .zip(sum2)
        .map(|(&s, &s2)| freeze(s, s2))
        .collect()
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
    super::chunks::for_each_chunk_pair(sum, sum2, CHUNK, parallel, work);
}

fn add_raw<R: Real>(sum: &mut [R], sum2: &mut [R], frame: &[u16], conv: impl Fn(u16) -> R) {
    for ((s, s2), &x) in sum.iter_mut().zip(sum2.iter_mut()).zip(frame) {
        let v = conv(x);
        *s = *s + v;
        *s2 = *s2 + v * v;
    }
}
