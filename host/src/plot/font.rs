//! The font every plot's text is drawn with, embedded in cluda (DejaVu Sans).

use plotters::prelude::*;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// Font family name the plots use.
pub(super) const FAMILY: &str = "sans-serif";

/// DejaVu Sans (Bitstream Vera licence, which permits redistribution; the text is in
/// `assets/fonts/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

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
