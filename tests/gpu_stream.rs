//! `cluda stream --device gpu` over real ZMQ sockets: 2,000 MOENCH frames (400 x 400) replayed
//! and streamed give the same cluster file, byte for byte, as `cluda find` on the CPU (ignored
//! without a GPU; run on the GPU host with `--include-ignored`).

mod stream_support;

use std::time::Duration;

use stream_support::*;

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
        let stream = spawn(
            d,
            &format!("stream{size}"),
            &[
                "stream",
                "--zmq",
                &format!("tcp://127.0.0.1:{port}"),
                "--out-dir",
                s(&out),
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
        let replay = spawn(
            d,
            &format!("replay{size}"),
            &[
                "replay",
                "--zmq",
                &format!("tcp://127.0.0.1:{port}"),
                "--data",
                s(&data),
                "--acquisitions",
                "2",
                "--no-drop",
            ],
        )
        .wait(Duration::from_secs(300));
        assert!(replay.status.success(), "{}", replay.stderr);
        let done = stream.wait(Duration::from_secs(300));
        assert!(done.status.success(), "{}", done.stderr);
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
