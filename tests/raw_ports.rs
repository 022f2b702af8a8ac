//! Raw acquisitions of a detector read out through several UDP interfaces (slsReceiver with
//! `numinterfaces 2`: data files `_d0_` and `_d1_`, each record one port's half of the frame,
//! master "Geometry" 1 x 2): written by `RawWriter::ports` and `cluda gen --raw --interfaces
//! 2`, read back as the whole frames of the same acquisition written as one port (and `find`
//! writes the same cluster file on both); a frame or packets lost in one port, a port's file
//! cut off or absent are reported naming the port, never a panic and never silent; `replay
//! --interfaces 2` of the two-port files into `stream` with two `--zmq` endpoints gives
//! `find`'s cluster file; masters of geometries cluda cannot read are refused naming the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cluda::Error;
use cluda::io::raw::{
    DetectorHeader, DetectorType, RawMaster, RawReader, RawWriter, RawWriterConfig, Roi,
};
use support::cli::{find_args, gen_args};
use support::raw::{pattern, small_detector};
use support::relay::{cluster_files, relay, stream_args};
use support::stream::*;

const LIMIT: Duration = Duration::from_secs(120);

/// Every frame of `master`, with their frame numbers, and the reader (at its end).
fn read_all(master: &Path) -> (Vec<u16>, Vec<u64>, RawReader) {
    let mut r = RawReader::open(master).expect("open");
    let mut frames = Vec::new();
    let infos = r.next_frames(usize::MAX, &mut frames).expect("read");
    (frames, infos.iter().map(|i| i.frame_number).collect(), r)
}

/// Writes frames 1..=n of `config` (`max` per file) as `ports` ports; returns the master.
fn write(dir: &Path, base: &str, config: RawWriterConfig, ports: usize, n: u64) -> PathBuf {
    let px = config.rows * config.cols;
    let mut w = RawWriter::create(dir, base, 0, config)
        .expect("create")
        .ports(ports)
        .expect("ports");
    for k in 1..=n {
        w.write_frame(k, &pattern(k, px)).expect("write");
    }
    w.finish(None).expect("finish")
}

#[test]
fn two_ports_read_as_the_frames_written_as_one() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    // 6 rows x 5 columns, 4 frames per file: 10 frames make files f0..f2 in each port.
    let one = write(d, "one", small_detector(6, 5, 4, 2), 1, 10);
    let two = write(d, "two", small_detector(6, 5, 4, 2), 2, 10);
    for port in 0..2 {
        for (f, frames) in [(0, 4u64), (1, 4), (2, 2)] {
            let p = d.join(format!("two_d{port}_f{f}_0.raw"));
            let len = std::fs::metadata(&p).expect("port file").len();
            assert_eq!(len, frames * (112 + 3 * 5 * 2), "{}", p.display());
        }
    }
    assert!(!d.join("two_d2_f0_0.raw").exists());
    // The second port's headers say row 1, column 0; its first pixel is the frame's row 3.
    let disk = std::fs::read(d.join("two_d1_f0_0.raw")).expect("read");
    let h = DetectorHeader::from_bytes(&disk).expect("header");
    assert_eq!(
        (h.frame_number, h.row, h.column, h.packet_number),
        (1, 1, 0, 1)
    );
    assert_eq!(
        u16::from_le_bytes([disk[112], disk[113]]),
        pattern(1, 30)[15]
    );

    let m = RawMaster::open(&two).expect("master");
    assert_eq!((m.ports_x, m.ports_y, m.ports()), (1, 2, 2));
    assert_eq!((m.rows, m.cols, m.port_rows, m.port_cols), (6, 5, 3, 5));
    assert_eq!(m.port_origin(1), Some((3, 0)));
    let (a, na, ra) = read_all(&one);
    let (b, nb, rb) = read_all(&two);
    assert_eq!(na, (1..=10).collect::<Vec<_>>());
    assert_eq!(na, nb);
    assert!(a == b, "two ports' frames differ from one port's");
    assert!(rb.report().is_clean(), "{}", rb.report().summary());
    assert_eq!(ra.report().summary(), rb.report().summary());
    // The iterator and the exact count agree.
    let r = RawReader::open(&two).expect("open");
    assert_eq!(r.count_deliverable().expect("count"), 10);
    let frames: Vec<_> = r.map(|f| f.expect("frame")).collect();
    assert_eq!(frames.len(), 10);
    assert_eq!(frames[9].image, pattern(10, 30));
}

