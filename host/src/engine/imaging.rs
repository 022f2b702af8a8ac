//! The sinks of eta interpolation ([`super::sink::Sink`]s of a session): the eta cube of a
//! flat field ([`CubeSink`]), and photons placed through a cube's maps into a sub-pixel
//! image and/or photon lists ([`ImagingSink`]). Each asks the finder to accumulate its counts
//! on its device ([`ClusterFinder::accumulate`]: a GPU does it in its output stage, with no
//! pass over the clusters on the host) and counts on the host otherwise, with the same
//! arithmetic ([`cluda_gpu::eta`]). Every input is counted apart and added to the whole only
//! when it ended whole, so a failed input leaves the cube and the image as they were.
//!
//! Per-pixel maps (a bad-pixel mask, a gain map) must have the frames' shape:
//! [`frame_shape`], [`check_pixel_map`], [`read_mask_for`] and [`read_gain_for`] refuse
//! another one with an error naming the option, before a run starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::input::Input;
use super::placement::{self, PhotonList, PlacementRules, PlacementWorker};
use super::sink::Sink;
use crate::cluster::FrameClusters;
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::interpolation::files::{PhotonWriter, read_mask};
use crate::interpolation::{
    Accumulate, AccumulatedCounts, AccumulationPeek, CubeAxes, EnergyWindow, EtaCube, GainMap,
    Interpolator, Photon, PixelMask, PlaceRows, SubpixelImage, Tally,
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

    fn frame(&mut self, _input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
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
            match &a.counts {
                AccumulatedCounts::Cube(c) => self.cube.add_counts(a.size, c, &a.tally),
                AccumulatedCounts::Image(_) => Err(Error::Internal(
                    "the finder accumulated an image for an eta cube".into(),
                )),
            }
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

/// The frame shape `(rows, cols)` of the pedestal input at `pedestal` (a `.npy` stack or a
/// raw acquisition's master file): the shape every per-pixel map of a run must have.
///
/// # Errors
/// As [`Input::open`].
pub fn frame_shape(pedestal: &Path) -> Result<(usize, usize)> {
    let p = Input::open(pedestal, "pedestal")?;
    Ok((p.frames.rows(), p.frames.cols()))
}

/// Refuses a per-pixel map given as `option` (`mask`, `gain`), described by `source` (its
/// path, or "the array"), whose shape `got` is not the frames' `frames`.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `option`, both shapes and `source`.
pub fn check_pixel_map(
    option: &'static str,
    source: &str,
    got: (usize, usize),
    frames: (usize, usize),
) -> Result<()> {
    if got == frames {
        return Ok(());
    }
    Err(Error::param(
        option,
        format!(
            "{source} is {} x {} pixels; the frames are {} x {}",
            got.0, got.1, frames.0, frames.1
        ),
    ))
}

/// The bad-pixel mask at `path` (`--mask`, [`read_mask`]), refused unless it is `frames`
/// pixels ([`check_pixel_map`]).
///
/// # Errors
/// The file's errors, and [`check_pixel_map`]'s.
pub fn read_mask_for(
    path: Option<&Path>,
    frames: (usize, usize),
) -> Result<Option<Arc<PixelMask>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let m = read_mask(path)?;
    check_pixel_map("mask", &path.display().to_string(), m.shape(), frames)?;
    Ok(Some(Arc::new(m)))
}

/// The gain map at `path` (`--gain`, [`GainMap::read`]), refused unless it is `frames` pixels
/// ([`check_pixel_map`]).
///
/// # Errors
/// The file's errors, [`GainMap::new`]'s, and [`check_pixel_map`]'s.
pub fn read_gain_for(path: Option<&Path>, frames: (usize, usize)) -> Result<Option<Arc<GainMap>>> {
    let Some(path) = path else {
        return Ok(None);
    };
    let g = GainMap::read(path)?;
    check_pixel_map("gain", &path.display().to_string(), g.shape(), frames)?;
    Ok(Some(Arc::new(g)))
}

/// Where an [`ImagingSink`] puts one input's photons (the rows `cluda image --photons`
/// writes: [`Photon`], in frame order).
#[derive(Clone, Debug, PartialEq)]
pub enum PhotonDestination {
    /// A structured `.npy` at this path ([`PhotonWriter`]), committed when the input ends
    /// whole ([`ImagingOutputs::claim`]).
    File(PathBuf),
    /// Kept in memory, for the caller to take once the input ended whole
    /// ([`ImagingSink::take_photons`]): e.g. the Python package's photon arrays.
    Memory,
}

/// Where an [`ImagingSink`] puts photons.
#[derive(Clone, Debug)]
pub struct ImagingOutputs {
    /// Count placed photons into an image of this many sub-pixels per pixel.
    pub subpixels: Option<u32>,
    /// Where each input's photons go, at its index (`None`, or no entry: that input's are
    /// not kept).
    pub photons: Vec<Option<PhotonDestination>>,
    /// What a photon file's commit does with a file that is there by then.
    pub claim: Claim,
}

/// Places every cluster of a run through a cube's maps: counts into one sub-pixel image
/// over every input, and/or each input's photons, written to a file ([`PhotonWriter`]) or
/// kept in memory for the caller ([`ImagingSink::take_photons`]). What the host places, it
/// places on worker threads ([`super::placement`]), off the run's thread; a GPU finder still
/// counts the image on its device while the host places the photon rows.
pub struct ImagingSink {
    rules: PlacementRules,
    image: Option<SubpixelImage>,
    /// Whether the image was lent to the current input's placement (the first input counts
    /// straight into it).
    lent: bool,
    /// The image's frame shape and sub-pixels (while it is lent, a placeholder stands in).
    geometry: (usize, usize, u32),
    on_device: bool,
    /// Whether the finder places the current input's photons on its device (the host then
    /// only copies rows).
    rows_on_device: bool,
    /// Whether the last input's were (kept after it ended, for the caller to report).
    rows_placed_last: bool,
    allow_device: bool,
    photon_outputs: Vec<Option<PhotonDestination>>,
    /// The photons kept in memory of each input that ended whole, until taken.
    kept: Vec<Option<Vec<Photon>>>,
    claim: Claim,
    /// The current input's host placement, when the host places.
    worker: Option<PlacementWorker>,
    /// Placement threads given by the caller (`None`: chosen per finder, see
    /// [`placement::threads_for`]).
    threads: Option<usize>,
    written: Vec<PathBuf>,
    tally: Tally,
    /// Inputs that ended whole so far.
    inputs_ended: usize,
    /// The finder's answers to requests for its counts mid-input, when it counts them.
    peek: Option<Arc<AccumulationPeek>>,
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
            rules: PlacementRules {
                maps,
                window,
                mask,
                gain: None,
            },
            image,
            lent: false,
            geometry: (rows, cols, outputs.subpixels.unwrap_or(1)),
            on_device: false,
            rows_on_device: false,
            rows_placed_last: false,
            allow_device,
            kept: vec![None; outputs.photons.len()],
            photon_outputs: outputs.photons,
            claim: outputs.claim,
            worker: None,
            threads: None,
            written: Vec::new(),
            tally: Tally::default(),
            inputs_ended: 0,
            peek: None,
        })
    }

    /// The same sink placing on the host with `threads` threads (default: every core beside a
    /// GPU finder; beside a CPU finder, the cores [`Sink::cores_beside_cpu_finder`] keeps for
    /// placing).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`threads`) for 0 or more than 4 x the cores.
    pub fn with_threads(mut self, threads: usize) -> Result<Self> {
        let cap = 4 * placement::default_threads();
        if threads == 0 || threads > cap {
            return Err(Error::param(
                "threads",
                format!("{threads} placement threads; give 1 to {cap}"),
            ));
        }
        self.threads = Some(threads);
        Ok(self)
    }

    /// The same sink dividing pixel values by `gain` first (energies in keV). Counted on the
    /// host (the device's kernels have no gain).
    ///
    /// # Errors
    /// [`Error::Shape`] for a map of another shape than the frames'.
    pub fn with_gain(mut self, gain: Option<Arc<GainMap>>) -> Result<Self> {
        if let Some(g) = &gain {
            let (rows, cols, _) = self.geometry;
            if g.shape() != (rows, cols) {
                return Err(Error::shape(
                    "gain",
                    format!("{rows} x {cols} pixels (the frames')"),
                    format!("{} x {} pixels", g.shape().0, g.shape().1),
                ));
            }
        }
        if gain.is_some() {
            self.allow_device = false;
        }
        self.rules.gain = gain;
        Ok(self)
    }

    /// The image of every input that ended whole, if one is made.
    pub fn image(&self) -> Option<&SubpixelImage> {
        self.image.as_ref()
    }

    /// The image of every input that ended whole, if one is made, handed over.
    pub fn into_image(self) -> Option<SubpixelImage> {
        self.image
    }

    /// Asks for a copy of the image as it stands mid-input, for a live view: one placed on
    /// the host is copied by its placement worker once it has counted every frame handed to
    /// the sink so far (off the caller's thread); one counted on the device is downloaded by
    /// the finder after the chunk it is visiting ([`ClusterFinder::accumulation_peek`]).
    /// [`ImagingSink::take_snapshot`] takes the copy once it came. Meant for a refresh every
    /// second or so, never per frame (each request costs a copy of the image). `false` when
    /// none will come: no image, no input under way, or a finder that cannot read its counts
    /// mid-way.
    ///
    /// # Errors
    /// The placement worker's error (it stopped).
    pub fn request_snapshot(&mut self) -> Result<bool> {
        if self.image.is_none() {
            return Ok(false);
        }
        if let Some(p) = &self.peek {
            p.ask();
            return Ok(true);
        }
        match self.worker.as_mut() {
            Some(w) if !self.on_device => w.snapshot().map(|()| true),
            _ => Ok(false),
        }
    }

    /// The copy asked for by [`ImagingSink::request_snapshot`], once it came: the image of
    /// every input that ended whole with the current input's counts so far added.
    ///
    /// # Errors
    /// The finder's error reading its counts; [`Error::Shape`] for counts of another size.
    pub fn take_snapshot(&mut self) -> Result<Option<SubpixelImage>> {
        let (rows, cols, n) = self.geometry;
        let current = if let Some(p) = &self.peek {
            match p.take_answer().transpose()? {
                Some(a) => match a.counts {
                    AccumulatedCounts::Image(c) => {
                        let mut img = SubpixelImage::new(rows, cols, n)?;
                        img.add_counts(c)?;
                        img
                    }
                    AccumulatedCounts::Cube(_) => {
                        return Err(Error::Internal(
                            "the finder accumulated an eta cube for an image".into(),
                        ));
                    }
                },
                None => return Ok(None),
            }
        } else {
            match self
                .worker
                .as_ref()
                .and_then(PlacementWorker::take_snapshot)
            {
                Some(img) => img,
                None => return Ok(None),
            }
        };
        let mut whole = current;
        // The image lent to the first input is the whole; later inputs count apart from the
        // image of the inputs before them.
        if !self.lent
            && self.inputs_ended > 0
            && let Some(before) = &self.image
        {
            whole.add_image(before)?;
        }
        Ok(Some(whole))
    }

    /// The photon files written.
    pub fn photon_files(&self) -> &[PathBuf] {
        &self.written
    }

    /// Takes input `input`'s photons kept in memory ([`PhotonDestination::Memory`]): every
    /// row, in frame order, as `cluda image --photons` writes them. `None` when that input's
    /// photons were not kept in memory, it did not end whole (it failed, or never began:
    /// it could not be opened), or they were taken already.
    pub fn take_photons(&mut self, input: usize) -> Option<Vec<Photon>> {
        self.kept.get_mut(input).and_then(Option::take)
    }

    /// What was placed and left out, over every input that ended whole.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Whether the last input's image was counted on the finder's device.
    pub fn counted_on_device(&self) -> bool {
        self.on_device
    }

    /// The image the current input counts into on the host: the image itself for the first
    /// input (lent: no second image to zero and add), else a new one, so that a failed input
    /// leaves the image as it was.
    fn host_image(&mut self) -> Result<Option<SubpixelImage>> {
        let Some(img) = self.image.as_mut() else {
            return Ok(None);
        };
        if self.inputs_ended == 0 {
            self.lent = true;
            let lent = std::mem::replace(img, SubpixelImage::new(1, 1, 1)?);
            return Ok(Some(lent.prefaulted()));
        }
        let (rows, cols, n) = self.geometry;
        Ok(Some(SubpixelImage::new(rows, cols, n)?.prefaulted()))
    }

    /// Asks the finder to stop placing rows, if it was asked to.
    fn stop_rows(&mut self, finder: &mut dyn ClusterFinder) -> Result<()> {
        if std::mem::take(&mut self.rows_on_device) {
            finder.place_rows(None)?;
        }
        Ok(())
    }

    /// Whether the last input's photon rows were placed on the finder's device.
    pub fn placed_on_device(&self) -> bool {
        self.rows_placed_last
    }

    /// Puts an empty image back where one lent to a failed input was.
    fn restore_lent(&mut self) {
        if !std::mem::take(&mut self.lent) {
            return;
        }
        let (rows, cols, n) = self.geometry;
        if let (Some(img), Ok(empty)) = (self.image.as_mut(), SubpixelImage::new(rows, cols, n)) {
            *img = empty;
        }
    }
}

