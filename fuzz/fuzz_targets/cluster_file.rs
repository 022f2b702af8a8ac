//! Any bytes as a cluster file (read from memory, as 3x3 and 5x5 clusters): the reader returns
//! frames or an error, never panics, and never allocates more than the bytes present hold.
#![no_main]

use std::path::Path;

use cluda::ClusterSize;
use cluda::io::ClusterFileReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for size in [ClusterSize::S3, ClusterSize::S5] {
        let mut r = ClusterFileReader::new(data, data.len() as u64, Path::new("fuzz.clust"), size);
        let mut words = Vec::new();
        let mut bytes = 0usize;
        while let Ok(Some(_)) = r.next_frame(&mut words) {
            assert_eq!(words.len() % size.record_words(), 0);
            bytes += 8 + words.len() * 4;
            assert!(bytes <= data.len());
        }
    }
});
