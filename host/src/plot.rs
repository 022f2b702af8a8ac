//! Pictures of what cluda found: the spectrum of cluster sums, the hit map, and the pedestal
//! mean and noise maps, as PNG files drawn with plotters.
//!
//! Feed every frame's clusters to a [`PlotAccumulator`] (it keeps a fixed-size histogram and
//! one counter per pixel, never the clusters), then call [`PlotAccumulator::finish`] with the
//! finder's pedestal. The spectrum's binning and scale are set with [`SpectrumOptions`]; by
//! default its range follows the data, so it fits 3x3 and 9x9 cluster sums alike.
//!
//! Text is drawn with DejaVu Sans, embedded in cluda (see `assets/fonts/` for its licence), so
//! plots need no system font. Maps use plotters' viridis colour map.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;

use crate::cluster::{ClusterBatch, FrameClusters};
use crate::error::{Error, Result};
use crate::pedestal::Pedestal;

/// Font family name the plots use.
const FAMILY: &str = "sans-serif";

/// DejaVu Sans (Bitstream Vera licence, which permits redistribution; the text is in
/// `assets/fonts/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Registers the embedded DejaVu Sans as plotters' "sans-serif" (once per process). Every
/// plotting function here calls it; call it yourself before drawing your own plotters charts
/// with that family.
///
/// # Errors
/// [`Error::InvalidParameter`] (`plot`) if plotters cannot parse the embedded font, which
/// would be a packaging fault; it does not depend on the machine.
pub fn register_font() -> Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Error::param(
            "plot",
            "the embedded DejaVu Sans font could not be read by plotters",
        ))
    }
}

/// Largest number of spectrum bins [`SpectrumOptions`] accepts.
pub const MAX_SPECTRUM_BINS: usize = 100_000;

/// Cluster sums collected before an automatic spectrum range is chosen from their quantiles.
pub const AUTO_RANGE_SAMPLE: usize = 200_000;

/// How the spectrum of cluster sums is binned and drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct SpectrumOptions {
    /// The histogram's range `[min, max)` in ADU. `None` (the default): chosen from the first
    /// [`AUTO_RANGE_SAMPLE`] cluster sums, from their 0.05 % to 99.95 % quantiles widened by
    /// 5 % on each side ([`auto_range`]), then stretched upwards so that bins are a whole
    /// number of ADU wide; so it follows the cluster size (a 9x9 sum spreads over a much wider
    /// range than a 3x3 one). Sums outside the range are counted and reported on the plot.
    pub range: Option<(f64, f64)>,
    /// Number of equal bins, 1 ..= [`MAX_SPECTRUM_BINS`] (default 400).
    pub bins: usize,
    /// Logarithmic count axis (shows the multi-photon tail next to the single-photon peak).
    pub log: bool,
}

impl Default for SpectrumOptions {
    fn default() -> Self {
        Self {
            range: None,
            bins: 400,
            log: false,
        }
    }
}

/// The largest magnitude of a spectrum range's ends, in ADU. Cluster sums of 16-bit samples
/// stay far below it; beyond it `max - min` could overflow to infinity and the axis would
/// never finish drawing.
pub const MAX_SPECTRUM_ADU: f64 = 1e12;

/// The narrowest spectrum range, in ADU: narrower ones give bins too small to draw.
pub const MIN_SPECTRUM_SPAN: f64 = 1e-3;

