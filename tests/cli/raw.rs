//! Raw acquisitions: `find` on them equals `find` on the same frames as `.npy` (with ROIs
//! too), frame numbers and gaps reach the cluster file, `gen --raw` then `find`.

use std::path::{Path, PathBuf};

use cluda::ClusterSize;
use cluda::io::npy::{self, read_u16_frames};
use cluda::io::read_cluster_file;
use support::cli::{find_args, gen_args, s, text};

use crate::*;
use support::raw::gen_small_config;

/// Writes `frames` (`n x rows x cols`) as a raw acquisition `<dir>/<base>_master_0.json` with
/// the given header frame numbers (one per frame); returns the master's path.
fn write_raw(
    dir: &Path,
    base: &str,
    frames: &[u16],
    rows: usize,
    cols: usize,
    numbers: &[u64],
) -> PathBuf {
    use cluda::io::raw::{DetectorType, RawWriter, RawWriterConfig};
    let config = RawWriterConfig {
        rows,
        cols,
        detector: DetectorType::Generic16,
        max_frames_per_file: 7,
        ..RawWriterConfig::moench03()
    };
    let mut w = RawWriter::create(dir, base, 0, config).unwrap();
    for (f, &n) in frames.chunks_exact(rows * cols).zip(numbers) {
        w.write_frame(n, f).unwrap();
    }
    w.finish(None).unwrap()
}

