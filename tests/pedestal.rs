//! The pedestal arithmetic against references that share no code with it: the oracle
//! (tests/support/src/oracle, f64 / f32 std arithmetic written from docs/semantics.md) bit for bit, and exact
//! integer math for the B1 baseline and centred sums.

use cluda::pedestal::ReadyState;
use cluda::{ClusterFinder, CpuFinder, FinderConfig, Frames, Pedestal, Precision};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::cases::arith;
use support::oracle::{Oracle, Params};

const ALL: [Precision; 3] = [Precision::F64, Precision::F32, Precision::F32Naive];

/// `rows x cols x frames` samples around `baseline` with amplitude `amp`.
fn samples(seed: u64, len: usize, baseline: u16, amp: u16) -> Vec<u16> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let d = rng.random_range(-(amp as i32)..=amp as i32);
            (baseline as i32 + d).clamp(0, 65535) as u16
        })
        .collect()
}

/// Bits of a value with -0 folded into +0 (the clamp `max(v, 0)` may give either sign of
/// zero; both are the same threshold).
fn bits(v: f64) -> u64 {
    (v + 0.0).to_bits()
}

/// Every map of `p` equals the oracle's, bit for bit, pixel by pixel, with the map indexed
/// `[(row, col)]` for pixel `row * cols + col`.
fn assert_maps_equal(p: &Pedestal, o: &Oracle, what: &str) -> Result<(), TestCaseError> {
    let (rows, cols) = (p.rows(), p.cols());
    let (mean, std, frozen) = (
        p.mean_map().unwrap(),
        p.std_map().unwrap(),
        p.frozen_std_map().unwrap(),
    );
    for m in [&mean, &std, &frozen] {
        prop_assert_eq!(m.dim(), (rows, cols));
    }
    for r in 0..rows {
        for c in 0..cols {
            let i = r * cols + c;
            let ctx = || format!("{what}: {:?} pixel ({c}, {r})", p.precision());
            for (name, map, want) in [
                ("mean", &mean, o.mean(i)),
                ("std", &std, o.std(i)),
                ("frozen std", &frozen, o.frozen_std(i)),
            ] {
                let got = map[(r, c)];
                prop_assert_eq!(
                    bits(got),
                    bits(want),
                    "{} {} vs {}; {}",
                    name,
                    got,
                    want,
                    ctx()
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After the fill phase and after many window updates (pushing dark frames beyond N), the
    /// mean, std and frozen std maps equal the oracle's bit for bit in every precision.
    #[test]
    fn maps_equal_oracle_after_fill_and_window_updates(
        rows in 1usize..=9, cols in 1usize..=9, n in 1u32..=40, extra in 0usize..=120,
        baseline in 0u16..=65535, amp in 0u16..=300, seed in any::<u64>(), pi in 0usize..3,
    ) {
        let precision = ALL[pi];
        let px = rows * cols;
        let data = samples(seed, px * (n as usize + extra), baseline, amp);
        let mut p = Pedestal::new(rows, cols, n, precision).unwrap();
        let mut o = Oracle::new(Params { rows, cols, side: 3, n_sigma: 5.0, n, frozen: false }, arith(precision));
        let (fill, rest) = data.split_at(px * n as usize);
        p.push_frames(Frames::new(fill, n as usize, rows, cols).unwrap()).unwrap();
        for f in fill.chunks(px) { o.push_frame(f); }
        prop_assert!(p.is_ready() && o.ready());
        prop_assert_eq!(p.count(), n);
        assert_maps_equal(&p, &o, "after fill")?;
        for f in rest.chunks(px) {
            p.push_frame(f).unwrap();
            o.push_frame(f);
        }
        assert_maps_equal(&p, &o, "after window updates")?;
    }

    /// Through the finder: data frames update only quiet pixels, after each frame; the
    /// resulting maps equal the oracle's bit for bit (threshold modes and sizes vary).
    #[test]
    fn maps_after_finding_equal_oracle(
        rows in 1usize..=12, cols in 1usize..=12, n in 1u32..=10, frames in 1usize..=30,
        baseline in 0u16..=60000, amp in 1u16..=100, seed in any::<u64>(), pi in 0usize..3,
        frozen in any::<bool>(), n_sigma in 0.0f64..6.0,
    ) {
        let precision = ALL[pi];
        let px = rows * cols;
        let ped = samples(seed, px * n as usize, baseline, amp);
        let mut data = samples(seed ^ 1, px * frames, baseline, amp);
        for (k, v) in data.iter_mut().enumerate() {
            if k % 7 == 3 { *v = v.saturating_add(10 * amp); }
        }
        let cfg = FinderConfig::new(rows, cols).pedestal_frames(n).n_sigma(n_sigma).precision(precision)
            .threshold(if frozen { cluda::ThresholdMode::Frozen } else { cluda::ThresholdMode::Live });
        let mut f = CpuFinder::with_threads(cfg, 1).unwrap();
        f.push_pedestal(Frames::new(&ped, n as usize, rows, cols).unwrap()).unwrap();
        f.find(Frames::new(&data, frames, rows, cols).unwrap()).unwrap();
        let mut o = Oracle::new(Params { rows, cols, side: 3, n_sigma, n, frozen }, arith(precision));
        for fr in ped.chunks(px) { o.push_frame(fr); }
        for fr in data.chunks(px) { o.find_frame(fr); }
        assert_maps_equal(f.pedestal_ref(), &o, "after finding")?;
    }

    /// B1: the frozen baseline is the rounded mean and the centred sums are the exact integer
    /// sums of the N samples, each rounded once to f32. The reference sums the samples
    /// directly (no algebraic identity, unlike the crate), in i64.
    #[test]
    fn b1_frozen_state_is_exact_integer_math(
        n in 1u32..=2000, baseline in 0u16..=65535, amp in 0u16..=2000, seed in any::<u64>(),
    ) {
        let (rows, cols) = (2, 3);
        let data = samples(seed, rows * cols * n as usize, baseline, amp);
        let mut p = Pedestal::new(rows, cols, n, Precision::F32).unwrap();
        p.push_frames(Frames::new(&data, n as usize, rows, cols).unwrap()).unwrap();
        let ReadyState::F32(m) = p.ready().unwrap() else { panic!("F32 state expected") };
        prop_assert_eq!(m.inv, 1.0f32 / n as f32);
        for i in 0..rows * cols {
            let xs: Vec<i64> = data.iter().skip(i).step_by(rows * cols).map(|&x| x as i64).collect();
            let sum: i64 = xs.iter().sum();
            // The crate computes round(sum * (1/N)) in f64; the exact rounded mean (half away
            // from zero) may differ from that by one only at an exact .5 that sum * (1/N)
            // misses; either integer baseline keeps the sums exact, so check both properties.
            let exact_x0 = (2 * sum + n as i64).div_euclid(2 * n as i64);
            let x0 = m.base[i] as i64;
            prop_assert_eq!(m.base[i], x0 as f32, "baseline must be an integer");
            prop_assert!((x0 - exact_x0).abs() <= 1 && (2 * (sum - n as i64 * x0)).abs() <= n as i64,
                "X0 {} vs exact rounded mean {} (sum {}, N {})", x0, exact_x0, sum, n);
            prop_assert_eq!(x0, ((sum as f64) * (1.0 / n as f64)).round() as i64);
            let sy: i64 = xs.iter().map(|&x| x - x0).sum();
            let sy2: i64 = xs.iter().map(|&x| (x - x0) * (x - x0)).sum();
            prop_assert_eq!(m.a[i], sy as f32);
            prop_assert_eq!(m.b[i], sy2 as f32);
            // The mean map is X0 + a/N in f32 (widened), the std map sqrt(max(fma(-m, m, b/N), 0)).
            let mo = m.a[i] * m.inv;
            let var = (-mo).mul_add(mo, m.b[i] * m.inv).max(0.0);
            prop_assert_eq!(p.mean_map().unwrap()[(i / cols, i % cols)], x0 as f64 + mo as f64);
            prop_assert_eq!(bits(p.std_map().unwrap()[(i / cols, i % cols)]), bits(var.sqrt() as f64));
        }
    }

    /// F64: the fill phase sums are the exact integer sums (aare accumulates integers in f64,
    /// exact below 2^53), so the mean is exactly sum * (1/N) of the integer sum.
    #[test]
    fn f64_fill_sums_are_exact(n in 1u32..=3000, baseline in 0u16..=65535, amp in 0u16..=30000, seed in any::<u64>()) {
        let data = samples(seed, n as usize, baseline, amp);
        let mut p = Pedestal::new(1, 1, n, Precision::F64).unwrap();
        p.push_frames(Frames::new(&data, n as usize, 1, 1).unwrap()).unwrap();
        let ReadyState::F64(m) = p.ready().unwrap() else { panic!("F64 state expected") };
        let sum: u64 = data.iter().map(|&x| x as u64).sum();
        let sum2: u64 = data.iter().map(|&x| x as u64 * x as u64).sum();
        prop_assert_eq!(m.a[0], sum as f64);
        prop_assert_eq!(m.b[0], sum2 as f64);
        prop_assert_eq!(m.base[0], 0.0);
        prop_assert_eq!(m.inv, 1.0 / n as f64);
        prop_assert_eq!(p.mean_map().unwrap()[(0, 0)], sum as f64 * (1.0 / n as f64));
    }
}

/// A constant pixel has std exactly 0 in every precision (the clamp at 0 holds), before and
/// after window updates; a two-valued pixel has the textbook mean and std after the fill.
/// (The window update is aare's exponential form `sum += x - sum/N`, not a true sliding
/// window, so a hand value after updates is only simple for a constant pixel.)
#[test]
fn constant_and_two_valued_pixels() {
    for p in ALL {
        let mut ped = Pedestal::new(1, 2, 4, p).unwrap();
        for k in 0..4u16 {
            ped.push_frame(&[4600, if k % 2 == 0 { 4590 } else { 4610 }])
                .unwrap();
        }
        let (mean, std) = (ped.mean_map().unwrap(), ped.std_map().unwrap());
        assert_eq!((mean[(0, 0)], std[(0, 0)]), (4600.0, 0.0), "{p:?}");
        // 4590/4610 twice each: mean 4600, std 10 (exact in F64 and B1 at N = 4).
        assert_eq!(mean[(0, 1)], 4600.0, "{p:?}");
        if p != Precision::F32Naive {
            assert_eq!(std[(0, 1)], 10.0, "{p:?}");
        } else {
            assert!((std[(0, 1)] - 10.0).abs() < 1.0, "{p:?}: {}", std[(0, 1)]);
        }
        for _ in 0..50 {
            ped.push_frame(&[4600, 4600]).unwrap();
        }
        let (mean, std) = (ped.mean_map().unwrap(), ped.std_map().unwrap());
        assert_eq!((mean[(0, 0)], std[(0, 0)]), (4600.0, 0.0), "{p:?}");
        assert_eq!(ped.frozen_std_map().unwrap()[(0, 0)], 0.0);
    }
}

/// Maps are `rows x cols` with pixel (col, row) at `[(row, col)]`, for a non-square frame.
#[test]
fn map_orientation() {
    let (rows, cols) = (3, 5);
    for p in ALL {
        let mut ped = Pedestal::new(rows, cols, 1, p).unwrap();
        let frame: Vec<u16> = (0..rows * cols).map(|i| 1000 + i as u16).collect();
        ped.push_frame(&frame).unwrap();
        let m = ped.mean_map().unwrap();
        assert_eq!(m.dim(), (rows, cols));
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(m[(r, c)], (1000 + r * cols + c) as f64, "{p:?}");
            }
        }
        assert_eq!(ped.std_map().unwrap().dim(), (rows, cols));
        assert_eq!(ped.frozen_std_map().unwrap().dim(), (rows, cols));
    }
}
