//! The stream's cluster files are `cluda find`'s on the same frames: one and two acquisitions,
//! a pedestal file or dark acquisitions, one replay after another, a raw acquisition, a shape
//! that changes, a sampled stream.

use cluda::ClusterSize;
use cluda::io::read_cluster_file;
use support::cli::words;
use support::relay::{no_faults, relay, stream_args};
use support::stream::*;

use crate::{LIMIT, SHAPE};

/// 2,000 frames replayed, streamed with a pedestal file: the cluster file is byte for byte
/// `cluda find`'s on the same files (frame numbers from 0, as find numbers a .npy).
#[test]
fn replay_to_stream_equals_find() {
    let (dir, dark, data) = dark_and_data(SHAPE, 300, 2000);
    let d = dir.path();
    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "1", &[]);
    let replay = ["--data", s(&data), "--no-drop"];
    let run = relay((d, "stream"), 1, &out, &args, &replay, LIMIT);
    run.assert_replayed(1, 2000);
    let done = &run.stream;
    assert_eq!(run.sums.len(), 1, "{}", done.stdout);
    let m = &run.sums[0];
    assert_eq!(num(m, "frames"), 2000);
    no_faults(m, &["restarts"], &done.stderr);
    assert_eq!(m["end"], "end");
    assert_eq!(m["kind"], "data");
    let file = out.join("run_0.clust");
    assert_eq!(m["file"], s(&file));
    let want = find_bytes(d, &dark, &data, &["--device", "cpu"]);
    let got = std::fs::read(&file).expect("stream's file");
    assert!(got == want, "stream's cluster file differs from find's");
    let (numbers, batch) = read_cluster_file(&file, ClusterSize::S3).expect("read");
    assert_eq!(numbers, (0..2000).collect::<Vec<i32>>());
    assert_eq!(batch.total() as u64, num(m, "clusters"));
}

/// Two acquisitions in a row, then dark acquisitions (until the pedestal is full) as the pedestal
/// of a third: each data file is find's with the same pedestal, named from fname and fileIndex.
#[test]
fn consecutive_and_dark_acquisitions() {
    let (dir, dark, data) = dark_and_data(SHAPE, 100, 300);
    let d = dir.path();
    let want = find_bytes(d, &dark, &data, &["--device", "cpu", "--cluster", "5"]);

    // Two data acquisitions with a pedestal file.
    let out = d.join("two");
    let args = stream_args(&dark, "cpu", "2", &["--cluster", "5"]);
    let mut replay = vec!["--data", s(&data), "--acquisitions", "2"];
    replay.extend(words(
        "--fname /detector/data/scan --file-index 7 --no-drop",
    ));
    let run = relay((d, "two"), 1, &out, &args, &replay, LIMIT);
    assert_eq!(run.sums.len(), 2, "{}", run.stream.stdout);
    for (m, index) in run.sums.iter().zip([7, 8]) {
        assert_eq!(num(m, "acquisition"), index);
        assert_eq!(num(m, "frames"), 300);
        assert_eq!(m["end"], "end");
        let file = out.join(format!("scan_{index}.clust"));
        assert_eq!(m["file"], s(&file));
        assert!(std::fs::read(&file).expect("file") == want, "{index}");
    }

    // Dark acquisitions: 60 + 40 dark frames (window N = 100), then the data. One dark
    // acquisition is asked for, but its 60 frames do not fill the pedestal: the second one is
    // taken as dark too.
    let dark_a = write_frames(d, "dark_a", SHAPE, 0, 60, false);
    let dark_b = write_frames(d, "dark_b", SHAPE, 60, 40, false);
    let out = d.join("dark");
    let args = words(
        "--dark-acquisitions 1 --pedestal-frames 100 --device cpu --cluster 5 \
         --acquisitions 3 --on-full block",
    );
    // Several inputs after one --data (as find takes them) and a repeated --data.
    let replay = [
        "--data",
        s(&dark_a),
        s(&dark_b),
        "--data",
        s(&data),
        "--no-drop",
    ];
    let run = relay((d, "darkrun"), 1, &out, &args, &replay, LIMIT);
    let (done, sums) = (&run.stream, &run.sums);
    assert_eq!(sums.len(), 3, "{}", done.stdout);
    assert_eq!(sums[0]["kind"], "dark");
    assert_eq!(num(&sums[0], "pedestal_frames"), 60);
    assert_eq!(sums[0]["file"], "-");
    assert_eq!(sums[1]["kind"], "dark");
    assert_eq!(num(&sums[1], "pedestal_frames"), 40);
    assert_eq!(sums[2]["kind"], "data");
    assert!(
        done.stderr.contains(
            "pedestal holds 60 of its 100 frames; the next acquisition is taken as dark too"
        ),
        "{}",
        done.stderr
    );
    let file = out.join("run_2.clust");
    assert!(std::fs::read(&file).expect("file") == want);
}

/// Two replays one after the other into one stream: the first replay's going away after its
/// acquisition's end is no fault. Before, every clean end of a replay made the stream warn that
/// the connection was dropped ("the sender went away, or sent a message part larger than ...");
/// now it is a note, and the second acquisition is written as the first.
#[test]
fn a_sender_gone_after_its_end_is_a_note_not_a_warning() {
    let (dir, dark, data) = dark_and_data(SHAPE, 100, 50);
    let d = dir.path();
    let port = free_port();
    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "2", &[]);
    let stream = spawn_stream(d, "stream", port, &out, &args);
    for (name, index) in [("replay-a", "0"), ("replay-b", "1")] {
        let replay = ["--data", s(&data), "--file-index", index, "--no-drop"];
        spawn_replay(d, name, port, &replay).wait_ok(LIMIT);
    }
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 2, "{}", done.stdout);
    for m in &sums {
        assert_eq!(num(m, "frames"), 50, "{}", done.stderr);
        assert_eq!(m["end"], "end");
    }
    assert!(!done.stderr.contains("warning"), "{}", done.stderr);
    done.assert_stderr_has(&["went away after the end of an acquisition"]);
}

