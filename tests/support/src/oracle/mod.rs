//! An independent oracle for cluster finding, written from docs/semantics.md ("Cluster finding: the
//! exact semantics") alone.
//!
//! It shares no code with the crate's finder or pedestal: no `cluda_gpu` function is called,
//! the arithmetic is plain `std` floating point, one pixel at a time, in the most direct form
//! the specification allows. It is deliberately slow and simple; its only job is to be
//! obviously right so that the finder can be compared with it exactly.
//!
//! Three pedestal arithmetics are modelled:
//! - [`Arith::F64`]: aare's FastPedestal in `f64` (docs/semantics.md, operation for operation);
//! - [`Arith::B1`]: the `f32` centred rewrite: exact integer sums of the first N samples, a
//!   frozen baseline `X0 = round(sum * inv)` (`inv` in `f64`), centred sums formed exactly and
//!   rounded once to `f32`, then `f32` window updates of `y = x - X0`;
//! - [`Arith::Naive`]: raw `f32` sums (the scheme docs/semantics.md says cancels catastrophically).
//!
//! [`aare`] is the oracle of aare's eta interpolation (tests/interpolation/).

pub mod aare;

use std::ops::{Add, Mul, Neg, Sub};

/// The pedestal arithmetic the oracle models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// Everything in `f64`.
    F64,
    /// `f32` with the centred rewrite B1.
    B1,
    /// `f32` raw sums.
    Naive,
}

/// The parameters of a run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub rows: usize,
    pub cols: usize,
    /// Window side X = Y (3, 5, 7 or 9).
    pub side: usize,
    pub n_sigma: f64,
    /// Pedestal window N.
    pub n: u32,
    /// Frozen (true) or live (false) threshold.
    pub frozen: bool,
}

/// One cluster: centre and window values, row-major from the top-left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OCluster {
    pub x: u16,
    pub y: u16,
    pub data: Vec<i32>,
}

/// How often each rule of docs/semantics.md's step 3 decided a pixel (to check that generated data
/// exercises every rule).
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleStats {
    /// `c(p) < -t(p)`.
    pub negative: usize,
    /// Centres by `max > t`.
    pub centre_by_max: usize,
    /// Centres by `total > sqrt(X*Y) * t` (with `max <= t`).
    pub centre_by_total: usize,
    /// Pixels with `max > t` (or the total rule) that are not the maximum: nothing.
    pub not_max: usize,
    /// Centres whose maximum is shared by another pixel of the window (the `c(p) == max` rule
    /// with a tie: both pixels become centres).
    pub tied_centres: usize,
    /// Pedestal (quiet) pixels.
    pub pedestal: usize,
    /// Pixels whose window reaches outside the frame and that became centres.
    pub edge_centres: usize,
}

/// The scalar type a pedestal computes in (implemented for `f64` and `f32` only).
pub trait Flt:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    fn of_f64(v: f64) -> Self;
    fn of_u16(v: u16) -> Self;
    fn fused(a: Self, b: Self, c: Self) -> Self;
    fn root(self) -> Self;
    /// Rounds half away from zero to i32.
    fn round_i32(self) -> i32;
    fn wide(self) -> f64;
}

/// [`Flt`] for a float type: plain casts, `mul_add`, `sqrt` and `round`.
macro_rules! flt {
    ($($t:ty),*) => {$(
        impl Flt for $t {
            const ZERO: Self = 0.0;
            fn of_f64(v: f64) -> Self {
                v as $t
            }
            fn of_u16(v: u16) -> Self {
                v as $t
            }
            fn fused(a: Self, b: Self, c: Self) -> Self {
                a.mul_add(b, c)
            }
            fn root(self) -> Self {
                self.sqrt()
            }
            fn round_i32(self) -> i32 {
                self.round() as i32
            }
            fn wide(self) -> f64 {
                self as f64
            }
        }
    )*};
}

flt!(f64, f32);

