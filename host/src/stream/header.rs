//! The JSON header slsReceiver puts before every frame on its ZMQ stream: parsing, writing,
//! and checking it against the data part that follows.
//!
//! The format is slsDetectorPackage's "ZMQ: Json Header Format" (docs/src/slsreceiver.rst and
//! zmqjsonheaderformat.rst, written by `ZmqSocket::SendHeader` in
//! slsSupportLib/src/ZmqSocket.cpp, filled by the receiver's `DataStreamer::SendDataHeader`);
//! aare reads the same header (`ZmqHeader`, network_io/ZmqHeader.hpp and .cpp). A frame is one
//! ZMQ message of two parts: the header (`"data": 1`) and the frame's pixels; an acquisition
//! ends with a one-part message whose header says `"data": 0` (the receiver's "dummy" header,
//! every other field at its default).
//!
//! Field order and meaning as slsReceiver writes them (v7 and later): `jsonversion` (4 in v6 and
//! v7, 5 in later releases), `bitmode` (bits per pixel), `fileIndex` (the acquisition's file
//! index, `findex`), `detshape` and `shape` (`[x, y]`: columns first, as `ZmqSocket` writes
//! `npixelsx, npixelsy`; aare's `ZmqHeader` writes `[row, col]` instead, which is the same for
//! the square MOENCH frames), `size` (bytes of the data part), `acqIndex` (the detector's frame
//! number), `frameIndex` (frame number minus the acquisition's first one), `progress` (%),
//! `fname` (the file name prefix with its path), `data`, `completeImage` (0 when packets were
//! lost), then the detector's UDP header (`frameNumber`, `expLength`, `packetNumber` (packets
//! caught), `detSpec1`, `timestamp`, `modId`, `row`, `column`, `detSpec2..4`, `detType`,
//! `version`), `flipRows`, `quad`, an optional `addJsonHeader` of string pairs and `rx_roi`.
//!
//! Parsing is strict about the fields cluda uses (a wrong type or a missing required field is a
//! malformed header, reported with serde_json's message naming the field) and ignores fields it
//! does not know, so newer senders keep working.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `detType` of a MOENCH detector in slsDetectorPackage's `detectorType` enum (GENERIC,
/// EIGER, GOTTHARD, JUNGFRAU, CHIPTESTBOARD, MOENCH, ...).
pub const DET_TYPE_MOENCH: u32 = 5;

/// The `jsonversion` cluda writes: slsDetectorPackage's `SLS_DETECTOR_JSON_HEADER_VERSION`
/// since release 8 (7.x wrote 4; both are read).
pub const JSON_VERSION: u32 = 5;

/// Bytes of detector data per UDP packet of a MOENCH 03 (so a 400 x 400 frame is 50 packets):
/// a frame with fewer `packetNumber` than `size / 6400` lost packets.
pub const MOENCH_PACKET_BYTES: u64 = 6400;

/// Largest header cluda reads, in bytes (slsReceiver's own receive buffer is of this order; a
/// larger first part is not a header).
pub const MAX_HEADER_BYTES: usize = 1 << 20;

