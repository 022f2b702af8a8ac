//! Eta interpolation from Python, shaped like aare's: `cluda.Interpolator` (both of aare's
//! constructors, `rosenblatttransform`, `get_ietax`/`get_ietay`, `interpolate*`) and the eta
//! functions (`cluda.eta2`, ...), over the library's [`cluda::interpolation`] and the
//! per-cluster arithmetic of [`cluda_gpu::eta`] (the same functions `cluda image` places
//! photons with, so the results are the command's bit for bit).
//!
//! Clusters arrive as the raw bytes of a 1-D C-contiguous structured numpy array and the
//! layout of its fields ([`Layout`]: the Python package reads it off the dtype and checks the
//! dtypes); rows go back as bytes that the package views as its structured dtypes
//! (`PHOTON_ROW` and `ETA_ROW` bytes a row, little-endian, packed).

use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use cluda::ClusterSize;
use cluda::interpolation::{CubeAxes, Edges, EtaKind, EtaKindArg, Interpolator, MapKind};
use cluda_gpu::eta;

use crate::args::typed_array;
use crate::to_py;

/// Bytes of one photon row: `x`, `y`, `energy` (`<f8`), `flags` (`u1`), packed.
pub const PHOTON_ROW: usize = 25;
/// Bytes of one eta row: `x`, `y` (`<f8`), `c` (`<i4`), `sum` (`<f8`), packed.
pub const ETA_ROW: usize = 28;

/// The three edge arrays `(xbins, ybins, ebins)`.
type EdgeArrays<'py> = (
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyArray1<f64>>,
);

/// Where a structured cluster row keeps its fields: `(itemsize, offset of x, offset of y,
/// offset of data, side)`; `x`, `y` are `<u2`, `data` is `side * side` `<i4`, row-major.
type Layout = (usize, usize, usize, usize, usize);

/// The clusters of one call, checked against their layout.
struct Rows<'a> {
    bytes: &'a [u8],
    itemsize: usize,
    x: usize,
    y: usize,
    data: usize,
    side: usize,
}

impl<'a> Rows<'a> {
    /// Checks that `layout` describes whole rows of `bytes` whose fields lie inside a row.
    fn new(bytes: &'a [u8], layout: Layout) -> PyResult<Self> {
        let (itemsize, x, y, data, side) = layout;
        let size = ClusterSize::from_side(side).map_err(to_py)?;
        let bad = |what: String| PyValueError::new_err(format!("clusters: {what}"));
        let data_end = size
            .cells()
            .checked_mul(4)
            .and_then(|n| n.checked_add(data));
        let inside = |off: usize, len: usize| off.checked_add(len).is_some_and(|e| e <= itemsize);
        if itemsize == 0 || !inside(x, 2) || !inside(y, 2) || data_end.is_none_or(|e| e > itemsize)
        {
            return Err(bad(format!(
                "fields x (offset {x}), y (offset {y}) and data (offset {data}, {} int32) do \
                 not fit in a row of {itemsize} bytes",
                size.cells()
            )));
        }
        if !bytes.len().is_multiple_of(itemsize) {
            return Err(bad(format!(
                "{} bytes are not whole rows of {itemsize} bytes",
                bytes.len()
            )));
        }
        Ok(Self {
            bytes,
            itemsize,
            x,
            y,
            data,
            side,
        })
    }

    /// Clusters in the array.
    fn len(&self) -> usize {
        self.bytes.len() / self.itemsize
    }

    /// Every cluster as `(x, y, values)`, the values copied into `buf` (row-major).
    fn for_each(&self, buf: &mut [i32; 81], mut f: impl FnMut(u16, u16, &[i32])) {
        let cells = self.side * self.side;
        for row in self.bytes.chunks_exact(self.itemsize) {
            let u16_at = |o: usize| u16::from_le_bytes([row[o], row[o + 1]]);
            let values = &row[self.data..self.data + 4 * cells];
            for (v, b) in buf.iter_mut().zip(values.chunks_exact(4)) {
                *v = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            f(u16_at(self.x), u16_at(self.y), &buf[..cells]);
        }
    }
}

/// The clusters of `rows` (a uint8 array of whole rows of `layout`), each written by `row`
/// (given the output, the cluster side, `x`, `y` and the values) as `width` bytes into one
/// vector with the GIL released, as a 1-D uint8 array.
fn rows_to_bytes<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
    layout: Layout,
    width: usize,
    row: impl Fn(&mut Vec<u8>, usize, u16, u16, &[i32]) + Sync,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let bytes = typed_array::<u8>(rows, "clusters", "uint8")?.readonly();
    let rows = Rows::new(bytes.as_slice()?, layout)?;
    let out = py.allow_threads(|| {
        let mut out = Vec::with_capacity(rows.len() * width);
        let mut buf = [0i32; 81];
        rows.for_each(&mut buf, |cx, cy, data| {
            row(&mut out, rows.side, cx, cy, data)
        });
        out
    });
    Ok(PyArray1::from_vec(py, out))
}

