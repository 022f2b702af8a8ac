//! cluda: photon cluster finding for hybrid pixel detectors (MOENCH) on the GPU with kernels
//! written in Rust, bit-identical to its CPU reference; and nearest-neighbour descriptor
//! matching.
#![warn(missing_docs)]
#![feature(portable_simd)] // lane masks of the CPU finder (std::simd, pinned nightly)

pub mod cluster;
pub mod config;
pub mod cuda;
pub mod error;
pub mod finder;
pub mod frames;
pub mod generate;
pub mod io;
pub mod matcher;
pub mod pedestal;
pub mod plot;

/// The README's code examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The `ndarray` crate cluda is built with. Use `cluda::ndarray` to build the views that
/// [`Frames::from_array3`] and [`Frames::from_array2`] take, so that your code and cluda cannot
/// end up with two incompatible ndarray versions.
pub use ndarray;

pub use cluster::{Cluster, ClusterBatch, ClusterRef, ClusterSize, FrameClusters};
pub use config::{FinderConfig, Precision, ThresholdMode};
pub use error::{Error, Result};
pub use finder::{ClusterFinder, CpuFinder, gpu::GpuFinder};
pub use frames::Frames;
pub use pedestal::Pedestal;
