//! Any bytes as the data files of a small acquisition (4 x 6 pixels, 3 frames per file, a
//! valid master): the first byte picks how many files the rest is cut into, and the master's
//! "Total Frames"; the reader must deliver whole frames or report and never panic, shift
//! frames or allocate more than the frames present.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use cluda::io::raw::RawReader;
use libfuzzer_sys::fuzz_target;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("cluda-fuzz-raw-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let d = dir();
    let files = 1 + (first & 3) as usize;
    let total = (first >> 2) as u64;
    let master = format!(
        r#"{{"Version": 7.2, "Detector Type": "Jungfrau", "Geometry": {{"x": 1, "y": 1}},
            "Image Size in bytes": 48, "Pixels": {{"x": 6, "y": 4}},
            "Max Frames Per File": 3, "Total Frames": {total}, "Frame Padding": 1,
            "Frame Discard Policy": "nodiscard"}}"#
    );
    let mp = d.join("run_master_0.json");
    std::fs::write(&mp, master).expect("write master");
    for f in 0..5 {
        let _ = std::fs::remove_file(d.join(format!("run_d0_f{f}_0.raw")));
    }
    let chunk = rest.len().div_ceil(files).max(1);
    for (f, part) in rest.chunks(chunk).enumerate() {
        std::fs::write(d.join(format!("run_d0_f{f}_0.raw")), part).expect("write data");
    }
    let Ok(reader) = RawReader::open(&mp) else {
        return;
    };
    let on_disk = reader.frames_on_disk();
    let mut reader = reader.deliver_incomplete(first & 0x80 != 0);
    let mut frames = Vec::new();
    let mut n = 0u64;
    loop {
        match reader.next_frames(2, &mut frames) {
            Ok(infos) if infos.is_empty() => break,
            Ok(infos) => n += infos.len() as u64,
            Err(_) => return,
        }
    }
    assert!(n <= on_disk);
    assert_eq!(frames.len() as u64, n * 24);
    let r = reader.report();
    assert_eq!(r.frames_delivered, n);
    let _ = r.summary();
});
