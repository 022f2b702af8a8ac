//! cluda: photon cluster finding for hybrid pixel detectors (MOENCH) on the GPU with kernels
//! written in Rust, bit-identical to its CPU reference; and nearest-neighbour descriptor
//! matching.
//!
//! A finder keeps a running pedestal (per-pixel mean and noise of dark frames) and, for every
//! frame, reports the clusters (an N x N window of pedestal-subtracted values around a local
//! maximum above `n_sigma` noise) in frame order. The CPU finder ([`CpuFinder`]) is the
//! reference; the GPU finder ([`GpuFinder`]) gives the same clusters, bit for bit.
//!
//! # Quick start: finding clusters on the CPU
//!
//! ```
//! use cluda::generate::{GenConfig, Generator};
//! use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames};
//!
//! # fn main() -> cluda::Result<()> {
//! let (rows, cols) = (64, 64);
//! // Simulated MOENCH-like frames: 50 dark ones for the pedestal, then 5 with photons.
//! let generator = Generator::new(GenConfig::new(rows, cols, 1))?;
//! let dark = generator.frames(0, 50, false);
//! let data = generator.frames(50, 5, true);
//!
//! let config = FinderConfig::new(rows, cols)
//!     .size(ClusterSize::S3)
//!     .n_sigma(5.0)
//!     .pedestal_frames(50);
//! let mut finder = CpuFinder::new(config)?;
//! finder.push_pedestal(Frames::new(&dark, 50, rows, cols)?)?;
//! let batch = finder.find(Frames::new(&data, 5, rows, cols)?)?;
//! for frame in batch.iter_frames() {
//!     for c in frame.iter() {
//!         let _ = (c.x, c.y, c.sum());
//!     }
//! }
//! assert_eq!(batch.frames(), 5);
//! # Ok(())
//! # }
//! ```
//!
//! Frames can also come from an [`ndarray`] view ([`Frames::from_array3`]); use the
//! re-exported [`cluda::ndarray`](ndarray) so that the versions match.
//!
//! # Files: reading `.npy` or raw frames, writing an aare cluster file
//!
//! ```no_run
//! use std::path::Path;
//! use cluda::io::{ClusterFileWriter, npy};
//! use cluda::{ClusterFinder, CpuFinder, FinderConfig};
//!
//! # fn main() -> cluda::Result<()> {
//! let dark = npy::read_u16_frames(Path::new("pedestal.npy"))?; // frames x rows x cols uint16
//! let data = npy::read_u16_frames(Path::new("data.npy"))?;
//! let dark = dark.as_frames()?;
//! let n = u32::try_from(dark.len()).expect("a pedestal window fits in u32");
//! let config = FinderConfig::new(dark.rows(), dark.cols()).pedestal_frames(n);
//! let mut finder = CpuFinder::new(config)?;
//! finder.push_pedestal(dark)?;
//!
//! let mut out = ClusterFileWriter::create(Path::new("clusters.clust"))?;
//! finder.find_each(data.as_frames()?, &mut |frame| {
//!     out.write_frame(frame.frame.to_file("out", "data.npy")?, &frame)
//! })?;
//! out.commit()?;
//! # Ok(())
//! # }
//! ```
//!
//! Large `.npy` files can be read a chunk of frames at a time with [`io::NpyFrames`];
//! slsDetector raw acquisitions (a `*_master_<N>.json` and its `.raw` files) are read with
//! [`io::open_frames`], which streams frames and reports missing ones.
//!
//! # On the GPU
//!
//! [`GpuFinder`] implements the same [`ClusterFinder`] trait. It needs a CUDA driver and
//! device at run time (cluda builds without CUDA and its GPU code is loaded dynamically);
//! without one it returns [`Error::NoGpu`]. [`engine::open_finder`] picks the device from a
//! [`finder::select::DeviceChoice`] (`Auto` falls back to the CPU), says why, and opens the
//! finder to use directly or to feed through the engine ([`engine::FedFinder`]).
//!
//! ```no_run
//! # #[cfg(feature = "gpu")]
//! # fn main() -> cluda::Result<()> {
//! use cluda::engine::open_finder;
//! use cluda::finder::select::DeviceChoice;
//! use cluda::{ClusterFinder, FinderConfig, GpuFinder};
//!
//! let config = FinderConfig::new(400, 400).pedestal_frames(1000);
//! // Explicitly on the GPU (an error if there is none):
//! let gpu = GpuFinder::new(config.clone())?;
//! // Or whatever is available, with a note saying which device was chosen:
//! let (finder, note) = open_finder(config, DeviceChoice::Auto, None)?;
//! println!("{note}: {}", finder.device());
//! # let _ = gpu;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "gpu"))]
//! # fn main() {}
//! ```
//!
//! # Modules
//!
//! * [`finder`]: the [`ClusterFinder`] trait, the CPU and GPU finders and device selection.
//! * [`config`]: [`FinderConfig`] (cluster size, threshold, pedestal window, precision).
//! * [`pedestal`]: the running per-pixel pedestal ([`Pedestal`]).
//! * [`frames`]: borrowed frame stacks ([`Frames`]).
//! * [`cluster`]: cluster sizes and the packed results ([`ClusterBatch`], [`FrameClusters`]).
//! * [`io`]: `.npy` files, aare cluster files, slsDetector raw acquisitions.
//! * [`generate`]: simulated MOENCH-like frames for tests and demos.
//! * [`plot`]: PNG plots of the spectrum, hit map and pedestal.
//! * [`matcher`]: nearest-neighbour matching of 128-float descriptors (CPU and GPU).
//! * [`cuda`]: CUDA driver detection and the embedded kernels.
//! * [`error`]: the crate's [`Error`] type.
//! * `stream` (feature `stream`): live cluster finding on a detector's ZMQ stream, and
//!   replaying files as that stream.
//! * [`engine`]: the streaming engine: a reader thread, the finder and a write-behind sink,
//!   overlapped with bounded memory; how it feeds a finder ([`engine::FedFinder`]).
//!
//! # Cargo features
//!
//! Cargo features (all on by default): `gpu` (the GPU finder and matcher, [`cuda`]; needs the
//! pinned nightly through rustup to compile the kernels, see the README), `plot` ([`plot`],
//! PNG plots), `stream` ([`stream`], live cluster finding on a detector's ZMQ stream; builds
//! libzmq from source) and `cli` (the `cluda` program, which needs the other three). With `default-features = false` cluda is a
//! CPU-only library that builds on stable Rust: the CPU finder, pedestals, the generator, the
//! file formats and the CPU matcher; asking it for a GPU gives [`Error::NoGpu`].
#![warn(missing_docs)]

