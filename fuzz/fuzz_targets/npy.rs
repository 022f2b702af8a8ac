//! (Enable in Cargo.toml after merging `cluda::io::npy`.) Any bytes as a .npy file: the
//! reader returns frames or an error, never panics, never allocates past the file's length.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let p = std::env::temp_dir().join(format!("cluda-fuzz-npy-{}.npy", std::process::id()));
    std::fs::write(&p, data).expect("write");
    // Adjust to the merged reader's entry point:
    let _ = cluda::io::npy::read_frames(&p);
});