#[test]
fn moench_two_interfaces_are_400_by_200_ports_of_25_packets() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    for version in [7.2, 8.0] {
        let config = RawWriterConfig {
            version,
            ..RawWriterConfig::moench03()
        };
        let base = format!("m{}", version as u32);
        let master = write(d, &base, config, 2, 3);
        let text = std::fs::read_to_string(&master).expect("master text");
        assert!(
            text.contains("\"Geometry\": {\n        \"x\": 1,\n        \"y\": 2\n    },"),
            "{text}"
        );
        assert!(text.contains("\"Number of UDP Interfaces\": 2,"), "{text}");
        let m = RawMaster::open(&master).expect("master");
        assert_eq!(m.detector_type, DetectorType::Moench03);
        assert_eq!(
            (m.rows, m.cols, m.port_rows, m.image_size),
            (400, 400, 200, 160_000)
        );
        assert_eq!(m.frame_bytes(), 112 + 160_000);
        assert_eq!(m.port(1).and_then(|p| p.expected_packets()), Some(25));
        let (frames, numbers, r) = read_all(&master);
        assert_eq!(numbers, vec![1, 2, 3]);
        assert!(
            frames
                == (1..=3)
                    .flat_map(|k| pattern(k, 160_000))
                    .collect::<Vec<_>>()
        );
        assert!(r.report().is_clean(), "{}", r.report().summary());
    }
}

/// Two ports where port 1 lost frame 4 and packets of frame 7, and both lost frame 9.
fn lossy(dir: &Path) -> PathBuf {
    let c = small_detector(4, 3, 0, 2);
    let mut w = RawWriter::create(dir, "lossy", 0, c)
        .expect("create")
        .ports(2)
        .expect("ports");
    let half = 6;
    for k in 1..=10u64 {
        let f = pattern(k, 12);
        match k {
            4 => w
                .write_part(0, &DetectorHeader::complete(k, 1), &f[..half])
                .expect("part"),
            7 => {
                w.write_part(0, &DetectorHeader::complete(k, 1), &f[..half])
                    .expect("part");
                let mut lost = DetectorHeader::complete(k, 1);
                // One packet counted, none in the mask: a hole.
                lost.set_packet(0, false);
                w.write_part(1, &lost, &f[half..]).expect("part");
            }
            9 => {}
            _ => w.write_frame(k, &f).expect("frame"),
        }
    }
    w.finish(Some(10)).expect("finish")
}

#[test]
fn a_part_lost_in_one_port_is_an_incomplete_frame_naming_the_port() {
    let dir = tempfile::tempdir().expect("dir");
    let master = lossy(dir.path());
    let r = RawReader::open(&master).expect("open");
    assert_eq!(r.count_deliverable().expect("count"), 7);
    let (frames, numbers, r) = read_all(&master);
    assert_eq!(numbers, vec![1, 2, 3, 5, 6, 8, 10]);
    for (i, k) in numbers.iter().enumerate() {
        assert_eq!(
            &frames[i * 12..(i + 1) * 12],
            &pattern(*k, 12)[..],
            "frame {k}"
        );
    }
    let rep = r.report();
    assert_eq!(rep.frames_delivered, 7);
    assert_eq!(rep.missing_count(), 1, "frame 9 is in neither port");
    let lost: Vec<_> = rep
        .incomplete
        .iter()
        .map(|f| (f.frame_number, f.delivered, f.parts.clone()))
        .collect();
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert_eq!((lost[0].0, lost[0].1), (4, false));
    assert_eq!(lost[0].2.len(), 1);
    assert_eq!((lost[0].2[0].port, lost[0].2[0].packets_caught), (1, None));
    assert_eq!((lost[1].0, lost[1].2[0].port), (7, 1));
    assert_eq!(lost[1].2[0].packets_caught, Some(1));
    let text = rep.summary();
    for want in [
        "frames with lost packets or parts: 2 (2 skipped)",
        "4 (port 1: absent)",
        "7 (port 1: 1 packets, mask incomplete)",
        "missing frame numbers: 1 in 1 gap(s), first: 9",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }

    // Delivered on request: the absent half is the receiver's padding, 0xFFFF.
    let mut r = RawReader::open(&master)
        .expect("open")
        .deliver_incomplete(true);
    assert_eq!(r.count_deliverable().expect("count"), 9);
    let mut frames = Vec::new();
    let infos = r.next_frames(100, &mut frames).expect("read");
    let numbers: Vec<u64> = infos.iter().map(|i| i.frame_number).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4, 5, 6, 7, 8, 10]);
    assert!(!infos[3].complete && !infos[6].complete);
    assert_eq!(&frames[3 * 12..3 * 12 + 6], &pattern(4, 12)[..6]);
    assert!(frames[3 * 12 + 6..4 * 12].iter().all(|&v| v == 0xFFFF));
}