/// One frame's (or an end-of-acquisition) header, with every field of slsReceiver's format.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZmqHeader {
    /// Version of the header format.
    #[serde(default)]
    pub jsonversion: u32,
    /// Bits per pixel (4, 8, 16 or 32); cluda finds clusters in 16-bit frames.
    #[serde(default = "absent_u32")]
    pub bitmode: u32,
    /// The acquisition's file index (`findex`).
    #[serde(default)]
    pub file_index: u64,
    /// Modules/ports of the whole detector, `[x, y]`.
    #[serde(default)]
    pub detshape: [u32; 2],
    /// Pixels of this port's image, `[x, y]` = `[columns, rows]`.
    #[serde(default = "absent_shape")]
    pub shape: [u32; 2],
    /// Bytes of the image in the data part.
    #[serde(default = "absent_u64")]
    pub size: u64,
    /// The detector's frame number (slsReceiver writes `frameNumber` here too).
    #[serde(default)]
    pub acq_index: u64,
    /// Frame number minus the acquisition's first frame number (0 for the first frame).
    #[serde(default)]
    pub frame_index: Option<u64>,
    /// Progress of the acquisition in %.
    #[serde(default)]
    pub progress: f64,
    /// The file name prefix (with its path) the receiver writes the acquisition under.
    #[serde(default)]
    pub fname: String,
    /// 1 when the data part follows, 0 for the end-of-acquisition header.
    pub data: u32,
    /// 1 when no packet of this frame was lost.
    #[serde(default)]
    pub complete_image: Option<u32>,
    /// The frame number from the detector's UDP header.
    #[serde(default)]
    pub frame_number: Option<u64>,
    /// Sub-frame number (Eiger 32 bit) or exposure time in 100 ns.
    #[serde(default)]
    pub exp_length: u64,
    /// UDP packets the receiver caught for this frame.
    #[serde(default)]
    pub packet_number: Option<u32>,
    /// Detector-specific field 1.
    #[serde(default)]
    pub det_spec1: u64,
    /// Timestamp with the detector's 10 MHz clock.
    #[serde(default)]
    pub timestamp: u64,
    /// Module id.
    #[serde(default)]
    pub mod_id: u32,
    /// Row of the module in the detector.
    #[serde(default)]
    pub row: u32,
    /// Column of the module in the detector.
    #[serde(default)]
    pub column: u32,
    /// Detector-specific field 2.
    #[serde(default)]
    pub det_spec2: u32,
    /// Detector-specific field 3.
    #[serde(default)]
    pub det_spec3: u32,
    /// Detector-specific field 4.
    #[serde(default)]
    pub det_spec4: u32,
    /// Detector type ([`DET_TYPE_MOENCH`] for a MOENCH).
    #[serde(default)]
    pub det_type: u32,
    /// Detector header version.
    #[serde(default)]
    pub version: u32,
    /// 1 when the image's rows should be flipped (Eiger bottom halves).
    #[serde(default)]
    pub flip_rows: i64,
    /// 1 for an Eiger quad.
    #[serde(default)]
    pub quad: u32,
    /// Custom string pairs the user configured on the receiver.
    #[serde(default)]
    pub add_json_header: BTreeMap<String, String>,
    /// The receiver's region of interest `(xmin, xmax, ymin, ymax)`, when it sends one.
    #[serde(default, rename = "rx_roi")]
    pub rx_roi: Option<[i64; 4]>,
}

/// What is wrong with a message, for the fault report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderFault {
    /// The first part is not a JSON header cluda can read (the reason names the field).
    Malformed(String),
    /// The header and the data part disagree, or the frame is not one cluda can process
    /// (shape, size, bitmode); the frame is skipped.
    Mismatch(String),
}

impl ZmqHeader {
    /// An end-of-acquisition header as slsReceiver sends it: `data` 0, the version set, every
    /// other field at its default.
    pub fn end_of_acquisition() -> Self {
        Self {
            data: 0,
            jsonversion: JSON_VERSION,
            ..Self::frame(0, 0, 0)
        }
    }

    /// A data header for a `rows x cols` 16-bit frame numbered `frame_number`, complete, with
    /// every other field at its default (the caller sets indices, names and the like).
    pub fn frame(rows: u32, cols: u32, frame_number: u64) -> Self {
        Self {
            jsonversion: JSON_VERSION,
            bitmode: 16,
            file_index: 0,
            detshape: [1, 1],
            shape: [cols, rows],
            size: u64::from(rows) * u64::from(cols) * 2,
            acq_index: frame_number,
            frame_index: Some(0),
            progress: 0.0,
            fname: String::new(),
            data: 1,
            complete_image: Some(1),
            frame_number: Some(frame_number),
            exp_length: 0,
            packet_number: Some(0),
            det_spec1: 0,
            timestamp: 0,
            mod_id: 0,
            row: 0,
            column: 0,
            det_spec2: 0,
            det_spec3: 0,
            det_spec4: 0,
            det_type: 0,
            version: 2,
            flip_rows: 0,
            quad: 0,
            add_json_header: BTreeMap::new(),
            rx_roi: None,
        }
    }

