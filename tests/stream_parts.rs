//! `cluda stream` with several `--zmq` endpoints, each frame arriving as one part per endpoint
//! (a MOENCH read out through two UDP interfaces, a detector of several modules), end to end
//! over loopback: two- and four-part replays give `cluda find`'s cluster file byte for byte
//! (3x3 and 9x9); a lost part, a late part, a part of the wrong shape and two acquisitions
//! whose parts interleave are counted and reported with their frame numbers; parts that do
//! not tile the frame stop the stream with an error naming the endpoint; SIGINT finishes the
//! acquisition.

use std::time::{Duration, Instant};

use cluda::ClusterSize;
use cluda::generate::{GenConfig, Generator};
use cluda::io::read_cluster_file;
use cluda::stream::{Publisher, ZmqHeader};
use support::cli::words;
use support::publish::subscribed;
use support::relay::{interrupted, no_faults, relay, slow_consumer, stream_args};
use support::stream::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Non-square frames, so that `shape`'s `[x, y]` order is exercised; rows split in 2 and 4.
const SHAPE: (usize, usize) = (48, 64);

/// Two- and four-interface replays (3x3 and 9x9 clusters) streamed into one frame give
/// `cluda find`'s cluster file on the whole frames, byte for byte.
#[test]
fn parts_replayed_and_streamed_equal_find() {
    for (parts, cluster) in [(2usize, "3"), (4, "9")] {
        let (dir, dark, data) = dark_and_data(SHAPE, 300, 1000);
        let d = dir.path();
        let out = d.join("out");
        let args = stream_args(&dark, "cpu", "1", &["--cluster", cluster]);
        let n = parts.to_string();
        let replay = ["--data", s(&data), "--no-drop", "--interfaces", &n];
        let run = relay((d, "stream"), parts, &out, &args, &replay, LIMIT);
        run.assert_replayed(1, 1000);
        let done = &run.stream;
        assert_eq!(run.sums.len(), 1, "{}", done.stdout);
        let m = &run.sums[0];
        assert_eq!(num(m, "frames"), 1000, "{}", done.stderr);
        let context = format!("{parts} parts: {}", done.stderr);
        no_faults(m, &["restarts", "late"], &context);
        assert_eq!(m["end"], "end");
        let want = find_bytes(d, &dark, &data, &["--device", "cpu", "--cluster", cluster]);
        let got = std::fs::read(out.join("run_0.clust")).expect("stream's file");
        assert!(
            got == want,
            "{parts} parts: the cluster file differs from find's"
        );
    }
}

/// Sends part `e` (of 2: the top and bottom halves) of generated frame `content`, numbered
/// `number`, with its header edited by `edit`.
fn send_half(
    p: &mut Publisher,
    g: &Generator,
    (content, number): (u64, u64),
    e: u32,
    (fname, index): (&str, u64),
    edit: impl Fn(&mut ZmqHeader),
) {
    let (rows, cols) = (g.config().rows, g.config().cols);
    let frame = g.frames(content, 1, true);
    let half = rows / 2;
    let mut h = ZmqHeader::frame(half as u32, cols as u32, number);
    h.detshape = [1, 2];
    h.row = e;
    h.fname = fname.into();
    h.file_index = index;
    h.frame_index = Some(number);
    edit(&mut h);
    let pixels = &frame[e as usize * half * cols..(e as usize + 1) * half * cols];
    let bytes: Vec<u8> = pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
    let len = usize::try_from(h.size).unwrap_or(0).min(bytes.len());
    p.send_frame(&h, &bytes[..len]).expect("send");
}