impl SpectrumOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] named `spectrum-bins` when `bins` is outside
    /// 1 ..= [`MAX_SPECTRUM_BINS`], or `spectrum-range` when the range's ends are not finite,
    /// lie beyond +-[`MAX_SPECTRUM_ADU`], or are less than [`MIN_SPECTRUM_SPAN`] apart (so
    /// that `max - min` and the bin width are finite and above zero).
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_SPECTRUM_BINS).contains(&self.bins) {
            return Err(Error::param(
                "spectrum-bins",
                format!(
                    "must be between 1 and {MAX_SPECTRUM_BINS}, got {}",
                    self.bins
                ),
            ));
        }
        if let Some((min, max)) = self.range {
            if !(min.is_finite() && max.is_finite()) {
                return Err(Error::param(
                    "spectrum-range",
                    format!("both ends must be finite, got {min:?}:{max:?}"),
                ));
            }
            if min >= max {
                return Err(Error::param(
                    "spectrum-range",
                    format!("MIN must be below MAX, got {min:?}:{max:?}"),
                ));
            }
            if min < -MAX_SPECTRUM_ADU || max > MAX_SPECTRUM_ADU {
                return Err(Error::param(
                    "spectrum-range",
                    format!(
                        "both ends must lie within -{MAX_SPECTRUM_ADU:e}..{MAX_SPECTRUM_ADU:e} ADU (no cluster sum comes near), got {min:?}:{max:?}"
                    ),
                ));
            }
            if max - min < MIN_SPECTRUM_SPAN {
                return Err(Error::param(
                    "spectrum-range",
                    format!(
                        "MAX - MIN must be at least {MIN_SPECTRUM_SPAN} ADU, got {min:?}:{max:?}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The automatic spectrum range for `sums` (sorted in place): the 0.05 % .. 99.95 % quantiles
/// widened by 5 % of their span on each side and rounded outwards to whole ADU; -200 .. 2000
/// ADU when there are no sums.
pub fn auto_range(sums: &mut [f64]) -> (f64, f64) {
    sums.sort_by(f64::total_cmp);
    let finite: Vec<f64> = sums.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return (-200.0, 2000.0);
    }
    let (lo, hi) = (quantile(&finite, 0.0005), quantile(&finite, 0.9995));
    let pad = ((hi - lo) * 0.05).max(1.0);
    let (lo, hi) = ((lo - pad).floor(), (hi + pad).ceil());
    (lo, if hi > lo { hi } else { lo + 1.0 })
}

/// A fixed-bin histogram of values in `[min, max)`, with under- and overflow counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Lower edge of the first bin.
    pub min: f64,
    /// Upper edge of the last bin.
    pub max: f64,
    /// Counts per bin.
    pub counts: Vec<u64>,
    /// Values below `min` (or NaN).
    pub underflow: u64,
    /// Values at or above `max`.
    pub overflow: u64,
}

impl Histogram {
    /// `bins` equal bins over `[min, max)`; errors unless `min < max`, `max - min` is finite
    /// (ends of +-1e308 would overflow it) and `bins` is 1 ..= 2^20.
    pub fn new(min: f64, max: f64, bins: usize) -> Result<Self> {
        if !(min.is_finite() && max.is_finite() && min < max && (max - min).is_finite())
            || bins == 0
            || bins > 1 << 20
        {
            return Err(Error::param(
                "histogram",
                format!(
                    "need finite min < max and 1..=1048576 bins, got [{min}, {max}) with {bins}"
                ),
            ));
        }
        Ok(Self {
            min,
            max,
            counts: vec![0; bins],
            underflow: 0,
            overflow: 0,
        })
    }

    /// Width of one bin.
    pub fn bin_width(&self) -> f64 {
        (self.max - self.min) / self.counts.len() as f64
    }

    /// Counts `v`.
    pub fn add(&mut self, v: f64) {
        if v >= self.max {
            self.overflow += 1;
        } else if v >= self.min {
            let i = ((v - self.min) / self.bin_width()) as usize;
            let last = self.counts.len() - 1;
            self.counts[i.min(last)] += 1;
        } else {
            self.underflow += 1;
        }
    }

    /// All values counted, in range or not.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.underflow + self.overflow
    }

    /// Centre of the fullest bin at or above `from` after smoothing over 11 bins (so one
    /// noisy bin does not move the peak), if any bin there is non-empty.
    pub fn peak_from(&self, from: f64) -> Option<f64> {
        let w = self.bin_width();
        let n = self.counts.len();
        let smooth = |i: usize| -> u64 {
            self.counts[i.saturating_sub(5)..(i + 6).min(n)]
                .iter()
                .sum()
        };
        (0..n)
            .filter(|&i| self.min + (i as f64 + 0.5) * w >= from && self.counts[i] > 0)
            .max_by_key(|&i| (smooth(i), std::cmp::Reverse(i)))
            .map(|i| self.min + (i as f64 + 0.5) * w)
    }
}

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

        let p = dir.join("hitmap.png");
        let hits: Vec<f64> = self.hits.iter().map(|&h| h as f64).collect();
        map_png(
            &p,
            self.rows,
            self.cols,
            &hits,
            "Hit map (cluster centres per pixel)",
            "clusters",
        )?;
        out.push(p);

        let mean = pedestal.mean_map()?;
        let p = dir.join("pedestal_mean.png");
        map_png(
            &p,
            self.rows,
            self.cols,
            mean.as_slice().unwrap_or(&[]),
            "Pedestal mean",
            "ADU",
        )?;
        out.push(p);

        let std = pedestal.std_map()?;
        let p = dir.join("pedestal_noise.png");
        map_png(
            &p,
            self.rows,
            self.cols,
            std.as_slice().unwrap_or(&[]),
            "Pedestal noise (std)",
            "ADU",
        )?;
        out.push(p);
        Ok(out)
    }
}

