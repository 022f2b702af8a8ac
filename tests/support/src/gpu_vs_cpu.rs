//! The setup that the GPU finder's tests against the CPU reference share
//! (`tests/gpu_finder/`, `tests/gpu_engine/`, `tests/gpu_engine_kept_ring.rs`):
//! generated dark and data frames of one shape, one device per test binary, and GPU and CPU
//! finders with the frames' pedestal pushed, so both tests build their finders and their
//! reference the same way.
use std::sync::OnceLock;

use cluda::cluster::ClusterSize;
use cluda::cuda::Device;
use cluda::finder::gpu::{GpuFinder, PipelineConfig};
use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterFinder, CpuFinder, FinderConfig, Frames, Precision, ThresholdMode};

/// Dark frames and data frames of one shape.
pub struct Data {
    pub rows: usize,
    pub cols: usize,
    pub dark: Vec<u16>,
    pub dark_n: usize,
    pub data: Vec<u16>,
    pub data_n: usize,
}

impl Data {
    /// `dark_n` dark frames (generator frames from 0 on), then `data_n` frames with photons,
    /// `rows x cols`, from the generator with seed `seed`.
    pub fn new(rows: usize, cols: usize, seed: u64, dark_n: usize, data_n: usize) -> Self {
        let g = Generator::new(GenConfig::new(rows, cols, seed)).unwrap();
        Self {
            rows,
            cols,
            dark: g.frames(0, dark_n, false),
            dark_n,
            data: g.frames(dark_n as u64, data_n, true),
            data_n,
        }
    }

    /// Pixels per frame.
    pub fn px(&self) -> usize {
        self.rows * self.cols
    }

    /// The dark frames.
    pub fn dark(&self) -> Frames<'_> {
        Frames::new(&self.dark, self.dark_n, self.rows, self.cols).unwrap()
    }

    /// Every data frame.
    pub fn data(&self) -> Frames<'_> {
        Frames::new(&self.data, self.data_n, self.rows, self.cols).unwrap()
    }

    /// The first `n` data frames.
    pub fn first(&self, n: usize) -> Frames<'_> {
        Frames::new(&self.data[..n * self.px()], n, self.rows, self.cols).unwrap()
    }

    /// A finder configuration for these frames, with a pedestal of all the dark frames.
    pub fn config(&self, size: ClusterSize, p: Precision, mode: ThresholdMode) -> FinderConfig {
        FinderConfig::new(self.rows, self.cols)
            .size(size)
            .precision(p)
            .threshold(mode)
            .pedestal_frames(self.dark_n as u32)
    }
}

/// One device (context and loaded module) for every finder of a test binary.
pub fn device() -> Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(|| Device::open(0).unwrap()).clone()
}

/// A GPU finder on [`device`] with pipeline `pipe`, the dark frames of `d` pushed.
pub fn gpu_finder(cfg: &FinderConfig, pipe: PipelineConfig, d: &Data) -> GpuFinder {
    let mut f = GpuFinder::on_device(device(), cfg.clone(), pipe).unwrap();
    f.push_pedestal(d.dark()).unwrap();
    f
}

/// The CPU reference finder, the dark frames of `d` pushed.
pub fn cpu_finder(cfg: &FinderConfig, d: &Data) -> CpuFinder {
    let mut f = CpuFinder::new(cfg.clone()).unwrap();
    f.push_pedestal(d.dark()).unwrap();
    f
}
