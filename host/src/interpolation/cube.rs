//! The eta cube: a 3-D histogram of (eta_x, eta_y, energy) over the clusters of a flat field,
//! from which [`super::Interpolator`] builds its maps.

use cluda_gpu::eta::{self, EtaKind};

use super::edges::Edges;
use super::mask::PixelMask;
use crate::cluster::{ClusterSize, FrameClusters};
use crate::error::{Error, Result};

/// Largest cube accepted, in bins (2^28 bins: 2 GiB of `u64` counts).
pub const MAX_BINS: usize = 1 << 28;

/// How many clusters were counted and how many were left out, and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Clusters seen.
    pub clusters: u64,
    /// Clusters counted into a bin (or placed, for photons).
    pub inside: u64,
    /// Clusters whose eta was outside the eta edges (either axis, NaN included).
    pub eta_outside: u64,
    /// Clusters whose energy was outside the energy edges.
    pub energy_outside: u64,
    /// Clusters whose centre pixel is masked.
    pub masked: u64,
    /// Clusters outside the energy window.
    pub window: u64,
}

impl Tally {
    /// Counts one cluster with `flags` ([`cluda_gpu::eta`]'s `FLAG_*`; 0: inside).
    pub fn count(&mut self, flags: u8) {
        self.clusters += 1;
        if flags == 0 {
            self.inside += 1;
        }
        if flags & eta::FLAG_ETA_OUTSIDE != 0 {
            self.eta_outside += 1;
        }
        if flags & eta::FLAG_ENERGY_OUTSIDE != 0 {
            self.energy_outside += 1;
        }
        if flags & eta::FLAG_MASKED != 0 {
            self.masked += 1;
        }
        if flags & eta::FLAG_WINDOW != 0 {
            self.window += 1;
        }
    }

    /// Adds another tally's counts.
    pub fn add(&mut self, other: &Tally) {
        self.clusters += other.clusters;
        self.inside += other.inside;
        self.eta_outside += other.eta_outside;
        self.energy_outside += other.energy_outside;
        self.masked += other.masked;
        self.window += other.window;
    }

    /// `key=value` pairs for a summary line.
    pub fn summary(&self) -> String {
        format!(
            "clusters={} inside={} eta_outside={} energy_outside={} masked={} outside_window={}",
            self.clusters,
            self.inside,
            self.eta_outside,
            self.energy_outside,
            self.masked,
            self.window
        )
    }
}

/// What a cube's axes are and how its clusters were described.
#[derive(Clone, Debug, PartialEq)]
pub struct CubeAxes {
    /// The eta the clusters were described by.
    pub kind: EtaKind,
    /// Edges along eta_x (axis 0).
    pub x: Edges,
    /// Edges along eta_y (axis 1).
    pub y: Edges,
    /// Edges along the energy (axis 2).
    pub e: Edges,
}

impl CubeAxes {
    /// aare's and cluda's defaults: `kind`, eta edges `numpy.linspace(-0.1, 1.1, 202)` on
    /// both axes, one energy bin `[0, +inf]`.
    pub fn default_for(kind: EtaKind) -> Self {
        let eta = |name| {
            Edges::linspace(name, -0.1, 1.1, 201).unwrap_or_else(|_| unreachable!("fixed edges"))
        };
        Self {
            kind,
            x: eta("xbins"),
            y: eta("ybins"),
            e: Edges::new("ebins", vec![0.0, f64::INFINITY])
                .unwrap_or_else(|_| unreachable!("fixed edges")),
        }
    }

    /// Bins of the cube (`x.bins() * y.bins() * e.bins()`), checked against [`MAX_BINS`].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`bins`) for a cube larger than [`MAX_BINS`].
    pub fn bins(&self) -> Result<usize> {
        let n = self
            .x
            .bins()
            .checked_mul(self.y.bins())
            .and_then(|n| n.checked_mul(self.e.bins()));
        match n {
            Some(n) if n <= MAX_BINS => Ok(n),
            _ => Err(Error::param(
                "bins",
                format!(
                    "a cube of {} x {} x {} bins is larger than the {MAX_BINS} bins accepted",
                    self.x.bins(),
                    self.y.bins(),
                    self.e.bins()
                ),
            )),
        }
    }

    /// The cube's shape `(x bins, y bins, energy bins)`.
    pub fn shape(&self) -> [usize; 3] {
        [self.x.bins(), self.y.bins(), self.e.bins()]
    }

    /// Where cluster `c` (of side `side`) falls, its values divided by `gain` first when
    /// there is one (energies in keV).
    pub fn locate_cluster(
        &self,
        c: &crate::cluster::ClusterRef<'_>,
        side: usize,
        gain: Option<&super::gain::GainMap>,
    ) -> eta::Located {
        match gain {
            None => self.locate(c.data, side),
            Some(g) => {
                let mut v = [0.0f64; 81];
                g.divide(c, side, &mut v);
                eta::locate_eta(
                    eta::eta_of(self.kind, |i| v[i], side),
                    self.x.as_slice(),
                    self.y.as_slice(),
                    self.e.as_slice(),
                )
            }
        }
    }

