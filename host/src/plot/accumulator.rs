//! What the plots need from every frame's clusters, collected in bounded memory, and the
//! plots drawn from it.

use std::path::{Path, PathBuf};

use super::bars::spectrum_png;
use super::font::register_font;
use super::maps::map_png;
use super::spectrum::{AUTO_RANGE_SAMPLE, Histogram, SpectrumOptions, auto_range};
use crate::cluster::{ClusterBatch, FrameClusters};
use crate::error::{Error, Result};
use crate::pedestal::Pedestal;

/// The spectrum while its range is not yet known, then its histogram.
#[derive(Clone, Debug)]
enum SpectrumState {
    /// Automatic range: the first sums, kept until [`AUTO_RANGE_SAMPLE`] of them are seen.
    Sampling { bins: usize, sums: Vec<f64> },
    /// Range fixed.
    Binned(Histogram),
}

impl SpectrumState {
    fn add(&mut self, v: f64) {
        match self {
            SpectrumState::Binned(h) => h.add(v),
            SpectrumState::Sampling { sums, .. } => {
                sums.push(v);
                if sums.len() >= AUTO_RANGE_SAMPLE {
                    *self = SpectrumState::Binned(self.histogram());
                }
            }
        }
    }

    /// The histogram as it stands (for a sampling state: binned over the automatic range of
    /// the sums seen so far).
    fn histogram(&self) -> Histogram {
        match self {
            SpectrumState::Binned(h) => h.clone(),
            SpectrumState::Sampling { bins, sums } => {
                let mut sorted = sums.clone();
                let (min, max) = auto_range(&mut sorted);
                // Whole-ADU bins when they are at least 1 ADU wide: integer sums in bins of a
                // fractional width fill them unevenly (a comb pattern).
                let bins = (*bins).max(1);
                let width = (max - min) / bins as f64;
                let max = if width >= 1.0 {
                    min + width.ceil() * bins as f64
                } else {
                    max
                };
                let mut h = Histogram {
                    min,
                    max,
                    counts: vec![0; bins],
                    underflow: 0,
                    overflow: 0,
                };
                for &v in sums {
                    h.add(v);
                }
                h
            }
        }
    }
}

/// Collects what the plots need from the clusters of every frame, in bounded memory.
#[derive(Clone, Debug)]
pub struct PlotAccumulator {
    rows: usize,
    cols: usize,
    spectrum: SpectrumState,
    log: bool,
    hits: Vec<u32>,
    frames: u64,
    clusters: u64,
    cluster_label: Option<String>,
}

impl PlotAccumulator {
    /// For `rows x cols` frames, with the default [`SpectrumOptions`] (400 bins over a range
    /// chosen from the data, linear counts).
    pub fn new(rows: usize, cols: usize) -> Self {
        Self::build(
            rows,
            cols,
            SpectrumState::Sampling {
                bins: 400,
                sums: Vec::new(),
            },
            false,
        )
    }

    /// For `rows x cols` frames, with the spectrum binned and drawn as `options` say.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] as [`SpectrumOptions::validate`] gives it.
    pub fn with_options(rows: usize, cols: usize, options: &SpectrumOptions) -> Result<Self> {
        options.validate()?;
        let state = match options.range {
            Some((min, max)) => SpectrumState::Binned(Histogram::new(min, max, options.bins)?),
            None => SpectrumState::Sampling {
                bins: options.bins,
                sums: Vec::new(),
            },
        };
        Ok(Self::build(rows, cols, state, options.log))
    }

    /// With a spectrum histogram of your choice (linear counts).
    pub fn with_spectrum(rows: usize, cols: usize, spectrum: Histogram) -> Self {
        Self::build(rows, cols, SpectrumState::Binned(spectrum), false)
    }

    fn build(rows: usize, cols: usize, spectrum: SpectrumState, log: bool) -> Self {
        Self {
            rows,
            cols,
            spectrum,
            log,
            hits: vec![0; rows * cols],
            frames: 0,
            clusters: 0,
            cluster_label: None,
        }
    }

    /// Adds one frame's clusters: each cluster's sum to the spectrum, its centre to the hit
    /// map (centres outside the frame are ignored).
    pub fn add(&mut self, frame: &FrameClusters<'_>) {
        self.frames += 1;
        self.cluster_label
            .get_or_insert_with(|| frame.size().to_string());
        for c in frame.iter() {
            self.clusters += 1;
            self.spectrum.add(c.sum() as f64);
            let (x, y) = (c.x as usize, c.y as usize);
            if x < self.cols && y < self.rows {
                let h = &mut self.hits[y * self.cols + x];
                *h = h.saturating_add(1);
            }
        }
    }

    /// Adds every frame of a batch.
    pub fn add_batch(&mut self, batch: &ClusterBatch) {
        for f in batch.iter_frames() {
            self.add(&f);
        }
    }

    /// The spectrum of cluster sums so far (a copy; while an automatic range is still being
    /// sampled, binned over the range the sums so far give).
    pub fn spectrum(&self) -> Histogram {
        self.spectrum.histogram()
    }

    /// Clusters per pixel so far (row-major).
    pub fn hits(&self) -> &[u32] {
        &self.hits
    }

    /// Frames added so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Writes `spectrum.png`, `hitmap.png`, `pedestal_mean.png` and `pedestal_noise.png` into
    /// `dir` (created if needed); returns their paths. The pedestal must be ready and of the
    /// accumulator's shape.
    ///
    /// # Errors
    /// * [`Error::Shape`] when the pedestal's shape is not the accumulator's;
    /// * [`Error::PedestalNotReady`] when the pedestal does not hold its N frames yet;
    /// * [`Error::Io`] when `dir` cannot be created;
    /// * [`Error::Format`] naming the PNG when plotters cannot draw or write it.
    pub fn finish(&self, pedestal: &Pedestal, dir: &Path) -> Result<Vec<PathBuf>> {
        if (pedestal.rows(), pedestal.cols()) != (self.rows, self.cols) {
            return Err(Error::shape(
                "plot pedestal",
                format!("{} x {}", self.rows, self.cols),
                format!("{} x {}", pedestal.rows(), pedestal.cols()),
            ));
        }
        register_font()?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let label = self.cluster_label.as_deref().unwrap_or("?");
        let mut out = Vec::new();

        let p = dir.join("spectrum.png");
        spectrum_png(
            &p,
            &self.spectrum(),
            &format!(
                "Cluster sums ({label}): {} clusters in {} frames",
                self.clusters, self.frames
            ),
            self.log,
        )?;
        out.push(p);

        let hits: Vec<f64> = self.hits.iter().map(|&h| h as f64).collect();
        let (mean, std) = (pedestal.mean_map()?, pedestal.std_map()?);
        let maps: [(&str, &[f64], &str, &str); 3] = [
            (
                "hitmap.png",
                &hits,
                "Hit map (cluster centres per pixel)",
                "clusters",
            ),
            (
                "pedestal_mean.png",
                mean.as_slice().unwrap_or(&[]),
                "Pedestal mean",
                "ADU",
            ),
            (
                "pedestal_noise.png",
                std.as_slice().unwrap_or(&[]),
                "Pedestal noise (std)",
                "ADU",
            ),
        ];
        for (name, values, title, unit) in maps {
            let p = dir.join(name);
            map_png(&p, self.rows, self.cols, values, title, unit)?;
            out.push(p);
        }
        Ok(out)
    }
}
