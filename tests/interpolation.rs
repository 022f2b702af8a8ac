//! Eta interpolation against an independent oracle of aare's C++ (`tests/support/src/oracle/aare.rs`, a
//! transliteration of aare 2025.11.21 that calls nothing of cluda's): etas, bins, maps,
//! photon placement and cube counts bit for bit; plus the files (eta cube `.npz`, photon
//! `.npy`, TIFF) read back byte by byte and the sub-pixel image's counting rules.
//!
//! cluda's documented choices where aare is undefined are tested as such: eta3 and cross eta3
//! of a cluster larger than 3x3 are those of its central 3x3 (aare's `reduce_to_3x3`; aare's
//! own code calls an undefined `reduce_cluster_to_3x3`), and a value outside the first or last
//! edge is flagged (aare reads bin 0 below the first edge and past its tables above the last).

use support::oracle::aare;

use std::path::Path;

use cluda::interpolation::files::{self, CUBE_KEYS, PhotonWriter};
use cluda::interpolation::photon::PHOTON_DESCR;
use cluda::interpolation::{
    CubeAxes, Edges, EnergyWindow, EtaCube, EtaKind, Interpolator, MapKind, Photon, PixelMask,
    Placer, SubpixelImage,
};
use cluda::{ClusterRef, ClusterSize, FrameClusters};
use cluda_gpu::eta;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

// ---------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------

/// One pixel value: often tiny (zero denominators and ties), often detector-like, sometimes
/// anything an `i32` holds.
fn pixel() -> impl Strategy<Value = i32> {
    prop_oneof![
        4 => -2i32..=2,
        4 => -70_000i32..=70_000,
        1 => Just(0),
        1 => any::<i32>(),
    ]
}

/// Mirrors a square cluster left-right (`sym & 1`: the TL and TR quadrants tie, BL and BR
/// too) and/or top-bottom (`sym & 2`: TL/BL and TR/BR tie), so that quadrant ties are common.
fn symmetrise(mut d: Vec<i32>, side: usize, sym: u8) -> Vec<i32> {
    if sym & 1 != 0 {
        for r in 0..side {
            for c in 0..side / 2 {
                d[r * side + side - 1 - c] = d[r * side + c];
            }
        }
    }
    if sym & 2 != 0 {
        for r in 0..side / 2 {
            for c in 0..side {
                d[(side - 1 - r) * side + c] = d[r * side + c];
            }
        }
    }
    d
}

/// A square cluster of side 3, 5, 7 or 9, its values row-major; half of them symmetrised
/// into quadrant ties, some all zero.
fn cluster() -> impl Strategy<Value = (usize, Vec<i32>)> {
    prop_oneof![Just(3usize), Just(5), Just(7), Just(9)].prop_flat_map(|side| {
        (
            Just(side),
            prop::collection::vec(pixel(), side * side),
            0u8..4,
            0u8..16,
        )
            .prop_map(|(side, d, sym, zero)| {
                let d = if zero == 0 { vec![0; side * side] } else { d };
                (side, symmetrise(d, side, sym))
            })
    })
}

/// The next representable value above (`up`) or below a finite `x`.
fn step_ulp(x: f64, up: bool) -> f64 {
    if x == 0.0 {
        let tiny = f64::from_bits(1);
        return if up { tiny } else { -tiny };
    }
    let b = x.to_bits();
    let away = (x > 0.0) == up;
    f64::from_bits(if away { b + 1 } else { b - 1 })
}

/// Strictly increasing edges: uneven steps (tiny to large), sometimes infinite ends.
fn uneven_edges() -> impl Strategy<Value = Vec<f64>> {
    let step = prop_oneof![
        3 => 1e-3f64..10.0,
        1 => 1e-12f64..1e-9,
        1 => 1e2f64..1e5,
    ];
    (-1e3f64..1e3, prop::collection::vec(step, 1..24), 0u8..8).prop_map(|(start, steps, ends)| {
        let mut e = vec![start];
        for s in steps {
            let last = *e.last().unwrap();
            let mut next = last + s;
            if next <= last {
                next = step_ulp(last, true);
            }
            e.push(next);
        }
        let n = e.len();
        if ends == 1 {
            e[0] = f64::NEG_INFINITY;
        }
        if ends == 2 {
            e[n - 1] = f64::INFINITY;
        }
        if ends == 3 && n > 2 {
            e[0] = f64::NEG_INFINITY;
            e[n - 1] = f64::INFINITY;
        }
        e
    })
}

