//! The generator's first, plain implementation of a frame, kept as the oracle that the fast
//! [`super::Generator::frame_into`] must equal sample for sample (tests only).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Poisson, StandardNormal};

use super::Generator;
use super::generator::{BINS, splitmix};

/// Frame `k` of `g` into `out`, as the generator made it before it was optimised.
pub(super) fn frame_into(g: &Generator, k: u64, photons: bool, out: &mut [u16]) {
    for (o, &v) in out.iter_mut().zip(&values(g, k, photons)) {
        *o = round_to_u16(v);
    }
}

/// The `f32` values of frame `k` before rounding, as the plain version computed them.
pub(super) fn values(g: &Generator, k: u64, photons: bool) -> Vec<f32> {
    let c = &g.config;
    let mut rng = SmallRng::seed_from_u64(splitmix(c.seed ^ splitmix(k.wrapping_add(1))));
    let drift = c.drift_amplitude * (k as f64 * std::f64::consts::TAU / c.drift_period).sin();
    let mut value: Vec<f32> = g.base.iter().map(|&b| b + drift as f32).collect();
    for (v, &s) in value.iter_mut().zip(&g.sigma) {
        let z: f32 = rng.sample(StandardNormal);
        *v += s * z;
    }
    if photons && c.photons_per_frame > 0.0 {
        let count = Poisson::new(c.photons_per_frame)
            .map(|p| p.sample(&mut rng) as usize)
            .unwrap_or(0);
        for _ in 0..count {
            let u = rng.random::<f64>() * c.cols as f64;
            let w = rng.random::<f64>() * c.rows as f64;
            let energy = c.photon_adu as f32 * (1.0 + 0.03 * rng.sample::<f32, _>(StandardNormal));
            let (px, py) = (u as usize, w as usize);
            let sx = &g.share[((u - px as f64) * BINS as f64) as usize % BINS];
            let sy = &g.share[((w - py as f64) * BINS as f64) as usize % BINS];
            for (dy, fy) in sy.iter().enumerate() {
                let yy = py as isize + dy as isize - 1;
                if yy < 0 || yy >= c.rows as isize {
                    continue;
                }
                for (dx, fx) in sx.iter().enumerate() {
                    let xx = px as isize + dx as isize - 1;
                    if xx < 0 || xx >= c.cols as isize {
                        continue;
                    }
                    value[yy as usize * c.cols + xx as usize] += energy * fx * fy;
                }
            }
        }
    }
    value
}

/// The plain version's rounding: `v.round().clamp(0, 65535) as u16` through `f64` (for the
/// clamped, non-negative value, `v + 0.5` is exact in `f64` whenever `v >= 2^-28`, and below
/// that both forms give 0, so truncating it rounds half away from zero).
pub(super) fn round_to_u16(v: f32) -> u16 {
    (v.clamp(0.0, u16::MAX as f32) as f64 + 0.5) as u16
}
