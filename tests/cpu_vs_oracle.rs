//! The CPU finder against the independent oracle (tests/support/src/oracle), exactly, cluster for cluster,
//! on random scenarios: frame sizes 1x1 .. 40x40 (many smaller than the window), every window
//! size, n_sigma in [0, 8], both threshold modes, N in 1 ..= 20, noisy / identical / flat
//! pedestals, and data frames with big photons, saturation, dips (c < -t), exact ties of the
//! window maximum and charge clouds. Plus: thread-count invariance, streaming == owned, and
//! splitting frames over calls == one call.

use cluda::{ClusterBatch, ClusterFinder, ClusterSize, CpuFinder, Frames, Precision};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use support::cases::{Case, Noise, arith, batch_clusters, compare, oracle_run};
use support::oracle::{Arith, OCluster, Oracle, Params, RuleStats};

fn n_sigma() -> impl Strategy<Value = f64> {
    prop_oneof![
        1 => Just(0.0),
        2 => (0u8..=8).prop_map(f64::from),
        7 => 0.0f64..=8.0,
    ]
}

fn noise() -> impl Strategy<Value = Noise> {
    prop_oneof![
        6 => Just(Noise::Independent),
        3 => Just(Noise::Common),
        1 => Just(Noise::None),
    ]
}

/// A random scenario; frames up to `max_side` x `max_side`.
fn case(max_side: usize) -> impl Strategy<Value = Case> {
    (
        (1..=max_side, 1..=max_side, 0usize..4),
        (n_sigma(), any::<bool>(), 1u32..=20),
        (0u16..=60000, 0u16..=200, noise()),
        (1usize..=5, 0usize..=30, any::<u64>()),
    )
        .prop_map(
            |(
                (rows, cols, s),
                (n_sigma, frozen, n),
                (baseline, amplitude, noise),
                (df, dep, seed),
            )| {
                Case {
                    rows,
                    cols,
                    size: ClusterSize::ALL[s],
                    n_sigma,
                    n,
                    frozen,
                    baseline,
                    amplitude,
                    noise,
                    data_frames: df,
                    deposits: dep,
                    seed,
                }
            },
        )
}

fn finder(case: &Case, precision: Precision, threads: usize, ped: &[u16]) -> CpuFinder {
    let mut f = CpuFinder::with_threads(case.config(precision), threads).expect("valid config");
    f.push_pedestal(Frames::new(ped, case.n as usize, case.rows, case.cols).expect("shape"))
        .expect("pedestal");
    assert!(f.is_ready());
    f
}

fn data_view<'a>(case: &Case, data: &'a [u16]) -> Frames<'a> {
    Frames::new(data, case.data_frames, case.rows, case.cols).expect("shape")
}