/// One pixel's pedestal in the `f64` arithmetic (aare's FastPedestal).
#[derive(Clone, Debug, Default)]
struct Px64 {
    sum: f64,
    sum2: f64,
    count: u32,
    frozen_std: f64,
}

/// One pixel's pedestal in `f32` (B1 or naive).
#[derive(Clone, Debug, Default)]
struct Px32 {
    /// Fill phase, B1: exact integer sums.
    isum: u64,
    isum2: u64,
    /// Fill phase, naive: `f32` sums. Ready (both): window sums of `x - base`.
    a: f32,
    b: f32,
    /// B1: the frozen baseline X0; naive: 0.
    base: f32,
    count: u32,
    frozen_std: f32,
}

/// The pedestal of every pixel.
#[derive(Clone, Debug)]
enum Peds {
    F64(Vec<Px64>),
    F32 { naive: bool, px: Vec<Px32> },
}

/// The oracle: per-pixel pedestals plus the finding rules.
#[derive(Clone, Debug)]
pub struct Oracle {
    pub p: Params,
    n_inv64: f64,
    n_inv32: f32,
    peds: Peds,
    pub stats: RuleStats,
}

impl Oracle {
    pub fn new(p: Params, arith: Arith) -> Self {
        let n = p.rows * p.cols;
        let peds = match arith {
            Arith::F64 => Peds::F64(vec![Px64::default(); n]),
            Arith::B1 => Peds::F32 {
                naive: false,
                px: vec![Px32::default(); n],
            },
            Arith::Naive => Peds::F32 {
                naive: true,
                px: vec![Px32::default(); n],
            },
        };
        Oracle {
            p,
            n_inv64: 1.0 / p.n as f64,
            n_inv32: 1.0f32 / p.n as f32,
            peds,
            stats: RuleStats::default(),
        }
    }

    /// Whether every pixel holds N samples.
    pub fn ready(&self) -> bool {
        let n = self.p.n;
        match &self.peds {
            Peds::F64(px) => px.iter().all(|q| q.count == n),
            Peds::F32 { px, .. } => px.iter().all(|q| q.count == n),
        }
    }

    /// Pushes sample `x` into pixel `i`.
    fn push(&mut self, i: usize, x: u16) {
        let n = self.p.n;
        let (inv64, inv32) = (self.n_inv64, self.n_inv32);
        match &mut self.peds {
            Peds::F64(px) => {
                let q = &mut px[i];
                let x = x as f64;
                if q.count < n {
                    q.sum += x;
                    q.sum2 += x * x;
                    q.count += 1;
                    if q.count == n {
                        q.frozen_std = std64(q.sum, q.sum2, inv64);
                    }
                } else {
                    q.sum += x - q.sum * inv64;
                    q.sum2 += x * x - q.sum2 * inv64;
                }
            }
            Peds::F32 { naive, px } => {
                let q = &mut px[i];
                if q.count < n {
                    if *naive {
                        let v = x as f32;
                        q.a += v;
                        q.b += v * v;
                    } else {
                        q.isum += x as u64;
                        q.isum2 += x as u64 * x as u64;
                    }
                    q.count += 1;
                    if q.count == n {
                        if !*naive {
                            // X0 = round(mean) half away from zero, mean = sum * inv (f64).
                            let x0 = (q.isum as f64 * inv64).round() as i64;
                            let (s, s2, nn) = (q.isum as i64, q.isum2 as i64, n as i64);
                            // sum(x - X0) and sum((x - X0)^2), exactly, in integers.
                            let sy = s - nn * x0;
                            let sy2 = s2 - 2 * x0 * s + nn * x0 * x0;
                            q.base = x0 as f32;
                            q.a = sy as f32;
                            q.b = sy2 as f32;
                        }
                        q.frozen_std = std32(q.a, q.b, inv32);
                    }
                } else {
                    let y = x as f32 - q.base;
                    q.a += y - q.a * inv32;
                    q.b += y * y - q.b * inv32;
                }
            }
        }
    }

