//! Etas: every kind against aare's, the generator's coverage, etas by hand.

use cluda::interpolation::EtaKind;
use cluda_gpu::eta;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use support::oracle::aare;

use crate::*;

fn check_eta(side: usize, data: &[i32]) -> Result<(), TestCaseError> {
    for kind in EtaKind::ALL {
        let got = eta::eta(kind, data, side);
        let want = aare::eta_of(kind as u32, data, side);
        let what = format!("{} of {side}x{side} {data:?}", kind.name());
        for (axis, g, w) in [("x", got.x, want.x), ("y", got.y, want.y)] {
            prop_assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{}: {} vs {}; {}",
                axis,
                g,
                w,
                &what
            );
        }
        prop_assert_eq!(got.corner as i32, want.c, "corner; {}", &what);
        prop_assert_eq!(got.sum, want.sum, "sum; {}", &what);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    /// Every kind's eta, corner and sum equal aare's bit for bit, 3x3 to 9x9 (eta3 kinds of
    /// larger clusters: aare's formulas on the central 3x3, cluda's choice).
    #[test]
    fn eta_equals_aare((side, data) in cluster()) {
        check_eta(side, &data)?;
    }
}

/// The generator above does exercise what it is meant to: quadrant ties (the first maximum
/// must win), every corner, zero denominators of every kind, negative values, every side.
#[test]
fn eta_generator_covers_the_edge_cases() {
    let mut runner = TestRunner::deterministic();
    let strategy = cluster();
    let mut ties = 0;
    let mut corners = [0usize; 4];
    let mut zero_den = [0usize; 4];
    let mut negative = 0;
    let mut sides = [0usize; 10];
    for _ in 0..4000 {
        let (side, d) = strategy.new_tree(&mut runner).unwrap().current();
        sides[side] += 1;
        let d64: Vec<i64> = d.iter().map(|&v| v as i64).collect();
        let c = (side / 2) * side + side / 2;
        let q = [
            d64[c] + d64[c - 1] + d64[c - side] + d64[c - side - 1],
            d64[c] + d64[c + 1] + d64[c - side] + d64[c - side + 1],
            d64[c] + d64[c - 1] + d64[c + side] + d64[c + side - 1],
            d64[c] + d64[c + 1] + d64[c + side] + d64[c + side + 1],
        ];
        let max = *q.iter().max().unwrap();
        if q.iter().filter(|&&s| s == max).count() > 1 {
            ties += 1;
        }
        let e2 = aare::eta_of(0, &d, side);
        corners[e2.c as usize] += 1;
        // Eta2: a zero pair sum in the chosen quadrant; full eta2: a zero quadrant sum;
        // eta3: a zero 3x3 sum; cross eta3: a zero row or column of the cross.
        let r = aare::reduce_to_3x3(&d64, side, side);
        let (cl, ch) = if e2.c % 2 == 0 {
            (c - 1, c)
        } else {
            (c, c + 1)
        };
        if d64[cl] + d64[ch] == 0 {
            zero_den[0] += 1;
        }
        if e2.sum == 0 {
            zero_den[1] += 1;
        }
        if r.iter().sum::<i64>() == 0 {
            zero_den[2] += 1;
        }
        if r[3] + r[4] + r[5] == 0 || r[1] + r[4] + r[7] == 0 {
            zero_den[3] += 1;
        }
        if d.iter().any(|&v| v < 0) {
            negative += 1;
        }
    }
    assert!(ties > 400, "{ties} quadrant ties");
    assert!(corners.iter().all(|&n| n > 100), "corners {corners:?}");
    assert!(
        zero_den.iter().all(|&n| n > 40),
        "zero denominators {zero_den:?}"
    );
    assert!(negative > 1000, "{negative} with negative values");
    assert!(
        [3, 5, 7, 9].iter().all(|&s| sides[s] > 500),
        "sides {sides:?}"
    );
}

/// A few clusters worked by hand from aare's definitions (so that the oracle and cluda
/// cannot agree on a shared misreading).
#[test]
fn eta_by_hand() {
    // The photon in the bottom-right quadrant (rows 1..2, columns 1..2): sums TL 110, TR 150,
    // BL 140, BR 190.
    let d = [0, 0, 0, 0, 100, 50, 0, 30, 10];
    let e = eta::eta(EtaKind::Eta2, &d, 3);
    assert_eq!((e.x, e.y, e.sum), (50.0 / 150.0, 30.0 / 130.0, 190));
    assert_eq!(e.corner, eta::Corner::BottomRight);
    let e = eta::eta(EtaKind::FullEta2, &d, 3);
    assert_eq!((e.x, e.y, e.sum), (60.0 / 190.0, 40.0 / 190.0, 190));
    let e = eta::eta(EtaKind::Eta3, &d, 3);
    assert_eq!((e.x, e.y, e.sum), (60.0 / 190.0, 40.0 / 190.0, 190));
    let e = eta::eta(EtaKind::CrossEta3, &d, 3);
    assert_eq!((e.x, e.y, e.sum), (50.0 / 150.0, 30.0 / 130.0, 190));
    // All four quadrants tie: the first (top-left) wins; eta2 x = centre / (left + centre).
    let d = [1, 2, 1, 2, 8, 2, 1, 2, 1];
    let e = eta::eta(EtaKind::Eta2, &d, 3);
    assert_eq!(e.corner, eta::Corner::TopLeft);
    assert_eq!((e.x, e.y, e.sum), (0.8, 0.8, 13));
    // TR and BR tie above TL and BL: top-right wins.
    let d = [0, 1, 3, 0, 5, 3, 0, 1, 3];
    assert_eq!(eta::eta(EtaKind::Eta2, &d, 3).corner, eta::Corner::TopRight);
    // Zero denominators leave 0.
    let d = [0, 0, 0, -4, 4, 0, 0, 0, 0];
    let e = eta::eta(EtaKind::CrossEta3, &d, 3);
    assert_eq!((e.x.to_bits(), e.y, e.sum), (0f64.to_bits(), 0.0, 0));
    // A 5x5 cluster's eta3 is its central 3x3's: the outer ring does not count.
    let mut d5 = [7i32; 25];
    for (r, row) in [[0, 0, 0], [0, 100, 50], [0, 30, 10]].iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            d5[(r + 1) * 5 + c + 1] = v;
        }
    }
    let e = eta::eta(EtaKind::Eta3, &d5, 5);
    assert_eq!((e.x, e.y, e.sum), (60.0 / 190.0, 40.0 / 190.0, 190));
}