/// Finder (in `precision`, `threads` threads) == oracle, cluster for cluster.
fn check_against_oracle(
    case: &Case,
    precision: Precision,
    threads: usize,
) -> Result<(), TestCaseError> {
    let (ped, data) = case.frames();
    let mut f = finder(case, precision, threads, &ped);
    let got = batch_clusters(&f.find(data_view(case, &data)).expect("find"));
    let (_, want) = oracle_run(case, arith(precision), &ped, &data);
    compare(&got, &want).map_err(|d| TestCaseError::fail(format!("{case:?}\n{d}")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn f64_finder_equals_oracle(case in case(40), threads in 1usize..=2) {
        check_against_oracle(&case, Precision::F64, threads)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(800))]

    #[test]
    fn f32_b1_finder_equals_oracle(case in case(40), threads in 1usize..=2) {
        check_against_oracle(&case, Precision::F32, threads)?;
    }

    #[test]
    fn f32_naive_finder_equals_oracle(case in case(40)) {
        check_against_oracle(&case, Precision::F32Naive, 1)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    /// 1, 2 and 3 threads give identical batches and identical pedestals afterwards.
    #[test]
    fn thread_count_does_not_change_results(case in case(64), p in 0usize..3) {
        let precision = [Precision::F64, Precision::F32, Precision::F32Naive][p];
        let (ped, data) = case.frames();
        let mut results: Vec<(ClusterBatch, cluda::Pedestal)> = Vec::new();
        for threads in 1..=3 {
            let mut f = finder(&case, precision, threads, &ped);
            let b = f.find(data_view(&case, &data)).expect("find");
            results.push((b, f.pedestal().expect("pedestal")));
        }
        for (k, r) in results.iter().enumerate().skip(1) {
            prop_assert!(r.0 == results[0].0, "{} threads: batch differs from 1 thread; {case:?}", k + 1);
            prop_assert!(r.1 == results[0].1, "{} threads: pedestal differs from 1 thread; {case:?}", k + 1);
        }
    }

    /// `find_each` (streaming, borrowed) delivers exactly what `find` (owned) returns, with
    /// frame indices in order.
    #[test]
    fn streaming_equals_owned(case in case(40), p in 0usize..3) {
        let precision = [Precision::F64, Precision::F32, Precision::F32Naive][p];
        let (ped, data) = case.frames();
        let owned = finder(&case, precision, 2, &ped).find(data_view(&case, &data)).expect("find");
        let mut f = finder(&case, precision, 2, &ped);
        let mut frames: Vec<Vec<u32>> = Vec::new();
        let mut indices = Vec::new();
        f.find_each(data_view(&case, &data), &mut |fc| {
            indices.push(fc.frame.get() as usize);
            frames.push(fc.words().to_vec());
            Ok(())
        })
        .expect("find_each");
        prop_assert_eq!(indices, (0..case.data_frames).collect::<Vec<_>>());
        prop_assert_eq!(frames.len(), owned.frames());
        for (i, w) in frames.iter().enumerate() {
            prop_assert_eq!(&w[..], owned.frame(i).words(), "frame {}", i);
        }
    }

    /// Cutting the data frames into several calls gives the same clusters (and pedestal) as
    /// one call: the pedestal carries over between calls exactly.
    #[test]
    fn split_calls_equal_one_call(case in case(30), cuts in proptest::collection::vec(0usize..=5, 0..4), p in 0usize..3) {
        let precision = [Precision::F64, Precision::F32, Precision::F32Naive][p];
        let (ped, data) = case.frames();
        let mut one = finder(&case, precision, 2, &ped);
        let whole = batch_clusters(&one.find(data_view(&case, &data)).expect("find"));
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(case.data_frames)).collect();
        cuts.push(0);
        cuts.push(case.data_frames);
        cuts.sort();
        let mut parts = finder(&case, precision, 2, &ped);
        let all = data_view(&case, &data);
        let mut pieces = Vec::new();
        for w in cuts.windows(2) {
            let b = parts.find(all.range(w[0], w[1] - w[0])).expect("find part");
            prop_assert_eq!(b.frames(), w[1] - w[0]);
            pieces.extend(batch_clusters(&b));
        }
        prop_assert!(pieces == whole, "split at {cuts:?} differs; {case:?}");
        prop_assert!(parts.pedestal().expect("p") == one.pedestal().expect("p"));
    }
}

/// A hand-computed example, independent of both the finder and the oracle: a flat pedestal
/// (std 0, so t = 0) and two equal deposits side by side. Both are maxima of their windows
/// (the `c(p) == max` rule with a tie), so both are centres; their neighbours are not; the
/// rest is quiet.
#[test]
fn hand_computed_tie_example() {
    let case = Case {
        rows: 5,
        cols: 5,
        size: ClusterSize::S3,
        n_sigma: 5.0,
        n: 1,
        frozen: false,
        baseline: 100,
        amplitude: 0,
        noise: Noise::None,
        data_frames: 1,
        deposits: 0,
        seed: 0,
    };
    let ped = vec![100u16; 25];
    let mut data = vec![100u16; 25];
    data[2 * 5 + 2] = 150;
    data[2 * 5 + 3] = 150;
    let want = vec![vec![
        OCluster {
            x: 2,
            y: 2,
            data: vec![0, 0, 0, 0, 50, 50, 0, 0, 0],
        },
        OCluster {
            x: 3,
            y: 2,
            data: vec![0, 0, 0, 50, 50, 0, 0, 0, 0],
        },
    ]];
    for p in [Precision::F64, Precision::F32, Precision::F32Naive] {
        let (_, o) = oracle_run(&case, arith(p), &ped, &data);
        assert_eq!(o, want, "oracle {p:?}");
        let got = batch_clusters(
            &finder(&case, p, 1, &ped)
                .find(data_view(&case, &data))
                .unwrap(),
        );
        assert_eq!(got, want, "finder {p:?}");
    }
}

/// A hand-computed edge example: a 1x1 frame is its own whole window; out-of-frame cells are 0
/// in the record; a value rounds half away from zero (c = 2.5 -> 3, c = -2.5 -> -3 is below
/// -t when t = 0, so no cluster).
#[test]
fn hand_computed_single_pixel() {
    // N = 2 samples 100 and 101: mean 100.5, var = 100.5*100.5... computed exactly: 0.25.
    // std 0.5; n_sigma 1: t = 0.5. Data 103: c = 2.5 > t, centre; data 98: c = -2.5 < -t.
    let mut o = Oracle::new(
        Params {
            rows: 1,
            cols: 1,
            side: 3,
            n_sigma: 1.0,
            n: 2,
            frozen: false,
        },
        Arith::F64,
    );
    o.push_frame(&[100]);
    o.push_frame(&[101]);
    assert_eq!(o.mean(0), 100.5);
    assert_eq!(o.std(0), 0.5);
    let c = o.find_frame(&[103]);
    assert_eq!(
        c,
        vec![OCluster {
            x: 0,
            y: 0,
            data: vec![0, 0, 0, 0, 3, 0, 0, 0, 0]
        }]
    );
    assert!(o.find_frame(&[98]).is_empty());
    // Neither frame was quiet, so the pedestal is unchanged.
    assert_eq!(o.mean(0), 100.5);

    let mut f = CpuFinder::with_threads(
        cluda::FinderConfig::new(1, 1)
            .n_sigma(1.0)
            .pedestal_frames(2),
        1,
    )
    .unwrap();
    f.push_pedestal(Frames::new(&[100, 101], 2, 1, 1).unwrap())
        .unwrap();
    let b = f.find(Frames::new(&[103, 98], 2, 1, 1).unwrap()).unwrap();
    let got = batch_clusters(&b);
    assert_eq!(got[0], c);
    assert!(got[1].is_empty());
}

/// The random scenarios exercise every rule of docs/semantics.md's step 3 (otherwise the property
/// tests above could pass vacuously).
#[test]
fn generated_cases_exercise_every_rule() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = case(40);
    let mut total = RuleStats::default();
    for _ in 0..300 {
        let c = strategy.new_tree(&mut runner).unwrap().current();
        let (ped, data) = c.frames();
        let (o, _) = oracle_run(&c, Arith::F64, &ped, &data);
        total += &o.stats;
    }
    println!("rule counts over 300 generated cases: {total:?}");
    assert!(total.negative > 0, "{total:?}");
    assert!(total.centre_by_max > 0, "{total:?}");
    assert!(total.centre_by_total > 0, "{total:?}");
    assert!(total.not_max > 0, "{total:?}");
    assert!(total.tied_centres > 0, "{total:?}");
    assert!(total.pedestal > 0, "{total:?}");
    assert!(total.edge_centres > 0, "{total:?}");
}

