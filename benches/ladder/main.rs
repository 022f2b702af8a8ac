//! The benchmark ladder (docs/ladder.md: the rungs and the measuring protocol).
//!
//! `cargo bench --bench ladder -- [--sizes 3,9] [--frames 20000] [--passes 5] [--steps ...]`
//!
//! The parent process checks that the GPU is idle, measures the copy floors, then runs every
//! step in a fresh child process (this executable with `--child`), so each step's cold pass is
//! a true first pass. A child generates its data (seeded, outside the timed region), fills the
//! pedestal, reserves its buffers, then times 1 cold + `passes` warm passes of the whole
//! pipeline, results collected (hashed and counted) inside the timed region, each pass from the
//! same pedestal state. Results: Markdown, CSV and env.json under
//! `bench-results/<date>-<gpu>/`.

mod chart;
mod floors;
mod gpu_steps;
mod report;
mod steps;

use std::process::Command;

use serde_json::{Value, json};

/// Command-line options shared by parent and child.
#[derive(Clone, Debug)]
pub struct Opts {
    pub sizes: Vec<usize>,
    pub frames: usize,
    pub pedestal_frames: usize,
    pub cpu_frames: usize,
    pub passes: usize,
    pub steps: Vec<String>,
    pub out: String,
    pub rows: usize,
    pub cols: usize,
    pub n_sigma: f64,
    pub child: Option<(String, usize, String)>,
    pub allow_busy: bool,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        sizes: vec![3, 9],
        frames: 20_000,
        pedestal_frames: 1000,
        cpu_frames: 2000,
        passes: 5,
        steps: steps::ALL.iter().map(|s| s.to_string()).collect(),
        out: "bench-results".into(),
        rows: 400,
        cols: 400,
        n_sigma: 5.0,
        child: None,
        allow_busy: false,
    };
    let mut args = std::env::args().skip(1);
    let mut child = (None, None, None);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v}: {e}"));
        match a.as_str() {
            "--bench" => {}
            "--sizes" => o.sizes = support::bench::parse_list(&val()?)?,
            "--frames" => o.frames = num(val()?)?,
            "--pedestal-frames" => o.pedestal_frames = num(val()?)?,
            "--cpu-frames" => o.cpu_frames = num(val()?)?,
            "--passes" => o.passes = num(val()?)?,
            "--steps" => o.steps = val()?.split(',').map(String::from).collect(),
            "--out" => o.out = val()?,
            "--rows" => o.rows = num(val()?)?,
            "--cols" => o.cols = num(val()?)?,
            "--allow-busy" => o.allow_busy = true,
            "--child" => child.0 = Some(val()?),
            "--child-size" => child.1 = Some(num(val()?)?),
            "--child-precision" => child.2 = Some(val()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if let (Some(s), Some(z), Some(p)) = child {
        o.child = Some((s, z, p));
    }
    Ok(o)
}

fn main() {
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ladder: {e}");
            std::process::exit(2);
        }
    };
    let code = match &opts.child {
        Some((step, size, precision)) => match steps::run_child(&opts, step, *size, precision) {
            Ok(v) => {
                println!("RESULT {v}");
                0
            }
            Err(e) => {
                eprintln!("ladder child {step}: {e}");
                1
            }
        },
        None => match run_parent(&opts) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ladder: {e}");
                1
            }
        },
    };
    std::process::exit(code);
}

/// Other processes using the GPU, from nvidia-smi (empty when idle or when nvidia-smi is absent).
fn gpu_users() -> Vec<String> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,process_name,used_memory",
            "--format=csv,noheader",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    }
}

fn run_parent(opts: &Opts) -> Result<(), String> {
    if !cluda::cuda::gpu_available() {
        return Err(
            "no CUDA GPU: the ladder needs one (the CPU benchmark is `cargo bench --bench cpu`)"
                .into(),
        );
    }
    let busy = gpu_users();
    if !busy.is_empty() && !opts.allow_busy {
        return Err(format!(
            "the GPU is busy ({}); refusing to measure (pass --allow-busy to override)",
            busy.join("; ")
        ));
    }
    let device = cluda::cuda::Device::open(0).map_err(|e| e.to_string())?;
    let frame_bytes = opts.rows * opts.cols * 2;
    let fl = floors::measure(device.context(), frame_bytes, frame_bytes * 2000)
        .map_err(|e| format!("measuring floors: {e}"))?;
    eprintln!(
        "floors: h2d bulk {:.1} GB/s ({:.2} us/frame), d2h bulk {:.1} GB/s, per-frame copies h2d {:.2} us d2h {:.2} us, both directions {:.1}/{:.1} GB/s",
        fl.h2d_bulk_gbs,
        fl.upload_us(),
        fl.d2h_bulk_gbs,
        fl.h2d_frame_us,
        fl.d2h_frame_us,
        fl.both_h2d_gbs,
        fl.both_d2h_gbs
    );
    let gpu_name = device.name();
    drop(device);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    for &size in &opts.sizes {
        let mut rows: Vec<Value> = Vec::new();
        // opt7 is opt6 with the F32 (B1) pedestal; every other step runs at F64.
        let mut plan: Vec<(String, &str)> = opts
            .steps
            .iter()
            .map(|s| (s.clone(), if s == "opt7" { "f32" } else { "f64" }))
            .collect();
        plan.push(("kernel".into(), "f64"));
        for (step, precision) in plan {
            rows.push(run_one(&exe, &step, size, precision)?);
        }
        // The fastest GPU step at F32 too (opt7 already is).
        if let Some(fastest) = steps::fastest_gpu(&rows).filter(|f| f != "opt7") {
            rows.push(run_one(&exe, &fastest, size, "f32")?);
        }
        all.push((size, rows));
    }
    report::write(opts, &gpu_name, &fl, &all)
}

fn run_one(
    exe: &std::path::Path,
    step: &str,
    size: usize,
    precision: &str,
) -> Result<Value, String> {
    eprintln!("--- {size}x{size} {step} {precision}");
    let mut cmd = Command::new(exe);
    for a in std::env::args().skip(1) {
        cmd.arg(a);
    }
    cmd.args([
        "--child",
        step,
        "--child-size",
        &size.to_string(),
        "--child-precision",
        precision,
    ]);
    let out = cmd
        .output()
        .map_err(|e| format!("starting child for {step}: {e}"))?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .ok_or_else(|| {
            format!(
                "step {step} ({size}x{size}, {precision}) failed: {}",
                out.status
            )
        })?;
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("step {step}: bad result line: {e}"))?;
    eprintln!("    {}", steps::one_line(&v));
    Ok(json!(v))
}