    /// Pushes every pixel of a dark frame.
    pub fn push_frame(&mut self, frame: &[u16]) {
        assert_eq!(frame.len(), self.p.rows * self.p.cols);
        for (i, &x) in frame.iter().enumerate() {
            self.push(i, x);
        }
    }

    /// Mean of pixel `i` (in f64; for f32 arithmetics `base + m` widened).
    pub fn mean(&self, i: usize) -> f64 {
        match &self.peds {
            Peds::F64(px) => px[i].sum * self.n_inv64,
            Peds::F32 { px, .. } => px[i].base as f64 + (px[i].a * self.n_inv32) as f64,
        }
    }

    /// Live std of pixel `i`.
    pub fn std(&self, i: usize) -> f64 {
        match &self.peds {
            Peds::F64(px) => std64(px[i].sum, px[i].sum2, self.n_inv64),
            Peds::F32 { px, .. } => std32(px[i].a, px[i].b, self.n_inv32) as f64,
        }
    }

    /// Std frozen when pixel `i` became ready.
    pub fn frozen_std(&self, i: usize) -> f64 {
        match &self.peds {
            Peds::F64(px) => px[i].frozen_std,
            Peds::F32 { px, .. } => px[i].frozen_std as f64,
        }
    }

    /// The corrected value `c` pixel `i` would get for sample `x` now (f32 values widened
    /// exactly).
    pub fn corrected(&self, i: usize, x: u16) -> f64 {
        match &self.peds {
            Peds::F64(px) => x as f64 - px[i].sum * self.n_inv64,
            Peds::F32 { px, .. } => ((x as f32 - px[i].base) - px[i].a * self.n_inv32) as f64,
        }
    }

    /// B1/naive state of pixel `i`: (base, a, b); F64: (0, sum, sum2) widened.
    pub fn state(&self, i: usize) -> (f64, f64, f64) {
        match &self.peds {
            Peds::F64(px) => (0.0, px[i].sum, px[i].sum2),
            Peds::F32 { px, .. } => (px[i].base as f64, px[i].a as f64, px[i].b as f64),
        }
    }

    /// Finds the clusters of one data frame and applies its pedestal updates afterwards.
    pub fn find_frame(&mut self, frame: &[u16]) -> Vec<OCluster> {
        assert!(self.ready(), "oracle: pedestal not ready");
        assert_eq!(frame.len(), self.p.rows * self.p.cols);
        let frozen = self.p.frozen;
        let (out, quiet, stats) = match &self.peds {
            Peds::F64(px) => {
                let inv = self.n_inv64;
                let corrected = |i: usize, x: u16| x as f64 - px[i].sum * inv;
                let std = |i: usize| match frozen {
                    true => px[i].frozen_std,
                    false => std64(px[i].sum, px[i].sum2, inv),
                };
                classify_with(&self.p, frame, corrected, std, self.p.n_sigma)
            }
            Peds::F32 { px, .. } => {
                let inv = self.n_inv32;
                // The crate's form: c = (x - X0) - m.
                let corrected = |i: usize, x: u16| (x as f32 - px[i].base) - px[i].a * inv;
                let std = |i: usize| match frozen {
                    true => px[i].frozen_std,
                    false => std32(px[i].a, px[i].b, inv),
                };
                classify_with(&self.p, frame, corrected, std, self.p.n_sigma as f32)
            }
        };
        self.stats += &stats;
        // Frame-synchronous: every quiet pixel's raw value goes in after the whole frame.
        for i in quiet {
            self.push(i, frame[i]);
        }
        out
    }
}

/// [`classify_frame`] of `frame` with pixel `i`'s corrected value `corrected(i, x)` for its
/// sample `x` and its threshold `n_sigma * std(i)`, in one precision.
fn classify_with<T: Flt>(
    p: &Params,
    frame: &[u16],
    corrected: impl Fn(usize, u16) -> T,
    std: impl Fn(usize) -> T,
    n_sigma: T,
) -> (Vec<OCluster>, Vec<usize>, RuleStats) {
    let c: Vec<T> = (0..frame.len()).map(|i| corrected(i, frame[i])).collect();
    let t: Vec<T> = (0..frame.len()).map(|i| n_sigma * std(i)).collect();
    classify_frame(p, &c, &t)
}

