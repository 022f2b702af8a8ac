//! The GPU finder against the CPU reference (needs a CUDA GPU: every test is ignored
//! elsewhere; run with `--include-ignored`).
//!
//! Exactness: for every size, precision, threshold mode and ladder step the GPU gives the
//! CPU's bytes (same clusters, values, order) and leaves the same pedestal.
//!
//! One module a topic: [`exactness`], [`failures`] (and state kept between calls); the tests
//! tools/gpu-checks names (`--exact`) and the diagnostics stay here.

use std::sync::OnceLock;

use cluda::cluster::ClusterSize;
use cluda::cuda::Device;
use cluda::finder::gpu::{GpuFinder, Launch, Overflow, PinnedFrames, PipelineConfig};
use cluda::{
    ClusterBatch, ClusterFinder, CpuFinder, Error, FinderConfig, Frames, Precision, ThresholdMode,
};
use proptest::prelude::*;
use support::gpu_vs_cpu::{Data, cpu_finder, device, gpu_finder};
use support::ladder::LadderStep;

mod exactness;
mod failures;

const GPU: &str = "needs a CUDA GPU";

/// 2000 MOENCH-like 400x400 frames after a 1000-frame pedestal, generated once.
fn moench() -> &'static Data {
    static D: OnceLock<Data> = OnceLock::new();
    D.get_or_init(|| Data::new(400, 400, 2026, 1000, 2000))
}

/// `d`'s data frames copied into page-locked memory of the test device.
fn pinned_copy(d: &Data) -> PinnedFrames {
    let mut pinned = PinnedFrames::new(&device(), d.data_n, d.rows, d.cols).unwrap();
    pinned.as_mut_slice().copy_from_slice(&d.data);
    pinned
}

/// The GPU finder (`cfg`, `pipe`) over every data frame of `d` in one call: fails the test
/// unless it gives the CPU's clusters `want` and leaves its pedestal `ped`; returns the finder.
fn gpu_equals_cpu(
    (cfg, pipe): (&FinderConfig, PipelineConfig),
    d: &Data,
    (want, ped): (&ClusterBatch, &cluda::Pedestal),
    what: &str,
) -> GpuFinder {
    let mut g = gpu_finder(cfg, pipe, d);
    let got = g.find(d.data()).unwrap();
    same(want, &got, what);
    assert_eq!(&g.pedestal().unwrap(), ped, "{what}: pedestal");
    g
}

/// The CPU over every data frame in one call: the clusters and the pedestal after.
fn cpu_run(cfg: &FinderConfig, d: &Data) -> (ClusterBatch, cluda::Pedestal) {
    let mut f = cpu_finder(cfg, d);
    let b = f.find(d.data()).unwrap();
    (b, f.pedestal().unwrap())
}

/// Equal batches, or a message naming the first difference.
fn same(want: &ClusterBatch, got: &ClusterBatch, what: &str) {
    assert_eq!(want.frames(), got.frames(), "{what}: frame count");
    for i in 0..want.frames() {
        let (w, g) = (want.frame(i), got.frame(i));
        if w.words() != g.words() {
            let k = (0..w.len().min(g.len())).find(|&k| w.get(k) != g.get(k));
            panic!(
                "{what}: frame {i} differs: cpu {} clusters, gpu {}; first differing cluster {:?}: cpu {:?} gpu {:?}",
                w.len(),
                g.len(),
                k,
                k.map(|k| w.get(k)),
                k.map(|k| g.get(k)),
            );
        }
    }
}

