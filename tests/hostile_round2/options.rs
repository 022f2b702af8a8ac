//! Every numeric option driven with extreme values (and random ones), negative values,
//! durations that overflow, waits that must see signals, a spectrum range that overflows.

use std::path::Path;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use support::cli::{find_args, s, text};
use support::stream::spawn_scratch;

use crate::CLUDA;

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
    for (base, options) in [
        (
            &find,
            "threads read-threads nsigma spectrum-bins spectrum-range",
        ),
        (
            &stream,
            "threads nsigma dark-acquisitions pedestal-frames acquisitions queue chunk \
             idle-end plot-every slow-sink-us",
        ),
        (
            &replay,
            "rate acquisitions first-frame file-index hwm subscribers wait",
        ),
        (&gen_, "frames pedestal-frames rows cols seed"),
        (
            &demo,
            "frames pedestal-frames rows cols seed threads spectrum-bins",
        ),
    ] {
        for o in options.split_whitespace() {
            all.push((base.clone(), o));
        }
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
    let (dir, _, data) = CLUDA.small_set();
    let d = dir.path();
    for rate in ["1e-300", "5e-20", "0", "1e8"] {
        let args = [
            "replay",
            "--zmq",
            "tcp://127.0.0.1:1",
            "--data",
            s(&data),
            "--rate",
            rate,
        ];
        CLUDA.fails(&args, &["--rate", "0.001"]);
    }
    let (out_dir, plots) = (d.join("o"), d.join("p"));
    for every in ["1e300", "1e20", "0.01", "nan"] {
        let args = [
            "stream",
            "--zmq",
            "tcp://127.0.0.1:1",
            "--out-dir",
            s(&out_dir),
            "--plot",
            s(&plots),
            "--plot-every",
            every,
        ];
        CLUDA.fails(&args, &["--plot-every must be between 0.1 and 86400"]);
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
    let (_dir, _, data) = CLUDA.small_set();
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
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    for range in ["-1e308:1e308", "0:1e300", "-1e13:0", "0:1e-9"] {
        let t = Instant::now();
        let o = CLUDA.run(&find_args(
            &ped,
            &data,
            &[
                "--plot",
                s(&d.join("pl")),
                &format!("--spectrum-range={range}"),
            ],
        ));
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
