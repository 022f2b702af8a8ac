//! Eta cubes and sub-pixel images accumulated on the device, in the pipeline's output stage:
//! after a chunk's results were checked (they fit their room: nothing of an overflowing or
//! redone chunk is ever counted), one launch of `cluda_eta_cube` or `cluda_eta_image`
//! (`gpu/src/kernels/interp.rs`) reads its compact records where the finder left them and
//! adds to 64-bit counts on the device, on the compute stream (so the slot's next chunk
//! cannot overwrite them first). The counts come down once, when taken (an image's narrowed
//! to saturated `u32` on the device first, by `cluda_counts_to_u32`: half the bytes to copy).
//!
//! The same placing kernel writes each record's photon row for the host when rows are asked
//! for ([`crate::finder::ClusterFinder::place_rows`]): [`DevicePlacer`], launched by the
//! pipeline right after a chunk's kernels (a redone chunk is placed again; nothing is
//! counted), its rows downloaded with the records.
//!
//! [`DeviceClusters`] puts clusters found elsewhere on the device in the same layout, so that
//! [`DeviceAccum::count`] runs the same kernels on them alone (benchmarks time the eta, map
//! lookup and image step apart from finding; `benches/interp_step.rs`).

use std::sync::Arc;

use cluda_gpu::args::{DevicePtr, EtaCubeArgs, EtaImageArgs, NarrowArgs};
use cluda_gpu::eta::PlacedRow;
use cudarc::driver::CudaStream;

use super::launch::BLOCK;
use crate::cluster::{ClusterBatch, ClusterSize};
use crate::cuda::Device;
use crate::device_memory::DeviceBuf;
use crate::error::{CudaContextExt, Result};
use crate::interpolation::{
    Accumulate, Accumulated, AccumulatedCounts, CubeAxes, PlaceRows, Tally,
};
use crate::kernel::{Grid, Kernel};

/// Counters of the tally: clusters, inside, eta outside, energy outside, masked, window.
const TALLY: usize = 6;

/// Blocks per launch: a few per SM of an H200; the kernels stride over the records.
const GRID: u32 = 132 * 4;

/// A [`ClusterBatch`] on the device in the layout of the finder's compact results: the
/// batch's `frames + 1` running counts (its offsets, as `u32`), then its records, packed as
/// the host packs them (centre word, then the `side * side` values).
pub struct DeviceClusters {
    buf: DeviceBuf<u32>,
    frames: u32,
    total: u32,
    size: ClusterSize,
}

impl DeviceClusters {
    /// Uploads `batch` on `stream`; returns once the copy is done.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] (`clusters`) for a batch whose frames or words do
    /// not fit the kernels' `u32` counts; [`crate::Error::OutOfDeviceMemory`] or a CUDA
    /// error from the upload.
    pub fn upload(stream: &Arc<CudaStream>, batch: &ClusterBatch) -> Result<Self> {
        let too_large = || crate::Error::param("clusters", "more than the kernels' u32 counts");
        let words = batch
            .offsets()
            .len()
            .checked_add(batch.words().len())
            .filter(|&w| u32::try_from(w).is_ok())
            .ok_or_else(too_large)?;
        let mut host: Vec<u32> = Vec::with_capacity(words);
        host.extend(batch.offsets().iter().map(|&o| o as u32));
        host.extend_from_slice(batch.words());
        Ok(Self {
            buf: DeviceBuf::upload_on(stream, &host, "the clusters")?,
            frames: batch.frames() as u32,
            total: batch.total() as u32,
            size: batch.size(),
        })
    }

    /// Clusters on the device.
    pub fn len(&self) -> usize {
        self.total as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Their cluster size.
    pub fn size(&self) -> ClusterSize {
        self.size
    }
}

/// A cube's edges on the device, with the eta kind they bin.
struct DeviceEdges {
    kind: u32,
    x: (DeviceBuf<f64>, u32),
    y: (DeviceBuf<f64>, u32),
    e: (DeviceBuf<f64>, u32),
}

impl DeviceEdges {
    fn upload(stream: &Arc<CudaStream>, axes: &CubeAxes) -> Result<Self> {
        let up = |v: &[f64], name: &str| -> Result<(DeviceBuf<f64>, u32)> {
            Ok((DeviceBuf::upload_on(stream, v, name)?, v.len() as u32))
        };
        Ok(Self {
            kind: axes.kind as u32,
            x: up(axes.x.as_slice(), "eta_x edges")?,
            y: up(axes.y.as_slice(), "eta_y edges")?,
            e: up(axes.e.as_slice(), "energy edges")?,
        })
    }
}

/// A chunk's compact results on the device: `frames + 1` running counts at `out`, then the
/// records from word `records_at`, room for `room` of them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkRecords {
    /// The results' first word.
    pub out: DevicePtr<u32>,
    /// Frames in the chunk.
    pub frames: u32,
    /// Word of the first record.
    pub records_at: u32,
    /// Records the results have room for.
    pub room: u32,
}

