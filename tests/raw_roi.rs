//! Raw acquisitions with a receiver ROI (`rx_roi`: the master names the ROI, the data files
//! hold only its pixels), found with `cluda find`: the clusters are those of the frames cut
//! down to the ROI (an oracle cut here, independently of the library), written in detector
//! coordinates; far enough from the ROI's edges they are the clusters of the whole frames; a
//! pedestal of the whole detector is cut down to the ROI (and says so), one of another shape
//! is refused naming both shapes and the ROI; data files whose records do not have the size
//! the master gives are refused, never misread. `cluda stream` of whole frames whose headers
//! carry the ROI as `rx_roi` (`cluda replay --rx-roi`) cuts each frame down to it and writes
//! the cluster file `find` writes from the ROI's raw files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cluda::io::npy::{read_u16_frames, write_u16_3d};
use support::cli::{Cli, find_args, gen_args, run_args, s, text};

const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// The detector: 40 rows x 36 columns; the ROI columns 7..=26 of rows 5..=30.
const ROWS: usize = 40;
const COLS: usize = 36;
const ROI: [usize; 4] = [7, 26, 5, 30];

/// One 3x3 cluster as the file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    frame: i32,
    x: u16,
    y: u16,
    data: Vec<i32>,
}

/// Every record of a 3x3 cluster file, in file order, read from its layout alone.
fn records(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap();
    let word = |at: usize| i32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let (frame, n) = (word(at), word(at + 4) as u32);
        at += 8;
        for _ in 0..n {
            let xy = word(at) as u32;
            out.push(Rec {
                frame,
                x: xy as u16,
                y: (xy >> 16) as u16,
                data: (0..9).map(|i| word(at + 4 + 4 * i)).collect(),
            });
            at += 40;
        }
    }
    out
}

