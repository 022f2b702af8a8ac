//! Helpers the crate's unit tests share (compiled for tests only): generated dark and data
//! frames, and a CPU finder whose pedestal is those dark frames.

use crate::cluster::ClusterSize;
use crate::config::FinderConfig;
use crate::finder::{ClusterFinder, CpuFinder};
use crate::frames::Frames;
use crate::generate::{GenConfig, Generator};

/// `dark` dark frames (numbered from 0) and the `data` frames with photons after them, of
/// `rows x cols` from the generator seeded `seed`.
pub(crate) fn generated(
    rows: usize,
    cols: usize,
    seed: u64,
    dark: usize,
    data: usize,
) -> (Vec<u16>, Vec<u16>) {
    let g = Generator::new(GenConfig::new(rows, cols, seed)).expect("generator");
    (g.frames(0, dark, false), g.frames(dark as u64, data, true))
}

/// A CPU finder of 3x3 clusters whose pedestal window is the frames of `dark`, pushed (so
/// it is ready).
pub(crate) fn cpu_finder(rows: usize, cols: usize, dark: &[u16]) -> CpuFinder {
    let n = dark.len() / (rows * cols);
    let config = FinderConfig::new(rows, cols)
        .size(ClusterSize::S3)
        .pedestal_frames(n as u32);
    let mut f = CpuFinder::new(config).expect("finder");
    f.push_pedestal(Frames::new(dark, n, rows, cols).expect("dark"))
        .expect("pedestal");
    f
}
