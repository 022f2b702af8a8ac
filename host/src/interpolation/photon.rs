//! Photons: each cluster placed at its sub-pixel position through an [`Interpolator`], with
//! flags saying why one was not placed.

use bytemuck::{Pod, Zeroable};
use cluda_gpu::eta;

use super::cube::Tally;
use super::maps::Interpolator;
use super::mask::PixelMask;
use crate::cluster::{ClusterRef, FrameClusters};
use crate::error::{Error, Result};

/// One photon as `--photons` writes it: a row of a structured little-endian `.npy` with
/// fields `frame` (int64, the cluster file's frame number), `x`, `y`, `energy` (float64) and
/// `flags` (uint8). Placed photons have flags 0; a flagged one holds its pixel's centre.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Photon {
    /// The frame number.
    pub frame: i64,
    /// Column position (pixel `c` spans `[c, c + 1)`; 1.5 is the centre of column 1).
    pub x: f64,
    /// Row position.
    pub y: f64,
    /// The eta's sum in ADU (aare's `energy`).
    pub energy: f64,
    /// 0 placed; else [`cluda_gpu::eta`]'s `FLAG_*` bits.
    pub flags: u8,
}

/// NumPy's descriptor of [`Photon`] rows (33 bytes, packed).
pub const PHOTON_DESCR: &str =
    "[('frame', '<i8'), ('x', '<f8'), ('y', '<f8'), ('energy', '<f8'), ('flags', 'u1')]";

/// An inclusive energy window `[lo, hi]` in ADU (`--energy-window LO:HI`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnergyWindow {
    /// Lowest energy kept.
    pub lo: f64,
    /// Highest energy kept.
    pub hi: f64,
}

impl EnergyWindow {
    /// Checks `lo <= hi`, neither NaN.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`energy-window`).
    pub fn new(lo: f64, hi: f64) -> Result<Self> {
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return Err(Error::param(
                "energy-window",
                format!("[{lo}, {hi}] is not a window (give LO:HI with LO <= HI)"),
            ));
        }
        Ok(Self { lo, hi })
    }

    /// Whether `e` is inside.
    pub fn contains(&self, e: f64) -> bool {
        self.lo <= e && e <= self.hi
    }
}

impl std::str::FromStr for EnergyWindow {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::param(
                "energy-window",
                format!("`{s}` is not LO:HI (two numbers in ADU, e.g. 200:600)"),
            )
        };
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let lo = a.trim().parse::<f64>().map_err(|_| bad())?;
        let hi = b.trim().parse::<f64>().map_err(|_| bad())?;
        Self::new(lo, hi)
    }
}

/// Places clusters through an interpolator: what `cluda image` and `--photons` do per
/// cluster, the same on every path.
#[derive(Clone, Copy, Debug)]
pub struct Placer<'a> {
    /// The maps.
    pub maps: &'a Interpolator,
    /// Photons outside it are flagged [`eta::FLAG_WINDOW`].
    pub window: Option<EnergyWindow>,
    /// Photons centred on a bad pixel are flagged [`eta::FLAG_MASKED`].
    pub mask: Option<&'a PixelMask>,
    /// Pixel values are divided by it first (etas and energies from keV values).
    pub gain: Option<&'a super::gain::GainMap>,
}

impl Placer<'_> {
    /// The photon of cluster `c` (of side `side`) in frame `frame`.
    pub fn place(&self, frame: i64, c: &ClusterRef<'_>, side: usize) -> Photon {
        let at = self.maps.axes().locate_cluster(c, side, self.gain);
        let energy = at.energy;
        let mut flags = at.flags;
        if self.mask.is_some_and(|m| m.is_bad(c.x, c.y)) {
            flags |= eta::FLAG_MASKED;
        }
        if self.window.is_some_and(|w| !w.contains(energy)) {
            flags |= eta::FLAG_WINDOW;
        }
        let (x, y) = match at.bins {
            Some((ix, iy, ie)) if flags == 0 => {
                let (u, w) = self.maps.lookup(ix, iy, ie);
                eta::place(self.maps.axes().kind, c.x, c.y, at.corner, u, w)
            }
            _ => (c.x as f64 + 0.5, c.y as f64 + 0.5),
        };
        Photon {
            frame,
            x,
            y,
            energy,
            flags,
        }
    }

    /// The photons of one frame numbered `frame`, appended to `out`, tallied into `tally`.
    pub fn place_frame(
        &self,
        frame: i64,
        clusters: &FrameClusters<'_>,
        tally: &mut Tally,
        out: &mut Vec<Photon>,
    ) {
        let side = clusters.size().side();
        out.reserve(clusters.len());
        for c in clusters.iter() {
            let p = self.place(frame, &c, side);
            tally.count(p.flags);
            out.push(p);
        }
    }
}
