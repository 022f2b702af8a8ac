//! What cluda's integration tests (`tests/`) and benches (`benches/`) share, in one place:
//! a dev-only crate of the workspace, so that neither includes the other's files.
//!
//! - [`ladder`]: the steps of the GPU ladder (bench `ladder`; the GPU tests check every step
//!   against the CPU finder), when cluda is built with its `gpu` feature.
//! - [`gpu_vs_cpu`]: generated frames and GPU and CPU finders set up alike (GPU tests), when
//!   cluda is built with its `gpu` feature.
//! - [`pool_source`]: a generator-like frame source cycling a pool (long-run tests, stream
//!   bench).
//! - [`rss`]: resident memory sampled along a stream (long-run tests).
//! - [`cli`]: running the `cluda` binary and checking its errors (CLI tests).
//!
//! Its `cluda` is the library the tests link (one copy), so its types are the tests' types.

pub mod cli;
// With cluda's `gpu` feature (followed through `cluda::if_gpu!`, so that cluda's features need
// not name this dev-only crate, which would break `cargo install`).
cluda::if_gpu! {
    pub mod gpu_vs_cpu;
    pub mod ladder;
}
pub mod pool_source;
pub mod rss;
