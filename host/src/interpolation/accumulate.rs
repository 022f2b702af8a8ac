//! What a finder may accumulate on its device while it finds, so that the clusters need no
//! pass on the host: an eta cube, or a sub-pixel image. A finder that cannot declines
//! ([`crate::finder::ClusterFinder::accumulate`]) and the host computes the same counts
//! from the clusters it is handed.

use std::sync::Arc;

use super::cube::{CubeAxes, Tally};
use super::maps::Interpolator;
use super::mask::PixelMask;
use super::photon::EnergyWindow;
use crate::cluster::ClusterSize;

/// What to accumulate from every cluster found.
#[derive(Clone, Debug)]
pub enum Accumulate {
    /// Counts of the eta cube with these axes (bins C order), clusters outside every edge
    /// left out and tallied.
    Cube(CubeAxes),
    /// Counts of a sub-pixel image of every placed photon.
    Image {
        /// The maps photons are placed through.
        maps: Arc<Interpolator>,
        /// Sub-pixels per pixel along each axis.
        subpixels: u32,
        /// Photons outside it are flagged and not counted.
        window: Option<EnergyWindow>,
        /// Photons centred on a bad pixel are flagged and not counted.
        mask: Option<Arc<PixelMask>>,
    },
}

/// Accumulated counts, C order.
#[derive(Clone, Debug, PartialEq)]
pub enum AccumulatedCounts {
    /// An eta cube's counts.
    Cube(Vec<u64>),
    /// A sub-pixel image's counts, saturated to `u32` (counted in 64 bits, narrowed on the
    /// device, so they come down at half the size).
    Image(Vec<u32>),
}

/// What a finder accumulated: per-bin (or per-sub-pixel) counts and the tally of the
/// clusters seen.
#[derive(Clone, Debug, PartialEq)]
pub struct Accumulated {
    /// The counts.
    pub counts: AccumulatedCounts,
    /// The clusters seen, placed or counted, and left out.
    pub tally: Tally,
    /// The cluster size they were found with.
    pub size: ClusterSize,
}
