//! The stream's receiver with the message that starts the next acquisition.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::stream::header::{HeaderFault, ZmqHeader};
use crate::stream::inlet::Inlet;
use crate::stream::receiver::Message;
use crate::stream::source::{FaultKind, Reporter, StreamEvent};

/// The stream's receiver with the message that starts the next acquisition.
pub(super) struct Inbox {
    pub(super) receiver: Inlet,
    pub(super) pending: Option<Message>,
    /// Malformed messages between acquisitions, counted in the next one.
    pub(super) stray: u64,
    /// Frames of impossible shapes between acquisitions, counted in the next one.
    pub(super) stray_mismatched: u64,
}

impl Inbox {
    /// Waits for the first data frame of the next acquisition (kept as pending) and returns
    /// its header; `None` when `stop` is set first. End messages with no frames before them and
    /// unreadable messages are reported and skipped. `tick` is called at least every 50 ms
    /// while it waits (to finish what finished in the background).
    ///
    /// Frames that wait for parts (an endpoint is silent) do not keep an acquisition from
    /// starting beyond a stop request or `idle_end` of quiet on every endpoint: they are given
    /// up then, so the acquisition starts with them and reports them incomplete.
    pub(super) fn next_acquisition(
        &mut self,
        stop: &AtomicBool,
        idle_end: Duration,
        report: &Reporter,
        tick: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<ZmqHeader>> {
        loop {
            tick()?;
            let stopping = stop.load(Ordering::SeqCst);
            if stopping && self.pending.is_none() && self.receiver.give_up_waiting() == 0 {
                return Ok(None);
            }
            for event in self.receiver.take_events() {
                report(&event.into());
            }
            let wait = if stopping {
                Duration::ZERO
            } else {
                Duration::from_millis(50)
            };
            let msg = match self.pending.take() {
                Some(m) => m,
                None => match self.receiver.next(wait)? {
                    Some(m) => m,
                    None if stopping => return Ok(None),
                    None => {
                        let quiet = self
                            .receiver
                            .last_heard()
                            .is_some_and(|t| t.elapsed() >= idle_end);
                        if !idle_end.is_zero() && quiet && self.receiver.waiting() > 0 {
                            self.receiver.give_up_waiting();
                        }
                        continue;
                    }
                },
            };
            match msg.header() {
                Ok(h) if h.is_data() => {
                    let (rows, cols) = h.rows_cols();
                    if rows == 0 || cols == 0 || rows > 65536 || cols > 65536 {
                        self.stray_mismatched += 1;
                        report(&StreamEvent::Fault {
                            kind: FaultKind::Mismatch,
                            message: format!(
                                "frame {}: shape [{}, {}] is not a frame cluda can process (1 to 65536 rows and columns); skipped",
                                h.number(),
                                h.shape[0],
                                h.shape[1]
                            ),
                        });
                        continue;
                    }
                    self.pending = Some(msg);
                    return Ok(Some(h));
                }
                Ok(_) => report(&StreamEvent::Fault {
                    kind: FaultKind::Malformed,
                    message: "an end-of-acquisition message with no frames before it; ignored"
                        .into(),
                }),
                Err(HeaderFault::Malformed(why) | HeaderFault::Mismatch(why)) => {
                    self.stray += 1;
                    report(&StreamEvent::Fault {
                        kind: FaultKind::Malformed,
                        message: format!(
                            "malformed message between acquisitions: {why}; skipped (counted in the next acquisition)"
                        ),
                    })
                }
            }
        }
    }
}
