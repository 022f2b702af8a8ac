//! What the hostile tests check on the file system: a file's bytes unchanged, the names in a
//! folder (nothing added, no temporary left), a name appearing while a run writes; large
//! `.npy` inputs that cost no disk, and `.npy` files written by hand.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::{Duration, Instant};

/// A checksum of the file's bytes.
pub fn sum(p: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    std::fs::read(p).expect("read").hash(&mut h);
    h.finish()
}

/// Names in `dir` (sorted), to see that nothing was added, e.g. a temporary file.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Fails the test when a temporary file or staging directory (`*.tmp`, `*.tmp.*`) is left in
/// `dir`.
#[track_caller]
pub fn no_temporaries(dir: &Path) {
    let l = listing(dir);
    assert!(
        !l.iter().any(|n| n.ends_with(".tmp") || n.contains(".tmp.")),
        "temporary file left in {}: {l:?}",
        dir.display()
    );
}

/// Waits (at most 60 s) until a name starting with `prefix` appears in `dir` (a run's
/// temporary file `.<name>.…` while it writes `<name>`, say).
#[track_caller]
pub fn wait_for(dir: &Path, prefix: &str) {
    let start = Instant::now();
    while !dir.exists() || !listing(dir).iter().any(|n| n.starts_with(prefix)) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing named {prefix}* appeared in {}: {:?}",
            dir.display(),
            if dir.exists() { listing(dir) } else { vec![] }
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A `.npy` header for `shape` of `descr` (`<u2`, `<f4`, ...) followed by a hole: a large
/// input that costs no disk (all-zero values).
pub fn sparse_npy(path: &Path, descr: &str, shape: &[u64]) {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let comma = if shape.len() == 1 { "," } else { "" };
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}{comma}), }}",
        dims.join(", ")
    );
    let bytes = npy_bytes(&dict, &[]);
    let size = if descr.ends_with('2') { 2 } else { 4 };
    let data: u64 = shape.iter().product::<u64>() * size;
    let f = std::fs::File::create(path).expect("create");
    std::io::Write::write_all(&mut &f, &bytes).expect("header");
    f.set_len(bytes.len() as u64 + data).expect("set_len");
}

/// A `.npy` file's bytes: a version 1.0 header holding `dict` (`{'descr': '<u2', ...}`),
/// padded with spaces to a multiple of 64 bytes as NumPy pads it, then `body`. For inputs
/// written by hand: malformed, or of a type no writer of cluda's writes.
pub fn npy_bytes(dict: &str, body: &[u8]) -> Vec<u8> {
    let mut h = dict.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(body);
    b
}
