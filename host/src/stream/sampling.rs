//! Sampled streams: a receiver told to stream every Nth frame (slsReceiver's `rx_zmqfreq N`,
//! the usual setting for a live preview; `rx_zmqstartfnum` picks where the sampling starts)
//! sends frame numbers that advance by N. Those gaps are the sender's design, not losses:
//! they are counted as `sampled`, and only a gap wider than the stride is `missing`.
//!
//! The stride is given ([`Sampling::Every`]) or inferred ([`Sampling::Infer`], the default):
//! an acquisition whose first [`INFER_GAPS`] gaps between frame numbers are all the same
//! N > 1 is taken as sampled every Nth frame (stated on stderr, once per stream for each
//! stride); until then its gaps are held back, and reported as missing if the stride does
//! not hold. Each acquisition infers its own stride, so one streamed whole after sampled
//! ones has its gaps counted as missing again.
//!
//! What is counted, for a gap from frame number `a` to the next frame `b` (`d = b - a`)
//! with stride N: the stream frames that should have come between them, `(d - 1) / N`
//! (frames `a + N`, `a + 2N`, ...), are missing (less those cluda itself dropped, counted as
//! dropped); the other `d - 1 - (d - 1) / N` frame numbers were never meant to be sent and
//! are `sampled`. A gap `d` that is not a multiple of N (the receiver lost frames of its
//! own, which shifts its every-Nth count) is missing at least one frame and named as a
//! broken stride; a gap narrower than N (the sampling restarted) loses nothing. With N = 1
//! this is the plain count: every gap is missing.

/// How the frame numbers of a stream are expected to advance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Sampling {
    /// Infer a stride from each acquisition's first gaps (see the module docs).
    #[default]
    Infer,
    /// The sender streams every Nth frame (N >= 1; 1: every frame, no inference).
    Every(u64),
}

/// Gaps looked at before a stride is inferred.
pub const INFER_GAPS: usize = 3;

/// What one gap (or the gaps held back until the stride was known) comes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GapOutcome {
    /// Frame numbers the sender skipped by design.
    pub sampled: u64,
    /// Missing stream frames, each with its report: `(count, message)`.
    pub missing: Vec<(u64, String)>,
    /// A note for a person: the stride was inferred.
    pub note: Option<String>,
}

/// A gap between two frame numbers of an acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Gap {
    /// The frame number before it.
    after: u64,
    /// The frame number after it.
    next: u64,
    /// Frames inside it that cluda dropped itself (its queue was full).
    dropped: u64,
}

/// One acquisition's stride bookkeeping.
#[derive(Clone, Debug)]
pub struct StrideCheck {
    /// The stride, once known (at once when given).
    stride: Option<u64>,
    /// Gaps held back until the stride is known.
    held: Vec<Gap>,
    /// A stride already stated to the person (by an earlier acquisition): not stated again.
    stated: Option<u64>,
    /// Whether the stride was inferred rather than given.
    inferred: bool,
}

impl StrideCheck {
    /// A fresh check for an acquisition.
    pub fn new(mode: Sampling) -> Self {
        Self {
            stride: match mode {
                Sampling::Every(n) => Some(n.max(1)),
                Sampling::Infer => None,
            },
            held: Vec::new(),
            stated: None,
            inferred: false,
        }
    }

    /// Does not state an inferred stride of `stated` again (an earlier acquisition of the
    /// stream stated it).
    pub fn already_stated(mut self, stated: Option<u64>) -> Self {
        self.stated = stated;
        self
    }

    /// Whether the stride was inferred (not given) and is more than 1.
    pub fn inferred_stride(&self) -> Option<u64> {
        match (self.inferred, self.stride) {
            (true, Some(n)) if n > 1 => Some(n),
            _ => None,
        }
    }

    /// The stride in use, once known (1: every frame).
    pub fn stride(&self) -> Option<u64> {
        self.stride
    }

