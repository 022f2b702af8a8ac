//! Temporary files that killed writers left behind: this host's tag in their names, and their
//! removal once provably stale (their process gone, not locked).

use std::path::{Path, PathBuf};

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

/// The pid in `entry`, when `entry` is a temporary name of [`AtomicFile`](super::AtomicFile) for the final name
/// `name` written on the host `host` (`.<name>.<pid>@<host>.<random>.tmp`, `<random>`
/// alphanumeric); `None` for anything else (another final name, another host, an older
/// cluda's `.<name>.<pid>.<random>.tmp`).
pub(super) fn temporary_writer(entry: &str, name: &str, host: &str) -> Option<i32> {
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
/// [`AtomicFile::create_claiming`](super::AtomicFile::create_claiming) calls it for every output, so a task that a Dask worker
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
