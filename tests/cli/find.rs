//! `gen` then `find` equal to the library's CPU finder, other precisions, `demo`, and a
//! named error with exit code 1 for every kind of bad input to them.

use std::path::Path;

use cluda::io::npy::{self, write_array};
use cluda::io::read_cluster_file;
use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, ThresholdMode};
use support::cli::{find_args, s, text, words};

use crate::*;

/// Generates 40 pedestal and 12 data frames of 24 x 36 into `dir`.
#[test]
fn gen_find_matches_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data, pa, da) = small_frames(dir.path());
    assert_eq!(
        (pa.shape.clone(), da.shape.clone()),
        (vec![40, 24, 36], vec![12, 24, 36])
    );

    for (cluster, threads, threshold, read_threads) in
        [("3", "1", "live", "1"), ("5", "2", "frozen", "3")]
    {
        let clust = dir.path().join(format!("c{cluster}.clust"));
        let out = CLUDA.run(&find_args(
            &ped,
            &data,
            &[
                "--cluster",
                cluster,
                "--nsigma",
                "4.5",
                "--threshold",
                threshold,
                "--device",
                "cpu",
                "--threads",
                threads,
                "--read-threads",
                read_threads,
                "--out",
                s(&clust),
            ],
        ));
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(
            !text(&out.stderr).contains("not kept"),
            "{}",
            text(&out.stderr)
        );
        let stdout = text(&out.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{stdout}");
        let pairs = parse_summary(lines[0]);

        let size = ClusterSize::from_side(cluster.parse().unwrap()).unwrap();
        let mode: ThresholdMode = threshold.parse().unwrap();
        let config = FinderConfig::new(24, 36)
            .size(size)
            .n_sigma(4.5)
            .pedestal_frames(40)
            .threshold(mode);
        let mut finder = CpuFinder::with_threads(config, 1).unwrap();
        finder.push_pedestal(pa.as_frames().unwrap()).unwrap();
        let want = finder.find(da.as_frames().unwrap()).unwrap();
        assert!(want.total() > 0);
        let (numbers, got) = read_cluster_file(&clust, size).unwrap();
        assert_eq!(numbers, (0..12).collect::<Vec<i32>>());
        assert_eq!(got, want);
        assert_eq!(value(&pairs, "frames"), "12");
        assert_eq!(value(&pairs, "clusters"), want.total().to_string());
        assert_eq!(value(&pairs, "device"), "cpu");
        assert_eq!(value(&pairs, "precision"), "f64");
    }
}

