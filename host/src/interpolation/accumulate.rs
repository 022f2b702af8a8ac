//! What a finder may accumulate on its device while it finds, so that the clusters need no
//! pass on the host: an eta cube, or a sub-pixel image. A finder that cannot declines
//! ([`crate::finder::ClusterFinder::accumulate`]) and the host computes the same counts
//! from the clusters it is handed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::cube::{CubeAxes, Tally};
use super::maps::Interpolator;
use super::mask::PixelMask;
use super::photon::EnergyWindow;
use crate::cluster::ClusterSize;
use crate::error::Result;

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

/// What places each cluster on a finder's device, for rows handed back with the clusters
/// ([`crate::finder::ClusterFinder::place_rows`]): the maps, and what flags a photon. Pixel
/// values divided by a gain map are placed on the host only.
#[derive(Clone, Debug)]
pub struct PlaceRows {
    /// The maps photons are placed through.
    pub maps: Arc<Interpolator>,
    /// Photons outside it are flagged.
    pub window: Option<EnergyWindow>,
    /// Photons centred on a bad pixel are flagged.
    pub mask: Option<Arc<PixelMask>>,
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

/// A request for a copy of what a finder accumulates on its device, made while the finder is
/// busy (its find calls hold it: e.g. from the visitor they call, to refresh a live image)
/// and answered by the finder itself between chunks, without stopping the accumulation
/// ([`crate::finder::ClusterFinder::accumulation_peek`]). Asking is an atomic store, taking
/// the answer a lock that is never held for long: neither slows the visitor.
#[derive(Debug, Default)]
pub struct AccumulationPeek {
    wanted: AtomicBool,
    answer: Mutex<Option<Result<Accumulated>>>,
}

impl AccumulationPeek {
    /// Asks for a copy of the counts: the finder answers after the chunk whose frames it is
    /// visiting (every frame visited by then is counted in it).
    pub fn ask(&self) {
        self.wanted.store(true, Ordering::Release);
    }

    /// Whether a copy was asked for and not answered yet.
    pub fn is_wanted(&self) -> bool {
        self.wanted.load(Ordering::Acquire)
    }

    /// The finder's answer: the counts so far, or why they could not be read (a newer answer
    /// replaces one not taken yet).
    pub fn answer(&self, counts: Result<Accumulated>) {
        if let Ok(mut a) = self.answer.lock() {
            *a = Some(counts);
        }
        self.wanted.store(false, Ordering::Release);
    }

    /// The latest answer not taken yet, if any.
    pub fn take_answer(&self) -> Option<Result<Accumulated>> {
        self.answer.lock().ok().and_then(|mut a| a.take())
    }
}
