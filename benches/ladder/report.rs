//! Writes the ladder's results: a Markdown table and a CSV per cluster size, env.json, and a
//! PNG bar chart, under `<out>/<date>-<gpu>/`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::Opts;
use crate::floors::Floors;

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The tallest floor for a result row, in us/frame, and its name.
pub fn floor_for(row: &Value, fl: &Floors, kernel_us: Option<f64>) -> (f64, &'static str) {
    let up = fl.upload_us();
    let cpf = row["clusters_per_frame"].as_f64().unwrap_or(0.0);
    let rb = row["record_bytes"].as_f64().unwrap_or(0.0);
    let down = fl.download_us(cpf * rb + 8.0);
    let mut best = (up, "upload");
    if down > best.0 {
        best = (down, "download");
    }
    if let Some(k) = kernel_us.filter(|&k| k > best.0) {
        best = (k, "kernel");
    }
    best
}

/// Writes every output file and prints the tables.
pub fn write(
    opts: &Opts,
    gpu: &str,
    fl: &Floors,
    all: &[(usize, Vec<Value>)],
) -> Result<(), String> {
    let date = sh("date", &["+%Y-%m-%d"]);
    let tag: String = gpu
        .split_whitespace()
        .last()
        .unwrap_or("gpu")
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let dir = PathBuf::from(&opts.out).join(format!("{date}-{tag}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let command = format!(
        "cargo bench --bench ladder -- {}",
        std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect::<Vec<_>>()
            .join(" ")
    );
    let env = json!({
        "gpu": gpu,
        "driver": sh("nvidia-smi", &["--query-gpu=driver_version", "--format=csv,noheader"]),
        "cuda": sh("sh", &["-c", "nvidia-smi | grep -o 'CUDA Version: [0-9.]*'"]),
        "cpu": sh("sh", &["-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]),
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "commit": env!("CLUDA_COMMIT"),
        "toolchain": "nightly-2026-05-20 (rust-toolchain.toml)",
        "command": command,
        "params": {"rows": opts.rows, "cols": opts.cols, "frames": opts.frames, "cpu_frames": opts.cpu_frames,
                   "pedestal_frames": opts.pedestal_frames, "n_sigma": opts.n_sigma, "passes": opts.passes},
        "floors": {"h2d_bulk_gbs": fl.h2d_bulk_gbs, "d2h_bulk_gbs": fl.d2h_bulk_gbs, "h2d_frame_copy_us": fl.h2d_frame_us,
                   "d2h_frame_copy_us": fl.d2h_frame_us, "both_h2d_gbs": fl.both_h2d_gbs, "both_d2h_gbs": fl.both_d2h_gbs,
                   "upload_floor_us_per_frame": fl.upload_us()},
        "results": all.iter().map(|(s, r)| json!({"size": s, "rows": r})).collect::<Vec<_>>(),
    });
    let env_s = serde_json::to_string_pretty(&env).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("env.json"), env_s).map_err(|e| e.to_string())?;
    let mut summary = String::new();
    for (size, rows) in all {
        let kernel_us = rows
            .iter()
            .find(|r| r["step"] == "kernel")
            .and_then(|r| r["extra"]["kernel_us"].as_f64());
        let base = rows
            .iter()
            .find(|r| r["step"] == "baseline")
            .and_then(|r| r["warm_us"].as_f64());
        let mut md = String::new();
        let mut csv = String::from(
            "step,precision,frames,cold_us,warm_us,fps,spread_pct,faults_per_pass,clusters_per_frame,speedup_vs_cpu,step_gain,floor_us,floor,pct_of_floor\n",
        );
        let _ = writeln!(md, "# Ladder {size}x{size} on {gpu}\n");
        let _ = writeln!(
            md,
            "Floors (same run): upload {:.2} us/frame (h2d bulk {:.1} GB/s; per-frame copy {:.2} us), d2h bulk {:.1} GB/s (per-frame copy {:.2} us), both directions {:.1}/{:.1} GB/s{}.\n",
            fl.upload_us(),
            fl.h2d_bulk_gbs,
            fl.h2d_frame_us,
            fl.d2h_bulk_gbs,
            fl.d2h_frame_us,
            fl.both_h2d_gbs,
            fl.both_d2h_gbs,
            kernel_us
                .map(|k| format!("; kernel {k:.2} us/frame"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            md,
            "| step | precision | cold us/frame | warm us/frame | frames/s | spread | minor faults/pass | clusters/frame | vs CPU | step gain | floor | % of floor |"
        );
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
        let mut prev: Option<f64> = None;
        for r in rows.iter().filter(|r| r["step"] != "kernel") {
            let warm = r["warm_us"].as_f64().unwrap_or(f64::NAN);
            let (floor, which) = floor_for(r, fl, kernel_us);
            let speedup = base.map(|b| b / warm).unwrap_or(f64::NAN);
            let gain = if r["precision"] == "f64" {
                prev.map(|p| p / warm).unwrap_or(f64::NAN)
            } else {
                f64::NAN
            };
            if r["precision"] == "f64" {
                prev = Some(warm);
            }
            let faults = r["faults"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .unwrap_or_default();
            let step = r["step"].as_str().unwrap_or("?");
            let step_label = if step == "baseline" {
                format!("baseline ({} threads)", r["extra"]["threads"])
            } else {
                step.to_string()
            };
            let _ = writeln!(
                md,
                "| {step_label} | {} | {:.2} | {:.2} | {:.0} | {:.1}% | {faults} | {:.1} | {:.1}x | {} | {:.2} ({which}) | {:.0}% |",
                r["precision"].as_str().unwrap_or("?"),
                r["cold_us"].as_f64().unwrap_or(f64::NAN),
                warm,
                r["fps"].as_f64().unwrap_or(f64::NAN),
                r["warm_spread_pct"].as_f64().unwrap_or(f64::NAN),
                r["clusters_per_frame"].as_f64().unwrap_or(f64::NAN),
                speedup,
                if gain.is_nan() {
                    "-".into()
                } else {
                    format!("{gain:.2}x")
                },
                floor,
                floor / warm * 100.0
            );
            let _ = writeln!(
                csv,
                "{step},{},{},{:.3},{:.3},{:.1},{:.2},{},{:.2},{:.3},{:.3},{:.3},{which},{:.1}",
                r["precision"].as_str().unwrap_or("?"),
                r["frames"],
                r["cold_us"].as_f64().unwrap_or(f64::NAN),
                warm,
                r["fps"].as_f64().unwrap_or(f64::NAN),
                r["warm_spread_pct"].as_f64().unwrap_or(f64::NAN),
                faults.replace('/', " "),
                r["clusters_per_frame"].as_f64().unwrap_or(f64::NAN),
                speedup,
                gain,
                floor,
                floor / warm * 100.0
            );
        }
        let _ = writeln!(md, "\nCommand: `{command}`");
        std::fs::write(dir.join(format!("ladder-{size}x{size}.md")), &md)
            .map_err(|e| e.to_string())?;
        std::fs::write(dir.join(format!("ladder-{size}x{size}.csv")), &csv)
            .map_err(|e| e.to_string())?;
        if let Err(e) = crate::chart::draw(
            &dir.join(format!("ladder-{size}x{size}.png")),
            *size,
            rows,
            fl,
            kernel_us,
        ) {
            eprintln!("ladder: chart not drawn: {e}");
        }
        summary.push_str(&md);
        summary.push('\n');
    }
    println!("{summary}");
    println!("written to {}", dir.display());
    Ok(())
}
