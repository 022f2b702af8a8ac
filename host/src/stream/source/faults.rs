//! Faults counted and reported (at most a few per kind), frames the receiver dropped, and
//! falling behind.

use std::time::{Duration, Instant};

use super::Acquisition;
use super::events::{FaultKind, StreamEvent};
use crate::stream::assembly::PartFault;

/// Reports per kind before further ones are suppressed, per acquisition.
const REPORTS_PER_KIND: u32 = 20;

/// Interval between "falling behind" reports.
const BEHIND_EVERY: Duration = Duration::from_secs(2);

impl<'r> Acquisition<'r> {
    pub(super) fn fault(&mut self, kind: FaultKind, n: u64, message: String) {
        match kind {
            FaultKind::Missing => self.counts.missing += n,
            FaultKind::Incomplete => self.counts.incomplete += n,
            FaultKind::Mismatch => self.counts.mismatched += n,
            FaultKind::Malformed => self.counts.malformed += n,
            FaultKind::Dropped => self.counts.dropped += n,
            FaultKind::Restart => self.counts.restarts += n,
            FaultKind::Late => self.counts.late += n,
            FaultKind::Duplicate => self.counts.duplicates += n,
        }
        let seen = self.reported.entry(kind).or_insert(0);
        *seen += 1;
        if *seen <= REPORTS_PER_KIND {
            (self.report)(&StreamEvent::Fault { kind, message });
        } else if *seen == REPORTS_PER_KIND + 1 {
            (self.report)(&StreamEvent::Suppressed(kind));
        }
    }

    /// Accounts for frames dropped by the receiving thread before the messages taken so far;
    /// returns how many of them lie strictly between frame numbers `after` and `before`.
    pub(super) fn account_drops(&mut self, after: Option<u64>, before: Option<u64>) -> u64 {
        let (ranges, unnumbered) = self.receiver.take_drops();
        let mut inside = 0;
        for (a, b) in ranges {
            let n = b - a + 1;
            let lo = after.map_or(a, |x| a.max(x.saturating_add(1)));
            let hi = before.map_or(b, |y| b.min(y.saturating_sub(1)));
            if lo <= hi {
                inside += hi - lo + 1;
            }
            let which = if a == b {
                format!("frame {a}")
            } else {
                format!("frames {a}-{b}")
            };
            self.fault(
                FaultKind::Dropped,
                n,
                format!(
                    "{which} dropped: cluda's queue of {} frames was full (it is not keeping up)",
                    self.receiver.config().queue_frames
                ),
            );
        }
        if unnumbered > 0 {
            self.fault(
                FaultKind::Dropped,
                unnumbered,
                format!("{unnumbered} frames with unreadable headers dropped: the queue was full"),
            );
        }
        inside
    }

    pub(super) fn behind(&mut self) {
        let depth = self.receiver.depth();
        self.counts.peak_queue = self.counts.peak_queue.max(depth);
        let capacity = self.receiver.config().queue_frames;
        let worried = depth * 2 > capacity || self.counts.dropped > 0;
        if worried && self.last_behind.is_none_or(|t| t.elapsed() >= BEHIND_EVERY) {
            self.last_behind = Some(Instant::now());
            (self.report)(&StreamEvent::Behind {
                depth,
                capacity,
                dropped: self.counts.dropped,
            });
        }
    }
}

/// The counter a part's fault goes to.
pub(super) fn fault_kind(k: PartFault) -> FaultKind {
    match k {
        PartFault::Incomplete => FaultKind::Incomplete,
        PartFault::Dropped => FaultKind::Dropped,
        PartFault::Mismatch => FaultKind::Mismatch,
        PartFault::Late => FaultKind::Late,
        PartFault::Malformed => FaultKind::Malformed,
        PartFault::Restart => FaultKind::Restart,
        PartFault::Duplicate => FaultKind::Duplicate,
    }
}
