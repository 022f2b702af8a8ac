//! Outputs that collide with each other or with an existing result: `--out` and `--plot`,
//! an unwritable `--out-dir`, `gen` over a set, two `gen`s at once, a huge generation stopped
//! by a signal.

use std::path::Path;
use std::time::{Duration, Instant};

use support::cli::{find_args, gen_args, match_args, s, text};
use support::files::{listing, sum};
use support::stream::spawn_scratch;

use crate::{CLUDA, fails};
use support::raw::gen_small_config;

/// `--out` into the `--plot` directory under a plot's name, `--out x/`, and an existing
/// result without `--overwrite`: refused before any work, nothing written, inputs kept; with
/// `--overwrite` the result is replaced.
#[test]
fn outputs_never_collide_or_silently_replace() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let sums = (sum(&ped), sum(&data));
    let pl = d.join("pl");
    std::fs::create_dir(&pl).expect("mkdir");
    let base = find_args(&ped, &data, &["--device", "cpu"]);
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a
    }
    for name in ["spectrum.png", "hitmap.png", "pedestal_noise.png"] {
        let out = pl.join(name);
        fails(
            &with(&base, &["--plot", s(&pl), "--out", s(&out)]),
            &["`out`", name, "--plot"],
        );
        // The same through another spelling of the directory.
        let twisted = d.join("pl").join("..").join("pl").join(name);
        fails(
            &with(&base, &["--plot", s(&pl), "--out", s(&twisted)]),
            &["`out`", name],
        );
    }
    assert_eq!(listing(&pl), Vec::<String>::new());
    // A trailing separator names a directory: refused before any work.
    let t = Instant::now();
    fails(
        &with(&base, &["--out", &format!("{}/", s(&d.join("x")))]),
        &["names a directory"],
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(!d.join("x").exists());
    // An existing result is kept unless --overwrite.
    let out = d.join("c.clust");
    std::fs::write(&out, b"an older result").expect("write");
    fails(
        &with(&base, &["--out", s(&out)]),
        &["c.clust exists", "--overwrite"],
    );
    assert_eq!(std::fs::read(&out).expect("read"), b"an older result");
    let o = CLUDA.run(&with(&base, &["--out", s(&out), "--overwrite"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_ne!(std::fs::read(&out).expect("read"), b"an older result");
    // --overwrite without --out is a usage error.
    assert_eq!(
        CLUDA.run(&with(&base, &["--overwrite"])).status.code(),
        Some(1)
    );
    // match likewise.
    let lhs = d.join("lhs.npy");
    cluda::io::npy::write_f32_2d(&lhs, 3, 128, &[0.5; 384]).expect("descriptors");
    let m = d.join("m.npy");
    std::fs::write(&m, b"older matches").expect("write");
    let args = match_args(&lhs, &lhs, &["--version", "cpu", "--out", s(&m)]);
    fails(&args, &["m.npy exists", "--overwrite"]);
    assert_eq!(std::fs::read(&m).expect("read"), b"older matches");
    let mut again = args.to_vec();
    again.push("--overwrite");
    let o = CLUDA.run(&again);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        cluda::io::npy::read_header(&m).expect("matches").shape,
        [3, 2]
    );
    fails(
        &match_args(
            &lhs,
            &lhs,
            &[
                "--version",
                "cpu",
                "--out",
                &format!("{}/", s(&d.join("y"))),
            ],
        ),
        &["names a directory"],
    );
    assert_eq!((sum(&ped), sum(&data)), sums);
    assert!(
        !listing(d).iter().any(|n| n.contains(".tmp")),
        "{:?}",
        listing(d)
    );
}

/// An `--out-dir` no file can be created in is an error at start-up naming it (it was found
/// only when the first acquisition's file was due, and the stream stopped then).
#[test]
fn an_unwritable_out_dir_is_refused_at_start_up() {
    for (dir, want) in [
        ("/proc", "cannot write files in /proc"),
        (
            "/proc/cluda-no-such-dir",
            "cannot create /proc/cluda-no-such-dir",
        ),
    ] {
        let t = Instant::now();
        fails(
            &["stream", "--zmq", "tcp://127.0.0.1:1", "--out-dir", dir],
            &["`out-dir`", want],
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    }
}

/// `gen` into a directory that holds a set already: refused without `--overwrite` (inputs
/// unchanged), replaced whole with it; `--out` naming a file says "not a directory".
#[test]
fn gen_replaces_a_set_only_when_told() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let sums = (sum(&ped), sum(&data));
    let again = gen_args(
        d,
        "--frames 12 --pedestal-frames 20 --rows 24 --cols 36 --seed 9",
    );
    fails(
        &again,
        &["pedestal.npy", "data.npy", "exist", "--overwrite"],
    );
    assert_eq!((sum(&ped), sum(&data)), sums);
    assert_eq!(listing(d), ["data.npy", "pedestal.npy"]);
    let mut told = again.to_vec();
    told.push("--overwrite");
    let o = CLUDA.run(&told);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_ne!((sum(&ped), sum(&data)), sums);
    assert_eq!(listing(d), ["data.npy", "pedestal.npy"]);
    fails(
        &["gen", "--out", s(&ped), "--frames", "2"],
        &["`out`", "pedestal.npy exists and is not a directory"],
    );
}

/// `gen --raw` over an older, longer acquisition of the same name: its extra data files are
/// removed with it (they were read as the new acquisition's continuation).
#[test]
fn gen_raw_over_a_longer_acquisition_leaves_none_of_its_files() {
    use cluda::io::raw::RawWriter;
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let mut config = gen_small_config();
    config.max_frames_per_file = 2;
    let mut w = RawWriter::create(d, "data", 0, config).expect("writer");
    for n in 1..=6u64 {
        w.write_frame(n, &vec![n as u16; 24 * 36]).expect("frame");
    }
    w.finish(None).expect("finish");
    assert!(d.join("data_d0_f2_0.raw").exists());
    let args = gen_args(
        d,
        "--raw --frames 3 --pedestal-frames 20 --rows 24 --cols 36",
    );
    fails(&args, &["data_master_0.json", "--overwrite"]);
    let mut told = args.to_vec();
    told.push("--overwrite");
    let o = CLUDA.run(&told);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        listing(d),
        [
            "data_d0_f0_0.raw",
            "data_master_0.json",
            "pedestal_d0_f0_0.raw",
            "pedestal_master_0.json"
        ]
    );
    let o = CLUDA.run(&find_args(
        &d.join("pedestal_master_0.json"),
        &d.join("data_master_0.json"),
        &["--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("frames=3 "),
        "{}",
        text(&o.stdout)
    );
}

/// Two `gen --overwrite` runs with different seeds into one directory at once: the set left
/// is one run's whole set, never the pedestal of one beside the data of the other.
#[test]
fn two_concurrent_gens_leave_one_whole_set() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let args = |out: &Path, seed: &str| -> Vec<String> {
        [
            "gen",
            s(out),
            "--frames",
            "300",
            "--pedestal-frames",
            "300",
            "--rows",
            "64",
            "--cols",
            "64",
            "--seed",
            seed,
            "--overwrite",
        ]
        .iter()
        .enumerate()
        .flat_map(|(i, a)| {
            if i == 1 {
                vec!["--out".to_string(), a.to_string()]
            } else {
                vec![a.to_string()]
            }
        })
        .collect()
    };
    let run = |a: &[String]| {
        let v: Vec<&str> = a.iter().map(String::as_str).collect();
        spawn_scratch(&v)
    };
    let mut refs = Vec::new();
    for seed in ["1", "2"] {
        let r = d.join(format!("ref{seed}"));
        let o = run(&args(&r, seed)).wait(Duration::from_secs(120));
        assert!(o.status.success(), "{}", text(&o.stderr));
        refs.push((sum(&r.join("pedestal.npy")), sum(&r.join("data.npy"))));
    }
    let shared = d.join("shared");
    for _ in 0..3 {
        let (a, b) = (run(&args(&shared, "1")), run(&args(&shared, "2")));
        for c in [a, b] {
            let o = c.wait(Duration::from_secs(120));
            assert!(o.status.success(), "{}", text(&o.stderr));
        }
        let got = (
            sum(&shared.join("pedestal.npy")),
            sum(&shared.join("data.npy")),
        );
        assert!(refs.contains(&got), "a mixed set");
        assert_eq!(listing(&shared), ["data.npy", "pedestal.npy"]);
    }
}

/// `gen`/`demo` of huge frames (minutes of generating) stop within a second of SIGTERM (or
/// refuse at once when the generator's maps do not fit in memory).
#[test]
fn huge_generation_stops_on_a_signal_within_a_second() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    for (args, sizes) in [
        (gen_args(d, "--frames 3 --pedestal-frames 3"), "8192"),
        (
            vec![
                "demo",
                "--frames",
                "3",
                "--pedestal-frames",
                "3",
                "--device",
                "cpu",
            ],
            "8192",
        ),
        (gen_args(d, "--frames 1 --pedestal-frames 1"), "65536"),
        (
            vec![
                "demo",
                "--frames",
                "1",
                "--pedestal-frames",
                "1",
                "--device",
                "cpu",
            ],
            "65536",
        ),
    ] {
        let mut a = args.clone();
        a.extend_from_slice(&["--rows", sizes, "--cols", sizes]);
        let child = spawn_scratch(&a);
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        // The child may have ended already (a memory error); then the kill fails.
        let sent = child.signal(libc::SIGTERM);
        let o = child.wait(Duration::from_secs(30));
        let err = text(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("memory allocation"),
            "{err}"
        );
        match o.status.code() {
            Some(143) => {
                assert!(sent);
                assert!(
                    t.elapsed() < Duration::from_secs(1),
                    "{a:?}: {:?}",
                    t.elapsed()
                );
                assert!(err.contains("interrupted by SIGTERM"), "{err}");
            }
            Some(1) => assert!(err.contains("bytes of memory"), "{a:?}: {err}"),
            other => panic!("{a:?}: exit {other:?}: {err}"),
        }
        assert!(
            listing(d).iter().all(|n| !n.starts_with(".cluda-stage")),
            "{:?}",
            listing(d)
        );
    }
    assert_eq!(listing(d), Vec::<String>::new());
}
