//! The user's path, measured: `cluda find` on the inputs users have (`.npy` and slsDetector raw
//! acquisitions, page-cached and cold) to a cluster file, on the GPU and the CPU, against floors
//! measured in the same run.
//!
//! `cargo bench --bench user_path -- [--frames 20000] [--pedestal-frames 1000] [--sizes 3,9]
//!  [--devices gpu,cpu] [--inputs npy,raw] [--caches warm,cold] [--data-dir DIR] [--tmpfs DIR]
//!  [--disk DIR] [--cluda PATH] [--out DIR] [--campaign 20]`
//!
//! 1. Makes the input once with `cluda gen` (`DIR/pedestal.npy`, `DIR/data.npy`, and with
//!    `--raw` the same frames as raw acquisitions in `DIR/raw/`) and reads it once, so it is in
//!    the page cache. `DIR` must be on a disk (not tmpfs) for the cold runs to mean anything.
//! 2. Floors: reading the data file into the memory the finder reads (page-locked on a GPU)
//!    with the reader's threads (on a GPU also into write-combined page-locked memory);
//!    reading it the same way into a ring of page-locked slots (both kinds) while one stream
//!    uploads each filled slot to the GPU (no kernel: the file path's floor when reads and
//!    uploads share the memory bus); opt10 in memory (one `find_each`
//!    over every frame, already in page-locked memory); writing the bytes of each size's
//!    cluster file to the output directory in 8 MiB writes, on one thread and in positioned
//!    writes on 4 threads (as the cluster-file writer's threads write).
//! 3. The library path (GPU): `GpuFinder::find_each` over every frame, in one call, from a
//!    plain (pageable) `Vec<u16>` already in memory (the default input mode, which stages it:
//!    copied into pinned buffers on every core; and `InputMode::Registered`, which locks it
//!    for the call),
//!    from the same memory page-locked in place beforehand (`GpuFinder::lock_frames`, lock
//!    time reported apart), and from `PinnedFrames`; a fresh finder each, no `reserve`: what
//!    a library caller gets.
//! 4. Disk floor (`device=disk-read`): each cold data file read sequentially in 8 MiB reads on
//!    one thread, after evicting it from the page cache. CPU floor (`device=cpu:bench`,
//!    `cpu:bench-frozen`): the CPU finder on all cores over frames already in memory.
//! 5. Every run is the real command in a fresh process, once to warm up (first run) and once
//!    measured: `us_per_frame` is the data phase from its summary line, `wall_s` the whole
//!    command; cold runs evict every input file before each run. Every cluster file of a size
//!    (GPU and CPU, `.npy` and raw) is compared byte for byte.
//! 6. A campaign (`--campaign K`, default 20): the data cut into K `.npy` acquisitions found
//!    by one `cluda find --data ... --out-dir`, against one run over the same frames as one
//!    file (rows `<device>:campaign` and `<device>:whole`, wall time of the command).
//! 7. Start-up: the whole command on 10 frames, with the driver's JIT cache disabled
//!    (`CUDA_CACHE_DISABLE=1`, as on a fresh machine) and enabled.
//!
//! Results: `user-path.csv` (one row per measured run: `size,device,input,cache,output,frames,
//! us_per_frame,wall_s`; `input` npy|raw, `cache` warm|cold, `output` none|tmpfs|disk) and
//! `user-path.md` under `--out`.
//!
//! One module a job: [`command`] (the runs of `cluda`), [`floors`], [`campaign`].

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cluda::io::NpyFrames;

mod campaign;
mod command;
mod floors;

use campaign::*;
use command::*;
use floors::*;

struct Opts {
    frames: usize,
    pedestal_frames: usize,
    sizes: Vec<usize>,
    devices: Vec<String>,
    inputs: Vec<String>,
    caches: Vec<String>,
    data_dir: PathBuf,
    tmpfs: PathBuf,
    disk: Option<PathBuf>,
    cluda: PathBuf,
    out: PathBuf,
    /// Acquisitions the data file is cut into for the campaign rows (1: none).
    campaign: usize,
}

