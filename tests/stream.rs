//! `cluda stream` and `cluda replay` end to end over real ZMQ sockets on loopback: the stream's
//! cluster files are byte-identical to `cluda find` on the same frames (one and two
//! acquisitions, a pedestal file or dark acquisitions); every fault of a stream is counted and
//! reported with its frame number while the stream goes on; a slow consumer reports its drops;
//! SIGINT mid-acquisition leaves a valid file and exits 0; a lost end message ends the
//! acquisition when idle; live plots are drawn; a raw acquisition keeps its frame numbers; the
//! finder is kept from one acquisition to the next while the frame shape stays, and reopened
//! when it changes; summaries come between the acquisitions' frames, their files in place.

use std::time::Duration;

use cluda::ClusterSize;
use cluda::generate::{GenConfig, Generator};
use cluda::io::read_cluster_file;
use cluda::stream::{Publisher, ZmqHeader};
use support::stream::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Non-square frames, so that `shape`'s `[x, y]` order is exercised.
const SHAPE: (usize, usize) = (48, 64);

/// The binary [`cluda_bin`] finds at run time (every process these tests start) is the one
/// cargo built for them, unless `$CLUDA_BIN` names another.
#[test]
fn the_tests_start_the_binary_cargo_built() {
    if std::env::var_os("CLUDA_BIN").is_none() {
        assert_eq!(
            cluda_bin(),
            std::path::PathBuf::from(env!("CARGO_BIN_EXE_cluda"))
        );
    }
}

/// 2,000 frames replayed, streamed with a pedestal file: the cluster file is byte for byte
/// `cluda find`'s on the same files (frame numbers from 0, as find numbers a .npy).
#[test]
fn replay_to_stream_equals_find() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 300, false);
    let data = write_frames(d, "data", SHAPE, 300, 2000, true);
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
    let replay = spawn_replay(d, "replay", port, &["--data", s(&data), "--no-drop"]).wait_ok(LIMIT);
    assert!(
        replay.stdout.starts_with("acquisitions=1 frames=2000 "),
        "{}",
        replay.stdout
    );
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    let m = &sums[0];
    assert_eq!(num(m, "frames"), 2000);
    for k in [
        "missing",
        "incomplete",
        "mismatched",
        "malformed",
        "dropped",
        "restarts",
    ] {
        assert_eq!(num(m, k), 0, "{k}: {}", done.stderr);
    }
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
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 100, false);
    let data = write_frames(d, "data", SHAPE, 100, 300, true);
    let want = find_bytes(d, &dark, &data, &["--device", "cpu", "--cluster", "5"]);

    // Two data acquisitions with a pedestal file.
    let port = free_port();
    let out = d.join("two");
    let stream = spawn_stream(
        d,
        "two",
        port,
        &out,
        &[
            "--pedestal",
            s(&dark),
            "--device",
            "cpu",
            "--cluster",
            "5",
            "--acquisitions",
            "2",
            "--on-full",
            "block",
        ],
    );
    spawn_replay(
        d,
        "replay-two",
        port,
        &[
            "--data",
            s(&data),
            "--acquisitions",
            "2",
            "--fname",
            "/detector/data/scan",
            "--file-index",
            "7",
            "--no-drop",
        ],
    )
    .wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 2, "{}", done.stdout);
    for (m, index) in sums.iter().zip([7, 8]) {
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
    let port = free_port();
    let out = d.join("dark");
    let stream = spawn_stream(
        d,
        "darkrun",
        port,
        &out,
        &[
            "--dark-acquisitions",
            "1",
            "--pedestal-frames",
            "100",
            "--device",
            "cpu",
            "--cluster",
            "5",
            "--acquisitions",
            "3",
            "--on-full",
            "block",
        ],
    );
    spawn_replay(
        d,
        "replay-dark",
        port,
        &[
            // Several inputs after one --data (as find takes them) and a repeated --data.
            "--data",
            s(&dark_a),
            s(&dark_b),
            "--data",
            s(&data),
            "--no-drop",
        ],
    )
    .wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
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
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 100, false);
    let data = write_frames(d, "data", SHAPE, 100, 50, true);
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
            "2",
            "--on-full",
            "block",
        ],
    );
    for (name, index) in [("replay-a", "0"), ("replay-b", "1")] {
        spawn_replay(
            d,
            name,
            port,
            &["--data", s(&data), "--file-index", index, "--no-drop"],
        )
        .wait_ok(LIMIT);
    }
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 2, "{}", done.stdout);
    for m in &sums {
        assert_eq!(num(m, "frames"), 50, "{}", done.stderr);
        assert_eq!(m["end"], "end");
    }
    assert!(!done.stderr.contains("warning"), "{}", done.stderr);
    assert!(
        done.stderr
            .contains("went away after the end of an acquisition"),
        "{}",
        done.stderr
    );
}