/// Evenly spaced edges (`numpy.linspace` as cluda computes it), where the O(1) guess of
/// `bin` is closest to right and its corrections matter only at the edges.
fn even_edges() -> impl Strategy<Value = Vec<f64>> {
    (-10.0f64..10.0, 1e-3f64..20.0, 1usize..400).prop_map(|(lo, width, bins)| {
        Edges::linspace("x", lo, lo + width, bins)
            .unwrap()
            .as_slice()
            .to_vec()
    })
}

/// A value to bin among `e`: an edge exactly, one ulp either side of one, anything around
/// them, NaN or an infinity.
fn probe(e: &[f64], pick: u8, i: usize, t: f64) -> f64 {
    let edge = e[i % e.len()];
    let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
    match pick {
        0 | 1 => edge,
        2 if edge.is_finite() => step_ulp(edge, true),
        3 if edge.is_finite() => step_ulp(edge, false),
        4 => f64::NAN,
        5 => f64::INFINITY,
        6 => f64::NEG_INFINITY,
        _ => {
            let lo = finite(e[0]).min(finite(e[e.len() - 2]));
            let hi = finite(e[e.len() - 1]).max(finite(e[1]));
            let w = (hi - lo).max(1.0);
            lo - 0.1 * w + t * 1.2 * w
        }
    }
}

/// Edges and values to bin among them.
fn edges_and_probes() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    prop_oneof![uneven_edges(), even_edges()].prop_flat_map(|e| {
        let probes = prop::collection::vec((0u8..12, any::<usize>(), 0.0f64..1.0), 1..64);
        (Just(e), probes).prop_map(|(e, p)| {
            let vals = p.into_iter().map(|(k, i, t)| probe(&e, k, i, t)).collect();
            (e, vals)
        })
    })
}

/// One bin count of a random cube: mostly small counts and zeros, sometimes large or
/// fractional or negative (cluda accepts any finite value, as aare does).
fn count() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => Just(0.0),
        4 => (0u32..6).prop_map(f64::from),
        1 => 0.0f64..1e6,
        1 => -10.0f64..10.0,
        1 => Just(-0.0),
    ]
}

/// A cube of `nx x ny x ne` bins (each 1..=max), C order, with sometimes a whole eta_x slab
/// or eta_y slab set to zero.
fn cube(max: [usize; 3]) -> impl Strategy<Value = ([usize; 3], Vec<f64>)> {
    (1..=max[0], 1..=max[1], 1..=max[2]).prop_flat_map(|(nx, ny, ne)| {
        (
            Just([nx, ny, ne]),
            prop::collection::vec(count(), nx * ny * ne),
            prop::option::of(0..nx),
            prop::option::of(0..ny),
        )
            .prop_map(|(shape, mut v, zi, zj)| {
                let [_, ny, ne] = shape;
                for (n, c) in v.iter_mut().enumerate() {
                    let (i, j) = (n / (ny * ne), (n / ne) % ny);
                    if zi == Some(i) || zj == Some(j) {
                        *c = 0.0;
                    }
                }
                (shape, v)
            })
    })
}

fn kind_of(n: u32) -> EtaKind {
    EtaKind::from_u32(n).unwrap()
}

/// The axes of a cube of `shape` bins with eta edges from `lo` to `hi` (on both axes) and
/// energy edges `e` (one more than `shape[2]`).
fn axes(kind: EtaKind, shape: [usize; 3], lo: f64, hi: f64, e: Vec<f64>) -> CubeAxes {
    CubeAxes {
        kind,
        x: Edges::linspace("xbins", lo, hi, shape[0]).unwrap(),
        y: Edges::linspace("ybins", lo - 0.01, hi + 0.02, shape[1]).unwrap(),
        e: Edges::new("ebins", e).unwrap(),
    }
}