    /// Frames `after` and `next` (`next > after`) came one after the other, `dropped` frames
    /// between them dropped by cluda: what the gap between them comes to.
    pub fn gap(&mut self, after: u64, next: u64, dropped: u64) -> GapOutcome {
        let gap = Gap {
            after,
            next,
            dropped,
        };
        if let Some(n) = self.stride {
            return judge(&[gap], n, false);
        }
        self.held.push(gap);
        let d0 = self.held[0].next - self.held[0].after;
        let uniform = self
            .held
            .iter()
            .all(|g| g.next - g.after == d0 && g.dropped == 0);
        if !uniform || d0 == 1 {
            return self.decide(1);
        }
        if self.held.len() >= INFER_GAPS {
            return self.decide(d0);
        }
        GapOutcome::default()
    }

    /// The acquisition ended: gaps still held back are judged with what is known (two or
    /// more gaps of the same width N > 1 are taken as a stride of N, fewer as losses).
    pub fn finish(&mut self) -> GapOutcome {
        if self.held.is_empty() {
            return GapOutcome::default();
        }
        let d0 = self.held[0].next - self.held[0].after;
        let n = if self.held.len() >= 2 { d0 } else { 1 };
        self.decide(n)
    }

    /// Fixes the stride at `n` and judges the gaps held back.
    fn decide(&mut self, n: u64) -> GapOutcome {
        self.stride = Some(n);
        self.inferred = true;
        let held = std::mem::take(&mut self.held);
        judge(&held, n, n > 1 && self.stated != Some(n))
    }
}

