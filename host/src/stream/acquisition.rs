//! Live cluster finding, acquisition after acquisition: the pedestal of each, the finder, the
//! cluster file it is written to, and its summary.
//!
//! Per acquisition of the stream ([`run`]):
//!
//! 1. wait for its first frame; its header gives the frame shape (the finder is opened for
//!    it, or reopened when the shape changed), `fname` and `fileIndex` name the file;
//! 2. the pedestal: a dark acquisition ([`PedestalPlan::DarkAcquisitions`]: every frame of the
//!    first K acquisitions goes into it, and no file is written for them), a file
//!    ([`PedestalPlan::Fixed`]), or the acquisition's own first N frames
//!    ([`PedestalPlan::FirstFrames`]). With the first two, every data acquisition starts
//!    from that same pedestal, so its clusters are those `cluda find` gives with it;
//! 3. every further frame through the streaming engine ([`crate::engine::find_stream_into`]: the
//!    acquisition is its source, the cluster file its sink), with the frame's `frameNumber`
//!    as its number in the file;
//! 4. the file is committed (renamed into place) and the summary handed to the caller.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::header::{HeaderFault, ZmqHeader};
use super::inlet::Inlet;
use super::receiver::{Message, ReceiverConfig};
use super::source::{Acquisition, AcquisitionCounts, Ending, FaultKind, Reporter, StreamEvent};
use crate::cluster::FrameClusters;
use crate::config::FindOptions;
use crate::engine::feeding::{FedFinder, open_finder};
use crate::engine::imaging::{CubeSink, ImagingOutputs, ImagingSink};
use crate::engine::sink::{FnSink, Sink, Sinks};
use crate::engine::{EngineConfig, EngineStats, RingSlots, find_stream_into};
use crate::error::{Error, Result};
use crate::finder::ClusterFinder;
use crate::finder::select::DeviceChoice;
use crate::frames::Frames;
use crate::io::atomic::{MAX_SUFFIX, suffixed};
use crate::io::raw::Roi;
use crate::io::write_behind::{WriteBehind, WriteStats};
use crate::io::{AtomicFile, ClusterFileWriter, FrameSource};
use crate::pedestal::Pedestal;

/// Where each acquisition's pedestal comes from.
#[derive(Clone, Debug)]
pub enum PedestalPlan {
    /// A pedestal filled beforehand (e.g. from a file of dark frames): every acquisition
    /// starts from it.
    Fixed(Pedestal),
    /// The first K acquisitions are dark: all their frames fill the pedestal (and further
    /// acquisitions are taken as dark until it holds N frames); every later acquisition starts
    /// from it.
    DarkAcquisitions(u32),
    /// The first N frames of every acquisition (N = the finder's pedestal window).
    FirstFrames,
}

/// What to do with the stream.
#[derive(Clone, Debug)]
pub struct StreamSettings {
    /// Cluster size, threshold and precision (the frame shape is taken from the stream; with
    /// [`PedestalPlan::Fixed`] from the pedestal).
    pub finder: FindOptions,
    /// The pedestal window N of [`PedestalPlan::DarkAcquisitions`] and
    /// [`PedestalPlan::FirstFrames`] (a fixed pedestal has its own).
    pub pedestal_frames: u32,
    /// The device to find clusters on.
    pub device: DeviceChoice,
    /// CPU worker threads (all cores when `None`).
    pub threads: Option<usize>,
    /// Where the pedestal comes from.
    pub pedestal: PedestalPlan,
    /// Directory for the cluster files.
    pub out_dir: PathBuf,
    /// Stop after this many acquisitions (dark ones included); `None`: until stopped.
    pub acquisitions: Option<u64>,
    /// Frames per finder call.
    pub chunk: usize,
    /// Longest wait for more frames before a partial chunk goes to the finder.
    pub max_wait: Duration,
    /// End an acquisition when nothing came for this long without its end message (lost:
    /// a PUB drops it at its high-water mark like any frame); zero: wait for it forever.
    pub idle_end: Duration,
    /// An artificial delay per frame in the sink, to test what happens when cluda cannot keep
    /// up; zero normally.
    pub slow_sink: Duration,
    /// How frame numbers advance: every frame, every Nth (slsReceiver's `rx_zmqfreq`), or a
    /// stride inferred from each acquisition's first gaps (see [`super::sampling`]).
    pub sampling: super::sampling::Sampling,
    /// Eta interpolation of every data acquisition: a sub-pixel image beside its cluster file
    /// (`<name>.image.npy`), and/or one eta cube of every data acquisition (a live flat field).
    pub imaging: Option<StreamImaging>,
}

/// What `cluda stream --eta/--eta-out` makes of each data acquisition (see
/// [`crate::engine::imaging`]; on a GPU counted on the device).
#[derive(Clone, Debug)]
pub struct StreamImaging {
    /// Place photons through these maps into a sub-pixel image per acquisition, with this
    /// many sub-pixels per pixel.
    pub image: Option<(std::sync::Arc<crate::interpolation::Interpolator>, u32)>,
    /// Count every data acquisition's clusters into one eta cube with these axes, written to
    /// this file (and its `.json`) when the stream ends.
    pub cube: Option<(crate::interpolation::CubeAxes, PathBuf)>,
}

