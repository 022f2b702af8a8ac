//! Throughput of the CPU finder (issue 2, item 9): us/frame for 3x3 and 9x9, F64 and F32,
//! live and frozen thresholds, one thread and all threads, on generated 400x400 frames
//! (1000 pedestal frames, 2000 data frames, n_sigma 5).
//!
//! A benchmark, not a test (`harness = false`): `cargo bench --bench cpu` prints a table and
//! writes it to `bench-results/<date>-cpu-<host>/cpu.md` and `cpu.csv` with the exact command.
//! Options (after `--`): `--frames N` data frames (default 2000), `--passes N` timed passes per
//! configuration (default 6: the first is cold, the rest warm; the table gives the best and the
//! median warm pass, and the median's speed-up over one thread), `--sizes 3,9`,
//! `--precisions f64,f32`, `--modes live,frozen`, `--threads 1,all`, `--no-write`.
//!
//! The passes of the thread counts of one configuration are interleaved (pass 1 of each, then
//! pass 2 of each, ...), so that the speed-up compares them under the same machine state.
//!
//! Every pass starts from the same ready pedestal (a clone, installed with `set_pedestal`
//! outside the timer), so passes are comparable and no finder is "warmed up" by processing
//! frames. The timer covers `find_each` with a visitor that counts clusters (results
//! collection included). Data generation (parallel, seeded) is outside the timed region.

use std::fmt::Write as _;
use std::time::Instant;

use cluda::generate::{GenConfig, Generator};
use cluda::{
    ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames, Pedestal, Precision, ThresholdMode,
};

const ROWS: usize = 400;
const COLS: usize = 400;
const PEDESTAL_FRAMES: usize = 1000;
const N_SIGMA: f64 = 5.0;
const SEED: u64 = 42;

struct Options {
    frames: usize,
    passes: usize,
    sizes: Vec<ClusterSize>,
    precisions: Vec<Precision>,
    modes: Vec<ThresholdMode>,
    threads: Vec<usize>,
    write: bool,
}

fn list<T>(arg: &str, parse: impl Fn(&str) -> Option<T>) -> Vec<T> {
    arg.split(',')
        .map(|s| parse(s.trim()).unwrap_or_else(|| panic!("bench option: cannot parse `{s}`")))
        .collect()
}