/// `gen` into `dir` with the test's detector and seed, and `extra` arguments.
fn generate(dir: &Path, extra: &[&str]) {
    let mut args = gen_args(
        dir,
        "--frames 15 --pedestal-frames 60 --rows 40 --cols 36 --seed 11",
    );
    args.extend_from_slice(extra);
    let o = CLUDA.run(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Cuts every frame of the `.npy` stack `from` down to the ROI into `to` (plain indexing).
fn crop_npy(from: &Path, to: &Path) -> PathBuf {
    let a = read_u16_frames(from).unwrap();
    let (n, [x0, x1, y0, y1]) = (a.shape[0], ROI);
    let mut out = Vec::new();
    for f in 0..n {
        for y in y0..=y1 {
            for x in x0..=x1 {
                out.push(a.data[f * ROWS * COLS + y * COLS + x]);
            }
        }
    }
    write_u16_3d(to, n, y1 - y0 + 1, x1 - x0 + 1, &out).unwrap();
    to.to_path_buf()
}

/// `find` of `data` with `pedestal` into `out` on the CPU; returns stderr.
fn find(pedestal: &Path, data: &Path, out: &Path) -> String {
    let o = CLUDA.run(&find_args(
        pedestal,
        data,
        &["--out", s(out), "--device", "cpu"],
    ));
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    err
}

#[test]
fn roi_clusters_are_those_of_the_cut_frames_in_detector_coordinates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (full, raw) = (d.join("full"), d.join("raw"));
    generate(&full, &[]);
    generate(
        &raw,
        &["--raw", "--roi", "7,26,5,30", "--raw-version", "8.0"],
    );
    let [x0, x1, y0, y1] = ROI;

    // The ROI's raw files, their own pedestal.
    let raw_out = d.join("raw.clust");
    find(
        &raw.join("pedestal_master_0.json"),
        &raw.join("data_master_0.json"),
        &raw_out,
    );
    let got = records(&raw_out);
    assert!(got.len() > 20, "{} clusters", got.len());
    for r in &got {
        let (x, y) = (r.x as usize, r.y as usize);
        assert!((x0..=x1).contains(&x) && (y0..=y1).contains(&y), "{r:?}");
    }

    // The oracle: the generated frames cut down here, found as .npy, moved by the corner.
    let (ped_cut, data_cut) = (
        crop_npy(&full.join("pedestal.npy"), &d.join("p_cut.npy")),
        crop_npy(&full.join("data.npy"), &d.join("d_cut.npy")),
    );
    let cut_out = d.join("cut.clust");
    find(&ped_cut, &data_cut, &cut_out);
    let want: Vec<Rec> = records(&cut_out)
        .into_iter()
        .map(|r| Rec {
            // Raw frames are numbered from 1, .npy frames from 0.
            frame: r.frame + 1,
            x: r.x + x0 as u16,
            y: r.y + y0 as u16,
            data: r.data,
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        want.iter().any(|r| (r.x as usize) < x1 - x0),
        "some cluster lies where ROI and detector coordinates differ visibly"
    );

    // A pedestal of the whole detector is cut down to the ROI: the same file, and a note.
    let whole_out = d.join("whole_pedestal.clust");
    let err = find(
        &full.join("pedestal.npy"),
        &raw.join("data_master_0.json"),
        &whole_out,
    );
    assert!(
        err.contains(
            "holds frames of the whole detector (40 x 36); the data hold the receiver ROI \
             [7, 26, 5, 30] (xmin, xmax, ymin, ymax): the pedestal is cut down to the ROI's \
             26 x 20 pixels"
        ),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&whole_out).unwrap(),
        std::fs::read(&raw_out).unwrap()
    );
    // The same through the many-input path (`--out-dir`).
    let many = d.join("many");
    let o = CLUDA.run(&find_args(
        &full.join("pedestal.npy"),
        &raw.join("data_master_0.json"),
        &["--out-dir", s(&many), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("the pedestal is cut down to the ROI's 26 x 20 pixels"),
        "{}",
        text(&o.stderr)
    );
    let written: Vec<PathBuf> = std::fs::read_dir(&many)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "clust"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(
        std::fs::read(&written[0]).unwrap(),
        std::fs::read(&raw_out).unwrap()
    );
    // `eta` says its cube is the ROI's own coordinates.
    let o = CLUDA.run(&run_args(
        "eta",
        &full.join("pedestal.npy"),
        &raw.join("data_master_0.json"),
        &["--out", s(&d.join("eta.npz")), "--device", "cpu"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(
            "holds the receiver ROI [7, 26, 5, 30] (xmin, xmax, ymin, ymax): its clusters are \
             placed in the ROI's own coordinates (pixel column 0, row 0 is detector column 7, \
             row 5)"
        ),
        "{}",
        text(&o.stderr)
    );

    // Away from the ROI's edges the clusters are those of the whole frames: a pixel's
    // pedestal follows its own 3x3 window, so a cluster is the same when every pixel of its
    // window has its window inside the ROI (its centre 2 pixels or more from the edges; a
    // centre 1 pixel in shows a neighbour on the edge whose pedestal went its own way).
    let full_out = d.join("full.clust");
    find(
        &full.join("pedestal.npy"),
        &full.join("data.npy"),
        &full_out,
    );
    let inner = |r: &Rec| {
        let (x, y) = (r.x as usize, r.y as usize);
        x >= x0 + 2 && x + 2 <= x1 && y >= y0 + 2 && y + 2 <= y1
    };
    let whole: Vec<Rec> = records(&full_out)
        .into_iter()
        .filter(inner)
        .map(|r| Rec {
            frame: r.frame + 1,
            ..r
        })
        .collect();
    let roi_inner: Vec<Rec> = got.into_iter().filter(inner).collect();
    assert!(!whole.is_empty());
    assert_eq!(roi_inner, whole);
}

#[test]
fn a_pedestal_of_another_shape_names_both_shapes_and_the_roi() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (other, raw) = (d.join("other"), d.join("raw"));
    generate(&raw, &["--raw", "--roi", "7,26,5,30"]);
    CLUDA.ok(&gen_args(
        &other,
        "--frames 2 --pedestal-frames 10 --rows 30 --cols 30",
    ));
    let out = d.join("x.clust");
    let data = raw.join("data_master_0.json");
    // `find` of the ROI's data with `pedestal` fails naming every one of `want`.
    let refused = |pedestal: &Path, want: &[&str]| {
        CLUDA.fails(&find_args(pedestal, &data, &["--out", s(&out)]), want);
    };
    refused(
        &other.join("pedestal.npy"),
        &[
            "30 x 30 frames (as in the pedestal)",
            "26 x 20 frames, the receiver ROI [7, 26, 5, 30] (xmin, xmax, ymin, ymax) of a \
             40 x 36 detector",
        ],
    );
    assert!(!out.exists());
    // A raw pedestal of another ROI of the same shape holds other pixels: refused too.
    let shifted = d.join("shifted");
    generate(&shifted, &["--raw", "--roi", "8,27,5,30"]);
    refused(
        &shifted.join("pedestal_master_0.json"),
        &[
            "frames of the pedestal's receiver ROI [8, 27, 5, 30] (xmin, xmax, ymin, ymax)",
            "frames of the receiver ROI [7, 26, 5, 30]: other pixels",
        ],
    );
    assert!(!out.exists());
}

/// A master naming an ROI over data files of whole frames, and a master naming none over
/// an ROI's files: each is an error naming the data file and the record sizes.
#[test]
fn records_not_of_the_masters_size_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (full, roi) = (d.join("full"), d.join("roi"));
    generate(&full, &["--raw"]);
    generate(&roi, &["--raw", "--roi", "7,26,5,30"]);
    // Swap the data masters: the master of the ROI over whole frames and back.
    let (mf, mr) = (
        full.join("data_master_0.json"),
        roi.join("data_master_0.json"),
    );
    let (tf, tr) = (
        std::fs::read_to_string(&mf).unwrap(),
        std::fs::read_to_string(&mr).unwrap(),
    );
    std::fs::write(&mf, &tr).unwrap();
    std::fs::write(&mr, &tf).unwrap();
    // Records: whole frames 112 + 40 * 36 * 2 = 2992 bytes, the ROI's 112 + 26 * 20 * 2 = 1152.
    for (master, file, len, record) in [
        (&mf, "data_d0_f0_0.raw", 15 * 2992, 1152),
        (&mr, "data_d0_f0_0.raw", 15 * 1152, 2992),
    ] {
        let ped = master.with_file_name("pedestal_master_0.json");
        CLUDA.fails(
            &find_args(&ped, master, &["--out", s(&d.join("x.clust"))]),
            &[
                file,
                &format!("{len} bytes is not a whole number of {record}-byte records"),
            ],
        );
    }
}

/// `replay --rx-roi` of whole frames (as the receiver streams them when its files hold the
/// ROI) into `stream`: with a pedestal of the whole frame (cut down to the ROI) and with the
/// ROI's own raw pedestal, the cluster file is byte for byte `find`'s on the ROI's raw files.
#[test]
fn stream_with_rx_roi_writes_finds_cluster_file_of_the_roi_files() {
    use support::relay::{cluster_files, relay, stream_args};
    use support::stream::{find_bytes, num};
    let limit = Duration::from_secs(120);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (full, roi) = (d.join("full"), d.join("roi"));
    generate(&full, &["--raw", "--raw-version", "8.0"]);
    generate(
        &roi,
        &["--raw", "--roi", "7,26,5,30", "--raw-version", "8.0"],
    );
    let want = find_bytes(
        d,
        &roi.join("pedestal_master_0.json"),
        &roi.join("data_master_0.json"),
        &["--device", "cpu"],
    );
    assert!(want.len() > 15 * 8, "clusters were found");
    for (k, pedestal) in [
        full.join("pedestal_master_0.json"),
        roi.join("pedestal_master_0.json"),
    ]
    .iter()
    .enumerate()
    {
        let out = d.join(format!("out{k}"));
        let args = stream_args(pedestal, "cpu", "1", &[]);
        let data = full.join("data_master_0.json");
        let replay = ["--data", s(&data), "--no-drop", "--rx-roi", "7,26,5,30"];
        let name = format!("stream{k}");
        let run = relay((d, &name), 1, &out, &args, &replay, limit);
        let (done, sums) = (&run.stream, &run.sums);
        assert_eq!(sums.len(), 1, "{}", done.stdout);
        assert_eq!(num(&sums[0], "frames"), 15, "{}", done.stderr);
        for c in ["missing", "incomplete", "mismatched", "dropped"] {
            assert_eq!(num(&sums[0], c), 0, "{c}: {}", done.stderr);
        }
        assert!(
            done.stderr.contains(
                "the receiver's rx_roi is [7, 26, 5, 30] (xmin, xmax, ymin, ymax) of the whole \
                 40 x 36 frame: each frame is cut down to the ROI's 26 x 20 pixels"
            ),
            "{}",
            done.stderr
        );
        let files = cluster_files(&out);
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(
            std::fs::read(&files[0]).unwrap() == want,
            "stream with rx_roi differs from find on the ROI's files ({})",
            pedestal.display()
        );
    }
}