/// Judges `gaps` with stride `n`; `inferred`: state that the stride was inferred.
fn judge(gaps: &[Gap], n: u64, inferred: bool) -> GapOutcome {
    let mut out = GapOutcome::default();
    if inferred && let Some(g) = gaps.first() {
        out.note = Some(format!(
            "frame numbers advance by {n} (frame {} after {}, {} gaps alike): the sender \
             streams 1 frame in {n} (slsReceiver `rx_zmqfreq {n}`); the frames between are \
             counted as sampled, not missing, and only a gap wider than {n} is reported \
             (`--sampled 1` counts every gap as missing)",
            g.next,
            g.after,
            gaps.len()
        ));
    }
    for g in gaps {
        let d = g.next - g.after;
        let expected = (d - 1) / n;
        out.sampled += d - 1 - expected;
        // A frame earlier than the stride (d < n: the sampling restarted) loses nothing.
        let broken = n > 1 && d > n && !d.is_multiple_of(n);
        let lost = expected.saturating_sub(g.dropped).max(u64::from(broken));
        if lost == 0 {
            continue;
        }
        let which = if d == 2 {
            format!("frame {}", g.after + 1)
        } else {
            format!("frames {}-{}", g.after + 1, g.next - 1)
        };
        let dropped = if g.dropped > 0 {
            format!(", {} of them dropped by cluda", g.dropped)
        } else {
            String::new()
        };
        let message = if n == 1 {
            format!(
                "{which} missing ({lost} frames never arrived{dropped}: lost before cluda, e.g. \
                 dropped at the sender's high-water mark)"
            )
        } else {
            format!(
                "{which}: the stride of {n} is broken (frame {} after {}): {lost} frames of the \
                 1-in-{n} stream never arrived{dropped} (lost before cluda, or by the \
                 receiver, whose 1-in-{n} count then shifts)",
                g.next, g.after
            )
        };
        out.missing.push((lost, message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mode: Sampling, numbers: &[u64]) -> (u64, u64, Vec<String>, bool) {
        let mut c = StrideCheck::new(mode);
        let mut outs = Vec::new();
        for w in numbers.windows(2) {
            outs.push(c.gap(w[0], w[1], 0));
        }
        outs.push(c.finish());
        let sampled = outs.iter().map(|o| o.sampled).sum();
        let missing = outs
            .iter()
            .flat_map(|o| o.missing.iter().map(|m| m.0))
            .sum();
        let messages = outs
            .iter()
            .flat_map(|o| o.missing.iter().map(|m| m.1.clone()))
            .collect();
        let noted = outs.iter().any(|o| o.note.is_some());
        (sampled, missing, messages, noted)
    }

    #[test]
    fn every_second_frame_is_inferred_and_not_missing() {
        let numbers: Vec<u64> = (0..50).map(|k| 3 + 2 * k).collect();
        let (sampled, missing, _, noted) = run(Sampling::Infer, &numbers);
        assert_eq!((sampled, missing, noted), (49, 0, true));
    }

    #[test]
    fn a_broken_stride_is_still_missing() {
        // Every 3rd frame; frame 16 lost on the way (gap 13 -> 19), then the receiver lost a
        // frame of its own (gap 22 -> 26).
        let numbers = [1, 4, 7, 10, 13, 19, 22, 26, 29];
        let (sampled, missing, messages, noted) = run(Sampling::Infer, &numbers);
        assert!(noted);
        assert_eq!(missing, 2, "{messages:?}");
        assert!(messages[0].contains("frames 14-18: the stride of 3 is broken"));
        assert_eq!(
            sampled + missing,
            20,
            "every frame number between is one or the other"
        );
        let (s, m, _, noted) = run(Sampling::Every(3), &numbers);
        assert_eq!((s, m, noted), (sampled, missing, false));
    }

    #[test]
    fn plain_losses_are_not_taken_for_sampling() {
        // Consecutive, then a gap: stride 1 decided at the first gap of 1.
        let (sampled, missing, m, noted) = run(Sampling::Infer, &[1, 2, 3, 6, 7]);
        assert_eq!((sampled, missing, noted), (0, 2, false));
        assert!(m[0].contains("frames 4-5 missing (2 frames never arrived"));
        // A first gap that the next ones do not repeat is a loss.
        let (sampled, missing, _, noted) = run(Sampling::Infer, &[1, 4, 5, 6]);
        assert_eq!((sampled, missing, noted), (0, 2, false));
        // One gap alone at the end of an acquisition: a loss.
        let (sampled, missing, _, _) = run(Sampling::Infer, &[1, 3]);
        assert_eq!((sampled, missing), (0, 1));
        // Given stride 1: every gap is missing, even regular ones.
        let (sampled, missing, _, _) = run(Sampling::Every(1), &[1, 3, 5, 7, 9]);
        assert_eq!((sampled, missing), (0, 4));
    }

    #[test]
    fn a_stride_stated_before_is_not_stated_again() {
        let mut c = StrideCheck::new(Sampling::Infer).already_stated(Some(2));
        let notes: Vec<_> = [(1, 3), (3, 5), (5, 7)]
            .iter()
            .map(|&(a, b)| c.gap(a, b, 0))
            .collect();
        assert!(notes.iter().all(|o| o.note.is_none()));
        assert_eq!(c.inferred_stride(), Some(2));
        assert_eq!(notes.iter().map(|o| o.sampled).sum::<u64>(), 3);
        let c = StrideCheck::new(Sampling::Every(2));
        assert_eq!(c.inferred_stride(), None);
    }

    #[test]
    fn frames_closer_than_the_stride_lose_nothing() {
        let (sampled, missing, _, _) = run(Sampling::Every(4), &[1, 5, 6, 7, 11]);
        assert_eq!((sampled, missing), (6, 0));
    }

    #[test]
    fn cluda_drops_are_not_missing_and_stop_inference() {
        let mut c = StrideCheck::new(Sampling::Every(2));
        let o = c.gap(1, 5, 1);
        assert_eq!((o.sampled, o.missing.len()), (2, 0));
        let mut c = StrideCheck::new(Sampling::Infer);
        let o = c.gap(1, 3, 1);
        assert_eq!(c.stride(), Some(1));
        assert_eq!((o.sampled, o.missing.len()), (0, 0));
    }
}
