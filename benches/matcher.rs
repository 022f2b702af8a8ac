//! Descriptor-matcher benchmark (issue 6, item 4; issue 27): V1, V2, V3, V4 and bare cuBLAS
//! GEMMs of the same shape (FP32 SGEMM, V3's floor; TF32, V4's floor) at 16384 x 16384,
//! 16384 x 100000 and a non-divisible size, plus V3 and V4 tile-shape sweeps at the reference
//! size.
//!
//! Reports per row: wall time of the whole call (validation, upload, kernels, download; median),
//! device time (CUDA events around the matching work; median), effective GFLOP/s
//! (2 * n * m * 128 / device time), logical bytes (what the algorithm must move at least:
//! inputs, outputs and, for V1/V3, the matrix or tiles written and read once), the ratio to the
//! bare SGEMM's device time, V3's recomputed rows, an exactness check of 256 sampled rows
//! against an f64 oracle, and for V4 its rescored candidates per row (mean, max), its
//! overflowed rows and the rows (of all) where it differs from V2 in index or distance bits.
//! With the feature `experimental`, V4's fused kernels get rows of their own ("v4 fused 2-pass",
//! "v4 fused 1-pass"). Data: uniform [0, 1) descriptors generated here (seeded).
//!
//! `cargo bench --bench matcher`; set `MATCHER_BENCH_OUT=dir` to also write `matcher.csv` and
//! `matcher.md` there. Needs a CUDA GPU (prints a note and exits otherwise).

use std::fmt::Write as _;
use std::time::Instant;

use cluda::cuda::Device;
use cluda::matcher::{
    Descriptor, GpuMatcher, Match, MatchVersion, V3Tiling, V4Kernel, v3::bare_sgemm_ms,
    v4::bare_tf32_ms,
};
use rayon::prelude::*;

/// V4's fused kernels and their rows' labels (feature `experimental`; none without it).
#[cfg(feature = "experimental")]
const V4_FUSED: &[(&str, V4Kernel)] = &[
    ("v4 fused 2-pass", V4Kernel::FusedTwoPass),
    ("v4 fused 1-pass", V4Kernel::FusedOnePass),
];
/// V4's fused kernels and their rows' labels (feature `experimental`; none without it).
#[cfg(not(feature = "experimental"))]
const V4_FUSED: &[(&str, V4Kernel)] = &[];

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    }
}

fn data(n: usize, seed: u64) -> Vec<Descriptor> {
    (0..n)
        .into_par_iter()
        .chunks(4096)
        .flat_map_iter(|c| {
            let mut r = Rng(seed.wrapping_mul(0x1234_5678_9ABC_DEF1) ^ c[0] as u64);
            c.into_iter()
                .map(move |_| std::array::from_fn(|_| r.unit()))
        })
        .collect()
}

fn exact(a: &Descriptor, b: &Descriptor) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum()
}

/// Rows (of 256 sampled) violating the criterion.
fn sample_check(lhs: &[Descriptor], rhs: &[Descriptor], got: &[Match]) -> usize {
    let step = (lhs.len() / 256).max(1);
    (0..lhs.len())
        .step_by(step)
        .take(256)
        .collect::<Vec<_>>()
        .par_iter()
        .filter(|&&i| {
            let a = &lhs[i];
            let dmin = rhs
                .iter()
                .map(|b| exact(a, b))
                .fold(f64::INFINITY, f64::min);
            let dj = exact(a, &rhs[got[i].index as usize]);
            let norm: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum();
            dj > dmin * (1.0 + 1e-5) + 1e-12 * (1.0 + norm)
        })
        .count()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    label: String,
    n: usize,
    m: usize,
    wall_ms: f64,
    device_ms: f64,
    bytes: f64,
    recomputed: usize,
    bad: Option<usize>,
    /// V4: candidates per row (mean, max), overflowed rows, rows differing from V2 (all rows).
    v4: Option<(f64, u32, usize, usize)>,
}