impl StreamSettings {
    /// Defaults for `finder` writing into `out_dir`: the device chosen automatically,
    /// pedestals from each acquisition's first 1000 frames, chunks of 64 frames (a ring of
    /// three, 61 MB of 400 x 400 frames, allocated before the first acquisition and kept
    /// while the frame shape stays: page-locked memory on a GPU takes about 1 s per GiB),
    /// partial chunks after 10 ms, acquisitions ended after 10 s without a message.
    pub fn new(finder: FindOptions, out_dir: &Path) -> Self {
        Self {
            finder,
            pedestal_frames: FindOptions::DEFAULT_PEDESTAL_FRAMES,
            device: DeviceChoice::Auto,
            threads: None,
            pedestal: PedestalPlan::FirstFrames,
            out_dir: out_dir.to_path_buf(),
            acquisitions: None,
            chunk: 64,
            max_wait: Duration::from_millis(10),
            idle_end: Duration::from_secs(10),
            slow_sink: Duration::ZERO,
            sampling: super::sampling::Sampling::Infer,
            imaging: None,
        }
    }
}

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
    /// [`PedestalPlan::FirstFrames`]).
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

/// What the caller gets while the stream runs.
pub struct Callbacks<'a> {
    /// Faults and "falling behind" reports (may be called from the engine's reader thread).
    pub report: Reporter,
    /// Notes (device chosen, pedestal progress) for a person.
    pub note: &'a mut dyn FnMut(&str),
    /// One summary per acquisition, when it is done.
    pub summary: &'a mut dyn FnMut(&AcquisitionSummary) -> Result<()>,
    /// Every data frame's clusters with the frame shape, after they were written (e.g. for
    /// plots).
    pub frame: &'a mut dyn FnMut((usize, usize), &FrameClusters<'_>),
    /// With a sub-pixel image per acquisition ([`StreamImaging::image`]): a live view of it,
    /// given a copy while the acquisition runs and its final image when it ended whole;
    /// `None`: no copies are made (the image is still written beside the cluster file).
    pub image: Option<LiveImage<'a>>,
}

/// A live view of each data acquisition's sub-pixel image (`cluda stream --eta --plot`).
pub struct LiveImage<'a> {
    /// Least time between two copies while an acquisition runs (the first one this long after
    /// its first data frame). A copy is asked for on the frame path and made off it: by the
    /// placement worker that counts the image on the host, or by the GPU finder between two
    /// chunks ([`crate::engine::imaging::ImagingSink::request_snapshot`]), so refreshing
    /// does not hold up the stream; each costs one copy of the image.
    pub every: Duration,
    /// Called with each copy as it comes, on the thread that visits frames (hand the image
    /// over, e.g. to a drawing thread), and with the final image, before the acquisition's
    /// summary.
    pub show: &'a mut dyn FnMut(ImageUpdate),
}

/// A data acquisition's sub-pixel image handed to a [`LiveImage`].
#[derive(Clone, Debug)]
pub struct ImageUpdate {
    /// The acquisition's `fileIndex`.
    pub file_index: u64,
    /// Its photons counted so far, or all of them when `done`.
    pub image: crate::interpolation::SubpixelImage,
    /// Whether this is the final image, the one written beside the cluster file.
    pub done: bool,
}

/// An acquisition's [`ImagingSink`] as the engine's sink, asking it for a copy of its image at
/// most every [`LiveImage::every`] while frames come and handing each copy to the live view.
/// A copy that fails is reported and ends the live view of this acquisition; its image and
/// clusters are not affected.
struct LiveSink<'s, 'a> {
    sink: &'s mut ImagingSink,
    view: Option<&'s mut LiveImage<'a>>,
    file_index: u64,
    report: Reporter,
    /// When the last copy was asked for (or the first frame came); `None` before it.
    since: Option<std::time::Instant>,
    /// A copy was asked for and has not come yet.
    waiting: bool,
}

impl LiveSink<'_, '_> {
    /// The live view's part of a frame: a copy that came is shown, a new one asked for when
    /// it is due.
    fn refresh(&mut self) -> Result<()> {
        let Some(view) = self.view.as_mut() else {
            return Ok(());
        };
        if self.waiting
            && let Some(image) = self.sink.take_snapshot()?
        {
            self.waiting = false;
            (view.show)(ImageUpdate {
                file_index: self.file_index,
                image,
                done: false,
            });
        }
        let now = std::time::Instant::now();
        let since = *self.since.get_or_insert(now);
        if !self.waiting && now.duration_since(since) >= view.every {
            self.since = Some(now);
            self.waiting = self.sink.request_snapshot()?;
        }
        Ok(())
    }
}

impl Sink for LiveSink<'_, '_> {
    fn begin(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.sink.begin(input, finder)
    }

