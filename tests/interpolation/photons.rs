//! Photons and cube counts: placement and counting of whole scenes against aare's.

use cluda::interpolation::{
    CubeAxes, Edges, EnergyWindow, EtaCube, EtaKind, Interpolator, MapKind, PixelMask, Placer,
};
use cluda::{ClusterRef, ClusterSize, FrameClusters};
use proptest::prelude::*;
use support::oracle::aare;

use crate::*;

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
