//! `cluda match`: equal to the library on the CPU, its default version, its errors.

use std::path::Path;

use cluda::io::npy::{self, write_array};
use support::cli::{match_args, s, text};

use crate::*;

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
    for (k, v) in &pairs {
        match k.as_str() {
            "lhs" | "rhs" | "recomputed" => assert!(digits(v), "{line}"),
            "seconds" | "ms" => assert_decimals(v, 3, line),
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

    let out = CLUDA.run(&match_args(
        &pl,
        &pr,
        &["--version", "cpu", "--out", s(&po)],
    ));
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
