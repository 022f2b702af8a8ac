//! The checks of frame dimensions given on the command line (generated frames are
//! [`cluda::generate::Generated`], files are opened by [`cluda::engine::input::Input`]).

use cluda::{Error, Result};

/// Checks frame dimensions given on the command line: 1 ..= 65536 (cluster coordinates are
/// u16), and a frame stack of `frames` of them must be addressable.
pub fn check_dims(rows: usize, cols: usize, frames: usize) -> Result<()> {
    for (name, v) in [("rows", rows), ("cols", cols)] {
        if v == 0 || v > 65536 {
            return Err(Error::param(
                if name == "rows" { "rows" } else { "cols" },
                format!("must be between 1 and 65536, got {v}"),
            ));
        }
    }
    rows.checked_mul(cols)
        .and_then(|p| p.checked_mul(frames))
        .and_then(|n| n.checked_mul(2))
        .ok_or_else(|| {
            Error::param(
                "frames",
                format!("{frames} frames of {rows} x {cols} are too many to address"),
            )
        })?;
    Ok(())
}
