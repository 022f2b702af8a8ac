//! The second hostile round (issue 25): every numeric option driven with extreme values,
//! waits that must see signals, outputs that collide with each other or with an existing
//! result, and a stream that must survive one bad message or file-system failure. Every case
//! checks the error names the option or file, the exit code, that inputs are unchanged, that
//! no partial output is left under a final name, and that it ends in bounded time.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use support::cli::{Cli, s, text};
use support::files::{listing, sparse_npy, sum};
use support::stream::{fails_within, spawn_scratch};

/// The binary under test.
const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// Runs cluda (at most 30 s), expecting a user error naming every one of `want`; returns the
/// message.
#[track_caller]
fn fails(args: &[&str], want: &[&str]) -> String {
    fails_within(Duration::from_secs(30), args, want)
}

/// Values no numeric option should ever panic or hang on.
const EXTREMES: [&str; 16] = [
    "0",
    "-1",
    "-0",
    "1e-300",
    "5e-20",
    "4.9e-324",
    "1e20",
    "1e300",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "18446744073709551616",
    "340282366920938463463374607431768211457",
    "0.5",
    "x",
];

/// Every numeric option of every subcommand, with arguments that make an otherwise valid run
/// fail fast (a missing input, a bad endpoint, an output that is a file), so that an accepted
/// value never starts real work.
fn numeric_options(dir: &Path) -> Vec<(Vec<String>, &'static str)> {
    let missing = s(&dir.join("missing.npy")).to_string();
    let file = dir.join("a_file");
    std::fs::write(&file, b"x").expect("write");
    let file = s(&file).to_string();
    let out_dir = s(&dir.join("streamed")).to_string();
    let find: Vec<String> = ["find", "--pedestal", &missing, "--data", &missing]
        .map(String::from)
        .to_vec();
    let stream: Vec<String> = ["stream", "--zmq", "bogus://x", "--out-dir", &out_dir]
        .map(String::from)
        .to_vec();
    let replay: Vec<String> = ["replay", "--zmq", "bogus://x", "--data", &missing]
        .map(String::from)
        .to_vec();
    let gen_: Vec<String> = ["gen", "--out", &file].map(String::from).to_vec();
    let demo: Vec<String> = ["demo", "--plot", &file].map(String::from).to_vec();
    let mut all = Vec::new();
    for o in [
        "threads",
        "read-threads",
        "nsigma",
        "spectrum-bins",
        "spectrum-range",
    ] {
        all.push((find.clone(), o));
    }
    for o in [
        "threads",
        "nsigma",
        "dark-acquisitions",
        "pedestal-frames",
        "acquisitions",
        "queue",
        "chunk",
        "idle-end",
        "plot-every",
        "slow-sink-us",
    ] {
        all.push((stream.clone(), o));
    }
    for o in [
        "rate",
        "acquisitions",
        "first-frame",
        "file-index",
        "hwm",
        "subscribers",
        "wait",
    ] {
        all.push((replay.clone(), o));
    }
    for o in ["frames", "pedestal-frames", "rows", "cols", "seed"] {
        all.push((gen_.clone(), o));
    }
    for o in [
        "frames",
        "pedestal-frames",
        "rows",
        "cols",
        "seed",
        "threads",
        "spectrum-bins",
    ] {
        all.push((demo.clone(), o));
    }
    all
}

/// Runs one numeric option with one value: a clear error (exit 1; from the command-line
/// parser, naming the option), never a panic or an abort, within 20 s.
fn drive(base: &[String], option: &str, value: &str) {
    let flag = format!("--{option}");
    let value = if option == "spectrum-range" {
        format!("{value}:{value}1")
    } else {
        value.to_string()
    };
    let mut args: Vec<&str> = base.iter().map(String::as_str).collect();
    // `--opt=value`, as a user would write a negative value too.
    let joined = format!("{flag}={value}");
    args.push(&joined);
    let o = spawn_scratch(&args).wait(Duration::from_secs(20));
    let err = text(&o.stderr);
    let code = o.status.code();
    assert_eq!(
        code,
        Some(1),
        "{args:?}: exit {:?} (a panic is 101, an abort a signal): {err}",
        o.status
    );
    assert!(
        !err.contains("panicked") && !err.contains("memory allocation"),
        "{args:?}: {err}"
    );
    if err.contains("invalid value") {
        assert!(
            err.contains(&flag),
            "{args:?}: the option is not named: {err}"
        );
        assert!(
            !err.contains("unexpected argument"),
            "{args:?}: a value taken for an option: {err}"
        );
    }
}

