//! aare's cluster file: byte layout against a hand-written file, round trips of real finder
//! results, and errors for truncated or corrupt files.

use std::path::Path;

use cluda::cluster::pack_xy;
use cluda::generate::{GenConfig, Generator};
use cluda::io::{ClusterFileReader, ClusterFileWriter, read_cluster_file, write_cluster_file};
use cluda::{ClusterBatch, ClusterFinder, ClusterSize, CpuFinder, Error, FinderConfig, Frames};

/// Frame 7: one cluster at (x 1, y 2); frame 8: two clusters, at (258, 3) and (0, 65535).
fn tiny_batch() -> ClusterBatch {
    let mut b = ClusterBatch::new(ClusterSize::S3);
    let mut f0 = vec![pack_xy(1, 2)];
    f0.extend([-1i32, 2, 3, 400, -5, 6, 7, 8, 65536].map(|v| v as u32));
    b.push_frame(&f0);
    let mut f1 = vec![pack_xy(258, 3)];
    f1.extend((1..=9).map(|v| v * 10));
    f1.push(pack_xy(0, 65535));
    f1.extend([-2i32; 9].map(|v| v as u32));
    b.push_frame(&f1);
    b
}

/// The same two frames, byte by byte, as aare lays them out.
#[rustfmt::skip]
const TINY_FILE: [u8; 136] = [
    // frame 0: i32 frame_number 7, u32 n_clusters 1
    0x07, 0x00, 0x00, 0x00,  0x01, 0x00, 0x00, 0x00,
    // u16 x 1, u16 y 2
    0x01, 0x00,  0x02, 0x00,
    // i32 data[9]: -1, 2, 3, 400, -5, 6, 7, 8, 65536
    0xff, 0xff, 0xff, 0xff,  0x02, 0x00, 0x00, 0x00,  0x03, 0x00, 0x00, 0x00,
    0x90, 0x01, 0x00, 0x00,  0xfb, 0xff, 0xff, 0xff,  0x06, 0x00, 0x00, 0x00,
    0x07, 0x00, 0x00, 0x00,  0x08, 0x00, 0x00, 0x00,  0x00, 0x00, 0x01, 0x00,
    // frame 1: i32 frame_number 8, u32 n_clusters 2
    0x08, 0x00, 0x00, 0x00,  0x02, 0x00, 0x00, 0x00,
    // u16 x 258, u16 y 3
    0x02, 0x01,  0x03, 0x00,
    // i32 data[9]: 10, 20, ..., 90
    0x0a, 0x00, 0x00, 0x00,  0x14, 0x00, 0x00, 0x00,  0x1e, 0x00, 0x00, 0x00,
    0x28, 0x00, 0x00, 0x00,  0x32, 0x00, 0x00, 0x00,  0x3c, 0x00, 0x00, 0x00,
    0x46, 0x00, 0x00, 0x00,  0x50, 0x00, 0x00, 0x00,  0x5a, 0x00, 0x00, 0x00,
    // u16 x 0, u16 y 65535
    0x00, 0x00,  0xff, 0xff,
    // i32 data[9]: -2 nine times
    0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,
    0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,
    0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,  0xfe, 0xff, 0xff, 0xff,
];

#[test]
fn byte_layout_matches_hand_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tiny.clust");
    let batch = tiny_batch();
    write_cluster_file(&p, 7, &batch).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), TINY_FILE);

    // The same through the streaming writer into memory.
    let mut w = ClusterFileWriter::new(Vec::new(), Path::new("memory"));
    w.write_frame(7, &batch.frame(0)).unwrap();
    w.write_frame(8, &batch.frame(1)).unwrap();
    assert_eq!((w.frames(), w.clusters()), (2, 3));
    assert_eq!(w.finish().unwrap(), TINY_FILE);

    // Reading the hand-written bytes gives the batch back.
    let q = dir.path().join("hand.clust");
    std::fs::write(&q, TINY_FILE).unwrap();
    let (numbers, read) = read_cluster_file(&q, ClusterSize::S3).unwrap();
    assert_eq!(numbers, vec![7, 8]);
    assert_eq!(read, batch);
    let c = read.frame(1).get(1);
    assert_eq!((c.x, c.y, c.data), (0, 65535, &[-2; 9][..]));
    assert_eq!(read.frame(0).get(0).data[3], 400);
}

