//! Default edges: NumPy's linspace.

use cluda::interpolation::{CubeAxes, Edges, EtaKind};
use proptest::prelude::*;

use crate::*;

/// The default eta edges are `numpy.linspace(-0.1, 1.1, 202)`: NumPy computes edge `i` as
/// `i * step + lo` (two roundings, no fused multiply-add) with `step = (hi - lo) / 201`, and
/// sets the last edge to `hi` itself.
#[test]
fn default_edges_are_numpy_linspace() {
    let (lo, hi, bins) = (-0.1f64, 1.1f64, 201usize);
    let step = (hi - lo) / bins as f64;
    let mut want: Vec<f64> = (0..=bins).map(|i| i as f64 * step + lo).collect();
    want[bins] = hi;
    let got = Edges::linspace("x", lo, hi, bins).unwrap();
    assert_eq!(bits(got.as_slice()), bits(&want));
    let d = CubeAxes::default_for(EtaKind::Eta2);
    assert_eq!(bits(d.x.as_slice()), bits(&want));
    assert_eq!(bits(d.y.as_slice()), bits(&want));
    assert_eq!(bits(d.e.as_slice()), bits(&[0.0, f64::INFINITY]));
    assert_eq!(d.shape(), [201, 201, 1]);
    // `i * step + lo` is not `lo + i * (hi - lo) / bins` everywhere: the test would catch
    // the other formula.
    let other: Vec<f64> = (0..=bins)
        .map(|i| lo + i as f64 * (hi - lo) / bins as f64)
        .collect();
    assert_ne!(bits(&other), bits(&want));
}

proptest! {
    /// `Edges::linspace` is NumPy's formula for any ends and bin count.
    #[test]
    fn linspace_is_numpy(lo in -1e3f64..1e3, w in 1e-6f64..1e3, bins in 1usize..2000) {
        let hi = lo + w;
        prop_assume!(hi > lo);
        let step = (hi - lo) / bins as f64;
        let mut want: Vec<f64> = (0..=bins).map(|i| i as f64 * step + lo).collect();
        want[bins] = hi;
        match Edges::linspace("x", lo, hi, bins) {
            Ok(e) => prop_assert_eq!(bits(e.as_slice()), bits(&want)),
            // Refused only when rounding made two edges equal.
            Err(_) => prop_assert!(want.windows(2).any(|p| p[0] >= p[1])),
        }
    }
}