#[test]
fn every_numeric_option_survives_extreme_values() {
    let dir = tempfile::tempdir().expect("dir");
    for (base, option) in numeric_options(dir.path()) {
        for v in EXTREMES {
            drive(&base, option, v);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random floats (any bit pattern: subnormals, NaN payloads, infinities) and random
    /// 128-bit integers, for a random numeric option.
    #[test]
    fn random_values_for_numeric_options(pick in 0usize..34, bits in any::<u64>(), int in any::<i128>(), as_float in any::<bool>()) {
        let dir = tempfile::tempdir().expect("dir");
        let options = numeric_options(dir.path());
        let (base, option) = &options[pick % options.len()];
        let value = if as_float {
            format!("{:e}", f64::from_bits(bits))
        } else {
            int.to_string()
        };
        drive(base, option, &value);
    }
}

/// Negative values are refused with the option's name, not as an unknown argument.
#[test]
fn negative_values_name_their_option() {
    for (args, want) in [
        (
            vec!["gen", "--out", "g", "--frames", "-1"],
            "--frames must be at least 0, got -1",
        ),
        (
            vec![
                "stream",
                "--zmq",
                "tcp://127.0.0.1:1",
                "--out-dir",
                "o",
                "--queue",
                "-5",
            ],
            "--queue must be between 1 and 1000000, got -5",
        ),
        (
            vec![
                "replay",
                "--zmq",
                "tcp://*:1",
                "--data",
                "d.npy",
                "--hwm",
                "-3",
            ],
            "--hwm must be between 0 and 2147483647",
        ),
        (
            vec!["find", "--pedestal", "p", "--data", "d", "--threads", "-1"],
            "--threads",
        ),
    ] {
        let o = CLUDA.run(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{err}");
    }
}

/// The durations of the issue: a rate whose period overflows a Duration and a refresh
/// period beyond one: errors naming the option (they panicked, exit 101).
#[test]
fn durations_from_huge_or_tiny_floats_are_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (_, data) = CLUDA.gen_small(d);
    for rate in ["1e-300", "5e-20", "0", "1e8"] {
        let o = CLUDA.run(&[
            "replay",
            "--zmq",
            "tcp://127.0.0.1:1",
            "--data",
            s(&data),
            "--rate",
            rate,
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("--rate") && err.contains("0.001"), "{err}");
    }
    for every in ["1e300", "1e20", "0.01", "nan"] {
        let o = CLUDA.run(&[
            "stream",
            "--zmq",
            "tcp://127.0.0.1:1",
            "--out-dir",
            s(&d.join("o")),
            "--plot",
            s(&d.join("p")),
            "--plot-every",
            every,
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("--plot-every must be between 0.1 and 86400"),
            "{err}"
        );
    }
    // The library refuses the same rates.
    for rate in [1e-300, 5e-20, f64::NAN] {
        let e = cluda::stream::replay::period_of(rate).expect_err("refused");
        assert!(e.to_string().contains("`rate`"), "{e}");
    }
}

/// `replay --rate 0.05` waits 20 s between frames and `--wait 86400` a day for subscribers:
/// a signal ends either within a second.
#[test]
fn replay_waits_end_on_a_signal() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (_, data) = CLUDA.gen_small(d);
    let port = support::stream::free_port();
    let ep = format!("tcp://127.0.0.1:{port}");
    for (extra, sig, code) in [
        (
            vec!["--rate", "0.05", "--subscribers", "0"],
            libc::SIGINT,
            130,
        ),
        (
            vec!["--wait", "86400", "--subscribers", "1"],
            libc::SIGTERM,
            143,
        ),
    ] {
        let mut args = vec!["replay", "--zmq", &ep, "--data", s(&data)];
        args.extend_from_slice(&extra);
        let child = spawn_scratch(&args);
        std::thread::sleep(Duration::from_millis(700));
        let t = Instant::now();
        assert!(child.signal(sig), "kill");
        let o = child.wait(Duration::from_secs(10));
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{extra:?}: {:?} after the signal",
            t.elapsed()
        );
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {err}");
        assert!(err.contains("interrupted by"), "{err}");
    }
}

/// `--spectrum-range=-1e308:1e308` made MAX - MIN overflow and the plot spin forever.
#[test]
fn an_overflowing_spectrum_range_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    for range in ["-1e308:1e308", "0:1e300", "-1e13:0", "0:1e-9"] {
        let t = Instant::now();
        let o = CLUDA.run(&[
            "find",
            "--pedestal",
            s(&ped),
            "--data",
            s(&data),
            "--plot",
            s(&d.join("pl")),
            &format!("--spectrum-range={range}"),
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{range}: {err}");
        assert!(err.contains("spectrum-range"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    assert!(!d.join("pl").exists());
    let e = cluda::plot::Histogram::new(-1e308, 1e308, 10).expect_err("overflowing width");
    assert!(e.to_string().contains("histogram"), "{e}");
    assert!(
        cluda::plot::SpectrumOptions {
            range: Some((-1e308, 1e308)),
            ..Default::default()
        }
        .validate()
        .is_err()
    );
}

/// `--out` into the `--plot` directory under a plot's name, `--out x/`, and an existing
/// result without `--overwrite`: refused before any work, nothing written, inputs kept; with
/// `--overwrite` the result is replaced.
#[test]
fn outputs_never_collide_or_silently_replace() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let sums = (sum(&ped), sum(&data));
    let pl = d.join("pl");
    std::fs::create_dir(&pl).expect("mkdir");
    let base = [
        "find",
        "--pedestal",
        s(&ped),
        "--data",
        s(&data),
        "--device",
        "cpu",
    ];
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
    let args = [
        "match",
        "--lhs",
        s(&lhs),
        "--rhs",
        s(&lhs),
        "--version",
        "cpu",
        "--out",
        s(&m),
    ];
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
        &[
            "match",
            "--lhs",
            s(&lhs),
            "--rhs",
            s(&lhs),
            "--version",
            "cpu",
            "--out",
            &format!("{}/", s(&d.join("y"))),
        ],
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

/// One acquisition with frame numbers running past the cluster file's i32 and a 300-character
/// `fname`: the frames above i32::MAX are reported and skipped, the rest written under a
/// shortened name, and the stream goes on (it stopped with exit 1 and lost the file).
#[test]
fn a_stream_survives_frame_numbers_above_i32_and_long_names() {
    use support::stream::*;
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (16, 24);
    let dark = write_frames(d, "dark", shape, 0, 40, false);
    let data = write_frames(d, "data", shape, 40, 20, true);
    let sums = (sum(&dark), sum(&data));
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "stream",
        port,
        &out,
        &[
            "--pedestal",
            s(&dark),
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--on-full",
            "block",
        ],
    );
    let fname = "y".repeat(300);
    spawn_replay(
        d,
        "replay",
        port,
        &[
            "--data",
            s(&data),
            "--no-drop",
            "--first-frame",
            "2147483640",
            "--fname",
            &fname,
        ],
    )
    .wait_ok(Duration::from_secs(60));
    let done = stream.wait_ok(Duration::from_secs(60));
    let sums_line = summaries(&done.stdout);
    assert_eq!(sums_line.len(), 1, "{}", done.stdout);
    assert_eq!(num(&sums_line[0], "frames"), 8, "{}", done.stdout);
    assert_eq!(num(&sums_line[0], "malformed"), 12, "{}", done.stdout);
    assert!(
        done.stderr
            .contains("frame 2147483648: its frame number is above 2147483647"),
        "{}",
        done.stderr
    );
    let name = format!(
        "{}_0.clust",
        "y".repeat(cluda::stream::acquisition::MAX_PREFIX)
    );
    assert_eq!(listing(&out), std::slice::from_ref(&name));
    let (numbers, _) =
        cluda::io::read_cluster_file(&out.join(&name), cluda::ClusterSize::S3).expect("file");
    assert_eq!(numbers, (2_147_483_640..=i32::MAX).collect::<Vec<i32>>());
    assert_eq!((sum(&dark), sum(&data)), sums);
}

/// A message part above the largest size the stream accepts (it follows the frame size of the
/// pedestal): libzmq drops the connection, which is reported naming the limit, and the next
/// acquisition after the reconnection is written (before, nothing was said and the rest of the
/// acquisition never arrived).
#[test]
fn an_oversized_message_is_reported_and_the_stream_goes_on() {
    use cluda::generate::{GenConfig, Generator};
    use cluda::stream::{Publisher, ZmqHeader};
    use support::stream::*;
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (16, 24);
    let dark = write_frames(d, "dark", shape, 0, 40, false);
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "stream",
        port,
        &out,
        &[
            "--pedestal",
            s(&dark),
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--idle-end",
            "0",
        ],
    );
    let mut p = Publisher::bind(&loopback(port), 1000, true).expect("bind");
    assert_eq!(
        p.wait_for_subscribers(1, Duration::from_secs(30))
            .expect("wait"),
        1
    );
    // Well above the limit of 1 MiB for 16 x 24 frames.
    let huge = vec![0u8; 3 << 20];
    let h = ZmqHeader::frame(16, 24, 1);
    p.send_parts(&[h.to_json().as_bytes(), &huge])
        .expect("send");
    // libzmq reconnects by itself (reported); the new connection's subscription reaches the
    // publisher while it reads subscriptions.
    let t = Instant::now();
    while !std::fs::read_to_string(&stream.stderr)
        .unwrap_or_default()
        .contains("reconnected to")
    {
        assert!(t.elapsed() < Duration::from_secs(30), "no reconnection");
        std::thread::sleep(Duration::from_millis(20));
    }
    p.wait_for_subscribers(usize::MAX, Duration::from_millis(500))
        .expect("subscriptions");
    let g = Generator::new(GenConfig::new(16, 24, 7)).expect("generator");
    for n in 1..=5u64 {
        let mut h = ZmqHeader::frame(16, 24, n);
        h.frame_index = Some(n - 1);
        let bytes: Vec<u8> = g
            .frames(40 + n, 1, true)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        p.send_frame(&h, &bytes).expect("send");
    }
    p.send_end().expect("end");
    let done = stream.wait_ok(Duration::from_secs(60));
    assert!(
        done.stderr.contains("was dropped") && done.stderr.contains("1048576 bytes"),
        "{}",
        done.stderr
    );
    let sums_line = summaries(&done.stdout);
    assert_eq!(num(&sums_line[0], "frames"), 5, "{}", done.stdout);
    assert_eq!(listing(&out), ["run_0.clust"]);
}

/// `gen` into a directory that holds a set already: refused without `--overwrite` (inputs
/// unchanged), replaced whole with it; `--out` naming a file says "not a directory".
#[test]
fn gen_replaces_a_set_only_when_told() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, data) = CLUDA.gen_small(d);
    let sums = (sum(&ped), sum(&data));
    let again = [
        "gen",
        "--out",
        s(d),
        "--frames",
        "12",
        "--pedestal-frames",
        "20",
        "--rows",
        "24",
        "--cols",
        "36",
        "--seed",
        "9",
    ];
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
    use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let config = RawWriterConfig {
        rows: 24,
        cols: 36,
        detector: DetectorType::Generic16,
        max_frames_per_file: 2,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(d, "data", 0, config).expect("writer");
    for n in 1..=6u64 {
        w.write_frame(n, &vec![n as u16; 24 * 36]).expect("frame");
    }
    w.finish(None).expect("finish");
    assert!(d.join("data_d0_f2_0.raw").exists());
    let args = [
        "gen",
        "--out",
        s(d),
        "--raw",
        "--frames",
        "3",
        "--pedestal-frames",
        "20",
        "--rows",
        "24",
        "--cols",
        "36",
    ];
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
    let o = CLUDA.run(&[
        "find",
        "--pedestal",
        s(&d.join("pedestal_master_0.json")),
        "--data",
        s(&d.join("data_master_0.json")),
        "--device",
        "cpu",
    ]);
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
        (
            vec![
                "gen",
                "--out",
                s(d),
                "--frames",
                "3",
                "--pedestal-frames",
                "3",
            ],
            "8192",
        ),
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
        (
            vec![
                "gen",
                "--out",
                s(d),
                "--frames",
                "1",
                "--pedestal-frames",
                "1",
            ],
            "65536",
        ),
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

/// The library caps CPU threads as the command line does: a million threads is an error
/// naming `threads`, returned at once (Python's `ClusterFinder(..., threads=10**6)` started
/// threads until stopped).
#[test]
fn the_library_caps_thread_counts() {
    let config = cluda::FinderConfig::new(8, 8);
    let t = Instant::now();
    for bad in [0, 1_000_000, usize::MAX] {
        let e = cluda::finder::cpu::CpuFinder::with_threads(config.clone(), bad)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("`threads`"), "{e}");
    }
    assert!(t.elapsed() < Duration::from_secs(1));
    let max = cluda::finder::cpu::max_threads();
    assert!(cluda::finder::cpu::CpuFinder::with_threads(config, max).is_ok());
}

/// Three valid 4000 x 4000 frames streamed under a 6 GB address-space limit: the ring follows
/// the frame size (it was three chunks of 64 frames, 6 GiB, and the stream aborted).
#[test]
fn a_stream_of_large_frames_fits_a_6_gb_address_space() {
    use support::stream::*;
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (4000, 4000);
    let dark = write_frames(d, "dark", shape, 0, 2, false);
    let data = write_frames(d, "data", shape, 2, 3, true);
    let port = free_port();
    let out = d.join("out");
    let script = format!(
        "ulimit -v 6000000 && exec {} stream --zmq {} --out-dir {} --pedestal {} --device cpu --acquisitions 1 --on-full block",
        s(&cluda_bin()),
        loopback(port),
        s(&out),
        s(&dark),
    );
    let child = spawn_sh(d, "stream", &script);
    spawn_replay(d, "replay", port, &["--data", s(&data), "--no-drop"])
        .wait_ok(Duration::from_secs(120));
    let o = child.wait(Duration::from_secs(120));
    let err = std::fs::read_to_string(d.join("stream.err")).expect("stderr");
    assert!(o.status.success(), "{:?}: {err}", o.status);
    let stdout = std::fs::read_to_string(d.join("stream.out")).expect("stdout");
    let sums = summaries(&stdout);
    assert_eq!(num(&sums[0], "frames"), 3, "{stdout}");
    assert_eq!(listing(&out), ["run_0.clust"]);
}

/// A raw master saying `"Total Frames": 0` while its data files hold frames is the error the
/// docs call it (it was read without a word).
#[test]
fn a_raw_master_with_total_frames_0_is_an_error() {
    use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, _) = CLUDA.gen_small(d);
    let config = RawWriterConfig {
        rows: 24,
        cols: 36,
        detector: DetectorType::Generic16,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(d, "z", 0, config).expect("writer");
    for n in 1..=4u64 {
        w.write_frame(n, &vec![4600; 24 * 36]).expect("frame");
    }
    let master = w.finish(None).expect("finish");
    // As an older receiver writes it: no "Frames in File", and here "Total Frames" 0.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&master).expect("master")).expect("json");
    let keys = json.as_object_mut().expect("object");
    assert_eq!(keys["Total Frames"], 4);
    keys.insert("Total Frames".into(), 0.into());
    keys.remove("Frames in File");
    std::fs::write(&master, json.to_string()).expect("write");
    let before = sum(&master);
    fails(
        &[
            "find",
            "--pedestal",
            s(&ped),
            "--data",
            s(&master),
            "--device",
            "cpu",
        ],
        &[
            "z_master_0.json",
            "hold 4 frames, more than the 0",
            "Total Frames",
        ],
    );
    let e = cluda::io::raw::RawReader::open(&master).expect_err("refused");
    assert!(e.to_string().contains("Total Frames"), "{e}");
    assert_eq!(sum(&master), before);
}

/// A `.npy` cut short after it was opened: the error names the file and the frames (it said
/// only "failed to fill whole buffer").
#[test]
fn an_input_truncated_during_the_read_names_file_and_frames() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().join("cut.npy");
    cluda::io::npy::write_u16_3d(&p, 10, 16, 16, &[7; 2560]).expect("write");
    let len = std::fs::metadata(&p).expect("meta").len();
    for threads in [0, 1, 4] {
        let mut f = cluda::io::NpyFrames::open(&p).expect("open");
        // Frames 6.. are gone.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("open for writing")
            .set_len(len - 4 * 512)
            .expect("truncate");
        let e = if threads == 0 {
            let mut buf = Vec::new();
            f.read_into(10, &mut buf).expect_err("short")
        } else {
            let mut buf = vec![0u16; 10 * 256];
            f.fill(&mut buf, threads).expect_err("short")
        };
        let m = e.to_string();
        assert!(
            m.contains("cut.npy") && m.contains("frames ") && m.contains("shrink"),
            "{m}"
        );
        assert!(!m.contains("failed to fill whole buffer"), "{m}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("open")
            .set_len(len)
            .expect("restore");
    }
}

/// A mapped input (`--input map`, and the CPU finder's default `auto`, which maps too) that
/// another program truncates mid-run: an error naming the file (exit 1), never a SIGBUS, and
/// no temporary file left; with several inputs the one truncated fails and the other is
/// still found and written. The truncation lands while the finder reads a chunk (a read of
/// the map caught by the SIGBUS handler) or between chunks (the length check before each);
/// either is an error naming the file. A SIGBUS that is no fault in a map (sent with `kill`)
/// is not taken for one: it still ends the process.
#[test]
fn a_mapped_input_that_shrinks_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, data, small) = (d.join("ped.npy"), d.join("big.npy"), d.join("small.npy"));
    sparse_npy(&ped, "<u2", &[4, 400, 400]);
    for how in ["map", "auto", "several", "kill"] {
        sparse_npy(&data, "<u2", &[200_000, 400, 400]);
        let out = d.join("c.clust");
        let out_dir = d.join("out");
        let mut args = vec![
            "find",
            "--pedestal",
            s(&ped),
            "--device",
            "cpu",
            "--threads",
            "1",
        ];
        let temporary = if how == "several" {
            sparse_npy(&small, "<u2", &[3, 400, 400]);
            args.extend(["--data", s(&data), s(&small), "--out-dir", s(&out_dir)]);
            ".big.clust."
        } else {
            args.extend(["--data", s(&data), "--out", s(&out)]);
            ".c.clust."
        };
        if matches!(how, "map" | "kill") {
            args.extend(["--input", "map"]);
        }
        let child = spawn_scratch(&args);
        let where_tmp = if how == "several" { &out_dir } else { d };
        let t = Instant::now();
        while !(where_tmp.is_dir() && listing(where_tmp).iter().any(|n| n.starts_with(temporary))) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{how}: no temporary file"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        if how == "kill" {
            assert!(child.signal(libc::SIGBUS), "kill");
            let o = child.wait(Duration::from_secs(60));
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                o.status.signal(),
                Some(libc::SIGBUS),
                "{how}: {:?}",
                o.status
            );
            // Killed: nothing could remove its temporary file.
            for n in listing(d) {
                if n.starts_with(temporary) {
                    std::fs::remove_file(d.join(n)).expect("remove");
                }
            }
            continue;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&data)
            .expect("open")
            .set_len(4096)
            .expect("truncate");
        let o = child.wait(Duration::from_secs(60));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{how}: {:?}: {err}", o.status);
        assert!(
            err.contains("big.npy") && err.contains("shrank while it was mapped"),
            "{how}: {err}"
        );
        eprintln!(
            "{how}: caught {}",
            if err.contains("found pages gone") {
                "by the SIGBUS handler"
            } else {
                "by the length check"
            }
        );
        assert!(!out.exists(), "{how}");
        if how == "several" {
            let stdout = text(&o.stdout);
            assert!(stdout.contains("big.npy failed"), "{how}: {stdout}");
            assert!(stdout.contains("inputs=2 failed=1"), "{how}: {stdout}");
            assert_eq!(listing(&out_dir), ["small.clust"], "{how}: {err}");
            let (numbers, _) =
                cluda::io::read_cluster_file(&out_dir.join("small.clust"), cluda::ClusterSize::S3)
                    .expect("the other input's clusters");
            assert_eq!(numbers, [0, 1, 2], "{how}");
            std::fs::remove_dir_all(&out_dir).expect("clean");
            std::fs::remove_file(&small).expect("clean");
        }
        assert_eq!(listing(d), ["big.npy", "ped.npy"], "{how}");
    }
}

