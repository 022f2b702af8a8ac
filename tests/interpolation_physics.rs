//! What eta interpolation buys, measured on generated data against the generator's truth
//! (`cluda gen --truth`): photons of 1000 ADU (about 22x the 35-55 ADU noise) on 200 x 200
//! frames, 3x3 clusters, eta2, the default cube and maps, all on the CPU through the `cluda`
//! binary (`gen`, `find --out`, `eta`, `image --photons`).
//!
//! - Flat field: the sub-pixel phase (x mod 1, y mod 1) of the placed photons (flags 0, more
//!   than 3 px from the border) is flat on 5 x 5 cells (every cell within 10 % of the mean);
//!   pixel centres and the centre of gravity are far from it.
//! - Knife edge (4 degrees from the vertical, through the centre): a step blurred by a
//!   Gaussian (an erfc profile of the signed distance), fitted by maximum likelihood over the
//!   photons within 4 px of the edge: sigma below 0.15 px and at most 0.6x the pixel centres',
//!   shift below 0.1 px.
//! - Per axis, the RMS of placed minus true positions (each photon matched once to the
//!   nearest true photon of its frame within 1 px), below the pixel centres' (1/sqrt(12) =
//!   0.29 px for a uniform phase).
//!
//! The cube comes from a flat field of its own (another seed); the checks run on other
//! acquisitions. `cargo test --release --test interpolation_physics -- --nocapture` prints the
//! figures (docs/interpolation.md, "Physics checks").

use std::path::{Path, PathBuf};

use cluda::generate::Illumination;
use cluda::io::read_cluster_file;
use cluda::{ClusterBatch, ClusterSize};
use support::cli::{Cli, find_args, run_args, s};

const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

const ROWS: usize = 200;
const COLS: usize = 200;
const PHOTON_ADU: &str = "1000";

/// A generated acquisition with its truth.
struct Set {
    dir: PathBuf,
}

impl Set {
    fn generate(root: &Path, name: &str, seed: u64, illumination: &str, frames: usize) -> Self {
        let dir = root.join(name);
        let (seed, frames, rows, cols) = (
            seed.to_string(),
            frames.to_string(),
            ROWS.to_string(),
            COLS.to_string(),
        );
        let line = CLUDA.ok(&[
            "gen",
            "--out",
            s(&dir),
            "--frames",
            &frames,
            "--pedestal-frames",
            "200",
            "--rows",
            &rows,
            "--cols",
            &cols,
            "--seed",
            &seed,
            "--photon-adu",
            PHOTON_ADU,
            "--illumination",
            illumination,
            "--truth",
        ]);
        assert!(line.contains("truth.npy ("), "{line}");
        Self { dir }
    }

    fn ped(&self) -> PathBuf {
        self.dir.join("pedestal.npy")
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data.npy")
    }

    /// `find --out`'s clusters (3x3, CPU).
    fn clusters(&self) -> (Vec<i32>, ClusterBatch) {
        let out = self.dir.join("c.clust");
        CLUDA.ok(&find_args(
            &self.ped(),
            &self.data(),
            &["--out", s(&out), "--device", "cpu"],
        ));
        read_cluster_file(&out, ClusterSize::from_side(3).unwrap()).unwrap()
    }

    /// `image --photons`'s photons through the cube `eta`.
    fn photons(&self, eta: &Path) -> Vec<Row> {
        let (img, ph) = (self.dir.join("image.npy"), self.dir.join("photons.npy"));
        CLUDA.ok(&run_args(
            "image",
            &self.ped(),
            &self.data(),
            &[
                "--eta",
                s(eta),
                "--out",
                s(&img),
                "--photons",
                s(&ph),
                "--device",
                "cpu",
            ],
        ));
        read_rows(&ph, 33)
    }

    fn truth(&self) -> Vec<Row> {
        read_rows(&self.dir.join("truth.npy"), 32)
    }
}

/// A row of a photon list or of the truth (flags 0 in the truth).
#[derive(Clone, Copy, Debug)]
struct Row {
    frame: i64,
    x: f64,
    y: f64,
    flags: u8,
}

