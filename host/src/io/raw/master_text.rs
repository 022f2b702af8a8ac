//! The text of a master file as slsReceiver writes it: every key of the master file format
//! version it claims, in the receiver's order, pretty-printed with 4-space indents as its
//! rapidjson writer does.
//!
//! Facts (slsDetectorPackage `slsReceiverSoftware/src/MasterAttributes.cpp` of the releases
//! that write format 7.2, and the receiver-written masters in aare's
//! `src/RawMasterFile.test.cpp`, "Parse Moench 7.2 master (SW 7.0.3)" and "(SW 8.0.0)"):
//! format 7.2 writes, in this order, "Version", "Timestamp" (`ctime`), "Detector Type",
//! "Timing Mode", "Geometry", "Image Size in bytes", "Pixels", "Max Frames Per File",
//! "Frame Discard Policy", "Frame Padding", "Scan Parameters", "Total Frames", "Receiver
//! Roi" (all four bounds 4294967295 when no ROI is set), the detector's own keys, then
//! "Frames in File" and "Frame Header Format". MOENCH read out through the chip test board
//! (software 7.0, ADC order) adds "Exptime", "Period", "Ten Giga", "ADC Mask", "Analog
//! Samples"; MOENCH with its own firmware (software 8.0, image order, still format 7.2) adds
//! "Exptime", "Period", "Number of UDP Interfaces", "Number of rows". No MOENCH master has
//! "Dynamic Range" (readers take 16).
//!
//! Format 8.0 (slsDetectorPackage 10's `MasterAttributes.cpp`, `GetCommonBinaryAttributes`,
//! `GetMoenchBinaryAttributes`, `GetFinalBinaryAttributes`; aare's 8.0 masters in
//! `src/RawMasterFile.test.cpp`) writes the common keys with "Image Size" for "Image Size in
//! bytes" and "Scan Parameters" as an object (`enable`, `dacInd`, `start offset`, `stop
//! offset`, `step size`, `dac settle time ns`), then for MOENCH "Receiver Rois" (an array of
//! `{"xmin", "xmax", "ymin", "ymax"}`, the whole detector when no ROI is set, see
//! [`super::roi`]), "Exposure Time", "Acquisition Period", "Number of UDP Interfaces",
//! "Number of Rows", "Readout Speed", and ends with "Frames in File" and "Additional JSON
//! Header" (no "Frame Header Format"). Values cluda cannot know are placeholders: times
//! `0ns`, readout speed `full_speed`.
//!
//! Hand-written rather than through `serde_json::to_string_pretty`: serde_json's maps sort
//! their keys unless its `preserve_order` feature (a new dependency, and a change for every
//! map in the crate) is on, and the receiver's order is part of what this reproduces.

use serde_json::{Value, json};

use super::master::{DetectorType, FrameDiscardPolicy};
use super::roi::Roi;

/// What a master file says about an acquisition.
#[derive(Clone, Debug)]
pub struct MasterFields<'a> {
    /// Format version ("Version"); below 8.0 the 7.2 key set is written.
    pub version: f64,
    /// The detector type.
    pub detector: &'a DetectorType,
    /// Rows of the detector (all ports together; "Pixels" y is `rows / ports`).
    pub rows: usize,
    /// Columns of the detector ("Pixels" x).
    pub cols: usize,
    /// UDP ports the frame's rows are split over (1 for single-port data): "Geometry" 1 x
    /// `ports`, "Pixels" y and "Image Size" of one port (`rows / ports` rows), "Number of UDP
    /// Interfaces" `ports`, as slsReceiver writes a MOENCH with `numinterfaces 2`.
    pub ports: usize,
    /// The receiver ROI the data files hold, if any.
    pub roi: Option<Roi>,
    /// "Max Frames Per File".
    pub max_frames_per_file: u64,
    /// "Frame Discard Policy".
    pub frame_discard_policy: FrameDiscardPolicy,
    /// "Frame Padding".
    pub frame_padding: bool,
    /// "Total Frames".
    pub total_frames: u64,
    /// "Frames in File".
    pub frames_in_file: u64,
    /// Seconds since the Unix epoch, for "Timestamp".
    pub unix_seconds: u64,
}

