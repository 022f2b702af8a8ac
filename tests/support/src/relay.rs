//! A `cluda stream` fed by a `cluda replay` over loopback, and the checks the stream tests
//! share: the options of a stream that loses nothing, no fault counted, a stream interrupted
//! mid-acquisition, a consumer too slow for its sender, the live sub-pixel image.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cluda::ClusterSize;
use cluda::io::read_cluster_file;

use crate::cli::s;
use crate::stream::{
    Done, Proc, free_ports, num, png_versions, spawn_parts_stream, spawn_replay, summaries,
    wanted_image, write_frames,
};

/// `--pedestal FILE --device DEVICE --acquisitions N --on-full block`, then `more`: the
/// options of a stream with a pedestal file that finds every frame a `--no-drop` replay sends
/// (its queue blocks rather than drop).
pub fn stream_args<'a>(
    pedestal: &'a Path,
    device: &'a str,
    acquisitions: &'a str,
    more: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["--pedestal", s(pedestal), "--device", device];
    args.extend(["--acquisitions", acquisitions, "--on-full", "block"]);
    args.extend_from_slice(more);
    args
}

/// The faults every acquisition summary counts: a clean stream has none of them.
pub const FAULTS: [&str; 5] = [
    "missing",
    "incomplete",
    "mismatched",
    "malformed",
    "dropped",
];

/// Fails the test unless the summary `m` counts 0 of every one of [`FAULTS`] and of `more`
/// (`restarts`, `late`, `duplicates`); `context` (stderr, say) is shown with a failure.
#[track_caller]
pub fn no_faults(m: &HashMap<String, String>, more: &[&str], context: &str) {
    for k in FAULTS.iter().chain(more) {
        assert_eq!(num(m, k), 0, "{k}: {context}");
    }
}

/// What a stream fed by one replay printed: both processes' output and the stream's
/// acquisition summaries.
pub struct Relayed {
    /// The stream's output.
    pub stream: Done,
    /// The replay's output.
    pub replay: Done,
    /// The stream's summary lines ([`summaries`]).
    pub sums: Vec<HashMap<String, String>>,
}

impl Relayed {
    /// Fails the test unless the replay says it sent `acquisitions` acquisitions of `frames`
    /// frames in all (its summary line's start).
    #[track_caller]
    pub fn assert_replayed(&self, acquisitions: usize, frames: u64) {
        let replayed = &self.replay.stdout;
        let want = format!("acquisitions={acquisitions} frames={frames} ");
        assert!(replayed.starts_with(&want), "{replayed}");
    }
}

/// Starts `cluda stream` on `parts` loopback endpoints (`--out-dir out`, then the options
/// `stream`), replays into it (`cluda replay` with the options `replay`, which say
/// `--interfaces` for several parts) and waits (at most `limit` each) for both to succeed.
/// Their output goes to `dir/<name>.out` and `dir/<name>-replay.out` (and `.err`).
pub fn relay(
    (dir, name): (&Path, &str),
    parts: usize,
    out: &Path,
    stream: &[&str],
    replay: &[&str],
    limit: Duration,
) -> Relayed {
    let port = free_ports(parts);
    let running = spawn_parts_stream(dir, name, port, parts, out, stream);
    let replay = spawn_replay(dir, &format!("{name}-replay"), port, replay).wait_ok(limit);
    let stream = running.wait_ok(limit);
    let sums = summaries(&stream.stdout);
    Relayed {
        stream,
        replay,
        sums,
    }
}

/// The cluster files (`*.clust`) in `dir`.
pub fn cluster_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("an output directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "clust"))
        .collect()
}

