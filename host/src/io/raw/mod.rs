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
pub use pixel_map::PixelMap;
pub use reader::RawReader;
pub use report::{FrameInfo, GapReport, PartLoss, RawFrame};
pub use roi::Roi;
pub use writer::{RawWriter, RawWriterConfig};

use std::path::{Path, PathBuf};

/// The master file of a raw data file named `<base>_d<M>_f<F>_<N>.raw`:
/// `<base>_master_<N>.json` in the same directory (whether or not it exists); `None` for a name
/// not of that form.
pub fn master_of_data_file(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?.strip_suffix(".raw")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // From the right: `_<N>`, then `_f<F>`, then `_d<M>`; what is left is the base.
    let (rest, index) = name.rsplit_once('_')?;
    let (rest, file) = rest.rsplit_once("_f")?;
    let (base, module) = rest.rsplit_once("_d")?;
    if base.is_empty() || !(digits(index) && digits(file) && digits(module)) {
        return None;
    }
    Some(path.with_file_name(format!("{base}_master_{index}.json")))
}

/// What to give instead of `path` when it names a raw data file (`.raw`): cluda reads a raw
/// acquisition through its master file, named here when the data file's name gives it (and
/// said to be missing when it is not beside it). `None` for any other path.
pub(crate) fn data_file_hint(path: &Path) -> Option<String> {
    if path.extension().and_then(|e| e.to_str()) != Some("raw") {
        return None;
    }
    Some(match master_of_data_file(path) {
        Some(master) if master.is_file() => format!(
            "this is a raw data file: give its master file instead, {}",
            master.display()
        ),
        Some(master) => format!(
            "this is a raw data file: a raw acquisition is read through its master file, {} (not found beside it)",
            master.display()
        ),
        None => "this looks like a raw data file: a raw acquisition is read through its master file (<base>_master_<N>.json)".to_string(),
    })
}
