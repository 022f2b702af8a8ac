//! (Enable in Cargo.toml after merging `cluda::io::cluster_file`.) Any bytes as a cluster
//! file: the reader returns clusters or an error, never panics or over-allocates.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = std::env::temp_dir().join(format!("cluda-fuzz-clu-{}.clust", std::process::id()));
    std::fs::write(&p, data).expect("write");
    // Adjust to the merged reader's entry point:
    let _ = cluda::io::cluster_file::read(&p, cluda::ClusterSize::S3);
});
