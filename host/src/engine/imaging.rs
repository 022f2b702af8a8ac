//! The sinks of eta interpolation ([`super::sink::Sink`]s of a session): the eta cube of a
//! flat field ([`CubeSink`]), and photons placed through a cube's maps into a sub-pixel
//! image and/or photon lists ([`ImagingSink`]). Each asks the finder to accumulate its counts
//! on its device ([`ClusterFinder::accumulate`]: a GPU does it in its output stage, with no
//! pass over the clusters on the host) and counts on the host otherwise, with the same
//! arithmetic ([`cluda_gpu::eta`]). Every input is counted apart and added to the whole only
//! when it ended whole, so a failed input leaves the cube and the image as they were.

use std::path::PathBuf;
use std::sync::Arc;

use super::sink::Sink;
use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::interpolation::files::PhotonWriter;
use crate::interpolation::{
    Accumulate, CubeAxes, EnergyWindow, EtaCube, GainMap, Interpolator, Photon, PixelMask, Placer,
    SubpixelImage, Tally,
};
use crate::io::atomic::Claim;

/// Fills one eta cube from every input of a run.
pub struct CubeSink {
    cube: EtaCube,
    /// The current input's counts when the host counts them.
    current: Option<EtaCube>,
    /// Whether the finder accumulates the current input on its device.
    on_device: bool,
    /// Use the device when the finder offers it.
    allow_device: bool,
    /// Bad pixels whose clusters are left out.
    mask: Option<Arc<PixelMask>>,
    /// Pixel values divided by it first (keV).
    gain: Option<Arc<GainMap>>,
}

impl CubeSink {
    /// A sink filling an empty cube with `axes`; `allow_device` lets a GPU finder count.
    ///
    /// # Errors
    /// As [`EtaCube::new`].
    pub fn new(axes: CubeAxes, allow_device: bool) -> Result<Self> {
        Ok(Self {
            cube: EtaCube::new(axes)?,
            current: None,
            on_device: false,
            allow_device,
            mask: None,
            gain: None,
        })
    }

    /// The same sink dividing pixel values by `gain` first (energies in keV); counted on the
    /// host (the device's kernels have no gain).
    pub fn with_gain(mut self, gain: Option<Arc<GainMap>>) -> Self {
        if gain.is_some() {
            self.allow_device = false;
        }
        self.gain = gain;
        self
    }

    /// The same sink leaving out clusters centred on a bad pixel of `mask`. A masked cube is
    /// counted on the host (the device's cube kernel has no mask).
    pub fn with_mask(mut self, mask: Option<Arc<PixelMask>>) -> Self {
        if mask.is_some() {
            self.allow_device = false;
        }
        self.mask = mask;
        self
    }

    /// The cube of every input that ended whole.
    pub fn cube(&self) -> &EtaCube {
        &self.cube
    }

    /// Whether the last input was counted on the finder's device.
    pub fn counted_on_device(&self) -> bool {
        self.on_device
    }

    /// The cube.
    pub fn into_cube(self) -> EtaCube {
        self.cube
    }
}

impl Sink for CubeSink {
    fn begin(&mut self, _input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        let axes = self.cube.axes().clone();
        self.on_device = self.allow_device && finder.accumulate(&Accumulate::Cube(axes.clone()))?;
        self.current = if self.on_device {
            None
        } else {
            Some(
                EtaCube::new(axes)?
                    .with_mask(self.mask.clone())
                    .with_gain(self.gain.clone()),
            )
        };
        Ok(())
    }

    fn frame(&mut self, _input: usize, _number: u64, clusters: &FrameClusters<'_>) -> Result<()> {
        match self.current.as_mut() {
            Some(c) => c.add_frame(clusters),
            None => Ok(()),
        }
    }

    fn end(&mut self, _input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        if self.on_device {
            let a = finder
                .take_accumulated()?
                .ok_or_else(|| Error::Internal("the finder accumulated no eta cube".into()))?;
            self.cube.add_counts(a.size, &a.counts, &a.tally)
        } else if let Some(c) = self.current.take() {
            match c.cluster_size() {
                Some(size) => self.cube.add_counts(size, c.counts(), c.tally()),
                // No frame: nothing to add.
                None => Ok(()),
            }
        } else {
            Ok(())
        }
    }

