//! slsDetector raw files: written in the receiver's layout by `RawWriter` (and by hand, as
//! aare's own test helper writes them), read back by `RawReader`, with dropped frames, lost
//! packets and truncated files reported rather than shifted.

use std::path::Path;

use cluda::Error;
use cluda::generate::{GenConfig, Generator};
use cluda::io::open_frames;
use cluda::io::raw::{
    DetectorHeader, DetectorType, HEADER_BYTES, RawMaster, RawReader, RawWriter, RawWriterConfig,
};
use support::raw::{pattern, patterned, small_detector};

/// A fresh, empty directory under the system temp dir, removed on drop.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("cluda-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

#[test]
fn round_trip_over_several_data_files() {
    let dir = temp_dir("multi");
    let master = patterned(dir.path(), ("run", 3), small_detector(4, 6, 3, 1), 1..=10);
    assert_eq!(master, dir.path().join("run_master_3.json"));
    // 10 frames at 3 per file: f0, f1, f2 with 3 frames, f3 with 1, each record 112 + 48 bytes.
    for (f, frames) in [(0, 3u64), (1, 3), (2, 3), (3, 1)] {
        let p = dir.path().join(format!("run_d0_f{f}_3.raw"));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), frames * 160, "{p:?}");
    }
    assert!(!dir.path().join("run_d0_f4_3.raw").exists());

    let m = RawMaster::open(&master).unwrap();
    assert_eq!((m.rows, m.cols, m.image_size), (4, 6, 48));
    assert_eq!((m.max_frames_per_file, m.total_frames), (3, 10));
    assert_eq!(m.frames_in_file, Some(10));

    let mut r = RawReader::open(&master).unwrap();
    assert_eq!(r.frames_on_disk(), 10);
    let mut frames = Vec::new();
    let first = r.next_frames(4, &mut frames).unwrap();
    let rest = r.next_frames(100, &mut frames).unwrap();
    assert_eq!((first.len(), rest.len()), (4, 6));
    assert!(r.next_frames(5, &mut frames).unwrap().is_empty());
    for (i, info) in first.iter().chain(&rest).enumerate() {
        let k = i as u64 + 1;
        assert_eq!(info.frame_number, k);
        assert_eq!(
            (info.file, info.frame_in_file),
            (i as u64 / 3, i as u64 % 3)
        );
        assert!(info.complete);
        assert_eq!(&frames[i * 24..(i + 1) * 24], &pattern(k, 24)[..]);
    }
    let rep = r.report();
    assert!(rep.is_clean(), "{}", rep.summary());
    assert_eq!(
        (
            rep.frames_delivered,
            rep.first_frame_number,
            rep.last_frame_number
        ),
        (10, Some(1), Some(10))
    );
}

#[test]
fn reads_files_laid_out_as_aares_own_test_helper_writes_them() {
    // aare tests/raw_file_helpers.hpp: 3 x 2 pixels, 1 frame per file, two files with an
    // all-zero header except the frame number (100, 101), pixels 1..6. aare's helper says
    // Jungfrau, which cluda refuses (gain bits); the layout is read as cluda's Generic16.
    let dir = temp_dir("aare");
    let master = serde_json::json!({
        "Version": 7.2, "Detector Type": "Generic16", "Timing Mode": "auto",
        "Geometry": {"x": 1, "y": 1}, "Image Size in bytes": 12,
        "Pixels": {"x": 3, "y": 2}, "Max Frames Per File": 1, "Total Frames": 2,
        "Frames in File": 2, "Frame Padding": 1, "Frame Discard Policy": "nodiscard"
    });
    let mp = dir.path().join("run_master_0.json");
    std::fs::write(&mp, master.to_string()).unwrap();
    for file in 0..2u64 {
        let mut bytes = vec![0u8; HEADER_BYTES];
        bytes[..8].copy_from_slice(&(100 + file).to_le_bytes());
        for v in 1u16..=6 {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        std::fs::write(dir.path().join(format!("run_d0_f{file}_0.raw")), bytes).unwrap();
    }
    let frames: Vec<_> = RawReader::open(&mp).unwrap().map(|f| f.unwrap()).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].info.frame_number, 100);
    assert_eq!(frames[1].info.frame_number, 101);
    assert_eq!(frames[1].image, vec![1, 2, 3, 4, 5, 6]);
}