/// Ports that lost different frames (slsReceiver's `discardpartial`: each port drops its own
/// partial parts) hold fewer records each than there are frame numbers on disk: the frames on
/// disk are the distinct numbers, so no frame is reported missing at the end.
#[test]
fn ports_that_lost_different_frames_leave_none_missing_at_the_end() {
    let dir = tempfile::tempdir().expect("dir");
    let mut w = RawWriter::create(dir.path(), "apart", 0, small_detector(4, 3, 0, 2))
        .expect("create")
        .ports(2)
        .expect("ports");
    for k in 1..=6u64 {
        let f = pattern(k, 12);
        match k {
            2 => w.write_part(0, &DetectorHeader::complete(k, 1), &f[..6]),
            5 => w.write_part(1, &DetectorHeader::complete(k, 1), &f[6..]),
            _ => w.write_frame(k, &f),
        }
        .expect("write");
    }
    let master = w.finish(Some(6)).expect("finish");
    let (_, numbers, r) = read_all(&master);
    assert_eq!(numbers, vec![1, 3, 4, 6]);
    let rep = r.report();
    assert_eq!(rep.frames_on_disk, 6, "5 records per port, 6 frame numbers");
    assert_eq!(rep.missing_count(), 0);
    assert_eq!(rep.unaccounted(), 0, "{}", rep.summary());
    let text = rep.summary();
    assert!(!text.contains("missing at the end"), "{text}");
    assert!(
        text.contains("2 (port 1: absent)") && text.contains("5 (port 0: absent)"),
        "{text}"
    );
}

#[test]
fn a_port_file_cut_off_or_absent_is_named() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let master = write(d, "cut", small_detector(4, 3, 0, 2), 2, 5);
    let d1 = d.join("cut_d1_f0_0.raw");
    let record = 112 + 6 * 2;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&d1)
        .expect("open d1");
    // Four whole records, then frame 5's header and 8 bytes of its part.
    f.set_len(4 * record + 120).expect("truncate");
    drop(f);
    let e = RawReader::open(&master).expect_err("a cut port file is refused");
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(e.to_string().contains("cut_d1_f0_0.raw"), "{e}");

    // Salvaged: the last frame lacks port 1's part, and the cut record is listed.
    let mut r = RawReader::open_allowing_partial_records(&master).expect("open");
    let mut frames = Vec::new();
    let infos = r.next_frames(100, &mut frames).expect("read");
    assert_eq!(infos.len(), 4);
    let rep = r.report();
    assert_eq!(rep.incomplete.len(), 1);
    assert_eq!(rep.incomplete[0].frame_number, 5);
    assert_eq!(rep.incomplete[0].parts[0].port, 1);
    assert_eq!(rep.truncated.len(), 1);
    assert_eq!(rep.truncated[0].path, d1);
    assert_eq!(rep.truncated[0].frame_number, Some(5));
    let text = rep.summary();
    assert!(text.contains("5 (port 1: absent)"), "{text}");
    assert!(
        text.contains("cut_d1_f0_0.raw: ends inside record 4"),
        "{text}"
    );

    // A port with no data file at all.
    std::fs::remove_file(&d1).expect("remove");
    let e = RawReader::open(&master).expect_err("a port without files is refused");
    assert!(e.to_string().contains("cut_d1_f0_0.raw"), "{e}");

    // The command line: an error naming the file, not a panic.
    let out = d.join("c.clust");
    let done = spawn(
        d,
        "find",
        &find_args(&master, &master, &["--out", s(&out), "--device", "cpu"]),
    )
    .wait(LIMIT);
    assert!(!done.status.success());
    assert!(done.stderr.contains("cut_d1_f0_0.raw"), "{}", done.stderr);
    assert!(!done.stderr.contains("panicked"), "{}", done.stderr);
}

#[test]
fn headers_that_place_a_part_elsewhere_are_reported() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let mut w = RawWriter::create(d, "odd", 0, small_detector(4, 3, 0, 2))
        .expect("create")
        .ports(2)
        .expect("ports");
    for k in 1..=3u64 {
        w.write_frame(k, &pattern(k, 12)).expect("frame");
    }
    let master = w.finish(None).expect("finish");
    // Port 1's second header says row 0.
    let d1 = d.join("odd_d1_f0_0.raw");
    let mut bytes = std::fs::read(&d1).expect("read");
    let at = 112 + 12 + 34;
    bytes[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    std::fs::write(&d1, &bytes).expect("write");
    let (frames, numbers, r) = read_all(&master);
    assert_eq!(numbers, vec![1, 2, 3]);
    assert_eq!(&frames[12..24], &pattern(2, 12)[..], "placed by its file");
    let m = &r.report().misplaced;
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].port, m[0].first_frame_number, m[0].count), (1, 2, 1));
    let text = r.report().summary();
    assert!(
        text.contains("port 1: 1 parts whose headers say row 0 column 0"),
        "{text}"
    );
}

