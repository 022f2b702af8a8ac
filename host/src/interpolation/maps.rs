//! The maps from eta to a uniform sub-pixel position, built from an eta cube as aare's
//! `Interpolator` builds them (`src/Interpolator.cpp`), operation for operation, so that a
//! photon is placed at the bits aare would place it.

use super::cube::CubeAxes;
use crate::error::{Error, Result};
use crate::named::named_choices;

/// How the maps are built from the cube.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapKind {
    /// aare's default constructor: per (eta_y bin, energy bin) the cumulative sum along
    /// eta_x, less the first bin, over (last - first) (a zero norm leaves it); likewise along
    /// eta_y per (eta_x bin, energy bin).
    #[default]
    Cumulative,
    /// aare's `rosenblatttransform`: the marginal CDF of eta_x per energy bin (its first
    /// bin's mass left out, as aare does) and the conditional CDF of eta_y given eta_x.
    Rosenblatt,
}

named_choices!(MapKind, "maps", Cumulative => "cumulative", Rosenblatt => "rosenblatt");

/// The lookup tables of an interpolation: for each bin `(ix, iy, ie)` of the cube, the
/// uniform position `(ietax, ietay)` in `[0, 1]` a photon of that bin is placed at.
#[derive(Clone, Debug, PartialEq)]
pub struct Interpolator {
    axes: CubeAxes,
    map: MapKind,
    ietax: Vec<f64>,
    ietay: Vec<f64>,
}

impl Interpolator {
    /// The maps of `cube` (C order, shape [`CubeAxes::shape`]) built the `map` way.
    ///
    /// # Errors
    /// [`Error::Shape`] when `cube` does not hold the axes' bins; [`Error::InvalidParameter`]
    /// (`etacube`) for a NaN or infinite count.
    pub fn new(axes: CubeAxes, cube: &[f64], map: MapKind) -> Result<Self> {
        let n = axes.bins()?;
        if cube.len() != n {
            let [x, y, e] = axes.shape();
            return Err(Error::shape(
                "etacube against xbins, ybins, ebins",
                format!("{x} x {y} x {e} = {n} bins (one fewer than the edges per axis)"),
                format!("{} bins", cube.len()),
            ));
        }
        if let Some(i) = cube.iter().position(|v| !v.is_finite()) {
            return Err(Error::param(
                "etacube",
                format!("bin {i} holds {}, not a finite count", cube[i]),
            ));
        }
        let (ietax, ietay) = match map {
            MapKind::Cumulative => cumulative(&axes, cube),
            MapKind::Rosenblatt => rosenblatt(&axes, cube),
        };
        Ok(Self {
            axes,
            map,
            ietax,
            ietay,
        })
    }

    /// The axes.
    pub fn axes(&self) -> &CubeAxes {
        &self.axes
    }

    /// How the maps were built.
    pub fn map_kind(&self) -> MapKind {
        self.map
    }

    /// The x map, C order (aare's `get_ietax`).
    pub fn ietax(&self) -> &[f64] {
        &self.ietax
    }

    /// The y map, C order (aare's `get_ietay`).
    pub fn ietay(&self) -> &[f64] {
        &self.ietay
    }

    /// The map values of bin `(ix, iy, ie)`.
    pub fn lookup(&self, ix: usize, iy: usize, ie: usize) -> (f64, f64) {
        let [_, ny, ne] = self.axes.shape();
        let i = cluda_gpu::eta::cube_index(ix, iy, ie, ny, ne);
        (self.ietax[i], self.ietay[i])
    }
}

/// aare's default constructor's maps.
fn cumulative(axes: &CubeAxes, cube: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let [nx, ny, ne] = axes.shape();
    let at = |i: usize, j: usize, k: usize| (i * ny + j) * ne + k;
    let mut cx = cube.to_vec();
    let mut cy = cube.to_vec();
    // Prefix sums (aare adds 0 to the first bin).
    for i in 0..nx {
        for j in 0..ny {
            for k in 0..ne {
                let px = if i == 0 { 0.0 } else { cx[at(i - 1, j, k)] };
                cx[at(i, j, k)] += px;
                let py = if j == 0 { 0.0 } else { cy[at(i, j - 1, k)] };
                cy[at(i, j, k)] += py;
            }
        }
    }
    // Standardised: less the first bin, over (last - first) unless that is 0. aare does this
    // in place; its norms read the last bin before it is changed, as here.
    let mut ix = cx.clone();
    let mut iy = cy.clone();
    for i in 0..nx {
        for j in 0..ny {
            for k in 0..ne {
                let shift_x = cube[at(0, j, k)];
                let val_x = cx[at(nx - 1, j, k)] - shift_x;
                let norm_x = if val_x == 0.0 { 1.0 } else { val_x };
                ix[at(i, j, k)] = (cx[at(i, j, k)] - shift_x) / norm_x;
                let shift_y = cube[at(i, 0, k)];
                let val_y = cy[at(i, ny - 1, k)] - shift_y;
                let norm_y = if val_y == 0.0 { 1.0 } else { val_y };
                iy[at(i, j, k)] = (cy[at(i, j, k)] - shift_y) / norm_y;
            }
        }
    }
    (ix, iy)
}

/// aare's `rosenblatttransform`'s maps.
fn rosenblatt(axes: &CubeAxes, cube: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let [nx, ny, ne] = axes.shape();
    let at = |i: usize, j: usize, k: usize| (i * ny + j) * ne + k;
    // Marginal of eta_x per energy bin, summed along y in order; the conditional CDF of
    // eta_y as prefix sums along y.
    let mut marg = vec![0.0f64; nx * ne];
    let mut cond = cube.to_vec();
    for i in 0..nx {
        for j in 0..ny {
            for k in 0..ne {
                marg[i * ne + k] += cube[at(i, j, k)];
                let p = if j == 0 { 0.0 } else { cond[at(i, j - 1, k)] };
                cond[at(i, j, k)] += p;
            }
        }
    }
    // Cumulative along x, the first bin set to 0 (only when there is a second bin, as in
    // aare's loop).
    for i in 1..nx {
        for k in 0..ne {
            marg[k] = 0.0;
            marg[i * ne + k] += marg[(i - 1) * ne + k];
        }
    }
    // Normalised by the last bin (unless 0), from the second bin on.
    let last: Vec<f64> = (0..ne).map(|k| marg[(nx - 1) * ne + k]).collect();
    for i in 1..nx {
        for k in 0..ne {
            let norm = if last[k] == 0.0 { 1.0 } else { last[k] };
            marg[i * ne + k] /= norm;
        }
    }
    let mut iy = cond.clone();
    for i in 0..nx {
        for j in 0..ny {
            for k in 0..ne {
                let shift = cube[at(i, 0, k)];
                let v = cond[at(i, ny - 1, k)] - shift;
                let norm = if v == 0.0 { 1.0 } else { v };
                iy[at(i, j, k)] = (cond[at(i, j, k)] - shift) / norm;
            }
        }
    }
    let mut ix = vec![0.0; nx * ny * ne];
    for i in 0..nx {
        for j in 0..ny {
            for k in 0..ne {
                ix[at(i, j, k)] = marg[i * ne + k];
            }
        }
    }
    (ix, iy)
}