#[test]
fn moench03_image_order_and_adc_order_round_trip() {
    let g = Generator::new(GenConfig::new(400, 400, 7)).unwrap();
    let images = g.frames(0, 3, true);
    for det in [DetectorType::Moench03, DetectorType::Moench03Old] {
        let dir = temp_dir("moench");
        let cfg = RawWriterConfig {
            detector: det.clone(),
            max_frames_per_file: 2,
            ..RawWriterConfig::moench03()
        };
        let mut w = RawWriter::create(dir.path(), "cu", 0, cfg).unwrap();
        for (k, img) in images.chunks(160_000).enumerate() {
            w.write_frame(k as u64 + 1, img).unwrap();
        }
        let mp = w.finish(None).unwrap();
        let m = RawMaster::open(&mp).unwrap();
        assert_eq!(m.detector_type, det);
        assert_eq!(m.frame_bytes(), 112 + 320_000);
        // On disk: image order for Moench03, ADC order for the old readout, whose first
        // sample is image pixel (199, 300) (aare's GenerateMoench03PixelMap).
        let disk = std::fs::read(dir.path().join("cu_d0_f0_0.raw")).unwrap();
        let first = u16::from_le_bytes([disk[112], disk[113]]);
        match det {
            DetectorType::Moench03 => assert_eq!(first, images[0]),
            _ => assert_eq!(first, images[199 * 400 + 300]),
        }
        let mut r = RawReader::open(&mp).unwrap();
        let mut back = Vec::new();
        let infos = r.next_frames(10, &mut back).unwrap();
        assert_eq!(infos.len(), 3);
        assert!(
            back == images,
            "{det:?}: frames differ after the round trip"
        );
        assert!(r.report().is_clean(), "{}", r.report().summary());
    }
}

#[test]
fn a_dropped_frame_is_reported_and_nothing_shifts() {
    let dir = temp_dir("drop");
    let mut w = RawWriter::create(dir.path(), "run", 0, small_detector(4, 6, 2, 1)).unwrap();
    // The receiver discarded frame 4 (and 8..=9): the files hold 1, 2, 3, 5, 6, 7, 10.
    let numbers = [1u64, 2, 3, 5, 6, 7, 10];
    for &k in &numbers {
        w.write_frame(k, &pattern(k, 24)).unwrap();
    }
    let mp = w.finish(Some(10)).unwrap();
    let mut r = RawReader::open(&mp).unwrap();
    let mut frames = Vec::new();
    let infos = r.next_frames(100, &mut frames).unwrap();
    let got: Vec<u64> = infos.iter().map(|i| i.frame_number).collect();
    assert_eq!(got, numbers);
    for (i, &k) in numbers.iter().enumerate() {
        assert_eq!(
            &frames[i * 24..(i + 1) * 24],
            &pattern(k, 24)[..],
            "frame {k}"
        );
    }
    let rep = r.report();
    assert_eq!(rep.missing_count(), 3);
    assert_eq!(rep.missing.len(), 2);
    assert_eq!((rep.missing[0].first, rep.missing[0].count), (4, 1));
    assert_eq!((rep.missing[1].first, rep.missing[1].count), (8, 2));
    assert!(
        rep.summary().contains("missing frame numbers: 3"),
        "{}",
        rep.summary()
    );
}

#[test]
fn lost_packets_are_reported_and_skipped_unless_asked_for() {
    let dir = temp_dir("packets");
    let cfg = RawWriterConfig {
        packets_per_frame: 4,
        ..small_detector(4, 6, 0, 1)
    };
    let mut w = RawWriter::create(dir.path(), "run", 0, cfg).unwrap();
    w.write_frame(1, &pattern(1, 24)).unwrap();
    let mut h = DetectorHeader::complete(2, 4);
    h.set_packet(2, false);
    h.packet_number = 3;
    w.write_frame_with_header(&h, &pattern(2, 24)).unwrap();
    w.write_frame(3, &pattern(3, 24)).unwrap();
    let mp = w.finish(None).unwrap();

    let mut r = RawReader::open(&mp).unwrap();
    let mut frames = Vec::new();
    let got: Vec<u64> = r
        .next_frames(10, &mut frames)
        .unwrap()
        .iter()
        .map(|i| i.frame_number)
        .collect();
    assert_eq!(got, [1, 3]);
    assert_eq!(&frames[24..], &pattern(3, 24)[..]);
    let rep = r.report();
    assert_eq!(rep.incomplete.len(), 1);
    assert_eq!(
        (
            rep.incomplete[0].frame_number,
            rep.incomplete[0].packets_caught
        ),
        (2, 3)
    );
    assert!(!rep.incomplete[0].delivered);
    assert!(
        rep.missing.is_empty(),
        "a partial frame is not a missing one"
    );

    let mut r = RawReader::open(&mp).unwrap().deliver_incomplete(true);
    let all: Vec<_> = r.by_ref().map(|f| f.unwrap()).collect();
    assert_eq!(all.len(), 3);
    assert!(!all[1].info.complete);
    assert_eq!(all[1].image, pattern(2, 24));
    // With the packet count known, a frame marked with fewer packets is partial too.
    let mut r = RawReader::open(&mp).unwrap().expected_packets(Some(5));
    assert_eq!(r.by_ref().count(), 0);
    assert_eq!(r.report().incomplete.len(), 3);
}

