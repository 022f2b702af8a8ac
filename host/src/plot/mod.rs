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

mod accumulator;
mod bars;
mod draw;
mod font;
mod maps;
mod spectrum;
#[cfg(test)]
mod tests;

pub use accumulator::PlotAccumulator;
pub use bars::spectrum_png;
pub use draw::{PNG_SIZE, viridis};
pub use font::register_font;
pub use maps::{map_png, subpixel_png};
pub use spectrum::{
    AUTO_RANGE_SAMPLE, Histogram, MAX_SPECTRUM_ADU, MAX_SPECTRUM_BINS, MIN_SPECTRUM_SPAN,
    SpectrumOptions, auto_range,
};
