//! cluda: photon cluster finding for hybrid pixel detectors (MOENCH) on the GPU with kernels
//! written in Rust, bit-identical to its CPU reference; and nearest-neighbour descriptor
//! matching.
#![warn(missing_docs)]

pub mod cuda;
pub mod error;
pub mod matcher;

pub use error::{Error, Result};