/// SIGINT to `stream` (started with `--pedestal-frames 20`, its replay `replay` sending 2,000
/// frames at a rate that takes seconds) once its data phase has started (a file in `out`) and
/// found frames for half a second: the exit code is 0, the one acquisition's summary says
/// `end=interrupted` after some but not all of the frames, and `out/run_0.clust` is a valid file
/// of every frame found (numbered from 20) with the clusters the summary counts. Returns the
/// stream's output and its summary.
#[track_caller]
pub fn interrupted(
    stream: Proc,
    mut replay: Proc,
    out: &Path,
    limit: Duration,
) -> (Done, HashMap<String, String>) {
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(out).map_or(0, |d| d.count()) == 0 {
        assert!(Instant::now() < until, "no data phase within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    stream.interrupt();
    let done = stream.wait(limit);
    let _ = replay.child.kill();
    let _ = replay.child.wait();
    assert_eq!(done.status.code(), Some(0), "{}", done.stderr);
    let mut sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    let m = sums.remove(0);
    assert_eq!(m["end"], "interrupted");
    let frames = num(&m, "frames");
    assert!(frames > 0 && frames < 1980, "{}", done.stdout);
    let file = out.join("run_0.clust");
    let (numbers, batch) = read_cluster_file(&file, ClusterSize::S3).expect("a valid file");
    assert_eq!(numbers, (20..20 + frames as i32).collect::<Vec<_>>());
    assert_eq!(batch.total() as u64, num(&m, "clusters"));
    (done, m)
}

/// 300 frames (48 x 64) replayed at 1,000 a second on `parts` endpoints into a stream whose
/// sink takes 20 ms a frame behind a queue of 4 (`--pedestal-frames 5`): more than 100 frames
/// are dropped, the frames found, the pedestal frames and the dropped ones add up to the 300
/// sent, and the file holds every frame found, in order. Returns the stream's output and its
/// summary.
#[track_caller]
pub fn slow_consumer(parts: usize, limit: Duration) -> (Done, HashMap<String, String>) {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let data = write_frames(d, "data", (48, 64), 0, 300, true);
    let out = d.join("out");
    let n = parts.to_string();
    let slow = "--pedestal-frames 5 --device cpu --acquisitions 1 --queue 4 --chunk 1";
    let mut stream: Vec<&str> = slow.split(' ').collect();
    stream.extend(["--slow-sink-us", "20000"]);
    let replay = ["--data", s(&data), "--rate", "1000", "--interfaces", &n];
    let mut run = relay((d, "slow"), parts, &out, &stream, &replay, limit);
    let m = run.sums.remove(0);
    let (done, dropped) = (run.stream, num(&m, "dropped"));
    assert!(dropped > 100, "{}", done.stdout);
    let found = num(&m, "frames") + num(&m, "pedestal_frames");
    assert_eq!(found + dropped, 300, "{}", done.stdout);
    let (numbers, _) = read_cluster_file(&out.join("run_0.clust"), ClusterSize::S3).expect("read");
    assert_eq!(numbers.len() as u64, num(&m, "frames"));
    assert!(numbers.windows(2).all(|w| w[0] < w[1]));
    (done, m)
}

/// A live sub-pixel image: `stream --eta --subpixels N --plot DIR` on `device`, fed by a
/// replay at `rate` frames a second.
pub struct LiveImage<'a> {
    /// The frames' shape.
    pub shape: (usize, usize),
    /// Dark frames (the pedestal file) and data frames streamed.
    pub frames: (usize, usize),
    /// `--device`.
    pub device: &'a str,
    /// `--subpixels`.
    pub subpixels: &'a str,
    /// `--plot-every` (seconds).
    pub every: &'a str,
    /// `replay --rate`.
    pub rate: &'a str,
    /// How long `image.png` is watched at the most.
    pub watch: Duration,
    /// How long each process may take.
    pub limit: Duration,
}

/// What a [`LiveImage`] run left: its directory, the stream's output, every version of
/// `image.png` seen while it ran, and the plot directory.
pub struct LiveImageRun {
    /// The run's temporary directory (the plots live in it).
    pub dir: tempfile::TempDir,
    /// The stream's output.
    pub done: Done,
    /// Every distinct `image.png` seen before the acquisition's summary.
    pub seen: Vec<Vec<u8>>,
    /// The stream's `--plot` directory.
    pub plots: PathBuf,
}

impl LiveImage<'_> {
    /// Runs the stream and checks what every live image run must show: nothing said "not
    /// drawn", `image.png` drawn at least twice before the acquisition ended, and the final
    /// `image.png` and the image file beside the cluster file byte for byte `cluda image`'s
    /// (with `--plot`) on the CPU.
    #[track_caller]
    pub fn run(&self) -> LiveImageRun {
        let dir = tempfile::tempdir().expect("dir");
        let d = dir.path();
        let (n_dark, n_data) = self.frames;
        let dark = write_frames(d, "dark", self.shape, 0, n_dark, false);
        let data = write_frames(d, "data", self.shape, n_dark as u64, n_data, true);
        let want = wanted_image(d, &dark, &data, self.subpixels, true);
        let want_plots = want.plots.expect("plots");
        let (out, plots) = (d.join("out"), d.join("plots"));
        let more = [
            ["--eta", s(&want.cube), "--subpixels", self.subpixels],
            ["--plot", s(&plots), "--plot-every", self.every],
        ]
        .concat();
        let port = free_ports(1);
        let args = stream_args(&dark, self.device, "1", &more);
        let stream = spawn_parts_stream(d, "stream", port, 1, &out, &args);
        let replay = ["--data", s(&data), "--rate", self.rate, "--no-drop"];
        let replay = spawn_replay(d, "replay", port, &replay);
        let seen = png_versions(&stream, &plots.join("image.png"), self.watch);
        assert!(replay.wait(self.limit).status.success());
        let done = stream.wait_ok(self.limit);
        assert!(!done.stderr.contains("not drawn"), "{}", done.stderr);
        assert!(
            seen.len() >= 2,
            "image.png was drawn {} times before the acquisition ended, not refreshed: {}",
            seen.len(),
            done.stderr
        );
        let got = std::fs::read(plots.join("image.png")).expect("the final image.png");
        let want_png = std::fs::read(want_plots.join("image.png")).expect("cluda image's");
        let same = got == want_png;
        assert!(
            same,
            "the final image.png differs from cluda image --plot's"
        );
        let got = std::fs::read(out.join("run_0.image.npy")).expect("the live image");
        let same = got == std::fs::read(&want.image).expect("cluda image's image");
        assert!(
            same,
            "live image differs from cluda image's: {}",
            done.stderr
        );
        LiveImageRun {
            dir,
            done,
            seen,
            plots,
        }
    }
}