/// The library's engine on a mapped input truncated while its frames are found: the read of
/// the map that finds pages gone does not end the process (SIGBUS); the run fails with an
/// error naming the file, and no frame read after the truncation reaches the visitor.
#[test]
fn the_library_survives_a_mapped_input_truncated_while_read() {
    use cluda::engine::{EngineConfig, find_stream};
    use cluda::io::NpyFrames;
    use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames};
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("big.npy");
    let (rows, cols) = (64, 64);
    sparse_npy(&path, "<u2", &[4096, rows as u64, cols as u64]);
    let config = FinderConfig::new(rows, cols)
        .size(ClusterSize::S3)
        .pedestal_frames(4);
    let mut finder = CpuFinder::new(config).expect("finder");
    finder
        .push_pedestal(Frames::new(&vec![0u16; 4 * rows * cols], 4, rows, cols).expect("dark"))
        .expect("pedestal");
    let mut source = NpyFrames::open(&path).expect("open");
    let engine = EngineConfig {
        chunk: 256,
        slots: 3,
        map: true,
    };
    let mut visits = 0u64;
    let e = find_stream(&mut finder, &mut source, engine, &mut |n, _| {
        visits += 1;
        if n == 0 {
            // The reader thread checks the next chunks' length (and queues them) meanwhile:
            // it is a read of the map that finds them gone.
            std::thread::sleep(Duration::from_millis(300));
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open")
                .set_len(128)
                .expect("truncate");
        }
        Ok(())
    })
    .expect_err("a truncated input fails");
    let msg = e.to_string();
    assert!(
        msg.contains("big.npy") && msg.contains("found pages gone"),
        "{msg}"
    );
    // Frame 0's visit truncated the file; every later frame of the chunk was read from the
    // map afterwards (zeros) and is not handed on.
    assert_eq!(visits, 1);
    // The map is gone with the run; the source was at its end (mapped whole).
    assert_eq!(source.remaining(), 0);
}

