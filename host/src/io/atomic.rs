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

/// This host as temporary names carry it: eight hex digits of a 32-bit FNV-1a hash of the host
/// name (short, so a long output name still fits the file system's name limit; `unknown`'s
/// hash when the name cannot be read).
pub fn host_tag() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, which is passed; gethostname writes at
    // most that many bytes.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name: &[u8] = if r == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        &buf[..end]
    } else {
        b"unknown"
    };
    let hash = name.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("{hash:08x}")
}

/// The pid in `entry`, when `entry` is a temporary name of [`AtomicFile`] for the final name
/// `name` written on the host `host` (`.<name>.<pid>@<host>.<random>.tmp`, `<random>`
/// alphanumeric); `None` for anything else (another final name, another host, an older
/// cluda's `.<name>.<pid>.<random>.tmp`).
fn temporary_writer(entry: &str, name: &str, host: &str) -> Option<i32> {
    let rest = entry
        .strip_prefix('.')?
        .strip_prefix(name)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let (owner, random) = rest.split_once('.')?;
    if random.is_empty() || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let (pid, h) = owner.split_once('@')?;
    if h != host || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse::<i32>().ok().filter(|&p| p > 0)
}

/// Whether a process `pid` exists on this host (in this pid namespace): `kill(pid, 0)`, which
/// sends nothing, fails with ESRCH only for a process that does not exist (a zombie, not yet
/// reaped, still exists).
fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes the temporary files that killed writers of `path` left in its directory, and only
/// those that are provably stale: named for exactly `path`'s final name
/// (`.<name>.<pid>@<host>.<random>.tmp`), written on this host, their process gone, and not
/// locked (each is locked by this call before it is removed, so two runs never both act on
/// one). Returns the paths removed. Best effort: anything that cannot be read, locked or
/// removed is left as it is, and nothing here fails a write.
///
/// [`AtomicFile::create_claiming`] calls it for every output, so a task that a Dask worker
/// was killed in leaves no `.in2.clust.<pid>@<host>.<random>.tmp` behind once the task runs
/// again (on any worker of the same host).
pub fn remove_stale_temporaries(path: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return removed;
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    let host = host_tag();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|e| temporary_writer(e, name, &host))
        else {
            continue;
        };
        if process_exists(pid) {
            continue;
        }
        let p = entry.path();
        if let Some(p) = remove_if_unlocked(p) {
            removed.push(p);
        }
    }
    removed
}