fn draw_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::format(path, format!("cannot draw the plot: {e}"))
}

/// Size of every PNG written here, in pixels (width, height).
pub const PNG_SIZE: (u32, u32) = (960, 800);

/// Draws `hist` as a bar histogram into the PNG `path`, marking the fullest bin above 100
/// ADU; `log` draws the counts on a logarithmic axis.
///
/// # Errors
/// [`Error::Format`] naming `path` when plotters cannot draw or write the PNG (for example an
/// unwritable directory).
pub fn spectrum_png(path: &Path, hist: &Histogram, title: &str, log: bool) -> Result<()> {
    register_font()?;
    let e = |x: &dyn std::fmt::Display| draw_err(path, x);
    let cmax = hist.counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let root = BitMapBackend::new(path, PNG_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let peak = hist.peak_from(100.0);
    let caption = match peak {
        Some(p) => format!("{title}; peak at {p:.0} ADU"),
        None => title.to_string(),
    };
    if log {
        // Bars start at 0.5 so that a bin of one count is visible on the log axis.
        draw_bars(
            &root,
            hist,
            &caption,
            (0.5..cmax * 2.0).log_scale(),
            0.5,
            cmax * 2.0,
        )
        .map_err(|x| e(&x))?;
    } else {
        draw_bars(&root, hist, &caption, 0.0..cmax * 1.1, 0.0, cmax * 1.1).map_err(|x| e(&x))?;
    }
    let note = format!(
        "{} below {:.0}, {} above {:.0} ADU",
        hist.underflow, hist.min, hist.overflow, hist.max
    );
    root.draw(&Text::new(
        note,
        (100, (PNG_SIZE.1 - 22) as i32),
        (FAMILY, 14),
    ))
    .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The spectrum's axes, bars and peak marker, on a linear or logarithmic count axis `y`
/// whose bars start at `base` and whose marker reaches `top`.
fn draw_bars<Y>(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    hist: &Histogram,
    caption: &str,
    y: Y,
    base: f64,
    top: f64,
) -> std::result::Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let s = |x: &dyn std::fmt::Display| x.to_string();
    let mut chart = ChartBuilder::on(root)
        .caption(caption, (FAMILY, 22))
        .margin(20)
        .margin_right(40)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(hist.min..hist.max, y)
        .map_err(|x| s(&x))?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("cluster sum (ADU)")
        .y_desc(format!("clusters per {} ADU bin", num(hist.bin_width())))
        .label_style((FAMILY, 16))
        .axis_desc_style((FAMILY, 18))
        .draw()
        .map_err(|x| s(&x))?;
    let w = hist.bin_width();
    chart
        .draw_series(
            hist.counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, &c)| {
                    let x0 = hist.min + i as f64 * w;
                    Rectangle::new([(x0, base), (x0 + w, c as f64)], BLUE.mix(0.7).filled())
                }),
        )
        .map_err(|x| s(&x))?;
    if let Some(p) = hist.peak_from(100.0) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(p, base), (p, top)],
                RED.stroke_width(1),
            )))
            .map_err(|x| s(&x))?;
    }
    Ok(())
}

