//! cluda: photon cluster finding for hybrid pixel detectors (MOENCH) on the GPU with kernels
//! written in Rust, bit-identical to its CPU reference; and nearest-neighbour descriptor
//! matching.
#![warn(missing_docs)]

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

pub use cluster::{Cluster, ClusterBatch, ClusterRef, ClusterSize, FrameClusters};
pub use config::{FinderConfig, Precision, ThresholdMode};
pub use error::{Error, Result};
pub use finder::{ClusterFinder, CpuFinder, gpu::GpuFinder};
pub use frames::Frames;
pub use pedestal::Pedestal;