/// One acquisition with a lost part (frame 5), a part sent out of order (frame 12: given up
/// when the next came, then late) and a part of the wrong shape (frame 20), then a second
/// acquisition whose parts on the first endpoint arrive before the first acquisition's on
/// the second: every fault counted and reported with its frame number and part, and the
/// second acquisition's file is find's on its frames (no part of the first in it).
#[test]
fn lost_late_and_wrong_parts_and_interleaved_acquisitions() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 300, false);
    let b_data = write_frames(d, "b", SHAPE, 500, 30, true);
    let g = Generator::new(GenConfig::new(SHAPE.0, SHAPE.1, 7)).expect("generator");
    let port = free_ports(2);
    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "2", &[]);
    let stream = spawn_parts_stream(d, "stream", port, 2, &out, &args);
    let mut pubs = subscribed(port, 2);
    let a = ("a", 0);
    let b = ("a", 1);
    // Endpoint 1 first, the whole of both acquisitions: its parts of B wait for endpoint 2's
    // end of A.
    for f in 0..40u64 {
        send_half(&mut pubs[0], &g, (300 + f, f), 0, a, |_| {});
    }
    pubs[0].send_end().expect("end");
    for f in 0..30u64 {
        send_half(&mut pubs[0], &g, (500 + f, f), 0, b, |_| {});
    }
    pubs[0].send_end().expect("end");
    for f in (0..40u64).filter(|&f| f != 5 && f != 12) {
        send_half(&mut pubs[1], &g, (300 + f, f), 1, a, |h| {
            if f == 20 {
                // A part of another shape than this endpoint's first.
                h.shape = [64, 23];
                h.size = 64 * 23 * 2;
            }
        });
        if f == 13 {
            send_half(&mut pubs[1], &g, (312, 12), 1, a, |_| {});
        }
    }
    pubs[1].send_end().expect("end");
    for f in 0..30u64 {
        send_half(&mut pubs[1], &g, (500 + f, f), 1, b, |_| {});
    }
    pubs[1].send_end().expect("end");
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 2, "{}\n{}", done.stdout, done.stderr);
    let (ma, mb) = (&sums[0], &sums[1]);
    assert_eq!(num(ma, "frames"), 37, "{}", done.stderr);
    assert_eq!(num(ma, "incomplete"), 2, "{}", done.stderr);
    assert_eq!(num(ma, "mismatched"), 1, "{}", done.stderr);
    assert_eq!(num(ma, "late"), 1, "{}", done.stderr);
    assert_eq!(num(ma, "missing"), 0, "{}", done.stderr);
    assert_eq!(ma["end"], "end");
    let second = loopback(port + 1);
    for want in [
        format!("frame 5: part 2 of 2 ({second}) never arrived"),
        format!("frame 12: part 2 of 2 ({second}) never arrived"),
        format!("frame 12: its part from {second} came after the frame was handed on"),
        format!("frame 20: part 2 of 2 ({second}): its header says row 1 column 0 shape [64, 23]"),
    ] {
        assert!(done.stderr.contains(&want), "{want}\n{}", done.stderr);
    }
    let (numbers, _) = read_cluster_file(&out.join("a_0.clust"), ClusterSize::S3).expect("A");
    let want: Vec<i32> = (0..40).filter(|f| ![5, 12, 20].contains(f)).collect();
    assert_eq!(numbers, want);
    assert_eq!(num(mb, "frames"), 30, "{}", done.stderr);
    for k in ["missing", "incomplete", "mismatched", "malformed", "late"] {
        assert_eq!(num(mb, k), 0, "B {k}: {}", done.stderr);
    }
    let want = find_bytes(d, &dark, &b_data, &["--device", "cpu"]);
    let got = std::fs::read(out.join("a_1.clust")).expect("B's file");
    assert!(got == want, "B's cluster file differs from find's");
}

/// Parts that do not tile one frame (both say row 0) stop the stream with an error naming
/// the endpoint and its header.
#[test]
fn parts_that_do_not_tile_the_frame_are_an_error() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let g = Generator::new(GenConfig::new(SHAPE.0, SHAPE.1, 7)).expect("generator");
    let port = free_ports(2);
    let out = d.join("out");
    let stream = spawn_parts_stream(d, "stream", port, 2, &out, &["--device", "cpu"]);
    let mut pubs = subscribed(port, 2);
    for f in 0..3u64 {
        send_half(&mut pubs[0], &g, (f, f), 0, ("run", 0), |_| {});
        send_half(&mut pubs[1], &g, (f, f), 1, ("run", 0), |h| h.row = 0);
    }
    let done = stream.wait(LIMIT);
    assert!(!done.status.success(), "{}", done.stderr);
    let want = format!(
        "the parts do not tile one frame: {} (header: row 0 column 0 shape [64, 24] detshape [1, 2] flipRows 0): the same place as {}'s part",
        loopback(port + 1),
        loopback(port)
    );
    assert!(done.stderr.contains(&want), "{}", done.stderr);
}

