//! The GPU finder against the CPU reference (needs a CUDA GPU: every test is ignored
//! elsewhere; run with `--include-ignored`).
//!
//! Exactness: for every size, precision, threshold mode and ladder step the GPU gives the
//! CPU's bytes (same clusters, values, order) and leaves the same pedestal.

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

const GPU: &str = "needs a CUDA GPU";

/// 2000 MOENCH-like 400x400 frames after a 1000-frame pedestal, generated once.
fn moench() -> &'static Data {
    static D: OnceLock<Data> = OnceLock::new();
    D.get_or_init(|| Data::new(400, 400, 2026, 1000, 2000))
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
        let mut g = gpu_finder(&cfg, PipelineConfig::default(), d);
        let got = g.find(d.data()).unwrap();
        eprintln!("{what}: {} clusters, gpu cap now {}", want.total(), g.cap());
        same(&want, &got, &what);
        assert_eq!(g.pedestal().unwrap(), ped, "{what}: pedestal");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_input_and_kernel_timing() {
    let d = moench();
    let mut pinned = PinnedFrames::new(&device(), d.data_n, d.rows, d.cols).unwrap();
    pinned.as_mut_slice().copy_from_slice(&d.data);
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
                        let mut g = gpu_finder(&cfg, step.config(), &d);
                        let got = g.find(d.data()).unwrap();
                        same(&want, &got, &what);
                        assert_eq!(g.pedestal().unwrap(), ped, "{what}: pedestal");
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
        let mut g = gpu_finder(&cfg, pipe, &d);
        let got = g.find(d.data()).unwrap();
        same(&want, &got, &format!("grow {}", step.name()));
        assert_eq!(g.pedestal().unwrap(), ped);
        assert!(g.cap() > 1, "the cap grew");
    }
}

