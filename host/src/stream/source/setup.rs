//! An acquisition opened and set up (receiver ROI, sampling), and what its caller reads of it
//! while it runs.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Acquisition;
use super::events::{AcquisitionCounts, Ending, FaultKind, Reporter, StreamEvent};
use crate::error::Result;
use crate::io::raw::Roi;
use crate::stream::inlet::Inlet;
use crate::stream::receiver::Message;
use crate::stream::sampling::{GapOutcome, Sampling, StrideCheck};

impl<'r> Acquisition<'r> {
    /// The acquisition whose first message is in `pending` (or comes next), of `rows x cols`
    /// frames.
    pub(crate) fn new(
        receiver: &'r mut Inlet,
        pending: &'r mut Option<Message>,
        (rows, cols): (usize, usize),
        stop: Arc<AtomicBool>,
        report: Reporter,
    ) -> Self {
        Self {
            receiver,
            pending,
            rows,
            cols,
            stop,
            report,
            max_wait: Duration::from_millis(10),
            idle_end: Duration::ZERO,
            last_message: Instant::now(),
            draining: None,
            idle_given_up: false,
            counts: AcquisitionCounts::default(),
            max_frame_number: u64::MAX,
            key: None,
            last: None,
            reported: Default::default(),
            last_behind: None,
            arrivals: Arc::new(Mutex::new(VecDeque::new())),
            strides: StrideCheck::new(Sampling::Infer),
            crop: None,
        }
    }

    /// Delivers every frame cut down to `roi` (detector pixels, both ends inclusive; the
    /// frames sent are still checked whole): what the receiver writes to its raw files with
    /// `rx_roi`. The frames are then of the ROI's shape and lie at its corner
    /// ([`FrameSource::origin`](crate::io::FrameSource::origin)). Before the first frame.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::error::Error::Shape) when `roi` does not lie inside the acquisition's frames.
    pub fn crop_to(&mut self, roi: Roi) -> Result<()> {
        if !roi.fits(self.rows, self.cols) {
            return Err(crate::Error::shape(
                "the receiver ROI (rx_roi) to cut the stream's frames down to",
                format!("an ROI inside frames of {} x {}", self.rows, self.cols),
                format!("ROI {roi} (xmin, xmax, ymin, ymax)"),
            ));
        }
        self.crop = Some(roi);
        Ok(())
    }

    /// Sets how the frame numbers are expected to advance (default: a stride inferred, see
    /// [`crate::stream::sampling`]); `stated`: an inferred stride an earlier acquisition of the stream
    /// stated already (not stated again). Before the first frame.
    pub fn set_sampling(&mut self, sampling: Sampling, stated: Option<u64>) {
        self.strides = StrideCheck::new(sampling).already_stated(stated);
    }

    /// The stride this acquisition inferred, when it inferred one above 1.
    pub fn inferred_stride(&self) -> Option<u64> {
        self.strides.inferred_stride()
    }

    /// Judges the gaps still held back by the stride inference (the acquisition ended):
    /// counts them and reports the missing ones. Called once the acquisition has ended; a
    /// second call does nothing.
    pub fn finish_gaps(&mut self) {
        let outcome = self.strides.finish();
        self.book_gaps(outcome);
    }

    /// Counts and reports what gaps came to.
    pub(super) fn book_gaps(&mut self, outcome: GapOutcome) {
        if let Some(note) = outcome.note {
            (self.report)(&StreamEvent::Note(note));
        }
        self.counts.sampled += outcome.sampled;
        for (n, message) in outcome.missing {
            self.fault(FaultKind::Missing, n, message);
        }
        self.counts.stride = self.strides.stride();
    }

    /// Arrival times of the frames delivered and not yet claimed, by frame number: the
    /// visitor takes them in order to measure the lag.
    pub fn arrivals(&self) -> Arc<Mutex<VecDeque<(u64, Instant)>>> {
        Arc::clone(&self.arrivals)
    }

    /// Whether the acquisition has ended.
    pub fn ended(&self) -> bool {
        self.counts.ending != Ending::Open
    }
}
