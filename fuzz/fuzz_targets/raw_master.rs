//! Any bytes as a raw master file: parsing must return a value or an error, never panic, and
//! an accepted master must describe a frame cluda can hold (sizes checked, no overflow).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = cluda::io::raw::RawMaster::parse("run_master_0.json", data) {
        assert!(m.rows >= 1 && m.cols >= 1);
        assert!(m.rows as u64 <= cluda::io::raw::master::MAX_SIDE);
        assert_eq!(m.image_size, (m.rows * m.cols * 2) as u64);
        let _ = m.frame_bytes();
        let _ = m.expected_packets();
        let _ = m.data_path(u64::MAX);
    }
});
