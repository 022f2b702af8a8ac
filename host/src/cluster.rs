//! Cluster records and batches of them.
//!
//! A cluster is stored as aare's packed record `{u16 x, u16 y, i32 data[X*Y]}`: one 32-bit
//! word holding `x` (low half) and `y` (high half), then `X*Y` data words. Batches keep the
//! records of many frames in one `Vec<u32>` with per-frame offsets, so their bytes are exactly
//! the cluster file's on little-endian machines and no per-frame vector is allocated.

use bytemuck::{Pod, Zeroable};
use cluda_gpu::eta::PlacedRow;

use crate::error::{Error, Result};
use crate::frame_number::FrameNumber;

/// The cluster (window) sizes cluda supports: 3x3, 5x5, 7x7 and 9x9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterSize {
    /// 3 x 3 window.
    S3,
    /// 5 x 5 window.
    S5,
    /// 7 x 7 window.
    S7,
    /// 9 x 9 window.
    S9,
}

impl ClusterSize {
    /// All supported sizes, smallest first.
    pub const ALL: [ClusterSize; 4] = [
        ClusterSize::S3,
        ClusterSize::S5,
        ClusterSize::S7,
        ClusterSize::S9,
    ];

    /// The size with window side `side` (3, 5, 7 or 9).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`cluster`) unless `side` is 3, 5, 7 or 9.
    pub fn from_side(side: usize) -> Result<Self> {
        match side {
            3 => Ok(Self::S3),
            5 => Ok(Self::S5),
            7 => Ok(Self::S7),
            9 => Ok(Self::S9),
            _ => Err(Error::param(
                "cluster",
                format!("cluster size {side} is not supported; use 3, 5, 7 or 9"),
            )),
        }
    }

    /// Window side X (= Y).
    pub const fn side(self) -> usize {
        match self {
            Self::S3 => 3,
            Self::S5 => 5,
            Self::S7 => 7,
            Self::S9 => 9,
        }
    }

    /// The side as the command line writes it (`--cluster 3`).
    pub const fn side_name(self) -> &'static str {
        match self {
            Self::S3 => "3",
            Self::S5 => "5",
            Self::S7 => "7",
            Self::S9 => "9",
        }
    }

    /// Values per cluster, X * Y.
    pub const fn cells(self) -> usize {
        self.side() * self.side()
    }

    /// 32-bit words per packed record (one for x and y, then the data).
    pub const fn record_words(self) -> usize {
        1 + self.cells()
    }

    /// Bytes per packed record in the cluster file.
    pub const fn record_bytes(self) -> usize {
        4 * self.record_words()
    }
}

impl std::fmt::Display for ClusterSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{0}x{0}", self.side())
    }
}

/// A typed cluster record with `N = X * Y` values, layout-identical to aare's.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cluster<const N: usize> {
    /// Column of the centre.
    pub x: u16,
    /// Row of the centre.
    pub y: u16,
    /// Pedestal-corrected values of the window, row-major from the top-left, rounded half away
    /// from zero; 0 for neighbours outside the frame.
    pub data: [i32; N],
}

// SAFETY: repr(C), fields are Pod, and there is no padding (2 + 2 bytes, then 4-byte aligned
// i32s), so every bit pattern is valid and the size is 4 + 4N.
unsafe impl<const N: usize> Zeroable for Cluster<N> {}
// SAFETY: as for `Zeroable` above.
unsafe impl<const N: usize> Pod for Cluster<N> {}

/// A 3x3 cluster record.
pub type Cluster3x3 = Cluster<9>;
/// A 5x5 cluster record.
pub type Cluster5x5 = Cluster<25>;
/// A 7x7 cluster record.
pub type Cluster7x7 = Cluster<49>;
/// A 9x9 cluster record.
pub type Cluster9x9 = Cluster<81>;

/// Packs a centre's coordinates into a record's first word.
#[inline(always)]
pub fn pack_xy(x: u16, y: u16) -> u32 {
    x as u32 | (y as u32) << 16
}