/// The eta kind named `kind` (`eta2`, `full-eta2`, `eta3`, `cross-eta3`).
fn kind_of(kind: &str) -> PyResult<EtaKind> {
    kind.parse::<EtaKindArg>().map(|k| k.0).map_err(to_py)
}

/// The edges of one axis from a 1-D float64 array.
fn edges_arg(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Edges> {
    let a = typed_array::<f64>(obj, name, "float64")?;
    if a.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a 1-D array of bin edges, got shape {:?}",
            a.shape()
        )));
    }
    let values: Vec<f64> = a.readonly().as_array().iter().copied().collect();
    Edges::new(name, values).map_err(to_py)
}

/// The counts of a cube for `axes` from a 3-D float64 array of exactly their shape.
fn cube_arg(obj: &Bound<'_, PyAny>, axes: &CubeAxes) -> PyResult<Vec<f64>> {
    let a = typed_array::<f64>(obj, "etacube", "float64")?;
    let want = axes.shape();
    if a.shape() != want {
        return Err(PyValueError::new_err(format!(
            "etacube must have shape (len(xbins) - 1, len(ybins) - 1, len(ebins) - 1) = \
             ({}, {}, {}) (axis 0 eta_x, axis 1 eta_y, axis 2 energy), got {:?}",
            want[0],
            want[1],
            want[2],
            a.shape()
        )));
    }
    // C order whatever the array's layout.
    Ok(a.readonly().as_array().iter().copied().collect())
}

/// aare-like eta interpolation (see the Python class `cluda.Interpolator` for the
/// documentation): the cube's edges and, once built, its maps.
#[pyclass(subclass, module = "cluda._cluda", name = "Interpolator")]
pub struct PyInterpolator {
    /// The edges (the kind in it is not used: each call names its own).
    axes: CubeAxes,
    /// The maps, once built from a cube.
    maps: Option<Interpolator>,
}

impl PyInterpolator {
    /// The maps, or the error of an interpolator that has none yet.
    fn maps(&self, what: &str) -> PyResult<&Interpolator> {
        self.maps.as_ref().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "{what}: this Interpolator has no maps yet; it was made from the edges only \
                 (Interpolator(xbins, ybins, ebins)): call rosenblatttransform(etacube) first, \
                 or make it with Interpolator(etacube, xbins, ybins, ebins)"
            ))
        })
    }

    /// Builds the maps of `etacube` the `kind` way.
    fn build(&mut self, py: Python<'_>, etacube: &Bound<'_, PyAny>, kind: MapKind) -> PyResult<()> {
        let cube = cube_arg(etacube, &self.axes)?;
        let axes = self.axes.clone();
        let maps = py
            .allow_threads(|| Interpolator::new(axes, &cube, kind))
            .map_err(to_py)?;
        self.maps = Some(maps);
        Ok(())
    }

    /// A map as a 3-D float64 array of the cube's shape.
    fn map_array<'py>(&self, py: Python<'py>, values: &[f64]) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyArray1::from_slice(py, values)
            .reshape(self.axes.shape())?
            .into_any())
    }
}

