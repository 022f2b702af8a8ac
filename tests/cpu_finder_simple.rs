//! The optimised CPU finder against a straightforward per-pixel implementation of the exact
//! semantics (docs/semantics.md), built from the shared per-pixel functions: for every pixel its
//! corrected value and threshold, `window_total_max` (row-major window order), `classify`, and
//! after the frame `push_ready` for the quiet pixels. Random small frames, every size,
//! precision, threshold mode and several thread counts; clusters and the final pedestal state
//! must be identical (bit for bit).

use cluda::cluster::pack_xy;
use cluda::generate::{GenConfig, Generator};
use cluda::pedestal::{PixelMaps, ReadyState};
use cluda::{
    ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames, Pedestal, Precision, ThresholdMode,
};
use cluda_gpu::classify::{PixelClass, classify, threshold, window_total_max};
use cluda_gpu::pedestal::{corrected, mean_offset, push_ready, std_dev};
use cluda_gpu::real::Real;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// One frame by the definition: returns the packed records and updates `maps`.
fn simple_frame<R: Real, const S: usize>(
    config: &FinderConfig,
    maps: &mut PixelMaps<R>,
    frame: &[u16],
) -> Vec<u32> {
    let (rows, cols) = (config.rows, config.cols);
    let n_sigma = R::from_f64(config.n_sigma);
    let inv = maps.inv;
    let mut c = vec![R::ZERO; rows * cols];
    let mut t = vec![R::ZERO; rows * cols];
    for p in 0..rows * cols {
        c[p] = corrected(frame[p], maps.base[p], mean_offset(maps.a[p], inv));
        let std = match config.threshold {
            ThresholdMode::Live => std_dev(maps.a[p], maps.b[p], inv),
            ThresholdMode::Frozen => maps.frozen_std[p],
        };
        t[p] = threshold(n_sigma, std);
    }
    let side = R::from_u16(S as u16);
    let r = S as isize / 2;
    let mut out = Vec::new();
    let mut quiet = vec![false; rows * cols];
    for y in 0..rows {
        for x in 0..cols {
            let p = y * cols + x;
            let (total, max) =
                window_total_max::<R, S>(rows, cols, x, y, |xx, yy| c[yy * cols + xx]);
            match classify(c[p], t[p], total, max, side) {
                PixelClass::Pedestal => quiet[p] = true,
                PixelClass::Centre => {
                    out.push(pack_xy(x as u16, y as u16));
                    for dy in -r..=r {
                        for dx in -r..=r {
                            let (xx, yy) = (x as isize + dx, y as isize + dy);
                            let inside =
                                xx >= 0 && yy >= 0 && xx < cols as isize && yy < rows as isize;
                            out.push(if inside {
                                c[yy as usize * cols + xx as usize].round_half_away() as u32
                            } else {
                                0
                            });
                        }
                    }
                }
                PixelClass::Negative | PixelClass::Nothing => {}
            }
        }
    }
    for p in 0..rows * cols {
        if quiet[p] {
            let (a, b) = (&mut maps.a[p], &mut maps.b[p]);
            push_ready(a, b, maps.base[p], frame[p], inv);
        }
    }
    out
}

fn simple_all<R: Real>(
    config: &FinderConfig,
    maps: &mut PixelMaps<R>,
    frames: &[u16],
) -> Vec<Vec<u32>> {
    let n = config.rows * config.cols;
    frames
        .chunks(n)
        .map(|f| match config.size.side() {
            3 => simple_frame::<R, 3>(config, maps, f),
            5 => simple_frame::<R, 5>(config, maps, f),
            7 => simple_frame::<R, 7>(config, maps, f),
            _ => simple_frame::<R, 9>(config, maps, f),
        })
        .collect()
}

fn bits<R: Real>(v: &[R]) -> Vec<u64> {
    v.iter().map(|x| x.to_f64().to_bits()).collect()
}

fn same_maps<R: Real>(a: &PixelMaps<R>, b: &PixelMaps<R>) -> bool {
    bits(&a.a) == bits(&b.a)
        && bits(&a.b) == bits(&b.b)
        && bits(&a.base) == bits(&b.base)
        && bits(&a.frozen_std) == bits(&b.frozen_std)
}