    /// Parses a header (the first part of a message).
    ///
    /// # Errors
    /// [`HeaderFault::Malformed`] when the bytes are not a JSON object with the fields typed
    /// as slsReceiver writes them, or a data header lacks `frameNumber`, `shape`, `size` or
    /// `bitmode`.
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderFault> {
        if bytes.len() > MAX_HEADER_BYTES {
            return Err(HeaderFault::Malformed(format!(
                "a first part of {} bytes is not a header (at most {MAX_HEADER_BYTES})",
                bytes.len()
            )));
        }
        // slsReceiver ends its header with a newline and aare with nothing; a C sender may
        // add a terminating NUL.
        let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
        let h: Self = serde_json::from_slice(bytes).map_err(|e| {
            let field = field_at(bytes, e.line(), e.column())
                .map_or(String::new(), |f| format!(" (field `{f}`)"));
            HeaderFault::Malformed(format!(
                "not a JSON header as slsReceiver sends{field}: {e}"
            ))
        })?;
        let mut h = h;
        let absent = [
            ("frameNumber", h.frame_number.is_none()),
            ("shape", h.shape == absent_shape()),
            ("size", h.size == absent_u64()),
            ("bitmode", h.bitmode == absent_u32()),
        ];
        if h.data != 0 {
            if let Some((key, _)) = absent.iter().find(|(_, a)| *a) {
                return Err(HeaderFault::Malformed(format!(
                    "the data header has no `{key}`"
                )));
            }
        } else {
            // An end header may leave them out.
            if absent[1].1 {
                h.shape = [0, 0];
            }
            if absent[2].1 {
                h.size = 0;
            }
            if absent[3].1 {
                h.bitmode = 0;
            }
        }
        Ok(h)
    }

    /// Whether this header announces a frame (else it ends the acquisition).
    pub fn is_data(&self) -> bool {
        self.data != 0
    }

    /// Rows and columns of the image (`shape` is `[x, y]`).
    pub fn rows_cols(&self) -> (usize, usize) {
        (self.shape[1] as usize, self.shape[0] as usize)
    }

    /// The frame number (0 when the header has none: only end headers may lack it).
    pub fn number(&self) -> u64 {
        self.frame_number.unwrap_or(0)
    }

    /// Checks a data header against its data part and against the `rows x cols` 16-bit
    /// frames cluda is finding clusters in.
    ///
    /// # Errors
    /// [`HeaderFault::Mismatch`] saying which of bitmode, shape, size or the data part's
    /// length disagrees.
    pub fn check_frame(
        &self,
        data_len: usize,
        rows: usize,
        cols: usize,
    ) -> Result<(), HeaderFault> {
        if self.bitmode != 16 {
            return Err(HeaderFault::Mismatch(format!(
                "bitmode {} (cluda finds clusters in 16-bit frames)",
                self.bitmode
            )));
        }
        let (r, c) = self.rows_cols();
        let expect = (r as u64) * (c as u64) * 2;
        if self.size != expect {
            return Err(HeaderFault::Mismatch(format!(
                "size {} bytes does not match shape [{}, {}] at 16 bits ({expect} bytes)",
                self.size, self.shape[0], self.shape[1]
            )));
        }
        if data_len as u64 != self.size {
            return Err(HeaderFault::Mismatch(format!(
                "the data part holds {data_len} bytes, the header's size says {}",
                self.size
            )));
        }
        if (r, c) != (rows, cols) {
            return Err(HeaderFault::Mismatch(format!(
                "shape [{}, {}] ({r} rows x {c} columns) is not this acquisition's {rows} x {cols}",
                self.shape[0], self.shape[1]
            )));
        }
        Ok(())
    }

    /// Whether the frame lost packets: `completeImage` 0, or (for a MOENCH, whose frames are
    /// `size / 6400` packets) fewer `packetNumber` than that. A `packetNumber` of 0 means the
    /// sender does not fill it in and is not counted against the frame.
    pub fn incomplete(&self) -> Option<String> {
        if self.complete_image == Some(0) {
            return Some("completeImage 0 (packets lost)".into());
        }
        if self.det_type == DET_TYPE_MOENCH && self.size.is_multiple_of(MOENCH_PACKET_BYTES) {
            let expected = self.size / MOENCH_PACKET_BYTES;
            match self.packet_number {
                Some(p) if p != 0 && u64::from(p) < expected => {
                    return Some(format!("{p} of {expected} packets caught"));
                }
                _ => {}
            }
        }
        None
    }

