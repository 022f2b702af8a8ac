//! Tests of the generator: determinism, statistics, illumination, truth.

use super::config::{GenConfig, Illumination};
use super::generator::{Generator, round_to_u16};
use super::reference;

#[test]
fn deterministic_and_frame_independent() {
    let g = Generator::new(GenConfig::new(20, 30, 7)).unwrap();
    let a = g.frames(5, 3, true);
    let b = g.frames(6, 1, true);
    assert_eq!(&a[600..1200], &b[..]);
    assert_eq!(a, g.frames(5, 3, true));
    assert_ne!(a[..600], a[600..1200]);
}

/// The fast frame equals the plain version's sample for sample: frames with and without
/// photons, photons near every edge (small frames, many photons), one-pixel-wide frames,
/// no photons at all, and a frame after a larger one on the same thread (the scratch).
#[test]
fn frames_equal_the_plain_version() {
    let mut configs = vec![
        GenConfig::new(400, 400, 42),
        GenConfig::new(20, 30, 7),
        GenConfig::new(1, 17, 3),
        GenConfig::new(9, 1, 4),
        GenConfig::new(3, 3, 5),
    ];
    let mut dense = GenConfig::new(12, 10, 8);
    dense.photons_per_frame = 400.0;
    configs.push(dense);
    let mut none = GenConfig::new(16, 16, 9);
    none.photons_per_frame = 0.0;
    configs.push(none);
    for c in configs {
        let g = Generator::new(c.clone()).unwrap();
        let n = c.rows * c.cols;
        let (mut fast, mut plain) = (vec![0u16; n], vec![0u16; n]);
        let frames: &[u64] = if n > 10_000 {
            &[0, 1000, 7_777]
        } else {
            &[0, 1, 2, 50, 999, 12_345, u64::MAX]
        };
        for &k in frames {
            for photons in [false, true] {
                g.frame_into(k, photons, &mut fast);
                reference::frame_into(&g, k, photons, &mut plain);
                assert!(fast == plain, "{c:?} frame {k} photons {photons}");
                // The values before rounding too, bit for bit (an operation reordered
                // would rarely change a rounded sample).
                let mut values = Vec::new();
                g.frame_with(k, photons, &mut fast, &mut values, None, &|| Ok(()))
                    .expect("no cancel");
                let want = reference::values(&g, k, photons);
                assert!(
                    values
                        .iter()
                        .map(|v| v.to_bits())
                        .eq(want.iter().map(|v| v.to_bits())),
                    "{c:?} frame {k} photons {photons}: values"
                );
            }
        }
    }
}

/// The truth changes nothing in the frame; a mask keeps exactly the flat field's photons
/// that it lets through (the same draws), and the frames differ only where they are.
#[test]
fn truth_and_masks() {
    let flat = GenConfig::new(40, 60, 11);
    let g = Generator::new(flat.clone()).unwrap();
    let n = flat.rows * flat.cols;
    let (mut plain, mut with) = (vec![0u16; n], vec![0u16; n]);
    for k in [0u64, 7, 1234] {
        g.frame_into(k, true, &mut plain);
        let mut truth = Vec::new();
        g.frame_with_truth(k, true, &mut with, &mut truth);
        assert_eq!(plain, with);
        assert!(truth.len() > 20, "{}", truth.len());
        for p in &truth {
            let p = *p;
            assert_eq!(p.frame, k as i64);
            assert!((0.0..60.0).contains(&p.x) && (0.0..40.0).contains(&p.y));
            // The centre of one of 256 sub-pixel bins.
            let b = (p.x.fract() * 256.0 - 0.5, p.y.fract() * 256.0 - 0.5);
            assert!(b.0 == b.0.round() && b.1 == b.1.round(), "{p:?}");
            assert!((p.energy - 400.0).abs() < 100.0);
        }
        // No photons: no truth.
        let mut none = Vec::new();
        g.frame_with_truth(k, false, &mut with, &mut none);
        assert!(none.is_empty());
        for mask in [Illumination::KNIFE, Illumination::GRID] {
            let gm = Generator::new(GenConfig {
                illumination: mask,
                ..flat.clone()
            })
            .unwrap();
            let mut kept = Vec::new();
            gm.frame_with_truth(k, true, &mut with, &mut kept);
            let want: Vec<_> = truth
                .iter()
                .copied()
                .filter(|p| mask.passes(40, 60, p.x, p.y))
                .collect();
            assert_eq!(kept, want, "{mask:?}");
            assert!(kept.len() < truth.len());
        }
    }
}