fn std64(sum: f64, sum2: f64, inv: f64) -> f64 {
    let mean = sum * inv;
    let var = (-mean).mul_add(mean, sum2 * inv);
    let var = if var > 0.0 { var } else { 0.0 };
    var.sqrt()
}

fn std32(sum: f32, sum2: f32, inv: f32) -> f32 {
    let m = sum * inv;
    let var = (-m).mul_add(m, sum2 * inv);
    let var = if var > 0.0 { var } else { 0.0 };
    var.sqrt()
}

impl std::ops::AddAssign<&RuleStats> for RuleStats {
    /// Adds another run's counts rule by rule.
    fn add_assign(&mut self, o: &RuleStats) {
        self.negative += o.negative;
        self.centre_by_max += o.centre_by_max;
        self.centre_by_total += o.centre_by_total;
        self.not_max += o.not_max;
        self.tied_centres += o.tied_centres;
        self.pedestal += o.pedestal;
        self.edge_centres += o.edge_centres;
    }
}

/// docs/semantics.md sections 2-4 for one frame, given every pixel's `c` and `t`: the clusters in
/// row-major order of their centres, the quiet pixels, and rule counts.
fn classify_frame<T: Flt>(p: &Params, c: &[T], t: &[T]) -> (Vec<OCluster>, Vec<usize>, RuleStats) {
    let (rows, cols, side) = (p.rows as isize, p.cols as isize, p.side as isize);
    let h = side / 2;
    let sqrt_xy = T::of_f64((p.side * p.side) as f64).root();
    let mut out = Vec::new();
    let mut quiet = Vec::new();
    let mut st = RuleStats::default();
    for y in 0..rows {
        for x in 0..cols {
            let i = (y * cols + x) as usize;
            let (cp, tp) = (c[i], t[i]);
            if cp < -tp {
                st.negative += 1;
                continue;
            }
            // Window sums in row-major order from the top-left, skipping outside pixels.
            let mut total = T::ZERO;
            let mut max: Option<T> = None;
            let mut clipped = false;
            for dy in -h..=h {
                for dx in -h..=h {
                    let (xx, yy) = (x + dx, y + dy);
                    if xx < 0 || yy < 0 || xx >= cols || yy >= rows {
                        clipped = true;
                        continue;
                    }
                    let v = c[(yy * cols + xx) as usize];
                    total = total + v;
                    max = Some(match max {
                        Some(m) if m >= v => m,
                        _ => v,
                    });
                }
            }
            let max = max.expect("p is in its own window");
            let by_max = max > tp;
            let by_total = total > sqrt_xy * tp;
            if by_max || by_total {
                if cp == max {
                    if by_max {
                        st.centre_by_max += 1;
                    } else {
                        st.centre_by_total += 1;
                    }
                    if clipped {
                        st.edge_centres += 1;
                    }
                    let mut data = Vec::with_capacity(p.side * p.side);
                    let mut ties = 0;
                    for dy in -h..=h {
                        for dx in -h..=h {
                            let (xx, yy) = (x + dx, y + dy);
                            if xx < 0 || yy < 0 || xx >= cols || yy >= rows {
                                data.push(0);
                            } else {
                                let v = c[(yy * cols + xx) as usize];
                                if v == max {
                                    ties += 1;
                                }
                                data.push(v.round_i32());
                            }
                        }
                    }
                    if ties > 1 {
                        st.tied_centres += 1;
                    }
                    out.push(OCluster {
                        x: x as u16,
                        y: y as u16,
                        data,
                    });
                } else {
                    st.not_max += 1;
                }
            } else {
                st.pedestal += 1;
                quiet.push(i);
            }
        }
    }
    (out, quiet, st)
}