/// Where one launch of the placing kernel puts what it computes; each output is skipped where
/// its pointer is null.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlacedOutputs {
    /// The image's 64-bit counts, `height x width` sub-pixels, `subpixels` per pixel.
    pub image: DevicePtr<u64>,
    /// Sub-pixels per pixel, and the image's rows and columns of sub-pixels.
    pub subpixels: u32,
    pub height: u32,
    pub width: u32,
    /// The six counters of the tally.
    pub tally: DevicePtr<u64>,
    /// One [`PlacedRow`] per record.
    pub photons: DevicePtr<PlacedRow>,
}

impl PlacedOutputs {
    /// Rows only, into `photons`.
    pub fn rows(photons: DevicePtr<PlacedRow>) -> Self {
        Self {
            image: DevicePtr::NULL,
            subpixels: 0,
            height: 0,
            width: 0,
            tally: DevicePtr::NULL,
            photons,
        }
    }
}

/// What places photons on the device (`cluda_eta_image`): the cube's edges, the maps, the
/// bad-pixel mask and the energy window. The image accumulation counts through it in the
/// output stage; the pipeline also launches it right after a chunk's kernels to write each
/// record's [`PlacedRow`] for the host ([`crate::finder::ClusterFinder::place_rows`]).
pub(crate) struct DevicePlacer {
    kernel: Kernel<EtaImageArgs>,
    size: ClusterSize,
    edges: DeviceEdges,
    ietax: DeviceBuf<f64>,
    ietay: DeviceBuf<f64>,
    mask: Option<(DeviceBuf<u8>, u32, u32)>,
    window: Option<(f64, f64)>,
}

impl DevicePlacer {
    /// Uploads what `rules` place with, for `size` clusters, on `stream`.
    pub fn new(
        device: &Device,
        stream: &Arc<CudaStream>,
        rules: &PlaceRows,
        size: ClusterSize,
    ) -> Result<Self> {
        let mask = match &rules.mask {
            Some(m) => {
                let (r, c) = m.shape();
                let bytes: Vec<u8> = (0..r * c)
                    .map(|i| u8::from(m.is_bad((i % c) as u16, (i / c) as u16)))
                    .collect();
                Some((
                    DeviceBuf::upload_on(stream, &bytes, "the mask")?,
                    r as u32,
                    c as u32,
                ))
            }
            None => None,
        };
        Ok(Self {
            kernel: Kernel::load(device)?,
            size,
            edges: DeviceEdges::upload(stream, rules.maps.axes())?,
            ietax: DeviceBuf::upload_on(stream, rules.maps.ietax(), "the x map")?,
            ietay: DeviceBuf::upload_on(stream, rules.maps.ietay(), "the y map")?,
            mask,
            window: rules.window.map(|w| (w.lo, w.hi)),
        })
    }

    /// Queues one launch over the records of `chunk` on `stream`, writing `to`.
    pub fn launch(
        &self,
        stream: &Arc<CudaStream>,
        chunk: ChunkRecords,
        to: PlacedOutputs,
    ) -> Result<()> {
        let e = &self.edges;
        let (mask, mask_rows, mask_cols) = match &self.mask {
            Some((m, r, c)) => (m.ptr(), *r, *c),
            None => (DevicePtr::NULL, 0, 0),
        };
        let (window_lo, window_hi, use_window) = match self.window {
            Some((lo, hi)) => (lo, hi, 1),
            None => (0.0, 0.0, 0),
        };
        let a = EtaImageArgs {
            out: chunk.out,
            frames: chunk.frames,
            records_at: chunk.records_at,
            room: chunk.room,
            side: self.size.side() as u32,
            kind: e.kind,
            xbins: e.x.0.ptr(),
            nx: e.x.1,
            ybins: e.y.0.ptr(),
            ny: e.y.1,
            ebins: e.e.0.ptr(),
            ne: e.e.1,
            ietax: self.ietax.ptr(),
            ietay: self.ietay.ptr(),
            subpixels: to.subpixels,
            height: to.height,
            width: to.width,
            mask,
            mask_rows,
            mask_cols,
            window_lo,
            window_hi,
            use_window,
            image: to.image,
            tally: to.tally,
            photons: to.photons,
        };
        // SAFETY: every buffer is live (owned by `self`, the outputs by the caller, the chunk's
        // results by the pipeline's slot, which the next chunk reuses only after this launch on
        // the same stream) and as large as the struct's docs say.
        unsafe { self.kernel.launch(stream, Grid::x(GRID, BLOCK), a) }
            .cuda("launching the photon placement")
    }
}