#[test]
fn finder_results_round_trip_for_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let (rows, cols) = (32, 40);
    let generator = Generator::new(GenConfig::new(rows, cols, 11)).unwrap();
    let dark = generator.frames(0, 20, false);
    let data = generator.frames(20, 8, true);
    for size in ClusterSize::ALL {
        let config = FinderConfig::new(rows, cols).size(size).pedestal_frames(20);
        let mut finder = CpuFinder::with_threads(config, 1).unwrap();
        finder
            .push_pedestal(Frames::new(&dark, 20, rows, cols).unwrap())
            .unwrap();
        let batch = finder
            .find(Frames::new(&data, 8, rows, cols).unwrap())
            .unwrap();
        assert!(batch.total() > 0, "{size}: no clusters to test with");
        let p = dir.path().join(format!("{size}.clust"));
        write_cluster_file(&p, -3, &batch).unwrap();
        let len = std::fs::metadata(&p).unwrap().len() as usize;
        assert_eq!(len, 8 * 8 + batch.total() * size.record_bytes());
        let (numbers, read) = read_cluster_file(&p, size).unwrap();
        assert_eq!(numbers, (-3..5).collect::<Vec<i32>>());
        assert_eq!(read, batch, "{size}");
    }
}

#[test]
fn empty_frames_and_empty_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = ClusterBatch::new(ClusterSize::S9);
    b.push_frame(&[]);
    b.push_frame(&[]);
    let p = dir.path().join("empty_frames.clust");
    write_cluster_file(&p, 0, &b).unwrap();
    assert_eq!(
        std::fs::read(&p).unwrap(),
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(
        read_cluster_file(&p, ClusterSize::S9).unwrap(),
        (vec![0, 1], b)
    );
    let q = dir.path().join("empty.clust");
    std::fs::write(&q, []).unwrap();
    let (n, e) = read_cluster_file(&q, ClusterSize::S3).unwrap();
    assert!(n.is_empty() && e.frames() == 0);
}

fn read_err(bytes: &[u8], size: ClusterSize) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.clust");
    std::fs::write(&p, bytes).unwrap();
    match read_cluster_file(&p, size) {
        Err(e @ Error::Format { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&p.display().to_string()), "{msg}");
            msg
        }
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn truncated_and_corrupt_files_are_named_errors() {
    let msg = read_err(&TINY_FILE[..135], ClusterSize::S3);
    assert!(msg.contains("truncated cluster file (or not 3x3 clusters): frame 8 at byte 48 declares 2 clusters (80 bytes), only 79 bytes remain"), "{msg}");
    let mut extra = TINY_FILE.to_vec();
    extra.extend_from_slice(&[9, 0, 0]);
    let msg = read_err(&extra, ClusterSize::S3);
    assert!(
        msg.contains(
            "truncated cluster file: a frame header at byte 136 needs 8 bytes, only 3 remain"
        ),
        "{msg}"
    );
    // A corrupt count is checked against the bytes left before anything is allocated.
    let mut huge = TINY_FILE.to_vec();
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let msg = read_err(&huge, ClusterSize::S9);
    assert!(msg.contains("frame 7 at byte 0 declares 4294967295 clusters (1408749272760 bytes), only 128 bytes remain"), "{msg}");
    // The wrong cluster size cannot read the file through.
    let msg = read_err(&TINY_FILE, ClusterSize::S5);
    assert!(msg.contains("(or not 5x5 clusters)"), "{msg}");
    // A missing file is an I/O error naming it.
    let p = Path::new("/nonexistent/dir/x.clust");
    match ClusterFileReader::open(p, ClusterSize::S3) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().starts_with("/nonexistent/dir/x.clust")),
        other => panic!("{:?}", other.map(|_| ())),
    }
}
