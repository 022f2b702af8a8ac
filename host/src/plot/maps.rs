//! Maps drawn with the viridis colours: pixel maps (hit map, pedestal mean and noise) and
//! sub-pixel images.

use plotters::prelude::*;
use std::path::Path;

use super::draw::{PNG_SIZE, draw_err, num, viridis};
use super::font::{FAMILY, register_font};
use super::spectrum::quantile;
use crate::error::{Error, Result};

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
