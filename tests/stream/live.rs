//! What a stream draws and counts while it runs: live plots, the sub-pixel image and eta cube
//! of `--eta`, refreshed as photons come.

use std::time::Duration;

use support::files::listing;
use support::relay::{LiveImage, relay, stream_args};
use support::stream::*;

use crate::{LIMIT, SHAPE};

/// `--plot DIR`: the spectrum and hit map of the acquisition are drawn while it runs and when it
/// ends, as whole PNG files (no temporary file left).
#[test]
fn live_plots_are_drawn() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", SHAPE, 0, 400, true);
    let port = free_port();
    let plots = d.join("plots");
    let mut args = support::cli::words("--pedestal-frames 50 --device cpu --acquisitions 1");
    args.extend(["--plot", s(&plots), "--plot-every", "0.2"]);
    let stream = spawn_stream(d, "plots", port, &d.join("out"), &args);
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
    let names = listing(&plots);
    assert_eq!(names, ["hitmap.png", "spectrum.png"]);
    for n in names {
        let bytes = std::fs::read(plots.join(&n)).expect("png");
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000,
            "{n}"
        );
    }
}

/// `stream --eta --eta-out`: each data acquisition's sub-pixel image beside its cluster file
/// equals `cluda image` on the same frames, and the live eta cube equals `cluda eta`'s.
#[test]
fn live_images_and_cube_equal_the_commands() {
    let (dir, dark, data) = dark_and_data(SHAPE, 300, 400);
    let d = dir.path();
    let want = wanted_image(d, &dark, &data, "3", false);
    let (cube, want_image) = (want.cube, want.image);
    let out = d.join("out");
    let live_cube = d.join("live.npz");
    let more = [
        "--eta",
        s(&cube),
        "--subpixels",
        "3",
        "--eta-out",
        s(&live_cube),
    ];
    let args = stream_args(&dark, "cpu", "1", &more);
    let replay = ["--data", s(&data), "--no-drop"];
    let done = relay((d, "stream"), 1, &out, &args, &replay, LIMIT).stream;
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
    // 600 frames at 200 Hz: three seconds of refreshes every 0.2 s.
    let run = LiveImage {
        shape: SHAPE,
        frames: (300, 600),
        device: "cpu",
        subpixels: "3",
        every: "0.2",
        rate: "200",
        watch: Duration::from_secs(60),
        limit: LIMIT,
    }
    .run();
    for bytes in &run.seen {
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 1000);
    }
    assert_eq!(
        listing(&run.plots),
        ["hitmap.png", "image.png", "spectrum.png"]
    );
}
