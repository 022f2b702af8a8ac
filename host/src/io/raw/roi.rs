//! The receiver's region of interest (`rx_roi`): the rectangle of the detector's pixels that
//! slsReceiver writes to its raw files when one is set.
//!
//! Facts (aare `src/RawMasterFile.cpp` `RawMasterFile::parse_json`, `include/aare/defs.hpp`
//! `struct ROI`, `include/aare/DetectorGeometry.hpp` `update_geometry_with_roi`, and the
//! masters of `src/RawMasterFile.test.cpp`; slsReceiver's `MasterAttributes.cpp`):
//! - master format < 8 names it in the object `"Receiver Roi": {"xmin", "xmax", "ymin",
//!   "ymax"}`, all four 4294967295 (the receiver's -1 written unsigned) when no ROI is set;
//! - format >= 8 names it in the array `"Receiver Rois": [{"xmin", "xmax", "ymin", "ymax"},
//!   ...]`; with no ROI set the receiver writes one ROI covering the whole detector;
//! - x is the column, y the row; both ends are inclusive (`rx_roi 0 199 0 399` is columns
//!   0..=199 of rows 0..=399: frames of 400 rows x 200 columns); `ymin` and `ymax` both -1
//!   mark a one-dimensional detector (one row);
//! - the data files hold only the ROI's pixels, row by row, after each 112-byte header,
//!   while "Pixels" and "Image Size" still describe the whole detector.
//!
//! cluda reads one ROI (aare's `RawFile::read_frame` likewise refuses several); an ROI that
//! covers the whole detector is no ROI.

use std::path::Path;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The receiver's "no ROI" value of format < 8: -1 written as an unsigned 32-bit number.
const UNSET_U32: i64 = u32::MAX as i64;

/// A receiver region of interest in detector pixels, both ends inclusive, as `rx_roi` sets
/// it and master files record it: x is the column, y the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Roi {
    /// First column.
    pub xmin: usize,
    /// Last column (inclusive).
    pub xmax: usize,
    /// First row.
    pub ymin: usize,
    /// Last row (inclusive).
    pub ymax: usize,
}

impl Roi {
    /// Rows of the ROI (the rows of each frame in the data files); 1 for an ROI whose ends
    /// are out of order (which [`Roi::fits`] refuses).
    pub fn rows(&self) -> usize {
        self.ymax.saturating_sub(self.ymin).saturating_add(1)
    }

    /// Columns of the ROI (the columns of each frame in the data files); 1 for an ROI whose
    /// ends are out of order (which [`Roi::fits`] refuses).
    pub fn cols(&self) -> usize {
        self.xmax.saturating_sub(self.xmin).saturating_add(1)
    }

    /// Whether the ROI lies inside a detector of `rows` x `cols` pixels, its ends in order.
    pub fn fits(&self, rows: usize, cols: usize) -> bool {
        self.xmin <= self.xmax && self.ymin <= self.ymax && self.xmax < cols && self.ymax < rows
    }

    /// Copies the ROI's pixels out of a whole frame of `cols` columns (image order) into
    /// `out` (`rows() * cols()` samples): what the receiver writes for that frame.
    ///
    /// # Errors
    /// [`Error::Shape`] when `frame` is not a whole number of `cols`-wide rows holding the
    /// ROI, or `out` is not the ROI's size.
    pub fn crop(&self, frame: &[u16], cols: usize, out: &mut [u16]) -> Result<()> {
        let rows = frame.len().checked_div(cols).unwrap_or(0);
        if cols == 0 || frame.len() != rows * cols || !self.fits(rows, cols) {
            return Err(Error::shape(
                "frame to crop to the ROI",
                format!("rows of {cols} columns holding {self}"),
                format!("{} samples", frame.len()),
            ));
        }
        if out.len() != self.rows() * self.cols() {
            return Err(Error::shape(
                "ROI frame",
                format!(
                    "{} samples ({} x {})",
                    self.rows() * self.cols(),
                    self.rows(),
                    self.cols()
                ),
                format!("{} samples", out.len()),
            ));
        }
        for (r, dst) in out.chunks_exact_mut(self.cols()).enumerate() {
            let at = (self.ymin + r) * cols + self.xmin;
            dst.copy_from_slice(&frame[at..at + self.cols()]);
        }
        Ok(())
    }
}

impl std::fmt::Display for Roi {
    /// `[xmin, xmax, ymin, ymax]`, the order of `rx_roi` and of the receiver's own output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}, {}, {}, {}]",
            self.xmin, self.xmax, self.ymin, self.ymax
        )
    }
}

