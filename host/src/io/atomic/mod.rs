//! Outputs that appear whole or not at all.
//!
//! An [`AtomicFile`] writes to a temporary file beside the final one (same directory, so the
//! rename cannot cross file systems), named `.<name>.<pid>@<host>.<random>.tmp` and created by
//! [`tempfile`] (a new file under a fresh random name, so two writers never share one; `<pid>`
//! and `<host>`, eight hex digits hashed from the host name, say which process left one
//! behind), and renames it to the final name only in [`AtomicFile::commit`], after flushing and
//! syncing.
//!
//! A writer killed outright (SIGKILL, a Dask worker's nanny, the OOM killer) cannot remove its
//! temporary file. So that a later run can tell such a file from a live writer's, the writer
//! holds an advisory lock (`flock`, through [`File::try_lock`]) on it for as long as it writes,
//! and every new [`AtomicFile`] first removes the temporaries of **its own final name** in its
//! directory that are provably stale ([`remove_stale_temporaries`]): written on this host
//! (same `<host>`), by a process that no longer exists (`kill(pid, 0)` says ESRCH), and not
//! locked (the lock is taken at once). Anything else is left alone: another name's
//! temporaries, another host's, an older cluda's (no `@<host>`), a live process's, a locked
//! one (its writer lives in another pid namespace), and any on a file system without locks.
//!
//! The final name is claimed by the rename itself, never by a check made earlier: a name that
//! appeared while the file was written (another program, another run, a dangling symlink) is
//! not replaced unless the writer says so ([`Claim`]). The rename refuses an existing name
//! atomically (`renameat2(RENAME_NOREPLACE)` on Linux, else `link` + `unlink`; see
//! [`rename_noreplace`]), so no check-then-rename window remains.
//! Dropped without a commit (an error, a full disk, an interrupted run) it removes the
//! temporary file: no reader ever sees a half-written cluster file or an `.npy` whose header
//! promises frames it lacks, and two runs writing the same output leave one of the two whole
//! files.

mod stale;
#[cfg(test)]
mod tests;

pub use stale::{host_tag, remove_stale_temporaries};
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

use crate::error::{Error, Result};

/// Most suffixes [`Claim::NextFree`] tries (`<stem>_2` ..= `<stem>_<MAX_SUFFIX>`) before it
/// gives up with an error naming the file.
pub const MAX_SUFFIX: u32 = 10_000;

/// What [`AtomicFile::commit`] does when its final name exists by the time of the commit,
/// whoever made it (another program, another run, a symlink, dangling or not): the name is
/// claimed by the rename itself, so nothing that appeared meanwhile is replaced by accident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Claim {
    /// Refuse: the commit fails with an error naming the file (left as it is) and the
    /// temporary file is removed. What `cluda find --out` and `match --out` do without
    /// `--overwrite`.
    #[default]
    Refuse,
    /// Replace whatever is there (`--overwrite`, `overwrite=True`).
    Replace,
    /// Take the next free name instead, by the rule of `--out-dir` ([`suffixed`]:
    /// `d.clust`, `d_2.clust`, `d_3.clust`, ...); the commit returns the name taken.
    NextFree,
}

/// `path` with `_<k>` added to its stem: `o/d.clust` -> `o/d_<k>.clust`, `o/d` -> `o/d_<k>`
/// (the names [`Claim::NextFree`] tries, as the planning of `--out-dir` names them).
pub fn suffixed(path: &Path, k: u32) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}_{k}.{}", ext.to_string_lossy()),
        None => format!("{stem}_{k}"),
    };
    path.with_file_name(name)
}

/// The error of a commit whose final name exists by then (it appeared while the file was
/// written): names the file and says how to allow replacing it.
pub fn appeared(path: &Path) -> Error {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "exists by now (it appeared while cluda wrote it) and is not replaced unless you \
             allow it (--overwrite, or overwrite=True in Python); what this run wrote there was \
             discarded",
        ),
    )
}

/// Renames `from` to `to` unless `to` exists (any kind of file, a dangling symlink
/// included), in one step: `renameat2(RENAME_NOREPLACE)` on Linux; where the kernel or the
/// file system lacks it, `link` (which refuses an existing name too) and `unlink` of `from`.
///
/// # Errors
/// [`std::io::ErrorKind::AlreadyExists`] when `to` exists (nothing is moved); the operating
/// system's otherwise (also on a file system without hard links, where no rename can refuse
/// an existing name).
pub fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        };
        let (f, t) = (c(from)?, c(to)?);
        // SAFETY: `f` and `t` are NUL-terminated strings that live across the call, which
        // only reads them; `AT_FDCWD` makes relative paths relative to the current directory,
        // as `std::fs::rename` takes them.
        let r = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        // EINVAL: the file system does not support the flag; ENOSYS: the kernel lacks
        // renameat2. Either way the link below refuses an existing name too.
        if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
            return Err(e);
        }
    }
    std::fs::hard_link(from, to)?;
    // The new name holds the file; a failure to remove the old one leaves a second name of
    // the same file, not a lost or replaced one.
    let _ = std::fs::remove_file(from);
    Ok(())
}

