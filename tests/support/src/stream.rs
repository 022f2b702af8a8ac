//! Running `cluda` as processes (`cluda stream` and `cluda replay` on loopback sockets, `cluda
//! find` to compare with), for the stream, raw and hostile tests: output to files (a chatty
//! process cannot fill a pipe and stall), a bounded wait, signals; generated `.npy` inputs and
//! the summary lines a stream prints.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cluda::generate::{GenConfig, Generator};
use cluda::io::npy;

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("address").port()
}

pub use crate::cli::{Cli, cluda_bin, s};

/// A running `cluda` process whose stdout and stderr go to files in `dir`.
pub struct Proc {
    pub child: Child,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    /// The directory of the output files when the process has one of its own
    /// ([`spawn_scratch`]); removed when the process is dropped.
    scratch: Option<tempfile::TempDir>,
}

/// What a finished process printed.
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Done {
    /// Fails the test (showing the whole standard error) unless the process's standard error
    /// holds every one of `fragments`.
    #[track_caller]
    pub fn assert_stderr_has(&self, fragments: &[&str]) {
        for f in fragments {
            assert!(self.stderr.contains(f), "`{f}` not in: {}", self.stderr);
        }
    }
}

/// Starts `cluda args...` with its output in `dir/<name>.out` and `.err`.
pub fn spawn(dir: &Path, name: &str, args: &[&str]) -> Proc {
    let mut command = Command::new(cluda_bin());
    command.args(args);
    start(dir, name, command)
}

/// [`spawn`] with the output files in a temporary directory of the process's own.
pub fn spawn_scratch(args: &[&str]) -> Proc {
    let dir = tempfile::tempdir().expect("scratch dir");
    let mut p = spawn(dir.path(), "cluda", args);
    p.scratch = Some(dir);
    p
}

/// Runs the shell script `script` (`sh -c`, e.g. `ulimit ... && exec cluda ...`; see
/// [`cluda_bin`]) with its output in `dir/<name>.out` and `.err`.
pub fn spawn_sh(dir: &Path, name: &str, script: &str) -> Proc {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    start(dir, name, command)
}

fn start(dir: &Path, name: &str, mut command: Command) -> Proc {
    let stdout = dir.join(format!("{name}.out"));
    let stderr = dir.join(format!("{name}.err"));
    let child = command
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).expect("stdout file"))
        .stderr(File::create(&stderr).expect("stderr file"))
        .spawn()
        .expect("cluda starts");
    Proc {
        child,
        stdout,
        stderr,
        scratch: None,
    }
}

/// Runs `cluda args...` ([`spawn_scratch`]) for at most `limit` (a hang fails the test),
/// expecting a user error ([`user_error`](crate::cli::user_error)). Returns stderr.
#[track_caller]
pub fn fails_within(limit: Duration, args: &[&str], want: &[&str]) -> String {
    let o = spawn_scratch(args).wait(limit);
    crate::cli::user_error(args, o.status, &o.stdout, &o.stderr, want)
}

/// `tcp://127.0.0.1:<port>`, the loopback endpoint the tests stream over.
pub fn loopback(port: u16) -> String {
    format!("tcp://127.0.0.1:{port}")
}

/// Starts `cluda stream --zmq <loopback port> --out-dir <out> args...` (see [`spawn`]): the
/// part of every stream the tests start that does not vary.
pub fn spawn_stream(dir: &Path, name: &str, port: u16, out: &Path, args: &[&str]) -> Proc {
    let zmq = loopback(port);
    let mut all = vec!["stream", "--zmq", &zmq, "--out-dir", s(out)];
    all.extend_from_slice(args);
    spawn(dir, name, &all)
}