/// Removes `p` when it is a regular file (not followed through a symlink) that no one holds a
/// lock on, while holding the lock itself; returns `p` when removed.
fn remove_if_unlocked(p: PathBuf) -> Option<PathBuf> {
    #[cfg(unix)]
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let before = std::fs::symlink_metadata(&p).ok()?;
    if !before.file_type().is_file() {
        return None;
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let f = options.open(&p).ok()?;
    // Locked: a live writer (in another pid namespace, or on another machine of a shared file
    // system) holds it. Any other error (no locks here): not provably stale either.
    f.try_lock().ok()?;
    #[cfg(unix)]
    {
        let now = f.metadata().ok()?;
        if (now.dev(), now.ino()) != (before.dev(), before.ino()) {
            return None;
        }
    }
    std::fs::remove_file(&p).ok()?;
    Some(p)
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
                .starts_with(&format!(".out.bin.{}@{}.", std::process::id(), host_tag()))
        );
        a.write_all(b"x").unwrap();
        a.commit().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&p), mode(&plain));
    }

    /// A name that appears between the temporary file's creation and the commit (the race
    /// of issue 32) is never replaced: refused with an error naming it (nothing left behind),
    /// or, with [`Claim::NextFree`], the next free name taken; a dangling symlink counts as
    /// a file; [`Claim::Replace`] replaces.
    #[test]
    fn a_name_that_appears_meanwhile_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.clust");
        let mut a = AtomicFile::create_claiming(&p, Claim::Refuse).unwrap();
        a.write_all(b"new").unwrap();
        std::fs::write(&p, b"theirs").unwrap();
        let e = a.commit().unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("o.clust") && text.contains("--overwrite"),
            "{text}"
        );
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists)
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"theirs");
        assert_eq!(entries(dir.path()), ["o.clust"]);

        // A dangling symlink is a name taken, refused and kept.
        let l = dir.path().join("l.clust");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &l).unwrap();
        let mut a = AtomicFile::create_claiming(&l, Claim::Refuse).unwrap();
        a.write_all(b"new").unwrap();
        a.commit().unwrap_err();
        assert!(
            std::fs::symlink_metadata(&l)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(!dir.path().join("nowhere").exists());

        // NextFree: o.clust and o_2.clust taken -> o_3.clust; the symlink -> l_2.clust.
        std::fs::write(dir.path().join("o_2.clust"), b"theirs too").unwrap();
        let mut a = AtomicFile::create_claiming(&p, Claim::NextFree).unwrap();
        a.write_all(b"mine").unwrap();
        assert_eq!(a.commit().unwrap(), dir.path().join("o_3.clust"));
        assert_eq!(
            std::fs::read(dir.path().join("o_3.clust")).unwrap(),
            b"mine"
        );
        let mut a = AtomicFile::create_claiming(&l, Claim::NextFree).unwrap();
        a.write_all(b"mine").unwrap();
        assert_eq!(a.commit().unwrap(), dir.path().join("l_2.clust"));
        assert_eq!(std::fs::read(&p).unwrap(), b"theirs");

        // commit_first: the first free of the names given.
        let mut a = AtomicFile::create_claiming(&p, Claim::Refuse).unwrap();
        a.write_all(b"first").unwrap();
        let names = [
            p.clone(),
            dir.path().join("o_2.clust"),
            dir.path().join("x"),
        ];
        assert_eq!(a.commit_first(names).unwrap(), dir.path().join("x"));

        // Replace (--overwrite) replaces.
        let mut a = AtomicFile::create_claiming(&p, Claim::Replace).unwrap();
        a.write_all(b"replaced").unwrap();
        assert_eq!(a.commit().unwrap(), p);
        assert_eq!(std::fs::read(&p).unwrap(), b"replaced");
        assert!(!entries(dir.path()).iter().any(|n| n.ends_with(".tmp")));
    }

    /// `rename_noreplace` moves to a free name and refuses a file or a dangling symlink.
    #[test]
    fn rename_noreplace_refuses_any_existing_name() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, l) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("l"),
        );
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &l).unwrap();
        for to in [&b, &l] {
            let e = rename_noreplace(&a, to).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        }
        assert_eq!(std::fs::read(&b).unwrap(), b"b");
        let c = dir.path().join("c");
        rename_noreplace(&a, &c).unwrap();
        assert_eq!(std::fs::read(&c).unwrap(), b"a");
        assert!(!a.exists());
    }

    /// Issue 32 item 8: the temporaries a killed writer left for the same final name are
    /// removed by the next writer of that name, and only those that are provably stale (this
    /// host, the process gone, not locked); a live process's, a locked one, another name's,
    /// another host's and an older cluda's are kept, and so is a live writer's in this process.
    #[cfg(target_os = "linux")]
    #[test]
    fn stale_temporaries_of_killed_writers_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("in2.clust");
        let host = host_tag();
        let other_host = if host == "00000000" {
            "11111111"
        } else {
            "00000000"
        };
        // A pid that cannot exist (above the kernel's pid_max), and a child's that exited and
        // was reaped.
        let pid_max: i64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4_194_304);
        let never = pid_max + 1;
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let exited = gone.id();
        gone.wait().unwrap();
        let mut live = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let mk = |n: String| {
            let q = dir.path().join(n);
            std::fs::write(&q, b"partial").unwrap();
            q
        };
        let stale_never = mk(format!(".in2.clust.{never}@{host}.AbC123.tmp"));
        let stale_exited = mk(format!(".in2.clust.{exited}@{host}.x9Y8z7.tmp"));
        let kept = [
            mk(format!(".in2.clust.{}@{host}.Live01.tmp", live.id())),
            mk(format!(".in2.clust2.{never}@{host}.Oth001.tmp")),
            mk(format!(".in2.{never}@{host}.Oth002.tmp")),
            mk(format!(".in2.clust.{never}@{other_host}.Host01.tmp")),
            mk(format!(".in2.clust.{never}.Old001.tmp")),
            mk(format!(".in2.clust.{never}@{host}.a.b.tmp")),
        ];
        // Locked by another open file (as a writer in another pid namespace, or on another
        // machine of a shared file system, holds it): kept while the lock is held.
        let locked = mk(format!(".in2.clust.{never}@{host}.Lock01.tmp"));
        let holder = std::fs::File::open(&locked).unwrap();
        holder.lock().unwrap();
        // A live writer of the same name in this process: its temporary is locked and its pid
        // alive.
        let mut writer = AtomicFile::create(&p).unwrap();
        writer.write_all(b"still writing").unwrap();

        let mut next = AtomicFile::create(&p).unwrap();
        assert!(!stale_never.exists() && !stale_exited.exists());
        for k in kept.iter().chain([&locked]) {
            assert!(k.exists(), "{} was removed", k.display());
        }
        assert!(writer.temp_path().exists() && next.temp_path().exists());
        next.write_all(b"next").unwrap();
        assert_eq!(next.commit().unwrap(), p);
        assert!(writer.temp_path().exists());
        assert_eq!(writer.commit().unwrap(), p);
        assert_eq!(std::fs::read(&p).unwrap(), b"still writing");

        // The lock released (its holder gone), the temporary is provably stale.
        drop(holder);
        assert_eq!(remove_stale_temporaries(&p), vec![locked.clone()]);
        assert!(!locked.exists());
        for k in &kept {
            assert!(k.exists(), "{} was removed", k.display());
        }
        live.kill().unwrap();
        live.wait().unwrap();
    }

    #[test]
    fn temporary_names_are_parsed_exactly() {
        assert_eq!(temporary_writer(".a.7@h.Xy1.tmp", "a", "h"), Some(7));
        assert_eq!(temporary_writer(".a.b.7@h.Xy1.tmp", "a.b", "h"), Some(7));
        for bad in [
            ".a.b.7@h.Xy1.tmp",
            ".a.7@g.Xy1.tmp",
            ".a.7.Xy1.tmp",
            ".a.0@h.Xy1.tmp",
            ".a.-7@h.Xy1.tmp",
            ".a.99999999999@h.Xy1.tmp",
            ".a.7@h..tmp",
            ".a.7@h.Xy1.tmp.png",
            "a.7@h.Xy1.tmp",
        ] {
            assert_eq!(temporary_writer(bad, "a", "h"), None, "{bad}");
        }
    }

    #[test]
    fn suffixes_go_before_the_extension() {
        assert_eq!(
            suffixed(Path::new("o/d.clust"), 2),
            Path::new("o/d_2.clust")
        );
        assert_eq!(suffixed(Path::new("o/d"), 3), Path::new("o/d_3"));
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