/// A file written under a temporary name and renamed into place on [`AtomicFile::commit`].
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    /// What the commit does when the final name exists by then.
    claim: Claim,
    /// `None` only inside [`AtomicFile::commit`] (which takes it) and [`Drop`].
    out: Option<BufWriter<NamedTempFile>>,
}

impl AtomicFile {
    /// Creates the temporary file for `path` in `path`'s directory; `path` itself is not
    /// touched until [`AtomicFile::commit`], which replaces whatever is there then
    /// ([`Claim::Replace`]: the library's file helpers write over their path, as
    /// `std::fs::write` does). Outputs that must not replace anything use
    /// [`AtomicFile::create_claiming`].
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` when no temporary file can be created beside it.
    pub fn create(path: &Path) -> Result<Self> {
        Self::create_claiming(path, Claim::Replace)
    }

    /// As [`AtomicFile::create`], the final name claimed on commit as `claim` says.
    ///
    /// # Errors
    /// As [`AtomicFile::create`].
    pub fn create_claiming(path: &Path, claim: Claim) -> Result<Self> {
        let name = path
            .file_name()
            .ok_or_else(|| Error::format(path, "an output needs a file name, not a directory"))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        remove_stale_temporaries(path);
        let prefix = format!(
            ".{}.{}@{}.",
            name.to_string_lossy(),
            std::process::id(),
            host_tag()
        );
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
        // Held until the file is closed (committed, dropped, or the process gone), so a later
        // run can tell this file from one a killed writer left. A file system without locks
        // refuses it; a later run then never removes this file (it cannot take the lock
        // either), which is safe.
        let _ = file.as_file().try_lock();
        Ok(Self {
            path: path.to_path_buf(),
            tmp: file.path().to_path_buf(),
            claim,
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

    /// What the commit does when the final name exists by then.
    pub fn claim(&self) -> Claim {
        self.claim
    }

    /// Sets what the commit does when the final name exists by then.
    pub fn set_claim(&mut self, claim: Claim) {
        self.claim = claim;
    }

    /// Flushes and syncs the temporary file and renames it to the final path, claimed as
    /// [`AtomicFile::claim`] says; returns the path taken (another one than
    /// [`AtomicFile::path`] only with [`Claim::NextFree`]). On an error the temporary file is
    /// removed and the final path is as it was.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when flushing, syncing or renaming fails; with
    /// [`Claim::Refuse`], when the final name exists by then ([`appeared`], kind
    /// [`std::io::ErrorKind::AlreadyExists`]); with [`Claim::NextFree`], when
    /// [`MAX_SUFFIX`] names are all taken.
    pub fn commit(mut self) -> Result<PathBuf> {
        let path = std::mem::take(&mut self.path);
        let file = self.finish(&path)?;
        match self.claim {
            Claim::Replace => {
                // A failed rename hands the temporary file back in the error, and dropping
                // the error removes it.
                file.persist(&path).map_err(|e| Error::io(&path, e.error))?;
                Ok(path)
            }
            Claim::Refuse => claim_first(file, std::iter::once(path.clone()), &path),
            Claim::NextFree => {
                let names = (2..=MAX_SUFFIX).map(|k| suffixed(&path, k));
                claim_first(file, std::iter::once(path.clone()).chain(names), &path)
            }
        }
    }

    /// Flushes and syncs the temporary file and renames it to the first of `names` that does
    /// not exist by then (each tried by the refusing rename, so none is replaced); returns
    /// it. [`AtomicFile::claim`] is not consulted. On an error the temporary file is removed.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when flushing, syncing or renaming fails, or when every
    /// name exists ([`appeared`], naming the first).
    pub fn commit_first(mut self, names: impl IntoIterator<Item = PathBuf>) -> Result<PathBuf> {
        let path = std::mem::take(&mut self.path);
        let file = self.finish(&path)?;
        claim_first(file, names, &path)
    }

    /// Flushes and syncs the temporary file and hands it over (removed when dropped).
    fn finish(&mut self, path: &Path) -> Result<NamedTempFile> {
        let Some(mut out) = self.out.take() else {
            return Err(Error::format(path, "output already committed"));
        };
        let io = |e| Error::io(path, e);
        out.flush().map_err(io)?;
        // On an error below the temporary file is dropped here, which removes it.
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        match file.as_file().sync_data() {
            // Some file systems cannot sync; that is not a write error.
            Err(e) if e.kind() != std::io::ErrorKind::InvalidInput => return Err(io(e)),
            _ => {}
        }
        Ok(file)
    }
}

/// Renames `file` to the first of `names` that does not exist (tempfile's
/// `persist_noclobber`: `renameat2(RENAME_NOREPLACE)`, else `link` + `unlink`); `first` names
/// the output in the error when all exist. A failed rename hands the temporary file back, and
/// dropping it removes it.
fn claim_first(
    mut file: NamedTempFile,
    names: impl IntoIterator<Item = PathBuf>,
    first: &Path,
) -> Result<PathBuf> {
    for name in names {
        match file.persist_noclobber(&name) {
            Ok(_) => return Ok(name),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => file = e.file,
            Err(e) => return Err(Error::io(&name, e.error)),
        }
    }
    Err(appeared(first))
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
