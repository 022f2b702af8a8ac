//! Maps: the cumulative and Rosenblatt maps against aare's, bad cubes refused.

use cluda::interpolation::{EtaKind, Interpolator, MapKind};
use proptest::prelude::*;
use support::oracle::aare;

use crate::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Both kinds of maps equal aare's in-place loops bit for bit, on small cubes with zero
    /// slabs, zero norms, negative and fractional counts and 1-bin axes.
    #[test]
    fn maps_equal_aare((shape, c) in cube([6, 6, 3])) {
        let ebins: Vec<f64> = (0..=shape[2]).map(|i| i as f64 * 100.0).collect();
        let a = axes(EtaKind::Eta2, shape, -0.1, 1.1, ebins);
        for (map, rosenblatt) in [(MapKind::Cumulative, false), (MapKind::Rosenblatt, true)] {
            let got = Interpolator::new(a.clone(), &c, map).unwrap();
            let want = oracle_maps(&a, &c, rosenblatt);
            prop_assert_eq!(bits(got.ietax()), bits(&want.m_ietax.data), "ietax {:?} of {:?} {:?}", map, shape, &c);
            prop_assert_eq!(bits(got.ietay()), bits(&want.m_ietay.data), "ietay {:?} of {:?} {:?}", map, shape, &c);
            for i in 0..shape[0] {
                for j in 0..shape[1] {
                    for k in 0..shape[2] {
                        let (u, w) = got.lookup(i, j, k);
                        prop_assert_eq!(u.to_bits(), want.m_ietax.get(i, j, k).to_bits());
                        prop_assert_eq!(w.to_bits(), want.m_ietay.get(i, j, k).to_bits());
                    }
                }
            }
        }
    }
}

/// A cube whose length does not match its axes, or with a non-finite count, is refused
/// with an error naming it.
#[test]
fn maps_refuse_bad_cubes() {
    let a = axes(
        EtaKind::Eta2,
        [3, 2, 1],
        -0.1,
        1.1,
        vec![0.0, f64::INFINITY],
    );
    let err = Interpolator::new(a.clone(), &[0.0; 5], MapKind::Cumulative).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("etacube") && msg.contains('5'), "{msg}");
    let mut c = vec![1.0; 6];
    c[4] = f64::NAN;
    let err = Interpolator::new(a.clone(), &c, MapKind::Rosenblatt).unwrap_err();
    assert!(err.to_string().contains("bin 4"), "{err}");
    c[4] = f64::INFINITY;
    assert!(Interpolator::new(a, &c, MapKind::Cumulative).is_err());
    // The oracle (aare) refuses the mismatch too.
    let o = aare::Arr3::zeros([2, 2, 1]);
    assert!(
        aare::Interpolator::new(&o, &[0.0, 1.0, 2.0, 3.0], &[0.0, 1.0, 2.0], &[0.0, 1.0]).is_none()
    );
}