/// `n` consecutive loopback ports that were free a moment ago.
pub fn free_ports(n: usize) -> u16 {
    for _ in 0..100 {
        let first = free_port();
        let all_free = (0..n as u16).all(|i| {
            first
                .checked_add(i)
                .is_some_and(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        });
        if all_free {
            return first;
        }
    }
    panic!("no {n} consecutive free ports");
}

/// `--zmq` arguments for `n` endpoints from `port` on.
pub fn zmq_args(port: u16, n: usize) -> Vec<String> {
    (0..n as u16)
        .flat_map(|i| ["--zmq".to_string(), loopback(port + i)])
        .collect()
}

/// Starts `cluda stream --zmq <port> --zmq <port + 1> ... --out-dir <out> args...` on `n`
/// endpoints (see [`spawn`]).
pub fn spawn_parts_stream(
    d: &Path,
    name: &str,
    port: u16,
    n: usize,
    out: &Path,
    args: &[&str],
) -> Proc {
    let zmq = zmq_args(port, n);
    let mut all: Vec<&str> = vec!["stream"];
    all.extend(zmq.iter().map(String::as_str));
    all.extend(["--out-dir", s(out)]);
    all.extend_from_slice(args);
    spawn(d, name, &all)
}

/// Starts `cluda replay --zmq <loopback port> args...` (see [`spawn`]).
pub fn spawn_replay(dir: &Path, name: &str, port: u16, args: &[&str]) -> Proc {
    let zmq = loopback(port);
    let mut all = vec!["replay", "--zmq", &zmq];
    all.extend_from_slice(args);
    spawn(dir, name, &all)
}

impl Proc {
    /// [`Proc::wait`], then fails the test (showing stderr) unless the process succeeded.
    #[track_caller]
    pub fn wait_ok(self, limit: Duration) -> Done {
        let done = self.wait(limit);
        assert!(done.status.success(), "{}", done.stderr);
        done
    }

    /// Waits at most `limit` for the process to end (killing it and failing the test after
    /// that), then returns what it printed.
    pub fn wait(mut self, limit: Duration) -> Done {
        let until = Instant::now() + limit;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "cluda did not end within {limit:?}; stdout:\n{}\nstderr:\n{}",
                    std::fs::read_to_string(&self.stdout).unwrap_or_default(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Done {
            status,
            stdout: std::fs::read_to_string(&self.stdout).expect("stdout"),
            stderr: std::fs::read_to_string(&self.stderr).expect("stderr"),
        }
    }

    /// What it printed on stdout so far.
    pub fn stdout_now(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// Sends SIGINT.
    pub fn interrupt(&self) {
        assert!(self.signal(libc::SIGINT), "kill(SIGINT)");
    }

    /// Sends signal `sig`; whether it was sent (not when the process has ended and been
    /// reaped).
    pub fn signal(&self, sig: i32) -> bool {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with the pid of a child this test started and has not reaped.
        unsafe { libc::kill(pid, sig) == 0 }
    }
}

/// The `key=value` pairs of every stdout line that starts with `acquisition=`.
pub fn summaries(stdout: &str) -> Vec<HashMap<String, String>> {
    stdout
        .lines()
        .filter(|l| l.starts_with("acquisition="))
        .map(|l| {
            l.split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// A summary's value as a number.
pub fn num(m: &HashMap<String, String>, key: &str) -> u64 {
    m.get(key)
        .unwrap_or_else(|| panic!("no {key} in {m:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {m:?}"))
}

/// Writes `frames` generated `rows x cols` frames (`first` onwards; dark or with photons)
/// as `dir/name.npy`.
pub fn write_frames(
    dir: &Path,
    name: &str,
    (rows, cols): (usize, usize),
    first: u64,
    frames: usize,
    photons: bool,
) -> PathBuf {
    let g = Generator::new(GenConfig::new(rows, cols, 7)).expect("generator");
    let data = g.frames(first, frames, photons);
    let p = dir.join(format!("{name}.npy"));
    npy::write_u16_3d(&p, frames, rows, cols, &data).expect("write npy");
    p
}

/// A temporary directory holding `dark` generated dark frames of `shape` (`dark.npy`) and
/// the `data` frames with photons that follow them (`data.npy`, from frame `dark` on): the
/// inputs of most stream tests. Returns the directory and the two paths.
pub fn dark_and_data(
    shape: (usize, usize),
    dark: usize,
    data: usize,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let dark_file = write_frames(dir.path(), "dark", shape, 0, dark, false);
    let data_file = write_frames(dir.path(), "data", shape, dark as u64, data, true);
    (dir, dark_file, data_file)
}

/// Runs `cluda find` on the same pedestal and data (extra finder options in `extra`) and
/// returns its cluster file's bytes.
pub fn find_bytes(dir: &Path, pedestal: &Path, data: &Path, extra: &[&str]) -> Vec<u8> {
    let out = dir.join("find.clust");
    let mut args = vec![
        "find",
        "--pedestal",
        s(pedestal),
        "--data",
        s(data),
        "--out",
        s(&out),
        "--overwrite",
    ];
    args.extend_from_slice(extra);
    Cli::found().ok(&args);
    std::fs::read(&out).expect("find's cluster file")
}

/// Writes one acquisition of `dark + data` generated frames of `shape` as `dir/<name>.npy`
/// (dark frames first), and the same frames as `<name>_dark.npy` and `<name>_data.npy` for
/// `cluda find`.
pub fn write_acquisition(
    dir: &Path,
    name: &str,
    shape: (usize, usize),
    dark: usize,
    data: usize,
) -> [PathBuf; 3] {
    let g = Generator::new(GenConfig::new(shape.0, shape.1, 11)).expect("generator");
    let (d, f) = (g.frames(0, dark, false), g.frames(dark as u64, data, true));
    let write = |n: String, frames: usize, px: &[u16]| {
        let p = dir.join(format!("{n}.npy"));
        npy::write_u16_3d(&p, frames, shape.0, shape.1, px).expect("write npy");
        p
    };
    let both: Vec<u16> = d.iter().chain(&f).copied().collect();
    [
        write(name.to_string(), dark + data, &both),
        write(format!("{name}_dark"), dark, &d),
        write(format!("{name}_data"), data, &f),
    ]
}

/// Streams acquisitions of `shape`, `shape`, `other` and `shape` (60 pedestal frames of their
/// own and 150 data frames each) on `device`: the finder is kept while the shape stays and
/// reopened when it changes (a note says so, once per change), and every file holds `cluda
/// find`'s clusters (on the CPU) for the acquisition's frames, numbered as streamed (after its
/// pedestal frames).
pub fn finder_kept_while_the_shape_stays(
    device: &str,
    shape: (usize, usize),
    other: (usize, usize),
) {
    let limit = Duration::from_secs(300);
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (dark, data) = (60, 150);
    let a = write_acquisition(d, "a", shape, dark, data);
    let b = write_acquisition(d, "b", other, dark, data);
    let port = free_port();
    let out = d.join("out");
    let mut args = vec!["--pedestal-frames", "60", "--device", device];
    args.extend(["--acquisitions", "4", "--on-full", "block"]);
    let stream = spawn_stream(d, "shapes", port, &out, &args);
    spawn_replay(
        d,
        "replay-shapes",
        port,
        &[
            "--data",
            s(&a[0]),
            "--data",
            s(&a[0]),
            "--data",
            s(&b[0]),
            "--data",
            s(&a[0]),
            "--no-drop",
        ],
    )
    .wait_ok(limit);
    let done = stream.wait_ok(limit);
    let sums = summaries(&done.stdout);
    assert_eq!(sums.len(), 4, "{}", done.stdout);
    let reopened: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("the finder is reopened"))
        .collect();
    assert_eq!(reopened.len(), 2, "{}", done.stderr);
    assert!(
        reopened[0].contains(&format!(
            "acquisition 2: frames of {} x {}",
            other.0, other.1
        )),
        "{reopened:?}"
    );
    assert!(
        reopened[1].contains(&format!(
            "acquisition 3: frames of {} x {}",
            shape.0, shape.1
        )),
        "{reopened:?}"
    );
    let want_a = find_bytes(d, &a[1], &a[2], &["--device", "cpu"]);
    let want_b = find_bytes(d, &b[1], &b[2], &["--device", "cpu"]);
    for (i, (m, want)) in sums
        .iter()
        .zip([&want_a, &want_a, &want_b, &want_a])
        .enumerate()
    {
        assert_eq!(num(m, "acquisition"), i as u64);
        assert_eq!(m["kind"], "data");
        assert_eq!(m["device"], device, "{}", done.stderr);
        assert_eq!(
            (num(m, "pedestal_frames"), num(m, "frames")),
            (60, 150),
            "{i}"
        );
        let file = out.join(format!("run_{i}.clust"));
        let (numbers, batch) =
            cluda::io::read_cluster_file(&file, cluda::ClusterSize::S3).expect("read");
        assert_eq!(numbers, (60..210).collect::<Vec<i32>>(), "{i}");
        let find_file = d.join(format!("find_{i}.clust"));
        std::fs::write(&find_file, want).expect("write");
        let (find_numbers, find_batch) =
            cluda::io::read_cluster_file(&find_file, cluda::ClusterSize::S3).expect("read");
        assert_eq!(find_numbers, (0..150).collect::<Vec<i32>>());
        assert!(batch == find_batch, "acquisition {i} differs from find");
        assert!(batch.total() > 0, "{i}: no clusters to compare");
    }
}

/// What `cluda eta` and `cluda image` (both on the CPU) make of the same frames: the live
/// sub-pixel image of `stream --eta` is compared with them.
pub struct WantedImage {
    /// The eta cube (`DIR/eta.npz`).
    pub cube: PathBuf,
    /// The sub-pixel image (`DIR/want.npy`).
    pub image: PathBuf,
    /// The plot directory of `image --plot` (`DIR/want-plots`), when asked for.
    pub plots: Option<PathBuf>,
}

/// Runs `cluda eta` on `dark` and `data`, then `cluda image` with that cube and `subpixels`
/// (and `--plot DIR/want-plots` when `plots`), all on the CPU, in `dir`.
pub fn wanted_image(
    dir: &Path,
    dark: &Path,
    data: &Path,
    subpixels: &str,
    plots: bool,
) -> WantedImage {
    let cube = dir.join("eta.npz");
    Cli::found().ok(&[
        "eta",
        "--pedestal",
        s(dark),
        "--data",
        s(data),
        "--out",
        s(&cube),
        "--device",
        "cpu",
    ]);
    let image = dir.join("want.npy");
    let plots = plots.then(|| dir.join("want-plots"));
    let mut args = vec![
        "image",
        "--pedestal",
        s(dark),
        "--data",
        s(data),
        "--eta",
        s(&cube),
        "--subpixels",
        subpixels,
        "--out",
        s(&image),
        "--device",
        "cpu",
    ];
    if let Some(p) = plots.as_deref() {
        args.extend(["--plot", s(p)]);
    }
    Cli::found().ok(&args);
    WantedImage { cube, image, plots }
}

/// Every distinct version of the file `png` seen while `stream` runs (read every 20 ms until
/// its stdout has an acquisition's summary, or `limit`).
pub fn png_versions(stream: &Proc, png: &Path, limit: Duration) -> Vec<Vec<u8>> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let until = Instant::now() + limit;
    while Instant::now() < until && !stream.stdout_now().contains("acquisition=") {
        if let Ok(bytes) = std::fs::read(png)
            && seen.last() != Some(&bytes)
        {
            seen.push(bytes);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}
