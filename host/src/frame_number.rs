//! [`FrameNumber`]: the number a frame is known by, from its source to every output.
//!
//! A raw acquisition's frames keep the receiver's header numbers (gaps and all); a `.npy`
//! file's, a generator's or a caller's frames are numbered by their index. The numbers ride
//! with the frames wherever they travel ([`FrameNumbers`]: on [`crate::Frames`], on the
//! engine's chunks, [`crate::finder::feed::FedChunk`]) and out with their clusters
//! ([`crate::FrameClusters::frame`], [`crate::Error::ClusterLimit`]), so no stage renumbers
//! them or relabels what it reports. The cluster file
//! holds frame numbers as `int32` and photon lists as `int64`: [`FrameNumber::to_file`] and
//! [`FrameNumber::to_photon_list`] are the one checked conversion each, an error past their
//! range, never a wrapped number.

use crate::error::{Error, Result};

/// A frame's number (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct FrameNumber(pub u64);

impl FrameNumber {
    /// The number `n`.
    pub const fn new(n: u64) -> Self {
        Self(n)
    }

    /// The number as a `u64`.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The number of the frame `k` frames after this one (saturating at `u64::MAX`, a number
    /// no source delivers).
    pub const fn after(self, k: usize) -> Self {
        Self(self.0.saturating_add(k as u64))
    }

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

impl From<u64> for FrameNumber {
    fn from(n: u64) -> Self {
        Self(n)
    }
}

impl From<FrameNumber> for u64 {
    fn from(n: FrameNumber) -> Self {
        n.0
    }
}

/// Compares with a plain number, so that `frame == 5` reads as it should.
impl PartialEq<u64> for FrameNumber {
    fn eq(&self, other: &u64) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Display for FrameNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The numbers of a run of frames, in order: consecutive from a first number (a `.npy`
/// file's, a generator's or a caller's frames; nothing is stored), or one listed per frame (a
/// raw acquisition's header numbers, gaps and all). Copied with the frames it numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameNumbers<'a> {
    /// `first`, `first + 1`, ... (saturating at `u64::MAX`, a number no source delivers).
    From(FrameNumber),
    /// One number per frame.
    Listed(&'a [FrameNumber]),
}

/// Frames numbered from 0: their index.
impl Default for FrameNumbers<'_> {
    fn default() -> Self {
        Self::From(FrameNumber(0))
    }
}

impl<'a> FrameNumbers<'a> {
    /// The number of frame `k` of the run; `None` past the end of a listed run.
    pub fn get(&self, k: usize) -> Option<FrameNumber> {
        match self {
            Self::From(first) => Some(first.after(k)),
            Self::Listed(numbers) => numbers.get(k).copied(),
        }
    }

    /// The numbers of frames `start .. start + count` of the run; `None` when a listed run
    /// does not hold them all.
    pub fn range(&self, start: usize, count: usize) -> Option<Self> {
        match self {
            Self::From(first) => Some(Self::From(first.after(start))),
            Self::Listed(numbers) => numbers
                .get(start..start.checked_add(count)?)
                .map(Self::Listed),
        }
    }

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

    #[test]
    fn after_counts_on_and_saturates() {
        assert_eq!(FrameNumber(7).after(3), FrameNumber(10));
        assert_eq!(FrameNumber(u64::MAX - 1).after(5), FrameNumber(u64::MAX));
        assert!(FrameNumber(4) == 4);
    }

    #[test]
    fn runs_of_numbers_are_consecutive_or_listed() {
        let from = FrameNumbers::From(FrameNumber(10));
        assert_eq!(from.get(5), Some(FrameNumber(15)));
        assert_eq!(
            from.range(3, 100),
            Some(FrameNumbers::From(FrameNumber(13)))
        );
        assert!(from.expect_frames(usize::MAX, "x").is_ok());
        assert_eq!(FrameNumbers::default().get(7), Some(FrameNumber(7)));
        let list = [FrameNumber(4), FrameNumber(9), FrameNumber(11)];
        let listed = FrameNumbers::Listed(&list);
        assert_eq!(listed.get(1), Some(FrameNumber(9)));
        assert_eq!(listed.get(3), None);
        assert_eq!(listed.range(1, 2), Some(FrameNumbers::Listed(&list[1..])));
        assert_eq!(listed.range(2, 2), None);
        assert_eq!(listed.range(usize::MAX, 2), None);
        assert!(listed.expect_frames(3, "x").is_ok());
        let e = listed.expect_frames(2, "chunk frame numbers").unwrap_err();
        assert!(e.to_string().contains("chunk frame numbers"), "{e}");
    }
}