/// Runs the finder with `threads` and the simple implementation on the same data; panics with
/// a description on the first difference.
fn check(config: &FinderConfig, dark: &[u16], data: &[u16], threads: usize) {
    let (rows, cols) = (config.rows, config.cols);
    let n = rows * cols;
    let mut pedestal = Pedestal::new(rows, cols, config.pedestal_frames, config.precision).unwrap();
    pedestal
        .push_frames(Frames::new(dark, dark.len() / n, rows, cols).unwrap())
        .unwrap();
    let mut finder = CpuFinder::with_threads(config.clone(), threads).unwrap();
    finder.set_pedestal(pedestal.clone()).unwrap();
    let batch = finder
        .find(Frames::new(data, data.len() / n, rows, cols).unwrap())
        .unwrap();
    let after = finder.pedestal().unwrap();
    let (want, same) = match pedestal.ready().unwrap().clone() {
        ReadyState::F64(mut m) => {
            let w = simple_all(config, &mut m, data);
            let same = matches!(after.ready().unwrap(), ReadyState::F64(g) if same_maps(g, &m));
            (w, same)
        }
        ReadyState::F32(mut m) => {
            let w = simple_all(config, &mut m, data);
            let same = matches!(after.ready().unwrap(), ReadyState::F32(g) if same_maps(g, &m));
            (w, same)
        }
    };
    assert_eq!(batch.frames(), want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(
            batch.frame(i).words(),
            &w[..],
            "frame {i}: clusters differ ({config:?}, {threads} threads)"
        );
    }
    assert!(
        same,
        "pedestal state differs ({config:?}, {threads} threads)"
    );
}

/// Frames with small integer values around a baseline (many exact ties, zero-noise pixels,
/// negative excursions) plus occasional spikes.
fn integer_frames(rng: &mut SmallRng, n: usize, count: usize, spikes: bool) -> Vec<u16> {
    let base: Vec<u16> = (0..n).map(|_| 1000 + rng.random_range(0..5u16)).collect();
    let mut out = Vec::with_capacity(n * count);
    for _ in 0..count {
        for &b in &base {
            let noise = rng.random_range(0..4u16);
            let v = match rng.random_range(0..40u32) {
                0 if spikes => b + rng.random_range(5..300u16),
                1 if spikes => b - rng.random_range(1..30u16),
                _ => b + noise,
            };
            out.push(v);
        }
    }
    out
}

fn precision_of(i: u8) -> Precision {
    [Precision::F64, Precision::F32, Precision::F32Naive][i as usize % 3]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn finder_equals_the_definition(
        rows in 1usize..=26,
        cols in 1usize..=45,
        side in prop::sample::select(vec![3usize, 5, 7, 9]),
        precision in 0u8..3,
        frozen in any::<bool>(),
        moench in any::<bool>(),
        n_ped in 1u32..=6,
        n_data in 1usize..=4,
        n_sigma in prop::sample::select(vec![0.0, 1.0, 2.5, 5.0]),
        threads in 1usize..=3,
        seed in any::<u64>(),
    ) {
        let config = FinderConfig::new(rows, cols)
            .size(ClusterSize::from_side(side).unwrap())
            .n_sigma(n_sigma)
            .pedestal_frames(n_ped)
            .threshold(if frozen { ThresholdMode::Frozen } else { ThresholdMode::Live })
            .precision(precision_of(precision));
        let n = rows * cols;
        let (dark, data) = if moench {
            let mut g = GenConfig::new(rows, cols, seed);
            g.photons_per_frame = (n as f64 / 20.0).max(1.0);
            let g = Generator::new(g).unwrap();
            (g.frames(0, n_ped as usize + 2, false), g.frames(100, n_data, true))
        } else {
            let mut rng = SmallRng::seed_from_u64(seed);
            let dark = integer_frames(&mut rng, n, n_ped as usize + 2, false);
            // Same baselines for the data: regenerate from the same seed, then add spikes.
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut data = integer_frames(&mut rng, n, n_data, true);
            data.truncate(n * n_data);
            (dark, data)
        };
        check(&config, &dark, &data, threads);
    }
}

#[test]
fn moench_frames_all_modes_and_thread_counts() {
    let (rows, cols) = (61, 83);
    let g = Generator::new(GenConfig::new(rows, cols, 9)).unwrap();
    let dark = g.frames(0, 20, false);
    let data = g.frames(20, 6, true);
    for size in ClusterSize::ALL {
        for precision in [Precision::F64, Precision::F32, Precision::F32Naive] {
            for mode in [ThresholdMode::Live, ThresholdMode::Frozen] {
                let config = FinderConfig::new(rows, cols)
                    .size(size)
                    .pedestal_frames(20)
                    .threshold(mode)
                    .precision(precision);
                for threads in [1, 2, 5] {
                    check(&config, &dark, &data, threads);
                }
            }
        }
    }
}