/// The rows of a 1-D structured little-endian `.npy` of `frame <i8, x, y, energy <f8`
/// [, `flags u1`] (`size` bytes a row).
fn read_rows(path: &Path, size: usize) -> Vec<Row> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "{}", path.display());
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    assert!(
        header.starts_with(
            "{'descr': [('frame', '<i8'), ('x', '<f8'), ('y', '<f8'), ('energy', '<f8')"
        ),
        "{header}"
    );
    let body = &bytes[10 + hlen..];
    assert_eq!(body.len() % size, 0);
    let f = |r: &[u8], at: usize| f64::from_le_bytes(r[at..at + 8].try_into().unwrap());
    body.chunks_exact(size)
        .map(|r| Row {
            frame: i64::from_le_bytes(r[..8].try_into().unwrap()),
            x: f(r, 8),
            y: f(r, 16),
            flags: if size > 32 { r[32] } else { 0 },
        })
        .collect()
}

/// One found photon by three estimators: eta interpolation, the cluster's pixel centre and
/// its 3x3 centre of gravity.
#[derive(Clone, Copy, Debug)]
struct Est {
    frame: i64,
    /// The centre pixel (column, row).
    pixel: (u16, u16),
    interp: (f64, f64),
    centre: (f64, f64),
    cog: (f64, f64),
}

/// The placed photons (flags 0) with their clusters' pixel centres and centres of gravity;
/// the photon list must be the cluster file's clusters, in order.
fn estimates(photons: &[Row], numbers: &[i32], batch: &ClusterBatch) -> Vec<Est> {
    assert_eq!(photons.len(), batch.total());
    let mut out = Vec::new();
    let mut i = 0;
    for (fc, &n) in batch.iter_frames().zip(numbers) {
        for c in fc.iter() {
            let p = photons[i];
            i += 1;
            assert_eq!(p.frame, n as i64);
            if p.flags != 0 {
                continue;
            }
            let centre = (c.x as f64 + 0.5, c.y as f64 + 0.5);
            let (mut sum, mut sx, mut sy) = (0.0, 0.0, 0.0);
            for (k, &v) in c.data.iter().enumerate() {
                let v = v as f64;
                sum += v;
                sx += v * ((k % 3) as f64 - 1.0);
                sy += v * ((k / 3) as f64 - 1.0);
            }
            let cog = if sum > 0.0 {
                (centre.0 + sx / sum, centre.1 + sy / sum)
            } else {
                centre
            };
            out.push(Est {
                frame: p.frame,
                pixel: (c.x, c.y),
                interp: (p.x, p.y),
                centre,
                cog,
            });
        }
    }
    out
}

/// Whether the cluster's centre pixel lies more than 3 px from the frame's border.
fn inner(e: &Est) -> bool {
    let (x, y) = (e.pixel.0 as usize, e.pixel.1 as usize);
    x >= 3 && y >= 3 && x + 3 < COLS && y + 3 < ROWS
}

/// The 5 x 5 histogram of sub-pixel phases; the largest relative deviation of a cell from
/// the mean.
fn phase_flatness(points: impl Iterator<Item = (f64, f64)>) -> (f64, usize) {
    let mut cells = [0usize; 25];
    let mut n = 0;
    for (x, y) in points {
        let cell = |v: f64| ((v.rem_euclid(1.0) * 5.0) as usize).min(4);
        cells[cell(y) * 5 + cell(x)] += 1;
        n += 1;
    }
    let mean = n as f64 / 25.0;
    let worst = cells
        .iter()
        .map(|&c| (c as f64 - mean).abs() / mean)
        .fold(0.0, f64::max);
    (worst, n)
}

