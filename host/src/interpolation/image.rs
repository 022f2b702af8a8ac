//! Sub-pixel images: photons counted into `N x N` sub-pixels per detector pixel.

use cluda_gpu::eta;

use crate::error::{Error, Result};

/// Largest sub-pixel factor accepted.
pub const MAX_SUBPIXELS: u32 = 32;

/// A `(rows * n) x (cols * n)` image of photon counts (`u32`, saturating), row-major.
#[derive(Clone, Debug)]
pub struct SubpixelImage {
    n: u32,
    rows: usize,
    cols: usize,
    counts: Vec<u32>,
    /// Nothing was ever added: every count is zero, its pages perhaps not mapped yet.
    fresh: bool,
}

impl PartialEq for SubpixelImage {
    /// The same shape and counts.
    fn eq(&self, other: &Self) -> bool {
        (self.n, self.rows, self.cols) == (other.n, other.rows, other.cols)
            && self.counts == other.counts
    }
}

impl SubpixelImage {
    /// An empty image of `rows x cols` pixels with `n x n` sub-pixels each.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`subpixels`) unless `1 <= n <= 32`; (`frame`) for an
    /// empty frame shape; [`Error::TooLarge`] when the memory is not there.
    pub fn new(rows: usize, cols: usize, n: u32) -> Result<Self> {
        check_subpixels(n)?;
        if rows == 0 || cols == 0 {
            return Err(Error::param("frame", "an image needs at least one pixel"));
        }
        let len = (rows * n as usize)
            .checked_mul(cols * n as usize)
            .ok_or_else(|| Error::param("subpixels", "the image is too large"))?;
        let counts: Vec<u32> = crate::memory::zeroed_vec(
            || format!("a {}-sub-pixel image of {rows} x {cols} pixels", n * n),
            len,
        )?;
        Ok(Self {
            n,
            rows,
            cols,
            counts,
            fresh: true,
        })
    }

    /// The same image with every page of an image still empty mapped now, from every core
    /// ([`crate::memory::prefault`]): counting photons into it one by one reads each count
    /// before writing it, and a fresh page first read is mapped to the shared zero page and
    /// copied on the first write, with a TLB flush that interrupts every thread of the process
    /// (the finder's band threads).
    pub fn prefaulted(mut self) -> Self {
        if self.fresh {
            crate::memory::prefault(&mut self.counts);
        }
        self
    }

    /// Sub-pixels per pixel along each axis.
    pub fn subpixels(&self) -> u32 {
        self.n
    }

    /// The image's shape `(rows * n, cols * n)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows * self.n as usize, self.cols * self.n as usize)
    }

    /// The counts, row-major.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// Photons counted (the sum of every sub-pixel, saturated counts as they stand).
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| c as u64).sum()
    }

    /// The index in [`SubpixelImage::counts`] of a photon at `(x, y)`: `floor(y * n) * width
    /// + floor(x * n)`, or `None` outside the image.
    pub fn index_of(&self, x: f64, y: f64) -> Option<usize> {
        let (h, w) = self.shape();
        match (eta::subpixel(y, self.n, h), eta::subpixel(x, self.n, w)) {
            (Some(r), Some(c)) => Some(r * w + c),
            _ => None,
        }
    }

    /// Counts one photon at each index of `indices` ([`SubpixelImage::index_of`]'s),
    /// saturating. A loop of increments alone lets the processor keep many of their cache
    /// misses in flight (an image of 400 x 400 pixels at N = 4 is 10 MB), where counting each
    /// photon as it is placed waits for one miss at a time.
    ///
    /// # Panics
    /// On an index outside the image (not one of `index_of`'s).
    pub fn add_indices(&mut self, indices: &[u32]) {
        self.fresh = false;
        for &i in indices {
            let v = &mut self.counts[i as usize];
            *v = v.saturating_add(1);
        }
    }

    /// Counts a photon at `(x, y)` into `image[floor(y * n), floor(x * n)]`; a position
    /// outside the image is not counted. Whether it was.
    pub fn add(&mut self, x: f64, y: f64) -> bool {
        self.fresh = false;
        match self.index_of(x, y) {
            Some(i) => {
                let v = &mut self.counts[i];
                *v = v.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// Adds another image of the same shape, saturating.
    ///
    /// # Errors
    /// [`Error::Shape`] when `other` has another shape or sub-pixel factor.
    pub fn add_image(&mut self, other: &SubpixelImage) -> Result<()> {
        if (other.n, other.rows, other.cols) != (self.n, self.rows, self.cols) {
            return Err(Error::shape(
                "image",
                format!(
                    "{} x {} pixels of {} sub-pixels",
                    self.rows, self.cols, self.n
                ),
                format!(
                    "{} x {} pixels of {} sub-pixels",
                    other.rows, other.cols, other.n
                ),
            ));
        }
        self.fresh = false;
        for (a, &b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(b);
        }
        Ok(())
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// Adds counts made elsewhere (a GPU's), saturating; an empty image takes them as they
    /// are (no pass over them).
    ///
    /// # Errors
    /// [`Error::Shape`] when `counts` is not this image's size.
    pub fn add_counts(&mut self, counts: Vec<u32>) -> Result<()> {
        if counts.len() != self.counts.len() {
            return Err(Error::shape(
                "image counts",
                format!("{} sub-pixels", self.counts.len()),
                format!("{} sub-pixels", counts.len()),
            ));
        }
        if std::mem::take(&mut self.fresh) {
            self.counts = counts;
            return Ok(());
        }
        for (a, &b) in self.counts.iter_mut().zip(&counts) {
            *a = a.saturating_add(b);
        }
        Ok(())
    }
}

/// Checks a sub-pixel factor.
///
/// # Errors
/// [`Error::InvalidParameter`] (`subpixels`) unless `1 <= n <= 32`.
pub fn check_subpixels(n: u32) -> Result<()> {
    if (1..=MAX_SUBPIXELS).contains(&n) {
        Ok(())
    } else {
        Err(Error::param(
            "subpixels",
            format!("{n} sub-pixels per pixel; give 1 to {MAX_SUBPIXELS}"),
        ))
    }
}
