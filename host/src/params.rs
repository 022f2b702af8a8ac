//! Checks of parameters that several configurations share (the finder's, the generator's,
//! the raw writer's, the interpolation maps'), so that the same bad value is refused in the
//! same words wherever it is given.

use crate::error::{Error, Result};

/// Frames of `rows x cols` have at least one pixel.
///
/// # Errors
/// [`Error::InvalidParameter`] (`rows/cols`) when either is 0.
pub(crate) fn frame_pixels(rows: usize, cols: usize) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(Error::param(
            "rows/cols",
            format!("frames must have at least one pixel, got {rows} x {cols}"),
        ));
    }
    Ok(())
}

/// `value` (the parameter `name`) is finite and `>= 0`.
///
/// # Errors
/// [`Error::InvalidParameter`] (`name`) for a NaN, an infinity or a negative value.
pub(crate) fn finite_non_negative(name: &'static str, value: f64) -> Result<()> {
    if !value.is_finite() || value < 0.0 {
        return Err(Error::param(
            name,
            format!("must be finite and >= 0, got {value}"),
        ));
    }
    Ok(())
}

/// `values` (what `what` names) holds one value per pixel of `rows x cols`, row-major.
///
/// # Errors
/// [`Error::Shape`] (`what`) when it holds another number of values.
pub(crate) fn per_pixel<T>(what: &str, rows: usize, cols: usize, values: &[T]) -> Result<()> {
    if rows.checked_mul(cols) != Some(values.len()) {
        return Err(Error::shape(
            what,
            format!("{rows} x {cols} pixels"),
            format!("{} values", values.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each check passes good values and names the parameter and the bad value otherwise.
    #[test]
    fn good_values_pass_and_bad_ones_are_named() {
        assert!(frame_pixels(1, 1).is_ok());
        let e = frame_pixels(0, 400).expect_err("no rows");
        assert!(
            e.to_string().contains("at least one pixel, got 0 x 400"),
            "{e}"
        );
        assert!(finite_non_negative("nsigma", 0.0).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = finite_non_negative("nsigma", bad).expect_err("bad");
            assert!(e.to_string().contains("nsigma"), "{e}");
        }
        assert!(per_pixel("mask", 2, 3, &[0u8; 6]).is_ok());
        let e = per_pixel("mask", 2, 3, &[0u8; 5]).expect_err("short");
        assert!(e.to_string().contains("5 values"), "{e}");
        assert!(per_pixel("mask", usize::MAX, 2, &[0u8; 5]).is_err());
    }
}
