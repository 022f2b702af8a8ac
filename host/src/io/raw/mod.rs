//! slsDetector raw acquisitions as MOENCH writes them and aare reads them: a JSON master file
//! `<base>_master_<N>.json` and data files `<base>_d<p>_f<k>_<N>.raw` of
//! `[112-byte header][image]` records, one set of data files per port `<p>` (one for a
//! MOENCH read out through one UDP interface, two through two, each frame split in halves).
//!
//! The facts come from aare 2026.9.30 (`RawMasterFile`, `RawFile`, `RawSubFile`, `PixelMap`,
//! `DetectorHeader` in `defs.hpp`, and their tests); the code is cluda's own. Each submodule
//! names its sources. Unlike aare, the reader reports missing frame numbers, lost packets and
//! partial records instead of silently dropping or shifting frames.
//!
//! ```no_run
//! use cluda::io::raw::RawReader;
//! let mut reader = RawReader::open("run_master_0.json")?;
//! let mut frames = Vec::new();
//! while !reader.next_frames(100, &mut frames)?.is_empty() {
//!     // ... find clusters in `frames` (100 x 400 x 400) ...
//!     frames.clear();
//! }
//! eprintln!("{}", reader.report().summary());
//! # Ok::<(), cluda::Error>(())
//! ```

pub mod header;
pub mod master;
pub mod master_text;
pub mod naming;
pub mod pixel_map;
mod port;
mod ports;
pub mod reader;
pub mod records;
pub mod report;
pub mod roi;
pub mod writer;

pub use header::{DetectorHeader, HEADER_BYTES};
pub use master::{DetectorType, FrameDiscardPolicy, RawMaster};
pub(crate) use naming::data_file_hint;
pub use naming::master_of_data_file;
pub use pixel_map::PixelMap;
pub use reader::RawReader;
pub use report::{FrameInfo, GapReport, PartLoss, RawFrame};
pub use roi::Roi;
pub use writer::{RawWriter, RawWriterConfig};
