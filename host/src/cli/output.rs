//! What the commands print besides their results: lines on stdout, notes on stderr.

use std::io::Write;
use std::path::Path;

use cluda::{Error, Result};

/// Prints a line on stdout; a closed stdout is an error, not a panic.
pub fn print_line(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|_| out.flush())
        .map_err(|e| Error::io("<stdout>", e))
}

/// Says on stderr that `path` was not written when `result` is an error (the writer removed
/// its temporary file); passes `result` on.
pub fn note_unwritten<T>(path: &Path, result: Result<T>) -> Result<T> {
    if result.is_err() {
        eprintln!(
            "note: {} was not written (its unfinished temporary file was removed)",
            path.display()
        );
    }
    result
}
