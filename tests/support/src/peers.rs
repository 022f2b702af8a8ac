//! aare's own cluster finders beside cluda's: where `aare-find` is (tools/aare-build's driver
//! of aare's `ClusterFinder`/`ClusterFinderMT`), and reading its summary line (the peers bench
//! and the aare finder test).

use std::path::{Path, PathBuf};

/// `aare-find`: `$AARE_FIND`, else beside the running executable (staged in `.gpu/bin/` with
/// it), else tools/aare-build's `<target>/aare/aare-find` above it (`<target>/release/deps/`).
/// None when none of them is a file.
pub fn aare_find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AARE_FIND") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let beside = exe.with_file_name("aare-find");
    let built = exe
        .ancestors()
        .map(|dir| dir.join("aare").join("aare-find"));
    std::iter::once(beside)
        .chain(built)
        .find(|p: &PathBuf| p.is_file())
}

/// The value of `key=` in a line of `key=value` words (aare-find's and cluda's summary lines).
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The aare release tools/aare-build pins (its one `AARE_VERSION=` line), read from the
/// script under `root`.
pub fn pinned_version(root: &Path) -> Result<String, String> {
    let path = root.join("tools/aare-build");
    let script = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pins: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("AARE_VERSION="))
        .collect();
    match pins[..] {
        [one] => Ok(one.trim().to_owned()),
        _ => Err(format!(
            "{} must pin AARE_VERSION on exactly one line",
            path.display()
        )),
    }
}