    /// The header as slsReceiver writes it: one JSON object, fields in its order, a final
    /// newline. `addJsonHeader` is written only when it holds pairs, `rx_roi` only when set.
    pub fn to_json(&self) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(768);
        let _ = write!(
            s,
            "{{\"jsonversion\":{}, \"bitmode\":{}, \"fileIndex\":{}, \"detshape\":[{}, {}], \"shape\":[{}, {}], \"size\":{}, \"acqIndex\":{}, \"frameIndex\":{}, \"progress\":{}, \"fname\":{}, \"data\":{}, \"completeImage\":{}, \"frameNumber\":{}, \"expLength\":{}, \"packetNumber\":{}, \"detSpec1\":{}, \"timestamp\":{}, \"modId\":{}, \"row\":{}, \"column\":{}, \"detSpec2\":{}, \"detSpec3\":{}, \"detSpec4\":{}, \"detType\":{}, \"version\":{}, \"flipRows\":{}, \"quad\":{}",
            self.jsonversion,
            self.bitmode,
            self.file_index,
            self.detshape[0],
            self.detshape[1],
            self.shape[0],
            self.shape[1],
            self.size,
            self.acq_index,
            self.frame_index.unwrap_or(0),
            json_number(self.progress),
            serde_json::Value::from(self.fname.as_str()),
            self.data,
            self.complete_image.unwrap_or(1),
            self.frame_number.unwrap_or(0),
            self.exp_length,
            self.packet_number.unwrap_or(0),
            self.det_spec1,
            self.timestamp,
            self.mod_id,
            self.row,
            self.column,
            self.det_spec2,
            self.det_spec3,
            self.det_spec4,
            self.det_type,
            self.version,
            self.flip_rows,
            self.quad,
        );
        if !self.add_json_header.is_empty() {
            s.push_str(", \"addJsonHeader\": {");
            for (i, (k, v)) in self.add_json_header.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(
                    s,
                    "{}:{}",
                    serde_json::Value::from(k.as_str()),
                    serde_json::Value::from(v.as_str())
                );
            }
            s.push_str(" } ");
        }
        if let Some(r) = self.rx_roi {
            let _ = write!(s, ", \"rx_roi\":[{}, {}, {}, {}]", r[0], r[1], r[2], r[3]);
        }
        s.push_str("}\n");
        s
    }
}

