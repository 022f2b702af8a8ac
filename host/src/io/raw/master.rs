//! The JSON master file of an slsDetector acquisition (`<base>_master_<N>.json`).
//!
//! Facts (aare 2026.9.30 `src/RawMasterFile.cpp` `RawMasterFile::parse_json` and
//! `RawFileNameComponents`, `src/RawMasterFile.test.cpp`, `src/RawFile.cpp`):
//! - keys: "Version" (a number, e.g. 7.2), "Detector Type" (e.g. "Moench"), "Geometry"
//!   {"x","y"} (modules), "Pixels" {"x","y"} (per module), "Image Size in bytes" (version < 8)
//!   or "Image Size" (version >= 8), "Max Frames Per File", "Total Frames" (frames the
//!   acquisition was asked for), "Frames in File" (frames written), "Frame Padding" (0/1),
//!   "Frame Discard Policy" ("nodiscard" | "discard" | "discardpartial"), optional
//!   "Dynamic Range" (bits per pixel, 16 when absent), optional "Analog Samples";
//! - a "Moench" master with 400 pixel rows is MOENCH 03: without "Analog Samples" (receiver
//!   software >= 8) its data is in image order, with "Analog Samples" 5000 (older, CTB-style
//!   readout, aare's `Moench03_old`) it is in ADC order and needs the pixel map;
//! - data files are `<base>_d<module>_f<file>_<N>.raw` beside the master, `<file>` counting
//!   0, 1, ... as files fill up to "Max Frames Per File" frames;
//! - aare refuses to read when "Frame Padding" is 0 unless the policy is "discardpartial"
//!   (partial frames would then be shorter than a full frame).
//!
//! Expected packets per frame are not in the master file; for MOENCH 03 in image order the
//! slsDetector receiver sends 6400 data bytes per packet (50 packets per 400x400 frame, from
//! slsDetectorPackage's receiver `GeneralData`), which [`RawMaster::expected_packets`] uses.
//!
//! A receiver ROI ("Receiver Roi" / "Receiver Rois", see [`super::roi`]) makes the data files
//! hold only the ROI's pixels while "Pixels" and "Image Size" still describe the whole
//! detector: [`RawMaster::rows`] and [`RawMaster::cols`] are the frames' shape in the data
//! files (the ROI's), [`RawMaster::detector_rows`] and [`RawMaster::detector_cols`] the
//! detector's. The detector still sends whole frames (the receiver crops them), so the
//! packets expected per frame are those of the whole detector.
//!
//! Several ports (slsDetectorPackage `slsReceiverSoftware/src/Implementation.cpp`,
//! `GetPortGeometry`, `setDetectorSize`, `setModulePositionId`, `StartMasterWriter`; aare
//! `src/DetectorGeometry.cpp`, `src/RawFile.cpp`): a MOENCH read out through `numinterfaces 2`
//! writes one set of data files per UDP port, `_d0_` and `_d1_`, each record holding that
//! port's part of the frame (400 x 200); the master says "Geometry" {"x": 1, "y": 2} (the
//! receiver's ports, stacked), "Pixels" and "Image Size" of one port, "Number of UDP
//! Interfaces" 2. Port `i` carries rows `200 i .. 200 (i + 1)` (its headers say `row` `i`,
//! `column` 0), and each port's packets are counted on their own (25 per part). In general
//! port `d` sits at row `d % y`, column `d / y` of the "Geometry" grid (aare's module order);
//! [`RawMaster::rows`] and [`RawMaster::cols`] are the whole frame's, [`RawMaster::port`]
//! gives the master as one port's files see it. A receiver ROI is read for single-port data
//! only.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::roi::{Roi, parse_roi, roi_key};
use crate::error::{Error, Result};

/// Largest number of rows or columns cluda accepts (cluster coordinates are u16).
pub const MAX_SIDE: u64 = 65_536;

/// Largest number of ports ("Geometry" x or y) cluda accepts: far more than any detector has,
/// small enough that a corrupt master cannot make the reader open millions of files.
pub const MAX_PORTS: u64 = 64;

/// What to do with frames whose packets did not all arrive, as the receiver was told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameDiscardPolicy {
    /// Partial frames are written (padded when "Frame Padding" is 1).
    NoDiscard,
    /// Frames that lost packets are dropped (they show up as missing frame numbers).
    Discard,
    /// Partial frames are dropped.
    DiscardPartial,
}