    /// Where the cluster whose `side * side` values are `data` falls.
    pub fn locate(&self, data: &[i32], side: usize) -> eta::Located {
        eta::locate(
            self.kind,
            data,
            side,
            self.x.as_slice(),
            self.y.as_slice(),
            self.e.as_slice(),
        )
    }
}

/// An eta cube being filled: integer counts per bin (C order, axis 0 = eta_x), and the tally
/// of what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct EtaCube {
    axes: CubeAxes,
    counts: Vec<u64>,
    tally: Tally,
    /// The cluster size of the clusters counted (`None` before the first).
    size: Option<ClusterSize>,
    /// Clusters centred on a bad pixel are left out (and tallied as masked).
    mask: Option<std::sync::Arc<PixelMask>>,
    /// Pixel values are divided by it first (energies in keV).
    gain: Option<std::sync::Arc<super::gain::GainMap>>,
}

impl EtaCube {
    /// An empty cube with `axes`.
    ///
    /// # Errors
    /// As [`CubeAxes::bins`].
    pub fn new(axes: CubeAxes) -> Result<Self> {
        let n = axes.bins()?;
        Ok(Self {
            axes,
            counts: vec![0; n],
            tally: Tally::default(),
            size: None,
            mask: None,
            gain: None,
        })
    }

    /// The same cube dividing each pixel value by `gain` first (energies in keV).
    pub fn with_gain(mut self, gain: Option<std::sync::Arc<super::gain::GainMap>>) -> Self {
        self.gain = gain;
        self
    }

    /// The same cube leaving out clusters centred on a bad pixel of `mask` (flag
    /// [`eta::FLAG_MASKED`]).
    pub fn with_mask(mut self, mask: Option<std::sync::Arc<PixelMask>>) -> Self {
        self.mask = mask;
        self
    }

    /// The axes.
    pub fn axes(&self) -> &CubeAxes {
        &self.axes
    }

    /// The counts, C order.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// What was counted and left out so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The cluster size counted, once a frame was added.
    pub fn cluster_size(&self) -> Option<ClusterSize> {
        self.size
    }

    /// Counts every cluster of a frame: into its bin when inside every edge, else into the
    /// tally of what was left out. Clusters on the frame's edge count like any other (their
    /// missing neighbours hold 0).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`cluster`) when the frame's cluster size differs from the
    /// frames counted before.
    pub fn add_frame(&mut self, frame: &FrameClusters<'_>) -> Result<()> {
        self.note_size(frame.size())?;
        let side = frame.size().side();
        let [_, ny, ne] = self.axes.shape();
        for c in frame.iter() {
            let at = self.axes.locate_cluster(&c, side, self.gain.as_deref());
            let masked = self.mask.as_ref().is_some_and(|m| m.is_bad(c.x, c.y));
            self.tally
                .count(at.flags | if masked { eta::FLAG_MASKED } else { 0 });
            if masked {
                continue;
            }
            if let Some((ix, iy, ie)) = at.bins {
                self.counts[eta::cube_index(ix, iy, ie, ny, ne)] += 1;
            }
        }
        Ok(())
    }

    /// Records the cluster size of what is counted, refusing a second one.
    fn note_size(&mut self, size: ClusterSize) -> Result<()> {
        match self.size {
            Some(s) if s != size => Err(Error::param(
                "cluster",
                format!("a cube of {s} clusters cannot count {size} clusters"),
            )),
            _ => {
                self.size = Some(size);
                Ok(())
            }
        }
    }

    /// Adds counts made elsewhere (a GPU's, or another input's) of clusters of `size`, with
    /// their tally.
    ///
    /// # Errors
    /// [`Error::Shape`] when `counts` is not this cube's length; as [`EtaCube::add_frame`]
    /// for another cluster size.
    pub fn add_counts(&mut self, size: ClusterSize, counts: &[u64], tally: &Tally) -> Result<()> {
        if counts.len() != self.counts.len() {
            return Err(Error::shape(
                "eta cube counts",
                format!("{} bins", self.counts.len()),
                format!("{} bins", counts.len()),
            ));
        }
        self.note_size(size)?;
        for (a, b) in self.counts.iter_mut().zip(counts) {
            *a += b;
        }
        self.tally.add(tally);
        Ok(())
    }

    /// The counts as `f64` (what `etacube` holds in an `.npz`; exact below 2^53 per bin).
    pub fn to_f64(&self) -> Vec<f64> {
        self.counts.iter().map(|&c| c as f64).collect()
    }
}
