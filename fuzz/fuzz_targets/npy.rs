//! Any bytes as a .npy file: every reader returns frames or an error, never panics, and what
//! it returns matches the header (no allocation past the elements the file holds).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use cluda::io::npy::{NpyFrames, read_array, read_f32_2d, read_u16_frames};
use libfuzzer_sys::fuzz_target;

/// The file each input is written to (tmpfs when there is one), removed after each input.
fn path() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        base.join(format!("cluda-fuzz-npy-{}.npy", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let p = path();
    std::fs::write(p, data).expect("write");
    if let Ok(a) = read_u16_frames(p) {
        assert_eq!(a.shape.len(), 3);
        assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
        assert!(a.data.len() * 2 <= data.len());
    }
    if let Ok(mut r) = NpyFrames::open(p) {
        let mut buf = Vec::new();
        let mut n = 0;
        while let Ok(k) = r.read_into(3, &mut buf) {
            if k == 0 {
                break;
            }
            assert_eq!(buf.len(), k * r.rows() * r.cols());
            n += k;
        }
        assert!(n <= r.len());
    }
    if let Ok(a) = read_f32_2d(p) {
        assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
        assert!(a.data.len() * 4 <= data.len());
    }
    if let Ok(a) = read_array::<f64>(p) {
        assert_eq!(a.data.len(), a.shape.iter().product::<usize>());
        assert!(a.data.len() * 8 <= data.len());
    }
    let _ = std::fs::remove_file(p);
});
