//! Bad input, proven: a table of malformed inputs, each asserting the specific error (variant
//! and message fragment), plus inputs that declare huge sizes and must not allocate for them.
//!
//! `.npy` and cluster-file cases live in `npy_cases` / `cluster_file_cases` at the bottom;
//! every case also proves, with a per-thread allocation tracker, that reading it never
//! allocates more than the bytes present need.
//!
//! One module an input: [`raw`] (raw masters and data files, finder options), [`npy`],
//! [`cluster_file`]; [`alloc_track`] measures the allocations.

use std::path::Path;

use cluda::Error;

mod alloc_track;
mod cluster_file;
mod npy;
mod raw;

/// A fresh, empty directory under the system temp dir, removed on drop.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("cluda-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Format,
    Param,
}

fn kind(e: &Error) -> Option<Kind> {
    match e {
        Error::Format { .. } => Some(Kind::Format),
        Error::InvalidParameter { .. } => Some(Kind::Param),
        _ => None,
    }
}

#[global_allocator]
static TRACKING: alloc_track::Tracking = alloc_track::Tracking;

/// The most a reader may allocate at once for a tiny input: its 1 MiB read buffer plus slack;
/// far below what the huge declared sizes would take.
const SMALL_INPUT_ALLOC: usize = 2 << 20;

/// What reading a case must give: the shape read, or an error containing the fragment.
type Expect = std::result::Result<Vec<usize>, &'static str>;

/// Adds to `failures` what went wrong in reading the case `name` (the file `path`) since
/// [`alloc_track::largest_reset`]: an allocation above [`SMALL_INPUT_ALLOC`], or another
/// result than `want` (an error must be a format error naming `path` with `want`'s fragment).
fn check_read(
    failures: &mut Vec<String>,
    (name, path): (&str, &Path),
    want: &Expect,
    got: &cluda::Result<Vec<usize>>,
) {
    let largest = alloc_track::largest();
    if largest > SMALL_INPUT_ALLOC {
        failures.push(format!("{name}: allocated {largest} bytes at once"));
    }
    match (want, got) {
        (Ok(w), Ok(g)) if g == w => {}
        (Err(fragment), Err(e @ Error::Format { path: p, .. }))
            if e.to_string().contains(fragment) && p == path => {}
        _ => failures.push(format!("{name}: expected {want:?}, got {got:?}")),
    }
}