/// A borrowed cluster of any size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterRef<'a> {
    /// Column of the centre.
    pub x: u16,
    /// Row of the centre.
    pub y: u16,
    /// The X*Y values, row-major from the top-left.
    pub data: &'a [i32],
}

impl ClusterRef<'_> {
    /// Sum of the cluster's values (the photon's energy estimate in ADU).
    pub fn sum(&self) -> i64 {
        self.data.iter().map(|&v| v as i64).sum()
    }
}

/// The clusters of one frame, borrowed from a batch or from a finder's result buffer.
#[derive(Clone, Copy, Debug)]
pub struct FrameClusters<'a> {
    /// The frame's number, as its frames or chunk gave it (`find_each`:
    /// [`crate::Frames::number`], its index in the call unless numbered; `find_feed`:
    /// [`crate::finder::feed::FedChunk::numbers`], the source's frame number from the engine).
    pub frame: FrameNumber,
    size: ClusterSize,
    words: &'a [u32],
    placed: Option<&'a [PlacedRow]>,
}

impl<'a> FrameClusters<'a> {
    /// Wraps packed records; `words.len()` must be a multiple of the record size.
    pub fn new(frame: FrameNumber, size: ClusterSize, words: &'a [u32]) -> Self {
        debug_assert_eq!(words.len() % size.record_words(), 0);
        Self {
            frame,
            size,
            words,
            placed: None,
        }
    }

    /// The same clusters with the rows a finder placed them at on its device
    /// ([`crate::finder::ClusterFinder::place_rows`]): one per cluster, in their order.
    ///
    /// # Errors
    /// [`Error::Internal`] when there is not one row per cluster.
    pub fn with_placed(mut self, rows: &'a [PlacedRow]) -> Result<Self> {
        if rows.len() != self.len() {
            return Err(Error::Internal(format!(
                "{} placed rows for {} clusters in frame {}",
                rows.len(),
                self.len(),
                self.frame
            )));
        }
        self.placed = Some(rows);
        Ok(self)
    }

    /// The rows the finder placed these clusters at on its device, one per cluster in their
    /// order, when it was asked to ([`crate::finder::ClusterFinder::place_rows`]); `None`
    /// otherwise (the caller places them).
    pub fn placed(&self) -> Option<&'a [PlacedRow]> {
        self.placed
    }

    /// The cluster size.
    pub fn size(&self) -> ClusterSize {
        self.size
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.words.len() / self.size.record_words()
    }

    /// Whether the frame has no clusters.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Cluster `i`. Panics when out of range.
    pub fn get(&self, i: usize) -> ClusterRef<'a> {
        let w = self.size.record_words();
        record(&self.words[i * w..(i + 1) * w])
    }

    /// The clusters in row-major order of their centres.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ClusterRef<'a>> + 'a {
        let w = self.size.record_words();
        self.words.chunks_exact(w).map(record)
    }

    /// The packed records as words.
    pub fn words(&self) -> &'a [u32] {
        self.words
    }

    /// The packed records as bytes (aare's layout on little-endian machines).
    pub fn as_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.words)
    }

    /// Typed records, when `N` equals this frame's X*Y.
    pub fn typed<const N: usize>(&self) -> Option<&'a [Cluster<N>]> {
        (N == self.size.cells()).then(|| bytemuck::cast_slice(self.words))
    }

    /// The same clusters moved by `rows` rows and `cols` columns (each centre's `y += rows`,
    /// `x += cols`; the values unchanged), copied into `out` (emptied first, its capacity
    /// kept): the clusters of a frame that is a part of a larger one (a receiver ROI) in the
    /// larger frame's coordinates. Their order stays row-major, since every centre moves alike.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`origin`) when a moved centre does not fit a `u16`
    /// coordinate (frames are at most 65536 pixels a side, so a valid origin never does that).
    pub fn shifted_into<'b>(
        &self,
        rows: usize,
        cols: usize,
        out: &'b mut Vec<u32>,
    ) -> Result<FrameClusters<'b>> {
        out.clear();
        out.extend_from_slice(self.words);
        let w = self.size.record_words();
        for rec in out.chunks_exact_mut(w) {
            let (x, y) = (rec[0] & 0xFFFF, rec[0] >> 16);
            let (nx, ny) = (x as usize + cols, y as usize + rows);
            let (Ok(nx), Ok(ny)) = (u16::try_from(nx), u16::try_from(ny)) else {
                return Err(Error::param(
                    "origin",
                    format!(
                        "a cluster at column {x}, row {y} moved by {cols} columns and {rows} \
                         rows lies at column {nx}, row {ny}, beyond the largest coordinate \
                         65535"
                    ),
                ));
            };
            rec[0] = pack_xy(nx, ny);
        }
        Ok(FrameClusters::new(self.frame, self.size, out))
    }
}

