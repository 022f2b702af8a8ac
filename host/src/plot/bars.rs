//! The spectrum drawn as bars, on a linear or a log scale.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

use super::draw::{PNG_SIZE, draw_err, num};
use super::font::{FAMILY, register_font};
use super::spectrum::Histogram;
use crate::error::Result;

/// Draws `hist` as a bar histogram into the PNG `path`, marking the fullest bin above 100
/// ADU; `log` draws the counts on a logarithmic axis.
///
/// # Errors
/// [`Error::Format`](crate::error::Error::Format) naming `path` when plotters cannot draw or write the PNG (for example an
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
