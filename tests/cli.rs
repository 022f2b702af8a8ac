//! The `cluda` binary end to end: gen -> find -> cluster file equal to the library's CPU
//! finder, the summary line's exact form, demo, and a named error with exit code 1 (never a
//! panic) for every kind of bad input.

use std::path::{Path, PathBuf};

use cluda::io::npy::{self, read_u16_frames, write_array};
use cluda::io::read_cluster_file;
use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, ThresholdMode};
use support::cli::{Cli, find_args, gen_args, s, text};

/// The binary under test.
const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// Splits a summary line into `key=value` pairs and checks that the keys are exactly `keys`,
/// in that order.
fn key_values(line: &str, keys: &[&str]) -> Vec<(String, String)> {
    let pairs: Vec<(String, String)> = line
        .split(' ')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("`{kv}` in `{line}`"));
            (k.to_string(), v.to_string())
        })
        .collect();
    assert_eq!(
        pairs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        keys,
        "{line}"
    );
    pairs
}

/// Checks the summary line's keys, their order and each value's form; returns the values.
fn parse_summary(line: &str) -> Vec<(String, String)> {
    let keys = [
        "frames",
        "clusters",
        "clusters_per_frame",
        "seconds",
        "us_per_frame",
        "fps",
        "device",
        "precision",
        "input_us_per_frame",
    ];
    let pairs = key_values(line, &keys);
    let decimals = |v: &str, n: usize| {
        let (a, b) = v
            .split_once('.')
            .unwrap_or_else(|| panic!("`{v}` in `{line}`"));
        assert!(
            !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()),
            "{line}"
        );
        assert!(
            b.len() == n && b.bytes().all(|c| c.is_ascii_digit()),
            "{line}"
        );
    };
    for (k, v) in &pairs {
        match k.as_str() {
            "frames" | "clusters" => assert!(
                v.bytes().all(|c| c.is_ascii_digit()) && !v.is_empty(),
                "{line}"
            ),
            "seconds" => decimals(v, 3),
            "clusters_per_frame" | "us_per_frame" | "fps" | "input_us_per_frame" => decimals(v, 1),
            _ => assert!(!v.is_empty(), "{line}"),
        }
    }
    pairs
}

fn value<'a>(pairs: &'a [(String, String)], key: &str) -> &'a str {
    &pairs.iter().find(|(k, _)| k == key).unwrap().1
}

/// Generates 40 pedestal and 12 data frames of 24 x 36 into `dir`.
#[test]
fn gen_find_matches_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data) = CLUDA.gen_small(dir.path());
    let (pa, da) = (
        read_u16_frames(&ped).unwrap(),
        read_u16_frames(&data).unwrap(),
    );
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
    let out = CLUDA.run(&[
        "demo",
        "--frames",
        "20",
        "--pedestal-frames",
        "50",
        "--rows",
        "64",
        "--cols",
        "64",
        "--threads",
        "1",
    ]);
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

/// Runs cluda expecting failure: exit code 1, `error: ` and `want` on stderr, no panic.
fn fails(args: &[&str], want: &str) {
    CLUDA.fails(args, &[want]);
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

/// `n` deterministic descriptors with values in [0, 1) (SplitMix64).
fn descriptors(n: usize, seed: u64) -> Vec<[f32; 128]> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n).map(|_| std::array::from_fn(|_| next())).collect()
}

fn write_descriptors(path: &Path, rows: &[[f32; 128]]) {
    npy::write_f32_2d(path, rows.len(), 128, rows.as_flattened()).unwrap();
}

/// Checks the `match` summary line's keys, their order and each value's form; returns the
/// values.
fn parse_match_summary(line: &str) -> Vec<(String, String)> {
    let keys = [
        "lhs",
        "rhs",
        "seconds",
        "ms",
        "version",
        "device",
        "recomputed",
    ];
    let pairs = key_values(line, &keys);
    let digits = |v: &str| !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit());
    for (k, v) in &pairs {
        match k.as_str() {
            "lhs" | "rhs" | "recomputed" => assert!(digits(v), "{line}"),
            "seconds" | "ms" => {
                let (a, b) = v
                    .split_once('.')
                    .unwrap_or_else(|| panic!("`{v}` in `{line}`"));
                assert!(digits(a) && digits(b) && b.len() == 3, "{line}");
            }
            "version" => assert!(["v1", "v2", "v3", "cpu"].contains(&v.as_str()), "{line}"),
            _ => assert!(
                v.len() >= 3 && v.starts_with('"') && v.ends_with('"'),
                "{line}"
            ),
        }
    }
    pairs
}