/// A publisher bound to the loopback `port` (no dropping) once the stream under test has
/// subscribed to it: the tests that send their own messages start this way.
fn subscribed_publisher(port: u16) -> Publisher {
    let mut p = Publisher::bind(&loopback(port), 1000, true).expect("bind");
    assert_eq!(
        p.wait_for_subscribers(1, Duration::from_secs(30))
            .expect("wait"),
        1
    );
    p
}

/// Sends a generated frame with a header made by `edit`.
fn send(p: &mut Publisher, g: &Generator, n: u64, photons: bool, edit: impl Fn(&mut ZmqHeader)) {
    let (rows, cols) = (g.config().rows, g.config().cols);
    let frame = g.frames(n, 1, photons);
    let mut h = ZmqHeader::frame(rows as u32, cols as u32, n);
    h.frame_index = Some(n);
    h.det_type = cluda::stream::header::DET_TYPE_MOENCH;
    h.packet_number = Some(2);
    edit(&mut h);
    let bytes: Vec<u8> = frame.iter().flat_map(|v| v.to_le_bytes()).collect();
    let len = usize::try_from(h.size)
        .unwrap_or(bytes.len())
        .min(bytes.len());
    p.send_frame(&h, &bytes[..len]).expect("send");
}

/// Every fault of a stream is counted in its acquisition's summary and reported on stderr with
/// its frame number, and the stream goes on: a gap, incomplete frames (completeImage 0, too few
/// packets), headers that disagree with their data (size, bitmode, shape), malformed messages
/// (not JSON, a header without its data part, extra parts), a restart mid-acquisition and an
/// acquisition that starts without the previous one's end message.
#[test]
fn every_fault_is_counted_and_reported() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    // 40 x 160 frames of a MOENCH: 12800 bytes, 2 packets of 6400.
    let (rows, cols) = (40usize, 160usize);
    let g = Generator::new(GenConfig::new(rows, cols, 3)).expect("generator");
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "faults",
        port,
        &out,
        &[
            "--pedestal-frames",
            "10",
            "--device",
            "cpu",
            "--acquisitions",
            "3",
            "--on-full",
            "block",
        ],
    );
    let mut p = subscribed_publisher(port);
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
    let px: Vec<u8> = g
        .frames(22, 1, true)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
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
    for k in [
        "missing",
        "incomplete",
        "mismatched",
        "malformed",
        "dropped",
        "restarts",
        "duplicates",
    ] {
        assert_eq!(num(c, k), 0, "{k}");
    }
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
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", SHAPE, 0, 300, true);
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "slow",
        port,
        &out,
        &[
            "--pedestal-frames",
            "5",
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--queue",
            "4",
            "--chunk",
            "1",
            "--slow-sink-us",
            "20000",
        ],
    );
    spawn_replay(d, "replay", port, &["--data", s(&data), "--rate", "1000"]).wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    let m = &sums[0];
    let dropped = num(m, "dropped");
    assert!(dropped > 100, "{}", done.stdout);
    assert_eq!(num(m, "missing"), 0, "{}", done.stderr);
    assert_eq!(
        num(m, "frames") + num(m, "pedestal_frames") + dropped,
        300,
        "{}",
        done.stdout
    );
    assert!(num(m, "peak_queue") >= 3, "{}", done.stdout);
    assert!(
        done.stderr
            .contains("warning: stream: cluda is falling behind: ")
            && done
                .stderr
                .contains("dropped: cluda's queue of 4 frames was full"),
        "{}",
        done.stderr
    );
    let (numbers, _) = read_cluster_file(&out.join("run_0.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers.len() as u64, num(m, "frames"));
    assert!(numbers.windows(2).all(|w| w[0] < w[1]));
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
    let stream = spawn_stream(
        d,
        "sigint",
        port,
        &out,
        &["--pedestal-frames", "20", "--device", "cpu"],
    );
    let replay = spawn_replay(d, "replay", port, &["--data", s(&data), "--rate", "200"]);
    // Until the data phase has started (its temporary file exists) and found some frames.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&out).map_or(0, |d| d.count()) == 0 {
        assert!(
            std::time::Instant::now() < until,
            "no data phase within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    stream.interrupt();
    let done = stream.wait(LIMIT);
    let mut replay = replay;
    let _ = replay.child.kill();
    let _ = replay.child.wait();
    assert_eq!(done.status.code(), Some(0), "{}", done.stderr);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    let m = &sums[0];
    assert_eq!(m["end"], "interrupted");
    let frames = num(m, "frames");
    assert!(frames > 0 && frames < 1980, "{}", done.stdout);
    let file = out.join("run_0.clust");
    let (numbers, batch) = read_cluster_file(&file, ClusterSize::S3).expect("a valid file");
    assert_eq!(numbers, (20..20 + frames as i32).collect::<Vec<_>>());
    assert_eq!(batch.total() as u64, num(m, "clusters"));
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
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (rows, cols) = (40usize, 160usize);
    let g = Generator::new(GenConfig::new(rows, cols, 5)).expect("generator");
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "idle",
        port,
        &out,
        &[
            "--pedestal-frames",
            "10",
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--idle-end",
            "1",
        ],
    );
    let mut p = subscribed_publisher(port);
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

/// `--plot DIR`: the spectrum and hit map of the acquisition are drawn while it runs and when it
/// ends, as whole PNG files (no temporary file left).
#[test]
fn live_plots_are_drawn() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", SHAPE, 0, 400, true);
    let port = free_port();
    let plots = d.join("plots");
    let stream = spawn_stream(
        d,
        "plots",
        port,
        &d.join("out"),
        &[
            "--pedestal-frames",
            "50",
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--plot",
            s(&plots),
            "--plot-every",
            "0.2",
        ],
    );
    // Watch the directory while frames come at 400 Hz: a refresh lands before the end.
    let replay = spawn_replay(d, "replay", port, &["--data", s(&data), "--rate", "400"]);
    let mut seen_live = false;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < until && !stream.stdout_now().contains("acquisition=") {
        seen_live |= plots.join("spectrum.png").exists();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(replay.wait(LIMIT).status.success());
    let done = stream.wait_ok(LIMIT);
    assert!(seen_live, "no plot before the acquisition ended");
    assert!(!done.stderr.contains("not drawn"), "{}", done.stderr);
    let mut names: Vec<String> = std::fs::read_dir(&plots)
        .expect("plots")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hitmap.png", "spectrum.png"]);
    for n in names {
        let bytes = std::fs::read(plots.join(&n)).expect("png");
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000,
            "{n}"
        );
    }
}

/// A raw acquisition (master file and data file) replayed keeps its headers' frame numbers
/// (from 1), and the stream's file is `cluda find`'s on the same raw files.
#[test]
fn a_raw_acquisition_replays_with_its_frame_numbers() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let raw = d.join("raw");
    Cli::found().ok(&[
        "gen",
        "--out",
        s(&raw),
        "--raw",
        "--frames",
        "200",
        "--pedestal-frames",
        "50",
        "--rows",
        "48",
        "--cols",
        "64",
    ]);
    let (dark, data) = (
        raw.join("pedestal_master_0.json"),
        raw.join("data_master_0.json"),
    );
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "raw",
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
    spawn_replay(d, "replay", port, &["--data", s(&data), "--no-drop"]).wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let m = &summaries(&done.stdout)[0];
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

/// Three acquisitions back to back through the library calls: every acquisition's summary
/// reaches the caller after its own frames and before any of the next one's (its file is
/// committed while the next one starts), its file is in place by then, and the totals count
/// every acquisition.
#[test]
fn summaries_come_in_order_between_the_acquisitions_frames() {
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    use cluda::stream::{
        AcquisitionSummary, Callbacks, FullQueue, PedestalPlan, ReceiverConfig, ReplaySettings,
        StreamEvent, StreamSettings, replay,
    };

    let dir = tempfile::tempdir().expect("dir");
    let (rows, cols) = SHAPE;
    let g = Generator::new(GenConfig::new(rows, cols, 5)).expect("generator");
    let mut pedestal = cluda::Pedestal::new(rows, cols, 50, cluda::Precision::F64).expect("p");
    pedestal
        .push_frames(cluda::Frames::new(&g.frames(0, 50, false), 50, rows, cols).expect("frames"))
        .expect("push");
    let data = Arc::new(g.frames(50, 200, true));
    let port = free_port();
    let sender = {
        let data = Arc::clone(&data);
        std::thread::spawn(move || {
            let mut p = Publisher::bind(&loopback(port), 1000, true).expect("bind");
            assert_eq!(
                p.wait_for_subscribers(1, Duration::from_secs(60))
                    .expect("wait"),
                1
            );
            let settings = ReplaySettings {
                repeat: 3,
                ..ReplaySettings::default()
            };
            replay(
                &mut p,
                1,
                &mut |_| {
                    Ok(Box::new(
                        cluda::io::MemorySource::new(data.to_vec(), rows, cols).expect("source"),
                    ))
                },
                &settings,
                &AtomicBool::new(false),
            )
            .expect("replay")
        })
    };
    let mut config = ReceiverConfig::new(&loopback(port));
    config.full = FullQueue::Block;
    let out = dir.path().join("out");
    let mut settings = StreamSettings::new(cluda::FindOptions::default(), &out);
    settings.device = cluda::finder::select::DeviceChoice::Cpu;
    settings.pedestal = PedestalPlan::Fixed(pedestal);
    settings.acquisitions = Some(3);
    // "frame", or "summary <fileIndex>", as they reach the caller.
    let events = Mutex::new(Vec::<String>::new());
    // No fault; the sender going away after its last end of acquisition is a note, not one
    // (nor a connection warning).
    let report: cluda::stream::Reporter = Arc::new(|e: &StreamEvent| {
        assert!(matches!(e, StreamEvent::Note(_)), "{e:?}");
    });
    let totals = cluda::stream::run(
        config,
        &settings,
        Arc::new(AtomicBool::new(false)),
        Callbacks {
            report,
            note: &mut |_| {},
            summary: &mut |s: &AcquisitionSummary| {
                let file = s.file.as_ref().expect("a file");
                assert!(
                    file.exists(),
                    "{} not in place at its summary",
                    file.display()
                );
                assert_eq!((s.data_frames, s.first_lag.is_some()), (200, true));
                events
                    .lock()
                    .expect("lock")
                    .push(format!("summary {}", s.file_index));
                Ok(())
            },
            frame: &mut |_, _| events.lock().expect("lock").push("frame".into()),
            image: None,
        },
    )
    .expect("stream");
    sender.join().expect("sender");
    assert_eq!((totals.acquisitions, totals.frames), (3, 600), "{totals:?}");
    let events = events.into_inner().expect("events");
    let mut want = Vec::new();
    for k in 0..3 {
        want.extend(std::iter::repeat_n("frame".to_string(), 200));
        want.push(format!("summary {k}"));
    }
    assert!(events == want, "events out of order: {events:?}");
}

/// A receiver streaming every Nth frame (`rx_zmqfreq N`, here `replay --every 3`) loses
/// nothing: the stride is inferred and stated once on stderr, the summaries count the frames
/// between as `sampled`, none as `missing`, and the clusters are find's on the frames sent.
/// With `--sampled 1` (every frame expected) the same gaps are missing.
#[test]
fn a_sampled_stream_is_not_a_loss() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 100, false);
    let data = write_frames(d, "data", SHAPE, 100, 300, true);
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

    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "sampled",
        port,
        &out,
        &[
            "--pedestal",
            s(&dark),
            "--device",
            "cpu",
            "--acquisitions",
            "2",
            "--on-full",
            "block",
        ],
    );
    let replay = spawn_replay(
        d,
        "replay",
        port,
        &[
            "--data",
            s(&data),
            "--no-drop",
            "--every",
            "3",
            "--acquisitions",
            "2",
        ],
    )
    .wait_ok(LIMIT);
    assert!(
        replay.stdout.starts_with("acquisitions=2 frames=200 "),
        "{}",
        replay.stdout
    );
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
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
    let port = free_port();
    let out = d.join("out1");
    let stream = spawn_stream(
        d,
        "every1",
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
            "--sampled",
            "1",
        ],
    );
    spawn_replay(
        d,
        "replay1",
        port,
        &["--data", s(&data), "--no-drop", "--every", "3"],
    )
    .wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(
        (num(&sums[0], "missing"), num(&sums[0], "sampled")),
        (198, 0)
    );
    assert!(
        done.stderr
            .contains("missing: frames 1-2 missing (2 frames never arrived"),
        "{}",
        done.stderr
    );
}

