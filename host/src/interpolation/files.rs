//! The files of an interpolation: the eta cube (`eta.npz`, exactly the four arrays aare's
//! `Interpolator` takes, plus `eta.json` beside it with what the arrays cannot say), the
//! sub-pixel image (`.npy` `<u4` or 32-bit TIFF) and the photon list (a structured `.npy`).

use std::io::Write;
use std::path::{Path, PathBuf};

use cluda_gpu::eta::EtaKind;

use super::cube::{CubeAxes, EtaCube};
use super::edges::Edges;
use super::image::SubpixelImage;
use super::photon::{PHOTON_DESCR, Photon};
use crate::error::{Error, Result};
use crate::io::atomic::Claim;
use crate::io::{AtomicFile, npy, npz, tiff};

/// The keys of an eta cube archive, in the order written: exactly what
/// `aare.Interpolator(**np.load(path))` accepts (an extra key makes it raise).
pub const CUBE_KEYS: [&str; 4] = ["etacube", "xbins", "ybins", "ebins"];

/// The metadata file beside a cube archive: `eta.npz` -> `eta.json`.
pub fn metadata_path(cube: &Path) -> PathBuf {
    cube.with_extension("json")
}

/// What the metadata file of a cube says.
#[derive(Clone, Debug, PartialEq)]
pub struct CubeMetadata {
    /// The eta kind the cube was filled with.
    pub kind: EtaKind,
    /// The energy unit (`ADU`, or `keV` with a gain map).
    pub unit: String,
    /// The cluster side (3, 5, 7, 9), when known.
    pub cluster: Option<usize>,
}

/// Writes `cube` to `path` (`.npz`) and its metadata beside it ([`metadata_path`]), each
/// final name claimed as `claim` says ([`Claim::Refuse`]: a file that appeared meanwhile is
/// an error, never replaced).
///
/// # Errors
/// [`Error::Io`] when either file cannot be written.
pub fn write_cube(path: &Path, cube: &EtaCube, unit: &str, claim: Claim) -> Result<()> {
    let axes = cube.axes();
    let values = cube.to_f64();
    let shape = axes.shape();
    let edges = |e: &Edges| (vec![e.as_slice().len()], e.as_slice().to_vec());
    let (xs, xv) = edges(&axes.x);
    let (ys, yv) = edges(&axes.y);
    let (es, ev) = edges(&axes.e);
    npz::write_f64(
        path,
        &[
            (CUBE_KEYS[0], &shape, &values),
            (CUBE_KEYS[1], &xs, &xv),
            (CUBE_KEYS[2], &ys, &yv),
            (CUBE_KEYS[3], &es, &ev),
        ],
        claim,
    )?;
    let t = cube.tally();
    let meta = serde_json::json!({
        "format": "cluda eta cube 1",
        "eta": axes.kind.name(),
        "energy_unit": unit,
        "cluster": cube.cluster_size().map(|s| s.side()),
        "axes": ["eta_x", "eta_y", "energy"],
        "bins": "aare last_smaller: bin b holds (edges[b], edges[b+1]], bin 0 also edges[0]",
        "clusters": t.clusters,
        "counted": t.inside,
        "eta_outside": t.eta_outside,
        "energy_outside": t.energy_outside,
        "masked": t.masked,
        "outside_window": t.window,
    });
    let meta_path = metadata_path(path);
    let mut out = AtomicFile::create_claiming(&meta_path, claim)?;
    let text = serde_json::to_string_pretty(&meta)
        .map_err(|e| Error::Internal(format!("metadata: {e}")))?;
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .map_err(|e| Error::io(&meta_path, e))?;
    out.commit().map(|_| ())
}

/// Reads a cube archive: its axes (the eta kind from the metadata file beside it when there
/// is one, else `kind`) and its values, checked against each other.
///
/// # Errors
/// [`Error::Format`] naming the file for a missing or extra key, an array of the wrong
/// dimensionality, edges that are not strictly increasing, or a cube whose shape is not one
/// fewer than the edges on every axis; the metadata's errors (an unknown eta kind).
pub fn read_cube(
    path: &Path,
    kind: Option<EtaKind>,
) -> Result<(CubeAxes, Vec<f64>, Option<CubeMetadata>)> {
    let arrays = npz::read_f64(path)?;
    let get = |key: &str, dims: usize| -> Result<npz::F64Array> {
        let i = arrays.iter().position(|(k, _)| k == key).ok_or_else(|| {
            Error::format(
                path,
                format!(
                    "no `{key}` array (an eta cube archive holds {})",
                    CUBE_KEYS.join(", ")
                ),
            )
        })?;
        let a = arrays[i].1.clone();
        if a.shape.len() != dims {
            return Err(Error::format(
                path,
                format!("`{key}` is {}-D; expected {dims}-D", a.shape.len()),
            ));
        }
        Ok(a)
    };
    let cube = get("etacube", 3)?;
    let edge = |a: npz::F64Array, name: &'static str| {
        Edges::new(name, a.values).map_err(|e| Error::format(path, e.to_string()))
    };
    let x = edge(get("xbins", 1)?, "xbins")?;
    let y = edge(get("ybins", 1)?, "ybins")?;
    let e = edge(get("ebins", 1)?, "ebins")?;
    if let Some((k, _)) = arrays
        .iter()
        .find(|(k, _)| !CUBE_KEYS.contains(&k.as_str()))
    {
        return Err(Error::format(
            path,
            format!(
                "unexpected array `{k}` (an eta cube archive holds exactly {})",
                CUBE_KEYS.join(", ")
            ),
        ));
    }
    let want = [x.bins(), y.bins(), e.bins()];
    if cube.shape != want {
        return Err(Error::format(
            path,
            format!(
                "etacube has shape {:?} but the edges make {want:?} bins (one fewer than each axis's edges)",
                cube.shape
            ),
        ));
    }
    let meta = read_metadata(&metadata_path(path))?;
    let kind = meta
        .as_ref()
        .map(|m| m.kind)
        .or(kind)
        .unwrap_or(EtaKind::Eta2);
    Ok((CubeAxes { kind, x, y, e }, cube.values, meta))
}