#[test]
fn find_on_raw_acquisitions_equals_find_on_npy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data, pa, da) = small_frames(d);
    // Frame numbers 0.. as the .npy path numbers them; several data files (7 frames each).
    let ped_raw = write_raw(d, "ped", &pa.data, 24, 36, &(0..40).collect::<Vec<_>>());
    let data_raw = write_raw(d, "run", &da.data, 24, 36, &(0..12).collect::<Vec<_>>());
    let find = |p: &Path, x: &Path, out: &Path| {
        let o = CLUDA.run(&find_args(p, x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        parse_summary(text(&o.stdout).trim_end())
    };
    let (npy_out, raw_out, mixed_out) = (d.join("n.clust"), d.join("r.clust"), d.join("m.clust"));
    let a = find(&ped, &data, &npy_out);
    let b = find(&ped_raw, &data_raw, &raw_out);
    let c = find(&ped, &data_raw, &mixed_out);
    assert_eq!(value(&a, "clusters"), value(&c, "clusters"));
    assert_eq!(value(&a, "clusters"), value(&b, "clusters"));
    assert_eq!(value(&b, "frames"), "12");
    assert!(value(&a, "clusters").parse::<u64>().unwrap() > 0);
    let bytes = std::fs::read(&npy_out).unwrap();
    assert_eq!(bytes, std::fs::read(&raw_out).unwrap());
    assert_eq!(bytes, std::fs::read(&mixed_out).unwrap());

    // A data file given instead of its master: the error names the master file to give.
    let data_file = d.join("run_d0_f0_0.raw");
    assert!(data_file.is_file());
    for option in ["--data", "--pedestal"] {
        let (p, x) = if option == "--data" {
            (s(&ped), s(&data_file))
        } else {
            (s(&data_file), s(&data))
        };
        CLUDA.fails(
            &["find", "--pedestal", p, "--data", x, "--device", "cpu"],
            &[
                "run_d0_f0_0.raw",
                "not a NumPy .npy file",
                "give its master file instead",
                s(&data_raw),
            ],
        );
    }
}

#[test]
fn raw_frame_numbers_and_gaps_reach_the_cluster_file_and_stderr() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let da = read_u16_frames(&data).unwrap();
    // Header numbers start at 100 and skip 105 and 106: the data has 12 frames but two gaps'
    // worth of numbers are missing, which cluda reports without shifting frames.
    let numbers: Vec<u64> = (100..105).chain(107..114).collect();
    let data_raw = write_raw(d, "gappy", &da.data, 24, 36, &numbers);
    let (raw_out, npy_out) = (d.join("g.clust"), d.join("n.clust"));
    let o = CLUDA.run(&find_args(
        &ped,
        &data_raw,
        &["--out", s(&raw_out), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("warning: data file"), "{err}");
    assert!(
        err.contains("missing frame numbers: 2 in 1 gap(s), first: 105..=106"),
        "{err}"
    );
    let o = CLUDA.run(&find_args(
        &ped,
        &data,
        &["--out", s(&npy_out), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (na, ba) = read_cluster_file(&npy_out, ClusterSize::S3).unwrap();
    let (nb, bb) = read_cluster_file(&raw_out, ClusterSize::S3).unwrap();
    assert_eq!(na, (0..12).collect::<Vec<i32>>());
    assert_eq!(nb, numbers.iter().map(|&n| n as i32).collect::<Vec<_>>());
    assert_eq!(ba, bb);
}

#[test]
fn gen_raw_then_find() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let made = CLUDA.ok(&gen_args(
        d,
        "--frames 9 --pedestal-frames 20 --rows 16 --cols 20 --raw",
    ));
    assert!(made.contains("data_master_0.json (9 frames of 16 x 20"));
    let clust = d.join("c.clust");
    let o = CLUDA.run(&find_args(
        &d.join("pedestal_master_0.json"),
        &d.join("data_master_0.json"),
        &["--out", s(&clust)],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        value(&parse_summary(text(&o.stdout).trim_end()), "frames"),
        "9"
    );
    // Raw frame numbers count from 1.
    let (numbers, _) = read_cluster_file(&clust, ClusterSize::S3).unwrap();
    assert_eq!(numbers, (1..=9).collect::<Vec<i32>>());
    fails(
        &find_args(
            &d.join("nope_master_0.json"),
            &d.join("data_master_0.json"),
            &[],
        ),
        "nope_master_0.json",
    );
}

/// Crops `frames` (`n x rows x cols`, image order) to `roi`, as a receiver with `rx_roi`
/// writes them.
fn crop_frames(frames: &[u16], cols: usize, rows: usize, roi: cluda::io::raw::Roi) -> Vec<u16> {
    let mut out = Vec::new();
    for f in frames.chunks_exact(rows * cols) {
        let mut c = vec![0u16; roi.rows() * roi.cols()];
        roi.crop(f, cols, &mut c).unwrap();
        out.extend(c);
    }
    out
}

/// The cluster file `bytes` (records of `cells` values) with every centre moved by `dx`
/// columns and `dy` rows: written here from the file layout alone, as an oracle of the
/// detector coordinates of ROI acquisitions.
fn shift_cluster_file(bytes: &[u8], cells: usize, dx: u16, dy: u16) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let mut at = 0;
    while at < out.len() {
        let n = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8;
        for _ in 0..n {
            let x = u16::from_le_bytes([out[at], out[at + 1]]) + dx;
            let y = u16::from_le_bytes([out[at + 2], out[at + 3]]) + dy;
            out[at..at + 2].copy_from_slice(&x.to_le_bytes());
            out[at + 2..at + 4].copy_from_slice(&y.to_le_bytes());
            at += 4 + 4 * cells;
        }
    }
    out
}

/// Raw acquisitions written with a receiver ROI (the master naming it, the data files holding
/// only its pixels) are found as frames of the ROI's shape, clusters written in detector
/// coordinates: the cluster file is byte for byte that of `find` on the same frames as `.npy`
/// files of the ROI's shape, every centre moved by the ROI's corner. The same data files
/// under a master that names no ROI are refused with the file named, exit code 1.
#[test]
fn find_on_roi_raw_acquisitions_equals_find_on_npy_of_roi_shape() {
    use cluda::io::raw::{RawWriter, Roi};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, _, pa, da) = small_frames(d);
    // Columns 3..=30 of rows 2..=19 of the 24 x 36 frames: 18 x 28.
    let roi = Roi {
        xmin: 3,
        xmax: 30,
        ymin: 2,
        ymax: 19,
    };
    let (pc, dc) = (
        crop_frames(&pa.data, 36, 24, roi),
        crop_frames(&da.data, 36, 24, roi),
    );
    let write = |base: &str, frames: &[u16], version: f64| {
        let mut config = gen_small_config();
        config.max_frames_per_file = 7;
        config.version = version;
        let mut w = RawWriter::create(d, base, 0, config)
            .unwrap()
            .roi(Some(roi))
            .unwrap();
        for (n, f) in frames.chunks_exact(18 * 28).enumerate() {
            w.write_frame(n as u64, f).unwrap();
        }
        w.finish(None).unwrap()
    };
    let ped_raw = write("ped", &pc, 7.2);
    let data_raw = write("run", &dc, 8.0);
    let (ped_npy, data_npy) = (d.join("ped_roi.npy"), d.join("data_roi.npy"));
    npy::write_u16_3d(&ped_npy, 40, 18, 28, &pc).unwrap();
    npy::write_u16_3d(&data_npy, 12, 18, 28, &dc).unwrap();
    let find = |p: &Path, x: &Path, out: &Path| {
        let o = CLUDA.run(&find_args(p, x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        parse_summary(text(&o.stdout).trim_end())
    };
    let (npy_out, raw_out) = (d.join("n.clust"), d.join("r.clust"));
    let a = find(&ped_npy, &data_npy, &npy_out);
    let b = find(&ped_raw, &data_raw, &raw_out);
    assert_eq!(value(&b, "frames"), "12");
    assert_eq!(value(&a, "clusters"), value(&b, "clusters"));
    assert!(value(&a, "clusters").parse::<u64>().unwrap() > 0);
    assert_eq!(
        shift_cluster_file(&std::fs::read(&npy_out).unwrap(), 9, 3, 2),
        std::fs::read(&raw_out).unwrap()
    );
    // The ROI's files under a master that names none: a named error, never a misreading.
    let text_8 = std::fs::read_to_string(&data_raw).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text_8).unwrap();
    j.as_object_mut().unwrap().remove("Receiver Rois");
    std::fs::write(&data_raw, j.to_string()).unwrap();
    fails(
        &find_args(&ped_raw, &data_raw, &["--out", s(&d.join("x.clust"))]),
        "run_d0_f0_0.raw: 7840 bytes is not a whole number of 1840-byte records",
    );
    assert!(!d.join("x.clust").exists());
}

/// `gen --raw --roi` writes acquisitions as a receiver with `rx_roi` does (here in master
/// format 8.0): `find` reads them as the ROI, and finds the clusters `find` finds in the
/// generated frames cropped to the ROI, in detector coordinates (moved by the ROI's corner).
#[test]
fn gen_raw_with_a_roi_then_find() {
    use cluda::io::raw::Roi;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let gen_args = |out: &Path, raw: bool| {
        let mut a = vec![
            "gen".to_string(),
            "--out".into(),
            s(out).into(),
            "--frames".into(),
            "9".into(),
            "--pedestal-frames".into(),
            "20".into(),
            "--rows".into(),
            "16".into(),
            "--cols".into(),
            "20".into(),
        ];
        if raw {
            for x in ["--raw", "--roi", "2,13,3,10", "--raw-version", "8.0"] {
                a.push(x.into());
            }
        }
        a
    };
    let (raw_dir, npy_dir) = (d.join("raw"), d.join("npy"));
    let args = gen_args(&raw_dir, true);
    let o = CLUDA.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(
            "data_master_0.json (9 frames of 16 x 20 uint16, raw, receiver ROI [2, 13, 3, 10]: 8 x 12 stored)"
        ),
        "{}",
        text(&o.stdout)
    );
    let master = std::fs::read_to_string(raw_dir.join("data_master_0.json")).unwrap();
    assert!(master.contains("\"Version\": 8.0"), "{master}");
    assert!(master.contains("\"Receiver Rois\": ["), "{master}");
    assert!(master.contains("\"Image Size\": 640,"), "{master}");
    let args = gen_args(&npy_dir, false);
    let o = CLUDA.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let roi = Roi {
        xmin: 2,
        xmax: 13,
        ymin: 3,
        ymax: 10,
    };
    let crop_to = |from: &str, to: &str| {
        let a = read_u16_frames(&npy_dir.join(from)).unwrap();
        let n = a.shape[0];
        let c = crop_frames(&a.data, 20, 16, roi);
        npy::write_u16_3d(&npy_dir.join(to), n, 8, 12, &c).unwrap();
        npy_dir.join(to)
    };
    let (ped_npy, data_npy) = (
        crop_to("pedestal.npy", "p8.npy"),
        crop_to("data.npy", "d8.npy"),
    );
    let (raw_out, npy_out) = (d.join("r.clust"), d.join("n.clust"));
    for (p, x, out) in [
        (
            raw_dir.join("pedestal_master_0.json"),
            raw_dir.join("data_master_0.json"),
            &raw_out,
        ),
        (ped_npy, data_npy, &npy_out),
    ] {
        let o = CLUDA.run(&find_args(&p, &x, &["--out", s(out), "--device", "cpu"]));
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
        assert_eq!(
            value(&parse_summary(text(&o.stdout).trim_end()), "frames"),
            "9"
        );
    }
    let (nr, br) = read_cluster_file(&raw_out, ClusterSize::S3).unwrap();
    let (nn, bn) = read_cluster_file(&npy_out, ClusterSize::S3).unwrap();
    // Raw frame numbers count from 1, .npy frames from 0.
    assert_eq!(nr, (1..=9).collect::<Vec<i32>>());
    assert_eq!(nn, (0..9).collect::<Vec<i32>>());
    assert_eq!(br.offsets(), bn.offsets());
    let moved: Vec<u32> = bn
        .words()
        .chunks_exact(10)
        .flat_map(|r| {
            let (x, y) = (r[0] & 0xFFFF, r[0] >> 16);
            std::iter::once((x + 2) | (y + 3) << 16).chain(r[1..].iter().copied())
        })
        .collect();
    assert_eq!(br.words(), &moved[..]);
    fails(
        &[
            "gen",
            "--out",
            s(&d.join("bad")),
            "--raw",
            "--rows",
            "16",
            "--cols",
            "20",
            "--roi",
            "0,20,0,3",
        ],
        "[0, 20, 0, 3] (XMIN, XMAX, YMIN, YMAX) does not lie inside the 16 x 20 frames",
    );
}