/// `ln erfc(z)` without underflow (Numerical Recipes' `erfcc`, fractional error below
/// 1.2e-7, in log form for z >= 0).
fn ln_erfc(z: f64) -> f64 {
    let a = z.abs();
    let t = 1.0 / (1.0 + 0.5 * a);
    let ln = t.ln() - a * a - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806
                        + t * (0.27886807
                            + t * (-1.13520398
                                + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    if z >= 0.0 { ln } else { (2.0 - ln.exp()).ln() }
}

fn erfc(z: f64) -> f64 {
    ln_erfc(z).exp()
}

/// Half-width of the window of the knife-edge fit, px.
const WINDOW: f64 = 4.0;

/// The log-likelihood of signed distances `d` (all within the window) under a step at
/// `shift` blurred by a Gaussian of `sigma`: density `erfc((d - shift) / (sqrt 2 sigma)) / 2`
/// normalised over `[-WINDOW, WINDOW]`.
fn log_likelihood(d: &[f64], shift: f64, sigma: f64) -> f64 {
    let k = 1.0 / (std::f64::consts::SQRT_2 * sigma);
    // The integral of erfc(t k) / 2: (t erfc(t k) - sigma sqrt(2/pi) exp(-t^2 k^2)) / 2.
    let g = |t: f64| {
        t * erfc(t * k) - sigma * (2.0 / std::f64::consts::PI).sqrt() * (-(t * k) * (t * k)).exp()
    };
    let z = 0.5 * (g(WINDOW - shift) - g(-WINDOW - shift));
    d.iter()
        .map(|&v| ln_erfc((v - shift) * k) - std::f64::consts::LN_2)
        .sum::<f64>()
        - d.len() as f64 * z.ln()
}

/// The maximum-likelihood (shift, sigma) of an erfc edge: a grid over shift in [-1, 1] and
/// log sigma in [0.002, 2] px, zoomed around the best point until the steps are tiny.
fn fit_edge(d: &[f64]) -> (f64, f64) {
    let (mut s0, mut s1) = (-1.0f64, 1.0f64);
    let (mut l0, mut l1) = (0.002f64.ln(), 2.0f64.ln());
    let mut best = (0.0, 0.3, f64::NEG_INFINITY);
    for _ in 0..8 {
        const N: usize = 24;
        for i in 0..=N {
            let shift = s0 + (s1 - s0) * i as f64 / N as f64;
            for j in 0..=N {
                let sigma = (l0 + (l1 - l0) * j as f64 / N as f64).exp();
                let ll = log_likelihood(d, shift, sigma);
                if ll > best.2 {
                    best = (shift, sigma, ll);
                }
            }
        }
        let (ds, dl) = ((s1 - s0) / N as f64 * 3.0, (l1 - l0) / N as f64 * 3.0);
        (s0, s1) = (best.0 - ds, best.0 + ds);
        (l0, l1) = ((best.1.ln() - dl).max(0.0005f64.ln()), best.1.ln() + dl);
    }
    (best.0, best.1)
}

/// The signed distance from the knife edge of `gen --illumination knife` (written out here
/// independently of the generator's): negative on the illuminated side.
fn knife_distance((x, y): (f64, f64)) -> f64 {
    let a = 4f64.to_radians();
    (x - COLS as f64 / 2.0) * a.cos() - (y - ROWS as f64 / 2.0) * a.sin()
}

/// Each estimate matched once to the nearest true photon of its frame within 1 px (by the
/// interpolated position; closest pairs first); the matched (estimate, truth) pairs.
fn matched<'a>(est: &'a [Est], truth: &[Row]) -> Vec<(&'a Est, (f64, f64))> {
    let frames = truth.iter().map(|t| t.frame).max().unwrap_or(0) as usize + 1;
    let mut by_frame: Vec<Vec<(f64, f64)>> = vec![Vec::new(); frames];
    for t in truth {
        by_frame[t.frame as usize].push((t.x, t.y));
    }
    let mut est_by_frame: Vec<Vec<&Est>> = vec![Vec::new(); frames];
    for e in est {
        est_by_frame[e.frame as usize].push(e);
    }
    let mut out = Vec::new();
    for (es, ts) in est_by_frame.iter().zip(&by_frame) {
        let mut pairs = Vec::new();
        for (i, e) in es.iter().enumerate() {
            for (j, t) in ts.iter().enumerate() {
                let d2 = (e.interp.0 - t.0).powi(2) + (e.interp.1 - t.1).powi(2);
                if d2 < 1.0 {
                    pairs.push((d2, i, j));
                }
            }
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut used_e, mut used_t) = (vec![false; es.len()], vec![false; ts.len()]);
        for (_, i, j) in pairs {
            if !used_e[i] && !used_t[j] {
                used_e[i] = true;
                used_t[j] = true;
                out.push((es[i], ts[j]));
            }
        }
    }
    out
}

fn rms(v: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut n) = (0.0, 0usize);
    for x in v {
        s += x * x;
        n += 1;
    }
    (s / n as f64).sqrt()
}

