//! Cluster files: the writer of an acquisition's file and its commit on a thread of its own.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::naming::{fallback_name, file_name};
use super::summary::{AcquisitionSummary, StreamTotals};
use crate::error::{Error, Result};
use crate::io::write_behind::{WriteBehind, WriteStats};
use crate::io::{AtomicFile, ClusterFileWriter};
use crate::stream::header::ZmqHeader;
use crate::stream::source::{Reporter, StreamEvent};

/// A data acquisition's cluster file being committed on a thread of its own, with what its
/// summary needs once the commit is done.
pub(super) struct Committing {
    /// The path taken (the planned one, or the next free one), what the writer did and how
    /// long the commit took.
    pub(super) thread: std::thread::JoinHandle<Result<(PathBuf, WriteStats, Duration)>>,
    pub(super) path: PathBuf,
    pub(super) frames: u64,
    pub(super) clusters: u64,
    /// The summary, but for the file and its counts (set when the acquisition is done).
    pub(super) out: Option<AcquisitionSummary>,
}

/// The commit in flight (at most one: the last data acquisition's). Its summary is given when
/// it is done while no frames come, else before the next acquisition's first frame reaches
/// the caller, else when the next acquisition ends: summaries and frames reach the caller in
/// the acquisitions' order. Dropped with one in flight (an error stops the run), it waits for
/// it, so a file whose frames were all written is still put in place.
#[derive(Default)]
pub(super) struct Commits(pub(super) Option<Committing>);

impl Commits {
    /// Whether a commit is in flight and done.
    pub(super) fn is_done(&self) -> bool {
        self.0.as_ref().is_some_and(|c| c.thread.is_finished())
    }

    /// Waits for the commit in flight, if any, and hands its acquisition's summary to
    /// `summary` (with the file, or without it and reported when the commit failed).
    pub(super) fn finish(
        &mut self,
        totals: &mut StreamTotals,
        report: &Reporter,
        summary: &mut dyn FnMut(&AcquisitionSummary) -> Result<()>,
    ) -> Result<()> {
        let Some(c) = self.0.take() else {
            return Ok(());
        };
        let joined = c.thread.join();
        let Some(mut out) = c.out else {
            return Err(Error::Internal(
                "a commit without its acquisition's summary".into(),
            ));
        };
        match joined {
            Ok(Ok((taken, written, took))) => {
                out.file = Some(taken);
                out.data_frames = c.frames;
                out.clusters = c.clusters;
                out.timing.write = written;
                out.timing.commit = took;
                totals.frames += c.frames;
                totals.clusters += c.clusters;
            }
            Ok(Err(e)) => report(&StreamEvent::Output(format!(
                "acquisition {}: {} could not be completed ({e}); its clusters are lost, the stream goes on",
                out.file_index,
                c.path.display()
            ))),
            Err(_) => {
                return Err(Error::Internal(format!(
                    "the thread committing {} panicked",
                    c.path.display()
                )));
            }
        }
        summary(&out)
    }
}

impl Drop for Commits {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            let _ = c.thread.join();
        }
    }
}

/// The writer of an acquisition's cluster file: under its name ([`file_name`]), else (the
/// file system refuses it) under a fallback name built from the file index and the process id
/// alone, reported. `None`, reported, when neither can be created: the acquisition's clusters
/// then have nowhere to go, but the stream goes on.
pub(super) fn create_writer(
    dir: &Path,
    first: &ZmqHeader,
    used: &mut HashSet<PathBuf>,
    report: &Reporter,
) -> Option<(PathBuf, ClusterFileWriter<WriteBehind<AtomicFile>>)> {
    let path = file_name(dir, first, used);
    let first_error = match ClusterFileWriter::create(&path) {
        Ok(w) => return Some((path, w)),
        Err(e) => e,
    };
    let fallback = fallback_name(dir, first, used);
    match ClusterFileWriter::create(&fallback) {
        Ok(w) => {
            report(&StreamEvent::Output(format!(
                "acquisition {}: {} cannot be created ({first_error}); its clusters go to {} instead",
                first.file_index,
                path.display(),
                fallback.display()
            )));
            Some((fallback, w))
        }
        Err(e) => {
            report(&StreamEvent::Output(format!(
                "acquisition {}: neither {} ({first_error}) nor {} ({e}) can be created; its clusters are lost, the stream goes on",
                first.file_index,
                path.display(),
                fallback.display()
            )));
            None
        }
    }
}