/// The tilings timed on the first size, `(name, version, rows, cols, overlap)`: V4's, then V3's.
const TILES: [(&str, MatchVersion, usize, usize, bool); 17] = [
    ("v4", MatchVersion::V4, 8192, 16384, true),
    ("v4", MatchVersion::V4, 16384, 16384, true),
    ("v4", MatchVersion::V4, 16384, 4096, true),
    ("v4", MatchVersion::V4, 2048, 16384, true),
    ("v4", MatchVersion::V4, 4096, 16384, false),
    // Tiles whose two buffers fit in the H200's 50 MB L2: the fold reads what the GEMM just
    // wrote from L2 instead of HBM.
    ("v4", MatchVersion::V4, 1024, 4096, true),
    ("v4", MatchVersion::V4, 2048, 2048, true),
    ("v4", MatchVersion::V4, 512, 8192, true),
    ("v3", MatchVersion::V3, 4096, 16384, false),
    ("v3", MatchVersion::V3, 16384, 2048, true),
    ("v3", MatchVersion::V3, 16384, 2048, false),
    ("v3", MatchVersion::V3, 16384, 4096, true),
    ("v3", MatchVersion::V3, 8192, 1024, true),
    ("v3", MatchVersion::V3, 4096, 2048, true),
    ("v3", MatchVersion::V3, 2048, 4096, false),
    ("v3", MatchVersion::V3, 8192, 16384, true),
    ("v3", MatchVersion::V3, 16384, 16384, false),
];

/// The rows of the tilings `(name, version, rows, cols, overlap)` (labelled
/// `"<name> tile RxC overlap"` or `"... 1 stream"`).
fn tile_configs(
    tiles: &[(&str, MatchVersion, usize, usize, bool)],
) -> Vec<(String, MatchVersion, Option<V3Tiling>)> {
    tiles
        .iter()
        .map(|&(name, version, rows, cols, overlap)| {
            let streams = if overlap { " overlap" } else { " 1 stream" };
            let tiling = V3Tiling {
                rows,
                cols,
                overlap,
            };
            (
                format!("{name} tile {rows}x{cols}{streams}"),
                version,
                Some(tiling),
            )
        })
        .collect()
}

