//! `cluda stream --device gpu` over real ZMQ sockets: 2,000 MOENCH frames (400 x 400) replayed
//! and streamed give the same cluster file, byte for byte, as `cluda find` on the CPU; the GPU
//! finder is kept between acquisitions of one shape and reopened for another; the same frames
//! streamed as two parts on two endpoints give the same file too (ignored without a GPU; run on
//! the GPU host with `--include-ignored`).

use std::time::Duration;

use support::stream::*;

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_stream_equals_cpu_find() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (400, 400);
    let dark = write_frames(d, "dark", shape, 0, 1000, false);
    let data = write_frames(d, "data", shape, 1000, 2000, true);
    for size in ["3", "9"] {
        let port = free_port();
        let out = d.join(format!("out{size}"));
        let stream = spawn_stream(
            d,
            &format!("stream{size}"),
            port,
            &out,
            &[
                "--pedestal",
                s(&dark),
                "--device",
                "gpu",
                "--cluster",
                size,
                "--acquisitions",
                "2",
                "--on-full",
                "block",
            ],
        );
        spawn_replay(
            d,
            &format!("replay{size}"),
            port,
            &["--data", s(&data), "--acquisitions", "2", "--no-drop"],
        )
        .wait_ok(Duration::from_secs(300));
        let done = stream.wait_ok(Duration::from_secs(300));
        assert!(done.stderr.contains("device: gpu"), "{}", done.stderr);
        let sums = summaries(&done.stdout);
        assert_eq!(sums.len(), 2, "{}", done.stdout);
        let want = find_bytes(d, &dark, &data, &["--device", "cpu", "--cluster", size]);
        for (m, i) in sums.iter().zip(0..) {
            assert_eq!(num(m, "frames"), 2000, "{}", done.stdout);
            assert_eq!(m["device"], "gpu");
            for k in [
                "missing",
                "incomplete",
                "mismatched",
                "malformed",
                "dropped",
            ] {
                assert_eq!(num(m, k), 0, "{k}: {}", done.stderr);
            }
            let got = std::fs::read(out.join(format!("run_{i}.clust"))).expect("file");
            assert!(
                got == want,
                "size {size}, acquisition {i}: GPU stream differs from CPU find"
            );
        }
        eprintln!("size {size}: {}", done.stdout.trim());
    }
}

/// The same frames sent as two parts (`replay --interfaces 2`: 400 x 200 halves on two ports,
/// as a MOENCH with two UDP interfaces streams them) into `cluda stream --device gpu` on two
/// endpoints: the parts are placed into one frame and the cluster file is `cluda find`'s on
/// the whole frames on the CPU, byte for byte (3x3 and 9x9, F64).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_two_part_stream_equals_cpu_find() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (400, 400);
    let dark = write_frames(d, "dark", shape, 0, 1000, false);
    let data = write_frames(d, "data", shape, 1000, 2000, true);
    for size in ["3", "9"] {
        let port = free_ports(2);
        let out = d.join(format!("parts{size}"));
        let stream = spawn_parts_stream(
            d,
            &format!("parts{size}"),
            port,
            2,
            &out,
            &[
                "--pedestal",
                s(&dark),
                "--device",
                "gpu",
                "--cluster",
                size,
                "--precision",
                "f64",
                "--acquisitions",
                "1",
                "--on-full",
                "block",
            ],
        );
        spawn_replay(
            d,
            &format!("replay-parts{size}"),
            port,
            &["--data", s(&data), "--interfaces", "2", "--no-drop"],
        )
        .wait_ok(Duration::from_secs(300));
        let done = stream.wait_ok(Duration::from_secs(300));
        assert!(done.stderr.contains("device: gpu"), "{}", done.stderr);
        let sums = summaries(&done.stdout);
        assert_eq!(sums.len(), 1, "{}", done.stdout);
        let m = &sums[0];
        assert_eq!(num(m, "frames"), 2000, "{}", done.stdout);
        for k in [
            "missing",
            "incomplete",
            "mismatched",
            "malformed",
            "dropped",
            "late",
        ] {
            assert_eq!(num(m, k), 0, "{k}: {}", done.stderr);
        }
        let want = find_bytes(
            d,
            &dark,
            &data,
            &["--device", "cpu", "--cluster", size, "--precision", "f64"],
        );
        let got = std::fs::read(out.join("run_0.clust")).expect("file");
        assert!(
            got == want,
            "size {size}: two-part GPU stream differs from CPU find"
        );
        eprintln!("size {size}, two parts: {}", done.stdout.trim());
    }
}

/// The GPU finder kept from one acquisition to the next while the shape stays (its device
/// pedestal refilled from each acquisition's own first frames, its pipeline's buffers kept) and
/// reopened for another shape: every file is `cluda find`'s on the CPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_finder_kept_while_the_shape_stays() {
    finder_kept_while_the_shape_stays("gpu", (400, 400), (200, 256));
}

/// `stream --device gpu --eta --subpixels 5 --plot`: the image counted on the device is read
/// mid-acquisition (the finder's peek between chunks) and `image.png` refreshed while it runs;
/// the final `image.png` and the image file beside the cluster file are `cluda image`'s on the
/// CPU, byte for byte.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_stream_live_image_is_refreshed_and_equals_cpu_image() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let shape = (400, 400);
    let dark = write_frames(d, "dark", shape, 0, 1000, false);
    let data = write_frames(d, "data", shape, 1000, 1200, true);
    let want = wanted_image(d, &dark, &data, "5", true);
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
            "gpu",
            "--acquisitions",
            "1",
            "--on-full",
            "block",
            "--eta",
            s(&cube),
            "--subpixels",
            "5",
            "--plot",
            s(&plots),
            "--plot-every",
            "0.5",
        ],
    );
    // 1,200 frames at 300 Hz: four seconds of refreshes every 0.5 s.
    let replay = spawn_replay(
        d,
        "replay",
        port,
        &["--data", s(&data), "--rate", "300", "--no-drop"],
    );
    let png = plots.join("image.png");
    let seen = png_versions(&stream, &png, Duration::from_secs(120));
    assert!(replay.wait(Duration::from_secs(300)).status.success());
    let done = stream.wait_ok(Duration::from_secs(300));
    assert!(done.stderr.contains("device: gpu"), "{}", done.stderr);
    assert!(!done.stderr.contains("not drawn"), "{}", done.stderr);
    assert!(
        !done.stderr.contains("no more live copies"),
        "{}",
        done.stderr
    );
    assert!(
        seen.len() >= 2,
        "image.png was drawn {} times before the acquisition ended, not refreshed: {}",
        seen.len(),
        done.stderr
    );
    println!(
        "image.png drawn {} times while the acquisition ran",
        seen.len()
    );
    let got = std::fs::read(&png).expect("the final image.png");
    let want = std::fs::read(want_plots.join("image.png")).expect("cluda image's image.png");
    assert!(
        got == want,
        "the final image.png differs from cluda image --plot's"
    );
    let got = std::fs::read(out.join("run_0.image.npy")).expect("the live image");
    assert!(
        got == std::fs::read(&want_image).unwrap(),
        "the stream's image differs from cluda image's: {}",
        done.stderr
    );
}