#[test]
fn interpolation_against_the_truth() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    // The cube, from a flat field of its own.
    let cube_set = Set::generate(root, "cube", 101, "flat", 1000);
    let eta = root.join("eta.npz");
    CLUDA.ok(&run_args(
        "eta",
        &cube_set.ped(),
        &cube_set.data(),
        &["--out", s(&eta), "--device", "cpu"],
    ));

    // 1. Flat field.
    let flat = Set::generate(root, "flat", 102, "flat", 400);
    let (numbers, batch) = flat.clusters();
    let photons = flat.photons(&eta);
    let est = estimates(&photons, &numbers, &batch);
    let placed = photons.iter().filter(|p| p.flags == 0).count();
    println!(
        "flat field: {} clusters, {placed} placed (flags 0), {} true photons",
        batch.total(),
        flat.truth().len()
    );
    let inside: Vec<Est> = est.iter().copied().filter(inner).collect();
    let (interp, n) = phase_flatness(inside.iter().map(|e| e.interp));
    let (centre, _) = phase_flatness(inside.iter().map(|e| e.centre));
    let (cog, _) = phase_flatness(inside.iter().map(|e| e.cog));
    println!(
        "flat field, sub-pixel phase on 5 x 5 cells over {n} photons: largest deviation of a \
         cell from the mean: interpolated {:.1} %, centre of gravity {:.1} %, pixel centres \
         {:.1} %",
        interp * 100.0,
        cog * 100.0,
        centre * 100.0
    );
    assert!(interp < 0.10, "interpolated phase not flat: {interp}");
    assert!(centre >= 0.10, "pixel centres flat?: {centre}");
    assert!(cog >= 0.10, "centre of gravity flat?: {cog}");

    // 3. Against the truth, on the flat field.
    let truth = flat.truth();
    let pairs = matched(&inside, &truth);
    let axis = |f: fn(&Est) -> (f64, f64)| {
        (
            rms(pairs.iter().map(|(e, t)| f(e).0 - t.0)),
            rms(pairs.iter().map(|(e, t)| f(e).1 - t.1)),
        )
    };
    let (ri, rc, rg) = (axis(|e| e.interp), axis(|e| e.centre), axis(|e| e.cog));
    println!(
        "flat field, {} of {} photons matched to the truth within 1 px: RMS error x / y: \
         interpolated {:.3} / {:.3} px, centre of gravity {:.3} / {:.3} px, pixel centres \
         {:.3} / {:.3} px (1/sqrt(12) = {:.3})",
        pairs.len(),
        inside.len(),
        ri.0,
        ri.1,
        rg.0,
        rg.1,
        rc.0,
        rc.1,
        1.0 / 12f64.sqrt()
    );
    assert!(pairs.len() as f64 > 0.95 * inside.len() as f64);
    assert!(ri.0 < rc.0 && ri.1 < rc.1, "{ri:?} vs {rc:?}");

    // 2. Knife edge.
    let knife = Set::generate(root, "knife", 103, "knife", 1000);
    let (numbers, batch) = knife.clusters();
    let photons = knife.photons(&eta);
    let est = estimates(&photons, &numbers, &batch);
    let near = |f: fn(&Est) -> (f64, f64)| -> Vec<f64> {
        est.iter()
            .filter(|e| inner(e))
            .map(|e| knife_distance(f(e)))
            .filter(|d| d.abs() < WINDOW)
            .collect()
    };
    let truth = knife.truth();
    assert!(
        truth.iter().all(|t| knife_distance((t.x, t.y)) < 0.0),
        "a true photon on the dark side"
    );
    assert_eq!(
        Illumination::KNIFE,
        Illumination::Knife { degrees: 4.0 },
        "the knife of `gen --illumination knife`"
    );
    let t: Vec<f64> = truth
        .iter()
        .filter(|t| t.y >= 3.0 && t.y < ROWS as f64 - 3.0)
        .map(|t| knife_distance((t.x, t.y)))
        .filter(|d| d.abs() < WINDOW)
        .collect();
    let fits = [
        ("true positions", fit_edge(&t), t.len()),
        (
            "interpolated",
            fit_edge(&near(|e| e.interp)),
            near(|e| e.interp).len(),
        ),
        (
            "centre of gravity",
            fit_edge(&near(|e| e.cog)),
            near(|e| e.cog).len(),
        ),
        (
            "pixel centres",
            fit_edge(&near(|e| e.centre)),
            near(|e| e.centre).len(),
        ),
    ];
    for (name, (shift, sigma), n) in fits {
        println!(
            "knife edge (4 deg), {name}: {n} photons within {WINDOW} px, erfc fit: sigma {sigma:.3} px, shift {shift:+.3} px"
        );
    }
    let (shift, sigma) = fits[1].1;
    let centre_sigma = fits[3].1.1;
    assert!(sigma < 0.15, "knife sigma {sigma}");
    assert!(
        sigma <= 0.6 * centre_sigma,
        "{sigma} vs pixel centres {centre_sigma}"
    );
    assert!(shift.abs() < 0.1, "knife shift {shift}");
}

