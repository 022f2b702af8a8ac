//! The CPU reference matcher: rayon over left rows, every right row compared directly.

use rayon::prelude::*;

use super::types::{Descriptor, Match, validate};
use crate::error::Result;

/// Squared L2 distance computed directly in f32, with eight interleaved partial sums (which the
/// compiler vectorises); relative error about 1e-6.
#[inline]
pub fn distance(a: &Descriptor, b: &Descriptor) -> f32 {
    let mut acc = [0.0f32; 8];
    for (ca, cb) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for k in 0..8 {
            let d = ca[k] - cb[k];
            acc[k] += d * d;
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// Nearest right descriptor of one left descriptor (ties: the smaller index). `rhs` must not be
/// empty.
pub fn nearest(a: &Descriptor, rhs: &[Descriptor]) -> Match {
    let mut best = Match {
        index: 0,
        distance: f32::INFINITY,
    };
    for (j, b) in rhs.iter().enumerate() {
        let d = distance(a, b);
        if d < best.distance {
            best = Match {
                index: j as u32,
                distance: d,
            };
        }
    }
    best
}

/// The CPU reference: validates the inputs (see [`super`]) and matches every left row.
pub fn match_cpu(lhs: &[Descriptor], rhs: &[Descriptor]) -> Result<Vec<Match>> {
    validate(lhs, rhs)?;
    Ok(lhs.par_iter().map(|a| nearest(a, rhs)).collect())
}