/// In a sampled stream a gap wider than the stride is still a loss, reported with its frame
/// numbers: every 2nd frame, then frames 14 and 16 of the every-2nd sequence never come. The
/// headers' `rx_roi` (not the whole frame) is stated once: each frame is cut down to it.
#[test]
fn a_broken_stride_is_reported_missing() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let g = Generator::new(GenConfig::new(40, 160, 3)).expect("generator");
    let port = free_port();
    let out = d.join("out");
    let stream = spawn_stream(
        d,
        "broken",
        port,
        &out,
        &[
            "--pedestal-frames",
            "4",
            "--device",
            "cpu",
            "--acquisitions",
            "1",
            "--on-full",
            "block",
        ],
    );
    let mut p = subscribed_publisher(port);
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

/// `stream --eta --eta-out`: each data acquisition's sub-pixel image beside its cluster file
/// equals `cluda image` on the same frames, and the live eta cube equals `cluda eta`'s.
#[test]
fn live_images_and_cube_equal_the_commands() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 300, false);
    let data = write_frames(d, "data", SHAPE, 300, 400, true);
    let want = wanted_image(d, &dark, &data, "3", false);
    let (cube, want_image) = (want.cube, want.image);
    let port = free_port();
    let out = d.join("out");
    let live_cube = d.join("live.npz");
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
            "--eta",
            s(&cube),
            "--subpixels",
            "3",
            "--eta-out",
            s(&live_cube),
        ],
    );
    spawn_replay(d, "replay", port, &["--data", s(&data), "--no-drop"]).wait_ok(LIMIT);
    let done = stream.wait_ok(LIMIT);
    let got = std::fs::read(out.join("run_0.image.npy")).expect("the live image");
    assert!(
        got == std::fs::read(&want_image).unwrap(),
        "live image differs from cluda image's: {}",
        done.stderr
    );
    let a = cluda::io::npz::read_f64(&live_cube).expect("live cube");
    let b = cluda::io::npz::read_f64(&cube).unwrap();
    assert_eq!(a, b, "the live cube differs from cluda eta's");
}