#[test]
fn match_on_the_cpu_equals_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lhs = descriptors(37, 1);
    let mut rhs = descriptors(53, 2);
    rhs[41] = lhs[3]; // an exact duplicate: index 41, distance 0
    let (pl, pr, po) = (d.join("a.npy"), d.join("b.npy"), d.join("m.npy"));
    write_descriptors(&pl, &lhs);
    write_descriptors(&pr, &rhs);

    let out = CLUDA.run(&[
        "match",
        "--lhs",
        s(&pl),
        "--rhs",
        s(&pr),
        "--version",
        "cpu",
        "--out",
        s(&po),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: version=cpu (as requested by --version)"),
        "{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let pairs = parse_match_summary(lines[0]);
    assert_eq!(value(&pairs, "lhs"), "37");
    assert_eq!(value(&pairs, "rhs"), "53");
    assert_eq!(value(&pairs, "version"), "cpu");
    assert_eq!(value(&pairs, "device"), "\"cpu\"");
    assert_eq!(value(&pairs, "recomputed"), "0");

    let got = npy::read_array::<f64>(&po).unwrap();
    assert_eq!(got.shape, vec![37, 2]);
    let want = cluda::matcher::cpu::match_cpu(&lhs, &rhs).unwrap();
    assert_eq!(want[3].index, 41);
    assert_eq!(want[3].distance, 0.0);
    for (i, m) in want.iter().enumerate() {
        assert_eq!(got.data[2 * i], f64::from(m.index), "row {i}");
        assert_eq!(got.data[2 * i + 1], f64::from(m.distance), "row {i}");
    }
}

#[test]
fn match_default_version_follows_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, pr) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    write_descriptors(&pl, &descriptors(5, 3));
    write_descriptors(&pr, &descriptors(7, 4));
    let out = CLUDA.run(&["match", "--lhs", s(&pl), "--rhs", s(&pr)]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let pairs = parse_match_summary(text(&out.stdout).trim_end());
    let (version, note) = if cluda::cuda::gpu_available() {
        ("v3", "note: version=v3 (default: a CUDA GPU is available)")
    } else {
        ("cpu", "note: version=cpu (default: no CUDA GPU available)")
    };
    assert_eq!(value(&pairs, "version"), version);
    assert!(stderr.contains(note), "{stderr}");
    assert_eq!(value(&pairs, "lhs"), "5");
}

#[test]
fn match_bad_input_is_a_named_error_with_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = d.join("good.npy");
    write_descriptors(&good, &descriptors(4, 5));
    let u16_file = d.join("u16.npy");
    write_array::<u16>(&u16_file, &[4, 128], &[7; 4 * 128]).unwrap();
    let narrow = d.join("narrow.npy");
    npy::write_f32_2d(&narrow, 4, 64, &[0.5; 4 * 64]).unwrap();
    let nan = d.join("nan.npy");
    let mut rows = descriptors(4, 6);
    rows[2][5] = f32::NAN;
    write_descriptors(&nan, &rows);
    let empty = d.join("empty.npy");
    write_descriptors(&empty, &[]);

    let run = |lhs: &Path, rhs: &Path, extra: &[&str], want: &str| {
        let mut args = vec!["match", "--lhs", s(lhs), "--rhs", s(rhs)];
        args.extend_from_slice(extra);
        fails(&args, want);
    };
    let cpu = ["--version", "cpu"];
    run(
        &u16_file,
        &good,
        &cpu,
        "u16.npy: dtype '<u2' is not supported here: expected float32",
    );
    run(
        &good,
        &narrow,
        &cpu,
        "narrow.npy: shape (4, 64) (dtype '<f4') is not (n, 128)",
    );
    run(
        &good,
        &d.join("missing.npy"),
        &cpu,
        "missing.npy: No such file",
    );
    run(
        &nan,
        &good,
        &cpu,
        "invalid parameter `lhs`: descriptor row 2 holds NaN at dimension 5",
    );
    run(
        &good,
        &nan,
        &cpu,
        "invalid parameter `rhs`: descriptor row 2 holds NaN at dimension 5",
    );
    run(&good, &empty, &cpu, "shape mismatch in rhs descriptors");
    run(
        &good,
        &good,
        &["--version", "v5"],
        "`v5` is not one of v1, v2, v3, v4, cpu",
    );
    run(
        &good,
        &good,
        &["--version", "cpu", "--out", s(&d.join("no/such/dir/m.npy"))],
        "m.npy: No such file",
    );
    fails(&["match", "--lhs", s(&good)], "--rhs");
    if !cluda::cuda::gpu_available() {
        for v in ["v1", "v2", "v3"] {
            run(
                &good,
                &good,
                &["--version", v],
                "error: no CUDA GPU available: ",
            );
        }
    }
}