/// The viridis colour map (plotters' [`ViridisRGB`]): `t` in `[0, 1]` from dark purple
/// through teal to yellow; values outside are clamped and NaN is the low end.
pub fn viridis(t: f64) -> RGBColor {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    ViridisRGB::get_color(t)
}

/// A number with as many decimals as its size calls for.
fn num(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 || a == 0.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    }
}

/// The `q`-quantile (0..=1) of the finite values (0 when there are none).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Draws a `rows x cols` map (row-major `values`, row 0 at the top) with the viridis colours
/// into the PNG `path`, with a colour bar. The colour scale spans the 0.5 % .. 99.5 %
/// quantiles (so a few hot pixels do not flatten the rest); the title gives min, median and
/// max.
///
/// # Errors
/// [`Error::Shape`] unless `values` holds `rows x cols >= 1` values; [`Error::Format`] naming
/// `path` when plotters cannot draw or write the PNG.
pub fn map_png(
    path: &Path,
    rows: usize,
    cols: usize,
    values: &[f64],
    title: &str,
    unit: &str,
) -> Result<()> {
    if rows == 0 || cols == 0 || values.len() != rows * cols {
        return Err(Error::shape(
            "plot map",
            format!("{rows} x {cols} values"),
            format!("{} values", values.len()),
        ));
    }
    register_font()?;
    let e = |x: &dyn std::fmt::Display| draw_err(path, x);
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let (lo, hi) = (quantile(&sorted, 0.005), quantile(&sorted, 0.995));
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let (min, med, max) = (
        sorted.first().copied().unwrap_or(0.0),
        quantile(&sorted, 0.5),
        sorted.last().copied().unwrap_or(0.0),
    );

    let root = BitMapBackend::new(path, PNG_SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let root = root
        .titled(
            &format!(
                "{title}: min {}, median {}, max {} {unit}",
                num(min),
                num(med),
                num(max)
            ),
            (FAMILY, 20),
        )
        .map_err(|x| e(&x))?;
    // Left part sized so that the map's plotting area is about square.
    let (left, right) = root.split_horizontally(PNG_SIZE.0 - 180);

    // Square pixels: measure the plotting area with even margins, then widen the margins on
    // the long side so that the area has the frame's aspect ratio (a 40 x 60 frame is drawn
    // wider than tall, not stretched into a square).
    let build = |(mx, my): (u32, u32)| {
        ChartBuilder::on(&left)
            .margin(15)
            .margin_left(15 + mx)
            .margin_right(15 + mx)
            .margin_top(15 + my)
            .margin_bottom(15 + my)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..cols as f64, rows as f64..0.0)
    };
    let (w, h) = build((0, 0))
        .map_err(|x| e(&x))?
        .plotting_area()
        .dim_in_pixel();
    let (w, h) = (w as f64, h as f64);
    let aspect = cols as f64 / rows as f64;
    let extra = if w / h > aspect {
        (((w - h * aspect) / 2.0) as u32, 0)
    } else {
        (0, ((h - w / aspect) / 2.0) as u32)
    };
    let mut chart = build(extra).map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("column")
        .y_desc("row")
        .label_style((FAMILY, 14))
        .draw()
        .map_err(|x| e(&x))?;
    let area = chart.plotting_area().strip_coord_spec();
    let (w, h) = area.dim_in_pixel();
    for py in 0..h {
        let r = (py as usize * rows / h as usize).min(rows - 1);
        for px in 0..w {
            let c = (px as usize * cols / w as usize).min(cols - 1);
            let v = values[r * cols + c];
            let colour = if v.is_finite() {
                viridis((v - lo) / (hi - lo))
            } else {
                RGBColor(255, 0, 255)
            };
            area.draw_pixel((px as i32, py as i32), &colour)
                .map_err(|x| e(&x))?;
        }
    }

    // Colour bar.
    let mut bar = ChartBuilder::on(&right)
        .margin_top(15)
        .margin_bottom(55)
        .margin_right(10)
        .y_label_area_size(90)
        .caption(format!("{unit} (0.5-99.5 %)"), (FAMILY, 14))
        .build_cartesian_2d(0.0..1.0, lo..hi)
        .map_err(|x| e(&x))?;
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_label_formatter(&|v| num(*v))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(|x| e(&x))?;
    let steps = 200;
    bar.draw_series((0..steps).map(|i| {
        let a = lo + (hi - lo) * i as f64 / steps as f64;
        let b = lo + (hi - lo) * (i + 1) as f64 / steps as f64;
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            viridis((i as f64 + 0.5) / steps as f64).filled(),
        )
    }))
    .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Draws a sub-pixel image (photon counts) into the PNG `path`, summed into bins of `k x k`
