//! Precision of the `f32` pedestals against `f64` on MOENCH-like data (docs/semantics.md).
//!
//! - `F32` (the centred rewrite B1) must agree with `F64` in cluster count to 1e-5 or better,
//!   and its per-pixel std to ~1e-6 relative.
//! - `F32Naive` (raw `f32` sums) is measured honestly. On docs/test-data.md's data (baseline
//!   near 4600 ADU, noise 35-55 ADU, N = 1000) its std is off by ~0.2 % (median) when the
//!   pedestal becomes ready and by ~1 % after a few hundred live window updates: about 1e5
//!   times B1's error, but the cluster count moves by only ~0.5 %. It fails catastrophically
//!   (std 0 on many pixels, several times the clusters) when the noise is small compared with
//!   the baseline: quiet pixels of a few ADU at 4600, or MOENCH noise at baselines of 20000+.
//!   Both failure tests below are in u16 range.
//!
//! Every test prints its figures (`cargo test --release --test precision -- --nocapture`).

use cluda::generate::{GenConfig, Generator};
use cluda::{ClusterBatch, ClusterFinder, CpuFinder, FinderConfig, Frames, Precision};

/// One precision's results on one data set.
struct Run {
    precision: Precision,
    batch: ClusterBatch,
    /// Std map when the pedestal became ready, row-major.
    std_ready: Vec<f64>,
    /// Live std map after the data frames.
    std_after: Vec<f64>,
}

impl Run {
    fn per_frame(&self) -> f64 {
        self.batch.total() as f64 / self.batch.frames() as f64
    }
}

/// Pedestal and data frames of one generated data set.
struct DataSet {
    g: GenConfig,
    n: u32,
    ped: Vec<u16>,
    data: Vec<u16>,
    data_frames: usize,
}

impl DataSet {
    fn new(g: GenConfig, n: u32, data_frames: usize) -> Self {
        let gen_ = Generator::new(g.clone()).expect("generator");
        let ped = gen_.frames(0, n as usize, false);
        let data = gen_.frames(n as u64, data_frames, true);
        Self {
            g,
            n,
            ped,
            data,
            data_frames,
        }
    }

    fn run(&self, precision: Precision) -> Run {
        let (rows, cols) = (self.g.rows, self.g.cols);
        let cfg = FinderConfig::new(rows, cols)
            .pedestal_frames(self.n)
            .n_sigma(5.0)
            .precision(precision);
        let mut f = CpuFinder::new(cfg).expect("config");
        f.push_pedestal(Frames::new(&self.ped, self.n as usize, rows, cols).expect("shape"))
            .expect("pedestal");
        let std_ready = std_map(&f);
        let batch = f
            .find(Frames::new(&self.data, self.data_frames, rows, cols).expect("shape"))
            .expect("find");
        let std_after = std_map(&f);
        Run {
            precision,
            batch,
            std_ready,
            std_after,
        }
    }
}

/// The std map of `f`'s pedestal, row-major (it is ready once the dark frames are in).
fn std_map(f: &CpuFinder) -> Vec<f64> {
    f.pedestal_ref()
        .std_map()
        .expect("ready")
        .iter()
        .copied()
        .collect()
}

/// Distribution of the relative error of a std map against the f64 one.
#[derive(Debug, Clone, Copy)]
struct ErrStats {
    median: f64,
    p99: f64,
    max: f64,
    /// Mean signed relative error (positive: std over-estimated).
    bias: f64,
    /// Pixels whose std is exactly 0 (they fire on every positive fluctuation).
    zeros: usize,
}

fn std_errors(x: &[f64], reference: &[f64]) -> ErrStats {
    let signed: Vec<f64> = x.iter().zip(reference).map(|(a, b)| (a - b) / b).collect();
    let mut abs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let q = |f: f64| abs[((abs.len() - 1) as f64 * f) as usize];
    ErrStats {
        median: q(0.5),
        p99: q(0.99),
        max: abs[abs.len() - 1],
        bias: signed.iter().sum::<f64>() / signed.len() as f64,
        zeros: x.iter().filter(|&&s| s == 0.0).count(),
    }
}

/// Relative difference of total cluster counts.
fn count_diff(x: &Run, reference: &Run) -> f64 {
    (x.batch.total() as f64 - reference.batch.total() as f64) / reference.batch.total() as f64
}

fn report(title: &str, r64: &Run, others: &[&Run]) -> Vec<(ErrStats, ErrStats, f64)> {
    println!(
        "{title}\n  f64: {} clusters in {} frames, {:.3}/frame",
        r64.batch.total(),
        r64.batch.frames(),
        r64.per_frame()
    );
    others
        .iter()
        .map(|r| {
            let ready = std_errors(&r.std_ready, &r64.std_ready);
            let after = std_errors(&r.std_after, &r64.std_after);
            let d = count_diff(r, r64);
            let same = (0..r.batch.frames())
                .filter(|&i| r.batch.frame(i).words() == r64.batch.frame(i).words())
                .count();
            println!(
                "  {}: {:.3}/frame, count rel. diff {d:+.3e}, frames identical to f64 {same}/{}\n    std rel. error when ready: median {:.2e} p99 {:.2e} max {:.2e} bias {:+.2e} zeros {}\n    std rel. error after data: median {:.2e} p99 {:.2e} max {:.2e} bias {:+.2e} zeros {}",
                r.precision.name(),
                r.per_frame(),
                r.batch.frames(),
                ready.median,
                ready.p99,
                ready.max,
                ready.bias,
                ready.zeros,
                after.median,
                after.p99,
                after.max,
                after.bias,
                after.zeros
            );
            (ready, after, d)
        })
        .collect()
}

