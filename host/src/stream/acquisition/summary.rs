//! What a run reports: each acquisition's summary and timing, and the totals.

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::EngineStats;
use crate::io::write_behind::WriteStats;
use crate::stream::source::AcquisitionCounts;

/// What an acquisition was used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquisitionKind {
    /// Dark frames for the pedestal.
    Dark,
    /// Clusters found and written.
    Data,
    /// It ended before its pedestal was full: no clusters, no file.
    Short,
}

/// One acquisition's outcome: the summary line.
#[derive(Clone, Debug)]
pub struct AcquisitionSummary {
    /// The acquisition's `fileIndex`.
    pub file_index: u64,
    /// What it was used for.
    pub kind: AcquisitionKind,
    /// The cluster file written (data acquisitions).
    pub file: Option<PathBuf>,
    /// Frames pushed into the pedestal.
    pub pedestal_frames: u64,
    /// Frames clusters were found in.
    pub data_frames: u64,
    /// Clusters found.
    pub clusters: u64,
    /// Faults and how it ended.
    pub counts: AcquisitionCounts,
    /// From its first frame's arrival to its last frame's clusters handed to the file (or its
    /// pushing into the pedestal); the file's final flush and rename are not counted.
    pub seconds: f64,
    /// Longest time from a frame's arrival to its clusters being written (or its pushing into
    /// the pedestal).
    pub worst_lag: Duration,
    /// From the first data frame's arrival to its clusters being written: how long the start
    /// of an acquisition holds its first clusters back (`None` without data frames).
    pub first_lag: Option<Duration>,
    /// Where the time went.
    pub timing: AcquisitionTiming,
    /// Device name (one word).
    pub device: String,
}

/// Where an acquisition's time went: the engine's phases, the cluster file's writer and its
/// commit, so a slow acquisition names its bottleneck.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AcquisitionTiming {
    /// From its first frame taken off the queue to its first data frame asked of the engine:
    /// the acquisition's set-up (the finder opened when the shape changed, the pedestal set,
    /// the cluster file created; the pedestal's own frames with
    /// [`PedestalPlan::FirstFrames`](super::PedestalPlan::FirstFrames)).
    pub setup: Duration,
    /// The engine's phases over the data frames ([`EngineStats`]: `waited_for_input` is time
    /// the finder waited for frames, i.e. the stream was the slower side).
    pub engine: EngineStats,
    /// The cluster file's writer threads ([`WriteStats`]: `waited` is time the finder's thread
    /// waited for a free buffer, i.e. the file system was the slower side).
    pub write: WriteStats,
    /// Writing the file's last bytes, syncing and renaming it after the last frame.
    pub commit: Duration,
}

impl AcquisitionSummary {
    /// Frames (pedestal and data) per second over [`AcquisitionSummary::seconds`].
    pub fn fps(&self) -> f64 {
        let frames = (self.pedestal_frames + self.data_frames) as f64;
        if self.seconds > 0.0 {
            frames / self.seconds
        } else {
            0.0
        }
    }
}

impl std::fmt::Display for AcquisitionSummary {
    /// `acquisition=3 kind=data file=out/run_3.clust frames=2000 pedestal_frames=0
    /// clusters=4661234 missing=0 sampled=0 incomplete=0 mismatched=0 malformed=0 dropped=0 restarts=0
    /// late=0 duplicates=0 end=end seconds=1.234 fps=1620.7 worst_lag_ms=12.3 first_lag_ms=1.1 peak_queue=5
    /// device=cpu` (`first_lag_ms=-` without data frames)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counts;
        write!(
            f,
            "acquisition={} kind={} file={} frames={} pedestal_frames={} clusters={} missing={} sampled={} incomplete={} mismatched={} malformed={} dropped={} restarts={} late={} duplicates={} end={} seconds={:.3} fps={:.1} worst_lag_ms={:.1} first_lag_ms={} peak_queue={} device={}",
            self.file_index,
            match self.kind {
                AcquisitionKind::Dark => "dark",
                AcquisitionKind::Data => "data",
                AcquisitionKind::Short => "short",
            },
            self.file
                .as_ref()
                .map_or_else(|| "-".to_string(), |p| p.display().to_string()),
            self.data_frames,
            self.pedestal_frames,
            self.clusters,
            c.missing,
            c.sampled,
            c.incomplete,
            c.mismatched,
            c.malformed,
            c.dropped,
            c.restarts,
            c.late,
            c.duplicates,
            c.ending.name(),
            self.seconds,
            self.fps(),
            self.worst_lag.as_secs_f64() * 1e3,
            self.first_lag.map_or_else(
                || "-".to_string(),
                |d| format!("{:.1}", d.as_secs_f64() * 1e3)
            ),
            c.peak_queue,
            self.device,
        )
    }
}

/// Totals over the whole run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamTotals {
    /// Acquisitions handled.
    pub acquisitions: u64,
    /// Data frames clusters were found in.
    pub frames: u64,
    /// Clusters found.
    pub clusters: u64,
}