#[test]
fn unsupported_geometries_are_refused_naming_the_key() {
    let master = |geometry: (u64, u64), pixels: (u64, u64), extra: &str| {
        format!(
            r#"{{"Version": 7.2, "Detector Type": "Moench", "Timing Mode": "auto",
            "Geometry": {{"x": {}, "y": {}}}, "Image Size in bytes": {},
            "Pixels": {{"x": {}, "y": {}}}, "Max Frames Per File": 1000,
            "Frame Discard Policy": "discardpartial", "Frame Padding": 1,
            "Total Frames": 1, "Frames in File": 1{extra}}}"#,
            geometry.0,
            geometry.1,
            pixels.0 * pixels.1 * 2,
            pixels.0,
            pixels.1
        )
    };
    let parse = |text: String| RawMaster::parse("/d/run_master_0.json", text.as_bytes());
    // The receiver's MOENCH with two interfaces is read.
    let m = parse(master(
        (1, 2),
        (400, 200),
        r#", "Number of UDP Interfaces": 2"#,
    ))
    .expect("ok");
    assert_eq!((m.rows, m.cols, m.ports()), (400, 400, 2));
    // Without "Number of UDP Interfaces", 200-row ports stacked in twos are still MOENCH 03.
    let m = parse(master((1, 2), (400, 200), "")).expect("ok");
    assert_eq!(m.detector_type, DetectorType::Moench03);
    for (why, text, want) in [
        (
            "three ports of a two-interface module",
            master((1, 3), (400, 200), r#", "Number of UDP Interfaces": 2"#),
            "\"Geometry\" 1 x 3, \"Number of UDP Interfaces\" 2",
        ),
        (
            "more ports than any detector",
            master((1, 100), (400, 200), ""),
            "key \"Geometry\": \"y\" must be in 1..=64, got 100",
        ),
        (
            "no ports",
            master((0, 1), (400, 400), ""),
            "key \"Geometry\": \"x\" must be in 1..=64, got 0",
        ),
        (
            "a receiver ROI of two ports",
            master(
                (1, 2),
                (400, 200),
                r#", "Receiver Roi": {"xmin": 0, "xmax": 199, "ymin": 0, "ymax": 399}"#,
            ),
            "receiver ROI [0, 199, 0, 399] with \"Geometry\" 1 x 2 ports",
        ),
        (
            "ADC-ordered MOENCH over two ports",
            master((1, 2), (400, 400), r#", "Analog Samples": 5000"#),
            "not MOENCH 03",
        ),
    ] {
        let e = parse(text).expect_err(why);
        let msg = e.to_string();
        assert!(msg.contains("run_master_0.json"), "{why}: {msg}");
        assert!(msg.contains(want), "{why}: {want:?} not in {msg}");
    }
    // The writer refuses what the reader would.
    let dir = tempfile::tempdir().expect("dir");
    let w = RawWriter::create(dir.path(), "x", 0, small_detector(5, 3, 0, 2)).expect("create");
    let e = w.ports(2).expect_err("5 rows in 2 ports");
    assert!(
        e.to_string().contains("5 rows do not split into 2 ports"),
        "{e}"
    );
    let roi = Some(Roi {
        xmin: 0,
        xmax: 1,
        ymin: 0,
        ymax: 1,
    });
    let w = RawWriter::create(dir.path(), "x", 0, small_detector(4, 3, 0, 2)).expect("create");
    assert!(w.ports(2).and_then(|w| w.roi(roi)).is_err());
}

/// `cluda gen` into `dir` with `extra` arguments (400 x 400 MOENCH frames).
fn generate(dir: &Path, extra: &[&str]) {
    let mut args = gen_args(dir, "--raw --frames 60 --pedestal-frames 100");
    args.extend_from_slice(extra);
    spawn(dir.parent().expect("parent"), "gen", &args).wait_ok(LIMIT);
}

#[test]
fn gen_two_interfaces_finds_what_one_port_finds_and_replays_into_a_two_part_stream() {
    let top = tempfile::tempdir().expect("dir");
    let (one, two) = (top.path().join("one"), top.path().join("two"));
    generate(&one, &[]);
    generate(&two, &["--interfaces", "2"]);
    for name in [
        "data_d0_f0_0.raw",
        "data_d1_f0_0.raw",
        "pedestal_d1_f0_0.raw",
    ] {
        assert!(two.join(name).is_file(), "{name}");
    }
    let find = |dir: &Path| {
        find_bytes(
            dir,
            &dir.join("pedestal_master_0.json"),
            &dir.join("data_master_0.json"),
            &["--device", "cpu"],
        )
    };
    let want = find(&one);
    assert!(want.len() > 1000, "clusters were found");
    assert!(
        find(&two) == want,
        "find on two ports differs from one port"
    );

    // replay --interfaces 2 of the two-port files into a two-endpoint stream.
    let d = top.path();
    let out = d.join("out");
    let pedestal = two.join("pedestal_master_0.json");
    let args = stream_args(&pedestal, "cpu", "1", &[]);
    let data = two.join("data_master_0.json");
    let replay = ["--data", s(&data), "--no-drop", "--interfaces", "2"];
    let run = relay((d, "stream"), 2, &out, &args, &replay, LIMIT);
    run.assert_replayed(1, 60);
    let (done, sums) = (&run.stream, &run.sums);
    assert_eq!(sums.len(), 1, "{}", done.stdout);
    assert_eq!(num(&sums[0], "frames"), 60, "{}", done.stderr);
    for k in ["missing", "incomplete", "mismatched", "dropped", "late"] {
        assert_eq!(num(&sums[0], k), 0, "{k}: {}", done.stderr);
    }
    let files = cluster_files(&out);
    assert_eq!(files.len(), 1, "{files:?}");
    let got = std::fs::read(&files[0]).expect("stream's file");
    assert!(
        got == want,
        "stream of the two-port replay differs from find"
    );
}

#[test]
fn find_on_two_ports_warns_of_a_lost_part_with_its_port() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let master = lossy(d);
    let out = d.join("c.clust");
    let done = spawn(
        d,
        "find",
        &find_args(&master, &master, &["--out", s(&out), "--device", "cpu"]),
    )
    .wait_ok(LIMIT);
    assert!(done.stderr.contains("warning"), "{}", done.stderr);
    assert!(
        done.stderr.contains("4 (port 1: absent)"),
        "{}",
        done.stderr
    );
    assert!(done.stdout.contains("frames=7 "), "{}", done.stdout);
}

