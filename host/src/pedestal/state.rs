//! The per-pixel state of a ready pedestal, in the precision the finder computes in.

use cluda_gpu::pedestal::{Ready, mean_offset, push_ready, std_dev};
use cluda_gpu::real::Real;

/// Per-pixel state of a ready pedestal in precision `R`, as structure-of-arrays (the layout
/// the GPU finder uploads as is).
#[derive(Debug, PartialEq)]
pub struct PixelMaps<R> {
    /// Baseline the sums are centred on (0 except for `F32`'s B1 rewrite).
    pub base: Vec<R>,
    /// Window sum of `x - base`.
    pub a: Vec<R>,
    /// Window sum of `(x - base)^2`.
    pub b: Vec<R>,
    /// Standard deviation at the moment the pedestal became ready (for frozen thresholds).
    pub frozen_std: Vec<R>,
    /// `1/N` in precision `R`, computed once.
    pub inv: R,
}

/// By hand for `clone_from`, which copies into the arrays already there (a derived one
/// allocates new ones: fresh pages to fault in).
impl<R: Clone> Clone for PixelMaps<R> {
    fn clone(&self) -> Self {
        Self {
            base: self.base.clone(),
            a: self.a.clone(),
            b: self.b.clone(),
            frozen_std: self.frozen_std.clone(),
            inv: self.inv.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.base.clone_from(&source.base);
        self.a.clone_from(&source.a);
        self.b.clone_from(&source.b);
        self.frozen_std.clone_from(&source.frozen_std);
        self.inv = source.inv.clone();
    }
}

impl<R: Real> PixelMaps<R> {
    pub(super) fn from_ready(states: Vec<Ready<R>>, inv: R) -> Self {
        let frozen_std = states.iter().map(|s| std_dev(s.a, s.b, inv)).collect();
        Self {
            base: states.iter().map(|s| s.base).collect(),
            a: states.iter().map(|s| s.a).collect(),
            b: states.iter().map(|s| s.b).collect(),
            frozen_std,
            inv,
        }
    }

    /// Pushes sample `frame[p]` into pixel `p` for every `p` with `mask[p] != 0` (all pixels
    /// when `mask` is `None`), with rayon when `parallel`, else on the calling thread only.
    pub(crate) fn push_masked(&mut self, frame: &[u16], mask: Option<&[u8]>, parallel: bool) {
        let inv = self.inv;
        let chunk = 4096;
        let (a, b, base) = (&mut self.a, &mut self.b, &self.base);
        let work = |(ci, (a, b)): (usize, (&mut [R], &mut [R]))| {
            let o = ci * chunk;
            for i in 0..a.len() {
                if mask.is_none_or(|m| m[o + i] != 0) {
                    push_ready(&mut a[i], &mut b[i], base[o + i], frame[o + i], inv);
                }
            }
        };
        super::chunks::for_each_chunk_pair(a, b, chunk, parallel, work);
    }

    pub(super) fn mean(&self, p: usize) -> f64 {
        self.base[p].to_f64() + mean_offset(self.a[p], self.inv).to_f64()
    }

    pub(super) fn std(&self, p: usize) -> f64 {
        std_dev(self.a[p], self.b[p], self.inv).to_f64()
    }
}

/// The ready state in the configured precision.
#[derive(Debug, PartialEq)]
pub enum ReadyState {
    /// `F64` state.
    F64(PixelMaps<f64>),
    /// `F32` (B1) or `F32Naive` state.
    F32(PixelMaps<f32>),
}

/// By hand for `clone_from` (see [`PixelMaps`]'s).
impl Clone for ReadyState {
    fn clone(&self) -> Self {
        match self {
            Self::F64(m) => Self::F64(m.clone()),
            Self::F32(m) => Self::F32(m.clone()),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        match (self, source) {
            (Self::F64(to), Self::F64(from)) => to.clone_from(from),
            (Self::F32(to), Self::F32(from)) => to.clone_from(from),
            (to, from) => *to = from.clone(),
        }
    }
}
