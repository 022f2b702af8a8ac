//! What every plot shares: its size, number labels, the colour map, drawing errors.

use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use std::path::Path;

use crate::error::Error;

pub(super) fn draw_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::format(path, format!("cannot draw the plot: {e}"))
}

/// Size of every PNG written here, in pixels (width, height).
pub const PNG_SIZE: (u32, u32) = (960, 800);

/// The viridis colour map (plotters' [`ViridisRGB`]): `t` in `[0, 1]` from dark purple
/// through teal to yellow; values outside are clamped and NaN is the low end.
pub fn viridis(t: f64) -> RGBColor {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    ViridisRGB::get_color(t)
}

/// A number with as many decimals as its size calls for.
pub(super) fn num(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 || a == 0.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.1}"),
        _ => format!("{v:.3}"),
    }
}
