//! cluda: photon cluster finding for hybrid pixel detectors (MOENCH) on the GPU with kernels
//! written in Rust, bit-identical to its CPU reference; and nearest-neighbour descriptor
//! matching.
//!
//! Cargo features (all on by default): `gpu` (the GPU finder and matcher, [`cuda`]; needs the
//! pinned nightly through rustup to compile the kernels, see the README), `plot` ([`plot`],
//! PNG plots) and `cli` (the `cluda` program). With `default-features = false` cluda is a
//! CPU-only library that builds on stable Rust: the CPU finder, pedestals, the generator, the
//! file formats and the CPU matcher; asking it for a GPU gives [`Error::NoGpu`].
#![warn(missing_docs)]
#![feature(portable_simd)] // lane masks of the CPU finder (std::simd, pinned nightly)

pub mod cluster;
pub mod config;
#[cfg(feature = "gpu")]
pub mod cuda;
pub mod error;
pub mod finder;
pub mod frames;
pub mod generate;
pub mod io;
pub mod matcher;
pub mod pedestal;
#[cfg(feature = "plot")]
pub mod plot;

/// The README's code examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

pub use cluster::{Cluster, ClusterBatch, ClusterRef, ClusterSize, FrameClusters};
pub use config::{FinderConfig, Precision, ThresholdMode};
pub use error::{Error, Result};
#[cfg(feature = "gpu")]
pub use finder::gpu::GpuFinder;
pub use finder::{ClusterFinder, CpuFinder};
pub use frames::Frames;
pub use pedestal::Pedestal;