impl FrameDiscardPolicy {
    /// The name used in master files.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoDiscard => "nodiscard",
            Self::Discard => "discard",
            Self::DiscardPartial => "discardpartial",
        }
    }
}

/// The detector types cluda distinguishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DetectorType {
    /// MOENCH 03 written by receiver software >= 8: frames already in image order.
    Moench03,
    /// MOENCH 03 with "Analog Samples" 5000 (CTB-style readout): frames in ADC order, reordered
    /// with [`PixelMap::moench03`](super::PixelMap::moench03).
    Moench03Old,
    /// cluda's own tag ("Detector Type" `Generic16`) for plain 16-bit frames in image order of
    /// any shape: what `cluda gen --raw` writes for shapes no MOENCH has. No detector writes it.
    Generic16,
    /// Any other detector type: parsed, but refused by the reader, since cluda does not know
    /// its sample format (e.g. Jungfrau's gain bits).
    Other(String),
}

impl DetectorType {
    /// The value of "Detector Type" in a master file.
    pub fn master_name(&self) -> &str {
        match self {
            Self::Moench03 | Self::Moench03Old => "Moench",
            Self::Generic16 => "Generic16",
            Self::Other(s) => s,
        }
    }
}

/// A parsed master file: what cluda needs to read the data files.
#[derive(Clone, Debug, PartialEq)]
pub struct RawMaster {
    /// The master file.
    pub path: PathBuf,
    /// `<base>` of `<base>_master_<N>.json`.
    pub base_name: String,
    /// `<N>` of `<base>_master_<N>.json` (the acquisition index).
    pub file_index: u64,
    /// "Version" of the master file format.
    pub version: f64,
    /// Detector type (with aare's MOENCH 03 rules applied).
    pub detector_type: DetectorType,
    /// Columns per frame as read: the receiver ROI's, else "Pixels" x times the ports of
    /// "Geometry" x.
    pub cols: usize,
    /// Rows per frame as read: the receiver ROI's, else "Pixels" y times the ports of
    /// "Geometry" y (a MOENCH read out through two interfaces: 2 x 200).
    pub rows: usize,
    /// Columns of the whole detector ("Pixels" x times "Geometry" x).
    pub detector_cols: usize,
    /// Rows of the whole detector ("Pixels" y times "Geometry" y).
    pub detector_rows: usize,
    /// Ports side by side ("Geometry" x): each frame is split over `ports_x * ports_y` data
    /// file sets, one per port (UDP interface or module), `_d0_`, `_d1_`, ...
    pub ports_x: usize,
    /// Ports stacked ("Geometry" y).
    pub ports_y: usize,
    /// Rows of one port's part of a frame in its data files ("Pixels" y, or the ROI's).
    pub port_rows: usize,
    /// Columns of one port's part ("Pixels" x, or the ROI's).
    pub port_cols: usize,
    /// The first `d<M>` index of this master's data files: 0 for a master file as parsed,
    /// the port's for a master of one port ([`RawMaster::port`]).
    pub module: usize,
    /// The receiver ROI the data files hold, when one was set that is not the whole detector
    /// (see [`super::roi`]).
    pub roi: Option<Roi>,
    /// "Image Size" / "Image Size in bytes" as the master file says: the whole detector's
    /// frame (or, if a receiver wrote it so, the ROI's); records are sized from
    /// [`RawMaster::rows`] and [`RawMaster::cols`] (see [`RawMaster::frame_bytes`]).
    pub image_size: u64,
    /// Bits per pixel ("Dynamic Range", 16 when absent).
    pub dynamic_range: u64,
    /// Most frames per data file ("Max Frames Per File"; 0: unlimited).
    pub max_frames_per_file: u64,
    /// Frames the acquisition was asked for ("Total Frames").
    pub total_frames: u64,
    /// Frames the receiver wrote ("Frames in File"), when present.
    pub frames_in_file: Option<u64>,
    /// Whether partial frames were padded ("Frame Padding").
    pub frame_padding: bool,
    /// "Frame Discard Policy".
    pub frame_discard_policy: FrameDiscardPolicy,
    /// "Analog Samples", when present.
    pub analog_samples: Option<u64>,
}