/// `stream --eta --subpixels N --plot DIR`: `image.png` of the acquisition's sub-pixel image
/// (counted on the host's placement worker) appears while it runs and is refreshed as photons
/// come; the final `image.png` is `cluda image --plot`'s on the same frames, byte for byte, and
/// so is the image file beside the cluster file (the live copies do not change it).
#[test]
fn live_image_is_drawn_and_refreshed() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let dark = write_frames(d, "dark", SHAPE, 0, 300, false);
    let data = write_frames(d, "data", SHAPE, 300, 600, true);
    let want = wanted_image(d, &dark, &data, "3", true);
    let (cube, want_image) = (want.cube, want.image);
    let want_plots = want.plots.expect("plots");
    let port = free_port();
    let out = d.join("out");
    let plots = d.join("plots");
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
            "--eta",
            s(&cube),
            "--subpixels",
            "3",
            "--plot",
            s(&plots),
            "--plot-every",
            "0.2",
        ],
    );
    // 600 frames at 200 Hz: three seconds of refreshes every 0.2 s.
    let replay = spawn_replay(
        d,
        "replay",
        port,
        &["--data", s(&data), "--rate", "200", "--no-drop"],
    );
    let png = plots.join("image.png");
    let seen = png_versions(&stream, &png, Duration::from_secs(60));
    assert!(replay.wait(LIMIT).status.success());
    let done = stream.wait_ok(LIMIT);
    assert!(!done.stderr.contains("not drawn"), "{}", done.stderr);
    assert!(
        seen.len() >= 2,
        "image.png was drawn {} times before the acquisition ended, not refreshed: {}",
        seen.len(),
        done.stderr
    );
    for bytes in &seen {
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000);
    }
    let mut names: Vec<String> = std::fs::read_dir(&plots)
        .expect("plots")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["hitmap.png", "image.png", "spectrum.png"]);
    let got = std::fs::read(&png).expect("the final image.png");
    let want = std::fs::read(want_plots.join("image.png")).expect("cluda image's image.png");
    assert!(
        got == want,
        "the final image.png differs from cluda image --plot's"
    );
    let got = std::fs::read(out.join("run_0.image.npy")).expect("the live image");
    assert!(
        got == std::fs::read(&want_image).unwrap(),
        "live image differs from cluda image's: {}",
        done.stderr
    );
}
