//! Random finder scenarios and their comparison with the [`oracle`](crate::oracle) (tests
//! cpu_vs_oracle and pedestal).

use cluda::{ClusterBatch, ClusterSize, FinderConfig, Precision, ThresholdMode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::oracle::{Arith, OCluster, Oracle, Params};

/// How the dark level varies from frame to frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noise {
    /// Every pixel independently, uniform in `baseline +- amplitude`.
    Independent,
    /// One offset per frame shared by every pixel: all pixels get identical pedestals, so
    /// equal deposits give exactly equal corrected values (ties).
    Common,
    /// No noise: std 0, so thresholds are 0.
    None,
}

/// One randomly drawn test scenario; frames are derived from it deterministically.
#[derive(Clone, Debug)]
pub struct Case {
    pub rows: usize,
    pub cols: usize,
    pub size: ClusterSize,
    pub n_sigma: f64,
    pub n: u32,
    pub frozen: bool,
    pub baseline: u16,
    pub amplitude: u16,
    pub noise: Noise,
    pub data_frames: usize,
    /// Deposits per data frame.
    pub deposits: usize,
    pub seed: u64,
}

impl Case {
    pub fn config(&self, precision: Precision) -> FinderConfig {
        FinderConfig::new(self.rows, self.cols)
            .size(self.size)
            .n_sigma(self.n_sigma)
            .pedestal_frames(self.n)
            .threshold(if self.frozen {
                ThresholdMode::Frozen
            } else {
                ThresholdMode::Live
            })
            .precision(precision)
    }

    pub fn params(&self) -> Params {
        Params {
            rows: self.rows,
            cols: self.cols,
            side: self.size.side(),
            n_sigma: self.n_sigma,
            n: self.n,
            frozen: self.frozen,
        }
    }

    fn dark(&self, rng: &mut SmallRng, out: &mut [u16]) {
        let (b, a) = (self.baseline as i32, self.amplitude as i32);
        let common = rng.random_range(-a..=a);
        for v in out.iter_mut() {
            let x = match self.noise {
                Noise::Independent => b + rng.random_range(-a..=a),
                Noise::Common => b + common,
                Noise::None => b,
            };
            *v = x.clamp(0, u16::MAX as i32) as u16;
        }
    }

    /// N dark frames, then `data_frames` frames with deposits.
    pub fn frames(&self) -> (Vec<u16>, Vec<u16>) {
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let px = self.rows * self.cols;
        let mut ped = vec![0u16; px * self.n as usize];
        for f in ped.chunks_mut(px) {
            self.dark(&mut rng, f);
        }
        let mut data = vec![0u16; px * self.data_frames];
        for f in data.chunks_mut(px) {
            self.dark(&mut rng, f);
            for _ in 0..self.deposits {
                self.deposit(&mut rng, f);
            }
        }
        (ped, data)
    }

    fn deposit(&self, rng: &mut SmallRng, f: &mut [u16]) {
        let (rows, cols) = (self.rows, self.cols);
        let (x, y) = (rng.random_range(0..cols), rng.random_range(0..rows));
        let i = y * cols + x;
        let add = |v: u16, d: i32| (v as i32 + d).clamp(0, u16::MAX as i32) as u16;
        match rng.random_range(0..6u8) {
            // A photon, all its charge in one pixel; sometimes saturating.
            0 => {
                let e = if rng.random_bool(0.1) {
                    65535
                } else {
                    rng.random_range(1..=3000)
                };
                f[i] = add(f[i], e);
            }
            // A dip, so that c < -t happens.
            1 => f[i] = add(f[i], -rng.random_range(1..=3000)),
            // Two or three pixels set to exactly the same value: ties of the maximum.
            2 => {
                let v = add(self.baseline, rng.random_range(1..=2000));
                f[i] = v;
                if x + 1 < cols {
                    f[i + 1] = v;
                }
                if rng.random_bool(0.5) && y + 1 < rows {
                    f[i + cols] = v;
                }
            }
            // Something within a few noise amplitudes (near-threshold decisions).
            3 => {
                let a = 3 * self.amplitude as i32 + 1;
                f[i] = add(f[i], rng.random_range(-a..=a));
            }
            // A charge cloud over the 3x3 neighbourhood (the total rule).
            _ => {
                let e = rng.random_range(1..=800);
                for dy in -1i32..=1 {
                    for dx in -1i32..=1 {
                        let (xx, yy) = (x as i32 + dx, y as i32 + dy);
                        if xx >= 0 && yy >= 0 && (xx as usize) < cols && (yy as usize) < rows {
                            let j = yy as usize * cols + xx as usize;
                            let w = if dx == 0 && dy == 0 { 2 } else { 1 };
                            f[j] = add(f[j], e * w / 3);
                        }
                    }
                }
            }
        }
    }
}

/// The oracle arithmetic modelling a precision.
pub fn arith(p: Precision) -> Arith {
    match p {
        Precision::F64 => Arith::F64,
        Precision::F32 => Arith::B1,
        Precision::F32Naive => Arith::Naive,
    }
}

/// Runs the oracle: pedestal frames, then every data frame.
pub fn oracle_run(
    case: &Case,
    arith: Arith,
    ped: &[u16],
    data: &[u16],
) -> (Oracle, Vec<Vec<OCluster>>) {
    let px = case.rows * case.cols;
    let mut o = Oracle::new(case.params(), arith);
    for f in ped.chunks(px) {
        o.push_frame(f);
    }
    let out = data.chunks(px).map(|f| o.find_frame(f)).collect();
    (o, out)
}

/// A finder's batch as oracle clusters.
pub fn batch_clusters(b: &ClusterBatch) -> Vec<Vec<OCluster>> {
    b.iter_frames()
        .map(|fc| {
            fc.iter()
                .map(|c| OCluster {
                    x: c.x,
                    y: c.y,
                    data: c.data.to_vec(),
                })
                .collect()
        })
        .collect()
}

/// `Ok` when both sides found exactly the same clusters; otherwise a readable diff of the
/// first frame that differs.
pub fn compare(finder: &[Vec<OCluster>], oracle: &[Vec<OCluster>]) -> Result<(), String> {
    if finder.len() != oracle.len() {
        return Err(format!(
            "finder returned {} frames, oracle {}",
            finder.len(),
            oracle.len()
        ));
    }
    for (k, (f, o)) in finder.iter().zip(oracle).enumerate() {
        if f == o {
            continue;
        }
        let mut msg = format!(
            "frame {k}: finder {} clusters, oracle {}\n",
            f.len(),
            o.len()
        );
        let key = |c: &OCluster| (c.y, c.x);
        for c in f {
            match o.iter().find(|d| key(d) == key(c)) {
                None => msg += &format!("  only in finder: ({}, {}) {:?}\n", c.x, c.y, c.data),
                Some(d) if d.data != c.data => {
                    msg += &format!(
                        "  data differ at ({}, {}):\n    finder {:?}\n    oracle {:?}\n",
                        c.x, c.y, c.data, d.data
                    )
                }
                _ => {}
            }
        }
        for c in o {
            if !f.iter().any(|d| key(d) == key(c)) {
                msg += &format!("  only in oracle: ({}, {}) {:?}\n", c.x, c.y, c.data);
            }
        }
        let (kf, ko): (Vec<_>, Vec<_>) = (f.iter().map(key).collect(), o.iter().map(key).collect());
        let (mut sf, mut so) = (kf.clone(), ko.clone());
        sf.sort();
        so.sort();
        if kf != ko && sf == so {
            msg += "  same centres in a different order\n";
        }
        return Err(msg);
    }
    Ok(())
}
