//! Raw acquisitions (masters and data files) and finder options: a table of malformed
//! inputs, each with its specific error; declared sizes that must allocate nothing.

use std::path::{Path, PathBuf};

use cluda::io::raw::{RawMaster, RawReader, RawWriter};
use cluda::{ClusterSize, Error, FinderConfig};
use serde_json::{Value, json};

use support::raw::small_detector;

use crate::{Kind, kind, temp_dir};

/// A valid MOENCH 03 master (receiver software 8, image order).
fn good_master() -> Value {
    json!({
        "Version": 7.2, "Detector Type": "Moench", "Timing Mode": "auto",
        "Geometry": {"x": 1, "y": 1}, "Image Size in bytes": 320000,
        "Pixels": {"x": 400, "y": 400}, "Max Frames Per File": 100000,
        "Frame Discard Policy": "discardpartial", "Frame Padding": 1,
        "Total Frames": 10, "Frames in File": 10
    })
}

fn parse(bytes: &[u8]) -> Error {
    match RawMaster::parse("run_master_0.json", bytes) {
        Ok(m) => panic!("accepted a bad master: {m:?}"),
        Err(e) => e,
    }
}

/// A tiny valid acquisition (4 x 6, `max` frames per file) with `frames` frames; returns the
/// master path.
fn acquisition(dir: &Path, frames: u64, max: u64) -> PathBuf {
    let mut w = RawWriter::create(dir, "run", 0, small_detector(4, 6, max, 1)).unwrap();
    for k in 1..=frames {
        w.write_frame(k, &[k as u16; 24]).unwrap();
    }
    w.finish(None).unwrap()
}

