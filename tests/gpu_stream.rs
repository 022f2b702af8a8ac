//! `cluda stream --device gpu` over real ZMQ sockets: 2,000 MOENCH frames (400 x 400) replayed
//! and streamed give the same cluster file, byte for byte, as `cluda find` on the CPU; the GPU
//! finder is kept between acquisitions of one shape and reopened for another; the same frames
//! streamed as two parts on two endpoints give the same file too (ignored without a GPU; run on
//! the GPU host with `--include-ignored`).

use std::time::Duration;

use support::relay::{LiveImage, no_faults, relay, stream_args};
use support::stream::*;

const LIMIT: Duration = Duration::from_secs(300);

/// 2,000 MOENCH frames (400 x 400, after 1,000 dark ones) streamed on the GPU to `cluda
/// stream` on `parts` endpoints, once for each of `acquisitions` acquisitions, 3x3 and 9x9 with
/// the finder's `options`: every acquisition is counted whole with none of [`FAULTS`] or of
/// `more_faults`, on the GPU, and its cluster file is byte for byte `cluda find`'s on the CPU
/// with the same options.
///
/// [`FAULTS`]: support::relay::FAULTS
fn gpu_stream_equals_find(
    (parts, acquisitions): (usize, usize),
    options: &[&str],
    more_faults: &[&str],
) {
    let (dir, dark, data) = dark_and_data((400, 400), 1000, 2000);
    let d = dir.path();
    for size in ["3", "9"] {
        let options = [&["--cluster", size][..], options].concat();
        let name = format!("parts{parts}-{}", options.join(""));
        let out = d.join(&name);
        let (n, a) = (parts.to_string(), acquisitions.to_string());
        let args = stream_args(&dark, "gpu", &a, &options);
        let replay = [
            "--data",
            s(&data),
            "--acquisitions",
            &a,
            "--interfaces",
            &n,
            "--no-drop",
        ];
        let run = relay((d, &name), parts, &out, &args, &replay, LIMIT);
        let done = &run.stream;
        assert!(done.stderr.contains("device: gpu"), "{}", done.stderr);
        assert_eq!(run.sums.len(), acquisitions, "{}", done.stdout);
        let want = find_bytes(
            d,
            &dark,
            &data,
            &[&["--device", "cpu"], &options[..]].concat(),
        );
        for (m, i) in run.sums.iter().zip(0..) {
            assert_eq!(num(m, "frames"), 2000, "{}", done.stdout);
            assert_eq!(m["device"], "gpu");
            no_faults(m, more_faults, &done.stderr);
            let got = std::fs::read(out.join(format!("run_{i}.clust"))).expect("file");
            assert!(
                got == want,
                "size {size}, {parts} part(s), acquisition {i}: GPU stream differs from CPU find"
            );
        }
        eprintln!("size {size}, {parts} part(s): {}", done.stdout.trim());
    }
}

/// 2,000 MOENCH frames in each of two acquisitions (3x3 and 9x9): the GPU stream's files are
/// `cluda find`'s on the CPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_stream_equals_cpu_find() {
    gpu_stream_equals_find((1, 2), &[], &[]);
}

/// The same frames sent as two parts (`replay --interfaces 2`: 400 x 200 halves on two ports,
/// as a MOENCH with two UDP interfaces streams them) into `cluda stream --device gpu` on two
/// endpoints: the parts are placed into one frame and the cluster file is `cluda find`'s on
/// the whole frames on the CPU, byte for byte (3x3 and 9x9, F64).
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_two_part_stream_equals_cpu_find() {
    gpu_stream_equals_find((2, 1), &["--precision", "f64"], &["late"]);
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
    // 1,200 frames at 300 Hz: four seconds of refreshes every 0.5 s.
    let run = LiveImage {
        shape: (400, 400),
        frames: (1000, 1200),
        device: "gpu",
        subpixels: "5",
        every: "0.5",
        rate: "300",
        watch: Duration::from_secs(120),
        limit: LIMIT,
    }
    .run();
    let done = &run.done;
    assert!(done.stderr.contains("device: gpu"), "{}", done.stderr);
    assert!(
        !done.stderr.contains("no more live copies"),
        "{}",
        done.stderr
    );
    println!(
        "image.png drawn {} times while the acquisition ran",
        run.seen.len()
    );
}
