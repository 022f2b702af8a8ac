//! Tests of the pedestal: fill phase, ready state, batches against frame by frame.

use super::Pedestal;
use crate::config::Precision;
use crate::error::Error;
use crate::frames::Frames;

/// `clone_from` (which reuses the arrays) gives what `clone` gives, whatever the target
/// held before: another precision, another fill state, another shape.
#[test]
fn clone_from_equals_clone() {
    let frames = |rows: usize, cols: usize, k: usize| -> Vec<u16> {
        (0..rows * cols * k)
            .map(|i| 1000 + (i * 7919 % 97) as u16)
            .collect()
    };
    let make = |rows, cols, n, precision, k| {
        let mut p = Pedestal::new(rows, cols, n, precision).unwrap();
        let f = frames(rows, cols, k);
        p.push_frames(Frames::new(&f, k, rows, cols).unwrap())
            .unwrap();
        p
    };
    let sources = [
        make(4, 5, 3, Precision::F64, 5),
        make(4, 5, 3, Precision::F32, 5),
        make(4, 5, 3, Precision::F32Naive, 5),
        make(4, 5, 8, Precision::F64, 3),
        make(2, 3, 2, Precision::F64, 2),
    ];
    for source in &sources {
        for target in &sources {
            let mut t = target.clone();
            t.clone_from(source);
            assert_eq!(&t, source);
            // A target that moved on since (pushed into) is reset too.
            let mut moved = source.clone();
            let f = frames(source.rows, source.cols, 1);
            moved.push_frame(&f).unwrap();
            moved.clone_from(source);
            assert_eq!(&moved, source);
        }
    }
}

fn filled(precision: Precision, n: u32, samples: &[u16]) -> Pedestal {
    let mut p = Pedestal::new(1, 1, n, precision).unwrap();
    for &x in samples {
        p.push_frame(&[x]).unwrap();
    }
    p
}

/// Frames pushed as one batch (the fill phase in parallel, by pixel chunks) and one at a
/// time on the calling thread give the same pedestal, bit for bit, in every precision,
/// with windows shorter and longer than the batch and batches that cross into the window.
#[test]
fn batched_parallel_fill_equals_frame_by_frame() {
    let (rows, cols) = (37, 301); // 11137 pixels: chunks of 4096 and a partial one
    let g =
        crate::generate::Generator::new(crate::generate::GenConfig::new(rows, cols, 3)).unwrap();
    let data = g.frames(0, 40, false);
    let all = Frames::new(&data, 40, rows, cols).unwrap();
    for precision in [Precision::F64, Precision::F32, Precision::F32Naive] {
        for n in [1u32, 7, 25, 40, 60] {
            let mut one = Pedestal::new(rows, cols, n, precision).unwrap();
            for i in 0..40 {
                one.push_frames_with(all.range(i, 1), false).unwrap();
            }
            for split in [40, 13, 3] {
                let mut batched = Pedestal::new(rows, cols, n, precision).unwrap();
                let mut at = 0;
                while at < 40 {
                    let k = split.min(40 - at);
                    batched.push_frames(all.range(at, k)).unwrap();
                    at += k;
                }
                assert!(batched == one, "{precision:?} n {n} batches of {split}");
            }
        }
    }
}

#[test]
fn not_ready_until_n_frames() {
    let p = filled(Precision::F64, 3, &[1, 2]);
    assert!(matches!(
        p.mean_map(),
        Err(Error::PedestalNotReady { have: 2, need: 3 })
    ));
    let p = filled(Precision::F64, 3, &[1, 2, 3]);
    assert_eq!(p.mean_map().unwrap()[(0, 0)], 6.0 * (1.0 / 3.0));
}

#[test]
fn f64_fill_and_window_follow_the_formulas() {
    let xs = [4600u16, 4650, 4580, 4610, 4700, 4590];
    let p = filled(Precision::F64, 4, &xs);
    let inv = 1.0 / 4.0;
    let (mut s, mut s2) = (0.0f64, 0.0f64);
    for &x in &xs[..4] {
        s += x as f64;
        s2 += x as f64 * x as f64;
    }
    for &x in &xs[4..] {
        let x = x as f64;
        s += x - s * inv;
        s2 += x * x - s2 * inv;
    }
    let mean = s * inv;
    let var = (-mean).mul_add(mean, s2 * inv).max(0.0);
    assert_eq!(p.mean_map().unwrap()[(0, 0)], mean);
    assert_eq!(p.std_map().unwrap()[(0, 0)], var.sqrt());
}

#[test]
fn b1_mean_and_std_close_to_f64_naive_is_not() {
    // A quiet MOENCH-like pixel: baseline ~4600, noise ~45 ADU.
    let mut x: u32 = 12345;
    let xs: Vec<u16> = (0..3000)
        .map(|_| {
            x = x.wrapping_mul(1664525).wrapping_add(1013904223);
            (4600 + (x >> 16) % 90) as u16 - 45
        })
        .collect();
    let p64 = filled(Precision::F64, 1000, &xs);
    let p32 = filled(Precision::F32, 1000, &xs);
    let pn = filled(Precision::F32Naive, 1000, &xs);
    let s64 = p64.std_map().unwrap()[(0, 0)];
    let s32 = p32.std_map().unwrap()[(0, 0)];
    let sn = pn.std_map().unwrap()[(0, 0)];
    assert!((s32 - s64).abs() / s64 < 1e-4, "B1 std {s32} vs f64 {s64}");
    assert!(
        (sn - s64).abs() / s64 > 1e-2,
        "naive std {sn} should be far from {s64}"
    );
}

#[test]
fn wrong_shape_is_an_error_and_changes_nothing() {
    let mut p = Pedestal::new(2, 2, 2, Precision::F64).unwrap();
    let before = p.clone();
    assert!(matches!(p.push_frame(&[1, 2, 3]), Err(Error::Shape { .. })));
    assert_eq!(p, before);
}
