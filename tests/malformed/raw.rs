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

/// `good_master` with `key` set to `value` (`Value::Null` removes it).
fn master_with(key: &str, value: Value) -> Vec<u8> {
    let mut m = good_master();
    let o = m.as_object_mut().unwrap();
    if value.is_null() {
        o.remove(key);
    } else {
        o.insert(key.into(), value);
    }
    m.to_string().into_bytes()
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

type Case = (&'static str, Box<dyn Fn() -> Error>, Kind, &'static str);

fn cases() -> Vec<Case> {
    let mut v: Vec<Case> = vec![
        // Master file: encoding and structure.
        (
            "master not UTF-8",
            Box::new(|| {
                let mut b = good_master().to_string().into_bytes();
                b[20] = 0xff;
                parse(&b)
            }),
            Kind::Format,
            "not UTF-8 text (invalid byte at offset 20)",
        ),
        (
            "master truncated",
            Box::new(|| {
                let b = good_master().to_string().into_bytes();
                parse(&b[..b.len() / 2])
            }),
            Kind::Format,
            "not valid JSON",
        ),
        (
            "master empty",
            Box::new(|| parse(b"")),
            Kind::Format,
            "not valid JSON",
        ),
        (
            "master is an array",
            Box::new(|| parse(b"[1, 2]")),
            Kind::Format,
            "not a JSON object",
        ),
        (
            "bad master file name",
            Box::new(|| {
                RawMaster::parse("run.json", &master_with("Version", json!(7.2))).unwrap_err()
            }),
            Kind::Format,
            "file name is not <base>_master_<N>.json",
        ),
        // Missing keys and wrong types.
        (
            "missing Pixels",
            Box::new(|| parse(&master_with("Pixels", Value::Null))),
            Kind::Format,
            "missing key \"Pixels\"",
        ),
        (
            "missing image size",
            Box::new(|| parse(&master_with("Image Size in bytes", Value::Null))),
            Kind::Format,
            "missing key \"Image Size in bytes\"",
        ),
        (
            "missing Total Frames",
            Box::new(|| parse(&master_with("Total Frames", Value::Null))),
            Kind::Format,
            "missing key \"Total Frames\"",
        ),
        (
            "Version as a string",
            Box::new(|| parse(&master_with("Version", json!("7.2")))),
            Kind::Format,
            "key \"Version\": must be a number, got a string",
        ),
        (
            "Pixels x as a string",
            Box::new(|| parse(&master_with("Pixels", json!({"x": "400", "y": 400})))),
            Kind::Format,
            "key \"Pixels\": must be a non-negative integer, got a string",
        ),
        (
            "Pixels not an object",
            Box::new(|| parse(&master_with("Pixels", json!([400, 400])))),
            Kind::Format,
            "key \"Pixels\": must be an object",
        ),
        (
            "Detector Type a number",
            Box::new(|| parse(&master_with("Detector Type", json!(3)))),
            Kind::Format,
            "key \"Detector Type\": must be a string, got a number",
        ),
        // Zero, negative, fractional and huge sizes.
        (
            "zero Pixels x",
            Box::new(|| parse(&master_with("Pixels", json!({"x": 0, "y": 400})))),
            Kind::Format,
            "\"x\" must be in 1..=65536, got 0",
        ),
        (
            "negative Pixels y",
            Box::new(|| parse(&master_with("Pixels", json!({"x": 400, "y": -400})))),
            Kind::Format,
            "must be a non-negative integer, got -400",
        ),
        (
            "huge Pixels",
            Box::new(|| {
                parse(&master_with(
                    "Pixels",
                    json!({"x": 1_000_000_000_000u64, "y": 400}),
                ))
            }),
            Kind::Format,
            "\"x\" must be in 1..=65536, got 1000000000000",
        ),
        (
            "negative Max Frames Per File",
            Box::new(|| parse(&master_with("Max Frames Per File", json!(-1)))),
            Kind::Format,
            "key \"Max Frames Per File\": must be a non-negative integer, got -1",
        ),
        (
            "fractional Total Frames",
            Box::new(|| parse(&master_with("Total Frames", json!(1.5)))),
            Kind::Format,
            "key \"Total Frames\": must be a non-negative integer, got 1.5",
        ),
        (
            "huge image size",
            Box::new(|| parse(&master_with("Image Size in bytes", json!(u64::MAX)))),
            Kind::Format,
            "disagrees with \"Pixels\" 400 x 400",
        ),
        // Values cluda cannot read.
        (
            "32-bit frames",
            Box::new(|| parse(&master_with("Dynamic Range", json!(32)))),
            Kind::Format,
            "32-bit pixels; cluda reads 16-bit frames only",
        ),
        (
            "unknown discard policy",
            Box::new(|| parse(&master_with("Frame Discard Policy", json!("sometimes")))),
            Kind::Format,
            "`sometimes` is not one of nodiscard",
        ),
        (
            "more ports than any detector has",
            Box::new(|| parse(&master_with("Geometry", json!({"x": 1, "y": 65})))),
            Kind::Format,
            "key \"Geometry\": \"y\" must be in 1..=64, got 65",
        ),
        (
            "a MOENCH module's rows over ports that do not stack to 400",
            Box::new(|| {
                // 400-row ports said to be read out through 2 interfaces: 800-row modules.
                let mut m = good_master();
                m["Geometry"] = json!({"x": 1, "y": 2});
                m["Number of UDP Interfaces"] = json!(2);
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "\"Geometry\" 1 x 2, \"Number of UDP Interfaces\" 2",
        ),
        (
            "unpadded partial frames",
            Box::new(|| {
                let mut m = good_master();
                m["Frame Padding"] = json!(0);
                m["Frame Discard Policy"] = json!("nodiscard");
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "\"Frame Padding\" 0 with \"Frame Discard Policy\" nodiscard",
        ),
        (
            "Moench with unknown analog samples",
            Box::new(|| parse(&master_with("Analog Samples", json!(1234)))),
            Kind::Format,
            "not MOENCH 03",
        ),
        // Data files that disagree with the master.
        (
            "no data file",
            Box::new(|| {
                let d = temp_dir("nodata");
                let mp = acquisition(d.path(), 2, 10);
                std::fs::remove_file(d.path().join("run_d0_f0_0.raw")).unwrap();
                open_err(&mp)
            }),
            Kind::Format,
            "no data file: expected",
        ),
        (
            "file holds more frames than Max Frames Per File",
            Box::new(|| {
                let d = temp_dir("maxff");
                let mp = acquisition(d.path(), 4, 0);
                edit_master(&mp, |m| m["Max Frames Per File"] = json!(3));
                open_err(&mp)
            }),
            Kind::Format,
            "holds 4 frames (160 bytes per record), more than the master's \"Max Frames Per File\" 3",
        ),
        (
            "files hold more frames than Total Frames",
            Box::new(|| {
                let d = temp_dir("total");
                let mp = acquisition(d.path(), 5, 2);
                edit_master(&mp, |m| {
                    m["Total Frames"] = json!(3);
                    m["Frames in File"] = json!(3);
                });
                open_err(&mp)
            }),
            Kind::Format,
            "the data files hold 5 frames, more than the 3",
        ),
        (
            "data file is a directory",
            Box::new(|| {
                let d = temp_dir("dirdata");
                let mp = acquisition(d.path(), 2, 10);
                std::fs::remove_file(d.path().join("run_d0_f0_0.raw")).unwrap();
                std::fs::create_dir(d.path().join("run_d0_f0_0.raw")).unwrap();
                open_err(&mp)
            }),
            Kind::Format,
            "data file is not a regular file",
        ),
        (
            "master file of 17 MiB",
            Box::new(|| {
                let d = temp_dir("bigmaster");
                let mp = d.path().join("run_master_0.json");
                std::fs::File::create(&mp)
                    .unwrap()
                    .set_len(17 << 20)
                    .unwrap();
                RawMaster::open(&mp).unwrap_err()
            }),
            Kind::Format,
            "far too large for a master file",
        ),
        // Data files whose size is not a whole number of the master's records.
        (
            "data file not a whole number of records",
            Box::new(|| {
                let d = temp_dir("tail");
                let mp = acquisition(d.path(), 3, 0);
                let p = d.path().join("run_d0_f0_0.raw");
                let f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
                std::io::Write::write_all(&mut &f, &[0u8; 10]).unwrap();
                open_err(&mp)
            }),
            Kind::Format,
            "run_d0_f0_0.raw: 490 bytes is not a whole number of 160-byte records (112-byte \
             header + 4 x 6 pixels",
        ),
        (
            "ROI files under a master that names no ROI",
            Box::new(|| {
                // The receiver wrote 2 x 6 ROI records (136 bytes); the master names no ROI.
                let d = temp_dir("roinoname");
                let mp = acquisition(d.path(), 5, 0);
                std::fs::write(d.path().join("run_d0_f0_0.raw"), vec![0u8; 5 * 136]).unwrap();
                open_err(&mp)
            }),
            Kind::Format,
            "680 bytes is not a whole number of 160-byte records",
        ),
        // Receiver ROIs.
        (
            "several receiver ROIs",
            Box::new(|| {
                let mut m = good_master();
                m["Version"] = json!(8.0);
                m["Receiver Rois"] = json!([
                    {"xmin": 0, "xmax": 99, "ymin": 0, "ymax": 399},
                    {"xmin": 200, "xmax": 299, "ymin": 0, "ymax": 399}
                ]);
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "key \"Receiver Rois\": 2 receiver ROIs ([0, 99, 0, 399], [200, 299, 0, 399]); \
             cluda reads acquisitions with one ROI only",
        ),
        (
            "receiver ROI outside the detector",
            Box::new(|| {
                let mut m = good_master();
                m["Receiver Roi"] = json!({"xmin": 0, "xmax": 400, "ymin": 0, "ymax": 399});
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "key \"Receiver Roi\": ROI [0, 400, 0, 399] (xmin, xmax, ymin, ymax; inclusive) \
             does not lie inside",
        ),
        (
            "receiver ROI bound negative",
            Box::new(|| {
                let mut m = good_master();
                m["Receiver Roi"] = json!({"xmin": -5, "xmax": 10, "ymin": 0, "ymax": 399});
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "key \"Receiver Roi\": \"xmin\" is -5",
        ),
        (
            "receiver ROI on ADC-ordered MOENCH 03",
            Box::new(|| {
                let mut m = good_master();
                m["Analog Samples"] = json!(5000);
                m["Frame Discard Policy"] = json!("nodiscard");
                m["Receiver Roi"] = json!({"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399});
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "receiver ROI [0, 199, 0, 399] on ADC-ordered MOENCH 03 data",
        ),
        (
            "image size neither the detector's nor the ROI's",
            Box::new(|| {
                let mut m = good_master();
                m["Receiver Roi"] = json!({"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399});
                m["Image Size in bytes"] = json!(1000);
                parse(m.to_string().as_bytes())
            }),
            Kind::Format,
            "and with the receiver ROI [0, 199, 0, 399] (400 x 200 pixels, 160000 bytes)",
        ),
        // Finder configuration.
        (
            "nsigma NaN",
            Box::new(|| {
                FinderConfig::new(400, 400)
                    .n_sigma(f64::NAN)
                    .validate()
                    .unwrap_err()
            }),
            Kind::Param,
            "must be finite and >= 0, got NaN",
        ),
        (
            "nsigma negative",
            Box::new(|| {
                FinderConfig::new(400, 400)
                    .n_sigma(-1.0)
                    .validate()
                    .unwrap_err()
            }),
            Kind::Param,
            "must be finite and >= 0, got -1",
        ),
        (
            "nsigma infinite",
            Box::new(|| {
                FinderConfig::new(400, 400)
                    .n_sigma(f64::INFINITY)
                    .validate()
                    .unwrap_err()
            }),
            Kind::Param,
            "must be finite and >= 0, got inf",
        ),
        (
            "zero pedestal frames",
            Box::new(|| {
                FinderConfig::new(400, 400)
                    .pedestal_frames(0)
                    .validate()
                    .unwrap_err()
            }),
            Kind::Param,
            "the pedestal window needs at least one frame",
        ),
        (
            "zero-sized frames",
            Box::new(|| FinderConfig::new(0, 400).validate().unwrap_err()),
            Kind::Param,
            "at least one pixel, got 0 x 400",
        ),
        (
            "cluster size 4",
            Box::new(|| ClusterSize::from_side(4).unwrap_err()),
            Kind::Param,
            "cluster size 4 is not supported",
        ),
        (
            "cluster size 0",
            Box::new(|| ClusterSize::from_side(0).unwrap_err()),
            Kind::Param,
            "cluster size 0 is not supported",
        ),
        (
            "cluster size 11",
            Box::new(|| ClusterSize::from_side(11).unwrap_err()),
            Kind::Param,
            "cluster size 11 is not supported",
        ),
    ];
    v.shrink_to_fit();
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