impl RawMaster {
    /// Reads and parses the master file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        crate::io::checks::check_regular(path)?;
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        // A master file is a few kB; refuse to read anything absurd into memory.
        if meta.len() > 16 << 20 {
            return Err(Error::format(
                path,
                format!(
                    "{} bytes is far too large for a master file (at most 16 MiB)",
                    meta.len()
                ),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::parse(path, &bytes)
    }

    /// Parses master-file `bytes`; `path` names the file (its name gives the base name and
    /// acquisition index, its directory the data files' directory).
    pub fn parse(path: impl AsRef<Path>, bytes: &[u8]) -> Result<Self> {
        let path = path.as_ref();
        let fmt = |reason: String| Error::format(path, reason);
        let (base_name, file_index) = parse_name(path)?;
        let text = std::str::from_utf8(bytes).map_err(|e| {
            fmt(format!(
                "master file is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ))
        })?;
        let root: Value = serde_json::from_str(text)
            .map_err(|e| fmt(format!("master file is not valid JSON: {e}")))?;
        let j = root
            .as_object()
            .ok_or_else(|| fmt("master file is not a JSON object".into()))?;
        let keys = Keys { j, path };

        let version = keys.number("Version")?;
        let type_name = keys.string("Detector Type")?;
        let (gx, gy) = keys.xy("Geometry", MAX_PORTS)?;
        let (px, py) = keys.xy("Pixels", MAX_SIDE)?;
        if px * gx > MAX_SIDE || py * gy > MAX_SIDE {
            return Err(fmt(format!(
                "keys \"Geometry\" {gx} x {gy} and \"Pixels\" {px} x {py}: the whole frame \
                 ({} x {} pixels) is larger than {MAX_SIDE} a side",
                px * gx,
                py * gy
            )));
        }
        let ports = (gx * gy) as usize;
        let size_key = if version < 8.0 {
            "Image Size in bytes"
        } else {
            "Image Size"
        };
        let image_size = match (j.get("Image Size in bytes"), j.get("Image Size")) {
            (None, None) => return Err(fmt(format!("missing key \"{size_key}\""))),
            (Some(_), _) if version < 8.0 => keys.uint("Image Size in bytes")?,
            (_, Some(_)) => keys.uint("Image Size")?,
            (Some(_), None) => keys.uint("Image Size in bytes")?,
        };
        let max_frames_per_file = keys.uint("Max Frames Per File")?;
        let total_frames = keys.uint("Total Frames")?;
        let frames_in_file = keys.opt_uint("Frames in File")?;
        let padding = keys.uint("Frame Padding")?;
        if padding > 1 {
            return Err(fmt(format!(
                "key \"Frame Padding\": must be 0 or 1, got {padding}"
            )));
        }
        let policy = match keys.string("Frame Discard Policy")? {
            "nodiscard" => FrameDiscardPolicy::NoDiscard,
            "discard" => FrameDiscardPolicy::Discard,
            "discardpartial" => FrameDiscardPolicy::DiscardPartial,
            other => {
                return Err(fmt(format!(
                    "key \"Frame Discard Policy\": `{other}` is not one of nodiscard, discard, \
                     discardpartial"
                )));
            }
        };
        let dynamic_range = match j.get("Dynamic Range") {
            Some(Value::Number(_)) => keys.uint("Dynamic Range")?,
            _ => 16,
        };
        let analog_samples = keys.opt_uint("Analog Samples")?;

        if dynamic_range != 16 {
            return Err(fmt(format!(
                "key \"Dynamic Range\": {dynamic_range}-bit pixels; cluda reads 16-bit frames only"
            )));
        }
        // The ROI is in the whole detector's coordinates (all ports together).
        let roi = parse_roi(j, path, version, (py * gy) as usize, (px * gx) as usize)?;
        if let (true, Some(r)) = (ports > 1, roi) {
            return Err(fmt(format!(
                "key \"{}\": receiver ROI {r} with \"Geometry\" {gx} x {gy} ports: cluda \
                 reads a receiver ROI of single-port data (\"Geometry\" 1 x 1) only",
                roi_key(version)
            )));
        }
        let want = px * py * 2;
        let roi_bytes = roi.map(|r| (r.rows() * r.cols() * 2) as u64);
        if image_size != want && Some(image_size) != roi_bytes {
            return Err(fmt(format!(
                "key \"{size_key}\": {image_size} bytes disagrees with \"Pixels\" {px} x {py} at \
                 16 bits ({want} bytes){}",
                roi.map(|r| format!(
                    " and with the receiver ROI {r} ({} x {} pixels, {} bytes)",
                    r.rows(),
                    r.cols(),
                    r.rows() * r.cols() * 2
                ))
                .unwrap_or_default()
            )));
        }
        if padding == 0 && policy != FrameDiscardPolicy::DiscardPartial {
            return Err(fmt(format!(
                "\"Frame Padding\" 0 with \"Frame Discard Policy\" {}: partial frames would be \
                 shorter than full ones; only padded data or discardpartial can be read",
                policy.name()
            )));
        }
        // A MOENCH module read out through N UDP interfaces writes N ports of 400 / N rows
        // each ("Pixels" is one port's, "Geometry" counts ports; slsReceiver's
        // `MoenchData::UpdateImageSize` and `Implementation::setDetectorSize`).
        let detector_type = if type_name == "Moench" {
            let interfaces = match keys.opt_uint("Number of UDP Interfaces")? {
                Some(n) => n,
                None if py == 200 && gy % 2 == 0 => 2,
                None => 1,
            };
            let module_rows = py.saturating_mul(interfaces);
            match (module_rows, px, analog_samples) {
                (400, _, None) if matches!(interfaces, 1 | 2) && gy % interfaces == 0 => {
                    DetectorType::Moench03
                }
                (400, 400, Some(5000)) if ports == 1 => DetectorType::Moench03Old,
                _ => {
                    return Err(fmt(format!(
                        "\"Detector Type\" Moench with \"Pixels\" {px} x {py}, \"Geometry\" \
                         {gx} x {gy}, \"Number of UDP Interfaces\" {interfaces} and \"Analog \
                         Samples\" {analog_samples:?}: not MOENCH 03 (modules of 400 rows read \
                         out through 1 or 2 interfaces, no analog samples; or one 400 x 400 \
                         port with 5000); cluda does not know this pixel order"
                    )));
                }
            }
        } else if type_name == "Generic16" {
            DetectorType::Generic16
        } else {
            DetectorType::Other(type_name.to_string())
        };
        if let (DetectorType::Moench03Old, Some(r)) = (&detector_type, roi) {
            return Err(fmt(format!(
                "key \"{}\": receiver ROI {r} on ADC-ordered MOENCH 03 data (\"Analog \
                 Samples\" 5000): the pixels of such a frame are not in image order, so a \
                 rectangle of them is not a region of the image; cluda cannot read it",
                roi_key(version)
            )));
        }
        let (port_rows, port_cols) =
            roi.map_or((py as usize, px as usize), |r| (r.rows(), r.cols()));
        let (rows, cols) = (port_rows * gy as usize, port_cols * gx as usize);
        Ok(Self {
            path: path.to_path_buf(),
            base_name,
            file_index,
            version,
            detector_type,
            cols,
            rows,
            detector_cols: px as usize * gx as usize,
            detector_rows: py as usize * gy as usize,
            ports_x: gx as usize,
            ports_y: gy as usize,
            port_rows,
            port_cols,
            module: 0,
            roi,
            image_size,
            dynamic_range,
            max_frames_per_file,
            total_frames,
            frames_in_file,
            frame_padding: padding == 1,
            frame_discard_policy: policy,
            analog_samples,
        })
    }

    /// Path of data file `file` of this master's first port (`<M>` = [`RawMaster::module`],
    /// 0 for a master file as parsed): `<dir>/<base>_d<M>_f<file>_<N>.raw`.
    pub fn data_path(&self, file: u64) -> PathBuf {
        self.port_data_path(self.module, file)
    }

    /// Path of data file `file` of port (module index) `port`:
    /// `<dir>/<base>_d<port>_f<file>_<N>.raw`, as slsReceiver names the files of each of its
    /// UDP ports (`Implementation::SetupWriter`: module position x interfaces + interface).
    pub fn port_data_path(&self, port: usize, file: u64) -> PathBuf {
        let dir = self.path.parent().unwrap_or(Path::new(""));
        dir.join(super::naming::data_file_name(
            &self.base_name,
            port,
            file,
            self.file_index,
        ))
    }

    /// Ports (data file sets `_d0_`, `_d1_`, ...) each frame is split over: "Geometry" x
    /// times y; 1 for single-port data.
    pub fn ports(&self) -> usize {
        self.ports_x * self.ports_y
    }

    /// Where port `port`'s part goes in the whole frame: its first row and first column.
    /// Ports fill the "Geometry" grid column by column, rows first, as aare's
    /// `DetectorGeometry` places module files and slsReceiver numbers its ports (a MOENCH
    /// read out through two interfaces: port 0 rows 0..200, port 1 rows 200..400). `None`
    /// for a port the geometry does not have.
    pub fn port_origin(&self, port: usize) -> Option<(usize, usize)> {
        if port >= self.ports() {
            return None;
        }
        let (grid_row, grid_col) = (port % self.ports_y, port / self.ports_y);
        Some((grid_row * self.port_rows, grid_col * self.port_cols))
    }

    /// The master as port `port`'s data files alone see it: a single port (1 x 1) of
    /// [`RawMaster::port_rows`] x [`RawMaster::port_cols`] pixels whose data files are
    /// `_d<port>_` ([`RawMaster::module`]); the reader reads each port through it. `None`
    /// for a port the geometry does not have.
    pub fn port(&self, port: usize) -> Option<RawMaster> {
        self.port_origin(port)?;
        let mut m = self.clone();
        m.rows = self.port_rows;
        m.cols = self.port_cols;
        if self.roi.is_none() {
            m.detector_rows = self.port_rows;
            m.detector_cols = self.port_cols;
        }
        m.ports_x = 1;
        m.ports_y = 1;
        m.module = self.module + port;
        Some(m)
    }

    /// Pixels per whole frame (the ROI's when one is set; all ports' together).
    pub fn pixels(&self) -> usize {
        self.rows * self.cols
    }

    /// Checks that a buffer of `len` samples holds exactly one whole frame.
    ///
    /// # Errors
    /// [`Error::Shape`] naming the frame's shape and the buffer's length.
    pub fn check_frame_buffer(&self, len: usize) -> Result<()> {
        if len == self.pixels() {
            return Ok(());
        }
        Err(Error::shape(
            "raw frame buffer",
            format!("{} samples ({} x {})", self.pixels(), self.rows, self.cols),
            format!("{len} samples"),
        ))
    }

    /// Bytes of one frame record in a data file: the 112-byte header plus one port's part of
    /// a frame as stored (the ROI's when one is set), 16 bits each.
    pub fn frame_bytes(&self) -> u64 {
        super::header::HEADER_BYTES as u64 + (self.port_rows * self.port_cols) as u64 * 2
    }

    /// Packets the detector sends per frame, when known (MOENCH 03 in image order: the whole
    /// detector's frame bytes / 6400, also with a receiver ROI, since the receiver crops
    /// whole frames; for one port's master ([`RawMaster::port`]) that port's packets, 25 for
    /// each of two interfaces); `None` makes completeness rest on the mask's own consistency.
    pub fn expected_packets(&self) -> Option<u32> {
        let bytes = (self.detector_rows * self.detector_cols * 2) as u64;
        match self.detector_type {
            DetectorType::Moench03 if bytes.is_multiple_of(6400) => {
                u32::try_from(bytes / 6400).ok()
            }
            _ => None,
        }
    }
}

/// Splits `<base>_master_<N>.json` into `<base>` and `N`.
fn parse_name(path: &Path) -> Result<(String, u64)> {
    let bad = || {
        Error::format(
            path,
            "file name is not <base>_master_<N>.json (an slsDetector raw master file)",
        )
    };
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(bad)?;
    let stem = name.strip_suffix(".json").ok_or_else(bad)?;
    let pos = stem.rfind("_master_").ok_or_else(bad)?;
    let index = stem[pos + "_master_".len()..]
        .parse::<u64>()
        .map_err(|_| bad())?;
    Ok((stem[..pos].to_string(), index))
}

/// Typed access to the master object's keys with errors that name the key.
struct Keys<'a> {
    j: &'a Map<String, Value>,
    path: &'a Path,
}

impl Keys<'_> {
    fn err(&self, key: &str, reason: impl std::fmt::Display) -> Error {
        Error::format(self.path, format!("key \"{key}\": {reason}"))
    }

    fn get(&self, key: &str) -> Result<&Value> {
        self.j
            .get(key)
            .ok_or_else(|| Error::format(self.path, format!("missing key \"{key}\"")))
    }

    fn number(&self, key: &str) -> Result<f64> {
        match self.get(key)? {
            Value::Number(n) => n
                .as_f64()
                .filter(|v| v.is_finite())
                .ok_or_else(|| self.err(key, format!("{n} is not a finite number"))),
            v => Err(self.err(key, format!("must be a number, got {}", kind(v)))),
        }
    }

    fn string(&self, key: &str) -> Result<&str> {
        match self.get(key)? {
            Value::String(s) => Ok(s),
            v => Err(self.err(key, format!("must be a string, got {}", kind(v)))),
        }
    }

    fn uint_value(&self, key: &str, v: &Value) -> Result<u64> {
        match v {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| self.err(key, format!("must be a non-negative integer, got {n}"))),
            v => Err(self.err(
                key,
                format!("must be a non-negative integer, got {}", kind(v)),
            )),
        }
    }

    fn uint(&self, key: &str) -> Result<u64> {
        self.uint_value(key, self.get(key)?)
    }

    fn opt_uint(&self, key: &str) -> Result<Option<u64>> {
        match self.j.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.uint_value(key, v).map(Some),
        }
    }