/// The master key that holds the ROI for format `version`.
pub fn roi_key(version: f64) -> &'static str {
    if version < 8.0 {
        "Receiver Roi"
    } else {
        "Receiver Rois"
    }
}

/// Reads the receiver ROI of master object `j` (file `path`, format `version`, detector of
/// `rows` x `cols` pixels): `None` when no ROI was set or it covers the whole detector.
/// Reads the key of the format (`"Receiver Roi"` below 8, `"Receiver Rois"` from 8) or, when
/// only the other one is present, that one.
///
/// # Errors
/// [`Error::Format`] naming the file and key for a malformed ROI, one outside the detector,
/// or several ROIs.
pub fn parse_roi(
    j: &Map<String, Value>,
    path: &Path,
    version: f64,
    rows: usize,
    cols: usize,
) -> Result<Option<Roi>> {
    let own = roi_key(version);
    let other = if own == "Receiver Roi" {
        "Receiver Rois"
    } else {
        "Receiver Roi"
    };
    let (key, value) = match (j.get(own), j.get(other)) {
        (Some(v), _) => (own, v),
        (None, Some(v)) => (other, v),
        (None, None) => return Ok(None),
    };
    let err = |reason: String| Error::format(path, format!("key \"{key}\": {reason}"));
    let roi = match value {
        Value::Null => return Ok(None),
        Value::Object(o) => one_roi(o, rows).map_err(err)?,
        Value::Array(items) => match items.as_slice() {
            [] => None,
            [Value::Object(o)] => one_roi(o, rows).map_err(err)?,
            [_] => {
                return Err(err(
                    "the ROI must be an object {xmin, xmax, ymin, ymax}".into()
                ));
            }
            many => {
                let shown: Vec<String> = many
                    .iter()
                    .take(4)
                    .map(|v| match v {
                        Value::Object(o) => match one_roi(o, rows) {
                            Ok(Some(r)) => r.to_string(),
                            _ => v.to_string(),
                        },
                        _ => v.to_string(),
                    })
                    .collect();
                return Err(err(format!(
                    "{} receiver ROIs ({}{}); cluda reads acquisitions with one ROI only \
                     (set one `rx_roi`, or none, for the acquisitions cluda reads)",
                    many.len(),
                    shown.join(", "),
                    if many.len() > 4 { ", ..." } else { "" }
                )));
            }
        },
        v => {
            return Err(err(format!(
                "must be an object or an array of objects {{xmin, xmax, ymin, ymax}}, got {v}"
            )));
        }
    };
    let Some(roi) = roi else { return Ok(None) };
    if !roi.fits(rows, cols) {
        return Err(err(format!(
            "ROI {roi} (xmin, xmax, ymin, ymax; inclusive) does not lie inside the detector's \
             \"Pixels\" {cols} x {rows} (x: columns 0..={}, y: rows 0..={}) with min <= max",
            cols.saturating_sub(1),
            rows.saturating_sub(1)
        )));
    }
    if (roi.rows(), roi.cols()) == (rows, cols) {
        return Ok(None);
    }
    Ok(Some(roi))
}