fn record(w: &[u32]) -> ClusterRef<'_> {
    ClusterRef {
        x: w[0] as u16,
        y: (w[0] >> 16) as u16,
        data: bytemuck::cast_slice(&w[1..]),
    }
}

/// The clusters of many frames in one buffer, with per-frame offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterBatch {
    size: ClusterSize,
    words: Vec<u32>,
    /// `offsets[i]..offsets[i+1]` are frame i's clusters (in clusters, not words).
    offsets: Vec<usize>,
}

impl ClusterBatch {
    /// An empty batch of clusters of `size`.
    pub fn new(size: ClusterSize) -> Self {
        Self {
            size,
            words: Vec::new(),
            offsets: vec![0],
        }
    }

    /// The cluster size.
    pub fn size(&self) -> ClusterSize {
        self.size
    }

    /// Number of frames in the batch.
    pub fn frames(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Total number of clusters.
    pub fn total(&self) -> usize {
        self.words.len() / self.size.record_words()
    }

    /// Per-frame offsets (in clusters), `frames() + 1` entries starting at 0.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// Frame `i`'s clusters. Panics when out of range.
    pub fn frame(&self, i: usize) -> FrameClusters<'_> {
        let w = self.size.record_words();
        FrameClusters::new(
            FrameNumber(i as u64),
            self.size,
            &self.words[self.offsets[i] * w..self.offsets[i + 1] * w],
        )
    }

    /// Every frame's clusters in order.
    pub fn iter_frames(&self) -> impl ExactSizeIterator<Item = FrameClusters<'_>> {
        (0..self.frames()).map(|i| self.frame(i))
    }

    /// Appends one frame's packed records (renumbered to this batch's frame index).
    pub fn push_frame(&mut self, words: &[u32]) {
        debug_assert_eq!(words.len() % self.size.record_words(), 0);
        self.words.extend_from_slice(words);
        self.offsets.push(self.total());
    }

    /// All packed records, frame after frame.
    pub fn words(&self) -> &[u32] {
        &self.words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Moving clusters changes only their centres; a centre beyond 65535 is an error.
    #[test]
    fn shifted_moves_the_centres_only() {
        let mut words = vec![pack_xy(1, 2)];
        words.extend((1..=9).map(|v| v as u32));
        words.push(pack_xy(3, 0));
        words.extend((1..=9).map(|v| (v * 10) as u32));
        let fc = FrameClusters::new(FrameNumber(7), ClusterSize::S3, &words);
        let mut out = Vec::new();
        let moved = fc.shifted_into(5, 10, &mut out).unwrap();
        assert_eq!(moved.frame, 7);
        let got: Vec<(u16, u16, i64)> = moved.iter().map(|c| (c.x, c.y, c.sum())).collect();
        assert_eq!(got, [(11, 7, 45), (13, 5, 450)]);
        let mut out = Vec::new();
        assert!(fc.shifted_into(0, 65_534, &mut out).is_err());
    }
}