    fn frame(&mut self, input: usize, clusters: &FrameClusters<'_>) -> Result<()> {
        self.sink.frame(input, clusters)?;
        if let Err(e) = self.refresh() {
            self.view = None;
            (self.report)(&StreamEvent::Output(format!(
                "acquisition {}: no more live copies of its sub-pixel image ({e}); the image itself is not affected",
                self.file_index
            )));
        }
        Ok(())
    }

    fn end(&mut self, input: usize, finder: &mut dyn ClusterFinder) -> Result<()> {
        self.sink.end(input, finder)
    }

    fn abandon(&mut self, input: usize, finder: &mut dyn ClusterFinder) {
        self.sink.abandon(input, finder)
    }
}

/// The stream's receiver with the message that starts the next acquisition.
struct Inbox {
    receiver: Inlet,
    pending: Option<Message>,
    /// Malformed messages between acquisitions, counted in the next one.
    stray: u64,
    /// Frames of impossible shapes between acquisitions, counted in the next one.
    stray_mismatched: u64,
}

impl Inbox {
    /// Waits for the first data frame of the next acquisition (kept as pending) and returns
    /// its header; `None` when `stop` is set first. End messages with no frames before them and
    /// unreadable messages are reported and skipped. `tick` is called at least every 50 ms
    /// while it waits (to finish what finished in the background).
    ///
    /// Frames that wait for parts (an endpoint is silent) do not keep an acquisition from
    /// starting beyond a stop request or `idle_end` of quiet on every endpoint: they are given
    /// up then, so the acquisition starts with them and reports them incomplete.
    fn next_acquisition(
        &mut self,
        stop: &AtomicBool,
        idle_end: Duration,
        report: &Reporter,
        tick: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Option<ZmqHeader>> {
        loop {
            tick()?;
            let stopping = stop.load(Ordering::SeqCst);
            if stopping && self.pending.is_none() && self.receiver.give_up_waiting() == 0 {
                return Ok(None);
            }
            for event in self.receiver.take_events() {
                report(&event.into());
            }
            let wait = if stopping {
                Duration::ZERO
            } else {
                Duration::from_millis(50)
            };
            let msg = match self.pending.take() {
                Some(m) => m,
                None => match self.receiver.next(wait)? {
                    Some(m) => m,
                    None if stopping => return Ok(None),
                    None => {
                        let quiet = self
                            .receiver
                            .last_heard()
                            .is_some_and(|t| t.elapsed() >= idle_end);
                        if !idle_end.is_zero() && quiet && self.receiver.waiting() > 0 {
                            self.receiver.give_up_waiting();
                        }
                        continue;
                    }
                },
            };
            match msg.header() {
                Ok(h) if h.is_data() => {
                    let (rows, cols) = h.rows_cols();
                    if rows == 0 || cols == 0 || rows > 65536 || cols > 65536 {
                        self.stray_mismatched += 1;
                        report(&StreamEvent::Fault {
                            kind: FaultKind::Mismatch,
                            message: format!(
                                "frame {}: shape [{}, {}] is not a frame cluda can process (1 to 65536 rows and columns); skipped",
                                h.number(),
                                h.shape[0],
                                h.shape[1]
                            ),
                        });
                        continue;
                    }
                    self.pending = Some(msg);
                    return Ok(Some(h));
                }
                Ok(_) => report(&StreamEvent::Fault {
                    kind: FaultKind::Malformed,
                    message: "an end-of-acquisition message with no frames before it; ignored"
                        .into(),
                }),
                Err(HeaderFault::Malformed(why) | HeaderFault::Mismatch(why)) => {
                    self.stray += 1;
                    report(&StreamEvent::Fault {
                        kind: FaultKind::Malformed,
                        message: format!(
                            "malformed message between acquisitions: {why}; skipped (counted in the next acquisition)"
                        ),
                    })
                }
            }
        }
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

/// Subscribes as `receiver` says (after opening the finder when the pedestal, and so the frame
/// shape, is known up front) and finds clusters in every acquisition it delivers until `stop` is set (the current
/// acquisition is then finished: its file written, its summary given) or
/// `settings.acquisitions` were handled.
///
/// # Errors
/// Opening the finder, reading the pedestal, writing a cluster file, or a frame number that
/// does not fit the cluster file's `i32` stop the run with an error naming it (the unfinished
/// file is removed). Faults of the stream itself are counted and reported, not errors.
pub fn run(
    receiver: ReceiverConfig,
    settings: &StreamSettings,
    stop: Arc<AtomicBool>,
    callbacks: Callbacks<'_>,
) -> Result<StreamTotals> {
    check_out_dir(&settings.out_dir)?;
    let Callbacks {
        report,
        note,
        summary,
        frame,
        image: mut live_image,
    } = callbacks;
    let mut finder: Option<Box<dyn FedFinder + Send>> = None;
    // The ring's chunk follows the frame size (EngineConfig::for_frames: at most 96 MiB a
    // chunk), never more than --chunk frames: 64 chunks of 4000 x 4000 frames were 6 GiB.
    let engine = |(rows, cols): (usize, usize)| EngineConfig {
        chunk: settings
            .chunk
            .clamp(1, EngineConfig::for_frames(rows, cols).chunk),
        slots: 3,
        map: false,
    };
    // The next acquisition's ring, allocated while no frames are coming (page-locked memory on
    // a GPU takes about 1 s per GiB): at start when the shape is known, then after each
    // acquisition.
    let mut ring: Option<RingSlots> = None;
    let mut saved = match &settings.pedestal {
        PedestalPlan::Fixed(p) => Some(p.clone()),
        _ => None,
    };
    if let Some(p) = &saved {
        // The shape is known: open the device before subscribing, so the first frames do not
        // wait for it (opening a GPU takes a good part of a second).
        let config = settings.finder.config(p.rows(), p.cols(), p.window());
        let (f, why) = open_finder(config, settings.device, settings.threads)?;
        note(&why);
        ring = Some(RingSlots::allocate(
            f.as_ref(),
            engine((p.rows(), p.cols())),
        )?);
        finder = Some(f);
    }
    let mut receiver = receiver;
    if let Some(p) = &saved {
        // Parts of frames are checked against the pedestal's frame shape.
        receiver.frame_shape = Some((p.rows(), p.cols()));
    }
    let receiver = Inlet::connect(receiver)?;
    let endpoint = receiver.describe();
    let mut inbox = Inbox {
        receiver,
        pending: None,
        stray: 0,
        stray_mismatched: 0,
    };
    note(&format!(
        "subscribed to {endpoint} (SUB); waiting for frames (a stop request finishes the current acquisition)"
    ));
    let mut dark_done = 0u32;
    let mut used = HashSet::new();
    // One eta cube over every data acquisition (`--eta-out`), written when the stream ends.
    let mut cube_sink = match settings.imaging.as_ref().and_then(|i| i.cube.as_ref()) {
        Some((axes, _)) => Some(CubeSink::new(axes.clone(), true)?),
        None => None,
    };
    // A chunk's frames for the pedestal (and for draining), kept from one acquisition to the
    // next while the shape stays: a new one would fault its pages in again.
    let mut buf: Vec<u16> = Vec::new();
    // The cluster file of the last data acquisition, committed while the next one starts.
    let mut commits = Commits::default();
    let mut totals = StreamTotals::default();
    // The stride an acquisition inferred and stated (not stated again by later ones).
    let mut stated_stride: Option<u64> = None;
    // The receiver ROIs already stated (each once).
    let mut rois_noted: HashSet<[i64; 4]> = HashSet::new();
    // The ROI a fixed pedestal of the whole frame is cut down to in `saved` (`None`: uncut).
    let mut saved_cut: Option<Roi> = None;
    while settings
        .acquisitions
        .is_none_or(|k| totals.acquisitions < k)
    {
        let Some(first) = inbox.next_acquisition(&stop, settings.idle_end, &report, &mut || {
            if commits.is_done() {
                commits.finish(&mut totals, &report, summary)?;
            }
            Ok(())
        })?
        else {
            break;
        };
        let taken = std::time::Instant::now();

        // The frames as sent (checked whole), the receiver ROI they are cut down to (as the
        // receiver's raw files hold them), and the shape clusters are found in.
        let fixed = match &settings.pedestal {
            PedestalPlan::Fixed(p) => Some(p),
            _ => None,
        };
        let whole = first.rows_cols();
        // Frames in parts (several ports) carry each port's own share of an ROI, not the
        // detector's: those are found whole (cluda reads no raw files of several ports with
        // an ROI either).
        let several = !inbox.receiver.config().more_endpoints.is_empty();
        let roi = stream_roi(first.rx_roi, whole).filter(|_| !several);
        let (sent, crop) = match (fixed, roi) {
            // A pedestal of the whole frame (cut down to the ROI) or of the ROI.
            (Some(p), Some(r)) if [whole, (r.rows(), r.cols())].contains(&(p.rows(), p.cols())) => {
                (whole, Some(r))
            }
            (Some(p), _) => ((p.rows(), p.cols()), None),
            (None, r) => (whole, r),
        };
        let shape = crop.map_or(sent, |r| (r.rows(), r.cols()));
        if let Some(p) = fixed {
            // The fixed pedestal as this acquisition's ROI needs it (pixels are independent:
            // cutting the state down is the pedestal of the frames cut down).
            let cut = crop.filter(|_| (p.rows(), p.cols()) == whole);
            if cut != saved_cut {
                saved = Some(match cut {
                    Some(r) => p.cropped(&r)?,
                    None => p.clone(),
                });
                saved_cut = cut;
            }
        }
        if let Some(sent_roi) = first.rx_roi
            && rois_noted.insert(sent_roi)
            && let Some(line) = roi_note(
                sent_roi,
                whole,
                crop,
                fixed.map(|p| (p.rows(), p.cols())),
                several,
            )
        {
            note(&format!("acquisition {}: {line}", first.file_index));
        }
        let window = match &settings.pedestal {
            PedestalPlan::Fixed(p) => p.window(),
            _ => settings.pedestal_frames,
        };
        let config = settings.finder.config(shape.0, shape.1, window);
        if finder
            .as_ref()
            .is_none_or(|f| (f.config().rows, f.config().cols) != shape)
        {
            if finder.is_some() {
                note(&format!(
                    "acquisition {}: frames of {} x {}: the finder is reopened for them",
                    first.file_index, shape.0, shape.1
                ));
                if matches!(settings.pedestal, PedestalPlan::DarkAcquisitions(_)) {
                    saved = None;
                    dark_done = 0;
                }
            }
            let (f, why) = open_finder(config.clone(), settings.device, settings.threads)?;
            note(&why);
            finder = Some(f);
        }
        let Some(finder) = finder.as_mut() else {
            return Err(Error::Internal("no finder after opening one".into()));
        };
        let device = finder
            .device()
            .split_whitespace()
            .next()
            .unwrap_or("?")
            .to_string();
        let dark = match settings.pedestal {
            // Dark until K were seen and the pedestal holds its N frames.
            PedestalPlan::DarkAcquisitions(k) => {
                dark_done < k || saved.as_ref().is_none_or(|p| !p.is_ready())
            }
            _ => false,
        };
        let mut acq = Acquisition::new(
            &mut inbox.receiver,
            &mut inbox.pending,
            sent,
            Arc::clone(&stop),
            Arc::clone(&report),
        );
        if let Some(r) = crop {
            acq.crop_to(r)?;
        }
        // Clusters are written in detector coordinates (moved by the ROI's corner).
        let origin = acq.origin();
        let mut shifted: Vec<u32> = Vec::new();
        acq.counts.malformed = std::mem::take(&mut inbox.stray);
        acq.counts.mismatched = std::mem::take(&mut inbox.stray_mismatched);
        acq.max_wait = settings.max_wait;
        acq.idle_end = settings.idle_end;
        acq.set_sampling(settings.sampling, stated_stride);
        if !dark {
            // A cluster file numbers frames with an i32: larger numbers are skipped as faults
            // before they reach the pedestal or the finder.
            acq.max_frame_number = i32::MAX as u64;
        }
        let mut out = AcquisitionSummary {
            file_index: first.file_index,
            kind: AcquisitionKind::Data,
            file: None,
            pedestal_frames: 0,
            data_frames: 0,
            clusters: 0,
            counts: AcquisitionCounts::default(),
            seconds: 0.0,
            worst_lag: Duration::ZERO,
            first_lag: None,
            timing: AcquisitionTiming::default(),
            device,
        };
        let pixels = shape.0 * shape.1;
        let mut last_done: Option<std::time::Instant> = None;
        let mut committing: Option<Committing> = None;
        let chunk = engine(shape).chunk;
        if buf.len() != chunk * pixels {
            // The old one freed first: both at once could be more than memory holds.
            buf.clear();
            buf.shrink_to_fit();
            buf = crate::memory::zeroed_vec(
                || format!("a chunk of {chunk} frames of {} x {}", shape.0, shape.1),
                chunk * pixels,
            )?;
        }
        let mut numbers = Vec::new();
        if dark {
            // Every frame of a dark acquisition into the pedestal, carried over from the dark
            // acquisitions before it.
            let mut pedestal = match saved.take() {
                Some(p) => p,
                None => Pedestal::new(shape.0, shape.1, config.pedestal_frames, config.precision)?,
            };
            loop {
                numbers.clear();
                let k = acq.fill(&mut buf, &mut numbers)?;
                if k == 0 {
                    break;
                }
                pedestal.push_frames(Frames::new(&buf[..k * pixels], k, shape.0, shape.1)?)?;
                out.pedestal_frames += k as u64;
                out.worst_lag = out.worst_lag.max(claim_lag(&acq, numbers.last().copied()));
                last_done = Some(std::time::Instant::now());
            }
            dark_done += 1;
            out.kind = AcquisitionKind::Dark;
            note(&format!(
                "dark acquisition {}: pedestal holds {} of its {} frames{}",
                first.file_index,
                pedestal.count(),
                pedestal.window(),
                if pedestal.is_ready() {
                    ""
                } else {
                    "; the next acquisition is taken as dark too"
                }
            ));
            saved = Some(pedestal);
        } else {
            // The pedestal this acquisition starts from.
            match (&settings.pedestal, &saved) {
                (PedestalPlan::FirstFrames, _) => {
                    finder.set_pedestal(Pedestal::new(
                        shape.0,
                        shape.1,
                        config.pedestal_frames,
                        config.precision,
                    )?)?;
                    while !finder.is_ready() && !acq.ended() {
                        numbers.clear();
                        let want = (config.pedestal_frames as u64 - out.pedestal_frames)
                            .min(chunk as u64) as usize;
                        let k = acq.fill(&mut buf[..want * pixels], &mut numbers)?;
                        if k == 0 {
                            break;
                        }
                        finder.push_pedestal(Frames::new(
                            &buf[..k * pixels],
                            k,
                            shape.0,
                            shape.1,
                        )?)?;
                        out.pedestal_frames += k as u64;
                        out.worst_lag = out.worst_lag.max(claim_lag(&acq, numbers.last().copied()));
                        last_done = Some(std::time::Instant::now());
                    }
                }
                (_, Some(p)) => finder.reset_pedestal(p)?,
                (_, None) => return Err(Error::Internal("no pedestal to start from".into())),
            }
            if finder.is_ready() {
                match create_writer(&settings.out_dir, &first, &mut used, &report) {
                    Some((path, mut writer)) => {
                        let arrivals = acq.arrivals();
                        let mut clusters = 0u64;
                        let mut lag = out.worst_lag;
                        let mut first_lag = None;
                        let slow = settings.slow_sink;
                        out.timing.setup = taken.elapsed();
                        let mut image_sink =
                            match settings.imaging.as_ref().and_then(|i| i.image.as_ref()) {
                                Some((maps, n)) => Some(ImagingSink::new(
                                    shape.0,
                                    shape.1,
                                    maps.clone(),
                                    None,
                                    None,
                                    ImagingOutputs {
                                        subpixels: Some(*n),
                                        photons: Vec::new(),
                                        claim: crate::io::atomic::Claim::NextFree,
                                    },
                                    true,
                                )?),
                                None => None,
                            };
                        let mut live = image_sink.as_mut().map(|sink| LiveSink {
                            sink,
                            view: live_image.as_mut(),
                            file_index: first.file_index,
                            report: Arc::clone(&report),
                            since: None,
                            waiting: false,
                        });
                        // The cluster file first, then the live image and the cube, then
                        // what the caller and the summary learn of the frame.
                        let file_name = path.display().to_string();
                        let mut write = FnSink(|_, fc: &FrameClusters<'_>| {
                            // Frames above i32::MAX were skipped by the source.
                            let n = fc.frame.to_file("stream", &file_name)?;
                            match origin {
                                (0, 0) => writer.write_frame(n, fc),
                                (dy, dx) => {
                                    writer.write_frame(n, &fc.shifted_into(dy, dx, &mut shifted)?)
                                }
                            }
                        });
                        let mut tell = FnSink(|_, fc: &FrameClusters<'_>| {
                            let number = fc.frame.get();
                            clusters += fc.len() as u64;
                            // The last acquisition's summary before this one's first frame
                            // reaches the caller (who may take a summary as the end of the
                            // frames before it, as the live plots do): its commit, which
                            // overlapped this acquisition's start, waited for.
                            commits.finish(&mut totals, &report, summary)?;
                            frame(shape, fc);
                            if let Ok(mut a) = arrivals.lock() {
                                while let Some(&(m, t)) = a.front() {
                                    if m != number {
                                        // Arrivals are claimed in order: an older one was a
                                        // pedestal frame.
                                        a.pop_front();
                                        continue;
                                    }
                                    let since = t.elapsed();
                                    lag = lag.max(since);
                                    first_lag.get_or_insert(since);
                                    a.pop_front();
                                    break;
                                }
                            }
                            if !slow.is_zero() {
                                std::thread::sleep(slow);
                            }
                            last_done = Some(std::time::Instant::now());
                            Ok(())
                        });
                        let mut sinks: Vec<&mut dyn Sink> = vec![&mut write];
                        if let Some(s) = live.as_mut() {
                            sinks.push(s);
                        }
                        if let Some(c) = cube_sink.as_mut() {
                            sinks.push(c);
                        }
                        sinks.push(&mut tell);
                        let result = find_stream_into(
                            finder.as_mut(),
                            &mut acq,
                            engine(shape),
                            &mut ring,
                            &mut Sinks(sinks),
                        );
                        drop(live);
                        if let (Ok(_), Some(img)) =
                            (&result, image_sink.as_ref().and_then(|s| s.image()))
                        {
                            let to = image_name(&path);
                            match crate::interpolation::files::write_image(
                                &to,
                                img,
                                crate::io::atomic::Claim::NextFree,
                            ) {
                                Ok(()) => note(&format!(
                                    "acquisition {}: wrote {}",
                                    first.file_index,
                                    to.display()
                                )),
                                Err(e) => report(&StreamEvent::Output(format!(
                                    "acquisition {}: the sub-pixel image {} could not be written: {e}",
                                    first.file_index,
                                    to.display()
                                ))),
                            }
                            // The final image to the live view, handed over: the sink is done.
                            if let (Some(view), Some(image)) = (
                                live_image.as_mut(),
                                image_sink.take().and_then(ImagingSink::into_image),
                            ) {
                                (view.show)(ImageUpdate {
                                    file_index: first.file_index,
                                    image,
                                    done: true,
                                });
                            }
                        }
                        match result {
                            Ok(stats) => {
                                out.timing.engine = stats;
                                // Committed on a thread of its own: the last writes, the sync
                                // and the rename take the file system's time, which the next
                                // acquisition does not wait for. A name that appeared since it
                                // was chosen is not replaced: the next free one is taken.
                                let names = commit_names(&path, &settings.out_dir, &first);
                                let thread = std::thread::Builder::new()
                                    .name("cluda-commit".into())
                                    .spawn(move || {
                                        let t = std::time::Instant::now();
                                        writer.commit_first(names).map(|(p, w)| (p, w, t.elapsed()))
                                    })
                                    .map_err(|e| Error::io(&path, e))?;
                                committing = Some(Committing {
                                    thread,
                                    path,
                                    frames: stats.frames,
                                    clusters,
                                    out: None,
                                });
                            }
                            Err(e @ (Error::Io { .. } | Error::Format { .. })) => {
                                // A file-system failure of this acquisition's file (a full
                                // disk, its directory gone): reported, the rest of the
                                // acquisition taken, and the stream goes on.
                                drop(writer);
                                report(&StreamEvent::Output(format!(
                                    "acquisition {}: {} could not be written ({e}); its clusters are lost (the unfinished temporary file was removed), the stream goes on",
                                    first.file_index,
                                    path.display()
                                )));
                                drain(&mut acq, &mut buf)?;
                            }
                            Err(e) => {
                                drop(writer);
                                note(&format!(
                                    "{} was not written (its unfinished temporary file was removed)",
                                    path.display()
                                ));
                                return Err(e);
                            }
                        };
                        out.worst_lag = lag;
                        out.first_lag = first_lag;
                    }
                    // Reported by create_writer: nowhere to write this acquisition's clusters.
                    None => drain(&mut acq, &mut buf)?,
                }
            } else {
                out.kind = AcquisitionKind::Short;
                // Drain what is left of it (it may still be open when the pedestal never filled
                // because frames stopped).
                note(&format!(
                    "acquisition {} ended after {} of the {} pedestal frames: no clusters, no file",
                    first.file_index, out.pedestal_frames, config.pedestal_frames
                ));
            }
        }
        // Whatever is left of the acquisition (a dark or short one that was stopped).
        acq.finish_gaps();
        if let Some(n) = acq.inferred_stride() {
            stated_stride = Some(n);
        }
        out.counts = acq.counts.clone();
        if out.counts.ending == Ending::Open {
            out.counts.ending = Ending::Stopped;
        }
        out.seconds = match (out.counts.first_arrival, last_done) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        totals.acquisitions += 1;
        // Summaries in order: the last acquisition's first (its commit waited for).
        commits.finish(&mut totals, &report, summary)?;
        match committing {
            Some(mut c) => {
                c.out = Some(out);
                commits.0 = Some(c);
            }
            None => summary(&out)?,
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if ring.is_none()
            && settings
                .acquisitions
                .is_none_or(|k| totals.acquisitions < k)
        {
            let c = finder.config();
            ring = Some(RingSlots::allocate(
                finder.as_ref(),
                engine((c.rows, c.cols)),
            )?);
        }
    }
    commits.finish(&mut totals, &report, summary)?;
    if let (Some(c), Some((_, path))) = (
        cube_sink,
        settings.imaging.as_ref().and_then(|i| i.cube.as_ref()),
    ) {
        let cube = c.into_cube();
        crate::interpolation::files::write_cube(
            path,
            &cube,
            "ADU",
            crate::io::atomic::Claim::Refuse,
        )?;
        note(&format!(
            "wrote the eta cube {} ({})",
            path.display(),
            cube.tally().summary()
        ));
    }
    Ok(totals)
}

/// The sub-pixel image beside cluster file `clust` (`run_3.clust` -> `run_3.image.npy`),
/// never an existing file: `run_3.image_2.npy`, ... instead.
fn image_name(clust: &Path) -> PathBuf {
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

/// The receiver ROI of a stream header's `rx_roi` (`[xmin, xmax, ymin, ymax]`, inclusive)
/// for frames of `rows x cols` as sent: `None` when it is unset (all -1), the whole frame (a
/// receiver of several ports sends each part's own extent, which assembly turns into the
/// whole frame's), or does not lie inside the frame (said by [`roi_note`]).
fn stream_roi(rx_roi: Option<[i64; 4]>, (rows, cols): (usize, usize)) -> Option<Roi> {
    let [xmin, xmax, ymin, ymax] = rx_roi?.map(|v| usize::try_from(v).ok());
    let roi = Roi {
        xmin: xmin?,
        xmax: xmax?,
        ymin: ymin?,
        ymax: ymax?,
    };
    (roi.fits(rows, cols) && (roi.rows(), roi.cols()) != (rows, cols)).then_some(roi)
}

/// What to say about a stream header's `rx_roi` (`[xmin, xmax, ymin, ymax]`, inclusive) for
/// frames of `rows x cols` as sent, `crop` the ROI they are cut down to ([`stream_roi`]) and
/// `pedestal` a fixed pedestal's shape, `several` whether the frames come in parts: `None`
/// when it is unset (all -1) or the whole frame.
fn roi_note(
    sent: [i64; 4],
    (rows, cols): (usize, usize),
    crop: Option<Roi>,
    pedestal: Option<(usize, usize)>,
    several: bool,
) -> Option<String> {
    let [xmin, xmax, ymin, ymax] = sent;
    let unset = sent.iter().all(|&v| v == -1);
    let whole = xmin == 0 && ymin == 0 && xmax == cols as i64 - 1 && ymax == rows as i64 - 1;
    if unset || whole {
        return None;
    }
    let said = format!(
        "the receiver's rx_roi is [{xmin}, {xmax}, {ymin}, {ymax}] (xmin, xmax, ymin, ymax) of \
         the whole {rows} x {cols} frame"
    );
    Some(match (crop, pedestal) {
        (Some(r), Some(p)) if p == (rows, cols) => format!(
            "{said}: each frame is cut down to the ROI's {} x {} pixels before clusters are \
             found, as the receiver's raw files hold it, and so is the pedestal of the whole \
             frame; clusters are written in detector coordinates (as `cluda find` writes them \
             from the receiver's files)",
            r.rows(),
            r.cols()
        ),
        (Some(r), _) => format!(
            "{said}: each frame is cut down to the ROI's {} x {} pixels before clusters are \
             found, as the receiver's raw files hold it; clusters are written in detector \
             coordinates (as `cluda find` writes them from the receiver's files)",
            r.rows(),
            r.cols()
        ),
        (None, _) if several => format!(
            "{said} as the first part says: frames that come in parts carry each port's own \
             share of the ROI, so the whole frame is found as sent, in detector coordinates \
             (`cluda find` refuses raw files of several ports with an ROI)"
        ),
        (None, Some((pr, pc))) => format!(
            "{said}, but the pedestal's frames are {pr} x {pc}, neither the whole frame nor \
             the ROI: frames are found as the pedestal's shape allows"
        ),
        (None, None) => format!(
            "{said}, which does not lie inside the frame: it is ignored and the whole frame \
             is found"
        ),
    })
}

/// A data acquisition's cluster file being committed on a thread of its own, with what its
/// summary needs once the commit is done.
struct Committing {
    /// The path taken (the planned one, or the next free one), what the writer did and how
    /// long the commit took.
    thread: std::thread::JoinHandle<Result<(PathBuf, WriteStats, Duration)>>,
    path: PathBuf,
    frames: u64,
    clusters: u64,
    /// The summary, but for the file and its counts (set when the acquisition is done).
    out: Option<AcquisitionSummary>,
}

/// The commit in flight (at most one: the last data acquisition's). Its summary is given when
/// it is done while no frames come, else before the next acquisition's first frame reaches
/// the caller, else when the next acquisition ends: summaries and frames reach the caller in
/// the acquisitions' order. Dropped with one in flight (an error stops the run), it waits for
/// it, so a file whose frames were all written is still put in place.
#[derive(Default)]
struct Commits(Option<Committing>);

impl Commits {
    /// Whether a commit is in flight and done.
    fn is_done(&self) -> bool {
        self.0.as_ref().is_some_and(|c| c.thread.is_finished())
    }

    /// Waits for the commit in flight, if any, and hands its acquisition's summary to
    /// `summary` (with the file, or without it and reported when the commit failed).
    fn finish(
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

/// The writer of an acquisition's cluster file: under its name ([`file_name`]), else (the
/// file system refuses it) under a fallback name built from the file index and the process id
/// alone, reported. `None`, reported, when neither can be created: the acquisition's clusters
/// then have nowhere to go, but the stream goes on.
fn create_writer(
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

/// A name for an acquisition's file that any file system takes: `cluda_<fileIndex>_<pid>`
/// (plus a counter), never one already used or on disk.
fn fallback_name(dir: &Path, first: &ZmqHeader, used: &mut HashSet<PathBuf>) -> PathBuf {
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

/// Takes (and discards) what is left of an acquisition whose clusters cannot be written, so
/// its frames do not start the next one.
fn drain(acq: &mut Acquisition<'_>, buf: &mut [u16]) -> Result<()> {
    let mut numbers = Vec::new();
    while !acq.ended() {
        numbers.clear();
        if acq.fill(buf, &mut numbers)? == 0 {
            break;
        }
    }
    Ok(())
}

/// The lag of the last frame pushed into a pedestal: the time since it arrived; clears the
/// arrivals claimed.
fn claim_lag(acq: &Acquisition<'_>, last: Option<u64>) -> Duration {
    let arrivals = acq.arrivals();
    let Ok(mut a) = arrivals.lock() else {
        return Duration::ZERO;
    };
    let mut lag = Duration::ZERO;
    while let Some(&(n, t)) = a.front() {
        lag = lag.max(t.elapsed());
        a.pop_front();
        if Some(n) == last {
            break;
        }
    }
    lag
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
fn commit_names(
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