/// A 2 x 2 grid of ports (two modules side by side, each read out through two interfaces),
/// written by hand as aare's `DetectorGeometry` lays module files out: port `d` at row
/// `d % 2`, column `d / 2` of the grid, its headers saying so.
#[test]
fn a_grid_of_ports_is_placed_column_by_column() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let master = d.join("grid_master_0.json");
    let text = r#"{"Version": 7.2, "Detector Type": "Generic16", "Timing Mode": "auto",
        "Geometry": {"x": 2, "y": 2}, "Image Size in bytes": 12,
        "Pixels": {"x": 3, "y": 2}, "Max Frames Per File": 0,
        "Frame Discard Policy": "nodiscard", "Frame Padding": 1,
        "Total Frames": 2, "Frames in File": 2, "Dynamic Range": 16}"#;
    std::fs::write(&master, text).expect("master");
    // The whole frame k: 4 rows x 6 columns, pixel (r, c) = 100 k + 10 r + c.
    let whole = |k: u64| -> Vec<u16> {
        (0..4)
            .flat_map(|r| (0..6).map(move |c| (100 * k + 10 * r + c) as u16))
            .collect()
    };
    for port in 0..4usize {
        let (gr, gc) = (port % 2, port / 2);
        let mut bytes = Vec::new();
        for k in 1..=2u64 {
            let mut h = DetectorHeader::complete(k, 1);
            h.row = gr as u16;
            h.column = gc as u16;
            bytes.extend_from_slice(&h.to_bytes());
            let f = whole(k);
            for r in 0..2 {
                for c in 0..3 {
                    bytes.extend_from_slice(&f[(gr * 2 + r) * 6 + gc * 3 + c].to_le_bytes());
                }
            }
        }
        std::fs::write(d.join(format!("grid_d{port}_f0_0.raw")), bytes).expect("data");
    }
    let (frames, numbers, r) = read_all(&master);
    assert_eq!((r.rows(), r.cols()), (4, 6));
    assert_eq!(numbers, vec![1, 2]);
    assert_eq!(frames, [whole(1), whole(2)].concat());
    assert!(r.report().is_clean(), "{}", r.report().summary());
}
