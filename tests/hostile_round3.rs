//! The third hostile round (issue 32): a final name that appears while a run writes (another
//! program creates it between the run's start-up checks and its final rename) is never
//! replaced, for every output: `find --out`, `find --out-dir`, `match --out`, the stream's
//! files and the plots. `--out`/`match --out` then fail naming the file; `--out-dir` and the
//! stream take the next free suffix. Plots already there are not replaced without
//! `--overwrite`, which now works with `--plot` alone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::cli::match_args;
use support::files::{listing, no_temporaries, sparse_npy, wait_for};
use support::stream::{Done, Proc, s, spawn, spawn_replay, spawn_scratch, spawn_stream, summaries};

/// Waits until `p` writes (a name starting with `prefix` appears in `dir`: its temporary
/// file), then pauses it (SIGSTOP), writes `theirs` to `file` and resumes it (SIGCONT): another
/// program's file appearing under a name the run may take, while the run is between its
/// start-up checks and its final rename.
fn theirs_appears(p: &Proc, (dir, prefix): (&Path, &str), file: &Path) {
    wait_for(dir, prefix);
    assert!(p.signal(libc::SIGSTOP), "SIGSTOP");
    std::fs::write(file, b"theirs").expect("write");
    assert!(p.signal(libc::SIGCONT), "SIGCONT");
}

/// Fails the test unless the run `o` failed naming every one of `want` ([`failed_naming`]) and
/// `file` still holds what another program wrote there ([`kept_theirs`]).
#[track_caller]
fn failed_keeping_theirs(o: &Done, want: &[&str], file: &Path) {
    failed_naming(o, want);
    kept_theirs(file);
}

/// Fails the test unless `file` still holds what another program wrote there (`theirs`).
#[track_caller]
fn kept_theirs(file: &Path) {
    assert_eq!(std::fs::read(file).expect("read"), b"theirs");
}

/// A temporary directory with a pedestal and a data input of `frames` frames that take
/// `cluda find --device cpu --threads 1` a few seconds.
fn slow_inputs(frames: u64) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let (ped, data) = (dir.path().join("ped.npy"), dir.path().join("a.npy"));
    sparse_npy(&ped, "<u2", &[4, 400, 400]);
    sparse_npy(&data, "<u2", &[frames, 400, 400]);
    (dir, ped, data)
}

/// `find --pedestal ped --data data... --device cpu --threads 1 extra...`.
fn find_one_thread<'a>(ped: &'a Path, data: &[&'a Path], extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["find", "--pedestal", s(ped), "--data"];
    a.extend(data.iter().map(|p| s(p)));
    a.extend(["--device", "cpu", "--threads", "1"]);
    a.extend_from_slice(extra);
    a
}

/// Runs the command `args` to its end while another program puts its file at `file` once the
/// run writes in `dir` ([`theirs_appears`]).
fn racing_theirs(args: &[&str], (dir, prefix): (&Path, &str), file: &Path) -> Done {
    let p = spawn_scratch(args);
    theirs_appears(&p, (dir, prefix), file);
    p.wait(Duration::from_secs(180))
}

/// A new directory `name` in `parent`.
fn new_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    dir
}

/// The one acquisition summary of a stream that ended `end` with the 10 frames of
/// [`half_frames_stream`] reported incomplete; fails the test otherwise.
#[track_caller]
fn one_summary_ending(o: &Done, end: &str) -> HashMap<String, String> {
    assert!(o.status.success(), "{}", o.stderr);
    let mut sums = summaries(&o.stdout);
    assert_eq!(sums.len(), 1, "{}\n{}", o.stdout, o.stderr);
    let sum = sums.remove(0);
    assert_eq!(sum["end"], end, "{}", o.stdout);
    assert_eq!(support::stream::num(&sum, "incomplete"), 10, "{}", o.stdout);
    sum
}

#[track_caller]
fn failed_naming(o: &Done, want: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    for w in want {
        assert!(o.stderr.contains(w), "`{w}` not in: {}", o.stderr);
    }
}

