//! Every user error of the current API returns its specific [`Error`] variant, naming the
//! parameter or input, and leaves the finder / pedestal exactly as it was.

use cluda::{
    ClusterFinder, ClusterSize, CpuFinder, Error, FinderConfig, Frames, Pedestal, Precision,
};

const ALL: [Precision; 3] = [Precision::F64, Precision::F32, Precision::F32Naive];

fn ramp(n: usize, base: u16) -> Vec<u16> {
    (0..n).map(|i| base + (i % 17) as u16).collect()
}

fn ready_finder(precision: Precision) -> CpuFinder {
    let cfg = FinderConfig::new(4, 5)
        .pedestal_frames(3)
        .precision(precision);
    let mut f = CpuFinder::with_threads(cfg, 2).unwrap();
    f.push_pedestal(Frames::new(&ramp(60, 100), 3, 4, 5).unwrap())
        .unwrap();
    assert!(f.is_ready());
    f
}

fn param_name(e: &Error) -> &'static str {
    match e {
        Error::InvalidParameter { name, .. } => name,
        other => panic!("expected InvalidParameter, got {other:?}"),
    }
}

#[test]
fn wrong_pedestal_frame_shape_changes_nothing() {
    for p in ALL {
        // Before ready (fill phase) and after ready (window phase).
        let cfg = FinderConfig::new(4, 5).pedestal_frames(3).precision(p);
        let mut f = CpuFinder::with_threads(cfg, 1).unwrap();
        f.push_pedestal(Frames::new(&ramp(20, 100), 1, 4, 5).unwrap())
            .unwrap();
        for finder in [&mut f, &mut ready_finder(p)] {
            let before = finder.pedestal().unwrap();
            let bad = ramp(40, 100);
            for (rows, cols) in [(5, 4), (2, 10), (4, 10), (1, 20)] {
                let e = finder
                    .push_pedestal(Frames::new(&bad[..rows * cols], 1, rows, cols).unwrap())
                    .unwrap_err();
                match &e {
                    Error::Shape {
                        context,
                        expected,
                        got,
                    } => {
                        assert!(context.contains("pedestal"), "{e}");
                        assert!(expected.contains("4 x 5"), "{e}");
                        assert!(got.contains(&format!("{rows} x {cols}")), "{e}");
                    }
                    other => panic!("{p:?}: expected Shape, got {other:?}"),
                }
                assert!(
                    finder.pedestal().unwrap() == before,
                    "{p:?}: pedestal changed"
                );
            }
        }
        // The Pedestal type directly: a frame of the wrong length.
        let mut ped = Pedestal::new(4, 5, 3, p).unwrap();
        let before = ped.clone();
        assert!(matches!(ped.push_frame(&[1; 19]), Err(Error::Shape { .. })));
        assert!(matches!(ped.push_frame(&[1; 21]), Err(Error::Shape { .. })));
        assert!(ped == before);
    }
}

#[test]
fn wrong_data_frame_shape_changes_nothing() {
    for p in ALL {
        let mut f = ready_finder(p);
        let before = f.pedestal().unwrap();
        let bad = ramp(40, 100);
        let e = f.find(Frames::new(&bad, 2, 5, 4).unwrap()).unwrap_err();
        match &e {
            Error::Shape { context, .. } => assert!(context.contains("data"), "{e}"),
            other => panic!("expected Shape, got {other:?}"),
        }
        let mut visited = 0;
        let e = f
            .find_each(Frames::new(&bad, 1, 4, 10).unwrap(), &mut |_| {
                visited += 1;
                Ok(())
            })
            .unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e:?}");
        assert_eq!(visited, 0);
        assert!(f.pedestal().unwrap() == before, "{p:?}: pedestal changed");
    }
}

#[test]
fn finding_before_ready_is_an_error_with_counts() {
    for p in ALL {
        let cfg = FinderConfig::new(4, 5).pedestal_frames(3).precision(p);
        let mut f = CpuFinder::with_threads(cfg, 1).unwrap();
        let data = ramp(20, 100);
        for have in 0..3u32 {
            let before = f.pedestal().unwrap();
            let e = f.find(Frames::new(&data, 1, 4, 5).unwrap()).unwrap_err();
            assert!(
                matches!(e, Error::PedestalNotReady { have: h, need: 3 } if h == have),
                "{p:?}: {e:?}"
            );
            assert!(e.to_string().contains(&format!("{have} of the 3")), "{e}");
            assert!(f.pedestal().unwrap() == before);
            assert!(!f.is_ready());
            f.push_pedestal(Frames::new(&data, 1, 4, 5).unwrap())
                .unwrap();
        }
        assert!(f.is_ready());
        assert!(f.find(Frames::new(&data, 1, 4, 5).unwrap()).is_ok());
        // The maps of an unready pedestal.
        let ped = Pedestal::new(2, 2, 5, p).unwrap();
        for r in [ped.mean_map(), ped.std_map(), ped.frozen_std_map()] {
            assert!(matches!(
                r,
                Err(Error::PedestalNotReady { have: 0, need: 5 })
            ));
        }
    }
}

