//! The maps users look at: the mean (dark level) and the noise of every pixel.

use ndarray::Array2;

use super::Pedestal;
use super::state::ReadyState;
use crate::error::Result;

impl Pedestal {
    /// The mean (dark level) of every pixel, in ADU. Errors before the pedestal is ready.
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`](crate::error::Error::PedestalNotReady) until the pedestal holds its `n` frames.
    pub fn mean_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.mean(p)),
            ReadyState::F32(m) => Box::new(move |p| m.mean(p)),
        })
    }

    /// The standard deviation (noise) of every pixel's current window, in ADU.
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`](crate::error::Error::PedestalNotReady) until the pedestal holds its `n` frames.
    pub fn std_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.std(p)),
            ReadyState::F32(m) => Box::new(move |p| m.std(p)),
        })
    }

    /// The standard deviation frozen when the pedestal became ready (frozen thresholds use it).
    ///
    /// # Errors
    /// [`Error::PedestalNotReady`](crate::error::Error::PedestalNotReady) until the pedestal holds its `n` frames.
    pub fn frozen_std_map(&self) -> Result<Array2<f64>> {
        self.map(|m| match m {
            ReadyState::F64(m) => Box::new(move |p| m.frozen_std[p]),
            ReadyState::F32(m) => Box::new(move |p| m.frozen_std[p] as f64),
        })
    }

    fn map<'s>(
        &'s self,
        f: impl FnOnce(&'s ReadyState) -> Box<dyn Fn(usize) -> f64 + 's>,
    ) -> Result<Array2<f64>> {
        let get = f(self.ready()?);
        Ok(Array2::from_shape_fn((self.rows, self.cols), |(r, c)| {
            get(r * self.cols + c)
        }))
    }
}