/// SIGINT mid-acquisition of a two-part stream: the acquisition is finished, its file valid,
/// exit 0.
#[test]
fn sigint_finishes_a_parts_acquisition() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", SHAPE, 0, 2000, true);
    let port = free_ports(2);
    let out = d.join("out");
    let stream = spawn_parts_stream(
        d,
        "sigint",
        port,
        2,
        &out,
        &["--pedestal-frames", "20", "--device", "cpu"],
    );
    let replay = spawn_replay(
        d,
        "replay",
        port,
        &["--data", s(&data), "--rate", "200", "--interfaces", "2"],
    );
    let (done, m) = interrupted(stream, replay, &out, LIMIT);
    // A frame whose second part was still on its way when the signal came is reported
    // incomplete (never dropped unreported); at 200 frames/s, at most the last one or two.
    let incomplete = num(&m, "incomplete");
    assert!(incomplete <= 2, "{}", done.stderr);
    assert_eq!(
        done.stderr.matches("never arrived; skipped").count() as u64,
        incomplete,
        "{}",
        done.stderr
    );
}

/// A consumer too slow for two endpoints: the receiving threads drop parts when the queue is
/// full, and every frame one of whose parts was dropped is reported `dropped` (never found from
/// a half, never counted as incomplete, missing or late): frames found + pedestal + dropped =
/// frames sent.
#[test]
fn a_slow_consumer_of_parts_reports_its_drops() {
    let (done, m) = slow_consumer(2, LIMIT);
    for k in ["missing", "incomplete", "late", "mismatched", "malformed"] {
        assert_eq!(num(&m, k), 0, "{k}: {}", done.stderr);
    }
    done.assert_stderr_has(&["was dropped by cluda: its queue was full"]);
}

/// An endpoint that stalls (sends nothing more, not even its end message): the frames waiting
/// for its parts are given up after `--part-wait-ms`, each reported incomplete, and the
/// acquisition ends when idle; memory does not wait for it.
#[test]
fn a_stalled_endpoint_gives_its_frames_up_after_the_part_wait() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 300, false);
    let g = Generator::new(GenConfig::new(SHAPE.0, SHAPE.1, 7)).expect("generator");
    let port = free_ports(2);
    let out = d.join("out");
    let mut args = vec!["--pedestal", s(&dark)];
    args.extend(words(
        "--device cpu --acquisitions 1 --part-wait-ms 100 --idle-end 1",
    ));
    let stream = spawn_parts_stream(d, "stream", port, 2, &out, &args);
    let mut pubs = subscribed(port, 2);
    let started = Instant::now();
    for f in 0..10u64 {
        send_half(&mut pubs[0], &g, (300 + f, f), 0, ("run", 0), |_| {});
        if f < 5 {
            send_half(&mut pubs[1], &g, (300 + f, f), 1, ("run", 0), |_| {});
        }
    }
    pubs[0].send_end().expect("end");
    let done = stream.wait_ok(LIMIT);
    assert!(started.elapsed() < Duration::from_secs(30));
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    let m = &sums[0];
    assert_eq!(num(m, "frames"), 5, "{}", done.stderr);
    assert_eq!(num(m, "incomplete"), 5, "{}", done.stderr);
    assert_eq!(m["end"], "idle", "{}", done.stderr);
    let second = loopback(port + 1);
    for f in 5..10 {
        let want = format!("frame {f}: part 2 of 2 ({second}) never arrived");
        assert!(done.stderr.contains(&want), "{want}\n{}", done.stderr);
    }
    let (numbers, _) = read_cluster_file(&out.join("run_0.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers, (0..5).collect::<Vec<i32>>());
}
