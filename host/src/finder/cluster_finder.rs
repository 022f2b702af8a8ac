//! The contract every cluster finder keeps ([`ClusterFinder`]): the algorithm, apart from
//! how the streaming engine feeds it (`crate::engine::feeding`).

use std::sync::Arc;

use crate::cluster::{ClusterBatch, FrameClusters};
use crate::config::FinderConfig;
use crate::error::Result;
use crate::frames::Frames;
use crate::interpolation::{Accumulate, Accumulated, AccumulationPeek, PlaceRows};
use crate::pedestal::Pedestal;

/// What every cluster finder (CPU or GPU) offers, so callers switch devices without changing
/// code.
///
/// Frames are processed in order; each frame uses the pedestal left by the previous one, and
/// the quiet pixels of a frame all update the pedestal after it (docs/semantics.md). Results are
/// identical for every device, thread count and pipeline configuration.
pub trait ClusterFinder {
    /// The parameters that determine the results.
    fn config(&self) -> &FinderConfig;

    /// A short description of where the work runs (e.g. `cpu` or `gpu`).
    fn device(&self) -> String;

    /// Pushes dark frames into the pedestal (all pixels of every frame).
    ///
    /// # Errors
    /// [`crate::Error::Shape`] when the frames are not the configured `rows x cols`; a GPU
    /// finder also returns CUDA errors ([`crate::Error::Cuda`],
    /// [`crate::Error::OutOfDeviceMemory`]).
    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()>;

    /// Whether the pedestal holds N frames, so clusters can be found.
    fn is_ready(&self) -> bool;

    /// A copy of the current pedestal (a GPU finder downloads its device state).
    ///
    /// # Errors
    /// A GPU finder returns [`crate::Error::Cuda`] when the download fails.
    fn pedestal(&self) -> Result<Pedestal>;

    /// Replaces the pedestal (one saved earlier, or filled elsewhere); it must match the
    /// configuration (shape, window, precision), else nothing changes.
    ///
    /// # Errors
    /// [`crate::Error::Shape`] or [`crate::Error::InvalidParameter`] when the pedestal does not
    /// match the configuration (shape, window, precision); CUDA errors on a GPU finder.
    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()>;

    /// As [`ClusterFinder::set_pedestal`] with a copy of `pedestal`, into the finder's own
    /// arrays where it can: a stream starts every acquisition from the same saved pedestal, and
    /// a fresh copy (5 MB of new pages at 400 x 400) took about a millisecond of each start.
    ///
    /// # Errors
    /// As [`ClusterFinder::set_pedestal`].
    fn reset_pedestal(&mut self, pedestal: &Pedestal) -> Result<()> {
        self.set_pedestal(pedestal.clone())
    }

    /// Finds the clusters of every frame and hands each frame's clusters, borrowed, to `visit`
    /// in frame order, each named by the frame's number ([`FrameClusters::frame`] is
    /// [`Frames::number`]: its index unless the frames were numbered), allocating nothing per
    /// frame. If `visit` fails, the frames before the failing one stay consumed (their
    /// pedestal updates are kept) and its error is returned as [`crate::Error::Visitor`] or
    /// as is.
    ///
    /// # Errors
    /// * [`crate::Error::PedestalNotReady`] before the pedestal holds N frames;
    /// * [`crate::Error::Shape`] when the frames are not `rows x cols`;
    /// * [`crate::Error::ClusterLimit`] when a frame holds more clusters than a fixed cap (GPU;
    ///   it names the frame by its number);
    /// * [`crate::Error::Visitor`] or the visitor's own error when `visit` fails;
    /// * CUDA errors ([`crate::Error::Cuda`], [`crate::Error::OutOfDeviceMemory`]) on a GPU
    ///   finder.
    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()>;

    /// Asks the finder to accumulate `what` (an eta cube or a sub-pixel image) from every
    /// cluster it finds from now on, on its device, in its output stage: the clusters then
    /// need no pass on the host. `false` when it cannot (the CPU finder; a GPU pipeline
    /// without compacted results): the caller computes the same counts from the clusters it
    /// is handed. One accumulation at a time: while one is under way (until
    /// [`ClusterFinder::take_accumulated`]) a second is declined too, so that two sinks of
    /// one run (a live image and a live eta cube) never take each other's counts.
    ///
    /// # Errors
    /// A GPU finder's device errors (allocating the counts, uploading the maps).
    fn accumulate(&mut self, what: &Accumulate) -> Result<bool> {
        let _ = what;
        Ok(false)
    }

    /// What was accumulated since [`ClusterFinder::accumulate`] accepted, which stops
    /// accumulating; `None` when nothing was asked for.
    ///
    /// # Errors
    /// A GPU finder's device errors (the download of the counts).
    fn take_accumulated(&mut self) -> Result<Option<Accumulated>> {
        Ok(None)
    }

    /// A copy of what was accumulated so far since [`ClusterFinder::accumulate`] accepted,
    /// without stopping the accumulation (e.g. to refresh a live image while a stream runs);
    /// `None` when nothing is under way or the finder cannot read its counts mid-way (the
    /// default). A GPU finder narrows and downloads the counts on its compute stream, after
    /// every chunk whose clusters were handed out.
    ///
    /// # Errors
    /// A GPU finder's device errors (the download of the counts).
    fn peek_accumulated(&mut self) -> Result<Option<Accumulated>> {
        Ok(None)
    }

    /// A request that the finder answers with [`ClusterFinder::peek_accumulated`] between two
    /// chunks of its find calls whenever it was asked ([`AccumulationPeek::ask`], e.g. from
    /// the visitor the find call holds the finder for), for the accumulation under way; `None`
    /// when nothing is under way or the finder cannot (the default). Ended by
    /// [`ClusterFinder::take_accumulated`].
    fn accumulation_peek(&mut self) -> Option<Arc<AccumulationPeek>> {
        None
    }

    /// Asks the finder to place every cluster it finds from now on through `rules` on its
    /// device, and hand each frame's rows with its clusters ([`FrameClusters::placed`]: one
    /// row per cluster, in their order, what [`crate::interpolation::Placer`] computes for
    /// them, bit for bit), so that the host places nothing. `Some` starts, `None` stops
    /// (the rows of a frame handed out before stay valid for its visit). `false` when it
    /// cannot (the default; a GPU pipeline without compacted results): the frames come
    /// without rows and the caller places them.
    ///
    /// # Errors
    /// A GPU finder's device errors (uploading the maps).
    fn place_rows(&mut self, rules: Option<&PlaceRows>) -> Result<bool> {
        let _ = rules;
        Ok(false)
    }

    /// Finds the clusters of every frame and returns them as one owned batch.
    ///
    /// # Errors
    /// As [`ClusterFinder::find_each`].
    fn find(&mut self, frames: Frames<'_>) -> Result<ClusterBatch> {
        let mut batch = ClusterBatch::new(self.config().size);
        self.find_each(frames, &mut |fc| {
            batch.push_frame(fc.words());
            Ok(())
        })?;
        Ok(batch)
    }
}
