//! The run: acquisition after acquisition, each an input of the engine's session for its frame
//! shape ([`Session`]): the stream's policy (subscribing, dark acquisitions, the pedestal plan,
//! naming, commits, live callbacks) here, the finding there.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::commits::{Commits, Committing, create_writer};
use super::inbox::Inbox;
use super::live::{Callbacks, ImageUpdate, LiveSink};
use super::naming::{check_out_dir, commit_names, image_name};
use super::settings::{PedestalPlan, StreamSettings};
use super::summary::{AcquisitionKind, AcquisitionSummary, AcquisitionTiming, StreamTotals};
use crate::cluster::FrameClusters;
use crate::config::FinderConfig;
use crate::engine::EngineConfig;
use crate::engine::feeding::open_finder;
use crate::engine::imaging::{CubeSink, ImagingOutputs, ImagingSink};
use crate::engine::session::{RingPlan, Session};
use crate::engine::sink::{FnSink, Sink, Sinks};
use crate::error::{Error, Result};
use crate::io::FrameSource;
use crate::io::raw::Roi;
use crate::pedestal::Pedestal;
use crate::stream::inlet::Inlet;
use crate::stream::receiver::ReceiverConfig;
use crate::stream::source::{Acquisition, AcquisitionCounts, Ending, StreamEvent};

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
    // The finder, its ring and its pedestal, for the current frame shape: every acquisition
    // is an input of it.
    let mut session: Option<Session> = None;
    let mut saved = match &settings.pedestal {
        PedestalPlan::Fixed(p) => Some(p.clone()),
        _ => None,
    };
    if let Some(p) = &saved {
        // The shape is known: open the device before subscribing, so the first frames do not
        // wait for it (opening a GPU takes a good part of a second).
        let config = settings.finder.config(p.rows(), p.cols(), p.window());
        session = Some(open_session(settings, config, note)?);
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
        if session.as_ref().is_none_or(|s| {
            let c = s.finder().config();
            (c.rows, c.cols) != shape
        }) {
            if session.is_some() {
                note(&format!(
                    "acquisition {}: frames of {} x {}: the finder is reopened for them",
                    first.file_index, shape.0, shape.1
                ));
                if matches!(settings.pedestal, PedestalPlan::DarkAcquisitions(_)) {
                    saved = None;
                    dark_done = 0;
                }
            }
            // The old finder and its ring go first: both at once could be more than memory
            // holds.
            drop(session.take());
            session = Some(open_session(settings, config.clone(), note)?);
        }
        let Some(session) = session.as_mut() else {
            return Err(Error::Internal("no finder after opening one".into()));
        };
        let device = session
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
        let mut last_done: Option<std::time::Instant> = None;
        let mut committing: Option<Committing> = None;
        // Each chunk of pedestal frames: the lag of its last frame, and when it was done.
        let arrivals = acq.arrivals();
        let mut pushed = |numbers: &[u64]| {
            out.worst_lag = out
                .worst_lag
                .max(claim_lag(&arrivals, numbers.last().copied()));
            last_done = Some(std::time::Instant::now());
        };
        if dark {
            // Every frame of a dark acquisition into the pedestal, carried over from the dark
            // acquisitions before it.
            let mut pedestal = match saved.take() {
                Some(p) => p,
                None => Pedestal::new(shape.0, shape.1, config.pedestal_frames, config.precision)?,
            };
            out.pedestal_frames += session.add_dark(&mut acq, &mut pedestal, &mut pushed)?;
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
                // The acquisition's own first N frames.
                (PedestalPlan::FirstFrames, _) => {
                    out.pedestal_frames += session.learn_pedestal(&mut acq, &mut pushed)?;
                }
                (_, Some(p)) => session.start_from(p)?,
                (_, None) => return Err(Error::Internal("no pedestal to start from".into())),
            }
            if session.finder().is_ready() {
                match create_writer(&settings.out_dir, &first, &mut used, &report) {
                    Some((path, mut writer)) => {
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
                        let result = session.find_into(&mut acq, &mut Sinks(sinks));
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
                                session.discard(&mut acq)?;
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
                    None => session.discard(&mut acq)?,
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
        // The next acquisition's ring, allocated while no frames are coming (page-locked
        // memory on a GPU takes about 1 s per GiB) when this one's did not all come back.
        if settings
            .acquisitions
            .is_none_or(|k| totals.acquisitions < k)
        {
            session.ensure_ring()?;
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

/// A session for frames of `config`'s shape: the finder opened on the settings' device (the
/// note says which), its ring allocated now, while no frames are coming. The ring's chunk
/// follows the frame size ([`EngineConfig::for_frames`]: at most 96 MiB a chunk), never more
/// than `--chunk` frames: 64 chunks of 4000 x 4000 frames were 6 GiB.
fn open_session(
    settings: &StreamSettings,
    config: FinderConfig,
    note: &mut dyn FnMut(&str),
) -> Result<Session> {
    let engine = EngineConfig {
        chunk: settings
            .chunk
            .clamp(1, EngineConfig::for_frames(config.rows, config.cols).chunk),
        slots: 3,
        map: false,
    };
    let (finder, why) = open_finder(config, settings.device, settings.threads)?;
    note(&why);
    Session::with_finder(finder, why, engine, RingPlan::Kept)
}

/// The lag of the last frame pushed into a pedestal: the time since it arrived (`arrivals`:
/// the acquisition's, [`Acquisition::arrivals`]); clears the arrivals claimed.
fn claim_lag(arrivals: &Mutex<VecDeque<(u64, Instant)>>, last: Option<u64>) -> Duration {
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
