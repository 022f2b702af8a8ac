//! Failures and state: an overflow that fails, a failing visitor, error paths, a pedestal
//! set again or pushed between calls, repeated runs, the ladder's names, no GPU.

use crate::*;

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
