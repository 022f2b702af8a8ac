//! aare beside cluda: aare's own cluster finders and `cluda find` on the same generated `.npy`
//! files, in the same run, rounds interleaved, so that every comparison with aare the README
//! makes comes with the command that made it.
//!
//! ```text
//! tools/aare-build                 # once: builds aare-find from aare's PyPI sdist
//! cargo bench --bench peers -- [--frames 20000] [--pedestal-frames 1000] [--sizes 3,9]
//!     [--devices cpu,gpu] [--rounds 3] [--threads N] [--single] [--threshold live|frozen]
//!     [--check-frames N]
//!     [--aare PATH]... [--cluda PATH] [--data-dir DIR] [--out DIR]
//! ```
//!
//! Rows per size, each a fresh process per round, the order rotated from round to round:
//! - `aare ClusterFinderMT`: `aare-find` (tools/aare-build.d/aare_find.cpp), aare's
//!   `ClusterFinderMT` fed frame by frame from a mapped file, its sink drained and counted;
//!   `--threads N` threads (default: every core). Once per `--aare PATH` (e.g. the portable
//!   and the `--native` build of tools/aare-build).
//! - `cluda find --device D` for each of `--devices` (default `cpu`), clusters counted, not
//!   written (`--threads N` passed to the CPU finder when given), with `--threshold` (default
//!   `live`, cluda's default; `frozen` is aare's threshold, so that both find the same clusters).
//! - with `--single`: aare's `ClusterFinder` on one thread and `cluda find --device cpu
//!   --threads 1`.
//!
//! `us/frame` is each command's data phase: from the first data frame to the last cluster
//! counted (aare-find's `seconds`; cluda's `--timing` data phase), the pedestal not included;
//! `wall` is the whole process. Both read the same page-cached file through a map, with the
//! same parameters: n_sigma 5, every pedestal frame in the pedestal, an S x S window, F64.
//!
//! The check (`--check-frames N`, default `min(--frames, 2000)`; 0: none): on N generated
//! frames, aare's `ClusterFinderMT` on one thread (the single finder's clusters: with more
//! threads each keeps its own pedestal) writes aare's cluster file with aare's `ClusterFile`,
//! and `cluda find --threshold frozen` (aare's threshold: the noise when the pedestal filled)
//! writes cluda's, on every device of `--devices`; the files must be byte-identical. A
//! difference fails the bench after the tables are written.
//!
//! `--cluda`: by default `$CLUDA_BIN`, the `cluda` cargo built, or the one beside this bench;
//! `--aare`: by default `$AARE_FIND`, the `aare-find` beside this bench, or tools/aare-build's.
//!
//! On the GPU machine (no Rust there): here `tools/gpu-pack tools/gpu-user-path &&
//! tools/aare-build --stage`, there `tools/gpu-user-path peers` (or `.gpu/bin/peers --devices
//! gpu,cpu --out DIR`: it finds `cluda` and `aare-find` beside it).
//!
//! Results: `peers.md` (tables, command, CPU, aare's version) and `peers.csv` (one row per
//! run: `size,run,round,us_per_frame,wall_s,clusters`) under `--out`
//! (default `bench-results/peers`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use support::cli::cluda_bin;
use support::peers::{aare_find, field};

/// The bench's options (see the module's documentation).
struct Opts {
    frames: usize,
    pedestal_frames: usize,
    sizes: Vec<usize>,
    devices: Vec<String>,
    rounds: usize,
    threads: Option<usize>,
    single: bool,
    threshold: String,
    check_frames: Option<usize>,
    aare: Vec<PathBuf>,
    cluda: PathBuf,
    data_dir: PathBuf,
    out: PathBuf,
}

fn number(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .map_err(|_| format!("{flag} {v}: want a whole number"))
}

