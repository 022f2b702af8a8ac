//! Eta interpolation against an independent oracle of aare's C++ (`tests/support/src/oracle/aare.rs`, a
//! transliteration of aare 2025.11.21 that calls nothing of cluda's): etas, bins, maps,
//! photon placement and cube counts bit for bit; plus the files (eta cube `.npz`, photon
//! `.npy`, TIFF) read back byte by byte and the sub-pixel image's counting rules.
//!
//! cluda's documented choices where aare is undefined are tested as such: eta3 and cross eta3
//! of a cluster larger than 3x3 are those of its central 3x3 (aare's `reduce_to_3x3`; aare's
//! own code calls an undefined `reduce_cluster_to_3x3`), and a value outside the first or last
//! edge is flagged (aare reads bin 0 below the first edge and past its tables above the last).
//!
//! One module a topic: [`etas`], [`bins`], [`maps`], [`photons`] (placement and cube counts),
//! [`edges`] (default edges), [`files`] (files and images); the generators they share here.

use cluda::interpolation::{CubeAxes, Edges, EtaKind};
use proptest::prelude::*;
use support::oracle::aare;

mod bins;
mod edges;
mod etas;
mod files;
mod maps;
mod photons;

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
