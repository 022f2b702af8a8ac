//! The caller's callbacks and the live sub-pixel image of the current acquisition.

use std::time::Duration;

use super::summary::AcquisitionSummary;
use crate::cluster::FrameClusters;
use crate::engine::imaging::ImagingSink;
use crate::engine::sink::Sink;
use crate::error::Result;
use crate::finder::ClusterFinder;
use crate::stream::source::{Reporter, StreamEvent};

/// What the caller gets while the stream runs.
pub struct Callbacks<'a> {
    /// Faults and "falling behind" reports (may be called from the engine's reader thread).
    pub report: Reporter,
    /// Notes (device chosen, pedestal progress) for a person.
    pub note: &'a mut dyn FnMut(&str),
    /// One summary per acquisition, when it is done.
    pub summary: &'a mut dyn FnMut(&AcquisitionSummary) -> Result<()>,
    /// Every data frame's clusters with the frame shape, after they were written (e.g. for
    /// plots).
    pub frame: &'a mut dyn FnMut((usize, usize), &FrameClusters<'_>),
    /// With a sub-pixel image per acquisition ([`StreamImaging::image`](super::StreamImaging::image)): a live view of it,
    /// given a copy while the acquisition runs and its final image when it ended whole;
    /// `None`: no copies are made (the image is still written beside the cluster file).
    pub image: Option<LiveImage<'a>>,
}

/// A live view of each data acquisition's sub-pixel image (`cluda stream --eta --plot`).
pub struct LiveImage<'a> {
    /// Least time between two copies while an acquisition runs (the first one this long after
    /// its first data frame). A copy is asked for on the frame path and made off it: by the
    /// placement worker that counts the image on the host, or by the GPU finder between two
    /// chunks ([`crate::engine::imaging::ImagingSink::request_snapshot`]), so refreshing
    /// does not hold up the stream; each costs one copy of the image.
    pub every: Duration,
    /// Called with each copy as it comes, on the thread that visits frames (hand the image
    /// over, e.g. to a drawing thread), and with the final image, before the acquisition's
    /// summary.
    pub show: &'a mut dyn FnMut(ImageUpdate),
}

/// A data acquisition's sub-pixel image handed to a [`LiveImage`].
#[derive(Clone, Debug)]
pub struct ImageUpdate {
    /// The acquisition's `fileIndex`.
    pub file_index: u64,
    /// Its photons counted so far, or all of them when `done`.
    pub image: crate::interpolation::SubpixelImage,
    /// Whether this is the final image, the one written beside the cluster file.
    pub done: bool,
}

/// An acquisition's [`ImagingSink`] as the engine's sink, asking it for a copy of its image at
/// most every [`LiveImage::every`] while frames come and handing each copy to the live view.
/// A copy that fails is reported and ends the live view of this acquisition; its image and
/// clusters are not affected.
pub(super) struct LiveSink<'s, 'a> {
    pub(super) sink: &'s mut ImagingSink,
    pub(super) view: Option<&'s mut LiveImage<'a>>,
    pub(super) file_index: u64,
    pub(super) report: Reporter,
    /// When the last copy was asked for (or the first frame came); `None` before it.
    pub(super) since: Option<std::time::Instant>,
    /// A copy was asked for and has not come yet.
    pub(super) waiting: bool,
}

impl LiveSink<'_, '_> {
    /// The live view's part of a frame: a copy that came is shown, a new one asked for when
    /// it is due.
    fn refresh(&mut self) -> Result<()> {
        let Some(view) = self.view.as_mut() else {
            return Ok(());
        };
        if self.waiting
            && let Some(image) = self.sink.take_snapshot()?
        {
            self.waiting = false;
            (view.show)(ImageUpdate {
                file_index: self.file_index,
                image,
                done: false,
            });
        }
        let now = std::time::Instant::now();
        let since = *self.since.get_or_insert(now);
        if !self.waiting && now.duration_since(since) >= view.every {
            self.since = Some(now);
            self.waiting = self.sink.request_snapshot()?;
        }
        Ok(())
    }
}

impl Sink for LiveSink<'_, '_> {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.sink.begin(input, finder)
    }

    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        self.sink.frame(input, clusters)?;
        if let Err(e) = self.refresh() {
            self.view = None;
            (self.report)(&StreamEvent::Output(format!(
                "acquisition {}: no more live copies of its sub-pixel image ({e}); the image itself is not affected",
                self.file_index
            )));
        }
        Ok(())
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.sink.end(input, finder)
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        self.sink.abandon(input, finder)
    }
}
