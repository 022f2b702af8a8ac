//! Checks made before anything is read or written: inputs must be regular files (a FIFO or a
//! device given as an input would block or never end), and an output must never be one of the
//! inputs (writing it would destroy the input before it is read).

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What kind of non-regular file `m` is, for messages.
fn kind(m: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    if m.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Checks that `path` (after following symbolic links) is a regular file, without opening it:
/// opening a FIFO for reading blocks until a writer comes.
pub fn check_regular(path: &Path) -> Result<()> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if m.is_file() {
        Ok(())
    } else {
        Err(Error::format(
            path,
            format!(
                "is {}; cluda reads regular files only",
                match kind(&m) {
                    "not a regular file" => "not a regular file",
                    k => k,
                }
            ),
        ))
    }
}

/// Opens `path` for reading after [`check_regular`].
pub fn open_regular(path: &Path) -> Result<File> {
    check_regular(path)?;
    File::open(path).map_err(|e| Error::io(path, e))
}

/// Whether `a` and `b` are the same file: the same device and inode on unix (so symbolic and
/// hard links and `dir/../dir/./f` all count), the same canonical path elsewhere. `false`
/// when either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// Whether `path` is written as a directory: it ends with a path separator (or `/.`), which
/// [`Path::file_name`] does not show (`x/` has the file name `x`).
fn names_a_directory(path: &Path) -> bool {
    let text = path.as_os_str().as_encoded_bytes();
    text.ends_with(b"/")
        || text.ends_with(b"/.")
        || (cfg!(windows) && (text.ends_with(b"\\") || text.ends_with(b"\\.")))
}

/// Refuses to replace an existing `out` (given as `--<option>`) unless `overwrite`: a result
/// already there is kept unless the user said it may go. An [`Error::InvalidParameter`]
/// naming the option and the file.
pub fn check_overwrite(out: &Path, option: &'static str, overwrite: bool) -> Result<()> {
    if !overwrite && std::fs::symlink_metadata(out).is_ok() {
        return Err(Error::param(
            option,
            format!(
                "{} exists; it is not replaced unless you allow it (--overwrite, or overwrite=True in Python)",
                out.display()
            ),
        ));
    }
    Ok(())
}

/// Checks the output `out` (given as `--<option>`) before anything is opened for writing: it
/// must name a file (not end with a separator), its directory must exist, it must not be a
/// directory itself, and it must not be any of `inputs` (compared with [`same_file`]).
pub fn check_output(out: &Path, option: &'static str, inputs: &[PathBuf]) -> Result<()> {
    if out.file_name().is_none() || names_a_directory(out) {
        return Err(Error::param(
            option,
            format!(
                "{} names a directory, not a file (give the file's name)",
                out.display()
            ),
        ));
    }
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::param(
                option,
                format!("{}: {} is not a directory", out.display(), dir.display()),
            ));
        }
        Err(e) => {
            return Err(Error::param(
                option,
                format!("{}: {e} (its directory {})", out.display(), dir.display()),
            ));
        }
    }
    if let Ok(m) = std::fs::metadata(out)
        && !m.is_file()
    {
        return Err(Error::param(
            option,
            format!(
                "{} is {}; an output must be a regular file",
                out.display(),
                kind(&m)
            ),
        ));
    }
    if let Some(input) = inputs.iter().find(|i| same_file(out, i)) {
        return Err(Error::param(
            option,
            format!(
                "{} is the input file {}; refusing to overwrite an input",
                out.display(),
                input.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_that_is_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d.npy");
        std::fs::write(&d, b"x").unwrap();
        let name = dir.path().file_name().unwrap();
        let twisted = dir.path().join("..").join(name).join(".").join("d.npy");
        let e = check_output(&twisted, "out", std::slice::from_ref(&d)).unwrap_err();
        assert!(
            e.to_string().contains("refusing to overwrite an input"),
            "{e}"
        );
        assert!(check_output(&dir.path().join("o.clust"), "out", std::slice::from_ref(&d)).is_ok());
        let e = check_output(dir.path(), "out", std::slice::from_ref(&d)).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        // `x/` names a directory even though its file_name() is `x`, existing or not.
        for p in [dir.path().join("x/"), dir.path().join("new/.")] {
            let p = PathBuf::from(format!("{}/", p.display()));
            let e = check_output(&p, "out", &[]).unwrap_err();
            assert!(e.to_string().contains("names a directory"), "{e}");
        }
        let e = check_overwrite(&d, "out", false).unwrap_err();
        assert!(e.to_string().contains("--overwrite"), "{e}");
        assert!(e.to_string().contains("d.npy"), "{e}");
        assert!(check_overwrite(&d, "out", true).is_ok());
        assert!(check_overwrite(&dir.path().join("new"), "out", false).is_ok());
    }
}