/// sub-pixels first so that neither side exceeds 2048 bins (`k = 1` for images up to 2048 a
/// side); the axes are in binned sub-pixels. Drawn under a temporary name and renamed, so no
/// half-drawn PNG is left; a file at `path` by then is replaced only when `overwrite`.
///
/// # Errors
/// As [`map_png`]; [`Error::Io`] when the file cannot be renamed into place.
pub fn subpixel_png(
    path: &Path,
    image: &crate::interpolation::SubpixelImage,
    overwrite: bool,
) -> Result<()> {
    let (h, w) = image.shape();
    let k = h.max(w).div_ceil(2048).max(1);
    let (bh, bw) = (h.div_ceil(k), w.div_ceil(k));
    let mut binned = vec![0.0f64; bh * bw];
    let counts = image.counts();
    for r in 0..h {
        for c in 0..w {
            binned[(r / k) * bw + c / k] += counts[r * w + c] as f64;
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".cluda-image.").suffix(".png");
    // The mode any new file gets (tempfile's own is owner-only).
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
    let title = format!(
        "{} sub-pixels per pixel{}",
        image.subpixels(),
        if k > 1 {
            format!(", {k} x {k} binned")
        } else {
            String::new()
        }
    );
    map_png(tmp.path(), bh, bw, &binned, &title, "photons")?;
    if overwrite {
        tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    } else {
        tmp.persist_noclobber(path)
            .map_err(|e| Error::io(path, e.error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_bins() {
        let mut h = Histogram::new(0.0, 10.0, 5).unwrap();
        for v in [-1.0, 0.0, 1.9, 2.0, 9.99, 10.0, f64::NAN] {
            h.add(v);
        }
        assert_eq!(h.counts, vec![2, 1, 0, 0, 1]);
        assert_eq!((h.underflow, h.overflow), (2, 1));
        assert_eq!(h.total(), 7);
        assert!(Histogram::new(1.0, 1.0, 3).is_err());
        assert!(Histogram::new(0.0, f64::NAN, 3).is_err());
        assert!(Histogram::new(0.0, 1.0, 0).is_err());
    }

    #[test]
    fn viridis_ends() {
        let (lo, hi) = (viridis(0.0), viridis(1.0));
        assert_eq!(lo, RGBColor(68, 1, 84));
        assert!(hi.0 > 240 && hi.1 > 220 && hi.2 < 60, "{hi:?}");
        assert_eq!(viridis(f64::NAN), lo);
        assert_eq!(viridis(7.0), hi);
        assert_eq!(viridis(-1.0), lo);
    }

    #[test]
    fn auto_range_pads_the_quantiles() {
        let mut v: Vec<f64> = (0..=1000).map(f64::from).collect();
        let (lo, hi) = auto_range(&mut v);
        assert!((-60.0..0.0).contains(&lo), "{lo}");
        assert!(hi > 1000.0 && hi <= 1060.0, "{hi}");
        assert_eq!(auto_range(&mut []), (-200.0, 2000.0));
        let (lo, hi) = auto_range(&mut [5.0, 5.0]);
        assert!(lo < 5.0 && hi > 5.0);
    }
}