fn parse() -> Result<Opts, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let sibling = exe.with_file_name("cluda");
    let mut o = Opts {
        frames: 20_000,
        pedestal_frames: 1000,
        sizes: vec![3, 9],
        devices: vec!["gpu".into(), "cpu".into()],
        inputs: vec!["npy".into(), "raw".into()],
        caches: vec!["warm".into(), "cold".into()],
        data_dir: std::env::temp_dir().join("cluda-user-path"),
        tmpfs: PathBuf::from("/dev/shm"),
        disk: None,
        cluda: if sibling.exists() {
            sibling
        } else {
            PathBuf::from(env!("CARGO_BIN_EXE_cluda"))
        },
        out: PathBuf::from("bench-results/user-path"),
        campaign: 20,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v}: {e}"));
        match a.as_str() {
            "--bench" => {}
            "--frames" => o.frames = num(val()?)?,
            "--pedestal-frames" => o.pedestal_frames = num(val()?)?,
            "--sizes" => o.sizes = support::bench::parse_list(&val()?)?,
            "--devices" => o.devices = val()?.split(',').map(String::from).collect(),
            "--inputs" => o.inputs = val()?.split(',').map(String::from).collect(),
            "--caches" => o.caches = val()?.split(',').map(String::from).collect(),
            "--data-dir" => o.data_dir = val()?.into(),
            "--tmpfs" => o.tmpfs = val()?.into(),
            "--disk" => o.disk = Some(val()?.into()),
            "--cluda" => o.cluda = val()?.into(),
            "--out" => o.out = val()?.into(),
            "--campaign" => o.campaign = num(val()?)?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

fn main() {
    support::bench::main("user_path", run);
}

fn run() -> Result<(), String> {
    let o = parse()?;
    std::fs::create_dir_all(&o.data_dir).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let (ped, data) = (o.data_dir.join("pedestal.npy"), o.data_dir.join("data.npy"));
    let want = NpyFrames::open(&data).map(|f| f.len()).unwrap_or(0);
    if want != o.frames {
        let t = Instant::now();
        generate(&o, &o.data_dir, false)?;
        eprintln!("generated the input in {:.1} s", t.elapsed().as_secs_f64());
    }
    let bytes = warm(&data)? + warm(&ped)?;
    eprintln!("input: {bytes} bytes, in the page cache");
    let gpu = o.devices.iter().any(|d| d.starts_with("gpu"));

    let mut md = String::new();
    let mut csv = String::from("size,device,input,cache,output,frames,us_per_frame,wall_s\n");
    let _ = writeln!(
        md,
        "# The user's path\n\ncommand: `cargo bench --bench user_path -- --frames {} --sizes {} --devices {} --inputs {} --caches {}`\n\n{} frames of 400x400, as a `.npy` and as a raw acquisition, 1000 pedestal frames, n_sigma 5, F64. `us/frame` is the data phase of the command's summary line, `wall` the whole command (second run of each; the first warms the page cache and the driver's JIT cache).\n",
        o.frames,
        support::bench::comma_list(&o.sizes),
        o.devices.join(","),
        o.inputs.join(","),
        o.caches.join(","),
        o.frames
    );
    let _ = writeln!(
        md,
        "## Floors (same run)\n\n| floor | us/frame |\n|---|---:|"
    );
    for dev in o.devices.iter().filter(|d| !d.contains(':')) {
        let us = read_floor(&data, dev)?;
        let _ = writeln!(md, "| read into {dev} memory | {us:.2} |");
    }
    if gpu {
        let us = read_floor_write_combined(&data)?;
        let _ = writeln!(md, "| read into write-combined gpu memory | {us:.2} |");
        for (wc, what) in [(false, "gpu memory"), (true, "write-combined gpu memory")] {
            let us = read_upload_floor(&data, wc)?;
            let _ = writeln!(
                md,
                "| read into {what} while each slot is uploaded (no kernel) | {us:.2} |"
            );
        }
    }
    let mut opt10 = Vec::new();
    if gpu {
        for &size in &o.sizes {
            let us = opt10_floor(&ped, &data, size)?;
            let _ = writeln!(md, "| opt10 in memory, {size}x{size} | {us:.2} |");
            opt10.push((size, us));
        }
    }
    if gpu {
        let _ = writeln!(
            md,
            "\n## Library path: `GpuFinder::find_each` on {} frames in memory, one call\n\n| size | memory | us/frame | call s | vs opt10 |\n|---|---|---:|---:|---:|",
            o.frames
        );
        for &size in &o.sizes {
            let (rows, lock_s) = library_path(&ped, &data, size)?;
            let opt = opt10
                .iter()
                .find(|(s, _)| *s == size)
                .map_or(f64::NAN, |(_, us)| *us);
            for (what, us, wall) in rows {
                let _ = writeln!(
                    md,
                    "| {size}x{size} | {what} | {us:.2} | {wall:.3} | {:.0}% |",
                    100.0 * opt / us
                );
                let _ = writeln!(
                    csv,
                    "{size},{what},npy,warm,none,{},{us:.3},{wall:.3}",
                    o.frames
                );
            }
            let _ = writeln!(
                md,
                "| {size}x{size} | (locking the Vec in place, once) | {:.2} | {lock_s:.3} | |",
                lock_s * 1e6 / o.frames as f64
            );
        }
    }
    // The same frames as a raw acquisition (what slsReceiver writes), made once.
    let raw_dir = o.data_dir.join("raw");
    let (raw_ped, raw_data) = (
        raw_dir.join("pedestal_master_0.json"),
        raw_dir.join("data_master_0.json"),
    );
    if o.inputs.iter().any(|i| i == "raw") && !raw_complete(&raw_data, o.frames) {
        let t = Instant::now();
        let _ = std::fs::remove_dir_all(&raw_dir);
        generate(&o, &raw_dir, true)?;
        eprintln!(
            "generated the raw input in {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    let input_files = |input: &str| -> Result<(PathBuf, PathBuf, Vec<PathBuf>), String> {
        Ok(match input {
            "npy" => (ped.clone(), data.clone(), vec![ped.clone(), data.clone()]),
            "raw" => (
                raw_ped.clone(),
                raw_data.clone(),
                acquisition_files(&raw_dir)?,
            ),
            other => return Err(format!("unknown input {other} (npy|raw)")),
        })
    };
    let _ = writeln!(
        md,
        "\n## Disk: a plain sequential read of the cold data file (8 MiB reads, one thread)\n\n| input | bytes | us/frame | GB/s |\n|---|---:|---:|---:|"
    );
    let mut disk_us = Vec::new();
    for input in &o.inputs {
        let (_, d, files) = input_files(input)?;
        let data_files: Vec<PathBuf> = if input == "raw" {
            files
                .iter()
                .filter(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("data_") && n.ends_with(".raw"))
                })
                .cloned()
                .collect()
        } else {
            vec![d.clone()]
        };
        evict(&data_files)?;
        let t = Instant::now();
        let mut bytes = 0;
        for f in &data_files {
            bytes += warm(f)?;
        }
        let secs = t.elapsed().as_secs_f64();
        let us = secs * 1e6 / o.frames as f64;
        let _ = writeln!(
            md,
            "| {input} | {bytes} | {us:.2} | {:.2} |",
            bytes as f64 / secs / 1e9
        );
        for &size in &o.sizes {
            let _ = writeln!(
                csv,
                "{size},disk-read,{input},cold,none,{},{us:.3},{secs:.3}",
                o.frames
            );
        }
        disk_us.push((input.clone(), us));
    }
    if o.devices.iter().any(|d| d.starts_with("cpu")) {
        let _ = writeln!(
            md,
            "\n## The CPU finder in memory: one `find_each` over {} frames already in memory, all cores\n\n| size | threshold | us/frame |\n|---|---|---:|",
            CPU_BENCH_FRAMES.min(o.frames)
        );
        for &size in &o.sizes {
            for (mode, name) in [
                (cluda::ThresholdMode::Live, "cpu:bench"),
                (cluda::ThresholdMode::Frozen, "cpu:bench-frozen"),
            ] {
                let (us, secs) = cpu_in_memory(&ped, &data, size, mode)?;
                let _ = writeln!(md, "| {size}x{size} | {mode:?} | {us:.2} |");
                let _ = writeln!(
                    csv,
                    "{size},{name},npy,warm,none,{},{us:.3},{secs:.3}",
                    CPU_BENCH_FRAMES.min(o.frames)
                );
            }
        }
    }
    let _ = writeln!(
        md,
        "\n## Runs\n\n`cold`: every input file evicted from the page cache (`posix_fadvise(DONTNEED)`) before each run; `vs disk`: the disk read's us/frame over the run's.\n\n| size | device | input | cache | output | us/frame | wall s | first run wall s | bound |\n|---|---|---|---|---|---:|---:|---:|---|"
    );
    let mut outputs: Vec<(&str, Option<PathBuf>)> =
        vec![("none", None), ("tmpfs", Some(o.tmpfs.clone()))];
    if let Some(d) = &o.disk {
        outputs.push(("disk", Some(d.clone())));
    }
    for &size in &o.sizes {
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for input in &o.inputs {
            let (pedestal_in, data_in, all_files) = input_files(input)?;
            for cache in &o.caches {
                let cold = cache == "cold";
                // Cold runs measure the read: no output.
                let outs: Vec<&(&str, Option<PathBuf>)> = outputs
                    .iter()
                    .filter(|(k, _)| !cold || *k == "none")
                    .collect();
                for (kind, dir) in outs {
                    let (mut write_us, mut write_threaded_us) = (None, None);
                    let mut devices = o.devices.clone();
                    // Frozen thresholds for the CPU on the plain case (the CPU goal is
                    // live and frozen).
                    if input == "npy"
                        && !cold
                        && *kind == "none"
                        && devices.iter().any(|d| d == "cpu")
                    {
                        devices.push("cpu:frozen".into());
                    }
                    for dev in &devices {
                        let out = dir.as_ref().map(|d| {
                            d.join(format!(
                                "cluda-user-path-{size}-{input}-{}.clust",
                                dev.replace(':', "-")
                            ))
                        });
                        // `gpu:map`: the zero-copy (mapped) input; `cpu:frozen`: frozen thresholds.
                        let (device, variant) = dev.split_once(':').unwrap_or((dev.as_str(), ""));
                        let mut args = vec![
                            "find".to_string(),
                            "--pedestal".into(),
                            s(&pedestal_in).into(),
                            "--data".into(),
                            s(&data_in).into(),
                            "--cluster".into(),
                            size.to_string(),
                            "--device".into(),
                            device.into(),
                            "--timing".into(),
                        ];
                        match variant {
                            "map" => args.extend(["--input".into(), "map".into()]),
                            "frozen" => args.extend(["--threshold".into(), "frozen".into()]),
                            _ => {}
                        }
                        if let Some(p) = &out {
                            args.push("--out".into());
                            args.push(s(p).into());
                        }
                        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                        let once = || -> Result<Run, String> {
                            if let Some(p) = &out {
                                let _ = std::fs::remove_file(p);
                            }
                            if cold {
                                evict(&all_files)?;
                            }
                            cluda(&o, &argv, &[])
                        };
                        let first = once()?;
                        let run = once()?;
                        eprintln!(
                            "{size}x{size} {dev} {input} {cache} {kind}: {:.2} us/frame, {:.2} s\n{}",
                            run.us_per_frame,
                            run.wall_s,
                            run.stderr.trim_end()
                        );
                        if let (Some(p), Some(d)) = (&out, dir) {
                            let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
                            if write_us.is_none() {
                                write_us = Some(write_floor(d, len, o.frames)?);
                                write_threaded_us = Some(write_floor_threaded(
                                    d,
                                    len,
                                    o.frames,
                                    FLOOR_WRITE_THREADS,
                                )?);
                            }
                            files.push((format!("{dev} {input} {kind}"), p.clone()));
                        }
                        let bound = if cold {
                            disk_us.iter().find(|(i, _)| i == input).map_or(
                                "-".to_string(),
                                |(_, d)| {
                                    format!("{:.0}% of the disk", 100.0 * d / run.us_per_frame)
                                },
                            )
                        } else {
                            let floor = opt10
                                .iter()
                                .find(|(s, _)| *s == size)
                                .map(|(_, us)| *us)
                                .unwrap_or(0.0)
                                .max(write_us.unwrap_or(0.0));
                            if floor > 0.0 && device == "gpu" {
                                format!(
                                    "{:.0}% of max(opt10, write)",
                                    100.0 * run.us_per_frame / floor
                                )
                            } else {
                                "-".into()
                            }
                        };
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | {dev} | {input} | {cache} | {kind} | {:.2} | {:.3} | {:.3} | {bound} |",
                            run.us_per_frame, run.wall_s, first.wall_s,
                        );
                        let _ = writeln!(
                            csv,
                            "{size},{dev},{input},{cache},{kind},{},{:.3},{:.3}",
                            o.frames, run.us_per_frame, run.wall_s
                        );
                    }
                    if let Some(w) = write_us {
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | write floor | | | {kind} | {w:.2} | | | |"
                        );
                    }
                    if let Some(w) = write_threaded_us {
                        let _ = writeln!(
                            md,
                            "| {size}x{size} | write floor, {FLOOR_WRITE_THREADS} threads | | | {kind} | {w:.2} | | | |"
                        );
                    }
                }
            }
        }
        // Every cluster file of the same size (each device, input and output): the same
        // clusters; byte-identical within an input, and across inputs up to the frame numbers
        // (a raw acquisition numbers its frames from its headers, from 1; a `.npy` from 0).
        if let Some((a, pa)) = files.first() {
            let first = std::fs::read(pa).ok();
            let first_frames = first.as_deref().and_then(|b| cluster_frames(b, size));
            let mut differ = Vec::new();
            for (b, pb) in &files[1..] {
                let bytes = std::fs::read(pb).ok();
                let same_input = a.split(' ').nth(1) == b.split(' ').nth(1);
                let same = if same_input {
                    first.is_some() && bytes == first
                } else {
                    let other = bytes.as_deref().and_then(|x| cluster_frames(x, size));
                    match (&first_frames, &other) {
                        (Some(x), Some(y)) => same_up_to_numbering(x, y),
                        _ => false,
                    }
                };
                if !same {
                    differ.push(b.clone());
                }
            }
            let _ = writeln!(
                md,
                "\n{size}x{size}: {} cluster files (`{}`) identical to `{a}` (other inputs: up to the frame numbers' offset): **{}**",
                files.len() - 1,
                files[1..]
                    .iter()
                    .map(|(b, _)| b.as_str())
                    .collect::<Vec<_>>()
                    .join("`, `"),
                if differ.is_empty() {
                    "yes".to_string()
                } else {
                    format!("NO ({})", differ.join(", "))
                }
            );
        }
        for (_, p) in files {
            let _ = std::fs::remove_file(p);
        }
        let _ = writeln!(md);
        // What is measured so far, in case a later part does not finish.
        let _ = std::fs::write(o.out.join("user-path.csv"), &csv);
        let _ = std::fs::write(o.out.join("user-path.md"), &md);
    }
    if o.campaign > 1 {
        campaign(&o, &ped, &data, &mut md, &mut csv)?;
    }
    if gpu {
        // Start-up: 10 frames, JIT cache off (a fresh machine) and on.
        let small = o.data_dir.join("small");
        cluda(
            &o,
            &[
                "gen",
                "--overwrite",
                "--out",
                s(&small),
                "--frames",
                "10",
                "--pedestal-frames",
                "1000",
            ],
            &[],
        )?;
        let argv = [
            "find",
            "--pedestal",
            &format!("{}/pedestal.npy", s(&small)),
            "--data",
            &format!("{}/data.npy", s(&small)),
            "--device",
            "gpu",
        ];
        let argv: Vec<&str> = argv.iter().map(|a| a.as_ref()).collect();
        let _ = writeln!(
            md,
            "## Start-up: `cluda find --device gpu` on 10 frames\n\n| JIT cache | wall s |\n|---|---:|"
        );
        for (what, env) in [("disabled (fresh machine)", "1"), ("enabled, warm", "0")] {
            cluda(&o, &argv, &[("CUDA_CACHE_DISABLE", env)])?;
            let r = cluda(&o, &argv, &[("CUDA_CACHE_DISABLE", env)])?;
            let _ = writeln!(md, "| {what} | {:.3} |", r.wall_s);
        }
        let r = cluda(
            &o,
            &argv[..argv.len() - 1]
                .iter()
                .copied()
                .chain(["cpu"])
                .collect::<Vec<_>>(),
            &[],
        )?;
        let _ = writeln!(md, "| (CPU, for scale) | {:.3} |", r.wall_s);
        // Where a fresh machine's start-up goes: the same run with `--timing`.
        let timed: Vec<&str> = argv.iter().copied().chain(["--timing"]).collect();
        let r = cluda(&o, &timed, &[("CUDA_CACHE_DISABLE", "1")])?;
        let lines: Vec<&str> = r
            .stderr
            .lines()
            .filter(|l| l.starts_with("timing:"))
            .collect();
        let _ = writeln!(
            md,
            "\n`--timing` of the same run, JIT cache disabled ({:.3} s wall):\n\n```text\n{}\n```",
            r.wall_s,
            lines.join("\n")
        );
    }
    std::fs::write(o.out.join("user-path.csv"), &csv).map_err(|e| e.to_string())?;
    std::fs::write(o.out.join("user-path.md"), &md).map_err(|e| e.to_string())?;
    print!("{md}");
    Ok(())
}