#[test]
fn find_without_out_and_other_precisions() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data) = CLUDA.gen_small(dir.path());
    for precision in ["f32", "f32-naive"] {
        let out = CLUDA.run(&find_args(&ped, &data, &["--precision", precision]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let pairs = parse_summary(text(&out.stdout).trim_end());
        assert_eq!(value(&pairs, "precision"), precision);
        assert_eq!(value(&pairs, "device"), "cpu");
        // Nothing was kept, and stderr says so.
        let err = text(&out.stderr);
        assert!(
            err.contains("note: no --out FILE given: the clusters are counted, not kept"),
            "{err}"
        );
    }
    // Several inputs without --out-dir: the same note, naming --out-dir.
    let out = CLUDA.run(&["find", "--pedestal", s(&ped), "--data", s(&data), s(&data)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("note: no --out-dir DIR given: the clusters are counted, not kept"),
        "{err}"
    );
}

#[test]
fn demo_prints_summary_and_spectrum() {
    let out = CLUDA.run(&words(
        "demo --frames 20 --pedestal-frames 50 --rows 64 --cols 64 --threads 1",
    ));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    let pairs = parse_summary(lines.next().unwrap());
    assert_eq!(value(&pairs, "frames"), "20");
    let rest: Vec<&str> = lines.collect();
    assert!(
        rest[0].starts_with("spectrum of 3x3 cluster sums (ADU)"),
        "{stdout}"
    );
    assert_eq!(rest.len(), 1 + 22, "{stdout}");
    // The fullest bin is the single-photon peak near 400 ADU.
    let count = |l: &&&str| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
    let peak = rest[2..22].iter().max_by_key(count).unwrap();
    let lo: i64 = peak.split('-').next().unwrap().trim().parse().unwrap();
    assert!((300..=450).contains(&lo), "peak bin {peak}\n{stdout}");
}

fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
    let text = format!("{dict}\n");
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn bad_input_is_a_named_error_with_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data) = CLUDA.gen_small(dir.path());
    let d = dir.path();
    let put = |name: &str, bytes: Vec<u8>| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let f32_file = d.join("f32.npy");
    write_array::<f32>(&f32_file, &[2, 24, 36], &vec![0.0; 2 * 24 * 36]).unwrap();
    let fortran = put(
        "fortran.npy",
        raw_npy(
            "{'descr': '<u2', 'fortran_order': True, 'shape': (2, 24, 36), }",
            &vec![0; 2 * 24 * 36 * 2],
        ),
    );
    let four_d = put(
        "4d.npy",
        raw_npy(
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 24, 36), }",
            &vec![0; 2 * 24 * 36 * 2],
        ),
    );
    let mut cut = std::fs::read(&data).unwrap();
    cut.truncate(cut.len() - 1);
    let truncated = put("truncated.npy", cut);
    let bad_header = put(
        "bad_header.npy",
        raw_npy(
            "{'descr': '<u2', 'fortran_order': Nope, 'shape': (2, 24, 36), }",
            &[],
        ),
    );
    let other_shape = d.join("other.npy");
    npy::write_u16_3d(&other_shape, 2, 24, 35, &vec![4600; 2 * 24 * 35]).unwrap();
    let empty_ped = d.join("empty.npy");
    npy::write_u16_3d(&empty_ped, 0, 24, 36, &[]).unwrap();

    let find = |pedestal: &Path, data: &Path, extra: &[&str], want: &str| {
        let mut args = vec!["find", "--pedestal", s(pedestal), "--data", s(data)];
        args.extend_from_slice(extra);
        fails(&args, want);
    };
    let p = &ped;
    find(
        p,
        &f32_file,
        &[],
        "f32.npy: dtype '<f4' is not supported here: expected uint16",
    );
    find(&fortran, &data, &[], "fortran.npy: Fortran-order array");
    find(
        p,
        &four_d,
        &[],
        "4d.npy: expected a 3-D array (frames x rows x cols) or a 2-D array (one frame), got a 4-D array",
    );
    find(
        p,
        &truncated,
        &[],
        "truncated.npy: truncated data: shape (12, 24, 36) of uint16 needs 20736 bytes",
    );
    find(p, &bad_header, &[], "bad_header.npy: bad .npy header");
    find(p, &d.join("missing.npy"), &[], "missing.npy: No such file");
    find(p, &other_shape, &[], "shape mismatch in data file");
    find(
        p,
        &other_shape,
        &[],
        "expected 24 x 36 frames (as in the pedestal), got 24 x 35 frames",
    );
    find(&empty_ped, &data, &[], "pedestal file");
    find(&empty_ped, &data, &[], "holds no frames");
    find(
        p,
        &data,
        &["--cluster", "4"],
        "cluster size 4 is not supported; use 3, 5, 7 or 9",
    );
    find(
        p,
        &data,
        &["--nsigma", "nan"],
        "--nsigma must be finite and not negative, got nan",
    );
    find(
        p,
        &data,
        &["--nsigma", "-1"],
        "--nsigma must be finite and not negative, got -1",
    );
    find(
        p,
        &data,
        &["--precision", "f16"],
        "`f16` is not one of f64, f32, f32-naive",
    );
    find(
        p,
        &data,
        &["--threshold", "dead"],
        "`dead` is not one of live, frozen",
    );
    if !cluda::cuda::gpu_available() {
        find(p, &data, &["--device", "gpu"], "no CUDA GPU available: ");
    }
    find(
        p,
        &data,
        &["--device", "tpu"],
        "`tpu` is not one of auto, cpu, gpu",
    );
    find(p, &data, &["--threads", "0"], "threads");
    find(
        p,
        &data,
        &["--read-threads", "0"],
        "--read-threads must be between 1 and",
    );
    find(
        p,
        &data,
        &["--read-threads", "100000"],
        "--read-threads must be between 1 and",
    );
    find(
        p,
        &data,
        &["--out", s(&d.join("no/such/dir/c.clust"))],
        "c.clust: No such file",
    );
    fails(&["find", "--pedestal", s(p)], "--data");
    fails(
        &["find", "--pedestal", s(p), "--data", s(&data), "--bogus"],
        "--bogus",
    );
    fails(&["gen", "--out", s(d), "--rows", "0"], "rows");
    fails(
        &["gen", "--out", s(d), "--pedestal-frames", "0"],
        "pedestal-frames",
    );
    fails(
        &["demo", "--cluster", "11"],
        "cluster size 11 is not supported",
    );
    fails(&["demo", "--rows", "70000"], "must be between 1 and 65536");
}
