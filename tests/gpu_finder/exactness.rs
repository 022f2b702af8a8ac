//! Exactness: every size, precision, threshold mode, ladder step, shape, stream count and
//! chunking gives the CPU's bytes.

use crate::*;

#[test]
#[ignore = "needs a CUDA GPU"]
fn moench_400x400_every_step_equals_cpu_f64() {
    let d = moench();
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let t = std::time::Instant::now();
    let (want, ped) = cpu_run(&cfg, d);
    let cpu_s = t.elapsed().as_secs_f64();
    eprintln!(
        "3x3 f64 live: cpu {} clusters in {} frames ({:.1} per frame), {:.1} us/frame",
        want.total(),
        want.frames(),
        want.total() as f64 / want.frames() as f64,
        cpu_s * 1e6 / d.data_n as f64
    );
    assert!(
        want.total() > 500 * d.data_n,
        "MOENCH-like data gives about a thousand clusters per frame"
    );
    for step in LadderStep::ALL {
        let mut g = gpu_finder(&cfg, step.config(), d);
        g.reserve(d.data_n).unwrap();
        let t = std::time::Instant::now();
        let got = g.find(d.data()).unwrap();
        let us = t.elapsed().as_secs_f64() * 1e6 / d.data_n as f64;
        eprintln!(
            "  {}: {us:.1} us/frame end to end (pageable caller memory)",
            step.name()
        );
        same(&want, &got, step.name());
        assert_eq!(
            g.pedestal().unwrap(),
            ped,
            "{}: pedestal after the call",
            step.name()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn moench_400x400_sizes_precisions_modes_equal_cpu() {
    let d = moench();
    for (size, p, mode) in [
        (ClusterSize::S9, Precision::F64, ThresholdMode::Frozen),
        (ClusterSize::S5, Precision::F64, ThresholdMode::Live),
        (ClusterSize::S7, Precision::F32, ThresholdMode::Frozen),
        (ClusterSize::S3, Precision::F32, ThresholdMode::Live),
        (ClusterSize::S3, Precision::F32Naive, ThresholdMode::Live),
    ] {
        let cfg = d.config(size, p, mode);
        let (want, ped) = cpu_run(&cfg, d);
        let what = format!("{size} {} {}", p.name(), mode.name());
        let pipe = PipelineConfig::default();
        let g = gpu_equals_cpu((&cfg, pipe), d, (&want, &ped), &what);
        eprintln!("{what}: {} clusters, gpu cap now {}", want.total(), g.cap());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_input_and_kernel_timing() {
    let d = moench();
    let pinned = pinned_copy(d);
    for (size, p) in [
        (ClusterSize::S3, Precision::F64),
        (ClusterSize::S3, Precision::F32),
        (ClusterSize::S9, Precision::F64),
        (ClusterSize::S9, Precision::F32),
    ] {
        let cfg = d.config(size, p, ThresholdMode::Live);
        let (want, _) = cpu_run(&cfg, d);
        for timing in [false, true] {
            let pipe = PipelineConfig {
                timing,
                ..PipelineConfig::default()
            };
            let mut g = gpu_finder(&cfg, pipe, d);
            g.reserve(d.data_n).unwrap();
            let t = std::time::Instant::now();
            let got = g.find(pinned.frames().unwrap()).unwrap();
            let us = t.elapsed().as_secs_f64() * 1e6 / d.data_n as f64;
            same(&want, &got, &format!("{size} {} timing {timing}", p.name()));
            let times = g.kernel_times();
            if timing {
                assert_eq!(times.len(), d.data_n);
                let n = times.len() as f32;
                let mean = times.iter().map(|t| t.total_us()).sum::<f32>() / n;
                let prep = times.iter().map(|t| t.prepare_us).sum::<f32>() / n;
                let min = times.iter().map(|t| t.total_us()).fold(f32::MAX, f32::min);
                eprintln!(
                    "{size} {}: kernels mean {mean:.2} us/frame (prepare {prep:.2}), min {min:.2} us; with timing on {us:.1} us/frame end to end",
                    p.name()
                );
            } else {
                assert!(times.is_empty());
                eprintln!(
                    "{size} {}: {us:.2} us/frame end to end, default pipeline, pinned input",
                    p.name()
                );
            }
        }
    }
}

/// Every size x precision x mode x ladder step on small odd shapes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn full_matrix_on_odd_shapes_equals_cpu() {
    for (rows, cols, frames) in [(37, 401, 40), (8, 8, 60), (61, 67, 40)] {
        let d = Data::new(rows, cols, 7 + rows as u64, 50, frames);
        for size in ClusterSize::ALL {
            for p in [Precision::F64, Precision::F32, Precision::F32Naive] {
                for mode in [ThresholdMode::Live, ThresholdMode::Frozen] {
                    let cfg = d.config(size, p, mode);
                    let (want, ped) = cpu_run(&cfg, &d);
                    for step in LadderStep::ALL {
                        let what = format!(
                            "{rows}x{cols} {size} {} {} {}",
                            p.name(),
                            mode.name(),
                            step.name()
                        );
                        gpu_equals_cpu((&cfg, step.config()), &d, (&want, &ped), &what);
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn results_do_not_depend_on_streams_or_chunks() {
    let d = Data::new(64, 96, 3, 40, 57);
    let cfg = d.config(ClusterSize::S5, Precision::F64, ThresholdMode::Live);
    let (want, ped) = cpu_run(&cfg, &d);
    for streams in [1, 2, 3, 4, 7] {
        for chunk in [1, 5, 8, 57, 100] {
            for (compact, launch) in [
                (false, Launch::PerFrame),
                (true, Launch::PerFrame),
                (true, Launch::PerUpload),
            ] {
                for upload_frames in [1, 4] {
                    let pipe = PipelineConfig {
                        streams,
                        chunk,
                        depth: 2,
                        compact,
                        upload_frames,
                        launch,
                        ..PipelineConfig::default()
                    };
                    let what = format!("{pipe:?}");
                    let mut g = gpu_finder(&cfg, pipe, &d);
                    same(&want, &g.find(d.data()).unwrap(), &what);
                    assert_eq!(g.pedestal().unwrap(), ped, "{what}");
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn frames_larger_than_the_resident_grid_equal_cpu() {
    // One launch per upload group at 625 tiles (one block per tile; on an H200 five blocks
    // per SM are resident, 660 in all); 1,641 and 6,094 tiles: more than fit at once, so one
    // launch per frame. Same results either way.
    for (rows, cols, size, p) in [
        (400, 400, ClusterSize::S5, Precision::F64),
        (600, 700, ClusterSize::S3, Precision::F64),
        (600, 700, ClusterSize::S9, Precision::F32),
        (1200, 1300, ClusterSize::S3, Precision::F64),
    ] {
        let run_kernel = rows * cols <= 400 * 400;
        let mode = ThresholdMode::Live;
        opt10_equals_cpu((rows, cols), size, p, mode, (20, 9), &[1, 4, 9], run_kernel);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn run_kernel_waits_for_every_tile_it_reads() {
    // Each tile of the run kernel waits per frame for the tiles its windows reach (r rows and
    // r pixels either way). Wide frames make that many tiles: 60x2600 at 9x9 reaches 41
    // tiles either way (83 flags, more than a warp's lanes, so each lane polls several);
    // 160x1000 at 7x7 12 either way; a 20x30 frame has 3 tiles in all, fewer than the reach.
    for (rows, cols, size, p) in [
        (60, 2600, ClusterSize::S9, Precision::F64),
        (160, 1000, ClusterSize::S7, Precision::F32),
        (20, 30, ClusterSize::S9, Precision::F64),
    ] {
        let mode = ThresholdMode::Frozen;
        opt10_equals_cpu((rows, cols), size, p, mode, (24, 31), &[1, 5, 24], true);
    }
}

type Case = (usize, usize, u64, usize, usize, usize, usize);

/// rows, cols, seed, size, precision, mode, ladder step.
fn small_case() -> impl Strategy<Value = Case> {
    (
        1usize..14,
        1usize..14,
        any::<u64>(),
        0usize..4,
        0usize..3,
        0usize..2,
        0usize..LadderStep::ALL.len(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    /// Random small frames (any values, spikes included): GPU equals CPU.
    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn random_small_frames_gpu_equals_cpu((rows, cols, seed, s, p, m, step) in small_case()) {
        let px = rows * cols;
        let n_ped = 5;
        let frames = 6;
        let mut x = seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let mut vals = |n: usize| -> Vec<u16> {
            (0..n).map(|_| {
                let r = next();
                match r % 16 {
                    0 => (r >> 8) as u16,                  // anything
                    1 => 4600 + ((r >> 8) % 3000) as u16,  // a photon
                    _ => 4550 + ((r >> 8) % 100) as u16,   // noise
                }
            }).collect()
        };
        let dark = vals(n_ped * px);
        let data = vals(frames * px);
        let cfg = FinderConfig::new(rows, cols)
            .size(ClusterSize::ALL[s])
            .precision([Precision::F64, Precision::F32, Precision::F32Naive][p])
            .threshold([ThresholdMode::Live, ThresholdMode::Frozen][m])
            .pedestal_frames(n_ped as u32)
            .n_sigma(3.0);
        let dark = Frames::new(&dark, n_ped, rows, cols).unwrap();
        let data = Frames::new(&data, frames, rows, cols).unwrap();
        let mut c = CpuFinder::with_threads(cfg.clone(), 1).unwrap();
        c.push_pedestal(dark).unwrap();
        let want = c.find(data).unwrap();
        let pipe = LadderStep::ALL[step].config();
        let mut g = GpuFinder::on_device(device(), cfg, pipe).unwrap();
        g.push_pedestal(dark).unwrap();
        let got = g.find(data).unwrap();
        prop_assert_eq!(want, got);
        prop_assert_eq!(c.pedestal().unwrap(), g.pedestal().unwrap());
    }
}