/// A call's frames with numbers of their own (past `i32::MAX` here): every frame's clusters
/// and an overflow name the frame by its number, with no relabelling after the call.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_numbered_call_names_its_frames_by_their_numbers() {
    let d = Data::new(48, 80, 11, 30, 25);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, _) = cpu_run(&cfg, &d);
    let base = cluda::FrameNumber(i32::MAX as u64 + 10);
    let frames = d.data().numbered_from(base);
    let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
    let mut seen = Vec::new();
    g.find_each(frames, &mut |fc| {
        seen.push(fc.frame);
        Ok(())
    })
    .unwrap();
    assert!(
        seen.iter()
            .copied()
            .eq((0..want.frames()).map(|i| base.after(i)))
    );
    let first = (0..want.frames())
        .find(|&i| want.frame(i).len() > 2)
        .unwrap();
    let pipe = PipelineConfig {
        cap: 2,
        overflow: Overflow::Fail,
        chunk: 4,
        ..LadderStep::Opt1.config()
    };
    let mut g = gpu_finder(&cfg, pipe, &d);
    match g.find_each(frames, &mut |_| Ok(())).unwrap_err() {
        Error::ClusterLimit { frame, .. } => assert_eq!(frame, base.after(first)),
        e => panic!("expected ClusterLimit, got {e}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tiny_cap_fails_with_counts_and_keeps_the_pedestal() {
    let d = Data::new(48, 80, 11, 30, 25);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    let (want, _) = cpu_run(&cfg, &d);
    let first = (0..want.frames())
        .find(|&i| want.frame(i).len() > 2)
        .unwrap();
    for step in [
        LadderStep::Opt1,
        LadderStep::Opt5,
        LadderStep::Opt8,
        LadderStep::Opt10,
    ] {
        let pipe = PipelineConfig {
            cap: 2,
            overflow: Overflow::Fail,
            chunk: 4,
            ..step.config()
        };
        let mut g = gpu_finder(&cfg, pipe, &d);
        let before = g.pedestal().unwrap();
        let err = g.find(d.data()).unwrap_err();
        let msg = err.to_string();
        match err {
            Error::ClusterLimit {
                frame,
                found,
                limit,
            } => {
                assert!(found > limit, "{msg}");
                if !step.config().compact {
                    assert_eq!(frame.get() as usize, first, "{msg}");
                    assert_eq!(found, want.frame(first).len(), "{msg}");
                    assert_eq!(limit, 2);
                }
            }
            e => panic!("expected ClusterLimit, got {e}"),
        }
        assert!(msg.contains("clusters") && msg.contains("limit"), "{msg}");
        assert_eq!(
            g.pedestal().unwrap(),
            before,
            "{}: pedestal unchanged",
            step.name()
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn failing_visitor_keeps_frames_before_it_like_the_cpu() {
    let d = Data::new(40, 40, 5, 20, 30);
    let cfg = d.config(ClusterSize::S3, Precision::F32, ThresholdMode::Live);
    let fail_at = 13;
    let mut visitor = |fc: cluda::FrameClusters<'_>| {
        if fc.frame == fail_at {
            Err(Error::param("test", "stop"))
        } else {
            Ok(())
        }
    };
    let mut c = cpu_finder(&cfg, &d);
    assert!(c.find_each(d.data(), &mut visitor).is_err());
    for step in [
        LadderStep::Opt2,
        LadderStep::Opt6,
        LadderStep::Opt9,
        LadderStep::Opt10,
    ] {
        let mut g = gpu_finder(
            &cfg,
            PipelineConfig {
                chunk: 8,
                ..step.config()
            },
            &d,
        );
        assert!(g.find_each(d.data(), &mut visitor).is_err());
        assert_eq!(
            g.pedestal().unwrap(),
            c.pedestal().unwrap(),
            "{}",
            step.name()
        );
    }
}

/// A saved pedestal set again and again after finding (as a stream starts every acquisition
/// from it: `reset_pedestal`, and `set_pedestal`; both refill the GPU's device buffers in
/// place), in both element sizes (F64, F32): every run gives the CPU's clusters and leaves its
/// pedestal.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pedestal_set_again_refills_in_place_and_matches_cpu() {
    let d = Data::new(40, 56, 13, 30, 60);
    for precision in [Precision::F64, Precision::F32] {
        let cfg = d.config(ClusterSize::S5, precision, ThresholdMode::Live);
        let mut c = cpu_finder(&cfg, &d);
        let mut g = gpu_finder(&cfg, PipelineConfig::default(), &d);
        let saved = c.pedestal().unwrap();
        for round in 0..3 {
            if round == 1 {
                c.set_pedestal(saved.clone()).unwrap();
                g.set_pedestal(saved.clone()).unwrap();
            } else {
                c.reset_pedestal(&saved).unwrap();
                g.reset_pedestal(&saved).unwrap();
            }
            same(
                &c.find(d.data()).unwrap(),
                &g.find(d.data()).unwrap(),
                &format!("{precision:?}, round {round}"),
            );
            assert_eq!(
                g.pedestal().unwrap(),
                c.pedestal().unwrap(),
                "round {round}"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pedestal_pushes_between_calls_match_cpu() {
    let d = Data::new(30, 50, 9, 20, 40);
    let cfg = d.config(ClusterSize::S7, Precision::F64, ThresholdMode::Frozen);
    let mut c = CpuFinder::new(cfg.clone()).unwrap();
    let mut g = GpuFinder::new(cfg).unwrap();
    for f in [&mut c as &mut dyn ClusterFinder, &mut g] {
        f.push_pedestal(d.dark()).unwrap();
    }
    let data = d.data();
    for (start, n, push) in [(0, 10, false), (10, 5, true), (15, 25, false)] {
        let part = data.range(start, n);
        if push {
            c.push_pedestal(part).unwrap();
            g.push_pedestal(part).unwrap();
        } else {
            same(
                &c.find(part).unwrap(),
                &g.find(part).unwrap(),
                "interleaved",
            );
        }
        assert_eq!(g.pedestal().unwrap(), c.pedestal().unwrap());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn error_paths() {
    let d = Data::new(16, 16, 1, 10, 3);
    let cfg = d.config(ClusterSize::S3, Precision::F64, ThresholdMode::Live);
    // Pedestal not ready.
    let mut g = GpuFinder::new(cfg.clone()).unwrap();
    g.push_pedestal(d.dark().range(0, 4)).unwrap();
    let e = g.find(d.data()).unwrap_err();
    assert!(
        matches!(e, Error::PedestalNotReady { have: 4, need: 10 }),
        "{e}"
    );
    // Wrong frame shape.
    g.push_pedestal(d.dark().range(4, 6)).unwrap();
    let wrong = Frames::new(&d.data[..3 * 128], 3, 8, 16).unwrap();
    let e = g.find(wrong).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    assert!(g.find(d.data()).is_ok());
    // Out of device memory: a chunk of a million frames does not fit.
    let pipe = PipelineConfig {
        chunk: 1 << 20,
        slot_bytes: usize::MAX / 8,
        ..LadderStep::Opt5.config()
    };
    let big = FinderConfig::new(400, 400);
    let mut g = GpuFinder::with_pipeline(big, pipe).unwrap();
    let e = g.reserve(1 << 20).unwrap_err();
    assert!(matches!(e, Error::OutOfDeviceMemory { .. }), "{e}");
    eprintln!("out of memory says: {e}");
    // PTX the driver rejects.
    let e = Device::open_with_ptx(0, ".version 8.0\n.target sm_90\nthis is not ptx").unwrap_err();
    assert!(matches!(e, Error::PtxLoad { .. }), "{e}");
    eprintln!("bad PTX says: {e}");
    // Bad pipeline settings.
    let e = GpuFinder::with_pipeline(
        cfg,
        PipelineConfig {
            streams: 0,
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            e,
            Error::InvalidParameter {
                name: "streams",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_runs_are_identical() {
    let d = Data::new(100, 100, 4, 20, 30);
    let cfg = d.config(ClusterSize::S9, Precision::F64, ThresholdMode::Live);
    // One launch per frame and one per upload group, twice each: all four identical (and so
    // deterministic).
    let runs: Vec<_> = [Launch::PerFrame, Launch::PerUpload]
        .repeat(2)
        .into_iter()
        .map(|launch| {
            let pipe = PipelineConfig {
                launch,
                ..PipelineConfig::default()
            };
            gpu_finder(&cfg, pipe, &d).find(d.data()).unwrap()
        })
        .collect();
    for r in &runs[1..] {
        assert_eq!(&runs[0], r);
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

/// Every ladder step is a valid pipeline with a name that parses back, and the last one is
/// the library's default pipeline (runs without a GPU).
#[test]
fn every_step_is_valid_named_and_opt10_is_the_default() {
    for step in LadderStep::ALL {
        step.config().validate().unwrap();
        assert_eq!(step.name().parse::<LadderStep>().unwrap(), step);
    }
    assert!("opt11".parse::<LadderStep>().is_err());
    assert_eq!(PipelineConfig::default(), LadderStep::Opt10.config());
}

/// Without a GPU, asking for one is a typed error (with a GPU this checks nothing).
#[test]
fn no_gpu_is_a_typed_error() {
    if cluda::cuda::gpu_available() {
        return;
    }
    let e = GpuFinder::new(FinderConfig::new(8, 8)).err().unwrap();
    assert!(matches!(e, Error::NoGpu(_)), "{e}");
    let _ = GPU;
}

/// One timed pass per ladder step (fresh finder, buffers reserved before the timer, pinned
/// input, a visitor that only counts): a diagnostic, not the benchmark (cold single pass).
#[test]
#[ignore = "needs a CUDA GPU"]
fn ladder_pass_times() {
    let d = moench();
    let mut pinned = PinnedFrames::new(&device(), d.data_n, d.rows, d.cols).unwrap();
    pinned.as_mut_slice().copy_from_slice(&d.data);
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
