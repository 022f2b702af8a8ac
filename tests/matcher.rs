//! CPU tests of the descriptor matcher: the reference against the f64 oracle, input errors,
//! the .npy reader/writer and the command. GPU versions are in `matcher_gpu.rs`.

use std::path::PathBuf;

use cluda::Error;
use cluda::matcher::{
    self, Descriptor, MatchVersion, cpu, match_nearest, read_descriptors, write_descriptors,
};
use proptest::prelude::*;
use support::files::npy_bytes;
use support::matcher::*;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cluda-matcher-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

#[test]
fn cpu_shapes_from_the_issue() {
    for (n, m, seed) in [(1, 1, 1), (1, 5000, 2), (4097, 3, 3), (1000, 1000, 4)] {
        let (lhs, rhs) = (uniform(n, seed), uniform(m, seed + 100));
        let got = cpu::match_cpu(&lhs, &rhs).expect("cpu match");
        assert_ok(&format!("cpu {n}x{m}"), &lhs, &rhs, &got);
    }
}

#[test]
fn cpu_near_duplicates_and_exact_copies() {
    let (lhs, rhs) = with_near_duplicates(300, 700, 3, &[1e-3, 2e-3, 3e-3], false, 11);
    assert_ok(
        "cpu near-dups",
        &lhs,
        &rhs,
        &cpu::match_cpu(&lhs, &rhs).expect("cpu"),
    );
    let (lhs, rhs) = with_near_duplicates(200, 500, 2, &[1e-4], true, 12);
    let got = cpu::match_cpu(&lhs, &rhs).expect("cpu");
    assert_ok("cpu exact copies", &lhs, &rhs, &got);
    // Rows with an exact copy must find a zero distance.
    for i in (0..200).step_by(2) {
        assert_eq!(got[i].distance, 0.0, "row {i}");
    }
}

#[test]
fn cpu_clustered_and_offset_data() {
    let lhs = clustered(400, 5, 0.01, 21);
    let rhs = clustered(900, 5, 0.01, 21 ^ 7);
    assert_ok(
        "cpu clustered",
        &lhs,
        &rhs,
        &cpu::match_cpu(&lhs, &rhs).expect("cpu"),
    );
    // Large common offset: the cancellation case for ||a||^2 + ||b||^2 - 2ab.
    let shift = |v: Vec<Descriptor>| {
        v.into_iter()
            .map(|d| d.map(|x| 1000.0 + x))
            .collect::<Vec<_>>()
    };
    let (lhs, rhs) = (shift(uniform(200, 31)), shift(uniform(300, 32)));
    assert_ok(
        "cpu offset",
        &lhs,
        &rhs,
        &cpu::match_cpu(&lhs, &rhs).expect("cpu"),
    );
}

#[test]
fn ties_pick_a_tied_index() {
    let a: Descriptor = [0.5; D];
    let mut b = a;
    b[0] = 1.5;
    let mut c = a;
    c[1] = -0.5; // same distance as b
    let got = cpu::match_cpu(&[a], &[b, c]).expect("cpu");
    assert!(got[0].index <= 1);
    assert_eq!(got[0].distance, 1.0);
}

#[test]
fn empty_inputs() {
    let rhs = uniform(3, 1);
    for v in MatchVersion::ALL {
        // An empty left side has nothing to match: empty result, on every version, GPU or not.
        assert!(
            match_nearest(&[], &rhs, v).expect("empty lhs").is_empty(),
            "{v}"
        );
        // No right descriptor: no neighbour exists; a shape error.
        let e = match_nearest(&uniform(2, 2), &[], v).expect_err("empty rhs");
        assert!(matches!(e, Error::Shape { .. }), "{v}: {e}");
        assert!(e.to_string().contains("rhs"), "{e}");
    }
}