/// The key whose value serde_json stopped at (1-based `line`, `column`): the last `"key":`
/// before that position, so a type error names the field.
fn field_at(bytes: &[u8], line: usize, column: usize) -> Option<String> {
    let mut offset = 0;
    for _ in 1..line {
        offset += bytes[offset..].iter().position(|&b| b == b'\n')? + 1;
    }
    let end = (offset + column).min(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    let colon = text.rfind("\":")?;
    let start = text[..colon].rfind('"')?;
    let key = &text[start + 1..colon];
    (!key.is_empty() && key.len() < 64).then(|| key.to_string())
}

/// Markers of a field the header left out (values no sender writes), so that a data header
/// without it is refused with one parse instead of two.
fn absent_u32() -> u32 {
    u32::MAX
}
fn absent_u64() -> u64 {
    u64::MAX
}
fn absent_shape() -> [u32; 2] {
    [u32::MAX; 2]
}

/// A finite `f64` as JSON (a non-finite progress is written as 0: JSON has no NaN).
fn json_number(v: f64) -> String {
    if v.is_finite() {
        serde_json::Value::from(v).to_string()
    } else {
        "0".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header as slsReceiver 7 writes it (`ZmqSocket::SendHeader`), parsed field by field.
    #[test]
    fn parses_slsreceiver_output() {
        let text = "{\"jsonversion\":4, \"bitmode\":16, \"fileIndex\":3, \"detshape\":[1, 1], \"shape\":[400, 400], \"size\":320000, \"acqIndex\":17, \"frameIndex\":16, \"progress\":1.7, \"fname\":\"/data/run\", \"data\":1, \"completeImage\":1, \"frameNumber\":17, \"expLength\":0, \"packetNumber\":50, \"detSpec1\":0, \"timestamp\":123, \"modId\":0, \"row\":0, \"column\":0, \"detSpec2\":0, \"detSpec3\":0, \"detSpec4\":0, \"detType\":5, \"version\":2, \"flipRows\":0, \"quad\":0, \"addJsonHeader\": {\"a\":\"b\"} , \"rx_roi\":[0, 399, 0, 399]}\n";
        let h = ZmqHeader::parse(text.as_bytes()).expect("parse");
        assert_eq!(h.jsonversion, 4);
        assert_eq!(h.file_index, 3);
        assert_eq!(h.rows_cols(), (400, 400));
        assert_eq!(h.frame_number, Some(17));
        assert_eq!(h.frame_index, Some(16));
        assert_eq!(h.packet_number, Some(50));
        assert_eq!(h.det_type, DET_TYPE_MOENCH);
        assert_eq!(h.fname, "/data/run");
        assert_eq!(h.add_json_header.get("a").map(String::as_str), Some("b"));
        assert_eq!(h.rx_roi, Some([0, 399, 0, 399]));
        assert!(h.is_data());
        assert_eq!(h.check_frame(320000, 400, 400), Ok(()));
        assert_eq!(h.incomplete(), None);
    }

    /// Writing then parsing gives the header back, with unusual names escaped.
    #[test]
    fn round_trips() {
        let mut h = ZmqHeader::frame(12, 34, 99);
        h.fname = "dir/we\"ird\\name".into();
        h.file_index = 7;
        h.progress = 12.5;
        h.add_json_header.insert("k".into(), "v w".into());
        h.rx_roi = Some([-1, -1, -1, -1]);
        let back = ZmqHeader::parse(h.to_json().as_bytes()).expect("parse");
        assert_eq!(back, h);
        let end = ZmqHeader::end_of_acquisition();
        let back = ZmqHeader::parse(end.to_json().as_bytes()).expect("parse end");
        assert!(!back.is_data());
        assert_eq!(back, end);
    }

    /// Bad headers are malformed, with a reason naming what is wrong.
    #[test]
    fn malformed_headers_say_why() {
        let cases: [(&[u8], &str); 5] = [
            (b"not json", "not a JSON header"),
            (b"{\"data\":1, \"frameNumber\":\"x\"}", "frameNumber"),
            (b"{\"frameNumber\":3}", "data"),
            (
                b"{\"data\":1, \"shape\":[4, 4], \"size\":32, \"bitmode\":16}",
                "frameNumber",
            ),
            (b"{\"data\":1, \"frameNumber\":-3}", "frameNumber"),
        ];
        for (bytes, want) in cases {
            match ZmqHeader::parse(bytes) {
                Err(HeaderFault::Malformed(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
            }
        }
    }

    /// Shape, size, bitmode and the data part's length are checked against each other.
    #[test]
    fn frame_checks() {
        let h = ZmqHeader::frame(4, 6, 1);
        assert_eq!(h.check_frame(48, 4, 6), Ok(()));
        let mismatch = |h: &ZmqHeader, len, want: &str| match h.check_frame(len, 4, 6) {
            Err(HeaderFault::Mismatch(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("{other:?}"),
        };
        mismatch(&h, 47, "data part holds 47 bytes");
        mismatch(
            &ZmqHeader {
                bitmode: 32,
                ..h.clone()
            },
            48,
            "bitmode 32",
        );
        mismatch(
            &ZmqHeader {
                size: 40,
                ..h.clone()
            },
            40,
            "size 40",
        );
        mismatch(
            &ZmqHeader::frame(6, 4, 1),
            48,
            "not this acquisition's 4 x 6",
        );
        let mut moench = ZmqHeader::frame(400, 400, 1);
        moench.det_type = DET_TYPE_MOENCH;
        moench.packet_number = Some(50);
        assert_eq!(moench.incomplete(), None);
        moench.packet_number = Some(49);
        assert!(moench.incomplete().expect("partial").contains("49 of 50"));
        moench.packet_number = Some(50);
        moench.complete_image = Some(0);
        assert!(
            moench
                .incomplete()
                .expect("partial")
                .contains("completeImage 0")
        );
    }
}
