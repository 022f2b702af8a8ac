//! What a stream counts and reports while it goes on: every fault with its frame number, a
//! consumer too slow for its sender, SIGINT mid-acquisition, a lost end message, a broken
//! stride in a sampled stream.

use std::path::PathBuf;

use cluda::ClusterSize;
use cluda::generate::{GenConfig, Generator};
use cluda::io::read_cluster_file;
use cluda::stream::{Publisher, ZmqHeader};
use support::cli::words;
use support::publish::{frame_bytes, send, subscribed};
use support::relay::{interrupted, no_faults, slow_consumer};
use support::stream::*;

use crate::{LIMIT, SHAPE};

/// A stream of messages of the test's own: starts `cluda stream` on the CPU with `options`
/// (output files `name.*` in a temporary directory, clusters in its `out`) and a publisher of
/// generated MOENCH-sized frames (40 x 160: 12800 bytes, 2 packets of 6400; generator seed
/// `seed`) it has subscribed to. Returns the directory, `out`, the generator, the publisher
/// and the stream.
fn own_messages(
    name: &str,
    seed: u64,
    options: &str,
) -> (tempfile::TempDir, PathBuf, Generator, Publisher, Proc) {
    let dir = tempfile::tempdir().expect("dir");
    let g = Generator::new(GenConfig::new(40, 160, seed)).expect("generator");
    let port = free_port();
    let out = dir.path().join("out");
    let stream = spawn_stream(dir.path(), name, port, &out, &words(options));
    let p = subscribed(port, 1).remove(0);
    (dir, out, g, p, stream)
}

