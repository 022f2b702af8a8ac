//! One input of a run, opened by path: a raw acquisition (its master `.json`) or a `.npy`
//! frame stack, as a [`FrameSource`] with a name for messages and a frame count.

use std::path::Path;

use crate::error::{Error, Result};
use crate::io::raw::Roi;
use crate::io::{Cropped, FrameSource, NpyFrames, open_frames_or};

/// A check called between chunks of a long read: an error (e.g. [`Error::Interrupted`]
/// after a termination signal) stops the read with it.
pub type Cancel<'a> = &'a (dyn Fn() -> Result<()> + Sync);

/// A [`Cancel`] that never stops.
pub fn never_cancel() -> Result<()> {
    Ok(())
}

/// One input of a run: its frames, what to call it in messages, and how many frames it holds
/// (exact for a pedestal, see [`Input::count_exactly`]; otherwise an upper bound).
pub struct Input<'a> {
    /// What the frames are, for messages (e.g. `data file d.npy`).
    pub describe: String,
    /// The frames.
    pub frames: Box<dyn FrameSource + Send + 'a>,
    /// Frames it will deliver (an upper bound for raw acquisitions until counted).
    pub len: u64,
}

impl<'a> Input<'a> {
    /// Any frame source, called `describe` in messages; [`Input::len`] is its
    /// [`FrameSource::remaining_hint`].
    pub fn from_source(
        describe: impl Into<String>,
        frames: Box<dyn FrameSource + Send + 'a>,
    ) -> Self {
        Self {
            describe: describe.into(),
            len: frames.remaining_hint(),
            frames,
        }
    }
}

impl Input<'static> {
    /// Opens `path`: a raw master file (`<base>_master_<N>.json`) or a `.npy` frame stack;
    /// `what` says which input it is (`pedestal`, `data`).
    ///
    /// # Errors
    /// [`Error::Io`] or [`Error::Format`] naming the file when it cannot be opened or is not
    /// a frame stack or raw acquisition cluda reads.
    pub fn open(path: &Path, what: &str) -> Result<Self> {
        let frames = open_frames_or(path, |p| {
            Ok(Box::new(NpyFrames::open(p)?) as Box<dyn FrameSource + Send>)
        })?;
        Ok(Self::from_source(
            format!("{what} file {}", path.display()),
            frames,
        ))
    }

    /// Like [`Input::open`], but [`Input::len`] is exact: a raw acquisition may deliver fewer
    /// frames than its files hold (records with lost packets are skipped), so its record
    /// headers are read to count them ([`FrameSource::count_remaining`]; no image is read
    /// twice). For `.npy` files the header says. `cancel` is asked before and after counting.
    ///
    /// # Errors
    /// As [`Input::open`], the counting's errors, and `cancel`'s.
    pub fn count_exactly(path: &Path, what: &str, cancel: Cancel<'_>) -> Result<Self> {
        let mut input = Self::open(path, what)?;
        cancel()?;
        input.len = input.frames.count_remaining()?;
        cancel()?;
        Ok(input)
    }

    /// [`Input::count_exactly`] for a pedestal: it must hold at least one frame, and no more
    /// than a pedestal window can take (`u32::MAX`); returns the window N as well.
    ///
    /// # Errors
    /// As [`Input::count_exactly`]; [`Error::InvalidParameter`] (`pedestal`) for an empty or
    /// too long input.
    pub fn pedestal(path: &Path, cancel: Cancel<'_>) -> Result<(Self, u32)> {
        let input = Self::count_exactly(path, "pedestal", cancel)?;
        let n = input.pedestal_window()?;
        Ok((input, n))
    }
}

impl Input<'_> {
    /// The pedestal window N this input gives as a pedestal: its frame count, which must be
    /// between 1 and `u32::MAX`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`pedestal`) otherwise.
    pub fn pedestal_window(&self) -> Result<u32> {
        if self.len == 0 {
            return Err(Error::param(
                "pedestal",
                format!(
                    "{} holds no frames; the pedestal needs at least one",
                    self.describe
                ),
            ));
        }
        u32::try_from(self.len).map_err(|_| {
            Error::param(
                "pedestal",
                format!(
                    "{} holds {} frames, more than a pedestal window of at most {} frames",
                    self.describe,
                    self.len,
                    u32::MAX
                ),
            )
        })
    }

    /// The input's gap report for a person, when it lost frames (missing, partial or
    /// truncated raw frames); `None` for a clean input or one that cannot lose frames.
    pub fn gap_warning(&self) -> Option<String> {
        self.frames
            .gaps()
            .filter(|g| !g.is_clean())
            .map(|g| format!("{}: {}", self.describe, g.summary()))
    }
}

