//! What cluda's integration tests (`tests/`) and benches (`benches/`) share, in one place:
//! a dev-only crate of the workspace, so that neither includes the other's files.
//!
//! - [`oracle`]: an independent oracle of cluster finding written from docs/semantics.md, and
//!   [`oracle::aare`], one of aare's eta interpolation (CPU finder, pedestal and interpolation
//!   tests).
//! - [`cases`]: random finder scenarios run through the CPU finder and the oracle, and the
//!   comparison of their clusters (CPU finder and pedestal tests).
//! - [`ladder`]: the steps of the GPU ladder (bench `ladder`; the GPU tests check every step
//!   against the CPU finder), when cluda is built with its `gpu` feature.
//! - [`gpu_vs_cpu`]: generated frames and GPU and CPU finders set up alike (GPU tests), when
//!   cluda is built with its `gpu` feature.
//! - [`matcher`]: the matcher tests' data sets (uniform, clustered, near duplicates,
//!   adversarial), the f64 acceptance check and V2's bit-exact CPU reference.
//! - [`pool_source`]: a generator-like frame source cycling a pool (long-run tests, stream
//!   bench).
//! - [`raw`]: small raw acquisitions with known pixels (raw, raw-port and malformed tests).
//! - [`rss`]: resident memory sampled along a stream (long-run tests).
//! - [`bench`](mod@bench): a bench's `main` (an error reported, exit 1) and its comma-separated lists.
//! - [`cli`]: running the `cluda` binary and checking its errors (CLI tests).
//! - [`peers`]: where tools/aare-build's `aare-find` is, and its summary line (aare finder
//!   test, peers bench).
//! - [`files`]: a file's checksum, a folder's names, no temporary left, a name appearing
//!   mid-run; sparse `.npy` inputs and `.npy` bytes written by hand (hostile, malformed and
//!   matcher tests).
//! - [`stream`]: `cluda stream`, `replay` and `find` as processes with bounded waits and
//!   signals, generated `.npy` inputs and the stream's summary lines (stream, raw and hostile
//!   tests).
//! - [`relay`]: a stream fed by a replay, and the checks the stream tests share (no fault, an
//!   interrupted acquisition, a slow consumer, the live sub-pixel image).
//! - [`publish`]: publishers of one's own messages to a stream under test, and frames with
//!   edited headers, when cluda is built with its `stream` feature.
//!
//! Its `cluda` is the library the tests link (one copy), so its types are the tests' types.

pub mod bench;
pub mod cases;
pub mod cli;
pub mod files;
// With cluda's `gpu` feature (followed through `cluda::if_gpu!`, so that cluda's features need
// not name this dev-only crate, which would break `cargo install`).
cluda::if_gpu! {
    pub mod gpu_vs_cpu;
    pub mod ladder;
}
pub mod matcher;
pub mod oracle;
pub mod peers;
pub mod pool_source;
pub mod raw;
// With cluda's `stream` feature (followed as `gpu` is, above).
cluda::if_stream! {
    pub mod publish;
}
pub mod relay;
pub mod rss;
pub mod stream;