#[test]
fn non_finite_values_name_side_row_and_dimension() {
    let mut lhs = uniform(10, 1);
    lhs[7][42] = f32::NAN;
    let rhs = uniform(5, 2);
    for v in MatchVersion::ALL {
        let e = match_nearest(&lhs, &rhs, v).expect_err("NaN");
        let s = e.to_string();
        assert!(
            s.contains("lhs")
                && s.contains("row 7")
                && s.contains("dimension 42")
                && s.contains("NaN"),
            "{v}: {s}"
        );
    }
    let lhs = uniform(10, 1);
    let mut rhs = uniform(5, 2);
    for (value, version, what) in [
        (f32::NEG_INFINITY, MatchVersion::Cpu, "-inf"),
        (3e20, MatchVersion::V2, "magnitude"),
    ] {
        rhs[3][0] = value;
        let s = match_nearest(&lhs, &rhs, version)
            .expect_err(what)
            .to_string();
        assert!(
            s.contains("rhs") && s.contains("row 3") && s.contains(what),
            "{s}"
        );
    }
}

#[test]
fn versions_parse() {
    for v in MatchVersion::ALL {
        assert_eq!(v.name().parse::<MatchVersion>().expect("parse"), v);
    }
    assert_eq!(
        "V3".parse::<MatchVersion>().expect("case"),
        MatchVersion::V3
    );
    assert_eq!(
        "V4".parse::<MatchVersion>().expect("case"),
        MatchVersion::V4
    );
    let e = "v5".parse::<MatchVersion>().expect_err("v5").to_string();
    assert!(e.contains("v5") && e.contains("v1, v2, v3, v4, cpu"), "{e}");
}

#[test]
fn gpu_versions_without_a_gpu_are_clear_errors() {
    #[cfg(feature = "gpu")]
    if cluda::cuda::gpu_available() {
        return; // covered by matcher_gpu.rs
    }
    let (lhs, rhs) = (uniform(4, 1), uniform(4, 2));
    for v in MatchVersion::GPU {
        let e = match_nearest(&lhs, &rhs, v).expect_err("no gpu");
        assert!(matches!(e, Error::NoGpu(_)), "{v}: {e}");
    }
}

#[test]
fn npy_round_trip_and_errors() {
    let rows = uniform(37, 5);
    let p = tmp("rt.npy");
    write_descriptors(&p, &rows).expect("write");
    assert_eq!(read_descriptors(&p).expect("read"), rows);
    let empty = tmp("empty.npy");
    write_descriptors(&empty, &[]).expect("write empty");
    assert!(read_descriptors(&empty).expect("read empty").is_empty());

    let header = |dict: &str| npy_bytes(dict, &[]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "f8.npy",
            header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 128), }"),
            "'<f8'",
        ),
        (
            "shape.npy",
            header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 64), }"),
            "(n, 128)",
        ),
        (
            "1d.npy",
            header("{'descr': '<f4', 'fortran_order': False, 'shape': (128,), }"),
            "(n, 128)",
        ),
        (
            "fortran.npy",
            header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 128), }"),
            "Fortran",
        ),
        (
            "trunc.npy",
            header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 128), }"),
            "truncated",
        ),
        ("junk.npy", b"hello world, not numpy".to_vec(), "magic"),
    ];
    for (name, bytes, needle) in cases {
        let p = tmp(name);
        std::fs::write(&p, bytes).expect("write");
        let e = read_descriptors(&p).expect_err(name);
        let s = e.to_string();
        assert!(
            matches!(e, Error::Format { .. }) && s.contains(name) && s.contains(needle),
            "{name}: {s}"
        );
    }
    let e = read_descriptors(&tmp("missing.npy")).expect_err("missing");
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

#[test]
fn reference_matches_the_public_entry_point() {
    let (lhs, rhs) = (uniform(64, 3), uniform(99, 4));
    assert_eq!(
        match_nearest(&lhs, &rhs, MatchVersion::Cpu).expect("a"),
        cpu::match_cpu(&lhs, &rhs).expect("b")
    );
    assert_eq!(matcher::DIM, 128);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn cpu_small_shapes(lhs in descriptors(12), rhs in descriptors(24)) {
        let got = cpu::match_cpu(&lhs, &rhs).expect("cpu");
        let (bad, worst) = check("cpu proptest", &lhs, &rhs, &got);
        prop_assert_eq!(bad, 0, "worst {}", worst);
    }
}
