//! Where cluster files go and their names: the receiver's `fname` and `fileIndex`, never an
//! existing file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::atomic::{MAX_SUFFIX, suffixed};
use crate::stream::header::ZmqHeader;

/// The sub-pixel image beside cluster file `clust` (`run_3.clust` -> `run_3.image.npy`),
/// never an existing file: `run_3.image_2.npy`, ... instead.
pub(super) fn image_name(clust: &Path) -> PathBuf {
    let base = clust.with_extension("");
    let mut k = 1;
    loop {
        let name = if k == 1 {
            format!("{}.image.npy", base.display())
        } else {
            format!("{}.image_{k}.npy", base.display())
        };
        let p = PathBuf::from(name);
        if std::fs::symlink_metadata(&p).is_err() {
            return p;
        }
        k += 1;
    }
}

/// Checks up front that cluster files can be written into `dir` (created if missing): a file
/// is created there and removed at once, so an unwritable directory is an error naming it
/// before the first acquisition, not a lost acquisition later.
///
/// # Errors
/// [`Error::InvalidParameter`] (`out-dir`) naming the directory and what the system said.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    let fail = |what: &str, e: std::io::Error| {
        Error::param("out-dir", format!("{what} {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("cannot create", e))?;
    let probe = dir.join(format!(".cluda-probe.{}.tmp", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| fail("cannot write files in", e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// A name for an acquisition's file that any file system takes: `cluda_<fileIndex>_<pid>`
/// (plus a counter), never one already used or on disk.
pub(super) fn fallback_name(dir: &Path, first: &ZmqHeader, used: &mut HashSet<PathBuf>) -> PathBuf {
    let stem = format!("cluda_{}_{}", first.file_index, std::process::id());
    let mut p = dir.join(format!("{stem}.clust"));
    let mut k = 2u64;
    while (used.contains(&p) || std::fs::symlink_metadata(&p).is_ok()) && k < 10_000 {
        p = dir.join(format!("{stem}_{k}.clust"));
        k += 1;
    }
    used.insert(p.clone());
    p
}

/// The longest `fname` prefix kept in a cluster file's name, in characters.
pub const MAX_PREFIX: usize = 120;

/// The file an acquisition's clusters go to: `<prefix>_<fileIndex>.clust` in `dir`, where
/// `<prefix>` is the last component of the header's `fname` (slsReceiver's file name prefix,
/// `run` when empty; characters other than letters, digits, `-`, `_` and `.` become `_`; at
/// most [`MAX_PREFIX`] of them), like
/// the receiver's own `<prefix>_master_<fileIndex>.json`. A name already written in this run
/// or already on disk is never overwritten: `_a<acqIndex>` of the first frame is added, then a
/// counter.
pub fn file_name(dir: &Path, first: &ZmqHeader, used: &mut HashSet<PathBuf>) -> PathBuf {
    let (stem, candidates) = name_candidates(dir, first);
    for p in candidates {
        if !used.contains(&p) && std::fs::symlink_metadata(&p).is_err() {
            used.insert(p.clone());
            return p;
        }
    }
    dir.join(format!("{stem}_{}.clust", std::process::id()))
}

/// The names an acquisition's file is committed under, in the order tried (each by a rename
/// that refuses an existing name): `path` as chosen, then the names of [`file_name`]'s rule,
/// then `path` with a counter ([`suffixed`]), so that a file that appeared under the chosen
/// name while the acquisition was written is never replaced.
pub(super) fn commit_names(
    path: &Path,
    dir: &Path,
    first: &ZmqHeader,
) -> impl Iterator<Item = PathBuf> + Send + use<> {
    let (_, rule) = name_candidates(dir, first);
    let (chosen, not_again, counted) = (path.to_path_buf(), path.to_path_buf(), path.to_path_buf());
    std::iter::once(chosen)
        .chain(rule.filter(move |p| *p != not_again))
        .chain((2..=MAX_SUFFIX).map(move |k| suffixed(&counted, k)))
}

/// The stem `<prefix>_<fileIndex>` of [`file_name`] and its candidate names in `dir`, in
/// order: `<stem>.clust`, `<stem>_a<acqIndex>.clust`, then `<stem>_a<acqIndex>_<k>.clust`.
fn name_candidates(
    dir: &Path,
    first: &ZmqHeader,
) -> (String, impl Iterator<Item = PathBuf> + Send + use<>) {
    let base = first
        .fname
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>();
    let base = match base.trim_matches('.') {
        "" => "run".to_string(),
        // At most MAX_PREFIX characters (all ASCII by now), so that the name with its index,
        // suffixes and the temporary file's additions stays below the 255 bytes file systems
        // allow.
        _ => base.chars().take(MAX_PREFIX).collect(),
    };
    let stem = format!("{base}_{}", first.file_index);
    let stem_a = format!("{stem}_a{}", first.acq_index);
    // Built one at a time as they are tried: the 10,000 names made up front took a
    // millisecond of every acquisition's start.
    let candidates = [
        format!("{stem}.clust"),
        format!("{stem}_a{}.clust", first.acq_index),
    ]
    .into_iter()
    .chain(
        (2..)
            .take(10_000)
            .map(move |k| format!("{stem_a}_{k}.clust")),
    );
    let dir = dir.to_path_buf();
    (stem, candidates.map(move |name| dir.join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_follow_the_receiver_and_never_collide() {
        let dir = tempfile::tempdir().expect("dir");
        let mut used = HashSet::new();
        let mut h = ZmqHeader::frame(4, 4, 17);
        h.fname = "/data/beam time/run".into();
        h.file_index = 3;
        let a = file_name(dir.path(), &h, &mut used);
        assert_eq!(a, dir.path().join("run_3.clust"));
        let b = file_name(dir.path(), &h, &mut used);
        assert_eq!(b, dir.path().join("run_3_a17.clust"));
        std::fs::write(dir.path().join("run_3_a17_2.clust"), b"").expect("write");
        let c = file_name(dir.path(), &h, &mut used);
        assert_eq!(c, dir.path().join("run_3_a17_3.clust"));
        // No path or odd characters leak into the name.
        h.fname = "../..".into();
        assert_eq!(
            file_name(dir.path(), &h, &mut used),
            dir.path().join("run_3_a17_4.clust")
        );
        h.fname = "x y/é b".into();
        h.file_index = 0;
        assert_eq!(
            file_name(dir.path(), &h, &mut used),
            dir.path().join("__b_0.clust")
        );
    }
}