/// One ROI object: `None` when all four bounds are unset (-1, or 4294967295 as format < 8
/// writes it); `ymin` and `ymax` both -1 (a one-dimensional detector) is row 0 when the
/// detector has one row. The error is the reason, without the key.
fn one_roi(o: &Map<String, Value>, rows: usize) -> std::result::Result<Option<Roi>, String> {
    let mut v = [0i64; 4];
    for (slot, name) in v.iter_mut().zip(["xmin", "xmax", "ymin", "ymax"]) {
        *slot = match o.get(name) {
            Some(Value::Number(n)) => n
                .as_i64()
                .ok_or_else(|| format!("\"{name}\" must be an integer, got {n}"))?,
            Some(other) => return Err(format!("\"{name}\" must be an integer, got {other}")),
            None => return Err(format!("missing \"{name}\"")),
        };
    }
    let unset = |x: i64| x == -1 || x == UNSET_U32;
    if v.iter().all(|&x| unset(x)) {
        return Ok(None);
    }
    if unset(v[2]) && unset(v[3]) {
        if rows != 1 {
            return Err(format!(
                "ymin and ymax unset (a one-dimensional detector's ROI) but \"Pixels\" has \
                 {rows} rows"
            ));
        }
        v[2] = 0;
        v[3] = 0;
    }
    let mut out = [0usize; 4];
    for ((slot, x), name) in out.iter_mut().zip(v).zip(["xmin", "xmax", "ymin", "ymax"]) {
        *slot = usize::try_from(x).map_err(|_| {
            format!(
                "\"{name}\" is {x}: an ROI bound must be a pixel index (only all four unset \
                 means no ROI)"
            )
        })?;
    }
    Ok(Some(Roi {
        xmin: out[0],
        xmax: out[1],
        ymin: out[2],
        ymax: out[3],
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(version: f64, v: Value) -> Result<Option<Roi>> {
        let j = v.as_object().cloned().unwrap_or_default();
        parse_roi(&j, Path::new("m_master_0.json"), version, 400, 400)
    }

    #[test]
    fn conventions_follow_the_receiver() {
        let r = parse(
            8.0,
            json!({"Receiver Rois": [{"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399}]}),
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.rows(), r.cols()), (400, 200));
        assert_eq!(r.to_string(), "[0, 199, 0, 399]");
        let r = parse(
            7.2,
            json!({"Receiver Roi": {"xmin": 10, "xmax": 19, "ymin": 100, "ymax": 104}}),
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.rows(), r.cols()), (5, 10));
    }

    #[test]
    fn unset_empty_or_whole_detector_is_no_roi() {
        let u = u32::MAX;
        for (version, v) in [
            (7.2, json!({})),
            (
                7.2,
                json!({"Receiver Roi": {"xmin": u, "xmax": u, "ymin": u, "ymax": u}}),
            ),
            (
                8.0,
                json!({"Receiver Rois": [{"xmin": -1, "xmax": -1, "ymin": -1, "ymax": -1}]}),
            ),
            (8.0, json!({"Receiver Rois": []})),
            (
                8.0,
                json!({"Receiver Rois": [{"xmin": 0, "xmax": 399, "ymin": 0, "ymax": 399}]}),
            ),
        ] {
            assert_eq!(parse(version, v.clone()).unwrap(), None, "{v}");
        }
    }

    #[test]
    fn bad_rois_name_the_key() {
        let two = json!({"Receiver Rois": [
            {"xmin": 0, "xmax": 99, "ymin": 0, "ymax": 399},
            {"xmin": 200, "xmax": 299, "ymin": 0, "ymax": 399}]});
        let e = parse(8.0, two).unwrap_err().to_string();
        assert!(e.contains("m_master_0.json"), "{e}");
        assert!(
            e.contains(
                "key \"Receiver Rois\": 2 receiver ROIs ([0, 99, 0, 399], [200, 299, 0, 399])"
            ),
            "{e}"
        );
        for (v, want) in [
            (
                json!({"Receiver Rois": [{"xmin": 0, "xmax": 400, "ymin": 0, "ymax": 399}]}),
                "does not lie inside",
            ),
            (
                json!({"Receiver Rois": [{"xmin": 5, "xmax": 4, "ymin": 0, "ymax": 399}]}),
                "does not lie inside",
            ),
            (
                json!({"Receiver Rois": [{"xmin": 0, "xmax": 4, "ymin": -1, "ymax": -1}]}),
                "one-dimensional",
            ),
            (
                json!({"Receiver Rois": [{"xmin": -2, "xmax": 4, "ymin": 0, "ymax": 3}]}),
                "\"xmin\" is -2",
            ),
            (
                json!({"Receiver Rois": [{"xmin": 0, "xmax": 4, "ymin": 0}]}),
                "missing \"ymax\"",
            ),
            (
                json!({"Receiver Rois": "[0, 4, 0, 3]"}),
                "must be an object",
            ),
        ] {
            let e = parse(8.0, v.clone()).unwrap_err().to_string();
            assert!(
                e.contains("key \"Receiver Rois\"") && e.contains(want),
                "{v}: {e}"
            );
        }
    }

    #[test]
    fn crop_takes_the_rectangle() {
        let frame: Vec<u16> = (0..24).collect(); // 4 rows x 6 columns
        let roi = Roi {
            xmin: 1,
            xmax: 3,
            ymin: 2,
            ymax: 3,
        };
        let mut out = vec![0u16; 6];
        roi.crop(&frame, 6, &mut out).unwrap();
        assert_eq!(out, [13, 14, 15, 19, 20, 21]);
        assert!(roi.crop(&frame[..12], 6, &mut out).is_err());
        assert!(roi.crop(&frame, 6, &mut out[..5]).is_err());
    }
}
