//! Small raw acquisitions with known pixels, written as a receiver writes them (raw, raw-port
//! and malformed-input tests).

use std::path::{Path, PathBuf};

use cluda::io::raw::{DetectorType, FrameDiscardPolicy, RawWriter, RawWriterConfig};

/// The receiver configuration of a small generic detector: `rows x cols` pixels a port, `max`
/// frames per data file (0: one file), `packets` packets per frame; master format 7.2,
/// padded frames, nothing discarded.
pub fn small_detector(rows: usize, cols: usize, max: u64, packets: u32) -> RawWriterConfig {
    RawWriterConfig {
        rows,
        cols,
        detector: DetectorType::Generic16,
        max_frames_per_file: max,
        version: 7.2,
        frame_padding: true,
        frame_discard_policy: FrameDiscardPolicy::NoDiscard,
        packets_per_frame: packets,
    }
}

/// The configuration of a receiver writing frames of [`Cli::gen_small`]'s shape (24 x 36,
/// generic 16-bit), MOENCH 03's in all else.
///
/// [`Cli::gen_small`]: crate::cli::Cli::gen_small
pub fn gen_small_config() -> RawWriterConfig {
    RawWriterConfig {
        rows: 24,
        cols: 36,
        detector: DetectorType::Generic16,
        ..RawWriterConfig::moench03()
    }
}

/// Frame `k`'s known pattern of `px` pixels.
pub fn pattern(k: u64, px: usize) -> Vec<u16> {
    (0..px)
        .map(|i| (k as usize * 1000 + i * 7) as u16)
        .collect()
}

/// Writes the frames numbered `numbers`, each its [`pattern`], as the acquisition
/// `dir/<base>_master_<index>.json` of `config`; returns the master's path.
pub fn patterned(
    dir: &Path,
    (base, index): (&str, u64),
    config: RawWriterConfig,
    numbers: impl IntoIterator<Item = u64>,
) -> PathBuf {
    let px = config.rows * config.cols;
    let mut w = RawWriter::create(dir, base, index, config).expect("a raw writer");
    for k in numbers {
        w.write_frame(k, &pattern(k, px)).expect("a frame");
    }
    w.finish(None).expect("the master")
}
