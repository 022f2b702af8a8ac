//! Eta interpolation: from clusters to photons at sub-pixel positions and to images finer
//! than the pixel (the MOENCH imaging workflow, as aare defines it).
//!
//! ```text
//!  flat field --find--> clusters --eta--> EtaCube (counts of eta_x, eta_y, energy)
//!                                              |  Interpolator::new (cumulative / Rosenblatt maps)
//!  sample    --find--> clusters --eta--> bin --+--> Photon (x, y, energy, flags) --> SubpixelImage
//! ```
//!
//! The per-cluster arithmetic (eta, bins, placement, the sub-pixel index) is
//! [`cluda_gpu::eta`], shared by the CPU and the GPU; this module holds the host side: checked
//! edges ([`Edges`]), the cube ([`EtaCube`]), the maps ([`Interpolator`], built as aare builds
//! them), photons ([`Placer`], [`Photon`]), images ([`SubpixelImage`]) and their files
//! ([`files`]). The conventions, their sources and every deliberate difference from aare are
//! in `docs/interpolation.md`.

pub mod accumulate;
pub mod cube;
pub mod edges;
pub mod files;
pub mod gain;
pub mod image;
pub mod maps;
pub mod mask;
pub mod photon;

pub use accumulate::{Accumulate, Accumulated, AccumulatedCounts, AccumulationPeek, PlaceRows};
pub use cluda_gpu::eta::PlacedRow;
pub use cluda_gpu::eta::{Corner, Eta, EtaKind};
pub use cube::{CubeAxes, EtaCube, Tally};
pub use edges::Edges;
pub use gain::GainMap;
pub use image::{MAX_SUBPIXELS, SubpixelImage};
pub use maps::{Interpolator, MapKind};
pub use mask::PixelMask;
pub use photon::{EnergyWindow, Photon, Placer};

impl std::str::FromStr for EtaKindArg {
    type Err = crate::error::Error;
    fn from_str(s: &str) -> crate::error::Result<Self> {
        EtaKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .map(EtaKindArg)
            .ok_or_else(|| {
                crate::error::Error::param(
                    "eta",
                    format!("`{s}` is not one of eta2, full-eta2, eta3, cross-eta3"),
                )
            })
    }
}

/// An [`EtaKind`] parsed from its name (`eta2`, `full-eta2`, `eta3`, `cross-eta3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtaKindArg(pub EtaKind);
