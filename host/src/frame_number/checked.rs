//! The checked conversions of frame numbers and the count check of a run of them: the ones
//! that return [`Error`]s (which name frame numbers themselves, so these live apart from the
//! types).

use super::{FrameNumber, FrameNumbers};
use crate::error::{Error, Result};

impl FrameNumber {
    /// The number as the cluster file's `int32` frame number.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] named `param` when it is above `i32::MAX`, naming the
    /// number and `what` holds it (e.g. the input).
    pub fn to_file(self, param: &'static str, what: &str) -> Result<i32> {
        i32::try_from(self.0).map_err(|_| {
            Error::param(
                param,
                format!(
                    "frame number {self} of {what} does not fit the cluster file's i32 frame numbers (at most {})",
                    i32::MAX
                ),
            )
        })
    }

    /// The number as a photon list's `int64` frame number.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`photons`) when it is above `i64::MAX`.
    pub fn to_photon_list(self) -> Result<i64> {
        i64::try_from(self.0).map_err(|_| {
            Error::param(
                "photons",
                format!("frame number {self} does not fit the photon list's int64"),
            )
        })
    }
}

impl FrameNumbers<'_> {
    /// Checks that the run numbers `frames` frames: always when consecutive, when it lists
    /// exactly that many numbers otherwise. `what` names the numbers in the error.
    ///
    /// # Errors
    /// [`Error::Shape`] naming `what` when a listed run holds another count of numbers.
    pub fn expect_frames(&self, frames: usize, what: &str) -> Result<()> {
        match self {
            Self::Listed(numbers) if numbers.len() != frames => Err(Error::shape(
                what,
                format!("{frames} (one per frame)"),
                format!("{}", numbers.len()),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_file_takes_numbers_up_to_i32_max_and_refuses_the_next() {
        let max = i32::MAX as u64;
        assert_eq!(FrameNumber(0).to_file("out", "x").ok(), Some(0));
        assert_eq!(FrameNumber(max).to_file("out", "x").ok(), Some(i32::MAX));
        let e = FrameNumber(max + 1)
            .to_file("out", "data/run_master_0.json")
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("frame number 2147483648 of data/run_master_0.json")
                && text.contains("at most 2147483647"),
            "{text}"
        );
        assert!(
            matches!(e, Error::InvalidParameter { name: "out", .. }),
            "{e:?}"
        );
        assert!(FrameNumber(u64::MAX).to_file("out", "x").is_err());
    }

    #[test]
    fn photon_lists_take_numbers_up_to_i64_max() {
        assert_eq!(
            FrameNumber(i64::MAX as u64).to_photon_list().ok(),
            Some(i64::MAX)
        );
        assert!(FrameNumber(i64::MAX as u64 + 1).to_photon_list().is_err());
    }
}