fn options() -> Result<Opts, String> {
    let mut o = Opts {
        frames: 20_000,
        pedestal_frames: 1000,
        sizes: vec![3, 9],
        devices: vec!["cpu".into()],
        rounds: 3,
        threads: None,
        single: false,
        threshold: "live".into(),
        check_frames: None,
        aare: Vec::new(),
        cluda: cluda_bin(),
        data_dir: std::env::temp_dir().join("cluda-peers"),
        out: PathBuf::from("bench-results/peers"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--bench" || flag == "--single" {
            o.single |= flag == "--single";
            continue;
        }
        let v = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--frames" => o.frames = number(&flag, &v)?,
            "--pedestal-frames" => o.pedestal_frames = number(&flag, &v)?,
            "--rounds" => o.rounds = number(&flag, &v)?,
            "--threads" => o.threads = Some(number(&flag, &v)?),
            "--check-frames" => o.check_frames = Some(number(&flag, &v)?),
            "--sizes" => {
                o.sizes = v
                    .split(',')
                    .map(|s| number(&flag, s))
                    .collect::<Result<_, _>>()?
            }
            "--devices" => o.devices = v.split(',').map(str::to_owned).collect(),
            "--threshold" if v == "live" || v == "frozen" => o.threshold = v,
            "--aare" => o.aare.push(v.into()),
            "--cluda" => o.cluda = v.into(),
            "--data-dir" => o.data_dir = v.into(),
            "--out" => o.out = v.into(),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if o.frames == 0 || o.pedestal_frames == 0 || o.rounds == 0 || o.threads == Some(0) {
        return Err(
            "--frames, --pedestal-frames, --rounds and --threads must be at least 1".into(),
        );
    }
    if let Some(bad) = o.sizes.iter().find(|s| ![3, 5, 7, 9].contains(*s)) {
        return Err(format!("--sizes: {bad} is not 3, 5, 7 or 9"));
    }
    if let Some(bad) = o.devices.iter().find(|d| *d != "cpu" && *d != "gpu") {
        return Err(format!("--devices: {bad} is not cpu or gpu"));
    }
    if o.aare.is_empty() {
        o.aare.push(
            aare_find().ok_or("aare-find not found: run tools/aare-build (or pass --aare PATH)")?,
        );
    }
    Ok(o)
}

/// Who runs: one row of the tables.
#[derive(Clone)]
enum Who {
    /// aare-find: `--finder mt` with `--threads` when given, or `--finder single`.
    Aare {
        exe: PathBuf,
        threads: Option<usize>,
        single: bool,
    },
    /// `cluda find` on a device, with `--threads` when given, and `--threshold`.
    Cluda {
        device: String,
        threads: Option<usize>,
        threshold: String,
    },
}

/// One process's numbers.
struct Run {
    us_per_frame: f64,
    wall_s: f64,
    clusters: u64,
    /// The summary line (aare-find's, or cluda's) for the record.
    line: String,
}

impl Who {
    /// The row's name in the tables.
    fn label(&self) -> String {
        let t = |n: Option<usize>| n.map_or("every core".to_owned(), |n| format!("{n} threads"));
        let exe = |p: &Path| {
            p.file_name().map_or(p.display().to_string(), |n| {
                n.to_string_lossy().into_owned()
            })
        };
        match self {
            Who::Aare {
                exe: p,
                single: true,
                ..
            } => {
                format!("aare ClusterFinder, 1 thread ({})", exe(p))
            }
            Who::Aare {
                exe: p, threads, ..
            } => {
                format!("aare ClusterFinderMT, {} ({})", t(*threads), exe(p))
            }
            Who::Cluda {
                device,
                threads,
                threshold,
            } => {
                let frozen = if threshold == "live" {
                    ""
                } else {
                    " --threshold frozen"
                };
                let on = match threads {
                    Some(1) => " --threads 1".to_owned(),
                    _ if device == "cpu" => format!(", {}", t(*threads)),
                    _ => String::new(),
                };
                format!("cluda find --device {device}{frozen}{on}")
            }
        }
    }

    /// The command on `ped` and `data`, window `size`; `extra` arguments appended.
    fn command(&self, o: &Opts, ped: &Path, data: &Path, size: usize, extra: &[&str]) -> Command {
        let mut c;
        match self {
            Who::Aare {
                exe,
                threads,
                single,
            } => {
                c = Command::new(exe);
                c.args(["--finder", if *single { "single" } else { "mt" }]);
                if let (false, Some(n)) = (*single, threads) {
                    c.args(["--threads", &n.to_string()]);
                }
            }
            Who::Cluda {
                device,
                threads,
                threshold,
            } => {
                c = Command::new(&o.cluda);
                c.args(["find", "--timing", "--device", device]);
                c.args(["--threshold", threshold]);
                if let Some(n) = threads {
                    c.args(["--threads", &n.to_string()]);
                }
            }
        }
        c.arg("--pedestal").arg(ped).arg("--data").arg(data);
        c.args(["--cluster", &size.to_string()]).args(extra);
        c
    }

    /// Runs the command; its numbers.
    fn run(
        &self,
        o: &Opts,
        ped: &Path,
        data: &Path,
        size: usize,
        extra: &[&str],
    ) -> Result<Run, String> {
        let mut c = self.command(o, ped, data, size, extra);
        let t = Instant::now();
        let out = c.output().map_err(|e| format!("{c:?}: {e}"))?;
        let wall_s = t.elapsed().as_secs_f64();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        if !out.status.success() {
            return Err(format!("{c:?} failed ({}): {stderr}", out.status));
        }
        let summary = |prefix: &str| {
            stdout
                .lines()
                .find(|l| l.starts_with(prefix))
                .map(str::to_owned)
        };
        let (line, us) = match self {
            Who::Aare { .. } => {
                let line = summary("aare_find ").ok_or("aare-find printed no summary line")?;
                let us = field(&line, "us_per_frame").and_then(|v| v.parse().ok());
                (line, us)
            }
            // The data phase of `--timing`: "timing: data phase X s (Y us/frame); ...".
            Who::Cluda { .. } => (
                summary("frames=").ok_or("cluda find printed no summary line")?,
                stderr
                    .lines()
                    .find_map(|l| l.strip_prefix("timing: data phase "))
                    .and_then(|r| r.split_once(" s (")?.1.split_once(" us/frame"))
                    .and_then(|(v, _)| v.parse().ok()),
            ),
        };
        Ok(Run {
            us_per_frame: us.ok_or_else(|| format!("no us/frame in the output of {c:?}"))?,
            wall_s,
            clusters: field(&line, "clusters")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no cluster count in {line:?}"))?,
            line,
        })
    }
}

/// `DIR/frames-N/{pedestal,data}.npy`, generated by `cluda gen` unless there, then read once
/// so that they are in the page cache.
fn input(o: &Opts, frames: usize) -> Result<(PathBuf, PathBuf), String> {
    let dir = o
        .data_dir
        .join(format!("frames-{frames}-pedestal-{}", o.pedestal_frames));
    let (ped, data) = (dir.join("pedestal.npy"), dir.join("data.npy"));
    if !ped.is_file() || !data.is_file() {
        let t = Instant::now();
        let out = Command::new(&o.cluda)
            .args(["gen", "--overwrite", "--frames", &frames.to_string()])
            .args(["--pedestal-frames", &o.pedestal_frames.to_string()])
            .arg("--out")
            .arg(&dir)
            .output()
            .map_err(|e| format!("{}: {e}", o.cluda.display()))?;
        if !out.status.success() {
            return Err(format!(
                "cluda gen failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        eprintln!(
            "peers: generated {} in {:.1} s",
            dir.display(),
            t.elapsed().as_secs_f64()
        );
    }
    for f in [&ped, &data] {
        let mut file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        std::io::copy(&mut file, &mut std::io::sink())
            .map_err(|e| format!("{}: {e}", f.display()))?;
    }
    Ok((ped, data))
}

/// Sorted copy's median, minimum and maximum.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

/// The check on `frames` frames: aare's single-finder clusters against `cluda find
/// --threshold frozen`'s on each device; one table row per device. Whether all are equal.
fn check(o: &Opts, frames: usize, md: &mut String) -> Result<bool, String> {
    let (ped, data) = input(o, frames)?;
    let dir = o.data_dir.join("check");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = writeln!(
        md,
        "\n## Same clusters\n\n{frames} frames: aare's `ClusterFinderMT` on one thread writes its \
         cluster file (aare's `ClusterFile`); `cluda find --threshold frozen --out` writes cluda's.\n\n\
         | size | device | aare clusters | cluda clusters | files |\n|---|---|---:|---:|---|"
    );
    let one = Who::Aare {
        exe: o.aare[0].clone(),
        threads: Some(1),
        single: false,
    };
    let mut all = true;
    for &size in &o.sizes {
        let theirs = dir.join(format!("aare-{size}.clust"));
        let a = one.run(o, &ped, &data, size, &["--out", path_str(&theirs)?])?;
        let want = std::fs::read(&theirs).map_err(|e| format!("{}: {e}", theirs.display()))?;
        for device in &o.devices {
            let ours = dir.join(format!("cluda-{device}-{size}.clust"));
            let who = Who::Cluda {
                device: device.clone(),
                threads: None,
                threshold: "frozen".into(),
            };
            let extra = ["--overwrite", "--out", path_str(&ours)?];
            let c = who.run(o, &ped, &data, size, &extra)?;
            let got = std::fs::read(&ours).map_err(|e| format!("{}: {e}", ours.display()))?;
            let verdict = match got.iter().zip(&want).position(|(x, y)| x != y) {
                None if got.len() == want.len() => format!("identical ({} bytes)", got.len()),
                None => format!("DIFFER: {} bytes against aare's {}", got.len(), want.len()),
                Some(at) => format!("DIFFER from byte {at}"),
            };
            all &= verdict.starts_with("identical");
            let _ = writeln!(
                md,
                "| {size}x{size} | {device} | {} | {} | {verdict} |",
                a.clusters, c.clusters
            );
            eprintln!("peers: check {size}x{size} {device}: {verdict}");
        }
    }
    Ok(all)
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: not UTF-8", p.display()))
}

/// The host's CPU model and core count, for the record.
fn cpu() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                Some(
                    l.strip_prefix("model name")?
                        .split_once(':')?
                        .1
                        .trim()
                        .to_owned(),
                )
            })
        })
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