#[test]
fn a_truncated_final_file_is_reported_with_its_file_and_frame() {
    let dir = temp_dir("trunc");
    let mp = patterned(dir.path(), ("run", 0), small_detector(4, 6, 3, 1), 1..=7);
    let last = dir.path().join("run_d0_f2_0.raw");
    // The last file holds frame 7; cut it inside the pixels (header complete).
    let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(112 + 10).unwrap();
    drop(f);
    // Refused by default (a record size that does not match would be read as garbage) ...
    let e = RawReader::open(&mp).unwrap_err().to_string();
    assert!(
        e.contains("run_d0_f2_0.raw: 122 bytes is not a whole number of 160-byte records"),
        "{e}"
    );
    // ... read up to the last whole record and reported when partial records are allowed.
    let mut r = RawReader::open_allowing_partial_records(&mp).unwrap();
    assert_eq!(r.frames_on_disk(), 6);
    let got: Vec<u64> = r.by_ref().map(|f| f.unwrap().info.frame_number).collect();
    assert_eq!(got, [1, 2, 3, 4, 5, 6]);
    let rep = r.report();
    assert_eq!(rep.truncated.len(), 1);
    let t = &rep.truncated[0];
    assert_eq!(
        (t.path.clone(), t.frame_in_file, t.bytes_present),
        (last.clone(), 0, 122)
    );
    assert_eq!(t.frame_number, Some(7));
    assert!(
        rep.summary().contains("run_d0_f2_0.raw"),
        "{}",
        rep.summary()
    );
    assert!(
        rep.summary().contains("frame number 7"),
        "{}",
        rep.summary()
    );

    // Cut inside the header: the frame number is unknown, the file still named.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(50)
        .unwrap();
    let mut r = RawReader::open_allowing_partial_records(&mp).unwrap();
    let mut frames = Vec::new();
    assert_eq!(r.next_frames(100, &mut frames).unwrap().len(), 6);
    let t = &r.report().truncated[0];
    assert_eq!((t.bytes_present, t.frame_number), (50, None));
}