/// `find --out o.clust`: o.clust created by another program while the run writes its
/// temporary file is kept, the run fails naming it, and no temporary file is left; with
/// `--overwrite` the same race ends with the run's file.
#[test]
fn find_out_does_not_replace_a_name_that_appeared() {
    let (dir, ped, data) = slow_inputs(3000);
    let d = dir.path();
    let out = d.join("o.clust");
    for overwrite in [false, true] {
        let _ = std::fs::remove_file(&out);
        let mut extra = vec!["--out", s(&out)];
        if overwrite {
            extra.push("--overwrite");
        }
        let p = spawn_scratch(&find_one_thread(&ped, &[&data], &extra));
        theirs_appears(&p, (d, ".o.clust."), &out);
        let o = p.wait(Duration::from_secs(120));
        if overwrite {
            assert!(o.status.success(), "{}", o.stderr);
            assert_ne!(std::fs::read(&out).expect("read"), b"theirs");
        } else {
            failed_keeping_theirs(&o, &["o.clust", "--overwrite", "was not written"], &out);
        }
        no_temporaries(d);
    }
}

/// Two `find --out o.clust` at once, without `--overwrite`: one writes the file, the other
/// fails naming it (both exited 0 before, the second replacing the first's file).
#[test]
fn two_finds_on_one_new_output_one_fails() {
    let (dir, ped, data) = slow_inputs(1500);
    let d = dir.path();
    let out = d.join("o.clust");
    let args = find_one_thread(&ped, &[&data], &["--out", s(&out)]);
    let (x, y) = (spawn_scratch(&args), spawn_scratch(&args));
    let (x, y) = (
        x.wait(Duration::from_secs(120)),
        y.wait(Duration::from_secs(120)),
    );
    let ok = [&x, &y].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "x: {}\ny: {}", x.stderr, y.stderr);
    let failed = if x.status.success() { &y } else { &x };
    failed_naming(failed, &["o.clust", "--overwrite"]);
    assert!(out.exists());
    no_temporaries(d);
}

/// `find --data A A --out-dir o`: o/a.clust created while the first input is written is
/// kept, and the run's files take the next free names (reported on their summary lines): the
/// first input's `a_2.clust` (free then), the second's, planned as `a_2.clust`, then
/// `a_2_2.clust`. A dangling symlink at a name counts as a file (it got replaced before).
#[test]
fn out_dir_takes_the_next_free_name_when_one_appeared() {
    let (dir, ped, data) = slow_inputs(2000);
    let d = dir.path();
    let o_dir = new_dir(d, "o");
    std::os::unix::fs::symlink(d.join("nowhere"), o_dir.join("ped.clust")).expect("symlink");
    let args = find_one_thread(&ped, &[&data, &data, &ped], &["--out-dir", s(&o_dir)]);
    let o = racing_theirs(&args, (&o_dir, ".a.clust."), &o_dir.join("a.clust"));
    assert!(o.status.success(), "{}", o.stderr);
    kept_theirs(&o_dir.join("a.clust"));
    let link = std::fs::symlink_metadata(o_dir.join("ped.clust")).expect("the link");
    assert!(link.file_type().is_symlink(), "the symlink was replaced");
    assert!(!d.join("nowhere").exists(), "written through the symlink");
    assert_eq!(
        listing(&o_dir),
        [
            "a.clust",
            "a_2.clust",
            "a_2_2.clust",
            "ped.clust",
            "ped_2.clust"
        ]
    );
    for name in ["a_2.clust", "a_2_2.clust", "ped_2.clust"] {
        assert!(
            o.stdout.contains(&format!("out={}", s(&o_dir.join(name)))),
            "{name} not reported: {}",
            o.stdout
        );
    }
    assert_eq!(
        std::fs::read(o_dir.join("a_2.clust")).expect("a_2"),
        std::fs::read(o_dir.join("a_2_2.clust")).expect("a_2_2")
    );
    no_temporaries(&o_dir);
}

/// `match --out m.npy`: m.npy created while the matches are computed is kept and the command
/// fails naming it.
#[test]
fn match_out_does_not_replace_a_name_that_appeared() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let n = 6000;
    let rows: Vec<f32> = (0..n * 128)
        .map(|i| ((i * 7919) % 1000) as f32 / 1000.0)
        .collect();
    let lhs = d.join("lhs.npy");
    cluda::io::npy::write_f32_2d(&lhs, n, 128, &rows).expect("descriptors");
    let m = d.join("m.npy");
    let p = spawn_scratch(&match_args(
        &lhs,
        &lhs,
        &["--version", "cpu", "--out", s(&m)],
    ));
    // Its start-up checks are done once it says which version runs.
    let start = Instant::now();
    while !std::fs::read_to_string(&p.stderr)
        .unwrap_or_default()
        .contains("note: version=")
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "match did not start"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::write(&m, b"theirs").expect("write");
    let o = p.wait(Duration::from_secs(300));
    failed_keeping_theirs(&o, &["m.npy", "--overwrite"], &m);
    no_temporaries(d);
}