/// A raw acquisition (master file and data file) replayed keeps its headers' frame numbers
/// (from 1), and the stream's file is `cluda find`'s on the same raw files.
#[test]
fn a_raw_acquisition_replays_with_its_frame_numbers() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let raw = d.join("raw");
    let mut gen_ = vec!["gen", "--out", s(&raw), "--raw"];
    gen_.extend(words(
        "--frames 200 --pedestal-frames 50 --rows 48 --cols 64",
    ));
    Cli::found().ok(&gen_);
    let (dark, data) = (
        raw.join("pedestal_master_0.json"),
        raw.join("data_master_0.json"),
    );
    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "1", &[]);
    let replay = ["--data", s(&data), "--no-drop"];
    let run = relay((d, "raw"), 1, &out, &args, &replay, LIMIT);
    let m = &run.sums[0];
    assert_eq!((num(m, "frames"), num(m, "missing")), (200, 0));
    let file = out.join("run_0.clust");
    assert!(
        std::fs::read(&file).expect("file") == find_bytes(d, &dark, &data, &["--device", "cpu"])
    );
    let (numbers, _) = read_cluster_file(&file, ClusterSize::S3).expect("read");
    assert_eq!(numbers, (1..=200).collect::<Vec<i32>>());
}

/// Acquisitions of one shape, another, and the first again, each with its own first frames as
/// its pedestal: the finder is kept while the shape stays and reopened when it changes, and
/// every file holds `cluda find`'s clusters (see [`finder_kept_while_the_shape_stays`]).
#[test]
fn the_finder_is_kept_while_the_shape_stays() {
    finder_kept_while_the_shape_stays("cpu", SHAPE, (40, 32));
}

/// A receiver streaming every Nth frame (`rx_zmqfreq N`, here `replay --every 3`) loses
/// nothing: the stride is inferred and stated once on stderr, the summaries count the frames
/// between as `sampled`, none as `missing`, and the clusters are find's on the frames sent.
/// With `--sampled 1` (every frame expected) the same gaps are missing.
#[test]
fn a_sampled_stream_is_not_a_loss() {
    let (dir, dark, data) = dark_and_data(SHAPE, 100, 300);
    let d = dir.path();
    // The frames the replay sends: indices 0, 3, ..., 297.
    let all = cluda::io::npy::read_u16_frames(&data).expect("read");
    let px = SHAPE.0 * SHAPE.1;
    let every3: Vec<u16> = all
        .data
        .chunks_exact(px)
        .step_by(3)
        .flatten()
        .copied()
        .collect();
    let sent = d.join("sent.npy");
    cluda::io::npy::write_u16_3d(&sent, 100, SHAPE.0, SHAPE.1, &every3).expect("write");
    let want = find_bytes(d, &dark, &sent, &["--device", "cpu"]);
    let (_, want_batch) =
        read_cluster_file(&d.join("find.clust"), ClusterSize::S3).expect("find's file");
    assert!(!want.is_empty());

    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "2", &[]);
    let replay = [
        "--data",
        s(&data),
        "--no-drop",
        "--every",
        "3",
        "--acquisitions",
        "2",
    ];
    let run = relay((d, "sampled"), 1, &out, &args, &replay, LIMIT);
    run.assert_replayed(2, 200);
    let (done, sums) = (&run.stream, &run.sums);
    assert_eq!(sums.len(), 2, "{}\n{}", done.stdout, done.stderr);
    for (m, name) in sums.iter().zip(["run_0.clust", "run_1.clust"]) {
        assert_eq!(num(m, "frames"), 100, "{}", done.stderr);
        assert_eq!(num(m, "missing"), 0, "{}", done.stderr);
        assert_eq!(num(m, "sampled"), 99 * 2, "{}", done.stderr);
        let (numbers, batch) = read_cluster_file(&out.join(name), ClusterSize::S3).expect("read");
        assert_eq!(numbers, (0..100).map(|k| 3 * k).collect::<Vec<i32>>());
        assert_eq!(batch, want_batch);
    }
    // (The replay going away when done is reported as a dropped connection: no loss.)
    assert!(
        !done.stderr.contains("warning: stream: missing"),
        "{}",
        done.stderr
    );
    assert_eq!(
        done.stderr
            .matches("note: stream: frame numbers advance by 3")
            .count(),
        1,
        "{}",
        done.stderr
    );

    // Every frame expected: the same stream's gaps are missing frames.
    let out = d.join("out1");
    let args = stream_args(&dark, "cpu", "1", &["--sampled", "1"]);
    let replay = ["--data", s(&data), "--no-drop", "--every", "3"];
    let run = relay((d, "every1"), 1, &out, &args, &replay, LIMIT);
    let (done, sums) = (&run.stream, &run.sums);
    assert_eq!(sums.len(), 1, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(
        (num(&sums[0], "missing"), num(&sums[0], "sampled")),
        (198, 0)
    );
    done.assert_stderr_has(&["missing: frames 1-2 missing (2 frames never arrived"]);
}