#[test]
fn config_validation_names_the_parameter() {
    let ok = FinderConfig::new(400, 400);
    assert!(ok.validate().is_ok());
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, -1e-300] {
        let e = ok.clone().n_sigma(bad).validate().unwrap_err();
        assert_eq!(param_name(&e), "nsigma", "n_sigma {bad}");
        assert!(CpuFinder::new(ok.clone().n_sigma(bad)).is_err());
    }
    assert!(ok.clone().n_sigma(0.0).validate().is_ok());
    assert!(ok.clone().n_sigma(-0.0).validate().is_ok());
    let e = ok.clone().pedestal_frames(0).validate().unwrap_err();
    assert_eq!(param_name(&e), "pedestal-frames");
    for (r, c) in [
        (0, 5),
        (5, 0),
        (0, 0),
        (65537, 1),
        (1, 65537),
        (70000, 70000),
    ] {
        let e = FinderConfig::new(r, c).validate().unwrap_err();
        assert_eq!(param_name(&e), "rows/cols", "{r} x {c}");
        let e = CpuFinder::with_threads(FinderConfig::new(r, c), 1)
            .err()
            .unwrap();
        assert_eq!(param_name(&e), "rows/cols");
    }
    assert!(FinderConfig::new(65536, 1).validate().is_ok());
    assert!(FinderConfig::new(1, 65536).validate().is_ok());
    // Pedestal::new checks the same things itself.
    assert_eq!(
        param_name(&Pedestal::new(0, 3, 1, Precision::F64).unwrap_err()),
        "rows/cols"
    );
    assert_eq!(
        param_name(&Pedestal::new(3, 3, 0, Precision::F64).unwrap_err()),
        "pedestal-frames"
    );
}

#[test]
fn unsupported_cluster_sizes() {
    for side in [0, 1, 2, 4, 6, 8, 10, 11, usize::MAX] {
        let e = ClusterSize::from_side(side).unwrap_err();
        assert_eq!(param_name(&e), "cluster");
        assert!(e.to_string().contains(&side.to_string()), "{e}");
    }
    for s in ClusterSize::ALL {
        assert_eq!(ClusterSize::from_side(s.side()).unwrap(), s);
    }
}

#[test]
fn frames_length_mismatch() {
    let d = [0u16; 24];
    for (f, r, c) in [(1, 4, 5), (2, 3, 5), (1, 5, 5), (0, 4, 6)] {
        match Frames::new(&d, f, r, c).unwrap_err() {
            Error::Shape { expected, got, .. } => {
                assert!(expected.contains(&format!("{}", f * r * c)), "{expected}");
                assert!(got.contains("24"), "{got}");
            }
            other => panic!("expected Shape, got {other:?}"),
        }
    }
    assert!(matches!(
        Frames::new(&[], 0, 0, 5),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        Frames::new(&[], 1, 5, 0),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        Frames::new(&d, usize::MAX, usize::MAX, 2),
        Err(Error::Shape { .. })
    ));
    assert!(Frames::new(&d, 2, 3, 4).is_ok());
    assert!(Frames::new(&[], 0, 3, 4).is_ok());
}

#[test]
fn zero_threads() {
    let e = CpuFinder::with_threads(FinderConfig::new(4, 4), 0)
        .err()
        .unwrap();
    assert_eq!(param_name(&e), "threads");
}

#[test]
fn parse_errors_name_the_option() {
    assert_eq!(
        param_name(&"f16".parse::<Precision>().unwrap_err()),
        "precision"
    );
    assert_eq!(
        param_name(&"sometimes".parse::<cluda::ThresholdMode>().unwrap_err()),
        "threshold"
    );
}

#[test]
fn set_pedestal_mismatch_changes_nothing() {
    let mut f = ready_finder(Precision::F64);
    let before = f.pedestal().unwrap();
    for other in [
        Pedestal::new(5, 4, 3, Precision::F64).unwrap(),
        Pedestal::new(4, 5, 4, Precision::F64).unwrap(),
        Pedestal::new(4, 5, 3, Precision::F32).unwrap(),
    ] {
        assert!(matches!(f.set_pedestal(other), Err(Error::Shape { .. })));
        assert!(f.pedestal().unwrap() == before);
    }
}

/// A failing visitor: frames before it stay consumed, its error comes back, and the frames
/// after it are not processed (docs/semantics.md: streaming contract of `find_each`).
#[test]
fn visitor_error_stops_after_the_failing_frame() {
    let data = ramp(60, 100);
    let mut a = ready_finder(Precision::F64);
    let mut seen = Vec::new();
    let e = a
        .find_each(Frames::new(&data, 3, 4, 5).unwrap(), &mut |fc| {
            seen.push(fc.frame);
            if fc.frame == 1 {
                Err(Error::param("visitor", "stop"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert_eq!(seen, vec![0, 1]);
    assert!(
        matches!(
            e,
            Error::InvalidParameter {
                name: "visitor",
                ..
            }
        ),
        "{e:?}"
    );
    // Same pedestal as a finder that processed exactly frames 0 and 1.
    let mut b = ready_finder(Precision::F64);
    b.find(Frames::new(&data[..40], 2, 4, 5).unwrap()).unwrap();
    assert!(a.pedestal().unwrap() == b.pedestal().unwrap());
}