/// The oracle's maps of `cube` (`rosenblatt`: the transform, else aare's default constructor).
fn oracle_maps(axes: &CubeAxes, cube: &[f64], rosenblatt: bool) -> aare::Interpolator {
    let c = aare::Arr3::new(axes.shape(), cube.to_vec());
    let (x, y, e) = (axes.x.as_slice(), axes.y.as_slice(), axes.e.as_slice());
    if rosenblatt {
        let mut i = aare::Interpolator::with_bins(x, y, e);
        assert!(i.rosenblatttransform(&c));
        i
    } else {
        aare::Interpolator::new(&c, x, y, e).unwrap()
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

// ---------------------------------------------------------------------------------------
// (a) Etas
// ---------------------------------------------------------------------------------------

fn check_eta(side: usize, data: &[i32]) -> Result<(), TestCaseError> {
    for kind in EtaKind::ALL {
        let got = eta::eta(kind, data, side);
        let want = aare::eta_of(kind as u32, data, side);
        let what = format!("{} of {side}x{side} {data:?}", kind.name());
        prop_assert_eq!(
            got.x.to_bits(),
            want.x.to_bits(),
            "x: {} vs {}; {}",
            got.x,
            want.x,
            &what
        );
        prop_assert_eq!(
            got.y.to_bits(),
            want.y.to_bits(),
            "y: {} vs {}; {}",
            got.y,
            want.y,
            &what
        );
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

// ---------------------------------------------------------------------------------------
// (b) Bins
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// (c) Maps
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// (d) Photons and cube counts
// ---------------------------------------------------------------------------------------

/// A scene: an eta kind, its cube (axes and counts), the map kind and clusters to place.
#[derive(Clone, Debug)]
struct Scene {
    axes: CubeAxes,
    cube: Vec<f64>,
    rosenblatt: bool,
    side: usize,
    clusters: Vec<(u16, u16, Vec<i32>)>,
}

fn scene() -> impl Strategy<Value = Scene> {
    (
        0u32..4,
        prop_oneof![Just(3usize), Just(5), Just(9)],
        cube([12, 12, 3]),
        any::<bool>(),
        (-0.3f64..0.1, 0.8f64..1.3),
        (-500.0f64..300.0, 10.0f64..3000.0, any::<bool>()),
    )
        .prop_flat_map(
            |(k, side, (shape, c), rosenblatt, (lo, hi), (elo, ew, inf))| {
                let kind = kind_of(k);
                // eta3 kinds range over [-1, 1].
                let (lo, hi) = if kind.uses_quadrant() {
                    (lo, hi)
                } else {
                    (2.0 * lo - 0.6, 2.0 * hi - 1.0)
                };
                let e = if inf && shape[2] == 1 {
                    vec![0.0, f64::INFINITY]
                } else {
                    Edges::linspace("ebins", elo, elo + ew, shape[2])
                        .unwrap()
                        .as_slice()
                        .to_vec()
                };
                let a = axes(kind, shape, lo, hi, e);
                let value = prop_oneof![4 => -30i32..600, 1 => pixel()];
                let one = (
                    any::<u16>(),
                    any::<u16>(),
                    prop::collection::vec(value, side * side),
                    0u8..4,
                )
                    .prop_map(move |(x, y, d, sym)| (x, y, symmetrise(d, side, sym)));
                (
                    Just(a),
                    Just(c),
                    Just(rosenblatt),
                    Just(side),
                    prop::collection::vec(one, 1..48),
                )
            },
        )
        .prop_map(|(axes, cube, rosenblatt, side, clusters)| Scene {
            axes,
            cube,
            rosenblatt,
            side,
            clusters,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every photon equals aare's `interpolate` (eta2 kinds `x + 0.5 + u + dX`, eta3 kinds
    /// `x + u`) bit for bit, energy included; a photon whose eta (flag 1) or energy (flag 2)
    /// is outside the edges sits at its pixel's centre.
    #[test]
    fn photons_equal_aare(s in scene()) {
        let map = if s.rosenblatt { MapKind::Rosenblatt } else { MapKind::Cumulative };
        let maps = Interpolator::new(s.axes.clone(), &s.cube, map).unwrap();
        let oracle = oracle_maps(&s.axes, &s.cube, s.rosenblatt);
        let placer = Placer { maps: &maps, window: None, mask: None, gain: None };
        for (n, (x, y, d)) in s.clusters.iter().enumerate() {
            let frame = n as i64 * 7 - 3;
            let p = placer.place(frame, &ClusterRef { x: *x, y: *y, data: d }, s.side);
            let (wx, wy, we, wf) = oracle.interpolate_one(s.axes.kind as u32, *x, *y, d, s.side);
            let (px, py, pe, pf, pframe) = (p.x, p.y, p.energy, p.flags, p.frame);
            let what = format!("{} {map:?} cluster ({x}, {y}) {d:?}", s.axes.kind.name());
            prop_assert_eq!(pframe, frame);
            prop_assert_eq!(pf, wf, "flags; {}", &what);
            prop_assert_eq!(px.to_bits(), wx.to_bits(), "x {} vs {}; {}", px, wx, &what);
            prop_assert_eq!(py.to_bits(), wy.to_bits(), "y {} vs {}; {}", py, wy, &what);
            prop_assert_eq!(pe.to_bits(), we.to_bits(), "energy {} vs {}; {}", pe, we, &what);
        }
    }

    /// The mask (flag 4) and the energy window (flag 8) add to the edges' flags; any flag
    /// puts the photon at its pixel's centre.
    #[test]
    fn photons_masked_and_windowed(s in scene(), lo in -100.0f64..800.0, w in 0.0f64..800.0, seed in any::<u64>()) {
        let maps = Interpolator::new(s.axes.clone(), &s.cube, MapKind::Cumulative).unwrap();
        let oracle = oracle_maps(&s.axes, &s.cube, false);
        // A mask over the first 64 x 64 pixels, bad where a hash of the pixel says so.
        let bad = |x: u16, y: u16| {
            x < 64 && y < 64 && (seed ^ (x as u64 * 0x9e37_79b9 + y as u64 * 0x85eb_ca6b)).count_ones().is_multiple_of(3)
        };
        let mask = PixelMask::new(64, 64, (0..64 * 64).map(|i| bad((i % 64) as u16, (i / 64) as u16)).collect()).unwrap();
        let window = EnergyWindow::new(lo, lo + w).unwrap();
        let placer = Placer { maps: &maps, window: Some(window), mask: Some(&mask), gain: None };
        for (x, y, d) in &s.clusters {
            // Bring some clusters into the mask's area.
            let (x, y) = (x % 80, y % 80);
            let p = placer.place(0, &ClusterRef { x, y, data: d }, s.side);
            let (mut wx, mut wy, we, mut wf) = oracle.interpolate_one(s.axes.kind as u32, x, y, d, s.side);
            if bad(x, y) {
                wf |= 4;
            }
            if !(lo <= we && we <= lo + w) {
                wf |= 8;
            }
            if wf != 0 {
                (wx, wy) = (x as f64 + 0.5, y as f64 + 0.5);
            }
            let (px, py, pe, pf) = (p.x, p.y, p.energy, p.flags);
            prop_assert_eq!(pf, wf);
            prop_assert_eq!(px.to_bits(), wx.to_bits());
            prop_assert_eq!(py.to_bits(), wy.to_bits());
            prop_assert_eq!(pe.to_bits(), we.to_bits());
        }
    }

    /// A cube filled from frames of clusters counts exactly the clusters inside every edge,
    /// each in aare's bins (`last_smaller` of eta_x, eta_y, energy), and tallies the rest.
    #[test]
    fn cube_counts_equal_oracle(s in scene()) {
        let size = ClusterSize::from_side(s.side).unwrap();
        let mut words = Vec::new();
        for (x, y, d) in &s.clusters {
            words.push(cluda::cluster::pack_xy(*x, *y));
            words.extend(d.iter().map(|&v| v as u32));
        }
        let mut cube = EtaCube::new(s.axes.clone()).unwrap();
        // The clusters in two frames.
        let split = s.clusters.len() / 2 * size.record_words();
        cube.add_frame(&FrameClusters::new(cluda::FrameNumber(0), size, &words[..split])).unwrap();
        cube.add_frame(&FrameClusters::new(cluda::FrameNumber(1), size, &words[split..])).unwrap();

        let [nx, ny, ne] = s.axes.shape();
        let mut want = vec![0u64; nx * ny * ne];
        let (mut inside, mut eta_out, mut e_out) = (0u64, 0u64, 0u64);
        let (xe, ye, ee) = (s.axes.x.as_slice(), s.axes.y.as_slice(), s.axes.e.as_slice());
        let is_in = |e: &[f64], v: f64| e[0] <= v && v <= e[e.len() - 1];
        for (_, _, d) in &s.clusters {
            let o = aare::eta_of(s.axes.kind as u32, d, s.side);
            let energy = o.sum as f64;
            let eta_ok = is_in(xe, o.x) && is_in(ye, o.y);
            let e_ok = is_in(ee, energy);
            eta_out += u64::from(!eta_ok);
            e_out += u64::from(!e_ok);
            if eta_ok && e_ok {
                inside += 1;
                let (i, j, k) = (aare::last_smaller(xe, o.x), aare::last_smaller(ye, o.y), aare::last_smaller(ee, energy));
                want[(i * ny + j) * ne + k] += 1;
            }
        }
        prop_assert_eq!(cube.counts(), &want[..]);
        let t = cube.tally();
        prop_assert_eq!((t.clusters, t.inside, t.eta_outside, t.energy_outside), (s.clusters.len() as u64, inside, eta_out, e_out));
        prop_assert_eq!(cube.cluster_size(), Some(size));
    }
}

/// A cube refuses frames of a second cluster size; counts of the wrong length are refused.
#[test]
fn cube_refuses_mixed_sizes() {
    let mut cube = EtaCube::new(CubeAxes::default_for(EtaKind::Eta2)).unwrap();
    let w3 = vec![0u32; ClusterSize::S3.record_words()];
    let w5 = vec![0u32; ClusterSize::S5.record_words()];
    cube.add_frame(&FrameClusters::new(
        cluda::FrameNumber(0),
        ClusterSize::S3,
        &w3,
    ))
    .unwrap();
    assert!(
        cube.add_frame(&FrameClusters::new(
            cluda::FrameNumber(1),
            ClusterSize::S5,
            &w5
        ))
        .is_err()
    );
    let t = *cube.tally();
    assert!(cube.add_counts(ClusterSize::S3, &[1, 2], &t).is_err());
}

// ---------------------------------------------------------------------------------------
// (e) Default edges
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// (f) Files and images
// ---------------------------------------------------------------------------------------

/// A cube with some counts, of `kind`, over uneven axes.
fn some_cube(kind: EtaKind) -> EtaCube {
    let a = CubeAxes {
        kind,
        x: Edges::new("xbins", vec![-0.1, 0.2, 0.25, 1.1]).unwrap(),
        y: Edges::new("ybins", vec![-0.1, 0.5, 1.1]).unwrap(),
        e: Edges::new("ebins", vec![0.0, 100.0, 250.5, 1e4, f64::INFINITY]).unwrap(),
    };
    let mut c = EtaCube::new(a).unwrap();
    let counts: Vec<u64> = (0..3 * 2 * 4).map(|i| (i * i * 7919) % 101).collect();
    let tally = cluda::interpolation::Tally {
        clusters: 1000,
        inside: 990,
        eta_outside: 7,
        energy_outside: 3,
        ..Default::default()
    };
    c.add_counts(ClusterSize::S5, &counts, &tally).unwrap();
    c
}

#[test]
fn cube_file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eta.npz");
    let cube = some_cube(EtaKind::CrossEta3);
    files::write_cube(&path, &cube, "ADU", cluda::io::atomic::Claim::Replace).unwrap();

    // Exactly the four arrays, in order, with the shapes NumPy and aare expect.
    let arrays = cluda::io::npz::read_f64(&path).unwrap();
    let keys: Vec<&str> = arrays.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["etacube", "xbins", "ybins", "ebins"]);
    assert_eq!(CUBE_KEYS, ["etacube", "xbins", "ybins", "ebins"]);
    assert_eq!(arrays[0].1.shape, [3, 2, 4]);
    let counts: Vec<f64> = cube.counts().iter().map(|&c| c as f64).collect();
    assert_eq!(bits(&arrays[0].1.values), bits(&counts));
    let a = cube.axes();
    for (arr, e) in arrays[1..].iter().zip([&a.x, &a.y, &a.e]) {
        assert_eq!(arr.1.shape, [e.as_slice().len()]);
        assert_eq!(bits(&arr.1.values), bits(e.as_slice()));
    }

    // The metadata beside it, and read_cube taking the kind from it.
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("eta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["eta"], "cross-eta3");
    assert_eq!(meta["cluster"], 5);
    assert_eq!(meta["energy_unit"], "ADU");
    assert_eq!(meta["clusters"], 1000);
    let (axes, values, m) = files::read_cube(&path, Some(EtaKind::Eta2)).unwrap();
    assert_eq!(&axes, cube.axes());
    assert_eq!(bits(&values), bits(&counts));
    let m = m.unwrap();
    assert_eq!(
        (m.kind, m.unit.as_str(), m.cluster),
        (EtaKind::CrossEta3, "ADU", Some(5))
    );

    // Without the metadata, the kind given (else eta2).
    std::fs::remove_file(dir.path().join("eta.json")).unwrap();
    let (axes, _, m) = files::read_cube(&path, Some(EtaKind::Eta3)).unwrap();
    assert_eq!((axes.kind, m), (EtaKind::Eta3, None));
    assert_eq!(files::read_cube(&path, None).unwrap().0.kind, EtaKind::Eta2);
}

fn write_npz(path: &Path, arrays: &[(&str, Vec<usize>, Vec<f64>)]) {
    let refs: Vec<(&str, &[usize], &[f64])> = arrays
        .iter()
        .map(|(k, s, v)| (*k, s.as_slice(), v.as_slice()))
        .collect();
    cluda::io::npz::write_f64(path, &refs, cluda::io::atomic::Claim::Replace).unwrap();
}

#[test]
fn cube_file_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let x = vec![0.0, 0.5, 1.0];
    let y = vec![0.0, 1.0];
    let e = vec![0.0, f64::INFINITY];
    let good = |c: Vec<usize>| {
        let n = c.iter().product();
        vec![
            ("etacube", c, vec![1.0; n]),
            ("xbins", vec![3], x.clone()),
            ("ybins", vec![2], y.clone()),
            ("ebins", vec![2], e.clone()),
        ]
    };
    // The good one reads.
    let p = dir.path().join("good.npz");
    write_npz(&p, &good(vec![2, 1, 1]));
    files::read_cube(&p, None).unwrap();

    // An extra key.
    let p = dir.path().join("extra.npz");
    let mut a = good(vec![2, 1, 1]);
    a.push(("extra", vec![1], vec![0.0]));
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("unexpected array `extra`") && msg.contains("extra.npz"),
        "{msg}"
    );

    // A missing key.
    let p = dir.path().join("missing.npz");
    let mut a = good(vec![2, 1, 1]);
    a.pop();
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(msg.contains("no `ebins` array"), "{msg}");

    // A cube whose shape does not match the edges (the axes swapped), or of another rank.
    let p = dir.path().join("shape.npz");
    write_npz(&p, &good(vec![1, 2, 1]));
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("shape.npz") && msg.contains("[1, 2, 1]") && msg.contains("[2, 1, 1]"),
        "{msg}"
    );
    let p = dir.path().join("rank.npz");
    write_npz(&p, &good(vec![2, 1]));
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(msg.contains("`etacube` is 2-D"), "{msg}");

    // Edges that do not increase.
    let p = dir.path().join("edges.npz");
    let mut a = good(vec![2, 1, 1]);
    a[1].2 = vec![0.0, 1.0, 1.0];
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("xbins") && msg.contains("strictly increase"),
        "{msg}"
    );
}

/// Parses an `.npy` header: (dict text, data offset).
fn npy_header(bytes: &[u8]) -> (String, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (len, pre) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => panic!("npy version {v}"),
    };
    assert_eq!((pre + len) % 64, 0, "the data is 64-byte aligned");
    let dict = std::str::from_utf8(&bytes[pre..pre + len]).unwrap();
    assert!(dict.ends_with('\n'));
    (dict.trim_end().to_string(), pre + len)
}

