//! Tests of the plots' ranges, histograms and drawings.

use plotters::prelude::*;

use super::draw::viridis;
use super::spectrum::{Histogram, auto_range};

#[test]
fn histogram_bins() {
    let mut h = Histogram::new(0.0, 10.0, 5).unwrap();
    for v in [-1.0, 0.0, 1.9, 2.0, 9.99, 10.0, f64::NAN] {
        h.add(v);
    }
    assert_eq!(h.counts, vec![2, 1, 0, 0, 1]);
    assert_eq!((h.underflow, h.overflow), (2, 1));
    assert_eq!(h.total(), 7);
    assert!(Histogram::new(1.0, 1.0, 3).is_err());
    assert!(Histogram::new(0.0, f64::NAN, 3).is_err());
    assert!(Histogram::new(0.0, 1.0, 0).is_err());
}

#[test]
fn viridis_ends() {
    let (lo, hi) = (viridis(0.0), viridis(1.0));
    assert_eq!(lo, RGBColor(68, 1, 84));
    assert!(hi.0 > 240 && hi.1 > 220 && hi.2 < 60, "{hi:?}");
    assert_eq!(viridis(f64::NAN), lo);
    assert_eq!(viridis(7.0), hi);
    assert_eq!(viridis(-1.0), lo);
}

#[test]
fn auto_range_pads_the_quantiles() {
    let mut v: Vec<f64> = (0..=1000).map(f64::from).collect();
    let (lo, hi) = auto_range(&mut v);
    assert!((-60.0..0.0).contains(&lo), "{lo}");
    assert!(hi > 1000.0 && hi <= 1060.0, "{hi}");
    assert_eq!(auto_range(&mut []), (-200.0, 2000.0));
    let (lo, hi) = auto_range(&mut [5.0, 5.0]);
    assert!(lo < 5.0 && hi > 5.0);
}