/// docs/test-data.md's data: 200x200 MOENCH-like frames, N = 1000, 400 data frames (> 1e5 clusters, so one cluster is < 1e-5), 3x3, n_sigma 5.
#[test]
fn f32_b1_matches_f64_and_naive_is_orders_of_magnitude_worse() {
    let ds = DataSet::new(GenConfig::new(200, 200, 2026), 1000, 400);
    let (r64, r32, rn) = (
        ds.run(Precision::F64),
        ds.run(Precision::F32),
        ds.run(Precision::F32Naive),
    );
    let s = report(
        "MOENCH-like 200x200, baseline ~4600, noise 35-55 ADU, N 1000, 400 frames, 3x3, n_sigma 5",
        &r64,
        &[&r32, &rn],
    );
    let [(b1_ready, b1_after, b1_d), (nv_ready, nv_after, nv_d)] = [s[0], s[1]];
    assert!(
        r64.per_frame() > 100.0,
        "the data set should have many clusters"
    );
    // B1: cluster count to 1e-5 or better, std to ~1e-6.
    assert!(
        b1_d.abs() <= 1e-5,
        "F32 (B1) vs F64 cluster count: {b1_d:e}"
    );
    assert!(b1_ready.max <= 1e-6, "B1 std when ready: {b1_ready:?}");
    // After data frames a pixel may have had a different (near-threshold) classification in
    // f32 and f64, so its window holds different samples: that is not arithmetic error, and it
    // shows in the max only (measured 9.7e-5 on one pixel), hence the p99 here.
    assert!(b1_after.p99 <= 1e-5, "B1 std after data: {b1_after:?}");
    assert_eq!(b1_ready.zeros + b1_after.zeros, 0);
    // Naive: its std error is at least 1e3 times B1's (measured ~1e5), typical and worst
    // case, and it does move the cluster count measurably, far beyond B1's tolerance.
    let median = |e: &ErrStats| e.median;
    let p99 = |e: &ErrStats| e.p99;
    let max = |e: &ErrStats| e.max;
    for (nv, b1, stat) in [
        (nv_ready, b1_ready, &median as &dyn Fn(&ErrStats) -> f64),
        (nv_after, b1_after, &median),
        (nv_after, b1_after, &p99),
        (nv_ready, b1_ready, &max),
    ] {
        assert!(stat(&nv) >= 1e3 * stat(&b1), "{nv:?} vs {b1:?}");
    }
    assert!(
        nv_ready.median > 1e-4,
        "naive std error when ready: {nv_ready:?}"
    );
    assert!(
        nv_d.abs() > 1e-3,
        "naive cluster count moved by only {nv_d:e}"
    );
    assert!(nv_d.abs() > 100.0 * 1e-5);
}

/// Where naive collapses, within u16 data: small noise against the baseline. B1 stays exact
/// (count within 1e-5) on the same frames.
fn catastrophe(title: &str, g: GenConfig) {
    let ds = DataSet::new(g, 1000, 200);
    let (r64, r32, rn) = (
        ds.run(Precision::F64),
        ds.run(Precision::F32),
        ds.run(Precision::F32Naive),
    );
    let s = report(title, &r64, &[&r32, &rn]);
    let [(b1_ready, _, b1_d), (_, nv_after, nv_d)] = [s[0], s[1]];
    assert!(b1_d.abs() <= 1e-5, "B1 count: {b1_d:e}");
    assert!(b1_ready.max <= 1e-6, "B1 std: {b1_ready:?}");
    // Naive: many quiet pixels with std exactly 0 and at least twice the clusters.
    assert!(
        nv_after.zeros * 10 >= rn.std_after.len(),
        "naive zeros: {nv_after:?}"
    );
    assert!(
        nv_d > 1.0,
        "naive should find over twice the clusters, got {nv_d:+e}"
    );
}

#[test]
fn f32_naive_collapses_on_quiet_pixels() {
    let mut g = GenConfig::new(64, 64, 7);
    g.noise = (3.0, 5.0);
    catastrophe(
        "quiet pixels: 64x64, baseline ~4600, noise 3-5 ADU, N 1000, 200 frames",
        g,
    );
}

#[test]
fn f32_naive_collapses_at_high_baseline() {
    let mut g = GenConfig::new(64, 64, 8);
    g.baseline = 60000.0;
    catastrophe(
        "high baseline: 64x64, baseline ~60000, noise 35-55 ADU, N 1000, 200 frames",
        g,
    );
}