#[test]
fn photon_file_rows_read_back() {
    assert_eq!(std::mem::size_of::<Photon>(), 33);
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Photon> = (0..1000)
        .map(|i| Photon {
            frame: i64::MAX - i * 0x1_0000_0001,
            x: (i as f64) * 0.1 - 3.0,
            y: if i == 5 {
                f64::NAN
            } else {
                1e300 / (i + 1) as f64
            },
            energy: -(i as f64) - 0.5,
            flags: (i % 256) as u8,
        })
        .collect();
    for split in [0, 1, 777, 1000] {
        let path = dir.path().join(format!("p{split}.npy"));
        let mut w = PhotonWriter::create(&path, cluda::io::atomic::Claim::Replace).unwrap();
        w.write(&rows[..split]).unwrap();
        w.write(&[]).unwrap();
        w.write(&rows[split..]).unwrap();
        assert_eq!(w.finish().unwrap(), path);
        let bytes = std::fs::read(&path).unwrap();
        let (dict, off) = npy_header(&bytes);
        assert_eq!(
            dict,
            format!("{{'descr': {PHOTON_DESCR}, 'fortran_order': False, 'shape': (1000,), }}")
        );
        assert_eq!(
            PHOTON_DESCR,
            "[('frame', '<i8'), ('x', '<f8'), ('y', '<f8'), ('energy', '<f8'), ('flags', 'u1')]"
        );
        let data = &bytes[off..];
        assert_eq!(data.len(), 33 * rows.len());
        for (r, p) in data.chunks_exact(33).zip(&rows) {
            let f = |a: usize| u64::from_le_bytes(r[a..a + 8].try_into().unwrap());
            let Photon {
                frame,
                x,
                y,
                energy,
                flags,
            } = *p;
            assert_eq!(f(0) as i64, frame);
            assert_eq!(f(8), x.to_bits());
            assert_eq!(f(16), y.to_bits());
            assert_eq!(f(24), energy.to_bits());
            assert_eq!(r[32], flags);
        }
    }
    // No rows: a valid empty array.
    let path = dir.path().join("empty.npy");
    PhotonWriter::create(&path, cluda::io::atomic::Claim::Replace)
        .unwrap()
        .finish()
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (dict, off) = npy_header(&bytes);
    assert!(dict.contains("'shape': (0,)"), "{dict}");
    assert_eq!(bytes.len(), off);
}