    fn abandon(&mut self, _input: usize, finder: &mut dyn ClusterFinder) {
        if self.on_device {
            let _ = finder.take_accumulated();
        }
        self.current = None;
    }
}

/// Where an [`ImagingSink`] puts photons.
#[derive(Clone, Debug)]
pub struct ImagingOutputs {
    /// Count placed photons into an image of this many sub-pixels per pixel.
    pub subpixels: Option<u32>,
    /// Write each input's photons to the file at its index (`None`: that input's are not
    /// written).
    pub photons: Vec<Option<PathBuf>>,
    /// What a photon file's commit does with a file that is there by then.
    pub claim: Claim,
}

/// Places every cluster of a run through a cube's maps: counts into one sub-pixel image
/// over every input, and/or writes each input's photons ([`PhotonWriter`]).
pub struct ImagingSink {
    maps: Arc<Interpolator>,
    window: Option<EnergyWindow>,
    mask: Option<Arc<PixelMask>>,
    image: Option<SubpixelImage>,
    /// The current input's image when the host counts it.
    current: Option<SubpixelImage>,
    on_device: bool,
    allow_device: bool,
    photon_paths: Vec<Option<PathBuf>>,
    claim: Claim,
    writer: Option<PhotonWriter>,
    written: Vec<PathBuf>,
    tally: Tally,
    current_tally: Tally,
    buf: Vec<Photon>,
    /// The current frame's placed photons' sub-pixel indices.
    indices: Vec<u32>,
    /// Inputs that ended whole so far.
    inputs_ended: usize,
    /// Pixel values divided by it first (keV); counted on the host then.
    gain: Option<Arc<GainMap>>,
}

impl ImagingSink {
    /// A sink for frames of `rows x cols` pixels placing photons through `maps`.
    ///
    /// # Errors
    /// As [`SubpixelImage::new`]; [`Error::Shape`] for a mask of another shape.
    pub fn new(
        rows: usize,
        cols: usize,
        maps: Arc<Interpolator>,
        window: Option<EnergyWindow>,
        mask: Option<Arc<PixelMask>>,
        outputs: ImagingOutputs,
        allow_device: bool,
    ) -> Result<Self> {
        if let Some(m) = &mask
            && m.shape() != (rows, cols)
        {
            return Err(Error::shape(
                "mask",
                format!("{rows} x {cols} pixels (the frames')"),
                format!("{} x {} pixels", m.shape().0, m.shape().1),
            ));
        }
        let image = outputs
            .subpixels
            .map(|n| SubpixelImage::new(rows, cols, n))
            .transpose()?;
        Ok(Self {
            maps,
            window,
            mask,
            image,
            current: None,
            on_device: false,
            allow_device,
            photon_paths: outputs.photons,
            claim: outputs.claim,
            writer: None,
            written: Vec::new(),
            tally: Tally::default(),
            current_tally: Tally::default(),
            buf: Vec::new(),
            indices: Vec::new(),
            inputs_ended: 0,
            gain: None,
        })
    }

    /// The same sink dividing pixel values by `gain` first (energies in keV). Counted on the
    /// host (the device's kernels have no gain).
    ///
    /// # Errors
    /// [`Error::Shape`] for a map of another shape than the frames'.
    pub fn with_gain(mut self, gain: Option<Arc<GainMap>>) -> Result<Self> {
        if let (Some(g), Some(img)) = (&gain, &self.image) {
            let n = img.subpixels() as usize;
            let (h, w) = img.shape();
            if g.shape() != (h / n, w / n) {
                return Err(Error::shape(
                    "gain",
                    format!("{} x {} pixels (the frames')", h / n, w / n),
                    format!("{} x {} pixels", g.shape().0, g.shape().1),
                ));
            }
        }
        if gain.is_some() {
            self.allow_device = false;
        }
        self.gain = gain;
        Ok(self)
    }

    /// The image of every input that ended whole, if one is made.
    pub fn image(&self) -> Option<&SubpixelImage> {
        self.image.as_ref()
    }

    /// The photon files written.
    pub fn photon_files(&self) -> &[PathBuf] {
        &self.written
    }

    /// What was placed and left out, over every input that ended whole.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Whether the last input's image was counted on the finder's device.
    pub fn counted_on_device(&self) -> bool {
        self.on_device
    }

