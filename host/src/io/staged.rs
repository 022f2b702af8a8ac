//! A set of files written together (`cluda gen`'s pedestal and data, each maybe a raw
//! acquisition of several files) that appears in its directory only when all of it is
//! complete, and never mixed with another set of the same names.
//!
//! The files are written into a staging directory beside their final place
//! (`.cluda-stage.<pid>.<random>.tmp`, a [`tempfile::TempDir`]), then moved into place by
//! renames while the final directory is locked (`flock` through [`std::fs::File::lock`]), so
//! two writers of the same names commit one after the other: the last one's whole set wins,
//! never a pedestal of one beside the data of the other. Files of the older set that the new one does not replace
//! (a raw acquisition's extra data files) are removed in the same locked step, so they are not
//! read as part of the new set. Dropped before [`StagedSet::commit`] (an error, a signal), the
//! staging directory is removed with what is in it and the final directory is untouched.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A staging directory for a set of files bound for `dir`.
#[derive(Debug)]
pub struct StagedSet {
    dir: PathBuf,
    /// Removed with what is in it when dropped.
    stage: tempfile::TempDir,
}

impl StagedSet {
    /// A new, empty staging directory inside `dir` (which must exist).
    ///
    /// # Errors
    /// [`Error::Io`] naming `dir` (and the staging directory tried) when it cannot be created.
    pub fn create(dir: &Path) -> Result<Self> {
        Ok(Self {
            dir: dir.to_path_buf(),
            stage: stage_in(dir, &format!(".cluda-stage.{}.", std::process::id()))?,
        })
    }

    /// Where the files are to be written.
    pub fn path(&self) -> &Path {
        self.stage.path()
    }

    /// The final directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves every file of the staging directory into the final directory, `.json` files last
    /// (a raw acquisition's master after its data files), while the directory is locked.
    /// `older(dir)` lists the files of an older set of the same names now there: unless
    /// `overwrite`, any of them is an error naming `option` (nothing is moved); with it, those
    /// the new set does not rename over are removed. Returns the final paths, in the order
    /// moved.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`option`) for an older set without `overwrite`;
    /// [`Error::Io`] naming the file when locking, a rename or a removal fails, or, without
    /// `overwrite`, when one of the names exists by the time it is renamed to (the files moved
    /// before it are taken back).
    pub fn commit(
        self,
        option: &'static str,
        overwrite: bool,
        older: &dyn Fn(&Path) -> Result<Vec<PathBuf>>,
    ) -> Result<Vec<PathBuf>> {
        let lock = File::open(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        lock.lock().map_err(|e| Error::io(&self.dir, e))?;
        let old = older(&self.dir)?;
        refuse_older(&old, option, overwrite)?;
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.stage.path())
            .map_err(|e| Error::io(self.stage.path(), e))?
            .map(|e| {
                e.map(|e| e.path())
                    .map_err(|e| Error::io(self.stage.path(), e))
            })
            .collect::<Result<_>>()?;
        names.sort_by_key(|p| (p.extension().is_some_and(|x| x == "json"), p.clone()));
        let mut done: Vec<PathBuf> = Vec::with_capacity(names.len());
        for from in names {
            let Some(name) = from.file_name() else {
                continue;
            };
            let to = self.dir.join(name);
            // Without `overwrite` the rename itself refuses a name that exists by now (one
            // that appeared after `older` looked, made by a program that does not lock):
            // the files of this set moved so far go back to the stage (removed with it), so
            // no part of the set is left beside another program's file.
            let moved = if overwrite {
                std::fs::rename(&from, &to)
            } else {
                super::atomic::rename_noreplace(&from, &to)
            };
            if let Err(e) = moved {
                for put in &done {
                    if let Some(n) = put.file_name() {
                        let _ = std::fs::rename(put, self.stage.path().join(n));
                    }
                }
                return Err(match e.kind() {
                    std::io::ErrorKind::AlreadyExists => super::atomic::appeared(&to),
                    _ => Error::io(&to, e),
                });
            }
            done.push(to);
        }
        for stale in old.iter().filter(|p| !done.contains(p)) {
            match std::fs::remove_file(stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(stale, e)),
            }
        }
        drop(lock);
        Ok(done)
    }
}

