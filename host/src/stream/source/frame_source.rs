//! The acquisition as the engine's [`FrameSource`]: chunks of frames filled as they come.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::events::{Ending, FaultKind};
use super::messages::Pixels;
use super::{Acquisition, FIRST_WAIT};
use crate::error::Result;
use crate::io::FrameSource;

impl FrameSource for Acquisition<'_> {
    fn rows(&self) -> usize {
        self.crop.map_or(self.rows, |r| r.rows())
    }

    fn cols(&self) -> usize {
        self.crop.map_or(self.cols, |r| r.cols())
    }

    fn origin(&self) -> (usize, usize) {
        self.crop.map_or((0, 0), |r| (r.ymin, r.xmin))
    }

    fn detector_shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    fn remaining_hint(&self) -> u64 {
        u64::MAX
    }

    /// Waits for the chunk's first frame (as long as it takes, checking the stop flag), then
    /// takes frames until the chunk is full or `max_wait` has passed since the first
    /// ([`FIRST_WAIT`] for the acquisition's first chunk); copies them into `dst` in parallel.
    fn fill(&mut self, dst: &mut [u16], numbers: &mut Vec<u64>) -> Result<usize> {
        let px = self.rows() * self.cols();
        let cap = dst.len() / px.max(1);
        let mut got: Vec<(u64, Pixels, Instant)> = Vec::with_capacity(cap);
        let mut deadline: Option<Instant> = None;
        while got.len() < cap && !self.ended() {
            let stopping = self.stop.load(Ordering::SeqCst);
            if stopping {
                // A stop request finishes the acquisition: the frames waiting for parts are
                // given up (reported incomplete) and taken with what was ready before them,
                // then it ends; nothing more is read from the sockets.
                let left = match self.draining {
                    Some(left) => left,
                    None => self.receiver.give_up_waiting() + usize::from(self.pending.is_some()),
                };
                if left == 0 {
                    self.counts.ending = Ending::Stopped;
                    break;
                }
                self.draining = Some(left - 1);
            }
            let timeout = match deadline {
                _ if stopping => Duration::ZERO,
                None => Duration::from_millis(50),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    d - now
                }
            };
            let Some(msg) = self.next(timeout)? else {
                if stopping {
                    self.counts.ending = Ending::Stopped;
                    break;
                }
                // Quiet since the last message of any endpoint (frames waiting for parts do
                // not keep the acquisition open: they are given up first, reported).
                let heard = self.receiver.last_heard().unwrap_or(self.last_message);
                if !self.idle_end.is_zero() && heard.elapsed() >= self.idle_end && got.is_empty() {
                    if !self.idle_given_up {
                        self.idle_given_up = true;
                        if self.receiver.give_up_waiting() > 0 {
                            continue;
                        }
                    }
                    let after = self
                        .last
                        .map_or(String::new(), |l| format!(" after frame {l}"));
                    self.fault(
                        FaultKind::Malformed,
                        1,
                        format!(
                            "no end-of-acquisition message and nothing for {:.1} s: the acquisition is ended{after} (its end message was lost)",
                            self.idle_end.as_secs_f64()
                        ),
                    );
                    let last = self.last;
                    self.account_drops(last, None);
                    self.counts.ending = Ending::Idle;
                    break;
                }
                continue;
            };
            self.last_message = Instant::now();
            self.behind();
            if let Some(frame) = self.handle(msg) {
                if deadline.is_none() {
                    let wait = if self.counts.frames == 0 {
                        self.max_wait.min(FIRST_WAIT)
                    } else {
                        self.max_wait
                    };
                    deadline = Some(Instant::now() + wait);
                }
                got.push(frame);
            }
        }
        use rayon::prelude::*;
        let dst = &mut dst[..got.len() * px];
        let (cols, whole) = (self.cols, self.rows * self.cols);
        match self.crop {
            None if got.len() > 1 => dst
                .par_chunks_mut(px)
                .zip(got.par_iter())
                .for_each(|(d, (_, data, _))| data.copy_to(d, cols)),
            None => {
                if let Some((_, data, _)) = got.first() {
                    data.copy_to(dst, cols);
                }
            }
            // Each frame whole into a scratch frame of its thread, then its ROI into place.
            Some(roi) => dst
                .par_chunks_mut(px)
                .zip(got.par_iter())
                .try_for_each_init(
                    || vec![0u16; whole],
                    |scratch, (d, (_, data, _))| {
                        data.copy_to(scratch, cols);
                        roi.crop(scratch, cols, d)
                    },
                )?,
        }
        if let Ok(mut a) = self.arrivals.lock() {
            a.extend(got.iter().map(|(n, _, t)| (*n, *t)));
        }
        numbers.extend(got.iter().map(|(n, _, _)| *n));
        self.counts.frames += got.len() as u64;
        if !got.is_empty() {
            self.counts.last_delivery = Some(Instant::now());
        }
        Ok(got.len())
    }

    fn report(&self) -> Option<String> {
        let c = &self.counts;
        Some(format!(
            "{} missing, {} sampled, {} incomplete, {} mismatched, {} malformed, {} dropped, {} late parts",
            c.missing, c.sampled, c.incomplete, c.mismatched, c.malformed, c.dropped, c.late
        ))
    }
}
