//! `cluda find --data A B C --out-dir D`: many acquisitions in one command. Each output is
//! byte-identical to running its input alone; a failing input in the middle (missing, of
//! another shape, truncated) is named and the others still run; `--carry-pedestal` treats
//! the inputs as one stream of frames.

use std::path::{Path, PathBuf};

use cluda::io::npy::{read_u16_frames, write_u16_3d};
use cluda::io::read_cluster_file;
use support::cli::{Cli, find_args, s, text};

const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// `cluda gen` into `dir` (40 x 48 frames).
fn generate(dir: &Path, frames: usize, seed: u64, raw: bool) {
    let (f, sd) = (frames.to_string(), seed.to_string());
    let mut args = vec![
        "gen",
        "--out",
        s(dir),
        "--frames",
        &f,
        "--pedestal-frames",
        "50",
        "--rows",
        "40",
        "--cols",
        "48",
        "--seed",
        &sd,
    ];
    if raw {
        args.push("--raw");
    }
    CLUDA.ok(&args);
}

/// The cluster file of `data` found alone.
fn alone(pedestal: &Path, data: &Path, out: &Path, extra: &[&str]) -> Vec<u8> {
    // The single runs share one output file, replaced on purpose.
    let mut args = find_args(
        pedestal,
        data,
        &["--out", s(out), "--overwrite", "--device", "cpu"],
    );
    args.extend_from_slice(extra);
    CLUDA.ok(&args);
    std::fs::read(out).expect("single-run output")
}

#[test]
fn many_inputs_each_equal_to_its_single_run_and_a_failure_stays_with_its_input() {
    let t = tempfile::tempdir().expect("dir");
    let d = t.path();
    generate(&d.join("a"), 30, 1, false);
    generate(&d.join("b"), 25, 2, true);
    generate(&d.join("c"), 20, 3, false);
    // Another shape, and a .npy cut short.
    CLUDA.ok(&[
        "gen",
        "--out",
        s(&d.join("w")),
        "--frames",
        "5",
        "--pedestal-frames",
        "5",
        "--rows",
        "30",
        "--cols",
        "48",
    ]);
    let trunc = d.join("trunc.npy");
    let bytes = std::fs::read(d.join("c/data.npy")).expect("read");
    std::fs::write(&trunc, &bytes[..bytes.len() - 1000]).expect("write");
    let ped = d.join("a/pedestal.npy");
    let inputs: Vec<PathBuf> = vec![
        d.join("a/data.npy"),
        d.join("missing.npy"),
        d.join("b/data_master_0.json"),
        d.join("w/data.npy"),
        trunc.clone(),
        d.join("c/data.npy"),
    ];
    for device in ["cpu", "auto"] {
        let out_dir = d.join(format!("out-{device}"));
        let mut args = vec!["find", "--pedestal", s(&ped), "--data"];
        args.extend(inputs.iter().map(|p| s(p)));
        args.extend(["--out-dir", s(&out_dir), "--device", device]);
        let out = CLUDA.run(&args);
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        for bad in ["missing.npy", "w/data.npy", "trunc.npy"] {
            assert!(
                stdout
                    .lines()
                    .any(|l| l.starts_with("input=") && l.contains(bad) && l.ends_with(" failed")),
                "{bad}: {stdout}"
            );
            assert!(stderr.contains(bad), "{bad} named on stderr: {stderr}");
        }
        assert!(
            stdout
                .lines()
                .last()
                .is_some_and(|l| l.starts_with("inputs=6 failed=3 ")),
            "{stdout}"
        );
        // Named after the inputs, never colliding (two inputs are called `data`).
        let written = [
            (d.join("a/data.npy"), out_dir.join("data.clust")),
            (
                d.join("b/data_master_0.json"),
                out_dir.join("data_master_0.clust"),
            ),
            (d.join("c/data.npy"), out_dir.join("data_2.clust")),
        ];
        for (input, file) in &written {
            let got = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let want = alone(&ped, input, &d.join("single.clust"), &[]);
            assert!(
                got == want,
                "{} differs from its single run",
                file.display()
            );
        }
        let mut names: Vec<String> = std::fs::read_dir(&out_dir)
            .expect("out dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["data.clust", "data_2.clust", "data_master_0.clust"],
            "no other file"
        );
    }
    // A second run into the same directory never replaces the first one's files.
    let out_dir = d.join("out-cpu");
    CLUDA.ok(&find_args(
        &ped,
        &d.join("a/data.npy"),
        &["--out-dir", s(&out_dir), "--device", "cpu"],
    ));
    assert!(out_dir.join("data_3.clust").exists());
}

#[test]
fn carry_pedestal_is_one_stream_of_frames() {
    let t = tempfile::tempdir().expect("dir");
    let d = t.path();
    generate(&d.join("a"), 24, 4, false);
    let ped = d.join("a/pedestal.npy");
    let all = d.join("a/data.npy");
    let frames = read_u16_frames(&all).expect("read");
    let (n, rows, cols) = (frames.shape[0], frames.shape[1], frames.shape[2]);
    let px = rows * cols;
    let data = frames.data.clone();
    let (p1, p2) = (d.join("first.npy"), d.join("second.npy"));
    write_u16_3d(&p1, 10, rows, cols, &data[..10 * px]).expect("write");
    write_u16_3d(&p2, n - 10, rows, cols, &data[10 * px..]).expect("write");
    let out_dir = d.join("out");
    CLUDA.ok(&find_args(
        &ped,
        &p1,
        &[
            s(&p2),
            "--out-dir",
            s(&out_dir),
            "--carry-pedestal",
            "--device",
            "cpu",
            "--cluster",
            "5",
        ],
    ));
    let whole = alone(&ped, &all, &d.join("whole.clust"), &["--cluster", "5"]);
    std::fs::write(d.join("whole2.clust"), &whole).expect("write");
    let read = |p: &Path, shift: i64| -> Vec<(i64, Vec<u32>)> {
        let (numbers, batch) = read_cluster_file(p, cluda::ClusterSize::S5).expect("read");
        numbers
            .iter()
            .enumerate()
            .map(|(i, &n)| (i64::from(n) + shift, batch.frame(i).words().to_vec()))
            .collect()
    };
    let mut joined = read(&out_dir.join("first.clust"), 0);
    joined.extend(read(&out_dir.join("second.clust"), 10));
    assert!(
        joined == read(&d.join("whole2.clust"), 0),
        "the two halves carried on equal the whole"
    );
    // Without carrying, the second half starts from the pedestal afresh: a different result
    // than the whole stream's frames 10.. (the pedestal moved during the first half).
    let fresh = d.join("fresh");
    CLUDA.ok(&find_args(
        &ped,
        &p1,
        &[
            s(&p2),
            "--out-dir",
            s(&fresh),
            "--device",
            "cpu",
            "--cluster",
            "5",
        ],
    ));
    let alone2 = alone(&ped, &p2, &d.join("alone2.clust"), &["--cluster", "5"]);
    assert_eq!(
        std::fs::read(fresh.join("second.clust")).expect("read"),
        alone2
    );
}
