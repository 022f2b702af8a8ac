//! Bins: the edge a value falls in, against aare's, and by hand.

use cluda::interpolation::Edges;
use cluda_gpu::eta;
use proptest::prelude::*;
use support::oracle::aare;

use crate::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// `bin` is `Some(last_smaller)` exactly when `edges[0] <= v <= edges[last]`: values at
    /// edges, one ulp either side, NaN and the infinities, on uneven and even edges.
    #[test]
    fn bin_is_last_smaller_inside((e, vals) in edges_and_probes()) {
        let edges = Edges::new("x", e.clone()).unwrap();
        for v in vals {
            let inside = e[0] <= v && v <= e[e.len() - 1];
            let want = inside.then(|| aare::last_smaller(&e, v));
            prop_assert_eq!(eta::bin(&e, v), want, "value {:e} among {:?}", v, &e);
            prop_assert_eq!(edges.bin(v), want, "value {:e} among {:?}", v, &e);
        }
    }
}

#[test]
fn bin_by_hand() {
    let e = [0.0, 1.0, 2.0, 4.0];
    let cases = [
        (0.0, Some(0)),
        (0.5, Some(0)),
        (1.0, Some(0)), // an inner edge belongs to the bin below it
        (1.0000000000000002, Some(1)),
        (2.0, Some(1)),
        (4.0, Some(2)), // the last edge is inside
        (-0.0, Some(0)),
        (4.000000000000001, None),
        (-1e-300, None),
        (f64::NAN, None),
        (f64::INFINITY, None),
        (f64::NEG_INFINITY, None),
    ];
    for (v, want) in cases {
        assert_eq!(eta::bin(&e, v), want, "{v}");
    }
    assert_eq!(eta::bin(&[0.0, f64::INFINITY], 1e308), Some(0));
    assert_eq!(eta::bin(&[0.0, f64::INFINITY], f64::INFINITY), Some(0));
    assert_eq!(eta::bin(&[1.0], 1.0), None);
}
