//! Outputs that appear whole or not at all.
//!
//! An [`AtomicFile`] writes to a temporary file beside the final one (same directory, so the
//! rename cannot cross file systems), named `.<name>.<pid>.<random>.tmp` and created by
//! [`tempfile`] (a new file under a fresh random name, so two writers never share one; the pid
//! lets the command line's SIGBUS handler, which cannot run destructors, find and remove it),
//! and renames it over the final name only in [`AtomicFile::commit`], after flushing and
//! syncing.
//! Dropped without a commit (an error, a full disk, an interrupted run) it removes the
//! temporary file: no reader ever sees a half-written cluster file or an `.npy` whose header
//! promises frames it lacks, and two runs writing the same output leave one of the two whole
//! files.

use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// A file written under a temporary name and renamed into place on [`AtomicFile::commit`].
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    /// `None` only inside [`AtomicFile::commit`] (which takes it) and [`Drop`].
    out: Option<BufWriter<NamedTempFile>>,
}

impl AtomicFile {
    /// Creates the temporary file for `path` in `path`'s directory; `path` itself is not
    /// touched until [`AtomicFile::commit`].
    pub fn create(path: &Path) -> Result<Self> {
        let name = path
            .file_name()
            .ok_or_else(|| Error::format(path, "an output needs a file name, not a directory"))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let prefix = format!(".{}.{}.", name.to_string_lossy(), std::process::id());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // tempfile creates its files readable by the owner only; an output gets the mode any
        // new file gets (0o666 less the umask), as a plain `File::create` would give it.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let file = builder.tempfile_in(dir).map_err(|e| {
            Error::io(
                path,
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a temporary file in {}: {e}", dir.display()),
                ),
            )
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp: file.path().to_path_buf(),
            out: Some(BufWriter::with_capacity(1 << 20, file)),
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file written until the commit.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Flushes and syncs the temporary file and renames it to the final path. On an error the
    /// temporary file is removed and the final path is as it was.
    pub fn commit(mut self) -> Result<PathBuf> {
        let Some(mut out) = self.out.take() else {
            return Err(Error::format(&self.path, "output already committed"));
        };
        let io = |e| Error::io(&self.path, e);
        out.flush().map_err(io)?;
        // On an error below the temporary file is dropped here, which removes it.
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        match file.as_file().sync_data() {
            // Some file systems cannot sync; that is not a write error.
            Err(e) if e.kind() != std::io::ErrorKind::InvalidInput => return Err(io(e)),
            _ => {}
        }
        // A failed rename hands the temporary file back in the error, and dropping the error
        // removes it.
        file.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(std::mem::take(&mut self.path))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.out.as_mut() {
            Some(o) => o.write(buf),
            None => Err(std::io::Error::other("output already committed")),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self.out.as_mut() {
            Some(o) => o.write_all(buf),
            None => Err(std::io::Error::other("output already committed")),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.as_mut().map_or(Ok(()), |o| o.flush())
    }
}

impl Seek for AtomicFile {
    /// Moves the temporary file's position (what is buffered is written first).
    fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
        match self.out.as_mut() {
            Some(o) => o.seek(pos),
            None => Err(std::io::Error::other("output already committed")),
        }
    }
}

/// Several threads may write the temporary file at offsets ([`WriteBehind::positioned`]);
/// the rename on [`AtomicFile::commit`] and the removal on drop are unchanged.
///
/// [`WriteBehind::positioned`]: crate::io::write_behind::WriteBehind::positioned
impl crate::io::write_behind::PositionedSink for AtomicFile {
    fn handle(&mut self) -> std::io::Result<File> {
        match self.out.as_mut() {
            Some(o) => {
                o.flush()?;
                o.get_ref().as_file().try_clone()
            }
            None => Err(std::io::Error::other("output already committed")),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Not committed: throw away what is buffered (no write of it into a file about to be
        // removed), and dropping the temporary file removes it.
        if let Some(o) = self.out.take() {
            let (file, _) = o.into_parts();
            drop(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commit_renames_drop_removes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        std::fs::write(&p, b"old").unwrap();
        let mut a = AtomicFile::create(&p).unwrap();
        a.write_all(b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(dir.path()).len(), 2);
        drop(a);
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(dir.path()), ["out.bin"]);
        let mut a = AtomicFile::create(&p).unwrap();
        a.write_all(b"new contents").unwrap();
        assert_eq!(a.commit().unwrap(), p);
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        assert_eq!(entries(dir.path()), ["out.bin"]);
    }

    /// A committed output gets the mode a plain `File::create` gives a new file (the umask
    /// applied), not the owner-only mode of a temporary file.
    #[cfg(unix)]
    #[test]
    fn committed_output_has_the_usual_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.bin");
        std::fs::File::create(&plain).unwrap();
        let p = dir.path().join("out.bin");
        let mut a = AtomicFile::create(&p).unwrap();
        assert!(
            a.temp_path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!(".out.bin.{}.", std::process::id()))
        );
        a.write_all(b"x").unwrap();
        a.commit().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), mode(&plain));
    }

    #[test]
    fn an_unwritable_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing").join("out.bin");
        let e = AtomicFile::create(&p).unwrap_err().to_string();
        assert!(e.contains("cannot create a temporary file in"), "{e}");
        assert!(e.contains("out.bin"), "{e}");
    }
}