/// The fit finds the edge it is given (a sample drawn from the model itself).
#[test]
fn the_edge_fit_recovers_a_known_edge() {
    // Deterministic uniform draws (splitmix64), and a sample of the blurred step: a uniform
    // point on the illuminated side plus a Gaussian blur (Box-Muller).
    let mut state = 7u64;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / 2f64.powi(64)
    };
    for (shift, sigma) in [(0.05, 0.1), (-0.2, 0.3), (0.0, 0.02)] {
        let mut d = Vec::new();
        while d.len() < 20_000 {
            let x = -2.0 * WINDOW + 2.0 * WINDOW * next();
            let (a, b) = (next().max(1e-12), next());
            let g = (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos();
            let v = x + shift + sigma * g;
            if v.abs() < WINDOW {
                d.push(v);
            }
        }
        let (s, g) = fit_edge(&d);
        assert!((s - shift).abs() < 0.02, "{shift} {sigma}: {s} {g}");
        assert!((g / sigma - 1.0).abs() < 0.1, "{shift} {sigma}: {s} {g}");
    }
}

/// `gen --truth`: the frames are those `gen` writes without it; the truth's frames are
/// numbered as `find` numbers them (from 0 in data.npy, from 1 in a raw acquisition); a
/// knife edge of the same seed keeps a subset of the flat field's photons, all lit.
#[test]
fn gen_truth_numbers_frames_as_find_does() {
    let root = tempfile::tempdir().unwrap();
    let dir = |n: &str| root.path().join(n);
    let base = [
        "--frames",
        "6",
        "--pedestal-frames",
        "3",
        "--rows",
        "20",
        "--cols",
        "30",
        "--seed",
        "4",
    ];
    let run = |out: &Path, extra: &[&str]| {
        let mut a = vec!["gen", "--out", s(out)];
        a.extend(base);
        a.extend(extra);
        CLUDA.ok(&a);
    };
    run(&dir("plain"), &[]);
    run(&dir("truth"), &["--truth"]);
    run(&dir("knife"), &["--truth", "--illumination", "knife"]);
    run(&dir("raw"), &["--truth", "--raw"]);
    assert!(!dir("plain").join("truth.npy").exists());
    for f in ["pedestal.npy", "data.npy"] {
        assert_eq!(
            std::fs::read(dir("plain").join(f)).unwrap(),
            std::fs::read(dir("truth").join(f)).unwrap(),
            "{f}"
        );
    }
    let flat = read_rows(&dir("truth").join("truth.npy"), 32);
    let frames: std::collections::BTreeSet<i64> = flat.iter().map(|t| t.frame).collect();
    assert_eq!(
        frames.into_iter().collect::<Vec<_>>(),
        (0..6).collect::<Vec<_>>()
    );
    let raw = read_rows(&dir("raw").join("truth.npy"), 32);
    assert_eq!(raw.len(), flat.len());
    for (r, f) in raw.iter().zip(&flat) {
        assert_eq!((r.frame, r.x, r.y), (f.frame + 1, f.x, f.y));
    }
    let knife = read_rows(&dir("knife").join("truth.npy"), 32);
    assert!(!knife.is_empty() && knife.len() < flat.len());
    let lit: Vec<(i64, f64, f64)> = flat
        .iter()
        .filter(|t| Illumination::KNIFE.passes(20, 30, t.x, t.y))
        .map(|t| (t.frame, t.x, t.y))
        .collect();
    assert_eq!(
        knife
            .iter()
            .map(|t| (t.frame, t.x, t.y))
            .collect::<Vec<_>>(),
        lit
    );
    // The raw acquisition's cluster file numbers frames from 1, as the truth does.
    let out = dir("raw.clust");
    CLUDA.ok(&find_args(
        &dir("raw").join("pedestal_master_0.json"),
        &dir("raw").join("data_master_0.json"),
        &["--out", s(&out), "--device", "cpu"],
    ));
    let (numbers, _) = read_cluster_file(&out, ClusterSize::from_side(3).unwrap()).unwrap();
    assert_eq!(numbers, (1..=6).collect::<Vec<i32>>());
}
