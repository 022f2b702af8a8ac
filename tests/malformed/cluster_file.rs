//! Cluster files: each malformed one gets its specific error and allocates nothing large.

use cluda::ClusterSize;

use crate::{Expect, alloc_track, check_read, temp_dir};

/// A 3x3 cluster file frame: number, count, and `count` records (40 bytes each).
fn clu_frame(number: i32, count: u32, records: usize) -> Vec<u8> {
    let mut b = number.to_le_bytes().to_vec();
    b.extend_from_slice(&count.to_le_bytes());
    for r in 0..records {
        b.extend_from_slice(&(r as u16).to_le_bytes());
        b.extend_from_slice(&7u16.to_le_bytes());
        for k in 0..9i32 {
            b.extend_from_slice(&(k - 4).to_le_bytes());
        }
    }
    b
}

/// Cluster-file inputs read as 3x3 clusters (40-byte records): what each must give (the
/// frame count read, or the error).
fn cluster_file_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let cat = |parts: &[Vec<u8>]| parts.concat();
    vec![
        (
            "truncated frame header",
            vec![1, 0, 0],
            Err("a frame header at byte 0 needs 8 bytes, only 3 remain"),
        ),
        (
            "n_clusters u32::MAX with no records",
            clu_frame(0, u32::MAX, 0),
            Err(
                "frame 0 at byte 0 declares 4294967295 clusters (171798691800 bytes), only 0 bytes remain",
            ),
        ),
        (
            "fewer records than n_clusters",
            cat(&[clu_frame(0, 2, 1), vec![0; 10]]),
            Err("declares 2 clusters (80 bytes), only 50 bytes remain"),
        ),
        (
            "second frame truncated inside its header",
            cat(&[clu_frame(3, 1, 1), vec![9, 9]]),
            Err("a frame header at byte 48 needs 8 bytes, only 2 remain"),
        ),
        (
            "second frame declares too many",
            cat(&[clu_frame(3, 1, 1), clu_frame(4, 1000, 2)]),
            Err("frame 4 at byte 48 declares 1000 clusters (40000 bytes), only 80 bytes remain"),
        ),
        ("empty file", vec![], Ok(vec![0])),
        (
            "three frames, one empty",
            cat(&[clu_frame(0, 2, 2), clu_frame(1, 0, 0), clu_frame(-5, 1, 1)]),
            Ok(vec![3]),
        ),
    ]
}

#[test]
fn every_malformed_cluster_file_gets_its_specific_error_and_allocates_nothing_large() {
    let d = temp_dir("clu");
    let mut failures = Vec::new();
    for (i, (name, bytes, want)) in cluster_file_cases().iter().enumerate() {
        let p = d.path().join(format!("case{i}.clust"));
        std::fs::write(&p, bytes).unwrap();
        alloc_track::largest_reset();
        let got = cluda::io::read_cluster_file(&p, ClusterSize::S3).map(|(numbers, batch)| {
            assert_eq!(numbers.len(), batch.frames(), "{name}");
            vec![numbers.len()]
        });
        check_read(&mut failures, (name, &p), want, &got);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