impl Sink for ImagingSink {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.on_device = false;
        self.worker = None;
        self.lent = false;
        self.peek = None;
        let mut host_image = None;
        if let Some(img) = self.image.as_ref() {
            self.on_device = self.allow_device
                && finder.accumulate(&Accumulate::Image {
                    maps: self.rules.maps.clone(),
                    subpixels: img.subpixels(),
                    window: self.rules.window,
                    mask: self.rules.mask.clone(),
                })?;
            if self.on_device {
                self.peek = finder.accumulation_peek();
            } else {
                host_image = self.host_image()?;
            }
        }
        if let Some(k) = self.kept.get_mut(input) {
            // An input seen again (a caller's retry) starts its kept rows afresh.
            *k = None;
        }
        let photons = match self.photon_outputs.get(input).cloned().flatten() {
            Some(PhotonDestination::File(p)) => Some(PhotonList::File(Box::new(
                PhotonWriter::create(&p, self.claim)?,
            ))),
            Some(PhotonDestination::Memory) => Some(PhotonList::Memory(Vec::new())),
            None => None,
        };
        // A photon list from rows the finder places on its device, where it can: the host
        // then copies rows instead of placing (the image, if any, is counted apart).
        self.rows_on_device = photons.is_some()
            && self.allow_device
            && finder.place_rows(Some(&PlaceRows {
                maps: self.rules.maps.clone(),
                window: self.rules.window,
                mask: self.rules.mask.clone(),
            }))?;
        self.rows_placed_last = self.rows_on_device;
        if host_image.is_some() || photons.is_some() {
            let threads = self
                .threads
                .unwrap_or_else(|| placement::threads_for(finder.device() == "cpu"));
            self.worker = Some(PlacementWorker::start(
                self.rules.clone(),
                threads,
                host_image,
                photons,
            )?);
        }
        Ok(())
    }

    fn frame(&mut self, _input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        let Some(worker) = self.worker.as_mut() else {
            return Ok(());
        };
        worker.frame(clusters.frame.to_photon_list()?, clusters)
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.stop_rows(finder)?;
        let placed = self
            .worker
            .take()
            .map(PlacementWorker::finish)
            .transpose()?;
        self.peek = None;
        let (host_image, photons, host_tally) = match placed {
            Some(p) => (p.image, p.photons, p.tally),
            None => (None, None, Tally::default()),
        };
        let mut kept = None;
        match photons {
            Some(PhotonList::File(w)) => self.written.push(w.finish()?),
            Some(PhotonList::Memory(rows)) => kept = Some(rows),
            None => {}
        }
        if self.on_device {
            let a = finder
                .take_accumulated()?
                .ok_or_else(|| Error::Internal("the finder accumulated no image".into()))?;
            match (self.image.as_mut(), a.counts) {
                (Some(img), AccumulatedCounts::Image(c)) => img.add_counts(c)?,
                (Some(_), AccumulatedCounts::Cube(_)) => {
                    return Err(Error::Internal(
                        "the finder accumulated an eta cube for an image".into(),
                    ));
                }
                (None, _) => {}
            }
            self.tally.add(&a.tally);
        } else {
            if let (Some(img), Some(cur)) = (self.image.as_mut(), host_image) {
                if std::mem::take(&mut self.lent) {
                    *img = cur;
                } else {
                    img.add_image(&cur)?;
                }
            }
            // The device tallies what it places; the host tallies only what it places itself.
            self.tally.add(&host_tally);
        }
        self.lent = false;
        self.inputs_ended += 1;
        // Kept only now that the input ended whole.
        if let (Some(k), Some(rows)) = (self.kept.get_mut(input), kept) {
            *k = Some(rows);
        }
        Ok(())
    }

    fn abandon(&mut self, _input: usize, finder: &mut dyn ClusterFinder) {
        let _ = self.stop_rows(finder);
        self.peek = None;
        if self.on_device {
            let _ = finder.take_accumulated();
        }
        // Dropped unfinished: its photon list's temporary file is removed.
        self.worker = None;
        self.restore_lent();
    }

    /// Beside a CPU finder every photon is placed on the host: the cores that takes
    /// ([`placement::cores_beside_cpu_finder`]), unless the caller chose the threads.
    fn cores_beside_cpu_finder(&self, cores: usize) -> usize {
        let places = self.image.is_some() || self.photon_outputs.iter().any(Option::is_some);
        if places && self.threads.is_none() {
            placement::cores_beside_cpu_finder(cores)
        } else {
            0
        }
    }
}