/// A JSON value whose objects keep the order they are written in.
enum Node {
    Leaf(Value),
    Object(Vec<(&'static str, Node)>),
    Array(Vec<Node>),
}

fn leaf(v: Value) -> Node {
    Node::Leaf(v)
}

/// The master file's text for `f` (see the module docs for the keys).
pub fn master_text(f: &MasterFields<'_>) -> String {
    let xy = |x: u64, y: u64| Node::Object(vec![("x", leaf(json!(x))), ("y", leaf(json!(y)))]);
    let ports = f.ports.max(1);
    let port_rows = f.rows / ports;
    let image_size = (port_rows * f.cols * 2) as u64;
    let mut keys: Vec<(&'static str, Node)> = vec![
        ("Version", leaf(json!(f.version))),
        ("Timestamp", leaf(json!(ctime_utc(f.unix_seconds)))),
        ("Detector Type", leaf(json!(f.detector.master_name()))),
        ("Timing Mode", leaf(json!("auto"))),
        ("Geometry", xy(1, ports as u64)),
    ];
    if f.version < 8.0 {
        keys.push(("Image Size in bytes", leaf(json!(image_size))));
    } else {
        keys.push(("Image Size", leaf(json!(image_size))));
    }
    let roi_object = |b: [i64; 4]| {
        Node::Object(
            ["xmin", "xmax", "ymin", "ymax"]
                .into_iter()
                .zip(b)
                .map(|(k, v)| (k, leaf(json!(v))))
                .collect(),
        )
    };
    let bounds = |r: Roi| [r.xmin, r.xmax, r.ymin, r.ymax].map(|v| v as i64);
    let roi = if f.version < 8.0 {
        // Format 7.x: no ROI is -1 written as an unsigned 32-bit number.
        let unset = [u32::MAX as i64; 4];
        ("Receiver Roi", roi_object(f.roi.map_or(unset, bounds)))
    } else {
        // Format 8.0: no ROI is one covering the whole detector.
        let whole = Roi {
            xmin: 0,
            xmax: f.cols.saturating_sub(1),
            ymin: 0,
            ymax: f.rows.saturating_sub(1),
        };
        (
            "Receiver Rois",
            Node::Array(vec![roi_object(bounds(f.roi.unwrap_or(whole)))]),
        )
    };
    keys.extend([
        ("Pixels", xy(f.cols as u64, port_rows as u64)),
        ("Max Frames Per File", leaf(json!(f.max_frames_per_file))),
        (
            "Frame Discard Policy",
            leaf(json!(f.frame_discard_policy.name())),
        ),
        ("Frame Padding", leaf(json!(u8::from(f.frame_padding)))),
        ("Scan Parameters", scan_parameters(f.version)),
        ("Total Frames", leaf(json!(f.total_frames))),
        roi,
    ]);
    let format8 = f.version >= 8.0;
    // cluda's frames have no exposure settings: written as zero.
    match f.detector {
        DetectorType::Moench03 if format8 => keys.extend([
            ("Exposure Time", leaf(json!("0ns"))),
            ("Acquisition Period", leaf(json!("0ns"))),
            ("Number of UDP Interfaces", leaf(json!(ports))),
            ("Number of Rows", leaf(json!(f.rows))),
            ("Readout Speed", leaf(json!("full_speed"))),
        ]),
        // No format-8 receiver writes ADC-ordered "Moench" (that readout is the chip test
        // board's): the 7.x keys under their format-8 names.
        DetectorType::Moench03Old if format8 => keys.extend([
            ("Exposure Time", leaf(json!("0ns"))),
            ("Acquisition Period", leaf(json!("0ns"))),
            ("Ten Giga", leaf(json!(0))),
            ("ADC Mask", leaf(json!(u32::MAX))),
            ("Analog Samples", leaf(json!(5000))),
        ]),
        DetectorType::Moench03Old => keys.extend([
            ("Exptime", leaf(json!("0ns"))),
            ("Period", leaf(json!("0ns"))),
            ("Ten Giga", leaf(json!(0))),
            ("ADC Mask", leaf(json!("0xffffffff"))),
            ("Analog Samples", leaf(json!(5000))),
        ]),
        DetectorType::Moench03 => keys.extend([
            ("Exptime", leaf(json!("0ns"))),
            ("Period", leaf(json!("0ns"))),
            ("Number of UDP Interfaces", leaf(json!(ports))),
            ("Number of rows", leaf(json!(f.rows))),
        ]),
        // cluda's own generic 16-bit type (no receiver writes it): the bit depth spelled out.
        DetectorType::Generic16 | DetectorType::Other(_) => {
            keys.push(("Dynamic Range", leaf(json!(16))));
        }
    }
    let header = [
        ("Frame Number", "8 bytes"),
        ("SubFrame Number/ExpLength", "4 bytes"),
        ("Packet Number", "4 bytes"),
        ("Bunch ID", "8 bytes"),
        ("Timestamp", "8 bytes"),
        ("Module Id", "2 bytes"),
        ("Row", "2 bytes"),
        ("Column", "2 bytes"),
        ("Reserved", "2 bytes"),
        ("Debug", "4 bytes"),
        ("Round Robin Number", "2 bytes"),
        ("Detector Type", "1 byte"),
        ("Header Version", "1 byte"),
        ("Packets Caught Mask", "64 bytes"),
    ];
    keys.push(("Frames in File", leaf(json!(f.frames_in_file))));
    if format8 {
        // Format 8.0 ends with the additional JSON header (none here) and no longer writes
        // the frame header's format.
        keys.push(("Additional JSON Header", Node::Object(Vec::new())));
    } else {
        keys.push((
            "Frame Header Format",
            Node::Object(
                header
                    .into_iter()
                    .map(|(k, v)| (k, leaf(json!(v))))
                    .collect(),
            ),
        ));
    }
    let mut out = String::new();
    write_node(&Node::Object(keys), 0, &mut out);
    out
}

/// "Scan Parameters" with no scan: format 7.x writes `"[disabled]"`, format 8.0 an object of
/// the scan's settings, all zero.
fn scan_parameters(version: f64) -> Node {
    if version < 8.0 {
        return leaf(json!("[disabled]"));
    }
    Node::Object(
        [
            "enable",
            "dacInd",
            "start offset",
            "stop offset",
            "step size",
            "dac settle time ns",
        ]
        .into_iter()
        .map(|k| (k, leaf(json!(0))))
        .collect(),
    )
}

fn write_node(node: &Node, depth: usize, out: &mut String) {
    match node {
        Node::Leaf(v) => out.push_str(&v.to_string()),
        // rapidjson's pretty writer writes empty containers on one line.
        Node::Object(entries) if entries.is_empty() => out.push_str("{}"),
        Node::Array(items) if items.is_empty() => out.push_str("[]"),
        Node::Object(entries) => {
            out.push_str("{\n");
            for (i, (k, v)) in entries.iter().enumerate() {
                out.push_str(&"    ".repeat(depth + 1));
                out.push_str(&Value::from(*k).to_string());
                out.push_str(": ");
                write_node(v, depth + 1, out);
                out.push_str(if i + 1 < entries.len() { ",\n" } else { "\n" });
            }
            out.push_str(&"    ".repeat(depth));
            out.push('}');
        }
        Node::Array(items) => {
            out.push_str("[\n");
            for (i, v) in items.iter().enumerate() {
                out.push_str(&"    ".repeat(depth + 1));
                write_node(v, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            out.push_str(&"    ".repeat(depth));
            out.push(']');
        }
    }
}

/// `secs` since the Unix epoch as C's `ctime` prints it (in UTC, without the newline), e.g.
/// `Wed Aug 19 10:32:06 2026`.
pub fn ctime_utc(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let s = secs % 86_400;
    // Days to a civil date (H. Hinnant's algorithm), for dates after 1970.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{} {} {:2} {:02}:{:02}:{:02} {}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        day,
        s / 3600,
        s % 3600 / 60,
        s % 60,
        year
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_matches_c() {
        // date -u -d @0, @951782400 (leap day 2000), @1790245926 (a 2026 date).
        assert_eq!(ctime_utc(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime_utc(951_782_400), "Tue Feb 29 00:00:00 2000");
        assert_eq!(ctime_utc(1_790_245_926), "Thu Sep 24 10:32:06 2026");
    }
}
