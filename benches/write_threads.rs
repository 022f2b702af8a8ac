//! How fast the cluster-file writer writes with 1, 2 and 4 writer threads: a small standalone
//! timing (not a test), for choosing [`DEFAULT_WRITE_THREADS`] on a machine.
//!
//! `cargo bench --bench write_threads -- [--dir /dev/shm] [--mib 1024] [--threads 1,2,4]
//!  [--reps 3]`
//!
//! Writes `--mib` MiB of 9x9 cluster records (frames of 188 KB, as 20,000 MOENCH frames at
//! 9x9 give) through [`ClusterFileWriter::create_with_threads`] into `--dir`, `--reps` times
//! per thread count, interleaved; prints the best and median GB/s of each count (the whole
//! write, from creating the file to its rename), the writer threads' busy time and the
//! caller's time in `write_frame` (the copy into the writer's buffers). Every file is checked
//! byte for byte against the first.
//!
//! [`DEFAULT_WRITE_THREADS`]: cluda::io::write_behind::DEFAULT_WRITE_THREADS
//! [`ClusterFileWriter::create_with_threads`]: cluda::io::ClusterFileWriter::create_with_threads

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cluda::ClusterSize;
use cluda::cluster::ClusterBatch;
use cluda::io::ClusterFileWriter;

fn main() {
    support::bench::main("write_threads", run);
}

fn run() -> Result<(), String> {
    let (mut dir, mut mib, mut threads, mut reps) = (
        PathBuf::from("/dev/shm"),
        1024u64,
        vec![1usize, 2, 4],
        3usize,
    );
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--dir" => dir = val()?.into(),
            "--mib" => mib = val()?.parse().map_err(|e| format!("--mib: {e}"))?,
            "--reps" => reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--threads" => {
                threads = val()?
                    .split(',')
                    .map(|s| s.parse().map_err(|e| format!("--threads {s}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let reps = reps.max(1);
    // One frame of 9x9 clusters: 568 records of 328 bytes (188 KB), distinct per frame.
    let size = ClusterSize::S9;
    let per_frame = 568;
    let pool = 64;
    let mut batch = ClusterBatch::new(size);
    for f in 0..pool {
        let words: Vec<u32> = (0..per_frame * size.record_words())
            .map(|i| (i as u32).wrapping_mul(2_654_435_761) ^ f)
            .collect();
        batch.push_frame(&words);
    }
    let frame_bytes = (8 + per_frame * size.record_bytes()) as u64;
    let frames = (mib << 20) / frame_bytes;
    let bytes = frames * frame_bytes;
    println!(
        "{} MB of 9x9 cluster records ({frames} frames) into {}, {reps} reps per thread count",
        bytes / 1_000_000,
        dir.display()
    );
    let mut first: Option<Vec<u8>> = None;
    let mut results: Vec<(usize, Vec<f64>, Duration, Duration)> = threads
        .iter()
        .map(|&t| (t, Vec::new(), Duration::ZERO, Duration::ZERO))
        .collect();
    for rep in 0..reps {
        for (t, gbs, busy, copy) in results.iter_mut() {
            let path = dir.join(format!("cluda-write-threads-{t}.clust"));
            let start = Instant::now();
            let mut w =
                ClusterFileWriter::create_with_threads(&path, *t).map_err(|e| e.to_string())?;
            let mut in_write = Duration::ZERO;
            for i in 0..frames {
                let fc = batch.frame((i % pool as u64) as usize);
                let c = Instant::now();
                w.write_frame(i as i32, &fc).map_err(|e| e.to_string())?;
                in_write += c.elapsed();
            }
            let (_, stats) = w.commit().map_err(|e| e.to_string())?;
            let secs = start.elapsed().as_secs_f64();
            gbs.push(bytes as f64 / secs / 1e9);
            *busy += stats.busy;
            *copy += in_write;
            if rep == 0 {
                let got = std::fs::read(&path).map_err(|e| e.to_string())?;
                match &first {
                    None => first = Some(got),
                    Some(f) if *f == got => {}
                    Some(_) => return Err(format!("{t} threads wrote different bytes")),
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    println!(
        "| threads | best GB/s | median GB/s | writer busy s (sum over threads, per rep) | caller in write_frame s (per rep) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for (t, mut gbs, busy, copy) in results {
        gbs.sort_by(f64::total_cmp);
        println!(
            "| {t} | {:.2} | {:.2} | {:.3} | {:.3} |",
            gbs[gbs.len() - 1],
            gbs[gbs.len() / 2],
            busy.as_secs_f64() / reps as f64,
            copy.as_secs_f64() / reps as f64
        );
    }
    println!("files of every thread count identical: yes");
    Ok(())
}
