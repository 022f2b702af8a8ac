//! One input of a run, opened by path: a raw acquisition (its master `.json`) or a `.npy`
//! frame stack, as a [`FrameSource`] with a name for messages and a frame count.

use std::path::Path;

use super::EngineConfig;
use crate::error::{Error, Result};
use crate::io::{FrameSource, NpyFrames, is_raw_master, open_frames_or};

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
    /// frames than its files hold (records with lost packets are skipped), so it is read once
    /// to count them. For `.npy` files the header says. `cancel` is asked between chunks.
    ///
    /// # Errors
    /// As [`Input::open`], the reading's errors, and `cancel`'s.
    pub fn count_exactly(path: &Path, what: &str, cancel: Cancel<'_>) -> Result<Self> {
        let mut input = Self::open(path, what)?;
        if is_raw_master(path) {
            let mut counter = Self::open(path, what)?;
            let (rows, cols) = (counter.frames.rows(), counter.frames.cols());
            let chunk = EngineConfig::for_frames(rows, cols).chunk;
            let (mut buf, mut numbers, mut n) = (Vec::new(), Vec::new(), 0u64);
            loop {
                cancel()?;
                buf.clear();
                numbers.clear();
                match counter.frames.read_frames(chunk, &mut buf, &mut numbers)? {
                    0 => break,
                    k => n += k as u64,
                }
            }
            input.len = n;
        }
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