/// A new, empty directory `<dir>/<prefix><random>.tmp` to stage files in, removed with what
/// is in it when dropped.
///
/// # Errors
/// [`Error::Io`] naming `dir` when it cannot be created.
pub fn stage_in(dir: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .suffix(".tmp")
        .tempdir_in(dir)
        .map_err(|e| Error::io(dir, e))
}

/// The error for files of an older set when they may not be replaced.
///
/// # Errors
/// [`Error::InvalidParameter`] (`option`) naming the first files, unless `overwrite` or
/// `old` is empty.
pub fn refuse_older(old: &[PathBuf], option: &'static str, overwrite: bool) -> Result<()> {
    if overwrite || old.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = old
        .iter()
        .take(3)
        .map(|p| p.display().to_string())
        .collect();
    let more = if old.len() > 3 {
        format!(" and {} more", old.len() - 3)
    } else {
        String::new()
    };
    Err(Error::param(
        option,
        format!(
            "{}{more} exist; they are not replaced unless you allow it (--overwrite)",
            names.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(dir: &Path) -> Result<Vec<PathBuf>> {
        Ok(["a.npy", "b_master_0.json", "b_d0_f1_0.raw"]
            .iter()
            .map(|n| dir.join(n))
            .filter(|p| p.exists())
            .collect())
    }

    #[test]
    fn a_set_appears_whole_and_replaces_only_when_allowed() {
        let dir = tempfile::tempdir().expect("dir");
        let d = dir.path();
        let s = StagedSet::create(d).expect("stage");
        std::fs::write(s.path().join("a.npy"), b"new a").expect("write");
        std::fs::write(s.path().join("b_master_0.json"), b"new b").expect("write");
        let done = s.commit("out", false, &set).expect("commit");
        assert_eq!(done, [d.join("a.npy"), d.join("b_master_0.json")]);
        // An older set is refused without overwrite: nothing moved, the stage removed.
        std::fs::write(d.join("b_d0_f1_0.raw"), b"stale").expect("write");
        let s = StagedSet::create(d).expect("stage");
        std::fs::write(s.path().join("a.npy"), b"newer a").expect("write");
        let e = s.commit("out", false, &set).expect_err("refused");
        assert!(e.to_string().contains("--overwrite"), "{e}");
        assert_eq!(std::fs::read(d.join("a.npy")).expect("a"), b"new a");
        // With overwrite the stale data file goes.
        let s = StagedSet::create(d).expect("stage");
        std::fs::write(s.path().join("a.npy"), b"newer a").expect("write");
        s.commit("out", true, &set).expect("commit");
        assert_eq!(std::fs::read(d.join("a.npy")).expect("a"), b"newer a");
        // The older set's files the new one does not hold are gone with it.
        assert!(!d.join("b_d0_f1_0.raw").exists());
        assert!(!d.join("b_master_0.json").exists());
        // Dropped uncommitted: nothing left.
        let s = StagedSet::create(d).expect("stage");
        std::fs::write(s.path().join("x"), b"x").expect("write");
        drop(s);
        let mut names: Vec<_> = std::fs::read_dir(d)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["a.npy"]);
    }

    /// A name of the set that appears after `older` looked (made by a program that does not
    /// lock) is not replaced without `overwrite`: an error naming it, and the files of the set
    /// moved before it are taken back, so no part of the set is left.
    #[test]
    fn a_name_that_appears_after_the_check_is_not_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let d = dir.path();
        // `older` sees nothing, as if the name appeared just after it looked.
        let none = |_: &Path| -> Result<Vec<PathBuf>> { Ok(Vec::new()) };
        std::fs::write(d.join("b.npy"), b"theirs").expect("write");
        let s = StagedSet::create(d).expect("stage");
        std::fs::write(s.path().join("a.npy"), b"new a").expect("write");
        std::fs::write(s.path().join("b.npy"), b"new b").expect("write");
        let e = s.commit("out", false, &none).expect_err("refused");
        assert!(e.to_string().contains("b.npy"), "{e}");
        assert_eq!(std::fs::read(d.join("b.npy")).expect("b"), b"theirs");
        let names: Vec<_> = std::fs::read_dir(d)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["b.npy"]);
    }
}
