//! Deterministic MOENCH-like test frames (docs/test-data.md).
//!
//! Per-pixel baseline near 4600 ADU with spatial structure, per-pixel Gaussian noise of
//! 35-55 ADU with a few noisy pixels, a slow global baseline drift, and Poisson photons (about
//! 2500 per 400x400 frame, about 400 ADU each) whose charge spreads over neighbours as a
//! Gaussian cloud. Frame `k` depends only on the configuration and `k`, so frames can be made
//! in parallel, in any order, and are the same on every machine.
//!
//! The generator knows the truth: [`Generator::frame_with_truth`] also returns every photon's
//! true position and charge ([`TruePhoton`]), and [`Illumination`] lets photons through a
//! mask only (a slanted knife edge, a grid of holes) instead of a flat field.

mod config;
mod generator;
#[cfg(test)]
mod reference;
mod source;
#[cfg(test)]
mod tests;
mod ziggurat;

pub use config::{GenConfig, Illumination, TRUTH_DESCR, TruePhoton};
pub use generator::Generator;
pub use source::Generated;