pub mod cluster;
pub mod config;
#[cfg(feature = "gpu")]
pub mod cuda;
#[cfg(feature = "gpu")]
pub(crate) mod device_memory;
pub mod engine;
pub mod error;
pub mod finder;
pub mod frame_number;
pub mod frames;
pub mod generate;
pub mod interpolation;
pub mod io;
#[cfg(feature = "gpu")]
pub(crate) mod kernel;
pub mod matcher;
pub mod memory;
mod named;
pub(crate) mod params;
pub mod pedestal;
#[cfg(feature = "plot")]
pub mod plot;
#[cfg(feature = "gpu")]
mod ptx_split;
#[cfg(feature = "stream")]
pub mod stream;
#[cfg(test)]
mod testing;

/// The README's code examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Expands the items given to it: [`if_gpu!`] and [`if_stream!`] where cluda has the feature.
#[doc(hidden)]
#[macro_export]
macro_rules! __items {
    ($($item:item)*) => { $($item)* };
}

/// Expands to nothing: [`if_gpu!`] and [`if_stream!`] where cluda lacks the feature.
#[doc(hidden)]
#[macro_export]
macro_rules! __no_items {
    ($($item:item)*) => {};
}

/// Expands the items given to it when cluda is built with its `gpu` feature, to nothing
/// otherwise.
///
/// For crates that build against whichever cluda they are given (the workspace's test-support
/// crate): they follow cluda's `gpu` feature without a feature of their own, so that cluda's
/// features need not name them (a feature naming a dev-dependency breaks `cargo install`).
#[doc(hidden)]
#[cfg(feature = "gpu")]
pub use __items as if_gpu;
#[doc(hidden)]
#[cfg(not(feature = "gpu"))]
pub use __no_items as if_gpu;

/// Expands the items given to it when cluda is built with its `stream` feature, to nothing
/// otherwise: [`if_gpu!`] for the ZMQ stream (the test-support crate's publishers).
#[doc(hidden)]
#[cfg(feature = "stream")]
pub use __items as if_stream;
#[doc(hidden)]
#[cfg(not(feature = "stream"))]
pub use __no_items as if_stream;

/// The `ndarray` crate cluda is built with. Use `cluda::ndarray` to build the views that
/// [`Frames::from_array3`] and [`Frames::from_array2`] take, so that your code and cluda cannot
/// end up with two incompatible ndarray versions.
pub use ndarray;

pub use cluster::{Cluster, ClusterBatch, ClusterRef, ClusterSize, FrameClusters};
pub use config::{FindOptions, FinderConfig, Precision, ThresholdMode};
pub use error::{Error, Result};
#[cfg(feature = "gpu")]
pub use finder::gpu::GpuFinder;
pub use finder::{ClusterFinder, CpuFinder};
pub use frame_number::{FrameNumber, FrameNumbers};
pub use frames::Frames;
pub use pedestal::Pedestal;
