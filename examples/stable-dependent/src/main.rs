//! A stable-Rust program using cluda as a library: generates MOENCH-like frames with cluda's
//! generator, finds 3x3 clusters with the CPU finder and prints how many it found.

use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames, Precision};

/// Frame size, pedestal frames and data frames: small, so CI runs it in a moment.
const ROWS: usize = 100;
const COLS: usize = 100;
const DARK: usize = 200;
const DATA: usize = 50;

fn main() -> Result<(), cluda::Error> {
    let generator = Generator::new(GenConfig::new(ROWS, COLS, 42))?;
    let dark = generator.frames(0, DARK, false);
    let data = generator.frames(DARK as u64, DATA, true);
    let config = FinderConfig::new(ROWS, COLS)
        .size(ClusterSize::S3)
        .n_sigma(5.0)
        .pedestal_frames(DARK as u32)
        .precision(Precision::F64);
    let mut finder = CpuFinder::new(config)?;
    finder.push_pedestal(Frames::new(&dark, DARK, ROWS, COLS)?)?;
    let clusters = finder.find(Frames::new(&data, DATA, ROWS, COLS)?)?;
    println!(
        "stable-dependent: {} clusters in {} frames of {ROWS}x{COLS} (CPU finder)",
        clusters.total(),
        clusters.frames()
    );
    Ok(())
}