fn options(all: usize) -> Options {
    let mut o = Options {
        frames: 2000,
        passes: 6,
        sizes: vec![ClusterSize::S3, ClusterSize::S9],
        precisions: vec![Precision::F64, Precision::F32],
        modes: vec![ThresholdMode::Frozen, ThresholdMode::Live],
        threads: vec![1, all],
        write: true,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || {
            args.get(i + 1)
                .unwrap_or_else(|| panic!("bench option {} needs a value", args[i]))
                .as_str()
        };
        match args[i].as_str() {
            "--frames" => o.frames = value().parse().expect("--frames N"),
            "--passes" => o.passes = value().parse::<usize>().expect("--passes N").max(1),
            "--sizes" => {
                o.sizes = list(value(), |s| {
                    ClusterSize::from_side(s.split('x').next()?.parse().ok()?).ok()
                })
            }
            "--precisions" => o.precisions = list(value(), |s| s.parse().ok()),
            "--modes" => o.modes = list(value(), |s| s.parse().ok()),
            "--threads" => {
                o.threads = list(value(), |s| {
                    if s == "all" {
                        Some(all)
                    } else {
                        s.parse().ok()
                    }
                })
            }
            "--no-write" => {
                o.write = false;
                i += 1;
                continue;
            }
            _ => {
                // `--bench` (added by cargo) and anything else: ignored.
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o.threads.dedup();
    o
}

/// Minor page faults and CPU time (user + system, clock ticks of 10 ms) of this process so far
/// (Linux; zeros elsewhere).
fn usage() -> (u64, u64) {
    let field = |s: &str, i: usize| -> Option<u64> {
        let rest = &s[s.rfind(')')? + 2..];
        rest.split_whitespace().nth(i)?.parse().ok()
    };
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .map(|s| {
            let faults = field(&s, 7).unwrap_or(0);
            let ticks = field(&s, 11).unwrap_or(0) + field(&s, 12).unwrap_or(0);
            (faults, ticks)
        })
        .unwrap_or((0, 0))
}

struct Row {
    size: ClusterSize,
    precision: Precision,
    mode: ThresholdMode,
    threads: usize,
    cold_us: f64,
    warm_us: f64,
    median_us: f64,
    /// Median of one thread (same size, precision, mode) / this row's median.
    speedup: Option<f64>,
    spread: f64,
    faults: Vec<u64>,
    cpu_us: f64,
    clusters_per_frame: f64,
}

impl Row {
    /// The minor page faults of the runs, `/`-separated.
    fn faults_list(&self) -> String {
        let faults: Vec<String> = self.faults.iter().map(u64::to_string).collect();
        faults.join("/")
    }
}

fn civil_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    // Howard Hinnant's days-to-civil algorithm.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "host".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn main() -> cluda::Result<()> {
    let all = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let o = options(all);
    let t0 = Instant::now();
    let generator = Generator::new(GenConfig::new(ROWS, COLS, SEED))?;
    let dark = generator.frames(0, PEDESTAL_FRAMES, false);
    let data = generator.frames(PEDESTAL_FRAMES as u64, o.frames, true);
    let data_frames = Frames::new(&data, o.frames, ROWS, COLS)?;
    eprintln!(
        "generated {PEDESTAL_FRAMES} dark + {} data frames ({ROWS}x{COLS}) in {:.1} s",
        o.frames,
        t0.elapsed().as_secs_f64()
    );
    let mut rows = Vec::new();
    println!(
        "| size | precision | mode | threads | us/frame | frames/s | clusters/frame | cpu us/frame | cold us/frame | spread | minor faults/pass | median us/frame | speed-up |"
    );
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    for &precision in &o.precisions {
        let mut pedestal = Pedestal::new(ROWS, COLS, PEDESTAL_FRAMES as u32, precision)?;
        pedestal.push_frames(Frames::new(&dark, PEDESTAL_FRAMES, ROWS, COLS)?)?;
        for &size in &o.sizes {
            for &mode in &o.modes {
                let config = FinderConfig::new(ROWS, COLS)
                    .size(size)
                    .n_sigma(N_SIGMA)
                    .pedestal_frames(PEDESTAL_FRAMES as u32)
                    .threshold(mode)
                    .precision(precision);
                // One finder per thread count, their passes interleaved (pass 1 of each, then
                // pass 2 of each, ...), so that the speed-up compares thread counts under the
                // same machine state: on a shared VM the speed drifts by 5-15% within a minute.
                let mut finders = o
                    .threads
                    .iter()
                    .map(|&t| CpuFinder::with_threads(config.clone(), t))
                    .collect::<cluda::Result<Vec<_>>>()?;
                let mut passes = vec![Passes::default(); finders.len()];
                for _ in 0..o.passes {
                    for (finder, p) in finders.iter_mut().zip(&mut passes) {
                        finder.set_pedestal(pedestal.clone())?;
                        let mut count = 0usize;
                        let (f0, c0) = usage();
                        let start = Instant::now();
                        finder.find_each(data_frames, &mut |fc| {
                            count += fc.len();
                            Ok(())
                        })?;
                        let us = start.elapsed().as_secs_f64() * 1e6 / o.frames as f64;
                        let (f1, c1) = usage();
                        p.faults.push(f1 - f0);
                        p.cpu.push((c1 - c0) as f64 * 1e4 / o.frames as f64);
                        p.times.push(us);
                        p.clusters = count;
                    }
                }
                for (&threads, p) in o.threads.iter().zip(passes) {
                    let times = &p.times;
                    let cold_us = times[0];
                    let warm = if times.len() > 1 {
                        &times[1..]
                    } else {
                        &times[..]
                    };
                    let first_warm = usize::from(times.len() > 1);
                    let best = (first_warm..times.len())
                        .min_by(|&i, &j| times[i].total_cmp(&times[j]))
                        .unwrap_or(0);
                    let warm_us = times[best];
                    let worst = warm.iter().cloned().fold(0.0, f64::max);
                    let median_us = median(warm);
                    let speedup = rows
                        .iter()
                        .find(|r: &&Row| {
                            r.threads == 1
                                && r.size == size
                                && r.precision == precision
                                && r.mode == mode
                        })
                        .map(|r| r.median_us / median_us);
                    let row = Row {
                        size,
                        precision,
                        mode,
                        threads,
                        cold_us,
                        warm_us,
                        median_us,
                        speedup,
                        spread: worst / warm_us - 1.0,
                        faults: p.faults,
                        cpu_us: p.cpu[best],
                        clusters_per_frame: p.clusters as f64 / o.frames as f64,
                    };
                    println!("{}", markdown_row(&row));
                    rows.push(row);
                }
            }
        }
    }
    eprintln!("total {:.1} s", t0.elapsed().as_secs_f64());
    if o.write {
        write_results(&o, &rows);
    }
    Ok(())
}

/// The timed passes of one finder.
#[derive(Clone, Default)]
struct Passes {
    times: Vec<f64>,
    faults: Vec<u64>,
    cpu: Vec<f64>,
    clusters: usize,
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn markdown_row(r: &Row) -> String {
    let (size, threads, warm, median) = (r.size, r.threads, r.warm_us, r.median_us);
    let (cpu, cold, per_frame) = (r.cpu_us, r.cold_us, r.clusters_per_frame);
    let (precision, mode, faults) = (r.precision.name(), r.mode.name(), r.faults_list());
    let (fps, spread) = (1e6 / warm, 100.0 * r.spread);
    let speedup = r.speedup.map_or("-".into(), |s| format!("{s:.2}x"));
    format!(
        "| {size} | {precision} | {mode} | {threads} | {warm:.1} | {fps:.0} | {per_frame:.1} | {cpu:.0} | {cold:.1} | {spread:.1}% | {faults} | {median:.1} | {speedup} |"
    )
}

fn write_results(o: &Options, rows: &[Row]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("bench-results")
        .join(format!("{}-cpu-{}", civil_date(), host_name()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        return;
    }
    let argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let command = if argv.is_empty() {
        "cargo bench --bench cpu".to_string()
    } else {
        format!("cargo bench --bench cpu -- {}", argv.join(" "))
    };
    let mut md = String::new();
    let _ = writeln!(md, "# CPU finder throughput\n");
    let _ = writeln!(md, "Command: `{command}`\n");
    let _ = writeln!(
        md,
        "Machine: {} ({} cores), host `{}`. Data: generated {ROWS}x{COLS}, seed {SEED}, \
         {PEDESTAL_FRAMES} pedestal frames, {} data frames, n_sigma {N_SIGMA}. \
         us/frame = wall time of the best warm pass of {} (cold = first pass; spread = worst warm / \
         best warm - 1; median = median warm pass; speed-up = median of one thread / this \
         median, the thread counts' passes interleaved so that both see the same machine \
         state); cpu us/frame = process CPU time (user + system, all threads) of that pass \
         per frame, 10 ms resolution: on a shared machine it shows the work when the wall time \
         includes time-slicing.\n",
        cpu_model(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        host_name(),
        o.frames,
        o.passes
    );
    let _ = writeln!(
        md,
        "| size | precision | mode | threads | us/frame | frames/s | clusters/frame | cpu us/frame | cold us/frame | spread | minor faults/pass | median us/frame | speed-up |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"
    );
    let mut csv = String::from(
        "size,precision,mode,threads,us_per_frame,frames_per_s,clusters_per_frame,cpu_us_per_frame,cold_us_per_frame,spread,minor_faults,median_us_per_frame,speedup\n",
    );
    for r in rows {
        let _ = writeln!(md, "{}", markdown_row(r));
        let Row {
            size,
            threads,
            warm_us,
            median_us,
            cpu_us,
            cold_us,
            clusters_per_frame,
            spread,
            ..
        } = r;
        let (precision, mode, faults) = (r.precision.name(), r.mode.name(), r.faults_list());
        let fps = 1e6 / warm_us;
        let speedup = r.speedup.map_or(String::new(), |s| format!("{s:.3}"));
        let _ = writeln!(
            csv,
            "{size},{precision},{mode},{threads},{warm_us:.2},{fps:.1},{clusters_per_frame:.2},{cpu_us:.1},{cold_us:.2},{spread:.4},{faults},{median_us:.2},{speedup}"
        );
    }
    for (name, text) in [("cpu.md", md), ("cpu.csv", csv)] {
        let path = dir.join(name);
        match std::fs::write(&path, text) {
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
}