/// Rewrites the master file `mp` with `edit` applied to its JSON.
fn edit_master(mp: &Path, edit: impl FnOnce(&mut Value)) {
    let mut m: Value = serde_json::from_slice(&std::fs::read(mp).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(mp, m.to_string()).unwrap();
}

fn open_err(master: &Path) -> Error {
    match RawReader::open(master) {
        Ok(_) => panic!("opened a bad acquisition {master:?}"),
        Err(e) => e,
    }
}

/// A case: its name, what gives its error, the error's kind and a fragment of its message.
type Case = (String, Box<dyn Fn() -> Error>, Kind, String);

/// Masters that are [`good_master`] with some keys set (`null`: removed), each row
/// `[name, {key: value, ...}, fragment of the format error]`.
fn master_edits() -> Value {
    json!([
        // Missing keys and wrong types.
        ["missing Pixels", {"Pixels": null}, "missing key \"Pixels\""],
        ["missing image size", {"Image Size in bytes": null}, "missing key \"Image Size in bytes\""],
        ["missing Total Frames", {"Total Frames": null}, "missing key \"Total Frames\""],
        ["Version as a string", {"Version": "7.2"}, "key \"Version\": must be a number, got a string"],
        ["Pixels x as a string", {"Pixels": {"x": "400", "y": 400}},
            "key \"Pixels\": must be a non-negative integer, got a string"],
        ["Pixels not an object", {"Pixels": [400, 400]}, "key \"Pixels\": must be an object"],
        ["Detector Type a number", {"Detector Type": 3},
            "key \"Detector Type\": must be a string, got a number"],
        // Zero, negative, fractional and huge sizes.
        ["zero Pixels x", {"Pixels": {"x": 0, "y": 400}}, "\"x\" must be in 1..=65536, got 0"],
        ["negative Pixels y", {"Pixels": {"x": 400, "y": -400}},
            "must be a non-negative integer, got -400"],
        ["huge Pixels", {"Pixels": {"x": 1_000_000_000_000u64, "y": 400}},
            "\"x\" must be in 1..=65536, got 1000000000000"],
        ["negative Max Frames Per File", {"Max Frames Per File": -1},
            "key \"Max Frames Per File\": must be a non-negative integer, got -1"],
        ["fractional Total Frames", {"Total Frames": 1.5},
            "key \"Total Frames\": must be a non-negative integer, got 1.5"],
        ["huge image size", {"Image Size in bytes": u64::MAX}, "disagrees with \"Pixels\" 400 x 400"],
        // Values cluda cannot read.
        ["32-bit frames", {"Dynamic Range": 32}, "32-bit pixels; cluda reads 16-bit frames only"],
        ["unknown discard policy", {"Frame Discard Policy": "sometimes"},
            "`sometimes` is not one of nodiscard"],
        ["more ports than any detector has", {"Geometry": {"x": 1, "y": 65}},
            "key \"Geometry\": \"y\" must be in 1..=64, got 65"],
        // 400-row ports said to be read out through 2 interfaces: 800-row modules.
        ["a MOENCH module's rows over ports that do not stack to 400",
            {"Geometry": {"x": 1, "y": 2}, "Number of UDP Interfaces": 2},
            "\"Geometry\" 1 x 2, \"Number of UDP Interfaces\" 2"],
        ["unpadded partial frames", {"Frame Padding": 0, "Frame Discard Policy": "nodiscard"},
            "\"Frame Padding\" 0 with \"Frame Discard Policy\" nodiscard"],
        ["Moench with unknown analog samples", {"Analog Samples": 1234}, "not MOENCH 03"],
        // Receiver ROIs.
        ["several receiver ROIs", {"Version": 8.0, "Receiver Rois": [
                {"xmin": 0, "xmax": 99, "ymin": 0, "ymax": 399},
                {"xmin": 200, "xmax": 299, "ymin": 0, "ymax": 399}]},
            "key \"Receiver Rois\": 2 receiver ROIs ([0, 99, 0, 399], [200, 299, 0, 399]); \
             cluda reads acquisitions with one ROI only"],
        ["receiver ROI outside the detector",
            {"Receiver Roi": {"xmin": 0, "xmax": 400, "ymin": 0, "ymax": 399}},
            "key \"Receiver Roi\": ROI [0, 400, 0, 399] (xmin, xmax, ymin, ymax; inclusive) \
             does not lie inside"],
        ["receiver ROI bound negative",
            {"Receiver Roi": {"xmin": -5, "xmax": 10, "ymin": 0, "ymax": 399}},
            "key \"Receiver Roi\": \"xmin\" is -5"],
        ["receiver ROI on ADC-ordered MOENCH 03", {"Analog Samples": 5000,
                "Frame Discard Policy": "nodiscard",
                "Receiver Roi": {"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399}},
            "receiver ROI [0, 199, 0, 399] on ADC-ordered MOENCH 03 data"],
        ["image size neither the detector's nor the ROI's", {"Image Size in bytes": 1000,
                "Receiver Roi": {"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399}},
            "and with the receiver ROI [0, 199, 0, 399] (400 x 200 pixels, 160000 bytes)"],
    ])
}

/// The cases of [`master_edits`]: each edited master parsed, a format error expected.
fn master_edit_cases() -> Vec<Case> {
    let rows = master_edits();
    let rows = rows.as_array().expect("master_edits is an array");
    let text = |v: &Value| v.as_str().expect("a string").to_string();
    rows.iter()
        .map(|row| {
            let mut m = good_master();
            for (key, value) in row[1].as_object().expect("the edits are an object") {
                let o = m.as_object_mut().expect("good_master is an object");
                match value {
                    Value::Null => o.remove(key),
                    v => o.insert(key.clone(), v.clone()),
                };
            }
            let bytes = m.to_string().into_bytes();
            let make: Box<dyn Fn() -> Error> = Box::new(move || parse(&bytes));
            (text(&row[0]), make, Kind::Format, text(&row[2]))
        })
        .collect()
}

/// Master files broken below their JSON: their bytes or their name.
fn master_byte_cases() -> Vec<Case> {
    let good = good_master().to_string().into_bytes();
    let mut not_utf8 = good.clone();
    not_utf8[20] = 0xff;
    let truncated = good[..good.len() / 2].to_vec();
    let master = "run_master_0.json";
    [
        (
            "master not UTF-8",
            master,
            not_utf8,
            "not UTF-8 text (invalid byte at offset 20)",
        ),
        ("master truncated", master, truncated, "not valid JSON"),
        ("master empty", master, vec![], "not valid JSON"),
        (
            "master is an array",
            master,
            b"[1, 2]".to_vec(),
            "not a JSON object",
        ),
        (
            "bad master file name",
            "run.json",
            good,
            "file name is not <base>_master_<N>.json",
        ),
    ]
    .into_iter()
    .map(|(name, file, bytes, fragment)| {
        let make: Box<dyn Fn() -> Error> = Box::new(move || match RawMaster::parse(file, &bytes) {
            Ok(m) => panic!("accepted a bad master: {m:?}"),
            Err(e) => e,
        });
        (name.to_string(), make, Kind::Format, fragment.to_string())
    })
    .collect()
}

/// What spoils a tiny acquisition: given its directory and its master's path.
type Spoil = fn(&Path, &Path);

/// Acquisitions (`frames` frames, `max` per file) spoiled after writing: data files that
/// disagree with the master, or whose size is not a whole number of the master's records.
fn acquisition_cases() -> Vec<Case> {
    let rows: [(&str, u64, u64, Spoil, &str); 6] = [
        (
            "no data file",
            2,
            10,
            |d, _| std::fs::remove_file(d.join("run_d0_f0_0.raw")).unwrap(),
            "no data file: expected",
        ),
        (
            "file holds more frames than Max Frames Per File",
            4,
            0,
            |_, mp| edit_master(mp, |m| m["Max Frames Per File"] = json!(3)),
            "holds 4 frames (160 bytes per record), more than the master's \"Max Frames Per File\" 3",
        ),
        (
            "files hold more frames than Total Frames",
            5,
            2,
            |_, mp| {
                edit_master(mp, |m| {
                    m["Total Frames"] = json!(3);
                    m["Frames in File"] = json!(3);
                })
            },
            "the data files hold 5 frames, more than the 3",
        ),
        (
            "data file is a directory",
            2,
            10,
            |d, _| {
                std::fs::remove_file(d.join("run_d0_f0_0.raw")).unwrap();
                std::fs::create_dir(d.join("run_d0_f0_0.raw")).unwrap();
            },
            "data file is not a regular file",
        ),
        (
            "data file not a whole number of records",
            3,
            0,
            |d, _| {
                let f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(d.join("run_d0_f0_0.raw"));
                std::io::Write::write_all(&mut &f.unwrap(), &[0u8; 10]).unwrap();
            },
            "run_d0_f0_0.raw: 490 bytes is not a whole number of 160-byte records (112-byte \
             header + 4 x 6 pixels",
        ),
        // The receiver wrote 2 x 6 ROI records (136 bytes); the master names no ROI.
        (
            "ROI files under a master that names no ROI",
            5,
            0,
            |d, _| std::fs::write(d.join("run_d0_f0_0.raw"), vec![0u8; 5 * 136]).unwrap(),
            "680 bytes is not a whole number of 160-byte records",
        ),
    ];
    rows.into_iter()
        .map(|(name, frames, max, spoil, fragment)| {
            let make: Box<dyn Fn() -> Error> = Box::new(move || {
                let d = temp_dir("acq");
                let mp = acquisition(d.path(), frames, max);
                spoil(d.path(), &mp);
                open_err(&mp)
            });
            (name.to_string(), make, Kind::Format, fragment.to_string())
        })
        .collect()
}

/// A master file of 17 MiB, refused before it is read.
fn huge_master_case() -> Case {
    let make: Box<dyn Fn() -> Error> = Box::new(|| {
        let d = temp_dir("bigmaster");
        let mp = d.path().join("run_master_0.json");
        std::fs::File::create(&mp)
            .unwrap()
            .set_len(17 << 20)
            .unwrap();
        RawMaster::open(&mp).unwrap_err()
    });
    let fragment = "far too large for a master file";
    (
        "master file of 17 MiB".into(),
        make,
        Kind::Format,
        fragment.into(),
    )
}

/// Finder configurations and cluster sizes that are refused as parameters.
fn parameter_cases() -> Vec<Case> {
    let mut v: Vec<Case> = Vec::new();
    let mut add = |name: String, make: Box<dyn Fn() -> Error>, fragment: String| {
        v.push((name, make, Kind::Param, fragment));
    };
    for (name, n_sigma, got) in [
        ("nsigma NaN", f64::NAN, "NaN"),
        ("nsigma negative", -1.0, "-1"),
        ("nsigma infinite", f64::INFINITY, "inf"),
    ] {
        let make = move || {
            FinderConfig::new(400, 400)
                .n_sigma(n_sigma)
                .validate()
                .unwrap_err()
        };
        add(
            name.into(),
            Box::new(make),
            format!("must be finite and >= 0, got {got}"),
        );
    }
    let make = || {
        FinderConfig::new(400, 400)
            .pedestal_frames(0)
            .validate()
            .unwrap_err()
    };
    let fragment = "the pedestal window needs at least one frame";
    add(
        "zero pedestal frames".into(),
        Box::new(make),
        fragment.into(),
    );
    let make = || FinderConfig::new(0, 400).validate().unwrap_err();
    add(
        "zero-sized frames".into(),
        Box::new(make),
        "at least one pixel, got 0 x 400".into(),
    );
    for side in [4, 0, 11] {
        let make = move || ClusterSize::from_side(side).unwrap_err();
        let fragment = format!("cluster size {side} is not supported");
        add(format!("cluster size {side}"), Box::new(make), fragment);
    }
    v
}

fn cases() -> Vec<Case> {
    let mut v = master_byte_cases();
    v.extend(master_edit_cases());
    v.extend(acquisition_cases());
    v.push(huge_master_case());
    v.extend(parameter_cases());
    v
}

#[test]
fn every_malformed_input_gets_its_specific_error() {
    let cases = cases();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for (name, make, want, fragment) in &cases {
        let e = make();
        let msg = e.to_string();
        if kind(&e) != Some(*want) || !msg.contains(fragment) {
            failures.push(format!(
                "{name}: expected {want:?} containing `{fragment}`, got {e:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn errors_name_the_file() {
    let d = temp_dir("names");
    let mp = acquisition(d.path(), 4, 0);
    edit_master(&mp, |m| m["Max Frames Per File"] = json!(2));
    match open_err(&mp) {
        Error::Format { path, .. } => assert_eq!(path, d.path().join("run_d0_f0_0.raw")),
        e => panic!("{e:?}"),
    }
    match parse(b"{") {
        Error::Format { path, .. } => assert_eq!(path, Path::new("run_master_0.json")),
        e => panic!("{e:?}"),
    }
}

#[test]
fn huge_declared_frames_allocate_nothing_for_absent_data() {
    // 65536 x 65536 pixels (8 GiB per frame) declared, 200 bytes of data present: the reader
    // opens, finds no whole frame, reports the partial record, and never allocates a frame.
    let d = temp_dir("huge");
    let mut m = good_master();
    m["Detector Type"] = json!("Generic16");
    m["Pixels"] = json!({"x": 65536, "y": 65536});
    m["Image Size in bytes"] = json!(65536u64 * 65536 * 2);
    m["Max Frames Per File"] = json!(0);
    let mp = d.path().join("run_master_0.json");
    std::fs::write(&mp, m.to_string()).unwrap();
    std::fs::write(d.path().join("run_d0_f0_0.raw"), [7u8; 200]).unwrap();
    // Not a whole record: refused, naming the file ...
    match open_err(&mp) {
        Error::Format { path, reason } => {
            assert_eq!(path, d.path().join("run_d0_f0_0.raw"));
            assert!(
                reason.contains("0 whole records and 200 bytes over"),
                "{reason}"
            );
        }
        e => panic!("{e:?}"),
    }
    // ... unless partial records are allowed (a file cut off mid-write, read to its end).
    let mut r = RawReader::open_allowing_partial_records(&mp).unwrap();
    assert_eq!(r.frames_on_disk(), 0);
    let mut frames: Vec<u16> = Vec::new();
    assert!(r.next_frames(1_000_000, &mut frames).unwrap().is_empty());
    assert_eq!(
        frames.capacity(),
        0,
        "reserved memory for frames that are not there"
    );
    assert!(r.next().is_none());
    let t = &r.report().truncated;
    assert_eq!((t.len(), t[0].bytes_present), (1, 200));
    assert_eq!(t[0].frame_number, Some(u64::from_le_bytes([7; 8])));
}

#[test]
fn a_batch_request_reserves_only_for_frames_on_disk() {
    let d = temp_dir("reserve");
    let mp = acquisition(d.path(), 3, 0);
    let mut r = RawReader::open(&mp).unwrap();
    let mut frames: Vec<u16> = Vec::new();
    assert_eq!(r.next_frames(usize::MAX, &mut frames).unwrap().len(), 3);
    assert!(
        frames.capacity() <= 3 * 24 * 2,
        "capacity {}",
        frames.capacity()
    );
}