#[test]
fn tiff_header_fields() {
    let dir = tempfile::tempdir().unwrap();
    let (h, w) = (5usize, 7usize);
    let data: Vec<u32> = (0..(h * w) as u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9))
        .collect();
    let path = dir.path().join("i.tif");
    cluda::io::tiff::write_u32(&path, h, w, &data, cluda::io::atomic::Claim::Replace).unwrap();
    let b = std::fs::read(&path).unwrap();
    let u16_at = |a: usize| u16::from_le_bytes([b[a], b[a + 1]]);
    let u32_at = |a: usize| u32::from_le_bytes(b[a..a + 4].try_into().unwrap());
    assert_eq!(&b[..2], b"II");
    assert_eq!(u16_at(2), 42);
    let ifd = u32_at(4) as usize;
    let n = u16_at(ifd) as usize;
    let mut tags = std::collections::BTreeMap::new();
    let mut last_tag = 0;
    for e in 0..n {
        let a = ifd + 2 + 12 * e;
        let (tag, ty, count) = (u16_at(a), u16_at(a + 2), u32_at(a + 4));
        assert!(tag > last_tag, "tags in increasing order");
        last_tag = tag;
        assert_eq!(count, 1);
        let v = match ty {
            3 => u16_at(a + 8) as u32,
            4 => u32_at(a + 8),
            t => panic!("type {t}"),
        };
        tags.insert(tag, v);
    }
    assert_eq!(u32_at(ifd + 2 + 12 * n), 0, "one IFD");
    let want = [
        (256, w as u32),
        (257, h as u32),
        (258, 32),
        (259, 1),
        (262, 1),
        (273, (b.len() - 4 * h * w) as u32),
        (277, 1),
        (278, h as u32),
        (279, (4 * h * w) as u32),
        (339, 1),
    ];
    assert_eq!(tags.into_iter().collect::<Vec<_>>(), want);
    let off = b.len() - 4 * h * w;
    let back: Vec<u32> = b[off..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, data);
    // A shape that does not hold the data is refused.
    assert!(
        cluda::io::tiff::write_u32(
            &dir.path().join("bad.tif"),
            h,
            w + 1,
            &data,
            cluda::io::atomic::Claim::Replace
        )
        .is_err()
    );
}