/// A cluster file that cannot be written (a file-size limit standing for a full disk) loses
/// that acquisition's clusters, which is reported, and the stream goes on: the next, smaller
/// acquisition is written (the stream stopped with exit 1 before). No temporary file is left.
#[test]
fn a_stream_survives_a_file_it_cannot_write() {
    use support::stream::*;
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (48, 64);
    let dark = write_frames(d, "dark", shape, 0, 100, false);
    let big = write_frames(d, "big", shape, 100, 400, true);
    let small = write_frames(d, "small", shape, 500, 1, false);
    let port = free_port();
    let out = d.join("out");
    std::fs::create_dir(&out).expect("out");
    // SIGXFSZ ignored (inherited through exec): a write past the limit fails with EFBIG.
    let script = format!(
        "trap '' XFSZ; ulimit -f 16 && exec {} stream --zmq {} --out-dir {} --pedestal {} --device cpu --acquisitions 2 --on-full block",
        s(&cluda_bin()),
        loopback(port),
        s(&out),
        s(&dark),
    );
    let child = spawn_sh(d, "stream", &script);
    spawn_replay(
        d,
        "replay",
        port,
        &["--data", s(&big), "--data", s(&small), "--no-drop"],
    )
    .wait_ok(Duration::from_secs(120));
    let o = child.wait(Duration::from_secs(120));
    let (stdout, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{:?}: {err}", o.status);
    let sums = summaries(&stdout);
    assert_eq!(sums.len(), 2, "{stdout}\n{err}");
    assert_eq!(sums[0]["file"], "-", "{stdout}");
    assert!(
        err.contains("run_0.clust could not be"),
        "the loss is not reported: {err}"
    );
    assert_eq!(sums[1]["file"], s(&out.join("run_1.clust")), "{stdout}");
    assert_eq!(listing(&out), ["run_1.clust"]);
}
