//! The `cluda` binary end to end: gen -> find -> cluster file equal to the library's CPU
//! finder, the summary line's exact form, demo, and a named error with exit code 1 (never a
//! panic) for every kind of bad input.
//!
//! One module a command: [`find`] (with `gen` and `demo`), [`matching`], [`raw`] (raw
//! acquisitions), [`plots`].

use std::path::PathBuf;

use cluda::io::npy::{NpyArray, read_u16_frames};
use support::cli::Cli;

mod find;
mod matching;
mod plots;
mod raw;

/// Small generated inputs in `dir` ([`Cli::gen_small`]): their paths and their frames.
fn small_frames(dir: &std::path::Path) -> (PathBuf, PathBuf, NpyArray<u16>, NpyArray<u16>) {
    let (ped, data) = CLUDA.gen_small(dir);
    let (pa, da) = (read_u16_frames(&ped), read_u16_frames(&data));
    (ped, data, pa.unwrap(), da.unwrap())
}

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

/// Whether `v` is a non-empty run of decimal digits.
fn digits(v: &str) -> bool {
    !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit())
}

/// Fails the test unless the value `v` of the summary `line` is a decimal with digits before
/// its point and `n` after it.
#[track_caller]
fn assert_decimals(v: &str, n: usize, line: &str) {
    let (a, b) = v
        .split_once('.')
        .unwrap_or_else(|| panic!("`{v}` in `{line}`"));
    assert!(digits(a) && digits(b) && b.len() == n, "{line}");
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
    let decimals = |v: &str, n: usize| assert_decimals(v, n, line);
    for (k, v) in &pairs {
        match k.as_str() {
            "frames" | "clusters" => assert!(digits(v), "{line}"),
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

/// Runs cluda expecting failure: exit code 1, `error: ` and `want` on stderr, no panic.
fn fails(args: &[&str], want: &str) {
    CLUDA.fails(args, &[want]);
}
