//! Outputs that appear whole or not at all.
//!
//! An [`AtomicFile`] writes to a temporary file beside the final one (same directory, so the
//! rename cannot cross file systems), named `.<name>.<pid>.<random>.tmp` and created with
//! `create_new` (never an existing file, so two writers never share one), and renames it over
//! the final name only in [`AtomicFile::commit`], after flushing and syncing. Dropped without
//! a commit (an error, a full disk, an interrupted run) it removes the temporary file: no
//! reader ever sees a half-written cluster file or an `.npy` whose header promises frames it
//! lacks, and two runs writing the same output leave one of the two whole files.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file written under a temporary name and renamed into place on [`AtomicFile::commit`].
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<BufWriter<File>>,
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
        let mut last = None;
        for _ in 0..16 {
            let tmp = dir.join(format!(
                ".{}.{}.{:08x}.tmp",
                name.to_string_lossy(),
                std::process::id(),
                rand::random::<u32>()
            ));
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(f) => {
                    return Ok(Self {
                        path: path.to_path_buf(),
                        tmp,
                        out: Some(BufWriter::with_capacity(1 << 20, f)),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(Error::io(
                        path,
                        std::io::Error::new(
                            e.kind(),
                            format!("cannot create a temporary file in {}: {e}", dir.display()),
                        ),
                    ));
                }
            }
        }
        Err(Error::io(
            path,
            last.unwrap_or_else(|| std::io::Error::other("no free temporary name")),
        ))
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
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        match file.sync_data() {
            // Some file systems cannot sync; that is not a write error.
            Err(e) if e.kind() != std::io::ErrorKind::InvalidInput => return Err(io(e)),
            _ => {}
        }
        drop(file);
        std::fs::rename(&self.tmp, &self.path).map_err(io)?;
        // Committed: nothing left for Drop to remove.
        self.tmp = PathBuf::new();
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
/// [`WriteBehind::positioned`]: crate::engine::write_behind::WriteBehind::positioned
impl crate::engine::write_behind::PositionedSink for AtomicFile {
    fn handle(&mut self) -> std::io::Result<File> {
        match self.out.as_mut() {
            Some(o) => {
                o.flush()?;
                o.get_ref().try_clone()
            }
            None => Err(std::io::Error::other("output already committed")),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            // Close before removing; what was buffered is thrown away with the file.
            if let Some(o) = self.out.take() {
                let (file, _) = o.into_parts();
                drop(file);
            }
            let _ = std::fs::remove_file(&self.tmp);
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
}