/// Reads the metadata file of a cube, if there is one.
fn read_metadata(path: &Path) -> Result<Option<CubeMetadata>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::format(path, format!("not JSON: {e}")))?;
    let name = v
        .get("eta")
        .and_then(|e| e.as_str())
        .ok_or_else(|| Error::format(path, "no \"eta\" key naming the eta kind"))?;
    let kind = EtaKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| Error::format(path, format!("unknown eta kind `{name}`")))?;
    Ok(Some(CubeMetadata {
        kind,
        unit: v
            .get("energy_unit")
            .and_then(|u| u.as_str())
            .unwrap_or("ADU")
            .to_string(),
        cluster: v
            .get("cluster")
            .and_then(|c| c.as_u64())
            .map(|c| c as usize),
    }))
}

/// The image formats `--out` picks by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// `.npy`, `<u4`, shape `(rows * n, cols * n)`.
    Npy,
    /// `.tif`/`.tiff`, uncompressed 32-bit grayscale.
    Tiff,
}

impl ImageFormat {
    /// The format of `path` by its extension.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`out`) for another extension.
    pub fn of(path: &Path) -> Result<Self> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("npy") => Ok(Self::Npy),
            Some("tif") | Some("tiff") => Ok(Self::Tiff),
            _ => Err(Error::param(
                "out",
                format!(
                    "{}: an image is written as .npy or .tif (uncompressed 32-bit)",
                    path.display()
                ),
            )),
        }
    }
}

/// Writes `image` to `path` in the format its extension names, its final name claimed as
/// `claim` says.
///
/// # Errors
/// As [`ImageFormat::of`], [`npy::write_array`] and [`tiff::write_u32`].
pub fn write_image(path: &Path, image: &SubpixelImage, claim: Claim) -> Result<()> {
    let (h, w) = image.shape();
    match ImageFormat::of(path)? {
        ImageFormat::Npy => npy::write_array_claiming(path, &[h, w], image.counts(), claim),
        ImageFormat::Tiff => tiff::write_u32(path, h, w, image.counts(), claim),
    }
}

/// Writes photons to a structured `.npy` a frame at a time (the row count goes into the
/// header at the end: the header leaves room for it), under a temporary name until
/// [`npy::RecordWriter::finish`].
pub type PhotonWriter = npy::RecordWriter<Photon>;

impl npy::Record for Photon {
    const DESCR: &'static str = PHOTON_DESCR;
    fn extend_le(&self, out: &mut Vec<u8>) {
        let p = *self;
        let (frame, x, y, energy) = (p.frame, p.x, p.y, p.energy);
        out.extend_from_slice(&frame.to_le_bytes());
        out.extend_from_slice(&x.to_le_bytes());
        out.extend_from_slice(&y.to_le_bytes());
        out.extend_from_slice(&energy.to_le_bytes());
        out.push(p.flags);
    }
}

/// Reads a bad-pixel mask: a 2-D `.npy` of `bool` (`|b1`) or `uint8` (`|u1`, non-zero: bad),
/// `rows x cols`, C order.
///
/// # Errors
/// [`Error::Format`] naming the file for another element type, dimensionality, order, or a
/// length that does not match the shape; [`Error::Io`] when it cannot be read.
pub fn read_mask(path: &Path) -> Result<super::mask::PixelMask> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let h = npy::read_header_from(&mut std::io::Cursor::new(&bytes), bytes.len() as u64, path)?;
    if !matches!(
        h.descr.as_str(),
        "|b1" | "|u1" | "<u1" | ">u1" | "=u1" | "b1" | "u1"
    ) {
        return Err(Error::format(
            path,
            format!(
                "dtype '{}': a mask is bool or uint8 (True/non-zero: bad pixel)",
                h.descr
            ),
        ));
    }
    if h.fortran_order || h.shape.len() != 2 {
        return Err(Error::format(
            path,
            format!(
                "a mask is a C-order rows x cols array, got shape {}",
                h.shape_text()
            ),
        ));
    }
    let (rows, cols) = (h.shape[0], h.shape[1]);
    let data = &bytes[h.data_offset as usize..];
    if Some(data.len()) != rows.checked_mul(cols) {
        return Err(Error::format(
            path,
            format!(
                "shape {} needs {} bytes of data, the file holds {}",
                h.shape_text(),
                rows.saturating_mul(cols),
                data.len()
            ),
        ));
    }
    super::mask::PixelMask::new(rows, cols, data.iter().map(|&b| b != 0).collect())
}