/// Searches 3x3 frames where the window total's rounding depends on the summation order:
/// the row-major total and a column-major or reversed total fall on opposite sides of
/// `sqrt(X*Y) * t` (n_sigma is chosen between them), with `max <= t` so the total rule decides
/// the centre pixel. The finder must decide as the row-major order says (docs/semantics.md: "the
/// order is part of the result"). Random data almost never lands this close to the threshold,
/// so the proptest suites alone would not notice another order.
fn summation_order_decides<T: support::oracle::Flt>(precision: Precision, want: usize) {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let mut rng = SmallRng::seed_from_u64(0x5eed ^ want as u64);
    let (mut found, mut centres) = (0, 0);
    for _ in 0..2_000_000 {
        if found == want {
            break;
        }
        let b = rng.random_range(100..60000u16);
        let ped: Vec<u16> = (0..3)
            .flat_map(|_| vec![b + rng.random_range(0..50u16); 9])
            .collect();
        let mut o = Oracle::new(
            Params {
                rows: 3,
                cols: 3,
                side: 3,
                n_sigma: 1.0,
                n: 3,
                frozen: false,
            },
            arith(precision),
        );
        for f in ped.chunks(9) {
            o.push_frame(f);
        }
        let std = o.std(4);
        let d = rng.random_range(1..40u16);
        let mut data: Vec<u16> = (0..9).map(|_| b + 50 + rng.random_range(0..=d)).collect();
        let imax = (0..9).max_by_key(|&i| data[i]).unwrap();
        data.swap(4, imax);
        let c: Vec<T> = (0..9).map(|i| T::of_f64(o.corrected(i, data[i]))).collect();
        let sum = |order: &[usize]| order.iter().fold(T::ZERO, |s, &i| s + c[i]);
        let row = sum(&[0, 1, 2, 3, 4, 5, 6, 7, 8]);
        let alts = [
            sum(&[0, 3, 6, 1, 4, 7, 2, 5, 8]),
            sum(&[8, 7, 6, 5, 4, 3, 2, 1, 0]),
        ];
        let Some(&alt) = alts.iter().find(|&&a| a != row) else {
            continue;
        };
        if std == 0.0 {
            continue;
        }
        let mid = (row.wide() + alt.wide()) / 2.0 / 3.0 / std;
        if !(mid.is_finite() && mid > 0.0) {
            continue;
        }
        let max = c.iter().fold(c[0], |m, &v| if v > m { v } else { m });
        // n_sigma a few ulps around the midpoint, until 3*t lands between the two totals.
        let ulp = if precision == Precision::F64 {
            1.0
        } else {
            2f64.powi(29)
        };
        let pick = (-8i64..=8)
            .map(|k| f64::from_bits((mid.to_bits() as i64 + k * ulp as i64) as u64))
            .find(|&ns| {
                let t = T::of_f64(ns) * T::of_f64(std);
                let limit = T::of_f64(3.0) * t;
                (row > limit) != (alt > limit) && max <= t && c[4] == max
            });
        let Some(n_sigma) = pick else { continue };
        let limit = T::of_f64(3.0) * (T::of_f64(n_sigma) * T::of_f64(std));
        found += 1;
        let case = Case {
            rows: 3,
            cols: 3,
            size: ClusterSize::S3,
            n_sigma,
            n: 3,
            frozen: false,
            baseline: b,
            amplitude: 0,
            noise: Noise::Common,
            data_frames: 1,
            deposits: 0,
            seed: 0,
        };
        let got = batch_clusters(
            &finder(&case, precision, 1, &ped)
                .find(data_view(&case, &data))
                .unwrap(),
        );
        let (_, oracle) = oracle_run(&case, arith(precision), &ped, &data);
        if let Err(d) = compare(&got, &oracle) {
            panic!("{precision:?}: summation order: {case:?}\nframe {data:?}\n{d}");
        }
        let centre = got[0].iter().any(|k| (k.x, k.y) == (1, 1));
        assert_eq!(
            centre,
            row > limit,
            "{precision:?}: the centre must follow the row-major total"
        );
        centres += centre as usize;
    }
    println!("{precision:?}: {found} order-sensitive windows checked, {centres} of them centres");
    assert_eq!(
        found, want,
        "{precision:?}: found only {found} order-sensitive windows"
    );
    assert!(
        centres > 0 && centres < found,
        "{precision:?}: both outcomes should occur"
    );
}

#[test]
fn window_summation_order_is_row_major_f64() {
    summation_order_decides::<f64>(Precision::F64, 20);
}

#[test]
fn window_summation_order_is_row_major_f32() {
    summation_order_decides::<f32>(Precision::F32, 40);
}