    /// Whether this frame's photons must be placed on the host.
    fn host_places(&self) -> bool {
        self.writer.is_some() || self.current.is_some()
    }
}

impl Sink for ImagingSink {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.current_tally = Tally::default();
        self.on_device = false;
        self.current = None;
        if let Some(img) = self.image.as_mut() {
            let (h, w) = img.shape();
            let n = img.subpixels();
            self.on_device = self.allow_device
                && finder.accumulate(&Accumulate::Image {
                    maps: self.maps.clone(),
                    subpixels: n,
                    window: self.window,
                    mask: self.mask.clone(),
                })?;
            if !self.on_device {
                // The first input counts straight into the image (no second image to zero and
                // add); later ones apart, so that a failed one leaves the image as it was.
                self.current = Some(if self.inputs_ended == 0 {
                    std::mem::replace(img, SubpixelImage::new(1, 1, 1)?)
                } else {
                    SubpixelImage::new(h / n as usize, w / n as usize, n)?
                });
            }
        }
        self.writer = match self.photon_paths.get(input).cloned().flatten() {
            Some(p) => Some(PhotonWriter::create(&p, self.claim)?),
            None => None,
        };
        Ok(())
    }

    fn frame(&mut self, _input: usize, number: u64, clusters: &FrameClusters<'_>) -> Result<()> {
        if !self.host_places() {
            return Ok(());
        }
        let frame = i64::try_from(number).map_err(|_| {
            Error::param(
                "photons",
                format!("frame number {number} does not fit the photon list's int64"),
            )
        })?;
        let placer = Placer {
            maps: &self.maps,
            window: self.window,
            mask: self.mask.as_deref(),
            gain: self.gain.as_deref(),
        };
        self.buf.clear();
        // The device tallies what it places; the host tallies only what it places itself.
        let mut tally = Tally::default();
        let side = clusters.size().side();
        let keep = self.writer.is_some();
        // Each photon placed (kept only when a photon list is written), its sub-pixel noted;
        // then the frame's sub-pixels counted in one tight loop.
        self.indices.clear();
        for c in clusters.iter() {
            let p = placer.place(frame, &c, side);
            tally.count(p.flags);
            if p.flags == 0
                && let Some(i) = self.current.as_ref().and_then(|img| img.index_of(p.x, p.y))
            {
                // Below the image's length, which fits u32 (at most 12800^2 sub-pixels).
                self.indices.push(i as u32);
            }
            if keep {
                self.buf.push(p);
            }
        }
        if let Some(img) = self.current.as_mut() {
            img.add_indices(&self.indices);
        }
        if !self.on_device {
            self.current_tally.add(&tally);
        }
        if let Some(w) = self.writer.as_mut() {
            w.write_pod(&self.buf)?;
        }
        Ok(())
    }

    fn end(&mut self, _input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        if let Some(w) = self.writer.take() {
            self.written.push(w.finish()?);
        }
        if self.on_device {
            let a = finder
                .take_accumulated()?
                .ok_or_else(|| Error::Internal("the finder accumulated no image".into()))?;
            if let Some(img) = self.image.as_mut() {
                img.add_counts(&a.counts)?;
            }
            self.tally.add(&a.tally);
        } else {
            if let (Some(img), Some(cur)) = (self.image.as_mut(), self.current.take()) {
                if self.inputs_ended == 0 {
                    *img = cur;
                } else {
                    img.add_image(&cur)?;
                }
            }
            let t = self.current_tally;
            self.tally.add(&t);
        }
        self.inputs_ended += 1;
        Ok(())
    }

    fn abandon(&mut self, _input: usize, finder: &mut dyn ClusterFinder) {
        if self.on_device {
            let _ = finder.take_accumulated();
        }
        // Dropped unfinished: its temporary file is removed.
        self.writer = None;
        if let (Some(img), Some(cur)) = (self.image.as_mut(), self.current.take())
            && self.inputs_ended == 0
        {
            // The image itself was lent to the failed first input: back to empty.
            let n = cur.subpixels();
            let (h, w) = cur.shape();
            if let Ok(empty) = SubpixelImage::new(h / n as usize, w / n as usize, n) {
                *img = empty;
            }
        }
    }
}