    /// An object {"x": .., "y": ..} of integers in 1..=max.
    fn xy(&self, key: &str, max: u64) -> Result<(u64, u64)> {
        let o = match self.get(key)? {
            Value::Object(o) => o,
            v => {
                return Err(self.err(
                    key,
                    format!("must be an object {{\"x\", \"y\"}}, got {}", kind(v)),
                ));
            }
        };
        let mut out = [0u64; 2];
        for (slot, axis) in out.iter_mut().zip(["x", "y"]) {
            let v = o
                .get(axis)
                .ok_or_else(|| self.err(key, format!("missing \"{axis}\"")))?;
            let n = self.uint_value(key, v)?;
            if n == 0 || n > max {
                return Err(self.err(key, format!("\"{axis}\" must be in 1..={max}, got {n}")));
            }
            *slot = n;
        }
        Ok((out[0], out[1]))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The MOENCH masters of aare's `src/RawMasterFile.test.cpp` (trimmed to the keys read).
    fn moench(extra: &str, policy: &str) -> String {
        format!(
            r#"{{"Version": 7.2, "Detector Type": "Moench", "Timing Mode": "auto",
            "Geometry": {{"x": 1, "y": 1}}, "Image Size in bytes": 320000,
            "Pixels": {{"x": 400, "y": 400}}, "Max Frames Per File": 100000,
            "Frame Discard Policy": "{policy}", "Frame Padding": 1,
            "Scan Parameters": "[disabled]", "Total Frames": 1, "Frames in File": 1{extra}}}"#
        )
    }

    #[test]
    fn moench_sw8_is_image_ordered_moench03() {
        let m = RawMaster::parse(
            "/data/test_master_0.json",
            moench(r#", "Number of rows": 400"#, "discardpartial").as_bytes(),
        )
        .unwrap();
        assert_eq!(m.detector_type, DetectorType::Moench03);
        assert_eq!((m.rows, m.cols, m.image_size), (400, 400, 320_000));
        assert_eq!(m.frame_discard_policy, FrameDiscardPolicy::DiscardPartial);
        assert_eq!((m.max_frames_per_file, m.total_frames), (100_000, 1));
        assert_eq!(m.expected_packets(), Some(50));
        assert_eq!(m.data_path(2), Path::new("/data/test_d0_f2_0.raw"));
        assert_eq!(m.frame_bytes(), 320_112);
    }

    #[test]
    fn moench_with_5000_analog_samples_is_adc_ordered() {
        let m = RawMaster::parse(
            "x_master_7.json",
            moench(r#", "Analog Samples": 5000"#, "nodiscard").as_bytes(),
        )
        .unwrap();
        assert_eq!(m.detector_type, DetectorType::Moench03Old);
        assert_eq!(m.expected_packets(), None);
        assert_eq!((m.base_name.as_str(), m.file_index), ("x", 7));
    }

    #[test]
    fn version_8_uses_image_size() {
        let text = moench("", "discardpartial")
            .replace("\"Version\": 7.2", "\"Version\": 8.0")
            .replace("Image Size in bytes", "Image Size");
        let m = RawMaster::parse("a_master_0.json", text.as_bytes()).unwrap();
        assert_eq!(m.image_size, 320_000);
        let text = moench("", "discardpartial").replace("\"Version\": 7.2", "\"Version\": 8.0");
        let e = RawMaster::parse("a_master_0.json", text.as_bytes()).unwrap();
        assert_eq!(e.image_size, 320_000, "the old key is still accepted");
    }

    #[test]
    fn file_names() {
        assert_eq!(
            parse_name(Path::new("some/path/test_master_73.json")).unwrap(),
            ("test".to_string(), 73)
        );
        assert_eq!(
            parse_name(Path::new("a_master_b_master_2.json")).unwrap(),
            ("a_master_b".to_string(), 2)
        );
        for bad in [
            "test_master_.json",
            "test_master_1.raw",
            "test_1.json",
            "master_1.json",
        ] {
            assert!(parse_name(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