#[test]
fn a_file_shrinking_while_read_is_an_error_naming_it() {
    let dir = temp_dir("shrink");
    let mp = patterned(dir.path(), ("run", 0), small_detector(4, 6, 0, 1), 1..=4);
    let mut r = RawReader::open(&mp).unwrap();
    let p = dir.path().join("run_d0_f0_0.raw");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(200)
        .unwrap();
    let mut frame = vec![0u16; 24];
    assert!(r.next_frame_into(&mut frame).unwrap().is_some());
    match r.next_frame_into(&mut frame) {
        Err(Error::Format { path, reason }) => {
            assert_eq!(path, p);
            assert!(reason.contains("record 1"), "{reason}");
        }
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn open_frames_streams_a_raw_acquisition_and_refuses_other_files() {
    let dir = temp_dir("source");
    let mp = patterned(
        dir.path(),
        ("run", 5),
        small_detector(4, 6, 2, 1),
        [3u64, 4, 6],
    );
    let mut src = open_frames(&mp).unwrap();
    assert_eq!((src.rows(), src.cols(), src.remaining_hint()), (4, 6, 3));
    let (mut frames, mut numbers) = (Vec::new(), Vec::new());
    assert_eq!(src.read_frames(2, &mut frames, &mut numbers).unwrap(), 2);
    assert_eq!(src.read_frames(2, &mut frames, &mut numbers).unwrap(), 1);
    assert_eq!(src.read_frames(2, &mut frames, &mut numbers).unwrap(), 0);
    assert_eq!(numbers, [3, 4, 6]);
    assert_eq!(frames.len(), 3 * 24);
    assert!(src.report().unwrap().contains("missing frame numbers: 1"));

    match open_frames(Path::new("data.npy")) {
        Err(Error::Format { reason, .. }) => assert!(reason.contains("not a raw master file")),
        other => panic!("expected a format error, got {:?}", other.err()),
    }
    // A data file instead of its master: the error names the master to give.
    let data_file = dir.path().join("run_d0_f1_5.raw");
    assert!(data_file.is_file());
    match open_frames(&data_file) {
        Err(Error::Format { reason, .. }) => {
            assert!(reason.contains("give its master file instead"), "{reason}");
            assert!(reason.contains(&mp.display().to_string()), "{reason}");
        }
        other => panic!("expected a format error, got {:?}", other.err()),
    }
}

/// A raw data file's master, from its name alone: `<base>_d<M>_f<F>_<N>.raw` ->
/// `<base>_master_<N>.json` beside it; other names give none. Read as a .npy, a data file's
/// error says which master to give, or that it is not there.
#[test]
fn a_raw_data_file_names_its_master() {
    use cluda::io::raw::master_of_data_file;
    let p = Path::new("/data/scan_1_d0_f12_3.raw");
    assert_eq!(
        master_of_data_file(p).as_deref(),
        Some(Path::new("/data/scan_1_master_3.json"))
    );
    for other in [
        "run.raw",
        "run_d0_f1.raw",
        "_d0_f1_2.raw",
        "run_d0_fx_2.raw",
        "run_d0_f1_2.npy",
    ] {
        assert_eq!(master_of_data_file(Path::new(other)), None, "{other}");
    }

    let dir = temp_dir("orphan");
    let orphan = dir.path().join("lone_d0_f0_7.raw");
    std::fs::write(&orphan, [0u8; 200]).unwrap();
    match cluda::io::npy::read_header(&orphan) {
        Err(Error::Format { reason, .. }) => {
            assert!(reason.contains("not a NumPy .npy file"), "{reason}");
            assert!(reason.contains("lone_master_7.json"), "{reason}");
            assert!(reason.contains("not found beside it"), "{reason}");
        }
        other => panic!("expected a format error, got {:?}", other.err()),
    }
}

/// The keys written out in `list`, `", "`-separated, in order.
fn keys(list: &str) -> Vec<&str> {
    list.split(", ").collect()
}

/// The top-level keys of a master file's text, in order (lines indented by exactly 4 spaces).
fn top_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("    \""))
        .filter_map(|l| l.split_once("\":").map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn masters_have_the_receivers_keys_in_its_order() {
    // The receiver-written masters of aare's RawMasterFile tests, "Parse Moench 7.2 master
    // (SW 8.0.0)" (image order) and "(SW 7.0.3)" (ADC order): their keys, in their order.
    let common = keys(
        "Version, Timestamp, Detector Type, Timing Mode, Geometry, Image Size in bytes, \
         Pixels, Max Frames Per File, Frame Discard Policy, Frame Padding, \
         Scan Parameters, Total Frames, Receiver Roi, Exptime, Period",
    );
    let sw8 = ["Number of UDP Interfaces", "Number of rows"];
    let sw7 = ["Ten Giga", "ADC Mask", "Analog Samples"];
    let end = ["Frames in File", "Frame Header Format"];
    let cases = [
        (DetectorType::Moench03, &sw8[..]),
        (DetectorType::Moench03Old, &sw7[..]),
    ];
    for (detector, own) in cases {
        let dir = temp_dir("keys");
        let config = RawWriterConfig {
            detector: detector.clone(),
            ..RawWriterConfig::moench03()
        };
        let mut w = RawWriter::create(dir.path(), "k", 0, config).unwrap();
        w.write_frame(1, &vec![3u16; 160_000]).unwrap();
        let master = w.finish(None).unwrap();
        let text = std::fs::read_to_string(&master).unwrap();
        let want: Vec<&str> = common.iter().chain(own).chain(&end).copied().collect();
        assert_eq!(top_keys(&text), want, "{detector:?}:\n{text}");
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["Version"], serde_json::json!(7.2));
        for bound in ["xmin", "xmax", "ymin", "ymax"] {
            assert_eq!(j["Receiver Roi"][bound], 4_294_967_295u64);
        }
        assert_eq!(j["Scan Parameters"], "[disabled]");
        assert_eq!(j["Frame Header Format"]["Packets Caught Mask"], "64 bytes");
        assert!(
            text.contains("\n    \"Geometry\": {\n        \"x\": 1,\n        \"y\": 1\n    },")
        );
        // ctime's layout: "Wed Aug 19 10:32:06 2026".
        let ts = j["Timestamp"].as_str().unwrap();
        assert_eq!((ts.len(), &ts[13..14], &ts[16..17]), (24, ":", ":"), "{ts}");
        let m = RawMaster::open(&master).unwrap();
        assert_eq!(m.detector_type, detector);
        assert_eq!((m.rows, m.cols, m.dynamic_range), (400, 400, 16));
        let mut r = RawReader::open(&master).unwrap();
        assert_eq!(r.next().unwrap().unwrap().image, vec![3u16; 160_000]);
    }
}

/// Format 8.0 as slsDetectorPackage 10's receiver writes it for a MOENCH (its
/// `MasterAttributes.cpp`): renamed and new keys in its order, "Scan Parameters" an object,
/// no "Frame Header Format", "Additional JSON Header" last; read back by cluda.
#[test]
fn format_8_masters_have_the_10x_receivers_keys_in_its_order() {
    let dir = temp_dir("keys8");
    let config = RawWriterConfig {
        version: 8.0,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir.path(), "k", 0, config).unwrap();
    w.write_frame(1, &vec![3u16; 160_000]).unwrap();
    let master = w.finish(None).unwrap();
    let text = std::fs::read_to_string(&master).unwrap();
    let want = keys(
        "Version, Timestamp, Detector Type, Timing Mode, Geometry, Image Size, Pixels, \
         Max Frames Per File, Frame Discard Policy, Frame Padding, Scan Parameters, \
         Total Frames, Receiver Rois, Exposure Time, Acquisition Period, \
         Number of UDP Interfaces, Number of Rows, Readout Speed, Frames in File, \
         Additional JSON Header",
    );
    assert_eq!(top_keys(&text), want, "{text}");
    assert!(text.starts_with("{\n    \"Version\": 8.0,\n"), "{text}");
    assert!(
        text.ends_with("\n    \"Additional JSON Header\": {}\n}"),
        "{text}"
    );
    assert!(
        text.contains(
            "\"Scan Parameters\": {\n        \"enable\": 0,\n        \"dacInd\": 0,\n        \"start offset\": 0,\n        \"stop offset\": 0,\n        \"step size\": 0,\n        \"dac settle time ns\": 0\n    },"
        ),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        j["Receiver Rois"],
        serde_json::json!([{"xmin": 0, "xmax": 399, "ymin": 0, "ymax": 399}])
    );
    assert_eq!(j["Image Size"], 320_000);
    assert_eq!(j["Number of Rows"], 400);
    let m = RawMaster::open(&master).unwrap();
    assert_eq!(
        (m.detector_type, m.roi, m.version),
        (DetectorType::Moench03, None, 8.0)
    );
    let mut r = RawReader::open(&master).unwrap();
    assert_eq!(r.next().unwrap().unwrap().image, vec![3u16; 160_000]);
}

/// A receiver ROI as `rx_roi XMIN XMAX YMIN YMAX` writes it: the master keeps the detector's
/// "Pixels" and "Image Size" and names the ROI; the data files hold only the ROI's pixels.
/// Read as frames of the ROI's shape, every frame, nothing missing, for master formats 7.2
/// ("Receiver Roi") and 8.0 ("Receiver Rois").
#[test]
fn receiver_roi_files_are_read_as_the_roi() {
    use cluda::io::raw::Roi;
    // Detector 8 x 10; ROI columns 2..=6 of rows 1..=5: frames of 5 x 5.
    let roi = Roi {
        xmin: 2,
        xmax: 6,
        ymin: 1,
        ymax: 5,
    };
    for version in [7.2, 8.0] {
        let dir = temp_dir("roi");
        let config = RawWriterConfig {
            rows: 8,
            cols: 10,
            version,
            ..small_detector(4, 6, 3, 1)
        };
        let mut w = RawWriter::create(dir.path(), "run", 0, config)
            .unwrap()
            .roi(Some(roi))
            .unwrap();
        let full: Vec<Vec<u16>> = (1..=7).map(|k| pattern(k, 80)).collect();
        let mut cropped = Vec::new();
        for (k, f) in full.iter().enumerate() {
            let mut out = vec![0u16; 25];
            roi.crop(f, 10, &mut out).unwrap();
            w.write_frame(k as u64 + 1, &out).unwrap();
            cropped.push(out);
        }
        // A whole detector frame is refused by a writer of ROI frames.
        assert!(w.write_frame(8, &full[0]).is_err());
        let mp = w.finish(None).unwrap();
        // Records of 112 + 5 x 5 x 2 bytes; the master as the receiver writes it.
        let p0 = dir.path().join("run_d0_f0_0.raw");
        assert_eq!(std::fs::metadata(&p0).unwrap().len(), 3 * 162);
        let text = std::fs::read_to_string(&mp).unwrap();
        if version < 8.0 {
            assert!(text.contains("\"Image Size in bytes\": 160,"), "{text}");
            assert!(
                text.contains(
                    "\"Receiver Roi\": {\n        \"xmin\": 2,\n        \"xmax\": 6,\n        \"ymin\": 1,\n        \"ymax\": 5\n    },"
                ),
                "{text}"
            );
        } else {
            assert!(text.contains("\"Image Size\": 160,"), "{text}");
            assert!(
                text.contains(
                    "\"Receiver Rois\": [\n        {\n            \"xmin\": 2,\n            \"xmax\": 6,\n            \"ymin\": 1,\n            \"ymax\": 5\n        }\n    ],"
                ),
                "{text}"
            );
        }
        let m = RawMaster::open(&mp).unwrap();
        assert_eq!(m.roi, Some(roi));
        assert_eq!((m.rows, m.cols), (5, 5));
        assert_eq!(
            (m.detector_rows, m.detector_cols, m.image_size),
            (8, 10, 160)
        );
        assert_eq!(m.frame_bytes(), 162);
        let mut r = RawReader::open(&mp).unwrap();
        assert_eq!((r.rows(), r.cols()), (5, 5));
        let mut frames = Vec::new();
        let infos = r.next_frames(100, &mut frames).unwrap();
        assert_eq!(infos.len(), 7);
        assert_eq!(frames, cropped.concat());
        assert!(r.report().is_clean(), "{}", r.report().summary());
        // The same files under a master that names no ROI: refused, the file named.
        let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
        let o = j.as_object_mut().unwrap();
        o.remove("Receiver Roi");
        o.remove("Receiver Rois");
        std::fs::write(&mp, j.to_string()).unwrap();
        let e = RawReader::open(&mp).unwrap_err();
        match &e {
            Error::Format { path, reason } => {
                assert_eq!(path, &p0);
                assert!(
                    reason.contains("486 bytes is not a whole number of 272-byte records"),
                    "{reason}"
                );
            }
            e => panic!("{e:?}"),
        }
    }
}

/// The layout of the real receiver (slsDetectorPackage 10.0.1, `rx_roi 0 199 0 399`
/// on a MOENCH 03): master format 8.0 with "Pixels" 400 x 400 and "Image Size" 320000, data
/// records of 160,112 bytes, read as 400 rows x 200 columns with all 50 packets expected.
#[test]
fn a_moench_half_roi_reads_as_400_by_200() {
    use cluda::io::raw::Roi;
    let dir = temp_dir("moench-roi");
    let roi = Roi {
        xmin: 0,
        xmax: 199,
        ymin: 0,
        ymax: 399,
    };
    let config = RawWriterConfig {
        version: 8.0,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir.path(), "ph", 3, config)
        .unwrap()
        .roi(Some(roi))
        .unwrap();
    let frames: Vec<Vec<u16>> = (0..4u64)
        .map(|k| (0..80_000).map(|i| (i as u64 * 3 + k) as u16).collect())
        .collect();
    for (k, f) in frames.iter().enumerate() {
        w.write_frame(3721 + k as u64, f).unwrap();
    }
    let mp = w.finish(None).unwrap();
    let data = dir.path().join("ph_d0_f0_3.raw");
    assert_eq!(std::fs::metadata(&data).unwrap().len(), 4 * 160_112);
    let m = RawMaster::open(&mp).unwrap();
    assert_eq!(m.detector_type, DetectorType::Moench03);
    assert_eq!((m.image_size, m.frame_bytes()), (320_000, 160_112));
    assert_eq!(m.expected_packets(), Some(50));
    let mut r = RawReader::open(&mp).unwrap();
    let mut got = Vec::new();
    let infos = r.next_frames(10, &mut got).unwrap();
    let numbers: Vec<u64> = infos.iter().map(|i| i.frame_number).collect();
    assert_eq!(numbers, [3721, 3722, 3723, 3724]);
    assert_eq!(got, frames.concat());
    assert!(r.report().is_clean(), "{}", r.report().summary());
}
