//! A stream that must survive one bad message or file-system failure: frame numbers above
//! i32 and long names, an oversized message, frames larger than the address space allowed,
//! a file it cannot write.

use std::path::Path;
use std::time::{Duration, Instant};

use cluda::generate::{GenConfig, Generator};
use cluda::stream::ZmqHeader;
use support::cli::text;
use support::files::{listing, sum};
use support::publish::{frame_bytes, subscribed};
use support::relay::{relay, stream_args};
use support::stream::*;

/// One acquisition with frame numbers running past the cluster file's i32 and a 300-character
/// `fname`: the frames above i32::MAX are reported and skipped, the rest written under a
/// shortened name, and the stream goes on (it stopped with exit 1 and lost the file).
#[test]
fn a_stream_survives_frame_numbers_above_i32_and_long_names() {
    let (dir, dark, data) = dark_and_data((16, 24), 40, 20);
    let d = dir.path();
    let sums = (sum(&dark), sum(&data));
    let out = d.join("out");
    let args = stream_args(&dark, "cpu", "1", &[]);
    let fname = "y".repeat(300);
    let mut replay = vec![
        "--data",
        s(&data),
        "--no-drop",
        "--first-frame",
        "2147483640",
    ];
    replay.extend(["--fname", &fname]);
    let run = relay(
        (d, "stream"),
        1,
        &out,
        &args,
        &replay,
        Duration::from_secs(60),
    );
    let (done, sums_line) = (run.stream, run.sums);
    assert_eq!(sums_line.len(), 1, "{}", done.stdout);
    assert_eq!(num(&sums_line[0], "frames"), 8, "{}", done.stdout);
    assert_eq!(num(&sums_line[0], "malformed"), 12, "{}", done.stdout);
    done.assert_stderr_has(&["frame 2147483648: its frame number is above 2147483647"]);
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
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (16, 24);
    let dark = write_frames(d, "dark", shape, 0, 40, false);
    let port = free_port();
    let out = d.join("out");
    let mut args = vec!["--pedestal", s(&dark)];
    args.extend(["--device", "cpu", "--acquisitions", "1", "--idle-end", "0"]);
    let stream = spawn_stream(d, "stream", port, &out, &args);
    let mut p = subscribed(port, 1).remove(0);
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
        p.send_frame(&h, &frame_bytes(&g, 40 + n, true))
            .expect("send");
    }
    p.send_end().expect("end");
    let done = stream.wait_ok(Duration::from_secs(60));
    done.assert_stderr_has(&["was dropped", "1048576 bytes"]);
    let sums_line = summaries(&done.stdout);
    assert_eq!(num(&sums_line[0], "frames"), 5, "{}", done.stdout);
    assert_eq!(listing(&out), ["run_0.clust"]);
}

/// `cluda stream` (CPU, a blocking queue) of `acquisitions` acquisitions from `port` into
/// `out` with the pedestal `dark`, started by `sh` in `d` after the shell commands `limits`
/// (its output in `d/stream.out` and `.err`).
fn limited_stream(
    d: &Path,
    limits: &str,
    (port, out, dark): (u16, &Path, &Path),
    acquisitions: u32,
) -> Proc {
    let script = format!(
        "{limits} && exec {} stream --zmq {} --out-dir {} --pedestal {} --device cpu --acquisitions {acquisitions} --on-full block",
        s(&cluda_bin()),
        loopback(port),
        s(out),
        s(dark),
    );
    spawn_sh(d, "stream", &script)
}

/// Three valid 4000 x 4000 frames streamed under a 6 GB address-space limit: the ring follows
/// the frame size (it was three chunks of 64 frames, 6 GiB, and the stream aborted).
#[test]
fn a_stream_of_large_frames_fits_a_6_gb_address_space() {
    let (dir, dark, data) = dark_and_data((4000, 4000), 2, 3);
    let d = dir.path();
    let port = free_port();
    let out = d.join("out");
    let child = limited_stream(d, "ulimit -v 6000000", (port, &out, &dark), 1);
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

/// A cluster file that cannot be written (a file-size limit standing for a full disk) loses
/// that acquisition's clusters, which is reported, and the stream goes on: the next, smaller
/// acquisition is written (the stream stopped with exit 1 before). No temporary file is left.
#[test]
fn a_stream_survives_a_file_it_cannot_write() {
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
    let child = limited_stream(d, "trap '' XFSZ; ulimit -f 16", (port, &out, &dark), 2);
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