#[pymethods]
impl PyInterpolator {
    /// Checks the edges and, with `etacube`, builds aare's cumulative maps of it.
    #[new]
    #[pyo3(signature = (xbins, ybins, ebins, etacube=None))]
    fn new(
        py: Python<'_>,
        xbins: &Bound<'_, PyAny>,
        ybins: &Bound<'_, PyAny>,
        ebins: &Bound<'_, PyAny>,
        etacube: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let axes = CubeAxes {
            kind: EtaKind::Eta2,
            x: edges_arg(xbins, "xbins")?,
            y: edges_arg(ybins, "ybins")?,
            e: edges_arg(ebins, "ebins")?,
        };
        axes.bins().map_err(to_py)?;
        let mut me = Self { axes, maps: None };
        if let Some(cube) = etacube {
            me.build(py, cube, MapKind::Cumulative)?;
        }
        Ok(me)
    }

    /// Builds aare's Rosenblatt-transform maps of `etacube` (replacing any maps).
    fn rosenblatttransform(&mut self, py: Python<'_>, etacube: &Bound<'_, PyAny>) -> PyResult<()> {
        self.build(py, etacube, MapKind::Rosenblatt)
    }

    /// The x map (3-D float64, the cube's shape).
    fn get_ietax<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let maps = self.maps("get_ietax")?;
        self.map_array(py, maps.ietax())
    }

    /// The y map (3-D float64, the cube's shape).
    fn get_ietay<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let maps = self.maps("get_ietay")?;
        self.map_array(py, maps.ietay())
    }

    /// `"cumulative"`, `"rosenblatt"`, or None before any maps were built.
    #[getter]
    fn maps_kind(&self) -> Option<&'static str> {
        self.maps.as_ref().map(|m| m.map_kind().name())
    }

    /// The edges `(xbins, ybins, ebins)` as float64 arrays.
    #[getter]
    fn bins<'py>(&self, py: Python<'py>) -> EdgeArrays<'py> {
        (
            PyArray1::from_slice(py, self.axes.x.as_slice()),
            PyArray1::from_slice(py, self.axes.y.as_slice()),
            PyArray1::from_slice(py, self.axes.e.as_slice()),
        )
    }

    /// Photon rows (bytes, [`PHOTON_ROW`] each) of the clusters in `rows` (bytes of `layout`)
    /// placed through the maps with the eta `kind` (internal: the package checks the dtypes).
    fn _interpolate<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        rows: &Bound<'py, PyAny>,
        layout: Layout,
    ) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let kind = kind_of(kind)?;
        let maps = self.maps(&format!("interpolate ({})", kind.name()))?;
        let axes = maps.axes();
        let (xb, yb, eb) = (axes.x.as_slice(), axes.y.as_slice(), axes.e.as_slice());
        rows_to_bytes(py, rows, layout, PHOTON_ROW, |out, side, cx, cy, data| {
            let at = eta::locate(kind, data, side, xb, yb, eb);
            let (x, y) = match at.bins {
                Some((ix, iy, ie)) => {
                    let (u, w) = maps.lookup(ix, iy, ie);
                    eta::place(kind, cx, cy, at.corner, u, w)
                }
                None => (cx as f64 + 0.5, cy as f64 + 0.5),
            };
            out.extend_from_slice(&x.to_le_bytes());
            out.extend_from_slice(&y.to_le_bytes());
            out.extend_from_slice(&at.energy.to_le_bytes());
            out.push(at.flags);
        })
    }

    /// The cube's bins and which maps were built.
    fn __repr__(&self) -> String {
        let [x, y, e] = self.axes.shape();
        format!(
            "cluda.Interpolator({x} x {y} x {e} bins, maps={})",
            self.maps_kind().unwrap_or("none yet")
        )
    }
}

/// Eta rows (bytes, [`ETA_ROW`] each: `x`, `y`, corner, sum as f64) of the clusters in `rows`
/// (bytes of `layout`) with the eta `kind` (internal: the package checks the dtypes).
#[pyfunction]
pub fn _etas<'py>(
    py: Python<'py>,
    kind: &str,
    rows: &Bound<'py, PyAny>,
    layout: Layout,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let kind = kind_of(kind)?;
    rows_to_bytes(py, rows, layout, ETA_ROW, |out, side, _, _, data| {
        let e = eta::eta(kind, data, side);
        out.extend_from_slice(&e.x.to_le_bytes());
        out.extend_from_slice(&e.y.to_le_bytes());
        out.extend_from_slice(&(e.corner as i32).to_le_bytes());
        out.extend_from_slice(&(e.sum as f64).to_le_bytes());
    })
}