/// How [`DeviceAccum`] counts.
enum Counting {
    /// Into an eta cube (`cluda_eta_cube`).
    Cube {
        kernel: Kernel<EtaCubeArgs>,
        edges: DeviceEdges,
    },
    /// Into a sub-pixel image, through the placer; narrowed to `u32` by `narrow` when taken.
    Image {
        placer: DevicePlacer,
        narrow: Kernel<NarrowArgs>,
        subpixels: u32,
        height: u32,
        width: u32,
    },
}

/// What the device accumulates (an eta cube or a sub-pixel image, [`Accumulate`]), with its
/// buffers: the finder's pipeline launches it on every checked chunk; [`DeviceAccum::count`]
/// on clusters already on the device.
pub struct DeviceAccum {
    counting: Counting,
    size: ClusterSize,
    counts: DeviceBuf<u64>,
    len: usize,
    tally: DeviceBuf<u64>,
}

impl DeviceAccum {
    /// Uploads what `what` needs and zeroes its counts, for `rows x cols` frames of `size`
    /// clusters, on `stream`.
    pub fn new(
        device: &Device,
        stream: &Arc<CudaStream>,
        what: &Accumulate,
        size: ClusterSize,
        rows: usize,
        cols: usize,
    ) -> Result<Self> {
        let tally = DeviceBuf::zeroed_on_stream(stream, TALLY, "the tally")?;
        match what {
            Accumulate::Cube(a) => {
                let len = a.bins()?;
                Ok(Self {
                    counting: Counting::Cube {
                        kernel: Kernel::load(device)?,
                        edges: DeviceEdges::upload(stream, a)?,
                    },
                    size,
                    counts: DeviceBuf::zeroed_on_stream(stream, len, "the eta cube")?,
                    len,
                    tally,
                })
            }
            Accumulate::Image {
                maps,
                subpixels,
                window,
                mask,
            } => {
                crate::interpolation::image::check_subpixels(*subpixels)?;
                let n = *subpixels as usize;
                let (height, width) = (rows * n, cols * n);
                let len = height * width;
                let rules = PlaceRows {
                    maps: maps.clone(),
                    window: *window,
                    mask: mask.clone(),
                };
                Ok(Self {
                    counting: Counting::Image {
                        placer: DevicePlacer::new(device, stream, &rules, size)?,
                        narrow: Kernel::load(device)?,
                        subpixels: *subpixels,
                        height: height as u32,
                        width: width as u32,
                    },
                    size,
                    counts: DeviceBuf::zeroed_on_stream(stream, len, "the sub-pixel image")?,
                    len,
                    tally,
                })
            }
        }
    }

    /// Queues one launch of the accumulation kernel over every cluster of `clusters` on
    /// `stream` (the stream `self` was made on, or one ordered after it); the counts add up
    /// over launches.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] (`clusters`) when their size is not the one `self`
    /// was made for; a CUDA error from the launch.
    pub fn count(&self, stream: &Arc<CudaStream>, clusters: &DeviceClusters) -> Result<()> {
        if clusters.size != self.size {
            return Err(crate::Error::param(
                "clusters",
                format!(
                    "{} clusters for a {} accumulation",
                    clusters.size, self.size
                ),
            ));
        }
        let c = clusters;
        self.launch(
            stream,
            ChunkRecords {
                out: c.buf.ptr(),
                frames: c.frames,
                records_at: c.frames + 1,
                room: c.total,
            },
        )
    }

