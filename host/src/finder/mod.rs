//! Cluster finders: the trait every device implements, and the CPU reference finder.

pub mod cpu;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod select;

use crate::cluster::{ClusterBatch, FrameClusters};
use crate::config::FinderConfig;
use crate::error::Result;
use crate::frames::Frames;
use crate::pedestal::Pedestal;

pub use cpu::CpuFinder;

/// What every cluster finder (CPU or GPU) offers, so callers switch devices without changing
/// code.
///
/// Frames are processed in order; each frame uses the pedestal left by the previous one, and
/// the quiet pixels of a frame update the pedestal together after it (DESIGN.md). Results are
/// identical for every device, thread count and pipeline configuration.
pub trait ClusterFinder {
    /// The parameters that determine the results.
    fn config(&self) -> &FinderConfig;

    /// A short description of where the work runs (e.g. `cpu` or `gpu`).
    fn device(&self) -> String;

    /// Pushes dark frames into the pedestal (all pixels of every frame).
    fn push_pedestal(&mut self, frames: Frames<'_>) -> Result<()>;

    /// Whether the pedestal holds N frames, so clusters can be found.
    fn is_ready(&self) -> bool;

    /// A copy of the current pedestal (a GPU finder downloads its device state).
    fn pedestal(&self) -> Result<Pedestal>;

    /// Replaces the pedestal (one saved earlier, or filled elsewhere); it must match the
    /// configuration (shape, window, precision), else nothing changes.
    fn set_pedestal(&mut self, pedestal: Pedestal) -> Result<()>;

    /// Finds the clusters of every frame and hands each frame's clusters, borrowed, to `visit`
    /// in frame order, allocating nothing per frame. If `visit` fails, the frames before the
    /// failing one stay consumed (their pedestal updates are kept) and its error is returned
    /// as [`crate::Error::Visitor`] or as is.
    fn find_each(
        &mut self,
        frames: Frames<'_>,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<()>;

    /// Finds the clusters of every frame and returns them as one owned batch.
    fn find(&mut self, frames: Frames<'_>) -> Result<ClusterBatch> {
        let mut batch = ClusterBatch::new(self.config().size);
        self.find_each(frames, &mut |fc| {
            batch.push_frame(fc.words());
            Ok(())
        })?;
        Ok(batch)
    }
}