fn main() {
    if let Err(e) = bench() {
        eprintln!("peers: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let o = options()?;
    let (ped, data) = input(&o, o.frames)?;
    let mut rows: Vec<Who> = o
        .aare
        .iter()
        .map(|exe| Who::Aare {
            exe: exe.clone(),
            threads: o.threads,
            single: false,
        })
        .collect();
    rows.extend(o.devices.iter().map(|d| Who::Cluda {
        device: d.clone(),
        threads: o.threads.filter(|_| d == "cpu"),
        threshold: o.threshold.clone(),
    }));
    if o.single {
        rows.push(Who::Aare {
            exe: o.aare[0].clone(),
            threads: Some(1),
            single: true,
        });
        rows.push(Who::Cluda {
            device: "cpu".into(),
            threads: Some(1),
            threshold: o.threshold.clone(),
        });
    }
    // runs[size][row]: one Run per round.
    let mut runs: Vec<Vec<Vec<Run>>> = o
        .sizes
        .iter()
        .map(|_| rows.iter().map(|_| Vec::new()).collect())
        .collect();
    let mut csv = String::from("size,run,round,us_per_frame,wall_s,clusters\n");
    for round in 0..o.rounds {
        for (si, &size) in o.sizes.iter().enumerate() {
            for k in 0..rows.len() {
                let ri = (k + round) % rows.len();
                let run = rows[ri].run(&o, &ped, &data, size, &[])?;
                let label = rows[ri].label();
                eprintln!(
                    "peers: round {round} {size}x{size} {label}: {:.1} us/frame",
                    run.us_per_frame
                );
                let _ = writeln!(
                    csv,
                    "{size},\"{label}\",{round},{:.3},{:.3},{}",
                    run.us_per_frame, run.wall_s, run.clusters
                );
                runs[si][ri].push(run);
            }
        }
    }

    // The command as bench-results records it: without `--out` (where this run wrote).
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Some(at) = args.iter().position(|a| a == "--out") {
        args.drain(at..(at + 2).min(args.len()));
    }
    let mut md = format!(
        "# aare beside cluda\n\ncommand: `cargo bench --bench peers -- {}`\n\n\
         host: {}. {} frames of 400x400 (`cluda gen`), {} pedestal frames, n_sigma 5, F64, \
         cluda's threshold {} (aare's is frozen), the files page-cached and mapped by both. \
         `us/frame`: the data phase (first data frame to last cluster counted; median, min-max \
         of {} rounds, interleaved, a fresh process each); `wall`: the whole process \
         (median).\n\naare: {}\n",
        args.join(" "),
        cpu(),
        o.frames,
        o.pedestal_frames,
        o.threshold,
        o.rounds,
        runs[0][0][0].line
    );
    for (si, &size) in o.sizes.iter().enumerate() {
        let reference = rows.iter().position(|w| matches!(w, Who::Cluda { device, threads, .. } if device == "cpu" && *threads != Some(1)));
        let base = reference.map(|r| {
            spread(
                &runs[si][r]
                    .iter()
                    .map(|x| x.us_per_frame)
                    .collect::<Vec<_>>(),
            )
            .0
        });
        let _ = writeln!(
            md,
            "\n## {size}x{size}\n\n| run | us/frame | min-max | wall s | clusters | us/frame / cluda cpu's |\n|---|---:|---:|---:|---:|---:|"
        );
        for (ri, who) in rows.iter().enumerate() {
            let r = &runs[si][ri];
            let (med, lo, hi) = spread(&r.iter().map(|x| x.us_per_frame).collect::<Vec<_>>());
            let (wall, _, _) = spread(&r.iter().map(|x| x.wall_s).collect::<Vec<_>>());
            let ratio = base.map_or("".into(), |b| format!("{:.2}", med / b));
            let _ = writeln!(
                md,
                "| {} | {med:.1} | {lo:.1}-{hi:.1} | {wall:.2} | {} | {ratio} |",
                who.label(),
                r[0].clusters
            );
        }
    }
    let check_frames = o.check_frames.unwrap_or(o.frames.min(2000));
    let same = check_frames == 0 || check(&o, check_frames, &mut md)?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    for (name, text) in [("peers.md", &md), ("peers.csv", &csv)] {
        let p = o.out.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    print!("{md}");
    if same {
        Ok(())
    } else {
        Err("aare's clusters and cluda's differ (see the table above)".into())
    }
}