#[test]
fn masks_let_through_what_they_say() {
    let knife = Illumination::KNIFE;
    // Through the centre of a 100 x 200 frame (x 100, y 50), 4 degrees from the vertical:
    // at y = 50 - 10 the edge is at x = 100 - 10 tan 4 deg.
    let at = 100.0 - 10.0 * 4f64.to_radians().tan();
    assert!(knife.passes(100, 200, at - 1e-9, 40.0));
    assert!(!knife.passes(100, 200, at + 1e-9, 40.0));
    assert!(Illumination::knife_distance(4.0, 100, 200, at, 40.0).abs() < 1e-12);
    let grid = Illumination::GRID;
    for (x, y, want) in [
        (0.85, 0.85, true),
        (1.0, 1.149, true),
        (1.151, 1.0, false),
        (0.84, 1.0, false),
        (2.9, 5.1, true),
        (2.0, 1.0, false),
    ] {
        assert_eq!(grid.passes(10, 10, x, y), want, "({x}, {y})");
    }
    for bad in [
        Illumination::Knife { degrees: f64::NAN },
        Illumination::Grid {
            pitch: 1.0,
            hole: 2.0,
        },
        Illumination::Grid {
            pitch: 0.0,
            hole: 0.0,
        },
    ] {
        let c = GenConfig {
            illumination: bad,
            ..GenConfig::new(4, 4, 1)
        };
        assert!(Generator::new(c).is_err(), "{bad:?}");
    }
}

/// A narrow cloud puts all of a photon's charge into the pixel its true position is in.
#[test]
fn truth_is_in_the_pixel_that_holds_the_charge() {
    let c = GenConfig {
        cloud_sigma: 1e-4,
        noise: (0.0, 0.0),
        noisy_fraction: 0.0,
        drift_amplitude: 0.0,
        photons_per_frame: 3.0,
        ..GenConfig::new(30, 30, 3)
    };
    let g = Generator::new(c).unwrap();
    let (mut dark, mut lit) = (vec![0u16; 900], vec![0u16; 900]);
    for k in 0..20 {
        g.frame_into(k, false, &mut dark);
        let mut truth = Vec::new();
        g.frame_with_truth(k, true, &mut lit, &mut truth);
        let mut want = vec![0i32; 900];
        for p in &truth {
            let p = *p;
            want[p.y as usize * 30 + p.x as usize] += p.energy.round() as i32;
        }
        for i in 0..900 {
            let got = lit[i] as i32 - dark[i] as i32;
            assert!(
                (got - want[i]).abs() <= 2,
                "frame {k} pixel {i}: {got} vs {}",
                want[i]
            );
        }
    }
}

#[test]
fn dark_frames_are_near_baseline() {
    let g = Generator::new(GenConfig::new(50, 50, 1)).unwrap();
    let f = g.frames(0, 1, false);
    let mean = f.iter().map(|&v| v as f64).sum::<f64>() / f.len() as f64;
    assert!((mean - 4600.0).abs() < 100.0, "mean {mean}");
}

#[test]
fn fast_rounding_equals_round_and_clamp() {
    let mut cases = vec![
        -1e9,
        -0.5,
        -0.49999997,
        -0.0,
        0.0,
        1e-30,
        0.49999997,
        0.5,
        1.5,
        2.5,
        4600.5,
        65534.5,
        65534.496,
        65535.0,
        65535.5,
        65536.0,
        1e9,
    ];
    cases.extend((0..10_000).map(|i| i as f32 * 6.5537 + 0.5));
    // Every half-integer of the range and its two neighbours on each side (the ties and
    // the values that round to them in a wider type), below 0 and above the top too.
    for h in -4..(2 * 65_540) {
        let x = h as f32 / 2.0;
        let (mut lo, mut hi) = (x, x);
        cases.push(x);
        for _ in 0..2 {
            lo = lo.next_down();
            hi = hi.next_up();
            cases.extend([lo, hi]);
        }
    }
    cases.extend([
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
    ]);
    for v in cases {
        let want = v.round().clamp(0.0, u16::MAX as f32) as u16;
        assert_eq!(round_to_u16(v), want, "{v}");
        assert_eq!(reference::round_to_u16(v), want, "{v}");
    }
}

#[test]
fn charge_fractions_sum_to_one() {
    let g = Generator::new(GenConfig::new(4, 4, 1)).unwrap();
    for s in &g.share {
        assert!((s.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}