/// Every fault of a stream is counted in its acquisition's summary and reported on stderr with
/// its frame number, and the stream goes on: a gap, incomplete frames (completeImage 0, too few
/// packets), headers that disagree with their data (size, bitmode, shape), malformed messages
/// (not JSON, a header without its data part, extra parts), a restart mid-acquisition and an
/// acquisition that starts without the previous one's end message.
#[test]
fn every_fault_is_counted_and_reported() {
    let options = "--pedestal-frames 10 --device cpu --acquisitions 3 --on-full block";
    let (_dir, out, g, mut p, stream) = own_messages("faults", 3, options);
    let (rows, cols) = (40usize, 160usize);
    // Before any acquisition: a message that is not a header (counted in the next one).
    p.send_parts(&[b"garbage"]).expect("send");
    // Acquisition 1 (fileIndex 0): pedestal 0..9, then faults among data frames.
    for n in 0..10 {
        send(&mut p, &g, n, false, |_| {});
    }
    send(&mut p, &g, 10, true, |_| {});
    send(&mut p, &g, 11, true, |_| {});
    // 12, 13 never sent.
    send(&mut p, &g, 14, true, |h| h.complete_image = Some(0));
    send(&mut p, &g, 15, true, |h| h.packet_number = Some(1));
    send(&mut p, &g, 16, true, |h| h.size = 12000);
    send(&mut p, &g, 17, true, |h| h.bitmode = 32);
    send(&mut p, &g, 18, true, |h| h.shape = [40, 160]);
    p.send_parts(&[b"{\"data\": 1, not json"]).expect("send");
    let mut h19 = ZmqHeader::frame(rows as u32, cols as u32, 19);
    h19.frame_index = Some(19);
    p.send_parts(&[h19.to_json().as_bytes()]).expect("send");
    send(&mut p, &g, 20, true, |_| {});
    send(&mut p, &g, 21, true, |_| {});
    let mut h22 = ZmqHeader::frame(rows as u32, cols as u32, 22);
    h22.frame_index = Some(22);
    let px = frame_bytes(&g, 22, true);
    p.send_parts(&[h22.to_json().as_bytes(), &px, b"extra"])
        .expect("send");
    send(&mut p, &g, 23, true, |_| {});
    // Frame 23 again right after itself: a duplicate, not a restart.
    send(&mut p, &g, 23, true, |_| {});
    // The sender restarts: frame numbers from 100, frameIndex 0 again (acquisition 2).
    for i in 0..13 {
        send(&mut p, &g, 100 + i, i >= 10, |h| h.frame_index = Some(i));
    }
    // Acquisition 3 starts (fileIndex 1) without acquisition 2's end message.
    for i in 0..12 {
        send(&mut p, &g, 200 + i, i >= 10, |h| {
            h.frame_index = Some(i);
            h.file_index = 1;
        });
    }
    p.send_end().expect("end");
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 3, "{}\n{}", done.stdout, done.stderr);
    let a = &sums[0];
    let expect = [
        ("frames", 5),
        ("pedestal_frames", 10),
        ("missing", 2),
        ("incomplete", 2),
        ("mismatched", 3),
        ("malformed", 4),
        ("dropped", 0),
        ("restarts", 1),
        ("duplicates", 1),
    ];
    for (k, v) in expect {
        assert_eq!(num(a, k), v, "{k}: {}\n{}", done.stdout, done.stderr);
    }
    assert_eq!(a["end"], "restart");
    let (numbers, _) = read_cluster_file(&out.join("run_0.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers, vec![10, 11, 20, 21, 23]);
    let b = &sums[1];
    assert_eq!((num(b, "frames"), num(b, "pedestal_frames")), (3, 10));
    assert_eq!(b["end"], "next-acquisition");
    assert_eq!(num(b, "restarts"), 1);
    assert_eq!(num(b, "missing"), 0);
    let (numbers, _) =
        read_cluster_file(&out.join("run_0_a100.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers, vec![110, 111, 112]);
    let c = &sums[2];
    assert_eq!((num(c, "frames"), num(c, "acquisition")), (2, 1));
    assert_eq!(c["end"], "end");
    no_faults(c, &["restarts", "duplicates"], "");
    let e = &done.stderr;
    for want in [
        "missing: frames 12-13 missing (2 frames never arrived",
        "incomplete: frame 14 is incomplete: completeImage 0",
        "incomplete: frame 15 is incomplete: 1 of 2 packets caught",
        "mismatched: frame 16: size 12000 bytes does not match shape [160, 40]",
        "mismatched: frame 17: bitmode 32",
        "mismatched: frame 18: shape [40, 160] (160 rows x 40 columns) is not this acquisition's 40 x 160",
        "malformed: malformed message between acquisitions: not a JSON header",
        "malformed: malformed message (after frame 18): not a JSON header",
        "malformed: frame 19: its header came without the data part",
        "malformed: frame 22: 1 more part(s) after the data part",
        "duplicate: frame 23 (frameIndex",
        "came again right after itself: a duplicate, discarded (not a restart)",
        "restart: the sender restarted mid-acquisition: frame 100 (frameIndex 0) after frame 23",
        "restart: frame 200 belongs to another acquisition (fileIndex 1",
    ] {
        assert!(e.contains(want), "stderr lacks `{want}`:\n{e}");
    }
}

/// A consumer slower than the sender: cluda's queue fills, the newest frames are dropped and
/// reported by number while it runs, and the summary tells dropped frames from missing ones.
#[test]
fn a_slow_consumer_reports_its_drops() {
    let (done, m) = slow_consumer(1, LIMIT);
    assert_eq!(num(&m, "missing"), 0, "{}", done.stderr);
    assert!(num(&m, "peak_queue") >= 3, "{}", done.stdout);
    done.assert_stderr_has(&[
        "warning: stream: cluda is falling behind: ",
        "dropped: cluda's queue of 4 frames was full",
    ]);
}

/// SIGINT mid-acquisition: the acquisition's file is written whole (every frame found so far),
/// its summary printed, and the exit code is 0.
#[test]
fn sigint_finishes_the_acquisition() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", SHAPE, 0, 2000, true);
    let port = free_port();
    let out = d.join("out");
    let args = ["--pedestal-frames", "20", "--device", "cpu"];
    let stream = spawn_stream(d, "sigint", port, &out, &args);
    let replay = spawn_replay(d, "replay", port, &["--data", s(&data), "--rate", "200"]);
    interrupted(stream, replay, &out, LIMIT);
    // Nothing left half-written.
    let names: Vec<_> = std::fs::read_dir(&out)
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// An acquisition whose end message never comes (a PUB drops it at its high-water mark like
/// any frame) is ended after `--idle-end` seconds without messages, reported, and its file
/// written.
#[test]
fn a_lost_end_message_ends_the_acquisition_when_idle() {
    let options = "--pedestal-frames 10 --device cpu --acquisitions 1 --idle-end 1";
    let (_dir, out, g, mut p, stream) = own_messages("idle", 5, options);
    for n in 0..15 {
        send(&mut p, &g, n, n >= 10, |_| {});
    }
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    let m = &sums[0];
    assert_eq!(m["end"], "idle");
    assert_eq!((num(m, "frames"), num(m, "malformed")), (5, 1));
    assert!(
        done.stderr.contains(
            "no end-of-acquisition message and nothing for 1.0 s: the acquisition is ended after frame 14"
        ),
        "{}",
        done.stderr
    );
    let (numbers, _) = read_cluster_file(&out.join("run_0.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers, vec![10, 11, 12, 13, 14]);
}

/// In a sampled stream a gap wider than the stride is still a loss, reported with its frame
/// numbers: every 2nd frame, then frames 14 and 16 of the every-2nd sequence never come. The
/// headers' `rx_roi` (not the whole frame) is stated once: each frame is cut down to it.
#[test]
fn a_broken_stride_is_reported_missing() {
    let options = "--pedestal-frames 4 --device cpu --acquisitions 1 --on-full block";
    let (_dir, _, g, mut p, stream) = own_messages("broken", 3, options);
    for n in [0u64, 2, 4, 6, 8, 10, 12, 18, 20, 22] {
        // The receiver's files hold an ROI; its stream carries whole frames.
        send(&mut p, &g, n, n >= 8, |h| h.rx_roi = Some([0, 79, 0, 39]));
    }
    p.send_end().expect("end");
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}\n{}", done.stdout, done.stderr);
    let m = &sums[0];
    assert_eq!((num(m, "frames"), num(m, "pedestal_frames")), (6, 4));
    assert_eq!(
        (num(m, "missing"), num(m, "sampled")),
        (2, 11),
        "{}",
        done.stderr
    );
    let e = &done.stderr;
    assert!(
        e.contains("note: stream: frame numbers advance by 2"),
        "{e}"
    );
    assert_eq!(
        e.matches("the receiver's rx_roi is [0, 79, 0, 39] (xmin, xmax, ymin, ymax) of the whole 40 x 160 frame: each frame is cut down to the ROI's 40 x 80 pixels before clusters are found").count(),
        1,
        "{e}"
    );
    assert!(
        e.contains(
            "missing: frames 13-17: the stride of 2 is broken (frame 18 after 12): 2 frames"
        ),
        "{e}"
    );
}