/// Opt10 on `rows x cols` frames (`dark` pedestal frames, then `n` data frames) equals the
/// CPU finder for each number of frames per upload group, clusters and pedestal, and launches
/// per upload group exactly when `run_kernel` says so (the sizes of the callers assume an
/// H100/H200-class GPU, which holds 625 and more 256-pixel tiles' blocks at once).
#[allow(clippy::too_many_arguments)]
fn opt10_equals_cpu(
    (rows, cols): (usize, usize),
    size: ClusterSize,
    p: Precision,
    mode: ThresholdMode,
    (dark, n): (usize, usize),
    upload_group_sizes: &[usize],
    run_kernel: bool,
) {
    let d = Data::new(rows, cols, 5, dark, n);
    let cfg = d.config(size, p, mode);
    let (want, ped) = cpu_run(&cfg, &d);
    for &upload_frames in upload_group_sizes {
        let pipe = PipelineConfig {
            upload_frames,
            ..LadderStep::Opt10.config()
        };
        let what = format!(
            "{rows}x{cols} {size} {} upload_frames {upload_frames}",
            p.name()
        );
        let mut g = gpu_finder(&cfg, pipe, &d);
        assert_eq!(
            g.launches_per_upload_group(),
            run_kernel,
            "{what}: launch mode"
        );
        same(&want, &g.find(d.data()).unwrap(), &what);
        assert_eq!(g.pedestal().unwrap(), ped, "{what}");
    }
}

/// Every run kernel (each size, both precisions, both threshold modes) on one small frame:
/// small enough to run under compute-sanitizer (memcheck, racecheck) in seconds.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_run_kernel_on_a_small_frame_equals_cpu() {
    for size in ClusterSize::ALL {
        for p in [Precision::F64, Precision::F32] {
            for mode in [ThresholdMode::Live, ThresholdMode::Frozen] {
                opt10_equals_cpu((48, 80), size, p, mode, (30, 25), &[7, 25], true);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tiny_cap_grows_and_stays_exact() {
    let d = Data::new(48, 80, 11, 30, 25);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, ped) = cpu_run(&cfg, &d);
    assert!((0..want.frames()).any(|i| want.frame(i).len() > 2));
    for step in [
        LadderStep::Opt1,
        LadderStep::Opt3,
        LadderStep::Opt6,
        LadderStep::Opt9,
        LadderStep::Opt10,
    ] {
        let pipe = PipelineConfig {
            cap: 1,
            overflow: Overflow::Grow,
            ..step.config()
        };
        let what = format!("grow {}", step.name());
        let g = gpu_equals_cpu((&cfg, pipe), &d, (&want, &ped), &what);
        assert!(g.cap() > 1, "the cap grew");
    }
}

/// One timed pass per ladder step (fresh finder, buffers reserved before the timer, pinned
/// input, a visitor that only counts): a diagnostic, not the benchmark (cold single pass).
#[test]
#[ignore = "needs a CUDA GPU"]
fn ladder_pass_times() {
    let d = moench();
    let pinned = pinned_copy(d);
    for size in [ClusterSize::S3, ClusterSize::S9] {
        let mut line = format!("{size} us/frame:");
        let mut want = [0usize; 2];
        for step in LadderStep::ALL {
            let p = step.precision();
            let cfg = d.config(size, p, ThresholdMode::Live);
            let k = (p == Precision::F32) as usize;
            if want[k] == 0 {
                want[k] = cpu_run(&cfg, d).0.total();
            }
            let mut g = gpu_finder(&cfg, step.config(), d);
            g.reserve(d.data_n).unwrap();
            let mut n = 0usize;
            let t = std::time::Instant::now();
            g.find_each(pinned.frames().unwrap(), &mut |fc| {
                n += fc.len();
                Ok(())
            })
            .unwrap();
            let us = t.elapsed().as_secs_f64() * 1e6 / d.data_n as f64;
            assert_eq!(n, want[k], "{size} {}", step.name());
            line += &format!(" {} {us:.1}", step.name());
        }
        eprintln!("{line}");
    }
}

/// Diagnostics of the run kernels (printed, nothing asserted): registers and resident blocks
/// per SM of the run and step kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn run_kernel_occupancy() {
    use cudarc::driver::sys::CUdevice_attribute;
    let dev = device();
    let ctx = dev.context();
    ctx.bind_to_thread().unwrap();
    let sms = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .unwrap() as u32;
    for p in ["f64", "f32"] {
        for side in [3, 9] {
            for kind in ["run1", "step"] {
                let name = format!("cluda_{kind}_{p}_{side}");
                let f = dev.function(&name).unwrap();
                let per_sm = f
                    .occupancy_max_active_blocks_per_multiprocessor(256, 0, None)
                    .unwrap();
                let regs = f.num_regs().unwrap();
                eprintln!("{name}: {regs} registers, {per_sm} blocks of 256 per SM, {sms} SMs");
            }
        }
    }
}