#[test]
fn image_files_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let mut img = SubpixelImage::new(3, 2, 4).unwrap();
    assert_eq!(img.shape(), (12, 8));
    assert!(img.add(1.3, 2.9));
    let npy = dir.path().join("i.npy");
    files::write_image(&npy, &img, cluda::io::atomic::Claim::Replace).unwrap();
    let b = std::fs::read(&npy).unwrap();
    let (dict, off) = npy_header(&b);
    assert!(
        dict.contains("'descr': '<u4'") && dict.contains("'shape': (12, 8)"),
        "{dict}"
    );
    let back: Vec<u32> = b[off..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, img.counts());
    // floor(2.9 * 4) = 11, floor(1.3 * 4) = 5.
    assert_eq!(back[11 * 8 + 5], 1);
    files::write_image(
        &dir.path().join("i.TIF"),
        &img,
        cluda::io::atomic::Claim::Replace,
    )
    .unwrap();
    assert!(
        files::write_image(
            &dir.path().join("i.png"),
            &img,
            cluda::io::atomic::Claim::Replace
        )
        .is_err()
    );
}

#[test]
fn image_saturates_and_skips_outside() {
    let mut img = SubpixelImage::new(2, 3, 2).unwrap();
    let (h, w) = img.shape();
    assert_eq!((h, w), (4, 6));
    let mut near = vec![0u32; h * w];
    near[0] = u32::MAX - 1;
    near[1] = u32::MAX;
    near[2] = 7;
    // Into an empty image: taken as they are.
    img.add_counts(near.clone()).unwrap();
    assert_eq!(&img.counts()[..3], &[u32::MAX - 1, u32::MAX, 7]);
    assert!(img.add(0.0, 0.0));
    assert!(img.add(0.49, 0.49));
    assert_eq!(img.counts()[0], u32::MAX, "saturates");
    assert!(img.add(0.5, 0.0));
    assert_eq!(img.counts()[1], u32::MAX);
    // Into a counted one: summed, saturating.
    img.add_counts(near.clone()).unwrap();
    assert_eq!(&img.counts()[..3], &[u32::MAX, u32::MAX, 14]);
    assert!(img.add_counts(near[1..].to_vec()).is_err());

    let before = img.counts().to_vec();
    for (x, y) in [
        (-1e-9, 0.5),
        (0.5, -1e-9),
        (3.0, 0.5),
        (0.5, 2.0),
        (f64::NAN, 0.5),
        (0.5, f64::NAN),
        (f64::INFINITY, 0.5),
        (f64::NEG_INFINITY, 0.5),
        (1e300, 1e300),
    ] {
        assert!(!img.add(x, y), "({x}, {y}) is outside");
    }
    assert_eq!(img.counts(), &before[..]);
    // Just inside the far corner.
    assert!(img.add(2.9999999999999996, 1.9999999999999998));
    assert_eq!(img.counts()[h * w - 1], 1);
    assert!(SubpixelImage::new(2, 2, 0).is_err());
    assert!(SubpixelImage::new(2, 2, 33).is_err());
    assert!(SubpixelImage::new(2, 2, 32).is_ok());
}

proptest! {
    /// `add` counts `(x, y)` into `[floor(y * n), floor(x * n)]` when that is inside, else
    /// nowhere.
    #[test]
    fn image_add_is_floor_of_product(rows in 1usize..6, cols in 1usize..6, n in 1u32..=32,
                                     pts in prop::collection::vec((-2.0f64..8.0, -2.0f64..8.0), 1..50)) {
        let mut img = SubpixelImage::new(rows, cols, n).unwrap();
        let (h, w) = img.shape();
        let mut want = vec![0u32; h * w];
        for (x, y) in pts {
            let (r, c) = ((y * n as f64).floor(), (x * n as f64).floor());
            let inside = r >= 0.0 && r < h as f64 && c >= 0.0 && c < w as f64;
            if inside {
                want[r as usize * w + c as usize] += 1;
            }
            prop_assert_eq!(img.add(x, y), inside);
        }
        prop_assert_eq!(img.counts(), &want[..]);
    }
}