    /// Queues the count of a chunk's records on `stream`.
    pub(crate) fn launch(&self, stream: &Arc<CudaStream>, chunk: ChunkRecords) -> Result<()> {
        match &self.counting {
            Counting::Image {
                placer,
                subpixels,
                height,
                width,
                ..
            } => placer.launch(
                stream,
                chunk,
                PlacedOutputs {
                    image: self.counts.ptr(),
                    subpixels: *subpixels,
                    height: *height,
                    width: *width,
                    tally: self.tally.ptr(),
                    photons: DevicePtr::NULL,
                },
            ),
            Counting::Cube { kernel, edges } => {
                let a = EtaCubeArgs {
                    out: chunk.out,
                    frames: chunk.frames,
                    records_at: chunk.records_at,
                    room: chunk.room,
                    side: self.size.side() as u32,
                    kind: edges.kind,
                    xbins: edges.x.0.ptr(),
                    nx: edges.x.1,
                    ybins: edges.y.0.ptr(),
                    ny: edges.y.1,
                    ebins: edges.e.0.ptr(),
                    ne: edges.e.1,
                    counts: self.counts.ptr(),
                    tally: self.tally.ptr(),
                };
                // SAFETY: as for [`DevicePlacer::launch`].
                unsafe { kernel.launch(stream, Grid::x(GRID, BLOCK), a) }
                    .cuda("launching the eta accumulation")
            }
        }
    }

    /// The image's counts narrowed to saturated `u32` on the device, then downloaded into
    /// host memory whose pages were mapped first, from every core (a copy into fresh pages
    /// faults them in one at a time).
    fn narrowed(&self, f: &Kernel<NarrowArgs>, stream: &Arc<CudaStream>) -> Result<Vec<u32>> {
        let narrow = DeviceBuf::on_stream(stream, self.len, "the narrowed image")?;
        let len = u32::try_from(self.len)
            .map_err(|_| crate::Error::Internal("an image of over 2^32 sub-pixels".into()))?;
        let a = NarrowArgs {
            counts: self.counts.ptr(),
            len,
            narrow: narrow.ptr(),
        };
        let grid = self
            .len
            .div_ceil(BLOCK as usize)
            .clamp(1, GRID as usize * 8) as u32;
        // SAFETY: `counts` holds `len` u64 and `narrow` `len` u32 (allocated above), both
        // live until the stream is synchronised by the download below.
        unsafe { f.launch(stream, Grid::x(grid, BLOCK), a) }
            .cuda("narrowing the image's counts")?;
        let mut out: Vec<u32> =
            crate::memory::zeroed_vec(|| "the device's image counts".into(), self.len)?;
        crate::memory::prefault(&mut out);
        narrow.download_on(stream, &mut out, "the image's counts")?;
        Ok(out)
    }

    /// Downloads the counts and the tally on `stream` (waiting for every launch before).
    pub fn take(self, stream: &Arc<CudaStream>) -> Result<Accumulated> {
        self.peek(stream)
    }

    /// A copy of the counts and the tally so far, downloaded on `stream` (waiting for every
    /// launch queued on it before, and holding back what is queued after until the copy is
    /// done); the counts go on adding up. An image's come down narrowed, as
    /// [`DeviceAccum::take`]'s: one narrowing launch and a copy of 4 bytes per sub-pixel
    /// (64 MB for 400 x 400 pixels at 10 x 10 sub-pixels: a few ms).
    pub fn peek(&self, stream: &Arc<CudaStream>) -> Result<Accumulated> {
        let counts = match &self.counting {
            Counting::Cube { .. } => {
                let mut counts: Vec<u64> =
                    crate::memory::zeroed_vec(|| "the eta cube's counts".into(), self.len)?;
                self.counts
                    .download_on(stream, &mut counts, "the accumulated counts")?;
                AccumulatedCounts::Cube(counts)
            }
            Counting::Image { narrow, .. } => {
                AccumulatedCounts::Image(self.narrowed(narrow, stream)?)
            }
        };
        let mut t = [0u64; TALLY];
        self.tally.download_on(stream, &mut t, "the tally")?;
        Ok(Accumulated {
            counts,
            tally: Tally {
                clusters: t[0],
                inside: t[1],
                eta_outside: t[2],
                energy_outside: t[3],
                masked: t[4],
                window: t[5],
            },
            size: self.size,
        })
    }
}