impl<'a> Input<'a> {
    /// The receiver ROI this input's frames are, in its detector's pixels, when they are not
    /// the whole detector (a raw acquisition with a receiver ROI): from
    /// [`FrameSource::origin`] and the frames' shape.
    pub fn roi(&self) -> Option<Roi> {
        let f = &self.frames;
        let ((ymin, xmin), rows, cols) = (f.origin(), f.rows(), f.cols());
        (f.detector_shape() != (rows, cols) || (ymin, xmin) != (0, 0)).then(|| Roi {
            xmin,
            xmax: xmin + cols.saturating_sub(1),
            ymin,
            ymax: ymin + rows.saturating_sub(1),
        })
    }

    /// This input (a pedestal) fitted to the data inputs `data`: when its frames are the whole
    /// detector and every data input holds the same receiver ROI of a detector of that shape,
    /// its frames are cut down to that ROI ([`Cropped`]) and a note for a person says so;
    /// otherwise it is left as it is (`None`), and the shape check refuses what does not
    /// match ([`shape_mismatch`]).
    ///
    /// # Errors
    /// None in practice: the ROI lies inside the frames by construction ([`Cropped::new`]).
    pub fn fit_to(&mut self, data: &[&Input<'_>]) -> Result<Option<String>> {
        let shape = (self.frames.rows(), self.frames.cols());
        let mut rois = data.iter().map(|d| {
            d.roi()
                .filter(|_| d.frames.detector_shape() == shape && self.roi().is_none())
        });
        let Some(Some(roi)) = rois.next() else {
            return Ok(None);
        };
        if !rois.all(|r| r == Some(roi)) {
            return Ok(None);
        }
        let placeholder: Box<dyn FrameSource + Send + 'a> =
            Box::new(crate::io::MemorySource::new(vec![0], 1, 1)?);
        let inner = std::mem::replace(&mut self.frames, placeholder);
        self.frames = Box::new(Cropped::new(inner, roi)?);
        Ok(Some(format!(
            "{} holds frames of the whole detector ({} x {}); the data hold the receiver ROI \
             {roi} (xmin, xmax, ymin, ymax): the pedestal is cut down to the ROI's {} x {} \
             pixels (rows {}..={}, columns {}..={})",
            self.describe,
            shape.0,
            shape.1,
            roi.rows(),
            roi.cols(),
            roi.ymin,
            roi.ymax,
            roi.xmin,
            roi.xmax
        )))
    }
}

/// The error for data input `data` whose frames have the pedestal's shape but lie elsewhere
/// on the detector: a pedestal that holds a receiver ROI (a raw acquisition) is of those
/// pixels only, so data of another ROI (or of no ROI) are refused with both named; `None`
/// when they fit (a pedestal without an ROI fits any data of its shape).
pub fn place_mismatch(data: &Input<'_>, pedestal: &Input<'_>) -> Option<Error> {
    let p = pedestal.roi()?;
    let d = data.roi();
    let same_shape = (data.frames.rows(), data.frames.cols())
        == (pedestal.frames.rows(), pedestal.frames.cols());
    (same_shape && d != Some(p)).then(|| {
        Error::shape(
            format!("{} against {}", data.describe, pedestal.describe),
            format!("frames of the pedestal's receiver ROI {p} (xmin, xmax, ymin, ymax)"),
            match d {
                Some(d) => format!("frames of the receiver ROI {d}: other pixels"),
                None => "frames of a whole detector: other pixels".to_string(),
            },
        )
    })
}

/// The error for data input `data` whose frames are not of the pedestal's `shape` (rows x
/// cols; `pedestal` names it): [`Error::Shape`] naming both shapes, and for data that hold a
/// receiver ROI, the ROI and what pedestal would fit.
pub fn shape_mismatch(data: &Input<'_>, pedestal: &str, shape: (usize, usize)) -> Error {
    let got = (data.frames.rows(), data.frames.cols());
    let roi = data.roi().map_or(String::new(), |r| {
        let (dr, dc) = data.frames.detector_shape();
        format!(
            ", the receiver ROI {r} (xmin, xmax, ymin, ymax) of a {dr} x {dc} detector; a \
             pedestal for it is a raw acquisition with the same ROI, frames of the ROI's \
             shape, or frames of the whole {dr} x {dc} detector (cut down to the ROI when \
             every data input holds that ROI)"
        )
    });
    Error::shape(
        format!("{} against {pedestal}", data.describe),
        format!("{} x {} frames (as in the pedestal)", shape.0, shape.1),
        format!("{} x {} frames{roi}", got.0, got.1),
    )
}