/// `find --plot pl`: a plot file created while the run goes is kept and the run fails naming
/// it; plot files already there are refused at start-up (a symlink too) unless `--overwrite`,
/// which is accepted with `--plot` alone (it required `--out`), for `demo` too.
#[test]
fn plots_are_not_replaced_without_overwrite() {
    let (dir, ped, data) = slow_inputs(2500);
    let d = dir.path();
    let pl = new_dir(d, "pl");
    let args = find_one_thread(&ped, &[&data], &["--plot", s(&pl)]);
    let o = racing_theirs(&args, (&pl, ".cluda-plots."), &pl.join("spectrum.png"));
    failed_keeping_theirs(
        &o,
        &["spectrum.png", "--overwrite"],
        &pl.join("spectrum.png"),
    );
    no_temporaries(&pl);

    // Already there at start-up: refused before any work, a symlink included.
    let (small_ped, small_data) = support_gen(d);
    let q = new_dir(d, "q");
    std::os::unix::fs::symlink(d.join("elsewhere.png"), q.join("hitmap.png")).expect("symlink");
    let base = find_one_thread(&small_ped, &[&small_data], &["--plot", s(&q)]);
    let o = spawn_scratch(&base).wait(Duration::from_secs(60));
    failed_naming(&o, &["hitmap.png", "--overwrite"]);
    assert!(!d.join("elsewhere.png").exists());
    let demo = [
        "demo",
        "--frames",
        "5",
        "--pedestal-frames",
        "20",
        "--rows",
        "24",
        "--cols",
        "36",
        "--device",
        "cpu",
        "--plot",
        s(&q),
    ];
    let o = spawn_scratch(&demo).wait(Duration::from_secs(60));
    failed_naming(&o, &["hitmap.png", "--overwrite"]);
    // --overwrite with --plot alone.
    let mut again = base.clone();
    again.push("--overwrite");
    let o = spawn_scratch(&again).wait(Duration::from_secs(60));
    assert!(o.status.success(), "{}", o.stderr);
    assert!(
        std::fs::symlink_metadata(q.join("hitmap.png"))
            .expect("hitmap")
            .is_file()
    );
    let mut demo = demo.to_vec();
    demo.push("--overwrite");
    let o = spawn_scratch(&demo).wait(Duration::from_secs(60));
    assert!(o.status.success(), "{}", o.stderr);
    // --overwrite still needs something to replace.
    let o = spawn_scratch(&find_one_thread(
        &small_ped,
        &[&small_data],
        &["--overwrite"],
    ))
    .wait(Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{}", o.stderr);
    no_temporaries(&q);
}

/// Small generated inputs (`cluda gen`, 24 x 36) in `d/small`.
fn support_gen(d: &Path) -> (PathBuf, PathBuf) {
    let small = new_dir(d, "small");
    support::cli::Cli(env!("CARGO_BIN_EXE_cluda")).gen_small(&small)
}

/// `stream --out-dir sd`: sd/run_0.clust created while the acquisition is written is kept;
/// the acquisition's file takes the next free name, reported on its summary line. Live plots
/// already in `--plot` are refused at start-up unless `--overwrite`.
#[test]
fn the_stream_takes_the_next_free_name_when_one_appeared() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (48, 64);
    let dark = support::stream::write_frames(d, "dark", shape, 0, 50, false);
    let data = support::stream::write_frames(d, "data", shape, 50, 300, true);
    let sd = d.join("sd");
    let port = support::stream::free_port();
    let stream = spawn_stream(
        d,
        "stream",
        port,
        &sd,
        &[
            "--pedestal",
            s(&dark),
            "--device",
            "cpu",
            "--acquisitions",
            "1",
        ],
    );
    let replay = spawn_replay(
        d,
        "replay",
        port,
        &["--data", s(&data), "--rate", "150", "--no-drop"],
    );
    theirs_appears(&stream, (&sd, ".run_0.clust."), &sd.join("run_0.clust"));
    replay.wait_ok(Duration::from_secs(120));
    let o = stream.wait(Duration::from_secs(120));
    assert!(o.status.success(), "{}", o.stderr);
    let sums = summaries(&o.stdout);
    assert_eq!(sums.len(), 1, "{}", o.stdout);
    let file = PathBuf::from(&sums[0]["file"]);
    assert_ne!(file, sd.join("run_0.clust"), "{}", o.stdout);
    assert!(file.starts_with(&sd) && file.exists(), "{}", o.stdout);
    kept_theirs(&sd.join("run_0.clust"));
    let (_, batch) =
        cluda::io::read_cluster_file(&file, cluda::ClusterSize::S3).expect("a cluster file");
    assert_eq!(batch.frames(), 300, "every data frame is in the file");
    no_temporaries(&sd);

    // Live plots: an existing spectrum.png is refused at start-up, unless --overwrite.
    let pl = new_dir(d, "pl");
    std::fs::write(pl.join("spectrum.png"), b"theirs").expect("write");
    let args = |extra: &[&str]| {
        let mut a = vec!["--pedestal", s(&dark), "--device", "cpu", "--plot", s(&pl)];
        a.extend_from_slice(extra);
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()
    };
    let a = args(&[]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let o = spawn_stream(d, "plots", support::stream::free_port(), &sd, &a)
        .wait(Duration::from_secs(60));
    failed_keeping_theirs(
        &o,
        &["spectrum.png", "--overwrite"],
        &pl.join("spectrum.png"),
    );
}

/// A stream of two endpoints whose second is silent (only part 1 of each frame comes), with a
/// part wait of a minute: `extra` options added; returns the stream and the replay's data.
fn half_frames_stream(d: &Path, name: &str, extra: &[&str]) -> (Proc, Proc) {
    let shape = (48, 64);
    let dark = support::stream::write_frames(d, "dark", shape, 0, 50, false);
    let data = support::stream::write_frames(d, "data", shape, 50, 10, true);
    let sd = d.join(format!("{name}_out"));
    // The replay publishes part 1 on `a`, part 2 on `a + 1`; the stream listens on `a` and on
    // `b`, where nobody publishes.
    let a = support::stream::free_ports(2);
    let b = support::stream::free_port();
    let (za, zb) = (support::stream::loopback(a), support::stream::loopback(b));
    let mut args = vec![
        "stream",
        "--zmq",
        &za,
        "--zmq",
        &zb,
        "--out-dir",
        s(&sd),
        "--pedestal",
        s(&dark),
        "--device",
        "cpu",
        "--acquisitions",
        "1",
        "--part-wait-ms",
        "60000",
    ];
    args.extend_from_slice(extra);
    let stream = spawn(d, name, &args);
    let replay = spawn_replay(
        d,
        &format!("{name}_replay"),
        a,
        &["--data", s(&data), "--interfaces", "2", "--wait", "3"],
    );
    (stream, replay)
}

/// `--idle-end` counts from the last message of any endpoint: frames waiting for a silent
/// endpoint's parts are given up once every endpoint has been quiet that long, reported
/// incomplete, and the acquisition ends `idle` (it waited for the part wait, here a minute,
/// before: up to an hour with the old bound); `--part-wait-ms` is bounded.
#[test]
fn a_silent_endpoint_does_not_hold_the_stream_past_idle_end() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (stream, replay) = half_frames_stream(d, "idle", &["--idle-end", "2"]);
    replay.wait_ok(Duration::from_secs(60));
    let t = Instant::now();
    let o = stream.wait(Duration::from_secs(30));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    one_summary_ending(&o, "idle");
    assert!(o.stderr.contains("never arrived"), "{}", o.stderr);
    let o = spawn(
        d,
        "bound",
        &[
            "stream",
            "--zmq",
            "tcp://127.0.0.1:1",
            "--out-dir",
            s(d),
            "--part-wait-ms",
            "60001",
        ],
    )
    .wait(Duration::from_secs(30));
    failed_naming(&o, &["--part-wait-ms", "60000"]);
}

/// SIGINT while frames wait for a silent endpoint's parts finishes the acquisition: they are
/// reported incomplete, the summary says `end=interrupted` and its file is written (before:
/// no summary, no file, the frames never reported).
#[test]
fn sigint_reports_the_frames_waiting_for_parts() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (stream, replay) = half_frames_stream(d, "int", &["--idle-end", "0"]);
    replay.wait_ok(Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(1500));
    stream.interrupt();
    let o = stream.wait(Duration::from_secs(30));
    let sum = one_summary_ending(&o, "interrupted");
    let file = PathBuf::from(&sum["file"]);
    assert!(file.exists(), "{}", o.stdout);
}