/// Writes `frames` (`n x rows x cols`) as a raw acquisition `<dir>/<base>_master_0.json` with
/// the given header frame numbers (one per frame); returns the master's path.
fn write_raw(
    dir: &Path,
    base: &str,
    frames: &[u16],
    rows: usize,
    cols: usize,
    numbers: &[u64],
) -> PathBuf {
    use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
    let config = RawWriterConfig {
        rows,
        cols,
        detector: DetectorType::Generic16,
        max_frames_per_file: 7,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir, base, 0, config).unwrap();
    for (f, &n) in frames.chunks_exact(rows * cols).zip(numbers) {
        w.write_frame(n, f).unwrap();
    }
    w.finish(None).unwrap()
}

#[test]
fn find_on_raw_acquisitions_equals_find_on_npy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let (pa, da) = (
        read_u16_frames(&ped).unwrap(),
        read_u16_frames(&data).unwrap(),
    );
    // Frame numbers 0.. as the .npy path numbers them; several data files (7 frames each).
    let ped_raw = write_raw(d, "ped", &pa.data, 24, 36, &(0..40).collect::<Vec<_>>());
    let data_raw = write_raw(d, "run", &da.data, 24, 36, &(0..12).collect::<Vec<_>>());
    let find = |p: &Path, x: &Path, out: &Path| {
        let o = CLUDA.run(&find_args(p, x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        parse_summary(text(&o.stdout).trim_end())
    };
    let (npy_out, raw_out, mixed_out) = (d.join("n.clust"), d.join("r.clust"), d.join("m.clust"));
    let a = find(&ped, &data, &npy_out);
    let b = find(&ped_raw, &data_raw, &raw_out);
    let c = find(&ped, &data_raw, &mixed_out);
    assert_eq!(value(&a, "clusters"), value(&c, "clusters"));
    assert_eq!(value(&a, "clusters"), value(&b, "clusters"));
    assert_eq!(value(&b, "frames"), "12");
    assert!(value(&a, "clusters").parse::<u64>().unwrap() > 0);
    let bytes = std::fs::read(&npy_out).unwrap();
    assert_eq!(bytes, std::fs::read(&raw_out).unwrap());
    assert_eq!(bytes, std::fs::read(&mixed_out).unwrap());

    // A data file given instead of its master: the error names the master file to give.
    let data_file = d.join("run_d0_f0_0.raw");
    assert!(data_file.is_file());
    for option in ["--data", "--pedestal"] {
        let (p, x) = if option == "--data" {
            (s(&ped), s(&data_file))
        } else {
            (s(&data_file), s(&data))
        };
        CLUDA.fails(
            &["find", "--pedestal", p, "--data", x, "--device", "cpu"],
            &[
                "run_d0_f0_0.raw",
                "not a NumPy .npy file",
                "give its master file instead",
                s(&data_raw),
            ],
        );
    }
}

#[test]
fn raw_frame_numbers_and_gaps_reach_the_cluster_file_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let da = read_u16_frames(&data).unwrap();
    // Header numbers start at 100 and skip 105 and 106: the data has 12 frames but two gaps'
    // worth of numbers are missing, which cluda reports without shifting frames.
    let numbers: Vec<u64> = (100..105).chain(107..114).collect();
    let data_raw = write_raw(d, "gappy", &da.data, 24, 36, &numbers);
    let (raw_out, npy_out) = (d.join("g.clust"), d.join("n.clust"));
    let o = CLUDA.run(&find_args(
        &ped,
        &data_raw,
        &["--out", s(&raw_out), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("warning: data file"), "{err}");
    assert!(
        err.contains("missing frame numbers: 2 in 1 gap(s), first: 105..=106"),
        "{err}"
    );
    let o = CLUDA.run(&find_args(
        &ped,
        &data,
        &["--out", s(&npy_out), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (na, ba) = read_cluster_file(&npy_out, ClusterSize::S3).unwrap();
    let (nb, bb) = read_cluster_file(&raw_out, ClusterSize::S3).unwrap();
    assert_eq!(na, (0..12).collect::<Vec<i32>>());
    assert_eq!(nb, numbers.iter().map(|&n| n as i32).collect::<Vec<_>>());
    assert_eq!(ba, bb);
}

#[test]
fn gen_raw_then_find() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = CLUDA.run(&gen_args(
        d,
        "--frames 9 --pedestal-frames 20 --rows 16 --cols 20 --raw",
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("data_master_0.json (9 frames of 16 x 20"));
    let clust = d.join("c.clust");
    let o = CLUDA.run(&[
        "find",
        "--pedestal",
        s(&d.join("pedestal_master_0.json")),
        "--data",
        s(&d.join("data_master_0.json")),
        "--out",
        s(&clust),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        value(&parse_summary(text(&o.stdout).trim_end()), "frames"),
        "9"
    );
    // Raw frame numbers count from 1.
    let (numbers, _) = read_cluster_file(&clust, ClusterSize::S3).unwrap();
    assert_eq!(numbers, (1..=9).collect::<Vec<i32>>());
    fails(
        &[
            "find",
            "--pedestal",
            s(&d.join("nope_master_0.json")),
            "--data",
            s(&d.join("data_master_0.json")),
        ],
        "nope_master_0.json",
    );
}

/// Crops `frames` (`n x rows x cols`, image order) to `roi`, as a receiver with `rx_roi`
/// writes them.
fn crop_frames(frames: &[u16], cols: usize, rows: usize, roi: cluda::io::raw::Roi) -> Vec<u16> {
    let mut out = Vec::new();
    for f in frames.chunks_exact(rows * cols) {
        let mut c = vec![0u16; roi.rows() * roi.cols()];
        roi.crop(f, cols, &mut c).unwrap();
        out.extend(c);
    }
    out
}

/// The cluster file `bytes` (records of `cells` values) with every centre moved by `dx`
/// columns and `dy` rows: written here from the file layout alone, as an oracle of the
/// detector coordinates of ROI acquisitions.
fn shift_cluster_file(bytes: &[u8], cells: usize, dx: u16, dy: u16) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while at < out.len() {
        let n = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8;
        for _ in 0..n {
            let x = u16::from_le_bytes([out[at], out[at + 1]]) + dx;
            let y = u16::from_le_bytes([out[at + 2], out[at + 3]]) + dy;
            out[at..at + 2].copy_from_slice(&x.to_le_bytes());
            out[at + 2..at + 4].copy_from_slice(&y.to_le_bytes());
            at += 4 + 4 * cells;
        }
    }
    out
}

/// Raw acquisitions written with a receiver ROI (the master naming it, the data files holding
/// only its pixels) are found as frames of the ROI's shape, clusters written in detector
/// coordinates: the cluster file is byte for byte that of `find` on the same frames as `.npy`
/// files of the ROI's shape, every centre moved by the ROI's corner. The same data files
/// under a master that names no ROI are refused with the file named, exit code 1.
#[test]
fn find_on_roi_raw_acquisitions_equals_find_on_npy_of_roi_shape() {
    use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig, Roi};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let (pa, da) = (
        read_u16_frames(&ped).unwrap(),
        read_u16_frames(&data).unwrap(),
    );
    // Columns 3..=30 of rows 2..=19 of the 24 x 36 frames: 18 x 28.
    let roi = Roi {
        xmin: 3,
        xmax: 30,
        ymin: 2,
        ymax: 19,
    };
    let (pc, dc) = (
        crop_frames(&pa.data, 36, 24, roi),
        crop_frames(&da.data, 36, 24, roi),
    );
    let write = |base: &str, frames: &[u16], version: f64| {
        let config = RawWriterConfig {
            rows: 24,
            cols: 36,
            detector: DetectorType::Generic16,
            max_frames_per_file: 7,
            version,
            ..RawWriterConfig::moench03()
        };
        let mut w = RawWriter::create(d, base, 0, config)
            .unwrap()
            .roi(Some(roi))
            .unwrap();
        for (n, f) in frames.chunks_exact(18 * 28).enumerate() {
            w.write_frame(n as u64, f).unwrap();
        }
        w.finish(None).unwrap()
    };
    let ped_raw = write("ped", &pc, 7.2);
    let data_raw = write("run", &dc, 8.0);
    let (ped_npy, data_npy) = (d.join("ped_roi.npy"), d.join("data_roi.npy"));
    npy::write_u16_3d(&ped_npy, 40, 18, 28, &pc).unwrap();
    npy::write_u16_3d(&data_npy, 12, 18, 28, &dc).unwrap();
    let find = |p: &Path, x: &Path, out: &Path| {
        let o = CLUDA.run(&find_args(p, x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        parse_summary(text(&o.stdout).trim_end())
    };
    let (npy_out, raw_out) = (d.join("n.clust"), d.join("r.clust"));
    let a = find(&ped_npy, &data_npy, &npy_out);
    let b = find(&ped_raw, &data_raw, &raw_out);
    assert_eq!(value(&b, "frames"), "12");
    assert_eq!(value(&a, "clusters"), value(&b, "clusters"));
    assert!(value(&a, "clusters").parse::<u64>().unwrap() > 0);
    assert_eq!(
        shift_cluster_file(&std::fs::read(&npy_out).unwrap(), 9, 3, 2),
        std::fs::read(&raw_out).unwrap()
    );
    // The ROI's files under a master that names none: a named error, never a misreading.
    let text_8 = std::fs::read_to_string(&data_raw).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text_8).unwrap();
    j.as_object_mut().unwrap().remove("Receiver Rois");
    std::fs::write(&data_raw, j.to_string()).unwrap();
    fails(
        &find_args(&ped_raw, &data_raw, &["--out", s(&d.join("x.clust"))]),
        "run_d0_f0_0.raw: 7840 bytes is not a whole number of 1840-byte records",
    );
    assert!(!d.join("x.clust").exists());
}

/// `gen --raw --roi` writes acquisitions as a receiver with `rx_roi` does (here in master
/// format 8.0): `find` reads them as the ROI, and finds the clusters `find` finds in the
/// generated frames cropped to the ROI, in detector coordinates (moved by the ROI's corner).
#[test]
fn gen_raw_with_a_roi_then_find() {
    use cluda::io::raw::Roi;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gen_args = |out: &Path, raw: bool| {
        let mut a = vec![
            "gen".to_string(),
            "--out".into(),
            s(out).into(),
            "--frames".into(),
            "9".into(),
            "--pedestal-frames".into(),
            "20".into(),
            "--rows".into(),
            "16".into(),
            "--cols".into(),
            "20".into(),
        ];
        if raw {
            for x in ["--raw", "--roi", "2,13,3,10", "--raw-version", "8.0"] {
                a.push(x.into());
            }
        }
        a
    };
    let (raw_dir, npy_dir) = (d.join("raw"), d.join("npy"));
    let args = gen_args(&raw_dir, true);
    let o = CLUDA.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(
            "data_master_0.json (9 frames of 16 x 20 uint16, raw, receiver ROI [2, 13, 3, 10]: 8 x 12 stored)"
        ),
        "{}",
        text(&o.stdout)
    );
    let master = std::fs::read_to_string(raw_dir.join("data_master_0.json")).unwrap();
    assert!(master.contains("\"Version\": 8.0"), "{master}");
    assert!(master.contains("\"Receiver Rois\": ["), "{master}");
    assert!(master.contains("\"Image Size\": 640,"), "{master}");
    let args = gen_args(&npy_dir, false);
    let o = CLUDA.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let roi = Roi {
        xmin: 2,
        xmax: 13,
        ymin: 3,
        ymax: 10,
    };
    let crop_to = |from: &str, to: &str| {
        let a = read_u16_frames(&npy_dir.join(from)).unwrap();
        let n = a.shape[0];
        let c = crop_frames(&a.data, 20, 16, roi);
        npy::write_u16_3d(&npy_dir.join(to), n, 8, 12, &c).unwrap();
        npy_dir.join(to)
    };
    let (ped_npy, data_npy) = (
        crop_to("pedestal.npy", "p8.npy"),
        crop_to("data.npy", "d8.npy"),
    );
    let (raw_out, npy_out) = (d.join("r.clust"), d.join("n.clust"));
    for (p, x, out) in [
        (
            raw_dir.join("pedestal_master_0.json"),
            raw_dir.join("data_master_0.json"),
            &raw_out,
        ),
        (ped_npy, data_npy, &npy_out),
    ] {
        let o = CLUDA.run(&find_args(&p, &x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        assert_eq!(
            value(&parse_summary(text(&o.stdout).trim_end()), "frames"),
            "9"
        );
    }
    let (nr, br) = read_cluster_file(&raw_out, ClusterSize::S3).unwrap();
    let (nn, bn) = read_cluster_file(&npy_out, ClusterSize::S3).unwrap();
    // Raw frame numbers count from 1, .npy frames from 0.
    assert_eq!(nr, (1..=9).collect::<Vec<i32>>());
    assert_eq!(nn, (0..9).collect::<Vec<i32>>());
    assert_eq!(br.offsets(), bn.offsets());
    let moved: Vec<u32> = bn
        .words()
        .chunks_exact(10)
        .flat_map(|r| {
            let (x, y) = (r[0] & 0xFFFF, r[0] >> 16);
            std::iter::once((x + 2) | (y + 3) << 16).chain(r[1..].iter().copied())
        })
        .collect();
    assert_eq!(br.words(), &moved[..]);
    fails(
        &[
            "gen",
            "--out",
            s(&d.join("bad")),
            "--raw",
            "--rows",
            "16",
            "--cols",
            "20",
            "--roi",
            "0,20,0,3",
        ],
        "[0, 20, 0, 3] (XMIN, XMAX, YMIN, YMAX) does not lie inside the 16 x 20 frames",
    );
}

/// PNG signature and IHDR size.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn plot_writes_four_pngs_for_find_and_demo() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let names = [
        "spectrum.png",
        "hitmap.png",
        "pedestal_mean.png",
        "pedestal_noise.png",
    ];
    for (i, args) in [
        find_args(
            &ped,
            &data,
            &[
                "--device",
                "cpu",
                "--spectrum-range",
                "-100:1500",
                "--spectrum-bins",
                "80",
                "--spectrum-log",
            ],
        ),
        vec![
            "demo",
            "--frames",
            "5",
            "--pedestal-frames",
            "10",
            "--rows",
            "32",
            "--cols",
            "32",
        ],
    ]
    .into_iter()
    .enumerate()
    {
        let plots = d.join(format!("plots{i}"));
        let mut args = args;
        args.extend(["--plot", s(&plots)]);
        let o = CLUDA.run(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let err = text(&o.stderr);
        for n in names {
            let p = plots.join(n);
            assert!(err.contains(&format!("wrote {}", p.display())), "{err}");
            assert_eq!(png_size(&std::fs::read(&p).unwrap()), cluda::plot::PNG_SIZE);
        }
    }
    // Bad spectrum options are refused by name before any work.
    for (flag, value, name) in [
        ("--spectrum-bins", "0", "spectrum-bins"),
        ("--spectrum-bins", "100001", "spectrum-bins"),
        ("--spectrum-range", "5:5", "spectrum-range"),
        ("--spectrum-range", "-1:nan", "spectrum-range"),
    ] {
        let o = CLUDA.run(&["demo", "--frames", "1", flag, value]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{flag} {value}: {err}");
        assert!(err.contains(name) && !err.contains("panicked"), "{err}");
    }
}