fn main() {
    let dev = match Device::open(0) {
        Ok(d) => d,
        Err(e) => {
            println!("matcher bench skipped: {e}");
            return;
        }
    };
    let mut matcher = GpuMatcher::new(&dev).expect("matcher");
    println!("device: {}", dev.name());
    let sizes = [(16384usize, 16384usize), (16384, 100_000), (10_007, 30_011)];
    let mut rows: Vec<Row> = Vec::new();
    let mut floors: Vec<(usize, usize, f64)> = Vec::new();
    let mut tf32_floors: Vec<(usize, usize, f64)> = Vec::new();
    for (si, &(n, m)) in sizes.iter().enumerate() {
        let t = Instant::now();
        let lhs = data(n, 1 + si as u64 * 2);
        let rhs = data(m, 2 + si as u64 * 2);
        eprintln!("{n}x{m}: data in {:.2} s", t.elapsed().as_secs_f64());
        let reps = if n * m > 16384 * 16384 { 3 } else { 7 };
        let io = (n + m) as f64 * 512.0 + n as f64 * 8.0;
        let mat = n as f64 * m as f64 * 4.0;
        let bare = [
            (
                bare_sgemm_ms(&mut matcher, &lhs, &rhs, reps),
                "SGEMM",
                &mut floors,
            ),
            (
                bare_tf32_ms(&mut matcher, &lhs, &rhs, reps),
                "TF32 GEMM",
                &mut tf32_floors,
            ),
        ];
        for (measured, name, floor) in bare {
            match measured {
                Ok(ms) => {
                    floor.push((n, m, ms));
                    rows.push(Row {
                        label: format!("bare cuBLAS {name}"),
                        n,
                        m,
                        wall_ms: f64::NAN,
                        device_ms: ms,
                        bytes: (n + m) as f64 * 512.0 + mat,
                        recomputed: 0,
                        bad: None,
                        v4: None,
                    });
                }
                Err(e) => eprintln!("bare {name} failed: {e}"),
            }
        }
        let mut configs: Vec<(String, MatchVersion, Option<V3Tiling>)> = vec![
            ("v1".into(), MatchVersion::V1, None),
            ("v2".into(), MatchVersion::V2, None),
            ("v3".into(), MatchVersion::V3, Some(V3Tiling::default())),
            ("v4".into(), MatchVersion::V4, Some(V3Tiling::default())),
        ];
        // V4's fused kernels exist only with the feature `experimental`.
        for &(label, _) in V4_FUSED {
            configs.push((label.into(), MatchVersion::V4, None));
        }
        if si == 0 {
            configs.extend(tile_configs(&TILES));
        }
        let mut v2_matches: Option<Vec<Match>> = None;
        for (label, v, tiling) in configs {
            if let Some(t) = tiling {
                matcher.set_v3_tiling(t).expect("tiling");
            }
            let kernel = V4_FUSED.iter().find(|(l, _)| *l == label.as_str());
            matcher.set_v4_kernel(kernel.map_or(V4Kernel::Cublas, |&(_, k)| k));
            let mut walls = Vec::new();
            let mut devs = Vec::new();
            let mut last = None;
            let mut failed = None;
            for rep in 0..=reps {
                match matcher.run(&lhs, &rhs, v) {
                    Ok(r) => {
                        if rep > 0 {
                            walls.push(r.wall_ms);
                            devs.push(r.device_ms);
                        }
                        last = Some(r);
                    }
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                eprintln!("{label} {n}x{m} failed: {e}");
                continue;
            }
            let Some(r) = last else { continue };
            let bad = sample_check(&lhs, &rhs, &r.matches);
            if v == MatchVersion::V2 {
                v2_matches = Some(r.matches.clone());
            }
            let v4 = match (v, &v2_matches, r.candidates) {
                (MatchVersion::V4, Some(want), Some(c)) => {
                    let differ = r
                        .matches
                        .iter()
                        .zip(want)
                        .filter(|(g, w)| {
                            g.index != w.index || g.distance.to_bits() != w.distance.to_bits()
                        })
                        .count();
                    Some((c.mean, c.max, c.overflow_rows, differ))
                }
                _ => None,
            };
            let bytes = match v {
                MatchVersion::V1 | MatchVersion::V3 | MatchVersion::V4 => io + 2.0 * mat,
                _ => io,
            };
            let row = Row {
                label,
                n,
                m,
                wall_ms: median(walls),
                device_ms: median(devs),
                bytes,
                recomputed: r.recomputed_rows,
                bad: Some(bad),
                v4,
            };
            eprintln!(
                "{} {n}x{m}: device {:.3} ms, wall {:.3} ms, bad {bad}, v4 {v4:?}",
                row.label, row.device_ms, row.wall_ms
            );
            rows.push(row);
        }
        matcher.set_v3_tiling(V3Tiling::default()).expect("tiling");
    }

    let mut md = String::new();
    let mut csv = String::from(
        "version,n,m,wall_ms,device_ms,gflops,logical_gb,ratio_to_sgemm,ratio_to_tf32,recomputed_rows,sample_violations,v4_cand_mean,v4_cand_max,v4_overflow_rows,v4_rows_differing_from_v2\n",
    );
    let _ = writeln!(md, "device: {}\n", dev.name());
    let _ = writeln!(
        md,
        "| version | n x m | wall ms | device ms | GFLOP/s | logical GB | x bare SGEMM | x bare TF32 | recomputed rows | sample violations (of 256) | v4 candidates/row mean, max | v4 overflow rows | v4 rows != v2 (all rows) |"
    );
    let _ = writeln!(
        md,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &rows {
        let flops = 2.0 * r.n as f64 * r.m as f64 * 128.0;
        let gflops = flops / (r.device_ms * 1e-3) / 1e9;
        // The bare GEMM's time at this row's shape (NaN where none was timed).
        let floor_of = |floors: &[(usize, usize, f64)]| {
            floors
                .iter()
                .find(|f| f.0 == r.n && f.1 == r.m)
                .map(|f| f.2)
                .unwrap_or(f64::NAN)
        };
        let ratio = r.device_ms / floor_of(&floors);
        let ratio_tf32 = r.device_ms / floor_of(&tf32_floors);
        let (cand, over, differ, cand_csv) = match r.v4 {
            Some((mean, max, over, differ)) => (
                format!("{mean:.2}, {max}"),
                over.to_string(),
                differ.to_string(),
                format!("{mean:.4},{max},{over},{differ}"),
            ),
            None => ("-".into(), "-".into(), "-".into(), ",,,".into()),
        };
        let bad = r.bad.map(|b| b.to_string()).unwrap_or_else(|| "-".into());
        let wall = if r.wall_ms.is_nan() {
            "-".to_string()
        } else {
            format!("{:.3}", r.wall_ms)
        };
        let _ = writeln!(
            md,
            "| {} | {} x {} | {wall} | {:.3} | {:.0} | {:.3} | {ratio:.2} | {ratio_tf32:.2} | {} | {bad} | {cand} | {over} | {differ} |",
            r.label,
            r.n,
            r.m,
            r.device_ms,
            gflops,
            r.bytes / 1e9,
            r.recomputed
        );
        let _ = writeln!(
            csv,
            "{},{},{},{:.4},{:.4},{:.1},{:.4},{ratio:.4},{ratio_tf32:.4},{},{bad},{cand_csv}",
            r.label,
            r.n,
            r.m,
            r.wall_ms,
            r.device_ms,
            gflops,
            r.bytes / 1e9,
            r.recomputed
        );
    }
    println!("\n{md}\n{csv}");
    if let Ok(dir) = std::env::var("MATCHER_BENCH_OUT") {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(format!("{dir}/matcher.md"), &md);
        let _ = std::fs::write(format!("{dir}/matcher.csv"), &csv);
    }
}
