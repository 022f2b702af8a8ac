//! One ladder step in its own process: data, pedestal, reservation, then timed passes.

use std::time::Instant;

use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames, Precision};
use serde_json::{Value, json};

use crate::Opts;

/// Every step of the ladder, in order.
pub const ALL: [&str; 11] = [
    "baseline", "opt1", "opt2", "opt3", "opt4", "opt5", "opt6", "opt7", "opt8", "opt9", "opt10",
];

/// Minor page faults of this process so far (getrusage).
fn minor_faults() -> i64 {
    // SAFETY: `rusage` is plain integers, for which all zeros is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `rusage`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_minflt
}

/// Result of one timed pass.
struct Pass {
    seconds: f64,
    faults: i64,
    clusters: u64,
    check: u64,
}

/// Times one pass over all frames, collecting every frame's clusters in the timed region
/// (count, and a checksum over each record's centre word, so every record is read).
fn timed_pass(f: &mut dyn ClusterFinder, frames: Frames<'_>) -> Result<Pass, String> {
    let (mut clusters, mut check) = (0u64, 0u64);
    let f0 = minor_faults();
    let t0 = Instant::now();
    f.find_each(frames, &mut |fc| {
        clusters += fc.len() as u64;
        let w = fc.size().record_words();
        for (i, r) in fc.words().chunks_exact(w).enumerate() {
            check = check
                .wrapping_mul(0x100_0000_01b3)
                .wrapping_add(r[0] as u64 ^ i as u64);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let seconds = t0.elapsed().as_secs_f64();
    Ok(Pass {
        seconds,
        faults: minor_faults() - f0,
        clusters,
        check,
    })
}

/// Runs step `step` for `size`x`size` at `precision` and returns its result record.
pub fn run_child(opts: &Opts, step: &str, size: usize, precision: &str) -> Result<Value, String> {
    let precision_v: Precision = precision.parse().map_err(|e: cluda::Error| e.to_string())?;
    let (rows, cols) = (opts.rows, opts.cols);
    let generator = Generator::new(GenConfig::new(rows, cols, 2026)).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let dark = generator.frames(0, opts.pedestal_frames, false);
    let n = if step == "baseline" {
        opts.cpu_frames.min(opts.frames)
    } else {
        opts.frames
    };
    let data = generator.frames(opts.pedestal_frames as u64, n, true);
    eprintln!(
        "    generated {} frames in {:.1} s",
        opts.pedestal_frames + n,
        t.elapsed().as_secs_f64()
    );
    let dark_v = Frames::new(&dark, opts.pedestal_frames, rows, cols).map_err(|e| e.to_string())?;
    let data_v = Frames::new(&data, n, rows, cols).map_err(|e| e.to_string())?;
    let config = FinderConfig::new(rows, cols)
        .size(ClusterSize::from_side(size).map_err(|e| e.to_string())?)
        .n_sigma(opts.n_sigma)
        .pedestal_frames(opts.pedestal_frames as u32)
        .precision(precision_v);
    let mut result = json!({"step": step, "size": size, "precision": precision, "frames": n});
    let (passes, extra) = if step == "baseline" {
        let avail = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mut sweep = Vec::new();
        let mut best: Option<(usize, Vec<Pass>)> = None;
        let mut threads = 1;
        loop {
            let mut f =
                CpuFinder::with_threads(config.clone(), threads).map_err(|e| e.to_string())?;
            let passes = run_passes(&mut f, dark_v, data_v, opts.passes.min(2))?;
            let warm = passes[1..]
                .iter()
                .map(|p| p.seconds)
                .fold(f64::INFINITY, f64::min);
            sweep.push(json!({"threads": threads, "warm_us": warm * 1e6 / n as f64}));
            if best.as_ref().is_none_or(|(_, b)| {
                warm < b[1..]
                    .iter()
                    .map(|p| p.seconds)
                    .fold(f64::INFINITY, f64::min)
            }) {
                best = Some((threads, passes));
            }
            if threads >= avail {
                break;
            }
            threads = (threads * 2).min(avail);
        }
        let (threads, passes) = best.ok_or("no CPU pass ran")?;
        (passes, json!({"threads": threads, "sweep": sweep}))
    } else {
        let (mut finder, pinned) = crate::gpu_steps::setup(step, config.clone(), data_v)?;
        let input = match &pinned {
            Some(p) => p.frames().map_err(|e| e.to_string())?,
            None => data_v,
        };
        // The kernel pass is one pass with per-frame event timing on.
        let warm = if step == "kernel" { 1 } else { opts.passes };
        let passes = run_passes(&mut finder, dark_v, input, warm)?;
        (passes, crate::gpu_steps::extra(step, &finder))
    };
    let us: Vec<f64> = passes.iter().map(|p| p.seconds * 1e6 / n as f64).collect();
    let warm = &us[1..];
    let best = warm.iter().cloned().fold(f64::INFINITY, f64::min);
    let worst = warm.iter().cloned().fold(0.0, f64::max);
    let checks: Vec<String> = passes.iter().map(|p| format!("{:016x}", p.check)).collect();
    if passes
        .iter()
        .any(|p| p.check != passes[0].check || p.clusters != passes[0].clusters)
    {
        return Err(format!("passes disagree: checks {checks:?}"));
    }
    let obj = result.as_object_mut().ok_or("result is an object")?;
    obj.insert("cold_us".into(), json!(us[0]));
    obj.insert("warm_us".into(), json!(best));
    obj.insert(
        "warm_spread_pct".into(),
        json!((worst - best) / best * 100.0),
    );
    obj.insert("pass_us".into(), json!(us));
    obj.insert(
        "faults".into(),
        json!(passes.iter().map(|p| p.faults).collect::<Vec<_>>()),
    );
    obj.insert("fps".into(), json!(1e6 / best));
    obj.insert("clusters".into(), json!(passes[0].clusters));
    obj.insert(
        "clusters_per_frame".into(),
        json!(passes[0].clusters as f64 / n as f64),
    );
    obj.insert("check".into(), json!(checks[0]));
    obj.insert(
        "record_bytes".into(),
        json!(
            ClusterSize::from_side(size)
                .map_err(|e| e.to_string())?
                .record_bytes()
        ),
    );
    obj.insert("extra".into(), extra);
    Ok(result)
}

/// Fills the pedestal once, then runs 1 cold + `warm` passes, each from that same pedestal.
fn run_passes(
    f: &mut dyn ClusterFinder,
    dark: Frames<'_>,
    data: Frames<'_>,
    warm: usize,
) -> Result<Vec<Pass>, String> {
    f.push_pedestal(dark).map_err(|e| e.to_string())?;
    let start = f.pedestal().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for _ in 0..=warm.max(1) {
        f.set_pedestal(start.clone()).map_err(|e| e.to_string())?;
        out.push(timed_pass(f, data)?);
    }
    Ok(out)
}

/// The fastest GPU step among result rows, by best warm time.
pub fn fastest_gpu(rows: &[Value]) -> Option<String> {
    rows.iter()
        .filter(|r| r["step"].as_str().is_some_and(|s| s.starts_with("opt")))
        .min_by(|a, b| {
            a["warm_us"]
                .as_f64()
                .unwrap_or(f64::MAX)
                .total_cmp(&b["warm_us"].as_f64().unwrap_or(f64::MAX))
        })
        .and_then(|r| r["step"].as_str().map(String::from))
}

/// A one-line summary of a result row.
pub fn one_line(v: &Value) -> String {
    format!(
        "cold {:.2} us/frame, warm {:.2} us/frame ({:.0} frames/s, spread {:.1}%), {:.1} clusters/frame, faults {}",
        v["cold_us"].as_f64().unwrap_or(f64::NAN),
        v["warm_us"].as_f64().unwrap_or(f64::NAN),
        v["fps"].as_f64().unwrap_or(f64::NAN),
        v["warm_spread_pct"].as_f64().unwrap_or(f64::NAN),
        v["clusters_per_frame"].as_f64().unwrap_or(f64::NAN),
        v["faults"]
    )
}
